//! Timeouts: every RPC that waits on its peer has its own deadline in the
//! endpoint's timer table, so a tick costs O(log n) per RPC that is due, not
//! a scan of every RPC and peer. When an RPC's silence lasts too long it
//! asks again (RESEND for each missing range, up to `resend_gaps`, with its
//! latest GRANT repeated; a probe; or NEED_ACK), at most
//! `timer_packets_per_peer` packets per peer per tick; after
//! `timeout_resends` unanswered rounds it gives up.

use super::{unproven, Endpoint};
use crate::event::{RpcError, RpcId};
use crate::rpc::{Phase, Rpc, Wait};
use crate::timers::{Timer, TimerTable};
use crate::{Config, Nanos};
use homa_wire::Body;
use tracing::trace;

/// Timer rounds a server RPC gets before it gives up when its client has
/// never answered anything we sent (see `Peer::proven`); they are silent.
/// (A fully sent response is then kept a while longer, still silent: see
/// `unproven`.)
pub(super) const UNPROVEN_ROUNDS: u32 = 2;

/// Most ticks between two GRANTs a probe repeats for an incoming message
/// whose grants we withhold (Linux aborts an RPC silent for 100 ticks).
pub(super) const KEEPALIVE_TICKS: u32 = 40;

/// When a waiting RPC's next round is due.
pub(super) fn due(config: &Config, rpc: &Rpc) -> Nanos {
    due_after(config, rpc, rpc.wait() == Some(Wait::Ack))
}

/// [`due`] of an RPC known to wait for `wait` (`rpc.wait()`, worked out
/// by the caller).
pub(super) fn due_for(config: &Config, rpc: &Rpc, wait: Wait) -> Nanos {
    due_after(config, rpc, wait == Wait::Ack)
}

/// [`due`], given whether the RPC waits for an ack.
fn due_after(config: &Config, rpc: &Rpc, ack: bool) -> Nanos {
    let first = if ack {
        config.need_ack_ticks
    } else {
        config.resend_ticks
    };
    let ticks = if rpc.unanswered == 0 {
        first
    } else {
        first + rpc.unanswered * config.resend_interval
    };
    on_tick(config, rpc.last_heard + ticks as u64 * config.tick_ns)
}

/// Files RPC `id`'s silence check at `at`: among the lenient timers while
/// it waits only for the ack of its response (`Rpc::lenient_wait`).
pub(super) fn file_rpc_timer(timers: &mut TimerTable, id: RpcId, rpc: &mut Rpc, at: Nanos) {
    rpc.timer = Some(timers.set_rpc(id, at, rpc.lenient_wait()));
}

/// `t` rounded up to a tick boundary: RPC timers fire together at ticks, so
/// a driver wakes once per tick however many RPCs wait (as Linux's timer).
pub(super) fn on_tick(config: &Config, t: Nanos) -> Nanos {
    t.div_ceil(config.tick_ns).saturating_mul(config.tick_ns)
}

