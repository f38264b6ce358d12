//! The `sird.md` report and its plots, written from the results.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use homa_measure::plot::{line_plot, Series};
use homa_measure::table::{markdown_table, Align};

use super::{added_p99, read_result, ExperimentResult, Variant};
use crate::bench;
use crate::sird_sniff::FlagCounts;

/// Writes `out/name.md` (and its plots) from the experiment results in
/// `out/name/`, whichever exist.
pub fn render(out: &Path, name: &str) -> Result<()> {
    let dir = out.join(name);
    let incast = read_result(&dir.join("incast.json"))?;
    let congested = read_result(&dir.join("congested.json"))?;
    if incast.is_none() && congested.is_none() {
        bail!(
            "no results in {} (incast.json, congested.json)",
            dir.display()
        );
    }
    if let Some(r) = &incast {
        write_plots(r, &dir)?;
    }
    let path = out.join(format!("{name}.md"));
    let old = fs::read_to_string(&path).unwrap_or_default();
    let md = with_kept_notes(markdown(incast.as_ref(), congested.as_ref(), name), &old);
    fs::write(&path, md).with_context(|| format!("cannot write {}", path.display()))?;
    eprintln!("testbed: wrote {}", path.display());
    Ok(())
}

/// The line after which `sird.md` holds hand-written text; regenerating
/// the report keeps everything from it on.
pub const NOTES_MARKER: &str =
    "<!-- hand-written below: `testbed sird` keeps it when it rewrites the tables above -->";

/// `generated` followed by the hand-written part of `old` (from
/// [`NOTES_MARKER`] on), if it has one.
pub fn with_kept_notes(generated: String, old: &str) -> String {
    match old.find(NOTES_MARKER) {
        Some(i) => format!("{}\n\n{}", generated.trim_end(), &old[i..]),
        None => generated,
    }
}

/// The plot files of an incast result.
pub const CDF_PLOT: &str = "incast-cdf.png";
/// The tail plot (1 − CDF on a log axis).
pub const CCDF_PLOT: &str = "incast-ccdf.png";

fn write_plots(r: &ExperimentResult, dir: &Path) -> Result<()> {
    let mut cdf = Vec::new();
    let mut ccdf = Vec::new();
    // The first repetition's curves, and one idle curve.
    if let Some(first) = r.incast.first() {
        cdf.push(Series {
            label: "idle (no incast)".into(),
            points: first.unloaded_cdf.clone(),
        });
    }
    for v in &r.variants {
        for run in r.incast.iter().filter(|x| &x.variant == v) {
            let label = Variant::parse(v).map_or(v.as_str(), |v| v.label());
            cdf.push(Series {
                label: format!("{label} (run {})", run.repeat),
                points: run.loaded_cdf.clone(),
            });
        }
    }
    for s in &cdf {
        ccdf.push(Series {
            label: s.label.clone(),
            points: s
                .points
                .iter()
                .map(|&(x, q)| (x, (100.0 * (1.0 - q)).max(0.01)))
                .filter(|&(_, y)| y < 100.0)
                .collect(),
        });
    }
    let title = format!(
        "{}-to-1 incast, probe RTT ({} Mbit/s, MTU {}, one FIFO)",
        r.incast.first().map_or(6, |x| x.sender_goodput_mbps.len()),
        r.link.rate_mbit,
        r.link.mtu
    );
    line_plot(
        &dir.join(CDF_PLOT),
        &title,
        "probe round trip (µs)",
        "fraction of probes",
        &cdf,
        false,
    )
    .map_err(|e| anyhow!("plotting: {e}"))?;
    line_plot(
        &dir.join(CCDF_PLOT),
        &title,
        "probe round trip (µs)",
        "% of probes slower (100 × (1 − CDF), floor 0.01)",
        &ccdf,
        true,
    )
    .map_err(|e| anyhow!("plotting: {e}"))?;
    Ok(())
}

fn f0(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.0}")
    } else {
        "–".into()
    }
}

fn f1(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.1}")
    } else {
        "–".into()
    }
}

/// A markdown table whose first column (the variant) is aligned left and
/// every other (numbers) right.
fn variant_table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let align: Vec<Align> = std::iter::once(Align::Left)
        .chain(std::iter::repeat_n(Align::Right, headers.len() - 1))
        .collect();
    markdown_table(headers, &align, rows)
}

/// `congested% / other%` of DATA packets with `csn` into receiver 1 (host
/// 1), whose own sender is host `receivers + 1`.
fn csn_cell(counts: &BTreeMap<String, FlagCounts>, receivers: usize) -> String {
    let share = |host: usize| {
        let ip = format!("10.111.0.{}", host + 1);
        counts
            .get(&ip)
            .filter(|c| c.data > 0)
            .map_or("–".to_string(), |c| {
                format!("{:.0}%", 100.0 * c.csn as f64 / c.data as f64)
            })
    };
    if counts.is_empty() {
        return "–".into();
    }
    format!("{} / {}", share(0), share(receivers + 1))
}

