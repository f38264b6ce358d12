//! Slowdown of cluster runs, the way the Homa/Linux paper reports it.
//!
//! A run's per-RPC records `(request size, round-trip time)` are divided by
//! the *ideal* round-trip time of an RPC of that size: the minimum measured
//! on the idle testbed with Homa (the paper's denominator, the same for
//! every protocol). Messages are then grouped by size into buckets whose
//! boundaries come from the workload's CDF, so that every run of a
//! workload is cut at the same sizes and the x axis is linear in the
//! number of messages.

use anyhow::{bail, Result};
use homa_measure::buckets::bucket_of;
use homa_measure::quantile::nearest_rank_or_nan;
use homa_measure::SizeDist;
use serde::{Deserialize, Deserializer, Serialize};

/// Reads an `f64` that JSON may hold as `null` (serde_json writes NaN,
/// e.g. an empty bucket's percentile, as `null`).
pub fn f64_or_nan<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// Ideal round-trip time as a function of message size, from measured
/// minimum RTTs at a set of sizes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    /// `(size, ideal RTT in ns)`, ascending in size, non-decreasing in RTT.
    points: Vec<(u64, f64)>,
}

impl Baseline {
    /// Builds the baseline from `(size, minimum RTT ns)` measurements.
    ///
    /// Measurement noise can make a larger message's minimum smaller than
    /// a smaller one's; as a smaller message can always be as fast as a
    /// larger one, each size's ideal is the smallest minimum measured at
    /// that size or above (a non-decreasing envelope).
    pub fn new(mut measured: Vec<(u64, u64)>) -> Result<Baseline> {
        measured.retain(|&(_, ns)| ns > 0);
        if measured.is_empty() {
            bail!("no unloaded round-trip times to compute slowdowns from");
        }
        measured.sort_unstable();
        // Keep the smallest RTT of each size.
        measured.dedup_by_key(|p| p.0);
        let mut points: Vec<(u64, f64)> = measured.iter().map(|&(s, ns)| (s, ns as f64)).collect();
        for i in (0..points.len().saturating_sub(1)).rev() {
            points[i].1 = points[i].1.min(points[i + 1].1);
        }
        Ok(Baseline { points })
    }

    /// The measured points, after the envelope.
    pub fn points(&self) -> &[(u64, f64)] {
        &self.points
    }

    /// Ideal RTT (ns) of an RPC whose request has `size` bytes: linear
    /// between measured sizes, the first point's value below them, and the
    /// last two points' slope above them.
    pub fn ideal_ns(&self, size: u64) -> f64 {
        let p = &self.points;
        let i = p.partition_point(|&(s, _)| s < size);
        if i < p.len() && p[i].0 == size {
            return p[i].1;
        }
        if i == 0 {
            return p[0].1;
        }
        let (a, b) = if i == p.len() {
            if p.len() == 1 {
                return p[0].1;
            }
            (p[p.len() - 2], p[p.len() - 1])
        } else {
            (p[i - 1], p[i])
        };
        let slope = ((b.1 - a.1) / (b.0 - a.0) as f64).max(0.0);
        a.1 + slope * (size - a.0) as f64
    }
}

/// `(size, slowdown)` of every record `(size, rtt_ns)`.
pub fn slowdowns(rpcs: &[(u64, u64)], baseline: &Baseline) -> Vec<(u64, f64)> {
    rpcs.iter()
        .map(|&(size, rtt)| (size, rtt as f64 / baseline.ideal_ns(size)))
        .collect()
}

/// One size range of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bucket {
    /// Smallest size in the range (exclusive bound of the previous bucket + 1).
    pub min_size: u64,
    /// Largest size in the range (inclusive).
    pub max_size: u64,
    /// Percent of the workload's messages below the range.
    #[serde(deserialize_with = "crate::analysis::f64_or_nan")]
    pub lo_pct: f64,
    /// Percent of the workload's messages up to the end of the range.
    #[serde(deserialize_with = "crate::analysis::f64_or_nan")]
    pub hi_pct: f64,
    /// RPCs of the run in the range.
    pub count: usize,
    /// Median slowdown (NaN when empty).
    #[serde(deserialize_with = "crate::analysis::f64_or_nan")]
    pub p50: f64,
    /// 99th-percentile slowdown (NaN when empty).
    #[serde(deserialize_with = "crate::analysis::f64_or_nan")]
    pub p99: f64,
}

