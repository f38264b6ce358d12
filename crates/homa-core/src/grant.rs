//! Receiver-side grant scheduling (thesis §3.4, Ch. 5; Homa/Linux §4.4).
//!
//! Among incoming messages that still need grants, the receiver picks the
//! active set by SRPT (fewest bytes left to receive first), at most one
//! message per peer (a peer sends only its shortest message anyway), at most
//! `max_overcommit` messages (controlled overcommitment). Each active message
//! is granted up to `grant_window` bytes beyond what has arrived, rounded up
//! to whole packets, as long as the total granted-but-unreceived bytes stay
//! within `max_incoming`. A share of grants goes to the oldest message so
//! that the largest never starve under SRPT.

use crate::priority::sched_priority;
use std::net::SocketAddr;

/// One incoming message that may need grants, as the scheduler sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate<K> {
    /// Caller's handle for the message.
    pub key: K,
    /// The sender.
    pub peer: SocketAddr,
    /// Message length.
    pub length: u32,
    /// Distinct bytes received.
    pub received: u32,
    /// Bytes the sender may already send.
    pub granted: u32,
    /// This message's own window (ByteDance mode's per-peer window, whole
    /// GRO batches), instead of `GrantParams::grant_window`; grants to it
    /// go in steps of at least `GrantParams::gro_bytes`. 0 = no grants, and
    /// no place in the active set.
    pub window: Option<u32>,
}

/// A grant to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant<K> {
    /// Which message.
    pub key: K,
    /// New grant offset (exclusive).
    pub offset: u32,
    /// Priority for the sender to use.
    pub priority: u8,
}

/// Parameters of one scheduling pass.
#[derive(Debug, Clone, Copy)]
pub struct GrantParams {
    /// Most active messages.
    pub max_overcommit: u32,
    /// Outstanding bytes per active message.
    pub grant_window: u32,
    /// Cap on outstanding bytes over all messages.
    pub max_incoming: u32,
    /// Smallest grant worth sending unless it completes the message.
    pub grant_increment: u32,
    /// Bytes per full packet; grants are rounded up to this.
    pub packet_payload: u32,
    /// Scheduled priority levels (0..sched_levels).
    pub sched_levels: u8,
    /// Bytes of one GRO batch: the unit of grants to messages with their
    /// own `window` (ByteDance mode); 0 = one packet.
    pub gro_bytes: u32,
}

/// Plans grants. `candidates` must come in SRPT order (fewest bytes left
/// first, ties oldest first) and include only messages with
/// `granted < length`. `outstanding` is the granted-but-unreceived total over
/// all incoming messages.
pub fn plan<K: Copy>(
    candidates: impl IntoIterator<Item = Candidate<K>>,
    params: &GrantParams,
    outstanding: u64,
) -> Vec<Grant<K>> {
    // (Sized once: this runs for every batch of received packets.)
    let k = (params.max_overcommit as usize).min(64);
    let mut active: Vec<Candidate<K>> = Vec::with_capacity(k);
    for c in candidates {
        if active.len() >= params.max_overcommit as usize {
            break;
        }
        // A message with no window (its peer's grants are paused) takes no
        // overcommitment slot: the next message may use it.
        if c.window == Some(0) {
            continue;
        }
        if !active.iter().any(|a| a.peer == c.peer) {
            active.push(c);
        }
    }
    let mut budget = (params.max_incoming as u64).saturating_sub(outstanding);
    let n = active.len();
    let mut grants = Vec::with_capacity(n);
    for (rank, c) in active.iter().enumerate() {
        // Homa: the common window in packets; ByteDance: the peer's window
        // in GRO batches, never a step smaller than one batch.
        let (window, unit, step) = match c.window {
            Some(w) => {
                let gro = params.gro_bytes.max(params.packet_payload);
                (w, gro, params.grant_increment.max(gro))
            }
            None => (
                params.grant_window,
                params.packet_payload,
                params.grant_increment,
            ),
        };
        let want = round_up(c.received.saturating_add(window), unit).min(c.length);
        if want <= c.granted {
            continue;
        }
        let mut target = want;
        // Only bytes beyond what is already received count as outstanding.
        let base = c.granted.max(c.received);
        let added = (target - base) as u64;
        if added > budget {
            if budget == 0 {
                break;
            }
            target = round_up(base + budget as u32, params.packet_payload).min(c.length);
        }
        // (An increment larger than the window could never be reached.)
        let increment = step.min(window);
        if target - c.granted < increment && target < c.length {
            continue;
        }
        budget = budget.saturating_sub((target - base) as u64);
        grants.push(Grant {
            key: c.key,
            offset: target,
            priority: sched_priority(rank, n, params.sched_levels),
        });
    }
    grants
}

