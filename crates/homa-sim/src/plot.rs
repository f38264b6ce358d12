//! Plots of [`RunReport`]s: the slowdown spectrum of a run as a plot
//! series and its x-axis size ticks. The drawing itself (PNG slowdown, bar
//! and line plots with an embedded font) is [`homa_measure::plot`],
//! re-exported here.

use crate::report::RunReport;
use homa_measure::table::fmt_size;

pub use homa_measure::plot::{
    bar_plot, line_plot, series_color, slowdown_plot, PlotError, Series, HEIGHT, WIDTH,
};

/// Which slowdown statistic [`spectrum_series`] plots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stat {
    /// Median.
    P50,
    /// 99th percentile.
    P99,
    /// Mean.
    Mean,
}

impl Stat {
    /// Short name used in legends ("p50", "p99", "mean").
    pub fn name(self) -> &'static str {
        match self {
            Stat::P50 => "p50",
            Stat::P99 => "p99",
            Stat::Mean => "mean",
        }
    }
}

/// The slowdown spectrum of a run as a series: one point per bucket, at the
/// midpoint of its percentile range (×100, so 0..100) and the chosen
/// statistic. The label is `"<protocol> <label> <load%> <stat>"`.
pub fn spectrum_series(report: &RunReport, which: Stat) -> Series {
    let points = report
        .buckets
        .iter()
        .map(|b| {
            let x = (b.percentile_lo + b.percentile_hi) / 2.0 * 100.0;
            let s = &b.slowdown;
            let y = match which {
                Stat::P50 => s.p50,
                Stat::P99 => s.p99,
                Stat::Mean => s.mean,
            };
            (x, y)
        })
        .collect();
    let load = crate::output::fmt_percent(report.load);
    let label = [
        report.protocol.as_str(),
        report.label.as_str(),
        load.as_str(),
        which.name(),
    ]
    .iter()
    .filter(|s| !s.is_empty())
    .copied()
    .collect::<Vec<_>>()
    .join(" ");
    Series { label, points }
}

/// Tick marks for the x axis of [`slowdown_plot`]: `n` positions evenly
/// spread over 0..100 (with `n = 11`: 0, 10, ..., 100), each labelled with
/// the message size at that percentile in compact form (`"100B"`, `"1.2K"`,
/// `"1M"`). The size is the largest message of the bucket that covers the
/// percentile (the one ending at or after it); at 0 it is the smallest
/// message. Empty if the report has no buckets.
pub fn size_ticks(report: &RunReport, n: usize) -> Vec<(f64, String)> {
    let buckets = &report.buckets;
    let (Some(first), Some(last)) = (buckets.first(), buckets.last()) else {
        return Vec::new();
    };
    let n = n.max(2);
    (0..n)
        .map(|i| {
            let p = 100.0 * i as f64 / (n - 1) as f64;
            let size = if i == 0 {
                first.size_lo
            } else {
                buckets
                    .iter()
                    .find(|b| b.percentile_hi * 100.0 >= p - 1e-9)
                    .unwrap_or(last)
                    .size_hi
            };
            (p, fmt_size(size))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::tests::sample_report;

    #[test]
    fn spectrum_series_and_ticks() {
        let r = sample_report();
        let s = spectrum_series(&r, Stat::P99);
        assert_eq!(s.label, "homa 8 priorities, overcommit 2 80% p99");
        assert_eq!(s.points, vec![(25.0, 2.75), (75.0, 9.5)]);
        assert_eq!(spectrum_series(&r, Stat::P50).points[1], (75.0, 1.9));
        assert_eq!(spectrum_series(&r, Stat::Mean).points[0], (25.0, 1.3));
        let ticks = size_ticks(&r, 11);
        assert_eq!(ticks.len(), 11);
        assert_eq!(ticks[0], (0.0, "40B".to_string()));
        assert_eq!(ticks[5], (50.0, "1.2K".to_string()));
        assert_eq!(ticks[6].1, "2.5M");
        assert_eq!(ticks[10], (100.0, "2.5M".to_string()));
        assert!(size_ticks(&RunReport::default(), 11).is_empty());
    }
}