impl Bucket {
    /// Where the bucket sits on the x axis (its percentile midpoint).
    pub fn mid_pct(&self) -> f64 {
        (self.lo_pct + self.hi_pct) / 2.0
    }
}

/// Groups `samples` into the buckets ending at `bounds` (see
/// [`homa_measure::buckets::cdf_bounds`]); sizes above the last bound go in the last bucket.
pub fn spectrum(samples: &[(u64, f64)], workload: &SizeDist, bounds: &[u64]) -> Vec<Bucket> {
    let mut per: Vec<Vec<f64>> = vec![Vec::new(); bounds.len()];
    for &(size, sd) in samples {
        per[bucket_of(bounds, size)].push(sd);
    }
    let mut lo_size = 0;
    let mut lo_pct = 0.0;
    bounds
        .iter()
        .zip(per)
        .enumerate()
        .map(|(i, (&hi, mut v))| {
            v.sort_unstable_by(f64::total_cmp);
            let hi_pct = if i + 1 == bounds.len() {
                100.0
            } else {
                workload.cdf(hi) * 100.0
            };
            let b = Bucket {
                min_size: lo_size,
                max_size: hi,
                lo_pct,
                hi_pct,
                count: v.len(),
                p50: nearest_rank_or_nan(&v, 0.5),
                p99: nearest_rank_or_nan(&v, 0.99),
            };
            lo_size = hi + 1;
            lo_pct = hi_pct;
            b
        })
        .collect()
}

/// Slowdown percentiles of the shortest half of the messages: sizes up to
/// the workload's median size.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ShortHalf {
    /// Largest size counted (the workload's median size).
    pub max_size: u64,
    /// RPCs counted.
    pub count: usize,
    /// Median slowdown.
    #[serde(deserialize_with = "crate::analysis::f64_or_nan")]
    pub p50: f64,
    /// 99th-percentile slowdown.
    #[serde(deserialize_with = "crate::analysis::f64_or_nan")]
    pub p99: f64,
}

/// [`ShortHalf`] of `samples`.
pub fn short_half(samples: &[(u64, f64)], workload: &SizeDist) -> ShortHalf {
    let max_size = workload.quantile(0.5);
    let mut v: Vec<f64> = samples
        .iter()
        .filter(|&&(s, _)| s <= max_size)
        .map(|&(_, sd)| sd)
        .collect();
    v.sort_unstable_by(f64::total_cmp);
    ShortHalf {
        max_size,
        count: v.len(),
        p50: nearest_rank_or_nan(&v, 0.5),
        p99: nearest_rank_or_nan(&v, 0.99),
    }
}

/// How a baseline protocol (TCP) compares with Homa, bucket by bucket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// TCP p99 ÷ Homa p99 for the shortest half of the messages.
    #[serde(deserialize_with = "crate::analysis::f64_or_nan")]
    pub short_half_p99_ratio: f64,
    /// TCP p50 ÷ Homa p50 for the shortest half.
    #[serde(deserialize_with = "crate::analysis::f64_or_nan")]
    pub short_half_p50_ratio: f64,
    /// Smallest TCP ÷ Homa ratio over the buckets with data, at p50.
    #[serde(deserialize_with = "crate::analysis::f64_or_nan")]
    pub worst_bucket_p50_ratio: f64,
    /// Smallest TCP ÷ Homa ratio over the buckets with data, at p99.
    #[serde(deserialize_with = "crate::analysis::f64_or_nan")]
    pub worst_bucket_p99_ratio: f64,
    /// Buckets (by upper size) where TCP's p50 or p99 is lower than Homa's.
    pub buckets_better_under_other: Vec<u64>,
}

