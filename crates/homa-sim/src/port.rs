//! A switch or NIC egress port: its queues, its buffer and its statistics.
//!
//! A port transmits one packet at a time and never preempts it. Waiting
//! packets sit in one of three disciplines: a single FIFO (host NICs), 8
//! strict-priority FIFOs served highest first (Homa's switches), or one
//! queue served smallest rank first that drops the largest rank when full
//! (pFabric's switches).

use crate::topology::{Next, PortKind};
use crate::Time;
use std::collections::VecDeque;

/// Number of priority levels a strict-priority port has.
pub const LEVELS: usize = 8;

/// How a port orders waiting packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Discipline {
    /// One FIFO; priorities ignored.
    Fifo,
    /// 8 FIFOs, highest priority first.
    StrictPriority,
    /// Smallest rank first; largest rank dropped when full.
    Rank,
}

/// A waiting packet: its slot in the simulator's packet store and what the
/// port needs to know about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queued {
    /// Packet slot.
    pub idx: u32,
    /// Wire bytes.
    pub bytes: u32,
    /// Priority level (strict-priority ports).
    pub priority: u8,
    /// Rank (rank ports).
    pub rank: u64,
    /// Destination host: carried here so that forwarding a packet does not
    /// have to read it from the packet store (one cache miss per hop less).
    pub dst: u32,
}

/// What happened to a packet offered to a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Queued; `ecn` when the queue was above the marking threshold.
    Queued {
        /// Mark the packet.
        ecn: bool,
    },
    /// The buffer was full; this packet (the arriving one, or for rank
    /// ports possibly one that was waiting) is dropped. More than one
    /// waiting packet may have to go; call [`Port::take_dropped`].
    Dropped,
}

/// Statistics of a port over the measurement window.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PortStats {
    /// Time-averaged waiting bytes.
    pub mean_bytes: f64,
    /// Most waiting bytes at any instant.
    pub peak_bytes: u64,
    /// Fraction of the window spent transmitting.
    pub utilization: f64,
    /// Packets dropped.
    pub drops: u64,
    /// Packets marked.
    pub ecn_marks: u64,
    /// Wire bytes transmitted.
    pub tx_bytes: u64,
}

/// One egress port.
pub struct Port {
    /// What kind of link it drives.
    pub kind: PortKind,
    /// Link rate (bit/s).
    pub bps: u64,
    /// Far end of the link.
    pub next: Next,
    discipline: Discipline,
    queues: [VecDeque<Queued>; LEVELS],
    /// Bit i set when `queues[i]` is non-empty.
    nonempty: u8,
    ranked: Vec<Queued>,
    dropped: Vec<u32>,
    buffer_limit: Option<u64>,
    ecn_threshold: Option<u64>,
    /// Bytes waiting (not counting the packet on the wire).
    queued_bytes: u64,
    /// Packet being transmitted, if any.
    pub on_wire: Option<Queued>,
    // Statistics since `window_start`.
    window_start: Time,
    last_change: Time,
    area: u128,
    peak: u64,
    busy_since: Option<Time>,
    busy_time: Time,
    drops: u64,
    ecn_marks: u64,
    tx_bytes: u64,
}

impl Port {
    /// An idle, empty port.
    pub fn new(
        kind: PortKind,
        bps: u64,
        next: Next,
        discipline: Discipline,
        buffer_limit: Option<u64>,
        ecn_threshold: Option<u64>,
    ) -> Port {
        Port {
            kind,
            bps,
            next,
            discipline,
            queues: Default::default(),
            nonempty: 0,
            ranked: Vec::new(),
            dropped: Vec::new(),
            buffer_limit,
            ecn_threshold,
            queued_bytes: 0,
            on_wire: None,
            window_start: 0,
            last_change: 0,
            area: 0,
            peak: 0,
            busy_since: None,
            busy_time: 0,
            drops: 0,
            ecn_marks: 0,
            tx_bytes: 0,
        }
    }

    /// Bytes waiting, not counting the packet on the wire.
    pub fn queued_bytes(&self) -> u64 {
        self.queued_bytes
    }

    /// True while a packet is being transmitted.
    pub fn is_busy(&self) -> bool {
        self.on_wire.is_some()
    }

    fn account(&mut self, now: Time) {
        self.area += self.queued_bytes as u128 * (now - self.last_change) as u128;
        self.last_change = now;
    }