impl Endpoint {
    /// When [`Endpoint::handle_timeout`] should next run, if ever.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        // (Remembered acks expire in order; their earliest expiry is the one
        // deadline kept outside the table.)
        match (self.timers.next(), self.acked.next_expiry()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The earliest deadline that must not be overslept (an RPC's silence
    /// check, the receiver policy's, a grant pause's end), or `None`.
    /// Every deadline before it that [`Endpoint::poll_timeout`] gives may
    /// be served a little late (a few milliseconds: flushing owed acks,
    /// forgetting idle peers, recomputing the cutoffs, expiring the
    /// at-most-once memory), e.g. by a kernel timeout of whole jiffies
    /// instead of a precise sleep.
    pub fn poll_timeout_strict(&self) -> Option<Nanos> {
        self.timers.next_strict()
    }

    /// Runs the timers that are due: loss detection, RESENDs, probes,
    /// NEED_ACKs, giving up on silent peers, ack flushing and forgetting idle
    /// peers. Call at or after [`Endpoint::poll_timeout`]; calling early is
    /// harmless.
    pub fn handle_timeout(&mut self, now: Nanos) {
        self.run_timers(now, false);
    }

    /// Like [`Endpoint::handle_timeout`], for a driver that has packets
    /// waiting that it could not process yet (its socket did not drain,
    /// e.g. under a flood). Packets from proven peers may be among them, so
    /// their RPCs' silence is not judged now: their rounds move to the next
    /// tick. RPCs of peers that never answered anything (the spoofed
    /// sources of a flood) are judged as usual, so they do not pile up
    /// while the driver is behind.
    pub fn handle_timeout_backlogged(&mut self, now: Nanos) {
        self.run_timers(now, true);
    }

    fn run_timers(&mut self, now: Nanos, backlogged: bool) {
        self.acked.expire(now);
        let mut grants_due = false;
        while let Some((at, timer)) = self.timers.pop_due(now) {
            match timer {
                Timer::Rpc(id) => grants_due |= self.rpc_timer(now, id, backlogged),
                Timer::Acks(peer) => {
                    if let Some(p) = self.peers.get_mut(&peer) {
                        p.acks_timer = None;
                    }
                    self.flush_acks(now, peer, 0);
                }
                Timer::PeerSweep => {
                    self.sweep_timer = None;
                    self.peers.sweep(now, self.config.peer_idle_ns);
                    self.arm_sweep(now);
                }
                Timer::Policy => {
                    self.receiver.policy_timer = None;
                    grants_due = true;
                }
                Timer::Cutoffs => {
                    self.receiver.cutoffs_timer = None;
                    let ratio = self.bytedance_split_ratio();
                    if self.receiver.update_cutoffs(&self.config, ratio) {
                        self.metrics.cutoff_updates += 1;
                    }
                }
                Timer::GrantPause(peer) => grants_due |= self.grant_pause_timer(now, peer, at),
            }
        }
        if grants_due {
            self.schedule_grants(now);
        }
    }

    /// Files the idle-peer sweep for when the longest-idle peer expires, if
    /// any peer is idle and no sweep is filed.
    pub(super) fn arm_sweep(&mut self, now: Nanos) {
        if self.sweep_timer.is_some() {
            return;
        }
        if let Some(since) = self.peers.oldest_idle() {
            let at = (since + self.config.peer_idle_ns).max(now);
            self.sweep_timer = Some(self.timers.set(Timer::PeerSweep, None, at));
        }
    }

    /// An RPC's deadline came. Returns true if it freed grant budget.
    fn rpc_timer(&mut self, now: Nanos, id: RpcId, backlogged: bool) -> bool {
        let Some(rpc) = self.rpcs.get_mut(&id) else {
            return false;
        };
        rpc.timer = None;
        let Some(wait) = rpc.wait() else {
            // Not waiting on the peer: re-armed when it starts waiting.
            return false;
        };
        let at = due(&self.config, rpc);
        if now < at {
            // There was progress since the timer was filed.
            file_rpc_timer(&mut self.timers, id, rpc, at);
            return false;
        }
        // While the downlink is busy, bytes we granted are most likely
        // queued behind that traffic, not lost: busy ticks do not count as
        // silence for a message waiting for them.
        if rpc.phase.msgin().is_some_and(|m| m.outstanding() > 0) {
            if let Some(busy) = self
                .receiver
                .busy_since(rpc.last_heard, self.config.tick_ns)
            {
                rpc.last_heard = busy;
                let at = due(&self.config, rpc);
                if now < at {
                    file_rpc_timer(&mut self.timers, id, rpc, at);
                    self.metrics.timeouts_postponed_busy += 1;
                    return false;
                }
            }
        }
        // A server RPC from a peer that never answered anything we sent
        // (e.g. the spoofed source of a first packet) gets few rounds: each
        // would be a packet to an address that may never have sent one.
        let proven = id.is_client() || self.peers.get(&id.peer).is_some_and(|p| p.proven);
        if backlogged && proven {
            let rpc = self.rpcs.get_mut(&id).expect("present");
            let next = on_tick(&self.config, now + self.config.tick_ns);
            file_rpc_timer(&mut self.timers, id, rpc, next);
            return false;
        }
        let limit = if proven {
            self.config.timeout_resends
        } else {
            self.config.timeout_resends.min(UNPROVEN_ROUNDS)
        };
        // An ICMP destination-unreachable for another RPC with this peer,
        // and nothing heard from the peer since (`handle_unreachable`).
        let unreachable = self
            .peers
            .get(&id.peer)
            .and_then(|p| p.unreachable_since)
            .is_some();
        let rpc = self.rpcs.get_mut(&id).expect("present");
        if rpc.unanswered >= limit || unreachable {
            // A fully sent response of an unproven client is kept (memory
            // only) while the client may still ask for it: its RESEND
            // proves it and gets the response (`unproven`).
            if !proven && !unreachable && rpc.lenient_wait_for(wait) {
                let until = unproven::kept_until(&self.config, rpc);
                if now < until {
                    self.keep_response(now, id, until);
                    return false;
                }
            }
            return self.give_up(now, id, wait);
        }
        if !proven {
            // Silent: a RESEND to the spoofed source of a flood would cost
            // as much as the flood. A real client that lost the rest of its
            // request probes for the response; its probe proves it, and the
            // next round asks for the missing bytes.
            rpc.unanswered += 1;
            self.metrics.silent_rounds += 1;
            let next = due(&self.config, rpc).max(on_tick(&self.config, now + self.config.tick_ns));
            file_rpc_timer(&mut self.timers, id, rpc, next);
            return false;
        }
        let tick = now / self.config.tick_ns;
        let per_peer = self.config.timer_packets_per_peer;
        let slot = match rpc.slot.take() {
            Some(t) if t <= tick => tick,
            _ => self
                .peers
                .get_mut(&id.peer)
                .map_or(tick, |p| p.reserve_timer_slot(tick, per_peer)),
        };
        let rpc = self.rpcs.get_mut(&id).expect("present");
        if slot > tick {
            // The peer has had its share of timer packets for this tick:
            // the round goes out in the slot reserved for it.
            self.metrics.timer_rounds_deferred += 1;
            rpc.slot = Some(slot);
            let at = slot * self.config.tick_ns;
            file_rpc_timer(&mut self.timers, id, rpc, at);
            return false;
        }
        // A client RPC's server that sent us anything since this RPC's last
        // round is alive, only busy: the round does not count towards
        // giving up (a busy server answers some RESENDs late). Server RPCs
        // count only their own packets, so a client cannot keep them alive
        // with packets for other RPCs.
        let interval = self.config.resend_interval as u64 * self.config.tick_ns;
        let peer_alive = id.is_client()
            && self
                .peers
                .get(&id.peer)
                .is_some_and(|p| p.last_heard + interval > now);
        let rpc = self.rpcs.get_mut(&id).expect("present");
        if peer_alive {
            rpc.heard(now);
        } else {
            rpc.unanswered += 1;
        }
        // The next round comes `resend_interval` ticks after this one even
        // when this one ran late (a driver descheduled for a while): the
        // schedule counts from the last sign of life, so after a late round
        // it would otherwise fire every tick until it caught up, and a
        // stall of a few tens of milliseconds would cut the patience of
        // `timeout_resends` rounds to a fraction. (On time, both agree.)
        let next = due(&self.config, rpc).max(on_tick(
            &self.config,
            now + interval.max(self.config.tick_ns),
        ));
        file_rpc_timer(&mut self.timers, id, rpc, next);
        // (`timeouts` counts the rounds that ask for data or probe, as
        // before; NEED_ACKs have their own counter.)
        self.metrics.timeouts += (wait != Wait::Ack) as u64;
        match wait {
            Wait::Ack => {
                if !self.stream_handshake_round(id) {
                    self.metrics.need_acks_sent += 1;
                    self.queue_control(id, Body::NeedAck);
                }
            }
            Wait::Data => {
                let m = rpc.phase.msgin().expect("waits for data");
                let gaps = m.gaps(self.config.resend_gaps as usize);
                // Repeat our latest grant: it repairs a lost GRANT (a
                // RESEND never grants).
                // (In ByteDance mode a sender's allowance is larger than
                // what it sends unscheduled, so only the message's own
                // unscheduled prefix tells our grants apart.)
                let allowance = if self.config.bytedance.enabled {
                    m.unscheduled
                } else {
                    self.receiver.initial_grant(m.length, u32::MAX, 0)
                };
                let grant = (m.granted > allowance).then_some((m.granted, m.priority));
                for (s, e) in gaps {
                    trace!(%id, s, e, "RESEND");
                    self.metrics.resends_requested += 1;
                    self.queue_resend(id, s, e - s);
                }
                if let Some((offset, priority)) = grant {
                    self.queue_control(id, Body::Grant { offset, priority });
                }
            }
            Wait::Response | Wait::Probe => {
                let (offset, length) = rpc.resend_range(wait);
                // A probe for an incoming message repeats our grant now and
                // then: Linux counts only DATA, GRANT and BUSY as signs of
                // life of an RPC (homa_dispatch_pkts), and a Linux sender
                // silent for `timeout_ticks` (100 ms) aborts it
                // (homa_timer_check_rpc), however many RESENDs it got. Every
                // round whose number is a multiple of `KEEPALIVE_TICKS /
                // resend_interval`: about every 40 ticks, so that the
                // probes of many withheld messages do not double.
                let every = (KEEPALIVE_TICKS / self.config.resend_interval.max(1)).max(1);
                let keepalive = match (wait, rpc.phase.msgin()) {
                    (Wait::Probe, Some(m)) if m.granted > 0 && rpc.probes % every == 0 => {
                        Some((m.granted.min(m.length), m.priority))
                    }
                    _ => None,
                };
                rpc.probes += (wait == Wait::Probe) as u32;
                self.metrics.resends_requested += 1;
                self.queue_resend(id, offset, length);
                if let Some((offset, priority)) = keepalive {
                    self.queue_control(id, Body::Grant { offset, priority });
                }
            }
        }
        false
    }

    /// The peer left `timeout_resends` rounds unanswered.
    fn give_up(&mut self, now: Nanos, id: RpcId, wait: Wait) -> bool {
        trace!(%id, ?wait, "giving up on a silent peer");
        self.metrics.peers_dead += 1;
        if self.stream_give_up(now, id) {
            return true;
        }
        if id.is_client() {
            self.fail_client_rpc(now, id, RpcError::PeerDead);
            return true;
        }
        let Some(rpc) = self.remove_rpc(now, id) else {
            return false;
        };
        match rpc.phase {
            Phase::Responding { .. } if wait == Wait::Ack => {
                // The response went out whole; the client never acked.
                self.metrics.need_ack_gave_up += 1;
            }
            _ => self.metrics.server_rpcs_discarded += 1,
        }
        if matches!(rpc.phase, Phase::InService | Phase::Responding { .. }) {
            // The application has seen this request. If the client was
            // alive after all and restarts it, it must not run twice.
            self.remember_done(now, id);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::incoming::InMessage;
    use crate::outgoing::OutMessage;
    use crate::rpc::Phase;
    use bytes::Bytes;

    /// RPCs in each phase: a message not sent yet and one fully sent, a
    /// request partly received, one in service.
    fn rpcs() -> Vec<Rpc> {
        let out = |sent: bool| {
            let mut m = OutMessage::new(Bytes::from(vec![7; 3000]), 3000, 0, 1, 0);
            while sent && m.next_chunk(1400).is_some() {}
            m
        };
        let mut v = Vec::new();
        for sent in [false, true] {
            v.push(Rpc::new(
                Phase::Client {
                    request: out(sent),
                    response: None,
                },
                1_000,
            ));
            v.push(Rpc::new(
                Phase::Responding {
                    response: out(sent),
                },
                2_000,
            ));
        }
        v.push(Rpc::new(
            Phase::Receiving {
                request: InMessage::new(5000, 1000, 3),
            },
            3_000,
        ));
        v.push(Rpc::new(Phase::InService, 4_000));
        v
    }

    #[test]
    fn the_wait_worked_out_once_gives_the_same_deadline_and_set() {
        let config = Config::default();
        let mut seen = Vec::new();
        for mut rpc in rpcs() {
            for unanswered in [0, 3] {
                rpc.unanswered = unanswered;
                let Some(wait) = rpc.wait() else {
                    continue;
                };
                seen.push(wait);
                assert_eq!(due_for(&config, &rpc, wait), due(&config, &rpc));
                assert_eq!(rpc.lenient_wait_for(wait), rpc.lenient_wait());
            }
        }
        // Among them a lenient wait (a sent response's ack) and strict ones.
        assert!(seen.contains(&Wait::Ack) && seen.contains(&Wait::Response));
    }
}
