//! Priority allocation (thesis §3.5, Homa/Linux `homa_prio`).
//!
//! A receiver splits its priority levels between unscheduled and scheduled
//! traffic in proportion to the share of incoming bytes that arrive
//! unscheduled (rounded, at least one level each), and picks unscheduled
//! cutoffs so that each unscheduled level carries about the same number of
//! unscheduled bytes, shorter messages on higher levels. It ships the cutoffs
//! to senders in CUTOFFS packets; a sender picks the highest level whose
//! cutoff is at least the message length. Scheduled levels are chosen per
//! grant: the active messages use the lowest levels, the shortest the highest.

use homa_wire::{CUTOFF_UNLIMITED, MAX_PRIORITIES};

/// The receiver's current allocation of priority levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PriorityPlan {
    /// Wire cutoffs: `cutoffs[i]` is the largest message length whose
    /// unscheduled bytes use level `i`; 0 for scheduled and unused levels,
    /// [`CUTOFF_UNLIMITED`] for entry 0 and the lowest unscheduled level.
    pub cutoffs: [u32; MAX_PRIORITIES],
    /// Levels 0..sched_levels carry scheduled data.
    pub sched_levels: u8,
}

/// Linux Homa's default unscheduled cutoffs for 8 levels, highest level
/// first: 200 B, 2,800 B, 15,000 B, then everything else.
const LINUX_DEFAULT_CUTOFFS: [u32; 3] = [200, 2_800, 15_000];

impl PriorityPlan {
    /// The allocation used before any sizes have been measured: Linux's
    /// defaults (half the levels unscheduled), shrunk to `num_priorities`.
    pub fn default_for(num_priorities: u8) -> PriorityPlan {
        let p = num_priorities.clamp(1, MAX_PRIORITIES as u8);
        if p == 1 {
            return PriorityPlan::single_level();
        }
        let unsched = (p / 2).max(1);
        let boundaries: Vec<u32> = LINUX_DEFAULT_CUTOFFS
            .iter()
            .copied()
            .take(unsched as usize - 1)
            .collect();
        PriorityPlan::from_boundaries(p, p - unsched, &boundaries)
    }

    fn single_level() -> PriorityPlan {
        let mut cutoffs = [0; MAX_PRIORITIES];
        cutoffs[0] = CUTOFF_UNLIMITED;
        PriorityPlan {
            cutoffs,
            sched_levels: 1,
        }
    }

    /// Builds the wire cutoffs: `boundaries` ascending, the smallest for the
    /// top level; the lowest unscheduled level (`sched_levels`) takes the rest.
    fn from_boundaries(p: u8, sched_levels: u8, boundaries: &[u32]) -> PriorityPlan {
        let mut cutoffs = [0; MAX_PRIORITIES];
        cutoffs[0] = CUTOFF_UNLIMITED;
        cutoffs[sched_levels as usize] = CUTOFF_UNLIMITED;
        for (i, b) in boundaries.iter().enumerate() {
            cutoffs[p as usize - 1 - i] = *b;
        }
        PriorityPlan {
            cutoffs,
            sched_levels,
        }
    }

    /// Computes an allocation from a sample of incoming message lengths.
    /// `unsched_bytes` is how much of each message a sender sends
    /// unscheduled. Returns the default allocation for an empty sample.
    pub fn from_sizes(sizes: &[u32], unsched_bytes: u32, num_priorities: u8) -> PriorityPlan {
        let mut sorted = sizes.to_vec();
        sorted.sort_unstable();
        PriorityPlan::from_sorted_sizes(&sorted, unsched_bytes, num_priorities)
    }