/// Compares `other` (e.g. TCP) with `homa`; both spectra must come from the
/// same bounds.
pub fn compare(homa: (&ShortHalf, &[Bucket]), other: (&ShortHalf, &[Bucket])) -> Comparison {
    let mut worst50 = f64::INFINITY;
    let mut worst99 = f64::INFINITY;
    let mut better = Vec::new();
    for (h, o) in homa.1.iter().zip(other.1) {
        if h.count == 0 || o.count == 0 {
            continue;
        }
        let r50 = o.p50 / h.p50;
        let r99 = o.p99 / h.p99;
        worst50 = worst50.min(r50);
        worst99 = worst99.min(r99);
        if r50 < 1.0 || r99 < 1.0 {
            better.push(h.max_size);
        }
    }
    Comparison {
        short_half_p99_ratio: other.0.p99 / homa.0.p99,
        short_half_p50_ratio: other.0.p50 / homa.0.p50,
        worst_bucket_p50_ratio: if worst50.is_finite() {
            worst50
        } else {
            f64::NAN
        },
        worst_bucket_p99_ratio: if worst99.is_finite() {
            worst99
        } else {
            f64::NAN
        },
        buckets_better_under_other: better,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use homa_measure::buckets::cdf_bounds;

    fn table() -> SizeDist {
        SizeDist::from_csv_str("t", "size_bytes,cdf\n100,0.5\n1000,0.9\n100000,1\n").unwrap()
    }

    #[test]
    fn baseline_interpolates_and_extrapolates() {
        let b = Baseline::new(vec![(100, 10_000), (1100, 20_000), (2100, 40_000)]).unwrap();
        assert_eq!(b.ideal_ns(50), 10_000.0);
        assert_eq!(b.ideal_ns(100), 10_000.0);
        assert_eq!(b.ideal_ns(600), 15_000.0);
        assert_eq!(b.ideal_ns(3100), 60_000.0);
    }

    #[test]
    fn baseline_is_a_non_decreasing_envelope() {
        // The 500 B probe was unlucky (slower than the 1000 B one).
        let b = Baseline::new(vec![
            (1000, 12_000),
            (500, 15_000),
            (100, 9_000),
            (500, 14_000),
        ])
        .unwrap();
        assert_eq!(
            b.points(),
            &[(100, 9_000.0), (500, 12_000.0), (1000, 12_000.0)]
        );
        assert!(Baseline::new(vec![]).is_err());
        assert!(Baseline::new(vec![(10, 0)]).is_err());
    }

    #[test]
    fn slowdown_divides_by_the_ideal() {
        let b = Baseline::new(vec![(100, 10_000), (1100, 20_000)]).unwrap();
        let s = slowdowns(&[(100, 30_000), (600, 15_000)], &b);
        assert_eq!(s, vec![(100, 3.0), (600, 1.0)]);
    }

    #[test]
    fn spectrum_puts_each_sample_in_its_size_range() {
        let w = table();
        let bounds = cdf_bounds(&w, 1_000_000, 10);
        let mut samples = vec![];
        for i in 1..=100 {
            samples.push((100, i as f64));
        }
        samples.push((1000, 7.0));
        samples.push((100_000, 2.0));
        let sp = spectrum(&samples, &w, &bounds);
        assert_eq!(sp.len(), 3);
        assert_eq!((sp[0].count, sp[0].p50, sp[0].p99), (100, 50.0, 99.0));
        assert_eq!((sp[0].lo_pct, sp[0].hi_pct), (0.0, 50.0));
        assert_eq!(
            (sp[1].min_size, sp[1].max_size, sp[1].p50),
            (101, 1000, 7.0)
        );
        assert_eq!((sp[1].lo_pct, sp[1].hi_pct), (50.0, 90.0));
        assert_eq!((sp[2].count, sp[2].hi_pct), (1, 100.0));
    }

    #[test]
    fn short_half_counts_sizes_up_to_the_median() {
        let w = table();
        let s = short_half(&[(100, 2.0), (100, 4.0), (1000, 50.0)], &w);
        assert_eq!((s.max_size, s.count, s.p50, s.p99), (100, 2, 2.0, 4.0));
    }

    #[test]
    fn comparison_finds_buckets_better_under_tcp() {
        let w = table();
        let bounds = cdf_bounds(&w, 1_000_000, 10);
        let homa = vec![(100, 1.0), (1000, 2.0), (100_000, 3.0)];
        let tcp = vec![(100, 20.0), (1000, 1.5), (100_000, 6.0)];
        let (hs, ts) = (spectrum(&homa, &w, &bounds), spectrum(&tcp, &w, &bounds));
        let (hh, th) = (short_half(&homa, &w), short_half(&tcp, &w));
        let c = compare((&hh, &hs), (&th, &ts));
        assert_eq!(c.short_half_p99_ratio, 20.0);
        assert_eq!(c.worst_bucket_p99_ratio, 0.75);
        assert_eq!(c.buckets_better_under_other, vec![1000]);
    }
}
