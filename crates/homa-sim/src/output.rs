//! Writers for [`RunReport`]s: JSON, two CSV layouts, an aligned text table
//! for stdout and a GitHub markdown table.
//!
//! Conventions shared by all writers:
//! - loads and fractions are written as fractions (0..1) in JSON and CSV,
//!   and as percentages in the human-readable tables;
//! - queue sizes in the tables are in KB of 1000 bytes, message sizes use
//!   the compact decimal form of [`fmt_size`] (`"100B"`, `"1.2K"`, `"1M"`);
//! - CSV fields that contain a comma, quote or newline are quoted as in
//!   RFC 4180, and a value that is absent in one run (a queue kind or
//!   counter that only other runs have) is left empty.

use crate::report::{Bucket, QueueStats, RunReport};
use anyhow::Context;
use homa_measure::table::{csv_field, fmt_size, Align};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

/// The port kind whose queue is shown in the text and markdown tables (the
/// ToR downlink, where the thesis' Table 6.1 finds the queueing).
pub const TABLE_QUEUE_KIND: &str = "tor_down";

/// Writes one row per (run, port): kind, number, mean and peak waiting
/// bytes, utilization and drops.
pub fn write_ports_csv(path: &Path, reports: &[RunReport]) -> std::io::Result<()> {
    let mut out = String::from(
        "protocol,workload,label,load,seed,kind,port,mean_bytes,peak_bytes,utilization,drops\n",
    );
    for r in reports {
        for p in &r.ports {
            out.push_str(&format!(
                "{},{},{},{},{},{},{},{:.1},{},{:.4},{}\n",
                csv_field(&r.protocol),
                csv_field(&r.workload),
                csv_field(&r.label),
                r.load,
                r.seed,
                p.kind,
                p.port,
                p.mean_bytes,
                p.peak_bytes,
                p.utilization,
                p.drops
            ));
        }
    }
    std::fs::write(path, out)
}

