//! The per-peer RTT estimator and the congestion thresholds derived from it
//! (seed 004 §2–3).
//!
//! Units: every time is in nanoseconds (the core's clock), link rates in
//! Mbit/s, sizes in bytes. The paper computes in microseconds
//! (`bytes × 8 / Mbit/s`); nanoseconds keep the sub-microsecond RTTs of a
//! rack and the GSO delay of a small batch on a fast link from rounding to
//! zero.

use crate::Nanos;

/// Nanoseconds `bytes` take on a link of `mbps` Mbit/s (0 for an unknown
/// rate).
pub fn wire_time_ns(bytes: u64, mbps: u64) -> Nanos {
    if mbps == 0 {
        return 0;
    }
    (bytes as u128 * 8_000 / mbps as u128).min(u64::MAX as u128) as u64
}

/// Bytes a link of `mbps` Mbit/s carries in `ns` nanoseconds.
pub fn bytes_in(ns: Nanos, mbps: u64) -> u64 {
    (ns as u128 * mbps as u128 / 8_000).min(u64::MAX as u128) as u64
}

/// One RTT sample as the windowed minimum keeps it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Timed {
    /// When it was taken (ns, the caller's clock).
    at: Nanos,
    /// The RTT (ns).
    rtt: Nanos,
}

/// The minimum RTT over the last `window` of time, in O(1) state: Kathleen
/// Nichols' windowed min-filter as Linux's `lib/win_minmax.c` (BBR's
/// `min_rtt`) has it. It keeps the best sample and the best of the later
/// samples from the second and last parts of the window, so when the best
/// one ages out a later minimum takes over, not the next sample alone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct WindowedMin {
    /// Best, second and third choice, oldest first.
    s: [Timed; 3],
}

impl WindowedMin {
    fn reset(&mut self, v: Timed) -> Nanos {
        self.s = [v; 3];
        v.rtt
    }

    /// Adds a sample `v` taken at `v.at ≥` every earlier one; returns the
    /// minimum over the last `window` ns.
    fn update(&mut self, window: Nanos, v: Timed) -> Nanos {
        if v.rtt <= self.s[0].rtt || v.at.saturating_sub(self.s[2].at) > window {
            // A new minimum, or nothing left in the window.
            return self.reset(v);
        }
        if v.rtt <= self.s[1].rtt {
            self.s[2] = v;
            self.s[1] = v;
        } else if v.rtt <= self.s[2].rtt {
            self.s[2] = v;
        }
        let dt = v.at.saturating_sub(self.s[0].at);
        if dt > window {
            // The best choice aged out: the later ones move up.
            self.s[0] = self.s[1];
            self.s[1] = self.s[2];
            self.s[2] = v;
            if v.at.saturating_sub(self.s[0].at) > window {
                self.s[0] = self.s[1];
                self.s[1] = self.s[2];
                self.s[2] = v;
            }
        } else if self.s[1].at == self.s[0].at && dt > window / 4 {
            // A quarter of the window passed with no second choice.
            self.s[2] = v;
            self.s[1] = v;
        } else if self.s[2].at == self.s[1].at && dt > window / 2 {
            // Half of it passed with no third choice.
            self.s[2] = v;
        }
        self.s[0].rtt
    }
}

/// RTT samples of one peer: the windowed minimum, a smoothed recent value
/// and the latest sample.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RttEstimator {
    /// Smallest RTT sampled in the last `rtt_min_window_ns` (ns; the
    /// paper's `peer_rtt_min`); 0 before the first sample. Queueing only
    /// adds to a sample, but a route may change: a minimum older than the
    /// window gives way to the best later sample (see `WindowedMin`).
    pub min_ns: Nanos,
    /// Smoothed recent RTT (ns; `peer_rtt_recent`): the first sample, then
    /// `recent + (sample − recent) × weight / 1000` per sample; 0 before the
    /// first sample.
    pub recent_ns: Nanos,
    /// The latest sample itself (ns); 0 before the first.
    pub last_ns: Nanos,
    /// When the latest sample was taken (ns, the caller's clock).
    pub last_at: Nanos,
    /// Samples taken.
    pub samples: u64,
    /// The windowed minimum's state.
    window: WindowedMin,
}

