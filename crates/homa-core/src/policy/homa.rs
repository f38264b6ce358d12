//! Homa's policies: controlled overcommitment with SRPT grants and a FIFO
//! share at the receiver (thesis §3.4, Ch. 5; Homa/Linux §4.4); SRPT with a
//! FIFO share and RTTbytes of unscheduled data at the sender.

use super::{
    DataSignal, GrantContext, GrantDecision, GrantKind, InView, OutView, ReceiverPolicy,
    SenderPolicy,
};
use crate::grant::{self, Candidate, FifoGrants, GrantParams};
use crate::keyed::KeyedMap;
use crate::srpt::{Key, PeerSrptQueue, SrptQueue};
use crate::{incast, Config, Nanos, RpcId};
use std::net::SocketAddr;

/// Homa's receiver: grants in SRPT order to at most `max_overcommit`
/// messages (one per sender), `grant_window` bytes each, `max_incoming` in
/// all, and a share of the downlink to the oldest message.
#[derive(Debug)]
pub struct HomaReceiver {
    params: GrantParams,
    fifo: FifoGrants,
    queue: PeerSrptQueue,
    messages: KeyedMap<RpcId, (InView, Key)>,
    /// Unscheduled bytes accepted of any message (RTTbytes, whole packets).
    allowance: u32,
}

impl HomaReceiver {
    /// The receiver policy for `config`.
    pub fn new(config: &Config) -> HomaReceiver {
        HomaReceiver {
            params: GrantParams {
                max_overcommit: config.max_overcommit,
                grant_window: config.grant_window,
                max_incoming: config.max_incoming,
                grant_increment: config.grant_increment,
                packet_payload: config.max_payload(),
                sched_levels: 1,
                gro_bytes: crate::bytedance::gro_bytes(&config.bytedance, config.max_payload()),
            },
            fifo: FifoGrants::new(config.fifo_grant_fraction, config.fifo_grant_increment),
            queue: PeerSrptQueue::default(),
            messages: KeyedMap::default(),
            allowance: incast::unsched_limit(config, u32::MAX, false),
        }
    }
}

impl ReceiverPolicy for HomaReceiver {
    fn unscheduled_allowance(&self, length: u32) -> u32 {
        self.allowance.min(length)
    }

    fn update(&mut self, _now: Nanos, m: &InView) {
        if m.granted >= m.length {
            self.remove(m.id);
            return;
        }
        let key = (m.length - m.received, m.seq);
        let old = self.messages.insert(m.id, (*m, key)).map(|(_, k)| k);
        self.queue.refile(m.id, old, Some(key));
    }

    fn remove(&mut self, id: RpcId) {
        if let Some((_, k)) = self.messages.remove(&id) {
            self.queue.remove(id, k);
        }
    }

    fn on_data(&mut self, _now: Nanos, signal: &DataSignal) {
        self.fifo.record_received(signal.new_bytes);
    }

    fn schedule(&mut self, _now: Nanos, ctx: &GrantContext, out: &mut Vec<GrantDecision>) {
        if self.queue.is_empty() {
            return;
        }
        let params = GrantParams {
            sched_levels: ctx.sched_levels,
            ..self.params
        };
        let messages = &self.messages;
        // (One candidate per peer: only a peer's best message can be granted.)
        let candidates = self.queue.iter_heads().map(|id| {
            let m = &messages[&id].0;
            Candidate {
                key: id,
                peer: id.peer,
                length: m.length,
                received: m.received,
                granted: m.granted,
                window: m.grant_window,
            }
        });
        let first = out.len();
        for g in grant::plan(candidates, &params, ctx.outstanding) {
            out.push(GrantDecision {
                id: g.key,
                offset: g.offset,
                priority: g.priority,
                kind: GrantKind::Scheduled,
            });
        }
        // Our view must reflect the grants just decided before the FIFO
        // share looks at it (built only when a FIFO grant is due).
        let mut given: Option<KeyedMap<RpcId, u32>> = None;
        while let Some(bytes) = self.fifo.take_due() {
            let given = given
                .get_or_insert_with(|| out[first..].iter().map(|g| (g.id, g.offset)).collect());
            // Top the oldest message up to `bytes` beyond what has arrived;
            // never stack grants on a sender that has not used the last
            // ones, and skip a message whose sender still owes it that much
            // for the next oldest (see docs/protocol-notes.md, FIFO grants).
            let pick = self.queue.iter_by_age().find_map(|id| {
                let m = &messages[&id].0;
                if m.grant_window == Some(0) {
                    // Its peer's grants are paused (ByteDance mode).
                    return None;
                }
                let granted = given.get(&id).copied().unwrap_or(m.granted);
                let offset = m.received.saturating_add(bytes).min(m.length);
                (offset > granted).then_some((id, offset))
            });
            let Some((id, offset)) = pick else {
                break;
            };
            given.insert(id, offset);
            out.push(GrantDecision {
                id,
                offset,
                priority: ctx.sched_levels.saturating_sub(1),
                kind: GrantKind::Fifo,
            });
        }
    }

    fn has_candidates(&self) -> bool {
        !self.queue.is_empty()
    }
}