/// The report in markdown.
pub fn markdown(
    incast: Option<&ExperimentResult>,
    congested: Option<&ExperimentResult>,
    name: &str,
) -> String {
    let mut s = String::new();
    s.push_str("# SIRD on the emulated testbed (the paper's §6)\n\n");
    s.push_str(
        "Generated by `testbed sird` (crates/homa-testbed); the text between the tables is \
         in `sird/report.rs` (`markdown`). Data: `",
    );
    s.push_str(name);
    s.push_str("/*.json`.\n\n");
    if let Some(r) = incast {
        s.push_str(&incast_md(r, name));
    }
    if let Some(r) = congested {
        s.push_str(&congested_md(r));
    }
    s
}

/// The `title` of an experiment's section, its command line, whether it is
/// partial and its link settings.
fn section_head(title: &str, r: &ExperimentResult) -> String {
    let mut s = format!("{title}\n\n");
    s.push_str(&format!("Command: `{}`\n\n", r.command));
    if !r.complete {
        s.push_str("**Partial: not every planned run finished.**\n\n");
    }
    s.push_str(&link_md(r));
    s
}

fn link_md(r: &ExperimentResult) -> String {
    let l = &r.link;
    format!(
        "Link: {} Mbit/s, MTU {} ({:.0} µs per full frame), one FIFO of {} kB per switch \
         egress port (no priorities), {} hosts. RTT assumed {:.0} µs{}, so BDP = {} B ({:.1} full packets), B = {} B, UnschT = {} B, \
         SThr = BDP/2 = {} B. Largest payload goodput of a link: {:.0} Mbit/s. {} s \
         measured after {} s of warm-up per run; {} runs per variant, interleaved; load \
         average before: {:.2}.\n\n",
        l.rate_mbit,
        l.mtu,
        l.frame_us,
        l.buffer_bytes / 1000,
        r.hosts,
        l.rtt_ns as f64 / 1e3,
        if l.rtt_ns == bench::auto_rtt_ns(l.rate_mbit, l.mtu) {
            " (50 µs of software + two frame times)"
        } else {
            ""
        },
        l.bdp_bytes,
        l.bdp_bytes as f64 / l.frame_bytes(),
        l.bucket_bytes,
        l.unsched_threshold,
        l.sender_threshold,
        l.max_goodput_mbps,
        r.seconds,
        r.warmup,
        r.repeats,
        r.load_before
    )
}

fn incast_md(r: &ExperimentResult, name: &str) -> String {
    let mut s = section_head("## 6-to-1 incast: probe round trips", r);
    let l = &r.link;
    let rows: Vec<Vec<String>> = r
        .incast
        .iter()
        .map(|x| {
            let (added, frames) = added_p99(x, l);
            vec![
                Variant::parse(&x.variant).map_or(x.variant.clone(), |v| v.label().to_string()),
                x.repeat.to_string(),
                format!("{} / {}", f0(x.unloaded.p50_us), f0(x.unloaded.p99_us)),
                f0(x.loaded.p50_us),
                f0(x.loaded.p90_us),
                f0(x.loaded.p99_us),
                f0(x.loaded.p999_us),
                format!("{} ({})", f0(added), f1(frames)),
                format!(
                    "{} ({}%)",
                    f0(x.goodput_mbps),
                    f0(100.0 * x.goodput_mbps / l.max_goodput_mbps)
                ),
                format!(
                    "{} / {} / {}",
                    f1(x.queue.mean_bytes / 1e3),
                    f1(x.queue.p99_bytes as f64 / 1e3),
                    f1(x.queue.max_bytes as f64 / 1e3)
                ),
                x.queue.drops.to_string(),
                format!("{}", x.loaded.count),
                cores_cell(x.cpu_cores, x.node_cores),
            ]
        })
        .collect();
    s.push_str(&variant_table(
        &[
            "variant",
            "run",
            "idle p50 / p99 (µs)",
            "p50",
            "p90",
            "p99",
            "p99.9",
            "added p99 (frames)",
            "goodput Mbit/s (% of max)",
            "queue mean / p99 / max (kB)",
            "drops",
            "probes",
            "CPU cores: machine / ours",
        ],
        &rows,
    ));
    s.push_str(
        "\nLoaded columns are probe round trips under the incast (µs). \"added p99\" = loaded \
         p99 − idle p99 of the same run, and in full frames at the link rate (the paper's \
         \"packets queued\"). The queue is the switch egress towards the receiver, sampled \
         with `tc` every few tens of ms (samples miss short peaks); drops are its counter \
         over the window.\n\n",
    );
    s.push_str(&format!(
        "![probe RTT CDF]({name}/{CDF_PLOT})\n\n![probe RTT tail]({name}/{CCDF_PLOT})\n\n(every \
         run; the idle curve is the first run's idle phase)\n\n"
    ));
    s
}

