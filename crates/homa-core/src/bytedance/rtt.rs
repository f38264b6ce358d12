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

/// RTT samples of one peer: the minimum and a smoothed recent value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RttEstimator {
    /// Smallest RTT sampled (ns; the paper's `peer_rtt_min`); 0 before the
    /// first sample. It never rises: queueing can only add to a sample.
    pub min_ns: Nanos,
    /// Smoothed recent RTT (ns; `peer_rtt_recent`): the first sample, then
    /// `recent + (sample − recent) × weight / 1000` per sample; 0 before the
    /// first sample.
    pub recent_ns: Nanos,
    /// Samples taken.
    pub samples: u64,
}

impl RttEstimator {
    /// Takes one sample of `rtt_ns` (at least 1 ns is counted), weighted
    /// `weight`‰ (clamped to 1..=1000) in the smoothed value.
    pub fn sample(&mut self, rtt_ns: Nanos, weight: u32) {
        let rtt = rtt_ns.max(1);
        if self.samples == 0 {
            self.min_ns = rtt;
            self.recent_ns = rtt;
        } else {
            self.min_ns = self.min_ns.min(rtt);
            let w = weight.clamp(1, 1000) as i128;
            let recent = self.recent_ns as i128;
            let next = recent + (rtt as i128 - recent) * w / 1000;
            self.recent_ns = next.clamp(1, u64::MAX as i128) as u64;
        }
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
        e.sample(10_000, 500);
        assert_eq!((e.min_ns, e.recent_ns, e.samples), (10_000, 10_000, 1));
        // Weight 1/2: the mean of the previous value and the sample.
        e.sample(30_000, 500);
        assert_eq!((e.min_ns, e.recent_ns), (10_000, 20_000));
        e.sample(4_000, 500);
        assert_eq!((e.min_ns, e.recent_ns), (4_000, 12_000));
        // Weight 1/8 moves an eighth of the way.
        e.sample(20_000, 125);
        assert_eq!(e.recent_ns, 13_000);
        // Weight 1000: the sample itself; 0 is clamped to 1.
        e.sample(7_000, 5_000);
        assert_eq!(e.recent_ns, 7_000);
        e.sample(0, 1000);
        assert_eq!((e.min_ns, e.recent_ns), (1, 1));
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