/// Writes the reports as a pretty-printed JSON array.
pub fn write_json(path: &Path, reports: &[RunReport]) -> anyhow::Result<()> {
    let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut w = BufWriter::new(file);
    serde_json::to_writer_pretty(&mut w, reports)
        .with_context(|| format!("writing {}", path.display()))?;
    w.write_all(b"\n")?;
    w.flush()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Header of the file written by [`write_buckets_csv`].
pub const BUCKETS_CSV_HEADER: &str = "protocol,workload,label,load,seed,percentile_lo,\
percentile_hi,size_lo,size_hi,count,mean,p50,p99,max";

/// Writes the slowdown spectra as CSV: one row per (run, bucket), columns
/// as in [`BUCKETS_CSV_HEADER`]. Percentiles are fractions (0..1), sizes
/// bytes.
pub fn write_buckets_csv(path: &Path, reports: &[RunReport]) -> std::io::Result<()> {
    let mut w = BufWriter::new(File::create(path)?);
    w.write_all(buckets_csv(reports).as_bytes())?;
    w.flush()
}

/// The text [`write_buckets_csv`] writes.
pub fn buckets_csv(reports: &[RunReport]) -> String {
    let mut out = String::new();
    out.push_str(BUCKETS_CSV_HEADER);
    out.push('\n');
    for r in reports {
        for b in &r.buckets {
            let s = &b.slowdown;
            let row = [
                csv_field(&r.protocol),
                csv_field(&r.workload),
                csv_field(&r.label),
                r.load.to_string(),
                r.seed.to_string(),
                b.percentile_lo.to_string(),
                b.percentile_hi.to_string(),
                b.size_lo.to_string(),
                b.size_hi.to_string(),
                s.count.to_string(),
                s.mean.to_string(),
                s.p50.to_string(),
                s.p99.to_string(),
                s.max.to_string(),
            ];
            out.push_str(&row.join(","));
            out.push('\n');
        }
    }
    out
}

/// Columns of [`write_summary_csv`] for each port kind, appended to the
/// kind's name (`tor_down_mean_bytes`, ...).
const QUEUE_COLUMNS: [&str; 7] = [
    "ports",
    "mean_bytes",
    "max_port_mean_bytes",
    "peak_bytes",
    "utilization",
    "drops",
    "ecn_marks",
];

fn queue_values(q: &QueueStats) -> [String; 7] {
    [
        q.ports.to_string(),
        q.mean_bytes.to_string(),
        q.max_port_mean_bytes.to_string(),
        q.peak_bytes.to_string(),
        q.utilization.to_string(),
        q.drops.to_string(),
        q.ecn_marks.to_string(),
    ]
}

/// Writes one CSV row per run with its scalar results.
///
/// Columns, in order: `protocol, workload, label, load, seed`, the message
/// counts, `sim_time_s, window_s`, the loads (`offered_load,
/// delivered_load, host_tx_load`), `wasted_bandwidth`, `overall_*` and
/// `short_half_*` (`count, mean, p50, p99, max`), then for every port kind
/// present in any run `<kind>_{ports, mean_bytes, max_port_mean_bytes,
/// peak_bytes, utilization, drops, ecn_marks}`, then `events, wall_time_s,
/// events_per_sec`, and last one `counter_<name>` column per transport
/// counter present in any run.
pub fn write_summary_csv(path: &Path, reports: &[RunReport]) -> std::io::Result<()> {
    let mut w = BufWriter::new(File::create(path)?);
    w.write_all(summary_csv(reports).as_bytes())?;
    w.flush()
}

/// The text [`write_summary_csv`] writes.
pub fn summary_csv(reports: &[RunReport]) -> String {
    let kinds: BTreeSet<&str> = reports
        .iter()
        .flat_map(|r| r.queues.keys().map(String::as_str))
        .collect();
    let counters: BTreeSet<&str> = reports
        .iter()
        .flat_map(|r| r.counters.keys().map(String::as_str))
        .collect();

    let mut header: Vec<String> = [
        "protocol",
        "workload",
        "label",
        "load",
        "seed",
        "messages_generated",
        "messages_measured",
        "messages_incomplete",
        "messages_failed",
        "sim_time_s",
        "window_s",
        "offered_load",
        "delivered_load",
        "host_tx_load",
        "wasted_bandwidth",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for group in ["overall", "short_half"] {
        for stat in ["count", "mean", "p50", "p99", "max"] {
            header.push(format!("{group}_{stat}"));
        }
    }
    for kind in &kinds {
        for col in QUEUE_COLUMNS {
            header.push(csv_field(&format!("{kind}_{col}")));
        }
    }
    header.extend(["events", "wall_time_s", "events_per_sec"].map(String::from));
    for c in &counters {
        header.push(csv_field(&format!("counter_{c}")));
    }

    let mut out = header.join(",");
    out.push('\n');
    for r in reports {
        let mut row = vec![
            csv_field(&r.protocol),
            csv_field(&r.workload),
            csv_field(&r.label),
            r.load.to_string(),
            r.seed.to_string(),
            r.messages_generated.to_string(),
            r.messages_measured.to_string(),
            r.messages_incomplete.to_string(),
            r.messages_failed.to_string(),
            r.sim_time_s.to_string(),
            r.window_s.to_string(),
            r.offered_load.to_string(),
            r.delivered_load.to_string(),
            r.host_tx_load.to_string(),
            r.wasted_bandwidth.to_string(),
        ];
        for s in [&r.overall, &r.short_half] {
            row.extend([
                s.count.to_string(),
                s.mean.to_string(),
                s.p50.to_string(),
                s.p99.to_string(),
                s.max.to_string(),
            ]);
        }
        for kind in &kinds {
            match r.queues.get(*kind) {
                Some(q) => row.extend(queue_values(q)),
                None => row.extend(QUEUE_COLUMNS.map(|_| String::new())),
            }
        }
        row.extend([
            r.events.to_string(),
            r.wall_time_s.to_string(),
            r.events_per_sec.to_string(),
        ]);
        for c in &counters {
            row.push(r.counters.get(*c).map(u64::to_string).unwrap_or_default());
        }
        out.push_str(&row.join(","));
        out.push('\n');
    }
    out
}

/// Formats a slowdown (or other ratio near 1..1000) with three significant
/// figures or so: `"1.02"`, `"12.3"`, `"456"`; non-finite values as `"-"`.
pub fn fmt_slowdown(x: f64) -> String {
    if !x.is_finite() {
        "-".to_string()
    } else if x.abs() < 10.0 {
        format!("{x:.2}")
    } else if x.abs() < 100.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.0}")
    }
}

