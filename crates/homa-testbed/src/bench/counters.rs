//! Switch and Homa counters of a run, summed.

use crate::report::PriorityTotals;
use crate::tc::ClassStats;
use homa_perf::cluster::NodeReport;
use std::collections::BTreeMap;

/// Switch counters summed by priority level, with the sampled peaks.
pub(super) fn priority_totals(
    ports: &[ClassStats],
    peaks: &[(usize, u8, u64)],
) -> Vec<PriorityTotals> {
    let mut by: BTreeMap<u8, PriorityTotals> = BTreeMap::new();
    for c in ports {
        let t = by.entry(c.priority).or_insert(PriorityTotals {
            priority: c.priority,
            ..Default::default()
        });
        t.bytes += c.bytes;
        t.packets += c.packets;
        t.drops += c.drops;
    }
    for &(_, prio, peak) in peaks {
        let t = by.entry(prio).or_insert(PriorityTotals {
            priority: prio,
            ..Default::default()
        });
        t.peak_backlog_bytes = t.peak_backlog_bytes.max(peak);
    }
    by.into_values().rev().collect()
}

/// Homa counters worth reporting, summed over hosts and endpoints.
const HOMA_COUNTERS: [&str; 9] = [
    "grants_srpt",
    "grants_fifo",
    "data_bytes_retransmitted",
    "resends_requested",
    "timeouts",
    "rpcs_failed",
    "cutoff_updates",
    "pacer_holds",
    "send_drops",
];

pub(super) fn homa_counters(reports: &[NodeReport]) -> Vec<(String, u64)> {
    let mut sums: BTreeMap<&str, u64> = BTreeMap::new();
    let mut any = false;
    for r in reports {
        if let Some(v) = &r.homa {
            any = true;
            add_leaves(v, &mut sums);
        }
    }
    if !any {
        return Vec::new();
    }
    HOMA_COUNTERS
        .iter()
        .map(|&k| (k.to_string(), sums.get(k).copied().unwrap_or(0)))
        .collect()
}

fn add_leaves(v: &serde_json::Value, sums: &mut BTreeMap<&'static str, u64>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                if let (Some(n), Some(&key)) = (x.as_u64(), HOMA_COUNTERS.iter().find(|c| *c == k))
                {
                    *sums.entry(key).or_default() += n;
                } else {
                    add_leaves(x, sums);
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| add_leaves(x, sums)),
        _ => {}
    }
}
