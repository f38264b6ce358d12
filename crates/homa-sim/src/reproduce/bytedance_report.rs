//! The report of `reproduce bytedance` ([`super::bytedance`]): tables of
//! the three experiments, each beside the paper's claim, and verdicts
//! computed from the numbers (so a rerun cannot leave stale prose).

use super::bytedance::{Entry, Experiment, PeerPath, BG_GBPS, FAR_DELAY_NS, FAST_GBPS, STOCK_4X};
use homa_measure::table::{csv_row, fmt_size, markdown_table, Align};
use std::fmt::Write;

/// One CSV row per run.
pub fn csv(entries: &[Entry]) -> String {
    let mut out = csv_row(&[
        "experiment",
        "case",
        "mode",
        "workload",
        "load",
        "messages_measured",
        "slowdown_mean",
        "slowdown_p50",
        "slowdown_p99",
        "goodput_gbps",
        "tor_down_queue_mean_bytes",
        "tor_down_queue_peak_bytes",
        "tor_down_drops",
        "rtt_probes_sent",
        "rtt_responses",
        "rtt_invalid",
        "window_changes",
        "bg_offered_mbps_per_flow",
        "bg_delivered_mbps_per_flow",
        "bg_dropped_frames",
        "wall_s",
    ]);
    out.push('\n');
    for e in entries {
        let r = &e.report;
        let c = |k: &str| r.counters.get(k).copied().unwrap_or(0).to_string();
        let q = r.queues.get("tor_down").cloned().unwrap_or_default();
        out.push_str(&csv_row(&[
            format!("{:?}", e.experiment),
            e.case.clone(),
            e.mode.clone(),
            e.scenario.traffic.workload.clone(),
            e.scenario.traffic.load.to_string(),
            r.messages_measured.to_string(),
            format!("{:.3}", r.overall.mean),
            format!("{:.3}", r.overall.p50),
            format!("{:.3}", r.overall.p99),
            format!("{:.3}", r.goodput_gbps),
            format!("{:.0}", q.mean_bytes),
            q.peak_bytes.to_string(),
            q.drops.to_string(),
            c("rtt_probes_sent"),
            c("rtt_responses"),
            c("rtt_invalid"),
            c("bytedance_window_changes"),
            c("background_offered_mbps_per_flow"),
            c("background_delivered_mbps_per_flow"),
            c("background_dropped_frames"),
            format!("{:.1}", e.wall_s),
        ]));
        out.push('\n');
    }
    out
}

fn of(entries: &[Entry], x: Experiment) -> Vec<(&Entry, &Entry)> {
    let runs: Vec<&Entry> = entries.iter().filter(|e| e.experiment == x).collect();
    runs.iter()
        .filter(|e| e.mode == "stock")
        .filter_map(|s| {
            runs.iter()
                .find(|b| b.mode == "bytedance" && b.case == s.case)
                .map(|b| (*s, *b))
        })
        .collect()
}

fn f2(v: f64) -> String {
    format!("{v:.2}")
}

fn pct(v: f64) -> String {
    format!("{:+.1}%", v * 100.0)
}

fn kb(v: f64) -> String {
    fmt_size(v.max(0.0).round() as u64)
}

/// The nominal → nominal path of a run in the mode, if measured.
fn nominal(e: &Entry) -> Option<&PeerPath> {
    e.peers.iter().find(|p| p.pair == "nominal → nominal")
}