/// Formats a fraction as a percentage: whole percent when that is exact
/// enough, otherwise one decimal (`"80%"`, `"12.5%"`).
pub fn fmt_percent(fraction: f64) -> String {
    if !fraction.is_finite() {
        return "-".to_string();
    }
    let p = fraction * 100.0;
    if (p - p.round()).abs() < 0.05 {
        format!("{:.0}%", p)
    } else {
        format!("{p:.1}%")
    }
}

/// Formats a rate compactly: `"950"`, `"12.3K"`, `"1.5M"`.
fn fmt_rate(x: f64) -> String {
    if !x.is_finite() {
        "-".to_string()
    } else if x < 1e3 {
        format!("{x:.0}")
    } else if x < 1e6 {
        format!("{:.1}K", x / 1e3)
    } else if x < 1e9 {
        format!("{:.2}M", x / 1e6)
    } else {
        format!("{:.2}G", x / 1e9)
    }
}

/// Formats a byte quantity in KB (1000 bytes) with one decimal.
fn fmt_kb(bytes: f64) -> String {
    if bytes.is_finite() {
        format!("{:.1}", bytes / 1e3)
    } else {
        "-".to_string()
    }
}

fn fmt_wall(s: f64) -> String {
    if !s.is_finite() {
        "-".to_string()
    } else if s < 10.0 {
        format!("{s:.2}")
    } else {
        format!("{s:.1}")
    }
}

/// Shortens `s` to at most `max` characters, marking the cut with `~`.
fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
        t.push('~');
        t
    }
}

/// A column of the text table.
struct Column {
    header: &'static str,
    /// Left-aligned (text) rather than right-aligned (numbers).
    left: bool,
    /// Longest value shown; longer ones are cut.
    max_width: usize,
}

const fn col(header: &'static str, left: bool, max_width: usize) -> Column {
    Column {
        header,
        left,
        max_width,
    }
}

/// The key numbers of one run, as strings, in the order of [`COLUMNS`].
const COLUMNS: [Column; 15] = [
    col("protocol", true, 10),
    col("label", true, 16),
    col("workload", true, 12),
    col("load", false, 6),
    col("msgs", false, 9),
    col("incompl", false, 8),
    col("short p99", false, 9),
    col("p50", false, 7),
    col("p99", false, 7),
    col("deliv/off", false, 9),
    col("wasted", false, 6),
    col("torQ KB", false, 7),
    col("peak KB", false, 8),
    col("ev/s", false, 7),
    col("wall s", false, 7),
];

fn key_numbers(r: &RunReport) -> [String; 15] {
    let q = r.queues.get(TABLE_QUEUE_KIND);
    [
        r.protocol.clone(),
        r.label.clone(),
        r.workload.clone(),
        fmt_percent(r.load),
        r.messages_measured.to_string(),
        r.messages_incomplete.to_string(),
        fmt_slowdown(r.short_half.p99),
        fmt_slowdown(r.overall.p50),
        fmt_slowdown(r.overall.p99),
        fmt_percent(r.delivered_ratio),
        fmt_percent(r.wasted_bandwidth),
        q.map_or("-".into(), |q| fmt_kb(q.mean_bytes)),
        q.map_or("-".into(), |q| fmt_kb(q.peak_bytes as f64)),
        fmt_rate(r.events_per_sec),
        fmt_wall(r.wall_time_s),
    ]
}

