//! The discrete-event core: a priority queue of timestamped events.
//!
//! Events fire in time order; events with the same time fire in the order
//! they were scheduled, so a run is a pure function of its inputs and seed.

use crate::Time;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

struct Entry<E> {
    time: Time,
    seq: u64,
    event: E,
}

impl<E> Entry<E> {
    /// Time, then sequence, as one number, with `lane` (< 16) in the low
    /// bits. (The sequence takes bits 4..68 and would reach the time's
    /// bits only after 2^60 events.)
    fn lane_key(&self, lane: usize) -> u128 {
        (self.time as u128) << 64 | (self.seq as u128) << 4 | lane as u128
    }
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        self.time == other.time && self.seq == other.seq
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Entry<E> {
    // Reversed: BinaryHeap is a max-heap and the earliest event must come
    // out first; ties go to the earlier-scheduled event.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .time
            .cmp(&self.time)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

/// Most delay lanes (see [`EventQueue`]).
const LANES: usize = 16;
const _: () = assert!(LANES <= 16, "lane indices take 4 bits of a key");
/// Times a delay must be scheduled through the heap before it gets a lane.
const PROMOTE_AFTER: u32 = 32;
/// Slots of the table that counts heap-scheduled delays.
const COUNTERS: usize = 64;

/// Events scheduled a fixed delay after the moment they were scheduled.
/// Since the clock never runs backwards, such events arrive in time order:
/// a FIFO keeps them sorted without a heap operation.
struct Lane<E> {
    delay: Time,
    fifo: VecDeque<Entry<E>>,
}

/// Pending events, earliest first, FIFO among equal times.
///
/// Most of a network simulation's events are scheduled a constant delay
/// ahead: a packet reaches the next hop a link's propagation delay after it
/// left, and a full-size frame takes the same time to serialise every time.
/// The queue notices delays that recur (after `PROMOTE_AFTER` uses, up to
/// `LANES` of them) and keeps each in its own FIFO lane; everything else
/// goes through a binary heap. `pop` takes the smallest (time, sequence)
/// among the heap's top and the lanes' heads, so the order is exactly that
/// of a single heap: lanes only make it cheaper.
pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    lanes: Vec<Lane<E>>,
    /// Lane i's first event as `time << 64 | seq << 4 | i`, or `u128::MAX`
    /// when the lane is empty: `pop` takes the minimum of this array
    /// (branch-free), not of the lanes. Sequence numbers are distinct, so
    /// the lane index in the low bits never changes the order.
    heads: [u128; LANES],
    /// Recently heap-scheduled delays and how often each was seen.
    counters: [(Time, u32); COUNTERS],
    seq: u64,
    now: Time,
    processed: u64,
    len: usize,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::with_capacity(1 << 12),
            lanes: Vec::with_capacity(LANES),
            heads: [u128::MAX; LANES],
            counters: [(Time::MAX, 0); COUNTERS],
            seq: 0,
            now: 0,
            processed: 0,
            len: 0,
        }
    }
}

impl<E> EventQueue<E> {
    /// An empty queue at time 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// Current simulated time: the time of the last event popped.
    pub fn now(&self) -> Time {
        self.now
    }

    /// Events popped so far.
    pub fn processed(&self) -> u64 {
        self.processed
    }