/// The markdown report.
pub fn markdown(entries: &[Entry], wall_s: f64) -> String {
    let mut md = String::new();
    let w = &mut md;
    let _ = writeln!(
        w,
        "# ByteDance mode in the simulator (issue 14, simulator half)\n"
    );
    let _ = writeln!(
        w,
        "Homa with the core's ByteDance mode (`homa.bytedance.enabled`; per-peer RTT probes, \
         thresholds and windows, docs/protocol-notes.md \"ByteDance mode\") against stock Homa \
         (static RTTbytes) on the same core and the same traffic (same seeds). Claims from \
         \"Leveraging Homa\" (notes: ../shared/reference/bytedance.md §8–9).\n"
    );
    let _ = writeln!(
        w,
        "Command (release build, {} runs, {:.0} s on this project's 2-core VM):\n\n\
         ```sh\ncargo build --release -p homa-sim\n\
         target/release/homa-sim reproduce bytedance --out docs/results --force\n```\n\n\
         Raw results: [bytedance-sim/results.csv](bytedance-sim/results.csv), \
         [bytedance-sim/results.json](bytedance-sim/results.json) (every scenario and report).\n",
        entries.len(),
        wall_s
    );
    let _ = writeln!(
        w,
        "Network: 4 racks × 8 hosts, 2 spines, 25 Gbit/s host links, 100 Gbit/s core links (no \
         oversubscription), the thesis' switch and host delays; nominal RTTbytes {} (stock \
         Homa's unscheduled bytes and grant window for every peer). The simulated NIC has no \
         GSO/GRO, so the mode's GSO and GRO batches are one packet. Slowdown = completion time ÷ \
         the unloaded one-way latency of the same message between the same two hosts (their own \
         link rates and delays). Switch buffers are unlimited unless a case says otherwise.\n",
        entries
            .first()
            .and_then(|e| crate::topology::Topology::new(e.scenario.topology.clone()).ok())
            .map_or("?".into(), |t| fmt_size(t.rtt_bytes()))
    );
    fixed_sizes(w, entries);
    heterogeneous(w, entries);
    coexistence(w, entries);
    md
}

fn fixed_sizes(w: &mut String, entries: &[Entry]) {
    let pairs = of(entries, Experiment::FixedSizes);
    let _ = writeln!(
        w,
        "## 1. Fixed message sizes at 50% load (paper's basic test)\n"
    );
    let _ = writeln!(
        w,
        "Claim (§9): the enhanced Homa improves throughput by **5–14% for 40–500 KB messages** \
         over a static, hand-tuned RTTbytes, below 50% network load.\n\n\
         The simulator's traffic is open-loop (Poisson arrivals at 50% of every host link), so \
         goodput equals the offered load whenever the network keeps up, as here for both. The \
         paper's `cp_node` is closed-loop (a fixed number of outstanding RPCs per client), where \
         throughput = outstanding bytes ÷ latency; the column *closed-loop equiv.* is therefore \
         the mean-latency ratio stock ÷ ByteDance − 1 (mean slowdowns of the same messages).\n"
    );
    let mut rows = Vec::new();
    let mut holds = Vec::new();
    let mut fails = Vec::new();
    let mut like_4x = Vec::new();
    for (s, b) in &pairs {
        let (rs, rb) = (&s.report, &b.report);
        let gain = rs.overall.mean / rb.overall.mean - 1.0;
        if let Some(e) = entries
            .iter()
            .find(|e| e.mode == STOCK_4X && e.case == s.case)
        {
            let d = e.report.overall.mean / rb.overall.mean - 1.0;
            like_4x.push(format!("{} {}", s.case, pct(d)));
        }
        if gain >= 0.05 {
            holds.push(s.case.clone());
        } else {
            fails.push(format!("{} ({})", s.case, pct(gain)));
        }
        let qs = rs.queues.get("tor_down").map_or(0.0, |q| q.mean_bytes);
        let qb = rb.queues.get("tor_down").map_or(0.0, |q| q.mean_bytes);
        rows.push(vec![
            s.case.clone(),
            format!("{:.2} / {:.2}", rs.goodput_gbps, rb.goodput_gbps),
            format!("{} / {}", f2(rs.overall.mean), f2(rb.overall.mean)),
            format!("{} / {}", f2(rs.overall.p50), f2(rb.overall.p50)),
            format!("{} / {}", f2(rs.overall.p99), f2(rb.overall.p99)),
            pct(gain),
            format!("{} / {}", kb(qs), kb(qb)),
            nominal(b).map_or("–".into(), |p| kb(p.unsched_window)),
            entries
                .iter()
                .find(|e| e.mode == STOCK_4X && e.case == s.case)
                .map_or("–".into(), |e| {
                    format!(
                        "{} / {}",
                        f2(e.report.overall.mean),
                        f2(e.report.overall.p99)
                    )
                }),
            "+5–14%".into(),
        ]);
    }
    let _ = writeln!(
        w,
        "{}",
        markdown_table(
            &[
                "size",
                "goodput Gbit/s/host (stock / BD)",
                "mean slowdown",
                "p50",
                "p99",
                "closed-loop equiv.",
                "ToR→host queue mean",
                "BD unsched. window (nominal peers)",
                "stock, 4 × RTTbytes: mean / p99",
                "paper",
            ],
            &[Align::Left],
            &rows,
        )
    );
    let _ = writeln!(
        w,
        "**Verdict:** the claim holds at {}; it does not at {}. Where it fails, the mode's \
         windows are the cause: on a clear path the paper's rule gives `rtt_mid` = 4 × (rtt_min \
         + GSO delay), about four BDPs (capped at 4 × RTTbytes), against stock Homa's one, so \
         the downlink queues are several times longer and long messages wait behind more \
         unscheduled data. The paper's baseline was a hand-set RTTbytes on real NICs with GSO; \
         here stock Homa's RTTbytes is the simulator's exact BDP, the best static value. \
         Stock Homa given the mode's clear-path window statically (4 × RTTbytes) differs from \
         the mode in mean slowdown by {} (negative: the static window is faster): on this \
         uniform network the mode's effect is its window size, not its per-peer detection. One \
         seed per run.\n",
        if holds.is_empty() {
            "no size".into()
        } else {
            holds.join(", ")
        },
        if fails.is_empty() {
            "none".into()
        } else {
            fails.join(", ")
        },
        like_4x.join(", ")
    );
}