    /// Offers a packet. Buffers limit the waiting bytes only.
    pub fn admit(&mut self, now: Time, p: Queued) -> Admit {
        self.account(now);
        let fits = |q: u64, limit: Option<u64>| limit.is_none_or(|l| q + p.bytes as u64 <= l);
        match self.discipline {
            Discipline::Fifo | Discipline::StrictPriority => {
                if !fits(self.queued_bytes, self.buffer_limit) {
                    self.drops += 1;
                    return Admit::Dropped;
                }
                let level = if self.discipline == Discipline::Fifo {
                    0
                } else {
                    (p.priority as usize).min(LEVELS - 1)
                };
                self.queues[level].push_back(p);
                self.nonempty |= 1 << level;
            }
            Discipline::Rank => {
                // Make room by dropping the largest ranks, the arriving
                // packet included (it loses ties: it is the newest).
                while !fits(self.queued_bytes, self.buffer_limit) {
                    let worst = self
                        .ranked
                        .iter()
                        .enumerate()
                        .max_by_key(|(i, q)| (q.rank, *i))
                        .map(|(i, q)| (i, q.rank));
                    match worst {
                        Some((i, rank)) if rank > p.rank => {
                            let q = self.ranked.remove(i);
                            self.queued_bytes -= q.bytes as u64;
                            self.dropped.push(q.idx);
                            self.drops += 1;
                        }
                        _ => {
                            self.drops += 1;
                            return Admit::Dropped;
                        }
                    }
                }
                self.ranked.push(p);
            }
        }
        self.queued_bytes += p.bytes as u64;
        self.peak = self.peak.max(self.queued_bytes);
        let ecn = self.ecn_threshold.is_some_and(|t| self.queued_bytes > t);
        self.ecn_marks += ecn as u64;
        Admit::Queued { ecn }
    }