impl RttEstimator {
    /// Takes one sample of `rtt_ns` (at least 1 ns is counted) at `now`
    /// (ns, never earlier than the previous sample's `now`), weighted
    /// `weight`‰ (clamped to 1..=1000) in the smoothed value; `rtt_min`
    /// becomes the minimum over the last `window_ns` (at least 1 ns).
    pub fn sample(&mut self, now: Nanos, rtt_ns: Nanos, weight: u32, window_ns: Nanos) {
        let rtt = rtt_ns.max(1);
        // (A caller's clock that went backwards counts as no time passed.)
        let now = now.max(self.last_at);
        let v = Timed { at: now, rtt };
        if self.samples == 0 {
            self.min_ns = self.window.reset(v);
            self.recent_ns = rtt;
        } else {
            self.min_ns = self.window.update(window_ns.max(1), v);
            let w = weight.clamp(1, 1000) as i128;
            let recent = self.recent_ns as i128;
            let next = recent + (rtt as i128 - recent) * w / 1000;
            self.recent_ns = next.clamp(1, u64::MAX as i128) as u64;
        }
        self.last_ns = rtt;
        self.last_at = now;
        self.samples += 1;
    }

    /// True once a sample was taken.
    pub fn has_sample(&self) -> bool {
        self.samples > 0
    }
}

/// Where a smoothed RTT falls among the thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Band {
    /// `recent ≤ rtt_mid`: the path is clear.
    Clear,
    /// `rtt_mid < recent ≤ rtt_high`: queues are building.
    Rising,
    /// `recent > rtt_high`: congested.
    Congested,
}

/// The per-peer thresholds (ns) of seed 004 §3.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    /// `rtt_min` the thresholds were computed from (ns).
    pub min_ns: Nanos,
    /// Time one GSO batch takes on the path's link (ns).
    pub gso_delay_ns: Nanos,
    /// `rtt_low = 2 × (rtt_min + gso_delay)` (ns).
    pub low_ns: Nanos,
    /// `rtt_mid = 2 × rtt_low` (ns).
    pub mid_ns: Nanos,
    /// `rtt_high = 8 × rtt_min`, raised to `rtt_mid` when the GSO delay
    /// exceeds `rtt_min` (ns), so the bands stay ordered.
    pub high_ns: Nanos,
}

impl Thresholds {
    /// The thresholds for a path of minimum RTT `min_ns` whose data packets
    /// leave in GSO batches that take `gso_delay_ns` on the wire.
    pub fn new(min_ns: Nanos, gso_delay_ns: Nanos) -> Thresholds {
        let low_ns = min_ns.saturating_add(gso_delay_ns).saturating_mul(2);
        let mid_ns = low_ns.saturating_mul(2);
        Thresholds {
            min_ns,
            gso_delay_ns,
            low_ns,
            mid_ns,
            high_ns: min_ns.saturating_mul(8).max(mid_ns),
        }
    }