    /// [`PriorityPlan::from_sizes`] for a sample already in ascending order
    /// (see [`SizeSampler::sorted`]).
    pub fn from_sorted_sizes(
        sorted: &[u32],
        unsched_bytes: u32,
        num_priorities: u8,
    ) -> PriorityPlan {
        debug_assert!(sorted.windows(2).all(|w| w[0] <= w[1]));
        let sizes = sorted;
        let p = num_priorities.clamp(1, MAX_PRIORITIES as u8);
        let total: u64 = sizes.iter().map(|&s| s as u64).sum();
        if p == 1 || total == 0 {
            return if p == 1 {
                PriorityPlan::single_level()
            } else {
                PriorityPlan::default_for(p)
            };
        }
        let unsched = |s: u32| s.min(unsched_bytes) as u64;
        let unsched_total: u64 = sizes.iter().map(|&s| unsched(s)).sum();
        // Share of levels for unscheduled traffic, rounded to the nearest
        // integer; each kind gets at least one level.
        let levels = ((unsched_total as f64 / total as f64) * p as f64).round() as u8;
        let unsched_levels = levels.clamp(1, p - 1);
        PriorityPlan::from_sorted_sizes_with_levels(sorted, unsched_bytes, p, unsched_levels)
    }

    /// An allocation with `unsched_levels` unscheduled levels (clamped to
    /// leave each kind at least one of the `num_priorities`), cut so that
    /// each carries an equal share of the unscheduled bytes of the sizes
    /// `sorted` (ascending); with no sizes, Linux's default boundaries
    /// (200, 2,800, 15,000 B) as far as there are levels for them.
    pub fn from_sorted_sizes_with_levels(
        sorted: &[u32],
        unsched_bytes: u32,
        num_priorities: u8,
        unsched_levels: u8,
    ) -> PriorityPlan {
        debug_assert!(sorted.windows(2).all(|w| w[0] <= w[1]));
        let p = num_priorities.clamp(1, MAX_PRIORITIES as u8);
        if p == 1 {
            return PriorityPlan::single_level();
        }
        let unsched_levels = unsched_levels.clamp(1, p - 1);
        let sched_levels = p - unsched_levels;
        let unsched = |s: u32| s.min(unsched_bytes) as u64;
        let unsched_total: u64 = sorted.iter().map(|&s| unsched(s)).sum();
        if unsched_total == 0 {
            let n = (unsched_levels as usize - 1).min(LINUX_DEFAULT_CUTOFFS.len());
            return PriorityPlan::from_boundaries(p, sched_levels, &LINUX_DEFAULT_CUTOFFS[..n]);
        }
        // Equal unscheduled bytes per level: walk the sizes in order and cut
        // where the running sum crosses each 1/n-th of the total.
        let mut boundaries = Vec::with_capacity(unsched_levels as usize - 1);
        let mut acc = 0u64;
        let mut next = 1u64;
        for &s in sorted {
            acc += unsched(s);
            while next < unsched_levels as u64
                && acc * unsched_levels as u64 >= next * unsched_total
            {
                boundaries.push(s);
                next += 1;
            }
        }
        PriorityPlan::from_boundaries(p, sched_levels, &boundaries)
    }

    /// Levels given to unscheduled packets (the rest are scheduled).
    pub fn unsched_levels(&self, num_priorities: u8) -> u8 {
        num_priorities
            .clamp(1, MAX_PRIORITIES as u8)
            .saturating_sub(self.sched_levels)
    }

    /// True when `other` differs enough to be worth sending to every sender:
    /// a different level split, or a cutoff that moved by more than 20%.
    pub fn differs_significantly(&self, other: &PriorityPlan) -> bool {
        if self.sched_levels != other.sched_levels {
            return true;
        }
        self.cutoffs
            .iter()
            .zip(other.cutoffs.iter())
            .any(|(&a, &b)| {
                let (lo, hi) = (a.min(b) as u64, a.max(b) as u64);
                hi * 5 > lo * 6
            })
    }
}