    /// Waiting packets a rank port dropped to make room (their slots must be
    /// freed by the caller).
    pub fn take_dropped(&mut self) -> std::vec::Drain<'_, u32> {
        self.dropped.drain(..)
    }

    /// If idle and something waits, puts the next packet on the wire and
    /// returns it; the caller schedules the end of its transmission.
    pub fn start_next(&mut self, now: Time) -> Option<Queued> {
        if self.on_wire.is_some() {
            return None;
        }
        self.account(now);
        let next = match self.discipline {
            Discipline::Fifo | Discipline::StrictPriority => {
                if self.nonempty == 0 {
                    return None;
                }
                let level = 7 - self.nonempty.leading_zeros() as usize;
                let q = self.queues[level].pop_front();
                if self.queues[level].is_empty() {
                    self.nonempty &= !(1 << level);
                }
                q
            }
            Discipline::Rank => {
                let i = self
                    .ranked
                    .iter()
                    .enumerate()
                    .min_by_key(|(i, q)| (q.rank, *i))
                    .map(|(i, _)| i)?;
                Some(self.ranked.remove(i))
            }
        }?;
        self.queued_bytes -= next.bytes as u64;
        self.on_wire = Some(next);
        self.busy_since = Some(now);
        Some(next)
    }

    /// The packet on the wire has been sent; returns it.
    pub fn finish(&mut self, now: Time) -> Option<Queued> {
        let q = self.on_wire.take()?;
        if let Some(s) = self.busy_since.take() {
            self.busy_time += now - s.max(self.window_start);
        }
        self.tx_bytes += q.bytes as u64;
        Some(q)
    }

    /// Starts a new measurement window at `now`.
    pub fn reset_stats(&mut self, now: Time) {
        self.account(now);
        self.window_start = now;
        self.area = 0;
        self.peak = self.queued_bytes;
        self.busy_time = 0;
        self.drops = 0;
        self.ecn_marks = 0;
        self.tx_bytes = 0;
    }

    /// Statistics from the window start until `now`.
    pub fn stats(&mut self, now: Time) -> PortStats {
        self.account(now);
        let span = now.saturating_sub(self.window_start).max(1);
        let busy = self.busy_time
            + self
                .busy_since
                .map_or(0, |s| now - s.max(self.window_start));
        PortStats {
            mean_bytes: self.area as f64 / span as f64,
            peak_bytes: self.peak,
            utilization: busy as f64 / span as f64,
            drops: self.drops,
            ecn_marks: self.ecn_marks,
            tx_bytes: self.tx_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(idx: u32, bytes: u32, priority: u8, rank: u64) -> Queued {
        Queued {
            idx,
            bytes,
            priority,
            rank,
            dst: 0,
        }
    }

    fn port(d: Discipline, limit: Option<u64>) -> Port {
        Port::new(
            PortKind::TorDown,
            10_000_000_000,
            Next::Host(0),
            d,
            limit,
            Some(2500),
        )
    }

    fn drain(p: &mut Port) -> Vec<u32> {
        let mut out = Vec::new();
        while let Some(x) = p.start_next(0) {
            out.push(x.idx);
            p.finish(0);
        }
        out
    }

    #[test]
    fn strict_priority_serves_highest_first_fifo_within_level() {
        let mut p = port(Discipline::StrictPriority, None);
        for (i, prio) in [0u8, 3, 7, 3, 0, 7, 5].iter().enumerate() {
            p.admit(0, q(i as u32, 100, *prio, 0));
        }
        assert_eq!(drain(&mut p), [2, 5, 6, 1, 3, 0, 4]);
    }

    #[test]
    fn packet_on_the_wire_is_not_preempted() {
        let mut p = port(Discipline::StrictPriority, None);
        p.admit(0, q(0, 1500, 0, 0));
        assert_eq!(p.start_next(0).unwrap().idx, 0);
        p.admit(10, q(1, 100, 7, 0));
        // Still busy with the low-priority packet.
        assert!(p.start_next(10).is_none());
        assert_eq!(p.finish(20).unwrap().idx, 0);
        assert_eq!(p.start_next(20).unwrap().idx, 1);
    }

    #[test]
    fn fifo_ignores_priority() {
        let mut p = port(Discipline::Fifo, None);
        for (i, prio) in [0u8, 7, 3].iter().enumerate() {
            p.admit(0, q(i as u32, 100, *prio, 0));
        }
        assert_eq!(drain(&mut p), [0, 1, 2]);
    }

    #[test]
    fn full_buffer_drops_arrivals_and_ecn_marks_above_threshold() {
        let mut p = port(Discipline::StrictPriority, Some(3000));
        assert_eq!(p.admit(0, q(0, 1500, 0, 0)), Admit::Queued { ecn: false });
        assert_eq!(p.admit(0, q(1, 1500, 0, 0)), Admit::Queued { ecn: true });
        assert_eq!(p.admit(0, q(2, 100, 7, 0)), Admit::Dropped);
        let s = p.stats(1);
        assert_eq!((s.drops, s.ecn_marks, s.peak_bytes), (1, 1, 3000));
    }

    #[test]
    fn rank_serves_smallest_and_drops_largest() {
        let mut p = port(Discipline::Rank, Some(300));
        p.admit(0, q(0, 100, 0, 50));
        p.admit(0, q(1, 100, 0, 10));
        p.admit(0, q(2, 100, 0, 90));
        // Full: a smaller rank pushes out the largest (90).
        assert_eq!(p.admit(0, q(3, 100, 0, 20)), Admit::Queued { ecn: false });
        assert_eq!(p.take_dropped().collect::<Vec<_>>(), [2]);
        // A larger rank than everything waiting is itself dropped.
        assert_eq!(p.admit(0, q(4, 100, 0, 95)), Admit::Dropped);
        assert_eq!(drain(&mut p), [1, 3, 0]);
    }

    #[test]
    fn time_weighted_mean_and_utilization() {
        let mut p = port(Discipline::Fifo, None);
        p.reset_stats(0);
        p.admit(0, q(0, 1000, 0, 0));
        p.admit(0, q(1, 1000, 0, 0));
        // 2000 waiting for 100 ps, then one goes on the wire: 1000 waiting.
        p.start_next(100);
        p.finish(200);
        p.start_next(200);
        p.finish(300);
        let s = p.stats(400);
        // Area: 2000*100 + 1000*100 = 300_000 over 400 ps.
        assert!((s.mean_bytes - 750.0).abs() < 1e-9, "{}", s.mean_bytes);
        assert!((s.utilization - 0.5).abs() < 1e-9);
        assert_eq!(s.tx_bytes, 2000);
    }
}
