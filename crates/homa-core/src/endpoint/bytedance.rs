//! ByteDance mode in the endpoint (see [`crate::bytedance`]): probes when
//! a message arrives, their answers, the capability flag, and the per-peer
//! windows handed to the sender and the receiver policy. Every function
//! here returns at once when the mode is off.

use super::Endpoint;
use crate::bytedance::ratio::RatioMeter;
use crate::bytedance::{probe, window};
use crate::{Nanos, RpcId};
use homa_wire::{Body, DataHeader, RttInfo, DATA_FLAG_BYTEDANCE, RATIO_UNKNOWN};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::net::SocketAddr;
use tracing::trace;

/// ByteDance mode's endpoint-wide state.
#[derive(Debug)]
pub(super) struct ByteDance {
    /// Draws probe nonces (its own generator: RPC ids stay as they were).
    rng: ChaCha8Rng,
    /// Our unscheduled ratio as a receiver.
    pub ratio: RatioMeter,
}

impl ByteDance {
    pub fn new(seed: u64) -> ByteDance {
        ByteDance {
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x6279_7465_6461_6e63),
            ratio: RatioMeter::default(),
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
        let c = &self.config.bytedance;
        let (local, payload) = (self.config.link_mbps, self.config.max_payload());
        let Some(p) = self.peers.get_mut(&id.peer) else {
            return;
        };
        let bd = &mut p.bytedance;
        // The latest message decides: a peer that restarted without the
        // mode is never probed again.
        bd.probe.capable = h.flags & DATA_FLAG_BYTEDANCE != 0;
        if !bd.probe.capable || !p.proven {
            return;
        }
        let thresholds = bd.thresholds(c, local, payload);
        let interval = probe::interval(c.probe_interval_ns, &bd.rtt, thresholds.as_ref());
        if !bd.probe.due(now, interval) {
            return;
        }
        let nonce = self.bytedance.rng.gen::<u64>();
        bd.probe.start(now, nonce);
        self.metrics.rtt_probes_sent += 1;
        trace!(peer = %id.peer, "RTT_PROBE");
        let info = self.our_rtt_info(nonce);
        self.queue_rtt_packet(id.peer, Body::RttProbe(info));
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
                bd.rtt.sample(rtt, weight);
                bd.link_mbps = info.link_mbps;
                bd.unsched_ratio = ratio_from_wire(info.unsched_ratio);
                bd.probe.capable = true;
                self.metrics.rtt_responses += 1;
                trace!(%peer, rtt, recent = bd.rtt.recent_ns, min = bd.rtt.min_ns, "RTT_RESPS");
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

    /// The grant window for `peer`'s messages in ByteDance mode (see
    /// [`crate::bytedance::PeerState::grant_window`]); `None`: the policy's.
    pub(super) fn bytedance_grant_window(&self, peer: SocketAddr) -> Option<u32> {
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
        )
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
