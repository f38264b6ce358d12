//! "No grants above `rtt_high`" (seed 004 §6 and §10, future work; opt-in
//! with [`crate::ByteDanceConfig::no_grants_above_high`]).
//!
//! A receiver withholds new grants from a peer while the peer's path is
//! congested: its smoothed RTT **and** its latest sample are above
//! `rtt_high`. The pause can never stall a message:
//!
//! - the first sample at or below `rtt_high` ends it, even while the
//!   smoothed value is still high (the smoothing is for sizing windows, not
//!   for holding a message back on an old signal);
//! - it ends on its own `stale_ns` after the latest sample, so a lost
//!   probe, a lost answer or a peer that stopped answering cannot hold it;
//! - while it lasts the endpoint keeps probing the peer (probes normally go
//!   only when a new message arrives, and a paused peer may send none), so
//!   a newer sample can arrive.
//!
//! The state is per peer and O(1); the endpoint wakes once per probe
//! interval per *paused* peer holding a message, never scans.

use super::rtt::{RttEstimator, Thresholds};
use crate::Nanos;

/// Until when (ns) grants to a peer with RTT state `rtt` and thresholds
/// `t` stay paused at `now`, or `None` if they are not paused: both the
/// smoothed RTT and the latest sample above `rtt_high`, and that sample
/// taken less than `stale_ns` ago.
pub fn paused_until(
    rtt: &RttEstimator,
    t: &Thresholds,
    stale_ns: Nanos,
    now: Nanos,
) -> Option<Nanos> {
    if !rtt.has_sample() || rtt.recent_ns <= t.high_ns || rtt.last_ns <= t.high_ns {
        return None;
    }
    let until = rtt.last_at.saturating_add(stale_ns.max(1));
    (now < until).then_some(until)
}

/// When the endpoint should look at a paused peer again (ns): when the
/// pause expires (`until`) or the next probe is due (`probe_due`, if the
/// peer can be probed), whichever comes first, never before `now + 1`.
pub fn next_wake(now: Nanos, until: Nanos, probe_due: Option<Nanos>) -> Nanos {
    probe_due
        .map_or(until, |p| p.min(until))
        .max(now.saturating_add(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: Nanos = 10_000_000_000;

    fn thresholds() -> Thresholds {
        // rtt_min 10 µs, no GSO delay: rtt_high 80 µs.
        Thresholds::new(10_000, 0)
    }

    #[test]
    fn paused_only_while_smoothed_and_latest_are_high() {
        let t = thresholds();
        let mut r = RttEstimator::default();
        assert_eq!(paused_until(&r, &t, 4_000_000, 0), None, "no sample");
        r.sample(0, 10_000, 500, W);
        assert_eq!(paused_until(&r, &t, 4_000_000, 0), None, "clear");
        // A queue builds: both the sample and the mean above 80 µs.
        r.sample(1_000_000, 500_000, 500, W);
        assert!(r.recent_ns > t.high_ns);
        assert_eq!(paused_until(&r, &t, 4_000_000, 1_000_000), Some(5_000_000));
        // One sample below rtt_high resumes at once, though the mean is
        // still above it.
        r.sample(2_000_000, 20_000, 500, W);
        assert!(r.recent_ns > t.high_ns, "{}", r.recent_ns);
        assert_eq!(paused_until(&r, &t, 4_000_000, 2_000_000), None);
        // High again: paused again.
        r.sample(3_000_000, 900_000, 500, W);
        assert_eq!(paused_until(&r, &t, 4_000_000, 3_000_000), Some(7_000_000));
        // A high sample with a mean at or below rtt_high is no pause.
        let mut q = RttEstimator::default();
        q.sample(0, 10_000, 500, W);
        q.sample(1, 100_000, 500, W);
        assert!(q.recent_ns <= t.high_ns && q.last_ns > t.high_ns);
        assert_eq!(paused_until(&q, &t, 4_000_000, 1), None);
    }

    #[test]
    fn a_stale_sample_ends_the_pause() {
        let t = thresholds();
        let mut r = RttEstimator::default();
        r.sample(0, 500_000, 500, W);
        r.sample(1_000_000, 500_000, 500, W);
        // rtt_min is the high value itself here: use fixed thresholds.
        assert_eq!(paused_until(&r, &t, 4_000_000, 4_999_999), Some(5_000_000));
        // No newer sample 4 ms after the latest: grants resume.
        assert_eq!(paused_until(&r, &t, 4_000_000, 5_000_000), None);
        assert_eq!(paused_until(&r, &t, 4_000_000, u64::MAX), None);
        // A zero bound is taken as 1 ns.
        assert_eq!(paused_until(&r, &t, 0, 1_000_000), Some(1_000_001));
    }

    #[test]
    fn wakes_for_the_next_probe_or_the_expiry() {
        assert_eq!(next_wake(100, 5_000, Some(1_000)), 1_000);
        assert_eq!(next_wake(100, 5_000, Some(9_000)), 5_000);
        assert_eq!(next_wake(100, 5_000, None), 5_000);
        // A probe already due: the next nanosecond, not a busy loop at now.
        assert_eq!(next_wake(100, 5_000, Some(50)), 101);
    }
}