/// Below this share of the offered data delivered in the window, a run
/// gets a note saying why.
pub const LOW_DELIVERY: f64 = 0.95;

/// Breaks `text` into lines of at most `width` characters (at spaces),
/// each indented by `indent`.
fn wrap(text: &str, width: usize, indent: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty()
            && indent.len() + line.chars().count() + 1 + word.chars().count() > width
        {
            let _ = writeln!(out, "{indent}{line}");
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        let _ = writeln!(out, "{indent}{line}");
    }
    out
}

/// Formats a duration in seconds compactly: `"630 µs"`, `"4.2 ms"`,
/// `"1.5 s"`.
fn fmt_sim_time(s: f64) -> String {
    if !s.is_finite() {
        "-".into()
    } else if s < 1e-3 {
        format!("{:.0} µs", s * 1e6)
    } else if s < 1.0 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{s:.2} s")
    }
}

/// What `deliv/off` means, and for each run whose figure is low, why that
/// can be (the window is short next to its largest messages, or the load
/// is too high).
fn delivery_notes(reports: &[RunReport]) -> String {
    let mut out = wrap(
        "deliv/off: message data delivered ÷ data offered during the measurement window \
         (after the warm-up, to the last arrival).",
        110,
        "",
    );
    for r in reports.iter().filter(|r| r.delivered_ratio < LOW_DELIVERY) {
        let mut note = format!(
            "note: {} {} {}: {} of the data offered in its {} window was delivered within it.",
            r.protocol,
            r.workload,
            fmt_percent(r.load),
            fmt_percent(r.delivered_ratio),
            fmt_sim_time(r.window_s),
        );
        // The host link's rate, from the offered load in both units.
        let link_bps = r.offered_gbps * 1e9 / r.offered_load.max(1e-9);
        if let Some(largest) = r.buckets.last().map(|b| b.size_hi) {
            let transfer = largest as f64 * 8.0 / link_bps.max(1.0);
            if transfer.is_finite() && transfer > 0.05 * r.window_s {
                let _ = write!(
                    note,
                    " Its largest messages ({}, {} each at link rate) are still in flight \
                     when a window this short closes: more --messages make the window \
                     longer and the figure meaningful.",
                    fmt_size(largest),
                    fmt_sim_time(transfer)
                );
            }
        }
        note.push_str(
            " A figure that stays low in long runs means the network does not sustain \
             the load (see max-load).",
        );
        out.push_str(&wrap(&note, 110, ""));
    }
    out
}

/// Most spectrum rows shown per run in [`summary_table`].
const SPECTRUM_ROWS: usize = 10;

/// Picks at most `max` buckets, evenly spread and always including the
/// first and the last.
fn spectrum_rows(buckets: &[Bucket], max: usize) -> Vec<&Bucket> {
    let n = buckets.len();
    if n <= max + 2 {
        return buckets.iter().collect();
    }
    let mut idx: Vec<usize> = (0..max)
        .map(|i| ((i * (n - 1)) as f64 / (max - 1) as f64).round() as usize)
        .collect();
    idx.dedup();
    idx.into_iter().map(|i| &buckets[i]).collect()
}

