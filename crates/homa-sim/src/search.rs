//! The maximum sustainable load: the highest offered load whose traffic the
//! network delivers, found by bisection.
//!
//! Traffic is open-loop, so above capacity the backlog grows for as long as
//! messages keep arriving. A load counts as sustained when, over the second
//! half of the measurement window (so that the backlog a stable network
//! carries has built up already), the messages completed carry at least
//! `threshold` (default 0.98) of the data of the messages generated. At an
//! offered load `L` above the true capacity `C` the ratio tends to `C / L`,
//! so the search can overshoot `C` by at most a factor `1 / threshold`, plus
//! the bisection's step.

use crate::report::RunReport;
use crate::scenario::Scenario;
use crate::sim::SimError;
use serde::{Deserialize, Serialize};

/// One run of the search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadProbe {
    /// Offered load asked for.
    pub load: f64,
    /// Offered load measured in the window.
    pub offered: f64,
    /// Completed ÷ generated message data over the late window.
    pub delivered: f64,
    /// delivered ≥ threshold.
    pub sustained: bool,
    /// Wasted downlink bandwidth.
    pub wasted_bandwidth: f64,
}

/// Result of a search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchResult {
    /// Highest load found sustained.
    pub max_load: f64,
    /// Every run, in the order made.
    pub probes: Vec<LoadProbe>,
}

/// Whether a run's window delivered what it was offered.
pub fn sustained(r: &RunReport, threshold: f64) -> bool {
    r.offered_load > 0.0 && r.late_delivered_ratio >= threshold
}

/// Bisects the load between `lo` and `hi` for `steps` rounds, running
/// `base` through `run` at each probe.
pub fn max_sustainable_load(
    base: &Scenario,
    lo: f64,
    hi: f64,
    steps: u32,
    threshold: f64,
    mut run: impl FnMut(&Scenario) -> Result<RunReport, SimError>,
) -> Result<SearchResult, SimError> {
    let mut probes = Vec::new();
    let mut probe = |load: f64, probes: &mut Vec<LoadProbe>| -> Result<bool, SimError> {
        let mut s = base.clone();
        s.traffic.load = load;
        let r = run(&s)?;
        let ok = sustained(&r, threshold);
        probes.push(LoadProbe {
            load,
            offered: r.offered_load,
            delivered: r.late_delivered_ratio,
            sustained: ok,
            wasted_bandwidth: r.wasted_bandwidth,
        });
        Ok(ok)
    };
    let (mut good, mut bad) = (lo, hi);
    if !probe(lo, &mut probes)? {
        return Ok(SearchResult {
            max_load: 0.0,
            probes,
        });
    }
    if probe(hi, &mut probes)? {
        return Ok(SearchResult {
            max_load: hi,
            probes,
        });
    }
    for _ in 0..steps {
        let mid = (good + bad) / 2.0;
        if probe(mid, &mut probes)? {
            good = mid;
        } else {
            bad = mid;
        }
    }
    Ok(SearchResult {
        max_load: good,
        probes,
    })
}
