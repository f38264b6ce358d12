//! ByteDance mode in the endpoint (see [`crate::bytedance`]): probes when
//! a message arrives, their answers, the capability flag, and the per-peer
//! windows handed to the sender and the receiver policy. Every function
//! here returns at once when the mode is off.

use super::Endpoint;
use crate::bytedance::ratio::RatioMeter;
use crate::bytedance::{pause, probe, window};
use crate::timers::Timer;
use crate::{Nanos, RpcId};
use homa_wire::{Body, DataHeader, RttInfo, DATA_FLAG_BYTEDANCE, RATIO_UNKNOWN};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use tracing::trace;

/// ByteDance mode's endpoint-wide state.
#[derive(Debug)]
pub(super) struct ByteDance {
    /// Draws probe nonces (its own generator: RPC ids stay as they were).
    rng: ChaCha8Rng,
    /// Our unscheduled ratio as a receiver.
    pub ratio: RatioMeter,
    /// Incoming messages (peer, RPC id) filed with no grant window while
    /// their peer's grants were paused: refiled when the pause ends. At
    /// most one entry per RPC; entries of RPCs gone meanwhile are dropped
    /// then.
    pub(super) held: BTreeSet<(SocketAddr, u64)>,
}

impl ByteDance {
    pub fn new(seed: u64) -> ByteDance {
        ByteDance {
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x6279_7465_6461_6e63),
            ratio: RatioMeter::default(),
            held: BTreeSet::new(),
        }
    }
}

/// A ratio from the wire: thousandths, anything above 1000 is no value.
fn ratio_from_wire(v: u16) -> Option<u16> {
    (v <= 1000).then_some(v)
}

impl Endpoint {
    /// The DATA flag bit that tells peers we answer RTT probes.
    pub(super) fn bytedance_data_flag(&self) -> u8 {
        if self.config.bytedance.enabled {
            DATA_FLAG_BYTEDANCE
        } else {
            0
        }
    }

    /// What we tell a peer in a probe or an answer.
    fn our_rtt_info(&self, nonce: u64) -> RttInfo {
        RttInfo {
            nonce,
            link_mbps: self.config.link_mbps.min(u32::MAX as u64) as u32,
            unsched_ratio: self.bytedance.ratio.permille().unwrap_or(RATIO_UNKNOWN),
        }
    }

    /// Queues a probe or an answer for `peer` at the head of the control
    /// queue (it goes before anything else, and past a pacer holding a
    /// full-size packet: `poll_transmit_small`), at the top priority, which
    /// is the highest unscheduled level. The RPC id is 0: no RPC.
    fn queue_rtt_packet(&mut self, peer: SocketAddr, body: Body<'static>) {
        let top = self.config.top_priority();
        let id = RpcId { peer, id: 0 };
        self.sender
            .queue_control_front(self.local.port(), id, body, top, &mut self.metrics);
    }

    /// A new incoming message from `id.peer` began (its first accepted
    /// packet has header `h`; its sender may send `granted` bytes before a
    /// grant): measure our unscheduled ratio, note whether the peer runs
    /// the mode, and probe it if the interval has passed.
    pub(super) fn bytedance_new_message(
        &mut self,
        now: Nanos,
        id: RpcId,
        h: &DataHeader,
        granted: u32,
    ) {
        if !self.config.bytedance.enabled {
            return;
        }
        self.bytedance.ratio.record(granted, h.message_length);
        let Some(p) = self.peers.get_mut(&id.peer) else {
            return;
        };
        // The latest message decides: a peer that restarted without the
        // mode is never probed again.
        p.bytedance.probe.capable = h.flags & DATA_FLAG_BYTEDANCE != 0;
        self.maybe_probe(now, id.peer);
    }

    /// When the next probe to `peer` may go (ns), if it may be probed at
    /// all (it runs the mode and is proven).
    fn next_probe(&self, peer: SocketAddr) -> Option<Nanos> {
        let c = &self.config.bytedance;
        let p = self.peers.get(&peer)?;
        let bd = &p.bytedance;
        if !bd.probe.capable || !p.proven {
            return None;
        }
        let thresholds = bd.thresholds(c, self.config.link_mbps, self.config.max_payload());
        let interval = probe::interval(c.probe_interval_ns, &bd.rtt, thresholds.as_ref());
        Some(bd.probe.last_sent.map_or(0, |t| t.saturating_add(interval)))
    }

    /// Sends `peer` an RTT_PROBE if it may be probed and the interval has
    /// passed.
    fn maybe_probe(&mut self, now: Nanos, peer: SocketAddr) {
        if self.next_probe(peer).is_none_or(|at| now < at) {
            return;
        }
        let nonce = self.bytedance.rng.gen::<u64>();
        let Some(p) = self.peers.get_mut(&peer) else {
            return;
        };
        p.bytedance.probe.start(now, nonce);
        self.metrics.rtt_probes_sent += 1;
        trace!(%peer, "RTT_PROBE");
        let info = self.our_rtt_info(nonce);
        self.queue_rtt_packet(peer, Body::RttProbe(info));
    }