/// The number of unscheduled levels among `num_priorities` for a measured
/// unscheduled-byte ratio of `permille`‰, given `current` unscheduled
/// levels (thesis §3.5.1 with ByteDance's measured ratio, seed 004 §5):
/// `round(ratio × levels)`, at least 1 and leaving at least 1 scheduled
/// level when there are 2 or more. Hysteresis: the count changes only when
/// `ratio × levels` lies more than half a level plus `hysteresis`
/// thousandths of a level away from `current`, so a ratio that wanders
/// around a rounding edge does not make the split flap. With one level,
/// 0 (the single level is shared).
pub fn unsched_levels_from_ratio(
    permille: u16,
    num_priorities: u8,
    current: u8,
    hysteresis: u32,
) -> u8 {
    let p = num_priorities.clamp(1, MAX_PRIORITIES as u8);
    if p == 1 {
        return 0;
    }
    // Levels in thousandths: ratio (‰) × levels.
    let exact = permille.min(1000) as i64 * p as i64;
    let target = ((exact + 500) / 1000).clamp(1, p as i64 - 1) as u8;
    let current = current.clamp(1, p - 1);
    let distance = (exact - current as i64 * 1000).abs();
    if distance <= 500 + hysteresis.min(1000) as i64 {
        current
    } else {
        target
    }
}

/// The level a sender uses for the unscheduled bytes of a message of
/// `length` bytes, given the receiver's cutoffs: the highest level whose
/// cutoff is at least the length, never above `num_priorities - 1`.
pub fn unsched_priority(cutoffs: &[u32; MAX_PRIORITIES], length: u32, num_priorities: u8) -> u8 {
    let top = num_priorities.clamp(1, MAX_PRIORITIES as u8) - 1;
    let level = (1..MAX_PRIORITIES)
        .rev()
        .find(|&i| cutoffs[i] != 0 && cutoffs[i] >= length)
        .unwrap_or(0) as u8;
    level.min(top)
}

/// The scheduled level for the active message of SRPT rank `rank` (0 =
/// shortest) among `active` messages: the active messages occupy the lowest
/// levels, the shortest the highest of them; when there are more active
/// messages than levels the shortest share the top scheduled level.
pub fn sched_priority(rank: usize, active: usize, sched_levels: u8) -> u8 {
    let from_longest = active.saturating_sub(1).saturating_sub(rank);
    from_longest.min(sched_levels.max(1) as usize - 1) as u8
}

/// A bounded window of recent incoming message lengths for recomputing the
/// cutoffs.
#[derive(Debug, Clone)]
pub struct SizeSampler {
    sizes: Vec<u32>,
    next: usize,
    capacity: usize,
    /// Lengths recorded ever.
    recorded: u64,
    /// `sizes` in ascending order as of the last [`SizeSampler::sorted`],
    /// and the lengths added to and dropped from `sizes` since.
    sorted: Vec<u32>,
    added: Vec<u32>,
    dropped: Vec<u32>,
    /// More than `capacity` lengths turned over since the last sort: the
    /// next [`SizeSampler::sorted`] sorts `sizes` afresh, and `added` and
    /// `dropped` stay empty until then (so that a sampler nobody reads
    /// costs O(1) per length).
    resort: bool,
    /// The latest length recorded, not yet in `sizes`: taken in by
    /// [`SizeSampler::settle`], the next [`SizeSampler::record`], or
    /// anything that reads the lengths (a length is recorded as a message
    /// starts, on the way from its first packet to the answer).
    pending: Option<u32>,
}

impl SizeSampler {
    /// Remembers at most `capacity` lengths.
    pub fn new(capacity: usize) -> SizeSampler {
        SizeSampler {
            sizes: Vec::new(),
            next: 0,
            capacity: capacity.max(1),
            recorded: 0,
            sorted: Vec::new(),
            added: Vec::new(),
            dropped: Vec::new(),
            resort: false,
            pending: None,
        }
    }

    /// Records one message length, replacing the oldest when full. (It
    /// waits in a slot until [`SizeSampler::settle`] or the next call; an
    /// earlier one there goes in first. Every reader settles first.)
    #[inline]
    pub fn record(&mut self, length: u32) {
        self.settle();
        self.pending = Some(length);
    }

    /// Takes in the length that waits in the slot, if any (see
    /// [`SizeSampler::record`]). Nothing the sampler answers changes.
    #[inline]
    pub fn settle(&mut self) {
        if let Some(length) = self.pending.take() {
            self.take_in(length);
        }
    }

    /// True while a recorded length waits for [`SizeSampler::settle`].
    pub fn unsettled(&self) -> bool {
        self.pending.is_some()
    }