fn heterogeneous(w: &mut String, entries: &[Entry]) {
    let pairs = of(entries, Experiment::Heterogeneous);
    let _ = writeln!(
        w,
        "## 2. Heterogeneous links: detected vs true per-peer BDP\n"
    );
    let _ = writeln!(
        w,
        "Claim (conclusions): the detected `rtt_min` gives near-optimal per-link RTTbytes in \
         heterogeneous networks.\n\n\
         Hosts 0–7 (\"far\") have {:.0} µs of extra propagation delay on each direction of their \
         link; hosts 8–15 (\"fast\") have {FAST_GBPS:.0} Gbit/s links; the rest are nominal. W4 \
         (Hadoop, capped at 1 MB) at 50% load. Detected values are read from each host's core \
         after the run (`Endpoint::bytedance_peer`), averaged over the ordered host pairs of each \
         class pair that took a sample. *True probe RTT*: the probe's round trip on the empty \
         network; *true BDP*: a full data packet out and a minimum frame back (RTTbytes' \
         definition) at the path's rate; *detected BDP*: `rtt_min × path rate`.\n",
        FAR_DELAY_NS / 1000.0
    );
    let Some((s, b)) = pairs.first() else {
        let _ = writeln!(w, "(no runs)\n");
        return;
    };
    let mut rows = Vec::new();
    let mut worst_rtt: f64 = 0.0;
    for p in &b.peers {
        let rtt_err = p.rtt_min_ns / p.true_probe_rtt_ns - 1.0;
        worst_rtt = worst_rtt.max(rtt_err.abs());
        rows.push(vec![
            p.pair.clone(),
            p.pairs_measured.to_string(),
            format!("{:.2}", p.true_probe_rtt_ns / 1e3),
            format!("{:.2} ({})", p.rtt_min_ns / 1e3, pct(rtt_err)),
            kb(p.true_bdp),
            format!(
                "{} ({})",
                kb(p.detected_bdp),
                pct(p.detected_bdp / p.true_bdp - 1.0)
            ),
            kb(p.unsched_window),
            format!("{:.2}", p.rtt_recent_ns / p.rtt_min_ns),
        ]);
    }
    let _ = writeln!(
        w,
        "{}",
        markdown_table(
            &[
                "path",
                "pairs",
                "true probe RTT µs",
                "detected rtt_min µs (error)",
                "true BDP",
                "detected BDP (error)",
                "unsched. window used",
                "rtt_recent ÷ rtt_min at end",
            ],
            &[Align::Left],
            &rows,
        )
    );
    let (rs, rb) = (&s.report, &b.report);
    let rows = vec![
        vec![
            "stock".to_string(),
            f2(rs.overall.mean),
            f2(rs.overall.p50),
            f2(rs.overall.p99),
            f2(rs.short_half.p99),
            format!("{:.2}", rs.goodput_gbps),
        ],
        vec![
            "ByteDance".to_string(),
            f2(rb.overall.mean),
            f2(rb.overall.p50),
            f2(rb.overall.p99),
            f2(rb.short_half.p99),
            format!("{:.2}", rb.goodput_gbps),
        ],
    ];
    let _ = writeln!(
        w,
        "{}",
        markdown_table(
            &[
                "mode",
                "mean slowdown",
                "p50",
                "p99",
                "p99 of the shorter half",
                "goodput Gbit/s/host"
            ],
            &[Align::Left],
            &rows,
        )
    );
    let _ = writeln!(
        w,
        "**Verdict:** detection holds: every class pair's `rtt_min` is within {:.1}% of the \
         probe's true round trip. The detected BDP is below RTTbytes' definition by the \
         difference between a probe and a full data packet on the way out (a full frame is \
         serialised again at every store-and-forward hop: ~1.2 µs more than a probe across \
         racks at 25 Gbit/s, 4–17% here). The window the mode then uses is not that BDP but `rtt_mid` \
         ≈ 4 BDPs, capped at 4 × the nominal RTTbytes: for far peers (BDP {}) the cap binds, \
         so \"per-link RTTbytes\" there is the cap, not the path. Slowdowns (stock → \
         ByteDance): p99 {} → {}, p50 {} → {}, p99 of the shorter half of the messages {} → {}: \
         the larger windows help the long messages and cost the short ones.\n",
        worst_rtt * 100.0,
        b.peers
            .iter()
            .find(|p| p.pair == "far → far")
            .map_or("?".into(), |p| kb(p.true_bdp)),
        f2(rs.overall.p99),
        f2(rb.overall.p99),
        f2(rs.overall.p50),
        f2(rb.overall.p50),
        f2(rs.short_half.p99),
        f2(rb.short_half.p99),
    );
}