/// A human-readable, aligned text table for stdout: one line per run with
/// its key numbers, then for each run a compact slowdown spectrum (at most
/// ten buckets, evenly spread, with size range, count, p50 and p99).
///
/// Loads and wasted bandwidth are percentages of host link bandwidth;
/// `deliv/off` is the message data delivered ÷ the data offered during the
/// measurement window (explained under the table, with a note for each run
/// whose figure is low); `torQ KB` / `peak KB` are the mean and peak
/// occupancy of the ToR downlink queues; `short p99` is the
/// 99th-percentile slowdown of the shortest half of the messages. Fits in
/// 120 columns.
pub fn summary_table(reports: &[RunReport]) -> String {
    let rows: Vec<Vec<String>> = reports
        .iter()
        .map(|r| {
            key_numbers(r)
                .iter()
                .zip(COLUMNS.iter())
                .map(|(v, c)| truncate(v, c.max_width))
                .collect()
        })
        .collect();
    let widths: Vec<usize> = COLUMNS
        .iter()
        .enumerate()
        .map(|(i, c)| {
            rows.iter()
                .map(|row| row[i].chars().count())
                .chain(std::iter::once(c.header.len()))
                .max()
                .unwrap_or(0)
        })
        .collect();

    let mut out = String::new();
    let line = |cells: &mut dyn Iterator<Item = &str>, out: &mut String| {
        let mut text = String::new();
        for (i, cell) in cells.enumerate() {
            if i > 0 {
                text.push(' ');
            }
            let w = widths[i];
            if COLUMNS[i].left {
                let _ = write!(text, "{cell:<w$}");
            } else {
                let _ = write!(text, "{cell:>w$}");
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(&mut COLUMNS.iter().map(|c| c.header), &mut out);
    let total: usize = widths.iter().sum::<usize>() + widths.len() - 1;
    out.push_str(&"-".repeat(total));
    out.push('\n');
    for row in &rows {
        line(&mut row.iter().map(String::as_str), &mut out);
    }
    out.push_str(&delivery_notes(reports));

    for r in reports {
        if r.buckets.is_empty() {
            continue;
        }
        let shown = spectrum_rows(&r.buckets, SPECTRUM_ROWS);
        out.push('\n');
        let _ = write!(
            out,
            "{} {}{} load {}: slowdown by size",
            r.protocol,
            if r.label.is_empty() {
                String::new()
            } else {
                format!("[{}] ", r.label)
            },
            r.workload,
            fmt_percent(r.load),
        );
        if shown.len() < r.buckets.len() {
            let _ = write!(out, " ({} of {} buckets)", shown.len(), r.buckets.len());
        }
        out.push('\n');
        let _ = writeln!(
            out,
            "  {:>13}  {:>15}  {:>9}  {:>7}  {:>7}",
            "percentile", "size", "count", "p50", "p99"
        );
        for b in shown {
            let pct = format!(
                "{:.0}-{:.0}%",
                b.percentile_lo * 100.0,
                b.percentile_hi * 100.0
            );
            let size = format!("{}-{}", fmt_size(b.size_lo), fmt_size(b.size_hi));
            let _ = writeln!(
                out,
                "  {:>13}  {:>15}  {:>9}  {:>7}  {:>7}",
                pct,
                size,
                b.slowdown.count,
                fmt_slowdown(b.slowdown.p50),
                fmt_slowdown(b.slowdown.p99),
            );
        }
    }
    out
}

/// The key numbers of [`summary_table`] (without the spectra) as a GitHub
/// markdown table, one row per run.
pub fn markdown_table(reports: &[RunReport]) -> String {
    const HEADERS: [&str; 15] = [
        "protocol",
        "label",
        "workload",
        "load",
        "measured msgs",
        "incomplete",
        "short-half p99",
        "p50",
        "p99",
        "delivered ÷ offered",
        "wasted bw",
        "tor_down mean KB",
        "tor_down peak KB",
        "events/s",
        "wall s",
    ];
    let align: Vec<Align> = COLUMNS
        .iter()
        .map(|c| if c.left { Align::Left } else { Align::Right })
        .collect();
    let rows: Vec<[String; 15]> = reports.iter().map(key_numbers).collect();
    let rows: Vec<Vec<&str>> = rows
        .iter()
        .map(|r| r.iter().map(String::as_str).collect())
        .collect();
    homa_measure::table::markdown_table(&HEADERS, &align, &rows)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::report::SlowdownStats;

    /// A small hand-built report: two buckets, two queue kinds.
    pub(crate) fn sample_report() -> RunReport {
        let stats = |count, mean, p50, p99, max| SlowdownStats {
            count,
            mean,
            p50,
            p99,
            max,
        };
        let mut r = RunReport {
            protocol: "homa".into(),
            workload: "w3".into(),
            load: 0.8,
            seed: 7,
            label: "8 priorities, overcommit 2".into(),
            messages_generated: 1200,
            messages_measured: 1000,
            messages_incomplete: 3,
            messages_failed: 0,
            sim_time_s: 0.05,
            window_s: 0.04,
            offered_load: 0.79,
            delivered_load: 0.78,
            delivered_ratio: 0.987,
            offered_gbps: 7.9,
            host_tx_load: 0.81,
            wasted_bandwidth: 0.025,
            overall: stats(1000, 1.8, 1.25, 7.5, 21.0),
            short_half: stats(500, 1.3, 1.1, 2.75, 6.0),
            buckets: vec![
                Bucket {
                    percentile_lo: 0.0,
                    percentile_hi: 0.5,
                    size_lo: 40,
                    size_hi: 1_200,
                    slowdown: stats(500, 1.3, 1.1, 2.75, 6.0),
                },
                Bucket {
                    percentile_lo: 0.5,
                    percentile_hi: 1.0,
                    size_lo: 1_201,
                    size_hi: 2_500_000,
                    slowdown: stats(500, 2.3, 1.9, 9.5, 21.0),
                },
            ],
            events: 5_000_000,
            wall_time_s: 2.5,
            events_per_sec: 2_000_000.0,
            ..Default::default()
        };
        r.queues.insert(
            "tor_down".into(),
            QueueStats {
                ports: 144,
                mean_bytes: 1_530.0,
                max_port_mean_bytes: 4_100.0,
                peak_bytes: 146_000,
                utilization: 0.8,
                drops: 0,
                ecn_marks: 0,
            },
        );
        r.queues.insert(
            "host_nic".into(),
            QueueStats {
                ports: 144,
                mean_bytes: 700.0,
                max_port_mean_bytes: 900.0,
                peak_bytes: 12_000,
                utilization: 0.81,
                drops: 2,
                ecn_marks: 5,
            },
        );
        r.counters.insert("grants_sent".into(), 4321);
        r
    }

    fn two_reports() -> Vec<RunReport> {
        let a = sample_report();
        let mut b = sample_report();
        b.protocol = "pfabric".into();
        b.label = "ideal".into();
        b.queues.remove("host_nic");
        b.counters.clear();
        vec![a, b]
    }

    fn temp_path(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!(
            "homa-sim-output-test-{}-{name}",
            std::process::id()
        ))
    }

    #[test]
    fn buckets_csv_header_and_rows() {
        let reports = two_reports();
        let path = temp_path("buckets.csv");
        write_buckets_csv(&path, &reports).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], BUCKETS_CSV_HEADER);
        assert_eq!(lines.len(), 1 + 2 * 2);
        // The label with a comma is quoted, so every row has 14 fields
        // outside quotes.
        assert_eq!(
            lines[1],
            "homa,w3,\"8 priorities, overcommit 2\",0.8,7,0,0.5,40,1200,500,1.3,1.1,2.75,6"
        );
        assert!(lines[4].starts_with("pfabric,w3,ideal,0.8,7,0.5,1,1201,2500000,500,"));
    }

    #[test]
    fn summary_csv_header_and_rows() {
        let reports = two_reports();
        let path = temp_path("summary.csv");
        write_summary_csv(&path, &reports).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1 + 2);
        let header: Vec<&str> = lines[0].split(',').collect();
        assert_eq!(
            &header[..5],
            ["protocol", "workload", "label", "load", "seed"]
        );
        for col in [
            "wasted_bandwidth",
            "overall_p50",
            "overall_p99",
            "short_half_p99",
            "host_nic_mean_bytes",
            "tor_down_peak_bytes",
            "tor_down_utilization",
            "tor_down_drops",
            "events",
            "wall_time_s",
            "events_per_sec",
            "counter_grants_sent",
        ] {
            assert!(header.contains(&col), "missing column {col}");
        }
        // Rows have as many fields as the header (the quoted label of the
        // first run holds one comma).
        assert_eq!(lines[1].split(',').count(), header.len() + 1);
        assert_eq!(lines[2].split(',').count(), header.len());
        // pfabric has no host_nic queue and no counters: empty fields.
        assert!(lines[2].ends_with(','));
        let i = header
            .iter()
            .position(|h| *h == "tor_down_peak_bytes")
            .unwrap();
        assert_eq!(lines[2].split(',').nth(i).unwrap(), "146000");
    }

    #[test]
    fn json_round_trips() {
        let reports = two_reports();
        let path = temp_path("runs.json");
        write_json(&path, &reports).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(text.trim_start().starts_with('['));
        let back: Vec<RunReport> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, reports);
    }

    #[test]
    fn text_table_mentions_protocols_and_numbers() {
        let reports = two_reports();
        let table = summary_table(&reports);
        for needle in [
            "homa",
            "pfabric",
            "w3",
            "80%",
            "1000",
            "2.75",
            "1.25",
            "7.50",
            "98.7%",
            "2.5%",
            "1.5",
            "146.0",
            "2.00M",
            "2.50",
            "40B-1.2K",
            "1.2K-2.5M",
            "9.50",
        ] {
            assert!(table.contains(needle), "missing {needle:?} in\n{table}");
        }
        for line in table.lines() {
            assert!(line.chars().count() <= 120, "too wide: {line}");
        }
        let md = markdown_table(&reports);
        assert_eq!(md.lines().count(), 2 + 2);
        assert!(md.lines().all(|l| l.starts_with('|') && l.ends_with('|')));
        assert!(md.contains("| homa |") && md.contains("| pfabric |"));
        assert!(md.contains("7.50") && md.contains("146.0"));
    }

    /// "deliv 53.7%" with no word of what it was: the summary says what
    /// the figure is, and why a short run's is low.
    #[test]
    fn low_delivery_is_explained() {
        let table = summary_table(&two_reports());
        assert!(table.contains("deliv/off"), "{table}");
        assert!(
            table.contains("delivered ÷ data offered during the measurement window"),
            "{table}"
        );
        assert!(!table.contains("note:"), "{table}");
        let mut short = sample_report();
        short.delivered_ratio = 0.537;
        short.window_s = 630e-6;
        let table = summary_table(&[short]);
        assert!(table.contains("53.7%"), "{table}");
        let note = table
            .lines()
            .skip_while(|l| !l.starts_with("note:"))
            .take_while(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        for needle in ["630 µs window", "2.5M", "--messages", "max-load"] {
            assert!(note.contains(needle), "{needle:?} missing in {note}");
        }
        for line in table.lines() {
            assert!(line.chars().count() <= 120, "too wide: {line}");
        }
    }

    #[test]
    fn long_spectra_are_thinned() {
        let mut r = sample_report();
        r.buckets = (0..100)
            .map(|i| Bucket {
                percentile_lo: i as f64 / 100.0,
                percentile_hi: (i + 1) as f64 / 100.0,
                size_lo: 100 * i + 1,
                size_hi: 100 * (i + 1),
                slowdown: SlowdownStats::default(),
            })
            .collect();
        let table = summary_table(&[r]);
        assert!(table.contains("(10 of 100 buckets)"));
        assert!(table.contains("0-1%") && table.contains("99-100%"));
    }

    #[test]
    fn formatting() {
        assert_eq!(fmt_percent(0.8), "80%");
        assert_eq!(fmt_percent(0.125), "12.5%");
        assert_eq!(fmt_slowdown(f64::NAN), "-");
    }
}