fn round_up(v: u32, unit: u32) -> u32 {
    if unit == 0 {
        return v;
    }
    v.div_ceil(unit).saturating_mul(unit)
}

/// Decides when the oldest message gets a grant outside SRPT order: after
/// every `increment × (1000 − fraction) / fraction` bytes this receiver
/// takes in, the oldest message is topped up by `increment` bytes, so it
/// gets about `fraction`‰ of the downlink while the link is busy.
///
/// Counting received bytes rather than SRPT-granted ones matters when most
/// traffic is unscheduled (short messages): grants are then rare, and a
/// share of them would leave the longest message starved for seconds
/// (found on the testbed: 1 MB w3 messages stalled 10 s at 80% load).
#[derive(Debug, Clone)]
pub struct FifoGrants {
    fraction: u32,
    increment: u32,
    received: u64,
}

impl FifoGrants {
    /// `fraction` in thousandths; 0 turns FIFO grants off.
    pub fn new(fraction: u32, increment: u32) -> FifoGrants {
        FifoGrants {
            fraction,
            increment,
            received: 0,
        }
    }

    fn period(&self) -> Option<u64> {
        (self.fraction > 0 && self.increment > 0 && self.fraction < 1000)
            .then(|| self.increment as u64 * (1000 - self.fraction as u64) / self.fraction as u64)
    }

    /// Counts bytes received. Turns that find no message to grant do not
    /// pile up: at most two are kept.
    pub fn record_received(&mut self, bytes: u32) {
        if let Some(period) = self.period() {
            self.received = (self.received + bytes as u64).min(2 * period.max(1));
        }
    }