fn coexistence(w: &mut String, entries: &[Entry]) {
    let pairs = of(entries, Experiment::Coexistence);
    let _ = writeln!(w, "## 3. Coexistence with a non-reacting background flow\n");
    let _ = writeln!(
        w,
        "Claim (§9, Figs. 10–11): the enhanced algorithm detects congestion caused by TCP and \
         throttles Homa; on W5 stock Homa shows large latency from buffer overflow and the \
         enhanced version avoids it.\n\n\
         Every host's ToR→host downlink carries a constant-rate flow of full-size frames at \
         {BG_GBPS} Gbit/s (half the link; `[[traffic.background]]`, crates/homa-sim/src/background.rs). \
         It stands in for TCP that already holds its share: it never backs off, never \
         retransmits, and a frame that finds the buffer full is lost. Homa runs W5 (web search, \
         capped at 1 MB) at 30% load on top (total ~80% of each downlink). Cases: one FIFO per \
         port (a network that ignores Homa's priorities, so Homa, probes and the flow share one \
         queue), the same with a 200 KB port buffer, and 8 strict priorities with the flow at \
         the lowest level.\n"
    );
    let mut rows = Vec::new();
    let mut verdicts = Vec::new();
    for (s, b) in &pairs {
        for e in [s, b] {
            let r = &e.report;
            let c = |k: &str| r.counters.get(k).copied().unwrap_or(0);
            let by_size = r
                .buckets
                .iter()
                .map(|k| format!("≤{}: {}", fmt_size(k.size_hi), f2(k.slowdown.p99)))
                .collect::<Vec<_>>()
                .join("; ");
            rows.push(vec![
                e.case.clone(),
                e.mode.clone(),
                f2(r.overall.p50),
                f2(r.overall.p99),
                by_size,
                format!(
                    "{:.2} / {:.2}",
                    c("background_delivered_mbps_per_flow") as f64 / 1e3,
                    c("background_offered_mbps_per_flow") as f64 / 1e3
                ),
                c("background_dropped_frames").to_string(),
                r.queues.get("tor_down").map_or(0, |q| q.drops).to_string(),
                format!("{} / {}", kb(e.bg_queue_mean), kb(e.bg_queue_peak as f64)),
                nominal(e).map_or("–".into(), |p| {
                    format!(
                        "{:.2}, {}",
                        p.rtt_recent_ns / p.rtt_min_ns,
                        kb(p.unsched_window)
                    )
                }),
            ]);
        }
        let (qs, qb) = (s.bg_queue_mean, b.bg_queue_mean);
        let shrink = nominal(b).is_some_and(|p| p.rtt_recent_ns > 1.5 * p.rtt_min_ns);
        verdicts.push(format!(
            "*{}*: RTT rise {}; queue {} ({} → {}), Homa p99 {} → {}",
            s.case,
            if shrink {
                "detected"
            } else {
                "not detected (rtt_recent < 1.5 rtt_min)"
            },
            if qb < qs {
                "shorter with the mode"
            } else {
                "longer with the mode"
            },
            kb(qs),
            kb(qb),
            f2(s.report.overall.p99),
            f2(b.report.overall.p99),
        ));
    }
    let _ = writeln!(
        w,
        "{}",
        markdown_table(
            &[
                "case",
                "mode",
                "Homa p50",
                "Homa p99",
                "Homa p99 by size",
                "flow delivered / offered Gbit/s",
                "flow frames lost",
                "all drops at downlinks",
                "downlink queue mean / peak",
                "BD: rtt_recent ÷ rtt_min, window (nominal peers)",
            ],
            &[Align::Left, Align::Left],
            &rows,
        )
    );
    let _ = writeln!(w, "**Verdict:** {}.\n", verdicts.join(". "));
    let _ = writeln!(
        w,
        "What this shows: with strict priorities the probes (top level) never wait behind the \
         flow or Homa's own scheduled data, so the mode cannot see a queue that Homa's \
         priorities already hide, and Homa's latency is unaffected by a flow below it, while the \
         flow's frames wait behind Homa's bursts. With one shared FIFO the probes do see the \
         queue, but the mode's windows on a clear path (`rtt_mid`, ~4 BDPs) start larger than \
         stock Homa's one BDP and the congestion bands only bring them down once the RTT is \
         past `rtt_mid`, so the mode throttles only part of the way back.\n"
    );
    let _ = writeln!(
        w,
        "## Not modelled\n\n\
         - The background flow is not TCP: it neither backs off nor grabs freed bandwidth, so \
           the paper's \"minimal mutual throughput interference\" can only be read here as the \
           flow's delivered rate and losses.\n\
         - No GSO/GRO, no CPU: the paper's GSO delay term is one packet's wire time.\n\
         - Probes refused by servers that have not yet proven the client (a client that sent \
           only one-packet requests) are counted as `rtt_invalid` in results.csv; the core's \
           rule, not loss.\n\
         - Every run is far shorter than `rtt_min`'s 10 s window, which never turns over, and the grant \
           pause above `rtt_high` (off by default) is not exercised. The measured \
           unscheduled ratio does set the number of unscheduled priority levels (it needs \
           64 messages, then changes at the cutoff interval).\n"
    );
}