fn congested_md(r: &ExperimentResult) -> String {
    let mut s = section_head("## Congested sender", r);
    let l = &r.link;
    let rows: Vec<Vec<String>> = r
        .congested
        .iter()
        .map(|x| {
            let n = x.receiver_goodput_mbps.len().max(1) as f64;
            let list = |v: &[f64]| v.iter().map(|g| f0(*g)).collect::<Vec<_>>().join(", ");
            vec![
                Variant::parse(&x.variant).map_or(x.variant.clone(), |v| v.label().to_string()),
                x.repeat.to_string(),
                f0(x.aggregate_mbps),
                format!(
                    "{}%",
                    f0(100.0 * x.aggregate_mbps / (l.max_goodput_mbps * n))
                ),
                list(&x.from_congested_mbps),
                list(&x.from_other_mbps),
                format!(
                    "{} ({}%)",
                    f0(x.receiver_link_mbps.iter().sum::<f64>()),
                    f0(100.0 * x.receiver_link_mbps.iter().sum::<f64>() / (l.rate_mbit as f64 * n))
                ),
                f1(x.max_backlog_bytes as f64 / 1e3),
                x.drops.to_string(),
                csn_cell(&x.csn_into_first_receiver, n as usize),
                cores_cell(x.cpu_cores, x.node_cores),
            ]
        })
        .collect();
    s.push_str(&variant_table(
        &[
            "variant",
            "run",
            "aggregate Mbit/s",
            "of max",
            "from the congested sender, per receiver",
            "from the other sender, per receiver",
            "receiver links, tc (Mbit/s)",
            "max queue (kB)",
            "drops",
            "csn into receiver 1: congested / other",
            "CPU cores: machine / ours",
        ],
        &rows,
    ));
    s.push_str(
        "\n\"csn into receiver 1\": the share of DATA packets that reached receiver 1 with \
         SIRD's congested-sender bit, from the congested sender (host 0) and from the \
         receiver's own sender, counted on the switch port for up to 3 s mid-window \
         (`testbed sird-sniff`, a packet socket). ",
    );
    s.push_str(
        "Goodput is request payload completed at the receivers in the window (whole messages, so \
         it moves in steps of one message per window); \"of max\" divides by the receivers' \
         total payload capacity. \"receiver links\" are the bytes the switch sent to the \
         receivers in the window (frames, headers included) over the links' total rate. \
         CPU: the machine's busy cores in the window / the cores the experiment's own \
         processes used.\n\n",
    );
    s
}

/// "machine / ours" CPU cores, "n/a" for a share that was not measured.
fn cores_cell(machine: f64, ours: f64) -> String {
    let f = |x: f64| {
        if x.is_finite() {
            format!("{x:.2}")
        } else {
            "n/a".to_string()
        }
    };
    format!("{} / {}", f(machine), f(ours))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sird::{IncastRun, LinkInfo, Quantiles};

    #[test]
    fn markdown_reports_added_latency_in_frames() {
        let link = LinkInfo::new(400, 9000, 410_560, 1_000_000);
        let run = IncastRun {
            variant: "sird".into(),
            repeat: 1,
            unloaded: Quantiles {
                count: 10,
                p50_us: 60.0,
                p99_us: 100.0,
                ..Default::default()
            },
            loaded: Quantiles {
                count: 10,
                p50_us: 200.0,
                p99_us: 100.0 + 2.0 * link.frame_us,
                ..Default::default()
            },
            goodput_mbps: 300.0,
            ..Default::default()
        };
        let (added, frames) = added_p99(&run, &link);
        assert!((frames - 2.0).abs() < 1e-9, "{added} {frames}");
        let r = ExperimentResult {
            experiment: "incast".into(),
            link,
            incast: vec![run],
            variants: vec!["sird".into()],
            complete: true,
            ..Default::default()
        };
        let md = markdown(Some(&r), None, "sird");
        assert!(md.contains("SIRD, credit pacing"), "{md}");
        assert!(md.contains("361 (2.0)"), "{md}");
        assert!(!md.contains("Partial"));
        // Hand-written notes survive a rewrite; without them nothing is added.
        let old = format!("old tables\n{NOTES_MARKER}\nmy analysis\n");
        let kept = with_kept_notes(md.clone(), &old);
        assert!(kept.starts_with(&md.trim_end().to_string()));
        assert!(kept.ends_with("my analysis\n") && !kept.contains("old tables"));
        assert_eq!(with_kept_notes(md.clone(), "no marker"), md);
    }
}