    /// Bytes to grant the oldest message now, if its turn has come.
    pub fn take_due(&mut self) -> Option<u32> {
        let period = self.period()?;
        if self.received >= period {
            self.received -= period;
            Some(self.increment)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(i: u8) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, i], 4000))
    }

    fn params() -> GrantParams {
        GrantParams {
            max_overcommit: 8,
            grant_window: 10_000,
            max_incoming: 1_000_000,
            grant_increment: 1,
            packet_payload: 1_000,
            sched_levels: 4,
            gro_bytes: 0,
        }
    }

    fn cand(key: u32, peer: u8, length: u32, received: u32, granted: u32) -> Candidate<u32> {
        Candidate {
            key,
            peer: addr(peer),
            length,
            received,
            granted,
            window: None,
        }
    }

    /// Candidates sorted as the endpoint sorts them (fewest left first).
    fn srpt(mut v: Vec<Candidate<u32>>) -> Vec<Candidate<u32>> {
        v.sort_by_key(|c| (c.length - c.received, c.key));
        v
    }

    #[test]
    fn grants_in_srpt_order_with_window() {
        let c = srpt(vec![
            cand(1, 1, 100_000, 10_000, 10_000),
            cand(2, 2, 50_000, 10_000, 10_000),
            cand(3, 3, 30_000, 10_000, 10_000),
        ]);
        let g = plan(c, &params(), 0);
        assert_eq!(g.iter().map(|g| g.key).collect::<Vec<_>>(), vec![3, 2, 1]);
        assert!(g.iter().all(|g| g.offset == 20_000));
        // Shortest highest; three active messages use levels 2, 1, 0.
        assert_eq!(
            g.iter().map(|g| g.priority).collect::<Vec<_>>(),
            vec![2, 1, 0]
        );
    }

    #[test]
    fn a_message_with_no_window_gets_nothing_and_takes_no_slot() {
        // Overcommitment 2: the paused shortest message (window 0) must
        // leave both slots to the others.
        let mut c = srpt(vec![
            cand(1, 1, 20_000, 10_000, 10_000),
            cand(2, 2, 50_000, 10_000, 10_000),
            cand(3, 3, 90_000, 10_000, 10_000),
        ]);
        c[0].window = Some(0);
        let p = GrantParams {
            max_overcommit: 2,
            ..params()
        };
        let g = plan(c, &p, 0);
        assert_eq!(g.iter().map(|g| g.key).collect::<Vec<_>>(), vec![2, 3]);
        // Two active messages: levels 1 and 0, as if the paused one were
        // not there.
        assert_eq!(g.iter().map(|g| g.priority).collect::<Vec<_>>(), vec![1, 0]);
    }

    #[test]
    fn one_message_per_peer() {
        let c = srpt(vec![
            cand(1, 1, 30_000, 10_000, 10_000),
            cand(2, 1, 40_000, 10_000, 10_000),
            cand(3, 2, 90_000, 10_000, 10_000),
        ]);
        let g = plan(c, &params(), 0);
        assert_eq!(g.iter().map(|g| g.key).collect::<Vec<_>>(), vec![1, 3]);
    }

    #[test]
    fn overcommit_limit() {
        let c: Vec<_> = (0..20u32)
            .map(|i| cand(i, i as u8, 100_000 + i * 1_000, 10_000, 10_000))
            .collect();
        let p = GrantParams {
            max_overcommit: 5,
            ..params()
        };
        let g = plan(srpt(c), &p, 0);
        assert_eq!(
            g.iter().map(|g| g.key).collect::<Vec<_>>(),
            vec![0, 1, 2, 3, 4]
        );
        // 5 active on 4 levels: the two shortest share the top level.
        assert_eq!(
            g.iter().map(|g| g.priority).collect::<Vec<_>>(),
            vec![3, 3, 2, 1, 0]
        );
    }

    #[test]
    fn max_incoming_bounds_outstanding_bytes() {
        let c = srpt(vec![
            cand(1, 1, 100_000, 10_000, 10_000),
            cand(2, 2, 200_000, 10_000, 10_000),
        ]);
        let p = GrantParams {
            max_incoming: 25_000,
            ..params()
        };
        // 10,000 already outstanding: 15,000 left; first gets 10,000,
        // second the remaining 5,000.
        let g = plan(c.clone(), &p, 10_000);
        assert_eq!(g.len(), 2);
        assert_eq!((g[0].key, g[0].offset), (1, 20_000));
        assert_eq!((g[1].key, g[1].offset), (2, 15_000));
        // Nothing left: no grants.
        assert!(plan(c, &p, 25_000).is_empty());
    }

    #[test]
    fn grants_round_up_to_packets_and_stop_at_length() {
        let c = vec![cand(1, 1, 15_500, 1_234, 1_234)];
        let g = plan(c, &params(), 0);
        // 1,234 + 10,000 = 11,234 → 12,000.
        assert_eq!(g[0].offset, 12_000);
        let c = vec![cand(1, 1, 15_500, 9_000, 12_000)];
        let g = plan(c, &params(), 0);
        assert_eq!(g[0].offset, 15_500);
    }

    #[test]
    fn small_increments_wait_unless_they_finish_the_message() {
        let p = GrantParams {
            grant_increment: 5_000,
            ..params()
        };
        // Window would move the grant by only 1,000: not sent.
        assert!(plan(vec![cand(1, 1, 100_000, 1_000, 10_000)], &p, 0).is_empty());
        // 1,000 more finishes the message: sent.
        let g = plan(vec![cand(1, 1, 11_000, 1_000, 10_000)], &p, 0);
        assert_eq!(g[0].offset, 11_000);
    }

    #[test]
    fn increment_larger_than_window_still_grants() {
        let p = GrantParams {
            grant_window: 4_000,
            grant_increment: 10_000,
            ..params()
        };
        let g = plan(vec![cand(1, 1, 100_000, 4_000, 4_000)], &p, 0);
        assert_eq!(g[0].offset, 8_000);
    }

    #[test]
    fn fully_windowed_messages_get_nothing() {
        assert!(plan(vec![cand(1, 1, 100_000, 1_000, 11_000)], &params(), 0).is_empty());
    }

    #[test]
    fn fifo_share() {
        let mut f = FifoGrants::new(50, 50_000);
        assert_eq!(f.take_due(), None);
        f.record_received(949_999);
        assert_eq!(f.take_due(), None);
        f.record_received(1);
        assert_eq!(f.take_due(), Some(50_000));
        assert_eq!(f.take_due(), None);
        // Unused turns are capped at two.
        f.record_received(u32::MAX);
        assert_eq!(f.take_due(), Some(50_000));
        assert_eq!(f.take_due(), Some(50_000));
        assert_eq!(f.take_due(), None);
        let mut off = FifoGrants::new(0, 50_000);
        off.record_received(u32::MAX);
        assert_eq!(off.take_due(), None);
    }
}
