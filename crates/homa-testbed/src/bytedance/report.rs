//! The tables of `testbed bytedance`, as markdown.

use super::{BdResult, BdRun, Experiment};
use crate::analysis::Bucket;
use homa_measure::table::fmt_size;
use std::fmt::Write;

fn variant(r: &BdRun) -> &'static str {
    if r.bytedance {
        "homa-bd"
    } else {
        "homa"
    }
}

fn counter(r: &BdRun, name: &str) -> u64 {
    r.counters
        .iter()
        .find(|(k, _)| k == name)
        .map_or(0, |(_, v)| *v)
}

fn buckets_cell(b: &[Bucket]) -> String {
    b.iter()
        .filter(|b| b.count > 0)
        .map(|b| format!("{}: {:.1}/{:.1}", fmt_size(b.max_size), b.p50, b.p99))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The result as markdown: the setting, then one table.
pub fn markdown(r: &BdResult) -> String {
    let mut s = String::new();
    let rates: Vec<String> = r
        .host_rates
        .iter()
        .map(|(h, m)| format!("host {h} at {m} Mbit/s"))
        .collect();
    let _ = writeln!(
        s,
        "`{}`: links {} Mbit/s{}, MTU {}, {} per switch port, {} KB each, RTTbytes {} B \
         (every endpoint; the mode's cap 4× that).\n",
        r.command,
        r.rate_mbit,
        if rates.is_empty() {
            String::new()
        } else {
            format!(" ({})", rates.join(", "))
        },
        r.mtu,
        if r.switch_levels == 1 {
            "one FIFO"
        } else {
            "8 priority queues"
        },
        r.buffer_bytes / 1000,
        r.rtt_bytes
    );
    match r.experiment {
        Experiment::Sweep => {
            s.push_str(
                "| size | variant | RPCs | Homa Mbit/s | gain | switch drops | peak queue KB | \
                 retransmitted B | probes |\n|---|---|---|---|---|---|---|---|---|\n",
            );
            for (i, run) in r.runs.iter().enumerate() {
                // The stock run of the same size just before (interleaved).
                let base = r.runs[..i]
                    .iter()
                    .rev()
                    .find(|x| !x.bytedance && x.size == run.size)
                    .map(|x| x.homa_mbps);
                let gain = match base {
                    Some(b) if run.bytedance && b > 0.0 => {
                        format!("{:+.1}%", (run.homa_mbps / b - 1.0) * 100.0)
                    }
                    _ => "".into(),
                };
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {:.1} | {gain} | {} | {:.0} | {} | {} |",
                    fmt_size(run.size.unwrap_or(0)),
                    variant(run),
                    run.homa_rpcs,
                    run.homa_mbps,
                    run.switch_drops,
                    run.switch_peak_bytes as f64 / 1000.0,
                    counter(run, "data_bytes_retransmitted"),
                    counter(run, "rtt_probes_sent"),
                );
            }
        }
        _ => {
            s.push_str(
                "| variant | Homa RPCs (failed) | Homa Mbit/s | TCP Mbit/s | switch drops → server | \
                 peak queue KB | NIC drops | retransmitted B | probes / samples | \
                 slowdown p50/p99 by size |\n|---|---|---|---|---|---|---|---|---|---|\n",
            );
            for run in &r.runs {
                let _ = writeln!(
                    s,
                    "| {} | {} ({}) | {:.1} | {:.1} | {} | {:.0} | {} | {} | {} / {} | {} |",
                    variant(run),
                    run.homa_rpcs,
                    run.homa_failed,
                    run.homa_mbps,
                    run.tcp_mbps,
                    run.switch_drops,
                    run.switch_peak_bytes as f64 / 1000.0,
                    run.nic_drops,
                    counter(run, "data_bytes_retransmitted"),
                    counter(run, "rtt_probes_sent"),
                    counter(run, "rtt_responses"),
                    buckets_cell(&run.buckets),
                );
            }
            if r.runs.iter().any(|x| !x.per_host.is_empty()) {
                s.push_str(
                    "\nPer client host (slowdown p50/p99 by size):\n\n| variant | host | \
                     slowdown |\n|---|---|---|\n",
                );
                for run in &r.runs {
                    for (h, b) in &run.per_host {
                        let _ = writeln!(s, "| {} | {h} | {} |", variant(run), buckets_cell(b));
                    }
                }
            }
        }
    }
    s
}