    /// Events waiting.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing is scheduled.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Delays that have their own lane.
    pub fn lane_delays(&self) -> impl Iterator<Item = Time> + '_ {
        self.lanes.iter().map(|l| l.delay)
    }

    /// Schedules `event` at `time`; a time in the past is treated as now, so
    /// the clock never runs backwards.
    pub fn schedule(&mut self, time: Time, event: E) {
        let time = time.max(self.now);
        self.seq += 1;
        self.len += 1;
        let entry = Entry {
            time,
            seq: self.seq,
            event,
        };
        let delay = time - self.now;
        if let Some(i) = self.lanes.iter().position(|l| l.delay == delay) {
            if self.heads[i] == u128::MAX {
                self.heads[i] = entry.lane_key(i);
            }
            self.lanes[i].fifo.push_back(entry);
            return;
        }
        if self.lanes.len() < LANES {
            let slot = &mut self.counters[(mix(delay) % COUNTERS as u64) as usize];
            if slot.0 == delay {
                slot.1 += 1;
                if slot.1 >= PROMOTE_AFTER {
                    *slot = (Time::MAX, 0);
                    let mut fifo = VecDeque::with_capacity(64);
                    self.heads[self.lanes.len()] = entry.lane_key(self.lanes.len());
                    fifo.push_back(entry);
                    self.lanes.push(Lane { delay, fifo });
                    return;
                }
            } else if slot.1 > 1 {
                // A majority vote per slot: a recurring delay outlasts the
                // occasional other one that hashes to its slot.
                slot.1 -= 1;
            } else {
                *slot = (delay, 1);
            }
        }
        self.heap.push(entry);
    }

    /// Where the next event is: `None` for the heap, else its lane.
    fn next_source(&self) -> Option<(Time, Option<usize>)> {
        let best = self.heads.iter().fold(u128::MAX, |m, &k| m.min(k));
        match self.heap.peek() {
            Some(e) if e.lane_key(0) < best => Some((e.time, None)),
            _ if best != u128::MAX => Some(((best >> 64) as Time, Some((best & 15) as usize))),
            _ => None,
        }
    }

    /// Time of the next event, if any.
    pub fn peek_time(&self) -> Option<Time> {
        self.next_source().map(|(t, _)| t)
    }

    /// Takes the next event and advances the clock to its time.
    pub fn pop(&mut self) -> Option<(Time, E)> {
        let (_, src) = self.next_source()?;
        let e = match src {
            None => self.heap.pop().expect("peeked"),
            Some(i) => {
                let lane = &mut self.lanes[i].fifo;
                let e = lane.pop_front().expect("peeked");
                self.heads[i] = lane.front().map_or(u128::MAX, |e| e.lane_key(i));
                e
            }
        };
        self.len -= 1;
        self.now = e.time;
        self.processed += 1;
        Some((e.time, e.event))
    }
}

/// A cheap integer mix for the delay counters.
fn mix(x: u64) -> u64 {
    (x ^ (x >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9) >> 32
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn pops_in_time_order_and_fifo_on_ties() {
        let mut q = EventQueue::new();
        q.schedule(30, "c");
        q.schedule(10, "a1");
        q.schedule(20, "b");
        q.schedule(10, "a2");
        q.schedule(10, "a3");
        let order: Vec<_> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, ["a1", "a2", "a3", "b", "c"]);
        assert_eq!(q.now(), 30);
        assert_eq!(q.processed(), 5);
    }

    #[test]
    fn past_events_run_now_and_clock_never_goes_back() {
        let mut q = EventQueue::new();
        q.schedule(100, 1);
        assert_eq!(q.pop(), Some((100, 1)));
        q.schedule(50, 2);
        assert_eq!(q.pop(), Some((100, 2)));
    }

    #[test]
    fn random_schedule_is_sorted_and_stable() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mut q = EventQueue::new();
        let mut expect = Vec::new();
        for i in 0..10_000u32 {
            let t = rng.gen_range(0..500u64);
            q.schedule(t, i);
            expect.push((t, i));
        }
        expect.sort(); // by time, then by insertion index
        let got: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(got, expect);
    }

    /// The lanes change nothing about the order: interleaved schedules and
    /// pops, with recurring delays (which get lanes) and random ones (which
    /// stay in the heap), pop exactly as a plain sorted model does.
    #[test]
    fn lanes_keep_the_exact_order_of_one_heap() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let mut q = EventQueue::new();
        let mut model: std::collections::BTreeSet<(Time, u64)> = Default::default();
        let mut seq = 0u64;
        let fixed = [0u64, 7, 7, 120, 1230, 5000, 5000, 5000];
        for round in 0..200_000u64 {
            if rng.gen_bool(0.55) || model.is_empty() {
                let d = if rng.gen_bool(0.8) {
                    fixed[rng.gen_range(0..fixed.len())]
                } else {
                    rng.gen_range(0..3000)
                };
                seq += 1;
                q.schedule(q.now() + d, seq);
                model.insert((q.now() + d, seq));
            } else {
                let want = model.pop_first().expect("non-empty");
                assert_eq!(q.peek_time(), Some(want.0), "round {round}");
                assert_eq!(q.pop(), Some(want), "round {round}");
            }
            assert_eq!(q.len(), model.len());
        }
        let lanes: Vec<_> = q.lane_delays().collect();
        assert!(lanes.len() >= 4, "recurring delays got lanes: {lanes:?}");
        while let Some(want) = model.pop_first() {
            assert_eq!(q.pop(), Some(want));
        }
        assert!(q.is_empty());
        assert_eq!(q.pop(), None);
    }
}