    /// An RTT_PROBE from `peer`: answered at once (echoing its nonce) if the
    /// mode is on and the peer is known and proven, at most
    /// `timer_packets_per_peer` answers per tick; else counted and dropped.
    pub(super) fn handle_rtt_probe(&mut self, now: Nanos, peer: SocketAddr, info: &RttInfo) {
        let tick = self.tick(now);
        let per_tick = self.config.timer_packets_per_peer;
        let p = match self.peers.get_mut(&peer) {
            Some(p) if self.config.bytedance.enabled && p.proven => p,
            _ => {
                self.metrics.rtt_invalid += 1;
                return;
            }
        };
        if !p.bytedance.probe.take_reply(tick, per_tick) {
            self.metrics.rtt_invalid += 1;
            return;
        }
        let bd = &mut p.bytedance;
        bd.probe.capable = true;
        bd.link_mbps = info.link_mbps;
        bd.unsched_ratio = ratio_from_wire(info.unsched_ratio);
        self.metrics.rtt_probes_answered += 1;
        let answer = self.our_rtt_info(info.nonce);
        self.queue_rtt_packet(peer, Body::RttResps(answer));
    }

    /// An RTT_RESPS from `peer`: an RTT sample if it echoes the nonce of our
    /// outstanding probe to that peer within `dead_peer_ns`; else counted
    /// and dropped.
    pub(super) fn handle_rtt_resps(&mut self, now: Nanos, peer: SocketAddr, info: &RttInfo) {
        let max_age = self.config.dead_peer_ns();
        let weight = self.config.bytedance.rtt_ewma_weight;
        let window_ns = self.config.bytedance.rtt_min_window_ns;
        let p = match self.peers.get_mut(&peer) {
            Some(p) if self.config.bytedance.enabled => p,
            _ => {
                self.metrics.rtt_invalid += 1;
                return;
            }
        };
        let bd = &mut p.bytedance;
        match bd.probe.answer(info.nonce, now, max_age) {
            Ok(rtt) => {
                bd.rtt.sample(now, rtt, weight, window_ns);
                bd.link_mbps = info.link_mbps;
                bd.unsched_ratio = ratio_from_wire(info.unsched_ratio);
                bd.probe.capable = true;
                self.metrics.rtt_responses += 1;
                trace!(%peer, rtt, recent = bd.rtt.recent_ns, min = bd.rtt.min_ns, "RTT_RESPS");
                // A sample at or below rtt_high ends a pause at once.
                if self.paused_until(now, peer).is_none() && self.resume_grants(now, peer) {
                    self.schedule_grants(now);
                }
            }
            Err(_) => self.metrics.rtt_invalid += 1,
        }
    }

    /// Unscheduled bytes of a new `len`-byte message to `peer`: the sender
    /// policy's, or in ByteDance mode, for a peer that runs it and has been
    /// measured, the peer's window (whole packets). Incast control's small
    /// limit wins over both.
    pub(super) fn unscheduled_for(&mut self, peer: SocketAddr, len: u32, incast: bool) -> u32 {
        let base = self
            .sender
            .policy
            .unscheduled_bytes(&self.config, peer, len, incast);
        if !self.config.bytedance.enabled || incast {
            return base;
        }
        let idle = self.sender.policy.peek().is_none();
        let (local, payload) = (self.config.link_mbps, self.config.max_payload().max(1));
        let Some(p) = self.peers.get_mut(&peer) else {
            return base;
        };
        let bd = &mut p.bytedance;
        if !bd.probe.capable {
            return base;
        }
        let Some(w) = bd.unscheduled_window(&self.config.bytedance, local, payload, idle) else {
            return base;
        };
        if w != bd.last_unsched_window {
            self.metrics.bytedance_window_changes += (bd.last_unsched_window != 0) as u64;
            bd.last_unsched_window = w;
        }
        window::round_up(w, payload).min(len)
    }

    /// The grant window for `peer`'s messages in ByteDance mode at `now`
    /// (see [`crate::bytedance::PeerState::grant_window`]); `None`: the
    /// policy's.
    pub(super) fn bytedance_grant_window(&self, now: Nanos, peer: SocketAddr) -> Option<u32> {
        if !self.config.bytedance.enabled {
            return None;
        }
        let p = self.peers.get(&peer)?;
        if !p.bytedance.probe.capable {
            return None;
        }
        p.bytedance.grant_window(
            &self.config.bytedance,
            self.config.link_mbps,
            self.config.max_payload(),
            now,
            self.pause_stale_ns(),
        )
    }

    /// How old a sample may be and still pause grants (ns):
    /// `grant_pause_stale_ns`, at most `dead_peer_ns` (an older answer is
    /// not a sample at all).
    fn pause_stale_ns(&self) -> Nanos {
        let c = &self.config;
        c.bytedance
            .grant_pause_stale_ns
            .min(c.dead_peer_ns())
            .max(1)
    }

