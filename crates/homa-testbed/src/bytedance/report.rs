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
    s.push_str(&paths_table(r));
    s
}

fn us(ns: f64) -> String {
    format!("{:.0}", ns / 1e3)
}

fn pct(x: Option<f64>) -> String {
    x.map_or("?".into(), |e| format!("{:+.0}%", e * 100.0))
}

/// The detected against the true per-peer BDP, one row per run in the mode
/// and ordered pair of hosts; empty when no run has any.
pub fn paths_table(r: &BdResult) -> String {
    let mut s = String::new();
    if r.runs.iter().all(|x| x.paths.is_empty()) {
        return s;
    }
    s.push_str(
        "\nDetected vs true per-peer BDP (the mode's endpoints at the end of the run, means over \
         the endpoints of each host pair; \"A → B\": what A's endpoints detected about B's). \
         True RTT: the unloaded stock-Homa round trip of a 100-byte RPC between the two hosts \
         (\"ping\", smallest of 20, before the loaded runs) plus a full frame instead of the \
         ping's on the way out (sender's link and switch port); true rate: the slower \
         configured link; BDP = RTT × rate; detected BDP = rtt_min × the path rate the mode \
         uses.\n\n| run | hosts | endpoints (sampled) | ping µs | true RTT µs | true Mbit/s | \
         true BDP B | detected rtt_min µs (vs ping) | rtt_recent µs | detected Mbit/s | \
         detected BDP B (range) | BDP error |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for (i, run) in r.runs.iter().enumerate() {
        for p in &run.paths {
            let name = match run.size {
                Some(sz) => format!("{} {} #{}", variant(run), fmt_size(sz), i + 1),
                None => format!("{} #{}", variant(run), i + 1),
            };
            let _ = writeln!(
                s,
                "| {name} | {} → {} | {} ({}) | {} | {} | {} | {} | {} ({}) | {} | {:.0} | {:.0} \
                 ({:.0}–{:.0}) | {} |",
                p.from,
                p.to,
                p.records,
                p.sampled,
                p.ping_ns.map_or("?".into(), |x| us(x as f64)),
                p.true_rtt_ns.map_or("?".into(), us),
                p.true_mbps,
                p.true_bdp.map_or("?".into(), |b| format!("{b:.0}")),
                us(p.rtt_min_ns),
                pct(p.rtt_vs_ping()),
                us(p.rtt_recent_ns),
                p.detected_mbps,
                p.detected_bdp,
                p.detected_bdp_range.0,
                p.detected_bdp_range.1,
                pct(p.bdp_error()),
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytedance::PeerPath;

    fn run(bytedance: bool, paths: Vec<PeerPath>) -> BdRun {
        BdRun {
            bytedance,
            size: None,
            homa_rpcs: 1,
            homa_failed: 0,
            homa_mbps: 1.0,
            tcp_mbps: 0.0,
            switch_drops: 0,
            switch_peak_bytes: 0,
            nic_drops: 0,
            buckets: Vec::new(),
            per_host: Vec::new(),
            counters: Vec::new(),
            paths,
        }
    }

    #[test]
    fn the_paths_table_shows_true_detected_and_error() {
        let path = PeerPath {
            from: 2,
            to: 0,
            records: 3,
            sampled: 2,
            ping_ns: Some(300_000),
            true_rtt_ns: Some(1_180_000.0),
            true_mbps: 100,
            true_bdp: Some(14_750.0),
            rtt_min_ns: 500_000.0,
            rtt_recent_ns: 1_000_000.0,
            detected_mbps: 100.0,
            detected_bdp: 6_250.0,
            detected_bdp_range: (5_000.0, 7_500.0),
        };
        let mut r = BdResult {
            experiment: Experiment::Hetero,
            command: "testbed bytedance hetero".into(),
            rate_mbit: 400,
            host_rates: vec![(2, 100)],
            mtu: 9000,
            buffer_bytes: 200_000,
            switch_levels: 8,
            rtt_bytes: 20_528,
            pings: Vec::new(),
            runs: vec![run(false, Vec::new())],
        };
        assert_eq!(paths_table(&r), "", "no run in the mode, no table");
        r.runs.push(run(true, vec![path]));
        let t = markdown(&r);
        // 6,250 / 14,750 − 1 = −57.6%; rtt_min 500 µs vs the 300 µs ping: +67%.
        let row = "| homa-bd #2 | 2 → 0 | 3 (2) | 300 | 1180 | 100 | 14750 | 500 (+67%) | \
                   1000 | 100 | 6250 (5000–7500) | -58% |";
        assert!(t.contains(row), "{t}");
        // Older results (no paths, no pings) still parse.
        let mut v = serde_json::to_value(&r).unwrap();
        v.as_object_mut().unwrap().remove("pings");
        for x in v["runs"].as_array_mut().unwrap() {
            x.as_object_mut().unwrap().remove("paths");
        }
        let old: BdResult = serde_json::from_value(v).unwrap();
        assert!(old.pings.is_empty() && old.runs.iter().all(|x| x.paths.is_empty()));
    }
}