/// Homa's sender: RTTbytes unscheduled (less under incast control), data
/// in SRPT order with `pacer_fifo_fraction` of packets from the oldest
/// message.
#[derive(Debug)]
pub struct HomaSender {
    fifo_fraction: u64,
    /// The only sendable message while there is just one (then `queue`
    /// and `keys` are empty): the usual case of a lightly loaded sender,
    /// where it is both the shortest and the oldest, and filing it in the
    /// ordered sets and the map cost more than the rest of its sending.
    solo: Option<(RpcId, Key)>,
    queue: SrptQueue,
    keys: KeyedMap<RpcId, Key>,
    packets: u64,
    fifo_packets: u64,
}

impl HomaSender {
    /// The sender policy for `config`.
    pub fn new(config: &Config) -> HomaSender {
        HomaSender {
            fifo_fraction: config.pacer_fifo_fraction as u64,
            solo: None,
            queue: SrptQueue::default(),
            keys: KeyedMap::default(),
            packets: 0,
            fifo_packets: 0,
        }
    }
}

impl SenderPolicy for HomaSender {
    fn unscheduled_bytes(
        &self,
        config: &Config,
        _peer: SocketAddr,
        length: u32,
        incast: bool,
    ) -> u32 {
        incast::unsched_limit(config, length, incast)
    }

    fn update(&mut self, m: &OutView) {
        let key = (m.bytes_left, m.seq);
        match self.solo {
            Some((id, _)) if id == m.id => {
                self.solo = Some((id, key));
                return;
            }
            Some((id, k)) => {
                // A second message: both go to the ordered sets.
                self.solo = None;
                self.keys.insert(id, k);
                self.queue.refile(id, None, Some(k));
            }
            None if self.keys.is_empty() => {
                self.solo = Some((m.id, key));
                return;
            }
            None => {}
        }
        let old = self.keys.insert(m.id, key);
        self.queue.refile(m.id, old, Some(key));
    }

    fn remove(&mut self, id: RpcId) {
        if let Some((solo, _)) = self.solo {
            if solo == id {
                self.solo = None;
            }
            return;
        }
        if let Some(k) = self.keys.remove(&id) {
            self.queue.remove(id, k);
        }
    }

    fn next(&mut self, _now: Nanos) -> Option<RpcId> {
        if let Some((id, _)) = self.solo {
            // Shortest and oldest at once: no turn is out of order.
            return Some(id);
        }
        let f = self.fifo_fraction;
        let fifo_turn = f > 0 && self.packets % (1000 / f) == 1000 / f - 1;
        let id = if fifo_turn {
            self.queue.oldest()
        } else {
            self.queue.shortest()
        }?;
        if fifo_turn && self.queue.shortest() != Some(id) {
            self.fifo_packets += 1;
        }
        Some(id)
    }

    fn peek(&self) -> Option<RpcId> {
        match self.solo {
            Some((id, _)) => Some(id),
            None => self.queue.shortest(),
        }
    }

    fn on_data_sent(&mut self) {
        self.packets += 1;
    }

    fn out_of_order_packets(&self) -> u64 {
        self.fifo_packets
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sender as it was before `solo`: every message in the ordered
    /// sets.
    struct Reference {
        fifo_fraction: u64,
        queue: SrptQueue,
        keys: KeyedMap<RpcId, Key>,
        packets: u64,
    }

    impl Reference {
        fn next(&self) -> Option<RpcId> {
            let f = self.fifo_fraction;
            if f > 0 && self.packets % (1000 / f) == 1000 / f - 1 {
                self.queue.oldest()
            } else {
                self.queue.shortest()
            }
        }
    }

    /// With one message or many, in any order of updates and removals, the
    /// sender picks what the plain ordered sets pick.
    #[test]
    fn solo_message_picks_as_the_ordered_sets_do() {
        let config = Config {
            pacer_fifo_fraction: 100,
            ..Config::default()
        };
        let mut s = HomaSender::new(&config);
        let mut r = Reference {
            fifo_fraction: 100,
            queue: SrptQueue::default(),
            keys: KeyedMap::default(),
            packets: 0,
        };
        let ids: Vec<RpcId> = (0..4)
            .map(|i| RpcId {
                peer: SocketAddr::from(([10, 0, 0, 1 + i as u8], 9)),
                id: 2 * i + 2,
            })
            .collect();
        let mut x = 12345u64;
        for step in 0..20_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let id = ids[(x >> 33) as usize % ids.len()];
            if (x >> 40) % 3 == 0 {
                s.remove(id);
                if let Some(k) = r.keys.remove(&id) {
                    r.queue.remove(id, k);
                }
            } else {
                let seq = r.keys.get(&id).map_or(step, |k| k.1);
                let m = OutView {
                    id,
                    bytes_left: (x >> 45) as u32 % 5000,
                    seq,
                };
                s.update(&m);
                let key = (m.bytes_left, m.seq);
                let old = r.keys.insert(id, key);
                r.queue.refile(id, old, Some(key));
            }
            assert_eq!(s.peek(), r.queue.shortest());
            assert_eq!(s.next(0), r.next());
            if s.peek().is_some() {
                s.on_data_sent();
                r.packets += 1;
            }
        }
    }
}
