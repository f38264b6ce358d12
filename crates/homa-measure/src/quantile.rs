//! Quantiles of measured samples: one definition, nearest rank, for every
//! tool of the project (simulator spectra, testbed slowdowns, cluster round
//! trips).

/// The value at quantile `q` of ascending `sorted`, by nearest rank: the
/// element of 1-based rank `ceil(q × n)`, clamped to `1..=n` (so `q = 0`
/// gives the smallest value and `q = 1` the largest). `None` when `sorted`
/// is empty. The unit is that of the samples.
pub fn nearest_rank<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// [`nearest_rank`] of `f64` samples, NaN when there are none (the form
/// reports that serialise an empty group's percentile as `null` want).
pub fn nearest_rank_or_nan(sorted: &[f64], q: f64) -> f64 {
    nearest_rank(sorted, q).unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_picks_ceil_of_q_n() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(nearest_rank(&v, 0.5), Some(50.0));
        assert_eq!(nearest_rank(&v, 0.99), Some(99.0));
        assert_eq!(nearest_rank(&v, 0.991), Some(100.0));
        assert_eq!(nearest_rank(&v, 0.0), Some(1.0));
        assert_eq!(nearest_rank(&v, 1.0), Some(100.0));
        assert_eq!(nearest_rank(&v, -1.0), Some(1.0));
        assert_eq!(nearest_rank(&v, 7.0), Some(100.0));
        assert_eq!(nearest_rank(&[3u64], 0.99), Some(3));
        assert_eq!(nearest_rank::<u64>(&[], 0.5), None);
        assert!(nearest_rank_or_nan(&[], 0.5).is_nan());
        assert_eq!(nearest_rank_or_nan(&[1.0, 2.0, 3.0, 4.0], 0.5), 2.0);
    }
}
