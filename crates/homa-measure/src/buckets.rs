//! Size buckets: the two ways the project groups messages by size.
//!
//! * Fixed size classes ([`SIZE_CLASSES`]): the thesis' request-size ranges
//!   (under 300 B, up to one packet, 10 KB, 100 KB, 1 MB, above), used by
//!   the loopback benchmark's per-class latency table.
//! * Workload-relative buckets ([`cdf_bounds`], [`bucket_of`]): cuts of a
//!   workload into equal shares of its messages, so that the x axis of a
//!   slowdown plot is linear in the number of messages.

use crate::cdf::SizeDist;

/// One fixed request-size class of the thesis' plots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizeClass {
    /// Short name, e.g. `"300B-1400B"`.
    pub label: &'static str,
    /// Smallest request size in the class (bytes, inclusive).
    pub min_bytes: u64,
    /// Largest request size in the class (bytes, inclusive).
    pub max_bytes: u64,
}

/// The size classes: under 300 B, 300 B to one packet (1,400 B), one packet
/// to 10 KB, 10 KB to 100 KB, 100 KB to 1 MB, over 1 MB.
pub const SIZE_CLASSES: [SizeClass; 6] = [
    SizeClass {
        label: "<300B",
        min_bytes: 0,
        max_bytes: 299,
    },
    SizeClass {
        label: "300B-1400B",
        min_bytes: 300,
        max_bytes: 1_400,
    },
    SizeClass {
        label: "1400B-10KB",
        min_bytes: 1_401,
        max_bytes: 10_000,
    },
    SizeClass {
        label: "10KB-100KB",
        min_bytes: 10_001,
        max_bytes: 100_000,
    },
    SizeClass {
        label: "100KB-1MB",
        min_bytes: 100_001,
        max_bytes: 1_000_000,
    },
    SizeClass {
        label: ">1MB",
        min_bytes: 1_000_001,
        max_bytes: u64::MAX,
    },
];

/// Index into [`SIZE_CLASSES`] of a request of `size` bytes.
pub fn size_class_index(size: u64) -> usize {
    SIZE_CLASSES
        .iter()
        .position(|b| size <= b.max_bytes)
        .unwrap_or(SIZE_CLASSES.len() - 1)
}

/// Size boundaries of workload-relative buckets: at most `buckets` ranges
/// that cut the workload (sizes truncated at `max_size` bytes) into equal
/// shares of messages; sizes the CDF jumps over merge their buckets.
/// Returns the inclusive upper size (bytes) of each bucket, ascending; the
/// last is `max_size` or the workload's largest size.
pub fn cdf_bounds(workload: &SizeDist, max_size: u64, buckets: usize) -> Vec<u64> {
    let buckets = buckets.max(1);
    let mut bounds: Vec<u64> = (1..=buckets)
        .map(|k| workload.quantile(k as f64 / buckets as f64).min(max_size))
        .collect();
    bounds.dedup();
    bounds
}

/// Index of the bucket ending at one of `bounds` (ascending inclusive upper
/// sizes, as [`cdf_bounds`] returns; not empty) that holds a message of
/// `size` bytes; sizes above the last bound go in the last bucket.
pub fn bucket_of(bounds: &[u64], size: u64) -> usize {
    bounds.partition_point(|&b| b < size).min(bounds.len() - 1)
}

/// Cuts `n` ranked samples into at most `k` groups of (nearly) equal count:
/// the half-open index ranges `[b·n/k, (b+1)·n/k)`, empty ones left out
/// (the spectra's x axis: each group is an equal share of the messages).
pub fn equal_count_ranges(n: usize, k: usize) -> Vec<(usize, usize)> {
    let k = k.min(n.max(1));
    (0..k)
        .map(|b| (b * n / k, (b + 1) * n / k))
        .filter(|(lo, hi)| hi > lo)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_count_ranges_cover_every_sample_once() {
        assert_eq!(equal_count_ranges(10, 3), vec![(0, 3), (3, 6), (6, 10)]);
        assert_eq!(equal_count_ranges(2, 5), vec![(0, 1), (1, 2)]);
        assert_eq!(equal_count_ranges(0, 5), Vec::<(usize, usize)>::new());
        let r = equal_count_ranges(1_000, 20);
        assert_eq!(r.len(), 20);
        assert!(r.windows(2).all(|w| w[0].1 == w[1].0));
        assert_eq!((r[0].0, r[19].1), (0, 1_000));
    }

    #[test]
    fn size_classes_follow_the_thesis() {
        for (size, class) in [
            (0, 0),
            (299, 0),
            (300, 1),
            (1_400, 1),
            (1_401, 2),
            (10_000, 2),
            (100_000, 3),
            (1_000_000, 4),
            (1_000_001, 5),
            (u64::MAX, 5),
        ] {
            assert_eq!(size_class_index(size), class, "size {size}");
            let c = SIZE_CLASSES[class];
            assert!(c.min_bytes <= size && size <= c.max_bytes);
        }
        for pair in SIZE_CLASSES.windows(2) {
            assert_eq!(pair[0].max_bytes + 1, pair[1].min_bytes);
        }
    }

    #[test]
    fn cdf_bounds_follow_the_cdf_and_merge_jumps() {
        let w =
            SizeDist::from_csv_str("t", "size_bytes,cdf\n100,0.5\n1000,0.9\n100000,1\n").unwrap();
        // 10 equal shares: 5 land on 100 B, 4 on 1000 B, 1 on 100 KB.
        assert_eq!(cdf_bounds(&w, 1_000_000, 10), vec![100, 1000, 100_000]);
        // Truncation caps the last bound.
        assert_eq!(cdf_bounds(&w, 10_000, 10), vec![100, 1000, 10_000]);
        let bounds = [100, 1000, 10_000];
        assert_eq!(bucket_of(&bounds, 1), 0);
        assert_eq!(bucket_of(&bounds, 100), 0);
        assert_eq!(bucket_of(&bounds, 101), 1);
        assert_eq!(bucket_of(&bounds, 10_000), 2);
        assert_eq!(bucket_of(&bounds, 1_000_000), 2);
    }
}