    /// [`SizeSampler::record`]'s work.
    fn take_in(&mut self, length: u32) {
        self.recorded += 1;
        let old = if self.sizes.len() < self.capacity {
            self.sizes.push(length);
            None
        } else {
            let old = std::mem::replace(&mut self.sizes[self.next], length);
            self.next = (self.next + 1) % self.capacity;
            Some(old)
        };
        if self.resort {
            return;
        }
        if self.added.len() >= self.capacity {
            // Everything turned over since the last sort: sort afresh then.
            self.resort = true;
            self.added.clear();
            self.dropped.clear();
            return;
        }
        self.dropped.extend(old);
        self.added.push(length);
    }

    /// The lengths remembered, in ascending order. Between two calls only
    /// the lengths recorded in between are sorted and merged in, so a call
    /// after `k` new lengths costs O(n + k log k), not O(n log n).
    pub fn sorted(&mut self) -> &[u32] {
        self.settle();
        if self.resort {
            self.resort = false;
            self.sorted.clear();
            self.sorted.extend_from_slice(&self.sizes);
            self.sorted.sort_unstable();
        } else if !self.added.is_empty() {
            self.added.sort_unstable();
            self.dropped.sort_unstable();
            let mut out = Vec::with_capacity(self.sizes.len());
            let (mut a, mut d) = (self.added.iter().peekable(), self.dropped.iter().peekable());
            for &v in &self.sorted {
                // Skip one kept copy per dropped one (a multiset difference).
                while d.next_if(|&&x| x < v).is_some() {}
                if d.next_if(|&&x| x == v).is_some() {
                    continue;
                }
                while let Some(&x) = a.next_if(|&&x| x <= v) {
                    out.push(x);
                }
                out.push(v);
            }
            out.extend(a);
            self.sorted = out;
            self.added.clear();
            self.dropped.clear();
        }
        &self.sorted
    }

    /// The lengths remembered.
    pub fn sizes(&mut self) -> &[u32] {
        self.settle();
        &self.sizes
    }