    /// Until when `peer`'s grants are paused at `now`, if they are (mode
    /// on, `no_grants_above_high`, a capable peer).
    fn paused_until(&self, now: Nanos, peer: SocketAddr) -> Option<Nanos> {
        let c = &self.config;
        let p = self.peers.get(&peer)?;
        if !c.bytedance.enabled || !p.bytedance.probe.capable {
            return None;
        }
        p.bytedance.paused_until(
            &c.bytedance,
            c.link_mbps,
            c.max_payload(),
            now,
            self.pause_stale_ns(),
        )
    }

    /// RPC `id`'s incoming message was filed with no grant window (its
    /// peer's grants are paused): remember it, and file the peer's pause
    /// timer if none is filed.
    pub(super) fn hold_for_pause(&mut self, now: Nanos, id: RpcId) {
        self.bytedance.held.insert((id.peer, id.id));
        if self
            .peers
            .get(&id.peer)
            .is_some_and(|p| p.bytedance.pause_timer.is_none())
            && self.arm_pause_timer(now, id.peer)
        {
            self.metrics.bytedance_grant_pauses += 1;
        }
    }

    /// Files `peer`'s pause timer for its next probe or the pause's
    /// expiry, whichever is first, if it is paused. True if filed.
    fn arm_pause_timer(&mut self, now: Nanos, peer: SocketAddr) -> bool {
        let Some(until) = self.paused_until(now, peer) else {
            return false;
        };
        let at = pause::next_wake(now, until, self.next_probe(peer));
        let Some(p) = self.peers.get_mut(&peer) else {
            return false;
        };
        let old = p.bytedance.pause_timer.take();
        let at = self.timers.set(Timer::GrantPause(peer), old, at);
        p.bytedance.pause_timer = Some(at);
        true
    }

    /// `peer`'s pause timer, filed for `at`, came: probe the peer if due
    /// and look again later while the pause lasts, or end it. True if
    /// messages were refiled (grants must be decided).
    pub(super) fn grant_pause_timer(&mut self, now: Nanos, peer: SocketAddr, at: Nanos) -> bool {
        let stale = self.pause_stale_ns();
        let c = &self.config;
        match self.peers.get_mut(&peer) {
            // Another deadline is filed: this one is out of date.
            Some(p) if p.bytedance.pause_timer.is_some_and(|t| t != at) => return false,
            Some(p) => {
                p.bytedance.pause_timer = None;
                let bd = &p.bytedance;
                // Still paused had the latest sample been taken now: it
                // ended because that sample is stale.
                let last = bd.rtt.last_at;
                let (mbps, payload) = (c.link_mbps, c.max_payload());
                if bd
                    .paused_until(&c.bytedance, mbps, payload, now, stale)
                    .is_none()
                    && bd
                        .paused_until(&c.bytedance, mbps, payload, last, stale)
                        .is_some()
                {
                    self.metrics.bytedance_stale_resumes += 1;
                }
            }
            None => {}
        }
        if self.paused_until(now, peer).is_none() {
            return self.resume_grants(now, peer);
        }
        // A paused peer may send no new message, which is what draws
        // probes otherwise: probe it from here so a newer sample comes.
        self.maybe_probe(now, peer);
        self.arm_pause_timer(now, peer);
        false
    }

    /// `peer`'s grants are no longer paused: refile its held messages with
    /// their window back. True if any was held.
    fn resume_grants(&mut self, now: Nanos, peer: SocketAddr) -> bool {
        if let Some(p) = self.peers.get_mut(&peer) {
            self.timers
                .cancel(Timer::GrantPause(peer), p.bytedance.pause_timer.take());
        }
        let ids: Vec<u64> = self
            .bytedance
            .held
            .range((peer, 0)..=(peer, u64::MAX))
            .map(|&(_, id)| id)
            .collect();
        for &id in &ids {
            self.bytedance.held.remove(&(peer, id));
            self.after_change(now, RpcId { id, peer });
        }
        !ids.is_empty()
    }

    /// The measured unscheduled ratio (‰) the priority split follows in
    /// ByteDance mode, once enough messages were measured; `None`: the
    /// mode is off or the ratio is not known yet (Homa's rule applies).
    pub(super) fn bytedance_split_ratio(&self) -> Option<u16> {
        if !self.config.bytedance.enabled {
            return None;
        }
        self.bytedance.ratio.settled_permille()
    }

    /// ByteDance mode's view of `peer`, if we keep state for it (for tests
    /// and diagnostics).
    pub fn bytedance_peer(&self, peer: SocketAddr) -> Option<crate::bytedance::PeerState> {
        self.peers.get(&peer).map(|p| p.bytedance)
    }

    /// ByteDance mode's view of every peer we keep state for, in address
    /// order (for experiments that compare it with the true paths).
    pub fn bytedance_peers(&self) -> Vec<(SocketAddr, crate::bytedance::PeerState)> {
        let mut v: Vec<_> = self.peers.iter().map(|(a, p)| (a, p.bytedance)).collect();
        v.sort_unstable_by_key(|(a, _)| *a);
        v
    }

    /// Our unscheduled ratio as a receiver (‰), once measured (ByteDance
    /// mode only).
    pub fn unsched_ratio(&self) -> Option<u16> {
        self.bytedance.ratio.permille()
    }
}