    /// The band of a smoothed RTT `recent_ns`.
    pub fn band(&self, recent_ns: Nanos) -> Band {
        if recent_ns <= self.mid_ns {
            Band::Clear
        } else if recent_ns <= self.high_ns {
            Band::Rising
        } else {
            Band::Congested
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_convert_both_ways() {
        // 1,500 B at 10 Gbit/s: 1.2 µs.
        assert_eq!(wire_time_ns(1_500, 10_000), 1_200);
        // 64 KB at 25 Gbit/s: ~21 µs (the notes' example).
        assert_eq!(wire_time_ns(65_536, 25_000), 20_971);
        assert_eq!(wire_time_ns(1_500, 0), 0);
        // 10 µs at 100 Gbit/s: 125,000 B.
        assert_eq!(bytes_in(10_000, 100_000), 125_000);
        assert_eq!(bytes_in(u64::MAX, u64::MAX), u64::MAX);
    }

    #[test]
    fn first_sample_sets_both_then_min_and_ewma() {
        let mut e = RttEstimator::default();
        assert!(!e.has_sample());
        e.sample(0, 10_000, 500, W);
        assert_eq!((e.min_ns, e.recent_ns, e.samples), (10_000, 10_000, 1));
        // Weight 1/2: the mean of the previous value and the sample.
        e.sample(1, 30_000, 500, W);
        assert_eq!((e.min_ns, e.recent_ns), (10_000, 20_000));
        assert_eq!((e.last_ns, e.last_at), (30_000, 1));
        e.sample(2, 4_000, 500, W);
        assert_eq!((e.min_ns, e.recent_ns), (4_000, 12_000));
        // Weight 1/8 moves an eighth of the way.
        e.sample(3, 20_000, 125, W);
        assert_eq!(e.recent_ns, 13_000);
        // Weight 1000: the sample itself; 0 is clamped to 1.
        e.sample(4, 7_000, 5_000, W);
        assert_eq!(e.recent_ns, 7_000);
        e.sample(5, 0, 1000, W);
        assert_eq!((e.min_ns, e.recent_ns), (1, 1));
    }

    /// Ten seconds, the default window.
    const W: Nanos = 10_000_000_000;

    #[test]
    fn rtt_min_expires_after_its_window() {
        let mut e = RttEstimator::default();
        // A short path, then a route change to one four times as long.
        e.sample(0, 10_000, 500, W);
        for i in 1..=101u64 {
            e.sample(i * 100_000_000, 40_000, 500, W);
            if i * 100_000_000 <= W {
                assert_eq!(e.min_ns, 10_000, "within the window at {i}");
            }
        }
        // 10 s after the 10 µs sample, the minimum is the new path's.
        assert_eq!(e.min_ns, 40_000);
        // A lower sample is a new minimum at once.
        e.sample(10_200_000_000, 39_000, 500, W);
        assert_eq!(e.min_ns, 39_000);
    }

    #[test]
    fn a_later_minimum_takes_over_not_the_next_sample() {
        let mut e = RttEstimator::default();
        e.sample(0, 10_000, 500, W);
        // A good sample in the second half of the window, then queued ones.
        e.sample(6_000_000_000, 20_000, 500, W);
        e.sample(9_000_000_000, 90_000, 500, W);
        assert_eq!(e.min_ns, 10_000);
        // The 10 µs sample ages out: the 20 µs one (6 s old) is the
        // minimum, not the 95 µs sample that triggers the expiry.
        e.sample(10_500_000_000, 95_000, 500, W);
        assert_eq!(e.min_ns, 20_000);
        // Then the 90 µs one (the best of the last 10 s), and once that is
        // older than the window too, the latest samples'.
        e.sample(16_500_000_000, 95_000, 500, W);
        assert_eq!(e.min_ns, 90_000);
        e.sample(19_500_000_000, 95_000, 500, W);
        assert_eq!(e.min_ns, 95_000);
    }

    #[test]
    fn no_sample_for_longer_than_the_window_restarts_the_minimum() {
        let mut e = RttEstimator::default();
        e.sample(0, 10_000, 500, W);
        e.sample(W + 1, 30_000, 500, W);
        assert_eq!(e.min_ns, 30_000);
        // A clock that goes back is taken as no time passed.
        e.sample(5, 50_000, 500, W);
        assert_eq!((e.min_ns, e.last_at), (30_000, W + 1));
    }

    #[test]
    fn threshold_arithmetic() {
        // rtt_min 10 µs, GSO delay 1 µs.
        let t = Thresholds::new(10_000, 1_000);
        assert_eq!((t.low_ns, t.mid_ns, t.high_ns), (22_000, 44_000, 80_000));
        assert_eq!(t.band(44_000), Band::Clear);
        assert_eq!(t.band(44_001), Band::Rising);
        assert_eq!(t.band(80_000), Band::Rising);
        assert_eq!(t.band(80_001), Band::Congested);
        // A GSO delay above rtt_min would put rtt_mid above 8 × rtt_min:
        // rtt_high is raised to rtt_mid and the middle band is empty.
        let t = Thresholds::new(5_000, 21_000);
        assert_eq!((t.low_ns, t.mid_ns, t.high_ns), (52_000, 104_000, 104_000));
        assert_eq!(t.band(104_000), Band::Clear);
        assert_eq!(t.band(104_001), Band::Congested);
    }
}