    /// Lengths recorded since the sampler was made: an unchanged count
    /// means unchanged [`SizeSampler::sizes`].
    pub fn recorded(&self) -> u64 {
        self.recorded + self.pending.is_some() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const U: u32 = CUTOFF_UNLIMITED;

    #[test]
    fn a_recorded_length_waits_in_its_slot_and_counts_at_once() {
        let mut s = SizeSampler::new(3);
        s.record(5);
        assert!(s.unsettled());
        assert_eq!(s.recorded(), 1);
        s.record(1);
        assert_eq!(s.recorded(), 2);
        s.settle();
        assert!(!s.unsettled());
        s.record(3);
        // Every reader takes the slot in first.
        assert_eq!(s.sorted(), &[1, 3, 5]);
        s.record(9);
        assert_eq!(s.sizes(), &[9, 1, 3]);
        assert_eq!(s.recorded(), 4);
    }

    #[test]
    fn sampler_keeps_a_sorted_copy_as_lengths_turn_over() {
        let mut x = 0x2545_F491_u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 5_000) as u32
        };
        let mut s = SizeSampler::new(500);
        // Batches of every size, some larger than the sampler, with
        // repeated values (a multiset).
        for batch in [0usize, 1, 7, 300, 499, 500, 501, 1200, 3, 64] {
            for _ in 0..batch {
                s.record(next());
            }
            let mut want = s.sizes().to_vec();
            want.sort_unstable();
            assert_eq!(s.sorted(), &want[..], "after a batch of {batch}");
            let plan = PriorityPlan::from_sorted_sizes(s.sorted(), 1_000, 8);
            assert_eq!(plan, PriorityPlan::from_sizes(&want, 1_000, 8));
        }
    }

    /// A sampler whose sorted copy nobody asks for keeps no backlog past
    /// one turnover and copies nothing per length (it once copied all of
    /// `sizes` on every length after the first turnover).
    #[test]
    fn sampler_left_unread_keeps_no_backlog() {
        let mut s = SizeSampler::new(100);
        for i in 0..1_000u32 {
            s.record(i);
            assert!(s.added.len() <= 100 && s.dropped.len() <= 100);
            if i > 200 {
                assert!(s.resort && s.added.is_empty() && s.dropped.is_empty());
            }
        }
        let want: Vec<u32> = (900..1_000).collect();
        assert_eq!(s.sorted(), &want[..]);
        s.record(5);
        assert!(!s.resort);
        let mut want2: Vec<u32> = (901..1_000).collect();
        want2.insert(0, 5);
        assert_eq!(s.sorted(), &want2[..]);
    }

    #[test]
    fn linux_defaults_for_eight_levels() {
        let p = PriorityPlan::default_for(8);
        assert_eq!(p.sched_levels, 4);
        assert_eq!(p.cutoffs, [U, 0, 0, 0, U, 15_000, 2_800, 200]);
        assert_eq!(unsched_priority(&p.cutoffs, 100, 8), 7);
        assert_eq!(unsched_priority(&p.cutoffs, 200, 8), 7);
        assert_eq!(unsched_priority(&p.cutoffs, 201, 8), 6);
        assert_eq!(unsched_priority(&p.cutoffs, 15_000, 8), 5);
        assert_eq!(unsched_priority(&p.cutoffs, 15_001, 8), 4);
        assert_eq!(unsched_priority(&p.cutoffs, 10_000_000, 8), 4);
    }

    #[test]
    fn fewer_levels() {
        let one = PriorityPlan::default_for(1);
        assert_eq!(one.sched_levels, 1);
        assert_eq!(unsched_priority(&one.cutoffs, 5, 1), 0);
        let two = PriorityPlan::default_for(2);
        assert_eq!(two.sched_levels, 1);
        assert_eq!(unsched_priority(&two.cutoffs, 5, 2), 1);
        assert_eq!(unsched_priority(&two.cutoffs, 5_000_000, 2), 1);
        // A sender with fewer levels than the receiver's plan clamps.
        let eight = PriorityPlan::default_for(8);
        assert_eq!(unsched_priority(&eight.cutoffs, 5, 4), 3);
    }

    #[test]
    fn split_follows_unscheduled_byte_fraction() {
        // 80% of bytes unscheduled → 6.4 → 6 unscheduled levels, 2 scheduled
        // (the thesis's example). 800 messages of 1,000 B and one of 240,000 B
        // with 40,000 unscheduled: unsched = 800,000 + 40,000 of 1,040,000.
        let mut sizes = vec![1_000u32; 800];
        sizes.push(240_000);
        let plan = PriorityPlan::from_sizes(&sizes, 40_000, 8);
        // 840,000 / 1,040,000 = 0.807 → 6.46 → 6 levels.
        assert_eq!(plan.sched_levels, 2);
        // All-small workload: everything unscheduled, still one scheduled level.
        let plan = PriorityPlan::from_sizes(&[100; 50], 40_000, 8);
        assert_eq!(plan.sched_levels, 1);
        // All-huge workload: still one unscheduled level.
        let plan = PriorityPlan::from_sizes(&[10_000_000; 50], 40_000, 8);
        assert_eq!(plan.sched_levels, 7);
        assert_eq!(plan.cutoffs, [U, 0, 0, 0, 0, 0, 0, U]);
    }

    #[test]
    fn cutoffs_balance_unscheduled_bytes() {
        // Sizes 100, 200, … 1,000 (ten of each), all unscheduled: total
        // 55,000 B. With 8 levels all 8 would be unscheduled, clamped to 7
        // with one scheduled level, so 7 unscheduled levels of ~7,857 B each.
        let mut sizes = Vec::new();
        for s in (100..=1_000).step_by(100) {
            sizes.extend(std::iter::repeat_n(s, 10));
        }
        let plan = PriorityPlan::from_sizes(&sizes, 40_000, 8);
        assert_eq!(plan.sched_levels, 1);
        // Cumulative bytes: 100→1,000 200→3,000 300→6,000 400→10,000
        // 500→15,000 600→21,000 700→28,000 800→36,000 900→45,000 1000→55,000.
        // Boundaries at k/7 of 55,000: 7,857→400, 15,714→600, 23,571→700,
        // 31,429→800, 39,286→900, 47,143→1,000.
        assert_eq!(plan.cutoffs, [U, U, 1_000, 900, 800, 700, 600, 400]);
        assert_eq!(unsched_priority(&plan.cutoffs, 400, 8), 7);
        assert_eq!(unsched_priority(&plan.cutoffs, 401, 8), 6);
        assert_eq!(unsched_priority(&plan.cutoffs, 1_001, 8), 1);
    }

    #[test]
    fn two_unscheduled_levels_split_bytes_in_half() {
        // Half the messages 100 B, half 10,000 B, unsched 10,000: bytes are
        // 99% in the big ones; 8 levels → round(8 × 1.0) → clamped 7.
        // With 2 levels: 1 unscheduled (the lowest takes all), 1 scheduled.
        let mut sizes = vec![100u32; 100];
        sizes.extend(vec![10_000u32; 100]);
        let plan = PriorityPlan::from_sizes(&sizes, 10_000, 2);
        assert_eq!(plan.sched_levels, 1);
        assert_eq!(plan.cutoffs[1], U);
        // With 4 levels and a 50% unscheduled share: 2 + 2, and the boundary
        // sits where half the unscheduled bytes are reached.
        let mut sizes = vec![1_000u32; 100]; // 100,000 unscheduled bytes
        sizes.push(4_000); // its 2,000 unsched; rest scheduled
        sizes.extend(vec![3_000u32; 1]);
        let plan = PriorityPlan::from_sizes(&[1_000, 1_000, 2_000, 40_000], 2_000, 4);
        // unsched: 1,000 + 1,000 + 2,000 + 2,000 = 6,000 of 44,000 = 14% → 0.55 → 1 level.
        assert_eq!(plan.sched_levels, 3);
        let _ = sizes;
    }

    #[test]
    fn scheduled_levels_lowest_free_shortest_highest() {
        // Three active messages on four scheduled levels use levels 0..3,
        // shortest (rank 0) at level 2.
        assert_eq!(sched_priority(0, 3, 4), 2);
        assert_eq!(sched_priority(1, 3, 4), 1);
        assert_eq!(sched_priority(2, 3, 4), 0);
        // A single active message sits on the lowest level.
        assert_eq!(sched_priority(0, 1, 4), 0);
        // More messages than levels: the shortest share the top level.
        assert_eq!(sched_priority(0, 4, 3), 2);
        assert_eq!(sched_priority(1, 4, 3), 2);
        assert_eq!(sched_priority(2, 4, 3), 1);
        assert_eq!(sched_priority(3, 4, 3), 0);
    }

    #[test]
    fn ratio_sets_the_unscheduled_levels_within_bounds() {
        // No hysteresis: round(ratio × 8) from any start.
        for (ratio, want) in [(0, 1), (60, 1), (300, 2), (500, 4), (810, 6), (1000, 7)] {
            for current in 0..=8 {
                assert_eq!(
                    unsched_levels_from_ratio(ratio, 8, current, 0),
                    want,
                    "ratio {ratio} from {current}"
                );
            }
        }
        // At least one of each with two levels; one level is shared.
        assert_eq!(unsched_levels_from_ratio(0, 2, 1, 250), 1);
        assert_eq!(unsched_levels_from_ratio(1000, 2, 1, 250), 1);
        assert_eq!(unsched_levels_from_ratio(500, 1, 0, 250), 0);
        // A ratio above 1000 (never measured so) counts as 1000.
        assert_eq!(unsched_levels_from_ratio(u16::MAX, 8, 1, 0), 7);
    }

    #[test]
    fn ratio_split_has_hysteresis() {
        // 8 levels, current 3 unscheduled; hysteresis 250‰ of a level: the
        // count moves only beyond 3 ± 0.75 levels (ratio 281‰ .. 469‰).
        let h = 250;
        assert_eq!(unsched_levels_from_ratio(375, 8, 3, h), 3);
        // 3.5 levels would round to 4 without hysteresis; kept at 3.
        assert_eq!(unsched_levels_from_ratio(438, 8, 3, h), 3);
        assert_eq!(unsched_levels_from_ratio(468, 8, 3, h), 3);
        assert_eq!(unsched_levels_from_ratio(469, 8, 3, h), 4);
        assert_eq!(unsched_levels_from_ratio(282, 8, 3, h), 3);
        assert_eq!(unsched_levels_from_ratio(280, 8, 3, h), 2);
        // A ratio wandering around an edge (437–563‰: 3.5–4.5 levels)
        // does not flap once at 4.
        let mut cur = 3;
        for r in [470, 440, 560, 437, 563, 500, 440] {
            cur = unsched_levels_from_ratio(r, 8, cur, h);
            assert_eq!(cur, 4, "at {r}");
        }
        // A big move jumps straight to its rounded count.
        assert_eq!(unsched_levels_from_ratio(900, 8, 3, h), 7);
        // Out-of-range current counts are clamped first.
        assert_eq!(unsched_levels_from_ratio(0, 8, 0, h), 1);
    }

    #[test]
    fn plan_with_given_levels() {
        // 4 unscheduled levels of 8 from a sample: equal bytes per level.
        let sizes: Vec<u32> = (1..=100).map(|i| i * 100).collect();
        let plan = PriorityPlan::from_sorted_sizes_with_levels(&sizes, 40_000, 8, 4);
        assert_eq!(plan.sched_levels, 4);
        assert_eq!(plan.unsched_levels(8), 4);
        assert_eq!(plan.cutoffs[0], U);
        assert_eq!(plan.cutoffs[4], U);
        assert!(plan.cutoffs[7] < plan.cutoffs[6] && plan.cutoffs[6] < plan.cutoffs[5]);
        // No sample: Linux's boundaries as far as levels allow.
        let plan = PriorityPlan::from_sorted_sizes_with_levels(&[], 40_000, 8, 2);
        assert_eq!(plan.cutoffs, [U, 0, 0, 0, 0, 0, U, 200]);
        let plan = PriorityPlan::from_sorted_sizes_with_levels(&[], 40_000, 8, 6);
        assert_eq!(plan.sched_levels, 2);
        assert_eq!(plan.cutoffs, [U, 0, U, 0, 0, 15_000, 2_800, 200]);
        assert_eq!(unsched_priority(&plan.cutoffs, 20_000, 8), 2);
        // Levels are clamped: never all unscheduled, never none.
        assert_eq!(
            PriorityPlan::from_sorted_sizes_with_levels(&sizes, 40_000, 8, 8).sched_levels,
            1
        );
        assert_eq!(
            PriorityPlan::from_sorted_sizes_with_levels(&sizes, 40_000, 8, 0).sched_levels,
            7
        );
        assert_eq!(
            PriorityPlan::from_sorted_sizes_with_levels(&sizes, 40_000, 1, 1),
            PriorityPlan::default_for(1)
        );
        // Homa's rule is this one with the levels from the sample.
        assert_eq!(
            PriorityPlan::from_sorted_sizes(&sizes, 40_000, 8),
            PriorityPlan::from_sorted_sizes_with_levels(&sizes, 40_000, 8, 7)
        );
    }

    #[test]
    fn significant_change_detection() {
        let a = PriorityPlan::default_for(8);
        assert!(!a.differs_significantly(&a));
        let mut b = a;
        b.cutoffs[7] = 230; // 15% bigger
        assert!(!a.differs_significantly(&b));
        b.cutoffs[7] = 260; // 30% bigger
        assert!(a.differs_significantly(&b));
        let mut c = a;
        c.sched_levels = 3;
        assert!(a.differs_significantly(&c));
    }

    #[test]
    fn sampler_is_bounded() {
        let mut s = SizeSampler::new(3);
        for i in 0..10 {
            s.record(i);
        }
        let mut v = s.sizes().to_vec();
        v.sort();
        assert_eq!(v, vec![7, 8, 9]);
    }
}
