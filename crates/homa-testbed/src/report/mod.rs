//! What `testbed bench` measured, and its rendering as markdown and PNG.

use crate::analysis::{Bucket, Comparison, ShortHalf};
use crate::tc::ClassStats;
use setup::{switch_table, NOT_AVAILABLE};

mod setup;
use homa_measure::plot::{slowdown_plot, Series};
use homa_measure::table::{fmt_size, markdown_table};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::Path;

/// Picks one statistic of a bucket.
type BucketStat = fn(&Bucket) -> f64;

/// One protocol configuration the bench runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    /// This project's Homa with 8 priority levels.
    Homa,
    /// Homa with a single priority level (the paper's Figure 5 question).
    Homa1Prio,
    /// Linux TCP.
    Tcp,
    /// Homa with 8 priority levels and ByteDance's enhancements (per-peer
    /// RTT probes and windows; `core.bytedance.enabled`).
    HomaBd,
}

impl Variant {
    /// Parses `homa`, `homa-1prio`, `homa-bd` or `tcp`.
    pub fn parse(s: &str) -> anyhow::Result<Variant> {
        match s {
            "homa" => Ok(Variant::Homa),
            "homa-1prio" => Ok(Variant::Homa1Prio),
            "tcp" => Ok(Variant::Tcp),
            "homa-bd" => Ok(Variant::HomaBd),
            _ => anyhow::bail!("unknown variant {s:?}: choose homa, homa-1prio, homa-bd or tcp"),
        }
    }

    /// Short name (as on the command line).
    pub fn name(self) -> &'static str {
        match self {
            Variant::Homa => "homa",
            Variant::Homa1Prio => "homa-1prio",
            Variant::Tcp => "tcp",
            Variant::HomaBd => "homa-bd",
        }
    }

    /// Name in tables and legends.
    pub fn label(self) -> &'static str {
        match self {
            Variant::Homa => "Homa",
            Variant::Homa1Prio => "Homa, 1 priority",
            Variant::Tcp => "TCP",
            Variant::HomaBd => "Homa, ByteDance mode",
        }
    }
}

/// Switch counters of one priority class, summed over the ports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PriorityTotals {
    /// Homa priority level (0 lowest, 7 highest; TCP and non-IP use 0).
    pub priority: u8,
    /// Bytes sent out of the switch at this level.
    pub bytes: u64,
    /// Packets sent.
    pub packets: u64,
    /// Packets dropped (buffer full).
    pub drops: u64,
    /// Largest backlog seen on any one port at this level (sampled).
    pub peak_backlog_bytes: u64,
}

/// One run of one variant on one workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VariantRun {
    /// What ran.
    pub variant: Variant,
    /// Offered payload per host (Gbit/s), requests plus responses.
    #[serde(deserialize_with = "crate::analysis::f64_or_nan")]
    pub target_gbps: f64,
    /// Completed payload per host (Gbit/s) in the measured window.
    #[serde(deserialize_with = "crate::analysis::f64_or_nan")]
    pub achieved_gbps: f64,
    /// RPCs recorded (all hosts).
    pub completed: u64,
    /// RPCs that failed.
    pub errors: u64,
    /// Arrivals not sent because a client had its maximum outstanding.
    pub skipped: u64,
    /// RPCs still incomplete when the run ended.
    pub unfinished: u64,
    /// Worst lateness of a load generator against its schedule (µs).
    #[serde(deserialize_with = "crate::analysis::f64_or_nan")]
    pub max_send_lag_us: f64,
    /// CPU time of all node processes ÷ wall time of the run (cores).
    #[serde(deserialize_with = "crate::analysis::f64_or_nan")]
    pub cpu_cores: f64,
    /// Slowdown by size range.
    pub buckets: Vec<Bucket>,
    /// Slowdown of the shortest half of the messages.
    pub short_half: ShortHalf,
    /// Switch counters by priority level over the run; `None` where the
    /// bench has no switch to read (real hosts).
    pub switch: Option<Vec<PriorityTotals>>,
    /// Per-port, per-class switch counters over the run; `None` where the
    /// bench has no switch to read (real hosts).
    pub ports: Option<Vec<ClassStats>>,
    /// Selected Homa counters summed over hosts (empty for TCP).
    pub homa_counters: Vec<(String, u64)>,
}

/// Everything measured on one workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadResult {
    /// Workload name (w1..w5).
    pub workload: String,
    /// Link rate of every port during this workload (Mbit/s).
    pub rate_mbit: u64,
    /// MTU of every link during this workload (bytes).
    pub mtu: u32,
    /// Link bytes per payload byte of this workload (headers included).
    #[serde(deserialize_with = "crate::analysis::f64_or_nan")]
    pub wire_factor: f64,
    /// Homa's assumed round trip (ns): RTTbytes = rate × this.
    pub rtt_ns: u64,
    /// The idle testbed's minimum RTT by size: `(size, ns)`.
    pub baseline: Vec<(u64, f64)>,
    /// The runs, in the order they ran.
    pub runs: Vec<VariantRun>,
    /// TCP compared with Homa (8 levels), if both ran.
    pub tcp_vs_homa: Option<Comparison>,
    /// Homa with 1 level compared with 8 levels, if both ran.
    pub one_vs_eight: Option<Comparison>,
}

impl WorkloadResult {
    /// The run of `variant`, if it ran.
    pub fn run(&self, variant: Variant) -> Option<&VariantRun> {
        self.runs.iter().find(|r| r.variant == variant)
    }
}

/// A real host of a bench over ssh, as the report shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RealHost {
    /// The ssh destination (`user@host`, with `:port` if not 22).
    pub ssh: String,
    /// The address its node served on (data plane), `ip:port`.
    pub address: String,
    /// Its CPUs (`nproc`).
    pub cpus: usize,
    /// Its kernel release (`uname -r`).
    pub kernel: String,
}

/// The whole bench.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchResult {
    /// The command line that produced it.
    pub command: String,
    /// Hosts in the cluster.
    pub hosts: usize,
    /// Switch buffer per port and priority class (bytes); `None` on real
    /// hosts, whose switches the bench does not configure.
    pub buffer_bytes: Option<u64>,
    /// Host NIC queue limit (bytes); `None` on real hosts.
    pub host_queue_bytes: Option<u64>,
    /// Target load as a fraction of the link rate.
    #[serde(deserialize_with = "crate::analysis::f64_or_nan")]
    pub load: f64,
    /// Measured seconds per run.
    #[serde(deserialize_with = "crate::analysis::f64_or_nan")]
    pub seconds: f64,
    /// TCP connections from each client to each server.
    pub tcp_connections: usize,
    /// CPUs of the machine (real hosts: the fewest of any host).
    pub cpus: usize,
    /// Kernel release (real hosts: host 0's).
    pub kernel: String,
    /// The real hosts the bench ran on (`testbed bench-ssh`); `None` for
    /// the namespace testbed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub real_hosts: Option<Vec<RealHost>>,
    /// How the Homa runtime was configured, in words.
    pub homa_config: String,
    /// Per-workload results.
    pub workloads: Vec<WorkloadResult>,
}

fn f(x: f64) -> String {
    if !x.is_finite() {
        "–".into()
    } else if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

fn ratio(x: f64) -> String {
    if x.is_finite() {
        format!("{}×", f(x))
    } else {
        "–".into()
    }
}

impl BenchResult {
    /// The PNG file name of a workload's slowdown plot.
    pub fn plot_name(workload: &str) -> String {
        format!("slowdown-{workload}.png")
    }

    /// Draws one slowdown plot per workload into `dir`.
    pub fn write_plots(&self, dir: &Path) -> anyhow::Result<()> {
        for w in &self.workloads {
            let mut series = Vec::new();
            for run in &w.runs {
                let stats: &[(&str, BucketStat)] = if run.variant == Variant::Homa1Prio {
                    &[("p99", |b| b.p99)]
                } else {
                    &[("p50", |b| b.p50), ("p99", |b| b.p99)]
                };
                for (name, stat) in stats {
                    series.push(Series {
                        label: format!("{} {name}", run.variant.label()),
                        points: run
                            .buckets
                            .iter()
                            .filter(|b| b.count > 0)
                            .map(|b| (b.mid_pct(), stat(b)))
                            .collect(),
                    });
                }
            }
            let ticks = w
                .runs
                .first()
                .map(|r| size_ticks(&r.buckets))
                .unwrap_or_default();
            let title = format!(
                "{}: slowdown vs message size, {} hosts, {} Mbit/s links, {:.0}% load",
                w.workload,
                self.hosts,
                w.rate_mbit,
                self.load * 100.0
            );
            slowdown_plot(
                &dir.join(Self::plot_name(&w.workload)),
                &title,
                "Slowdown (RTT ÷ idle Homa RTT)",
                &series,
                &ticks,
            )?;
        }
        Ok(())
    }

    /// The report, as markdown; plots are referenced under `plot_dir`
    /// (relative to the markdown file).
    pub fn to_markdown(&self, plot_dir: &str) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "# Testbed: Homa vs TCP on real sockets under load\n");
        match &self.real_hosts {
            Some(hosts) => self.real_setup(&mut s, hosts),
            None => self.testbed_setup(&mut s),
        }
        let _ = writeln!(
            s,
            "- Every host runs `homa-perf cluster`: a server and a client issuing Poisson requests to random other \
             hosts, sizes from the workload (truncated at 1 MB), responses the size of the request. Each host \
             offers {:.0}% of its link rate, counting requests plus responses sent and one Ethernet+IP+UDP+Homa \
             header per packet (the payload rate is that ÷ the workload's wire factor; the paper counted payload \
             only, which for w2 would overload the link). {} s measured after a warm-up. TCP uses {} connection(s) \
             from each client to each server, with requests pipelined on them.",
            self.load * 100.0,
            self.seconds,
            self.tcp_connections
        );
        let _ = writeln!(s, "- Homa: {}", self.homa_config);
        let _ = writeln!(
            s,
            "- Slowdown = RTT ÷ the minimum RTT of Homa on the idle testbed for that size (measured first, \
             one RPC at a time, interpolated between probed sizes). Buckets cut each workload's size CDF into \
             equal shares of messages; the plots' x axis is linear in the number of messages.\n"
        );

        let _ = writeln!(s, "## Summary\n");
        let _ = writeln!(
            s,
            "Shortest 50% of messages (sizes up to the workload's median), p99 slowdown; the ratio is TCP ÷ Homa. \
             \"Worst bucket\" is the smallest TCP ÷ Homa ratio of any size bucket (p50 / p99); below 1 means TCP \
             was better there.\n"
        );
        let mut rows = Vec::new();
        for w in &self.workloads {
            let g = |v: Variant| {
                w.run(v)
                    .map(|r| f(r.achieved_gbps * 1000.0))
                    .unwrap_or("–".into())
            };
            let p99 = |v: Variant| w.run(v).map(|r| f(r.short_half.p99)).unwrap_or("–".into());
            let (r99, r50, worst, better) = match &w.tcp_vs_homa {
                Some(c) => (
                    ratio(c.short_half_p99_ratio),
                    ratio(c.short_half_p50_ratio),
                    format!(
                        "{} / {}",
                        ratio(c.worst_bucket_p50_ratio),
                        ratio(c.worst_bucket_p99_ratio)
                    ),
                    if c.buckets_better_under_other.is_empty() {
                        "none".to_string()
                    } else {
                        c.buckets_better_under_other
                            .iter()
                            .map(|&b| format!("≤{}", fmt_size(b)))
                            .collect::<Vec<_>>()
                            .join(", ")
                    },
                ),
                None => ("–".into(), "–".into(), "–".into(), "–".into()),
            };
            rows.push(vec![
                w.workload.clone(),
                format!("{} Mbit/s, {} B", w.rate_mbit, w.mtu),
                g(Variant::Homa),
                g(Variant::Tcp),
                p99(Variant::Homa),
                p99(Variant::Homa1Prio),
                p99(Variant::Tcp),
                r99,
                r50,
                worst,
                better,
            ]);
        }
        s.push_str(&markdown_table(
            &[
                "workload",
                "link, MTU",
                "Homa Mbit/s/host",
                "TCP Mbit/s/host",
                "Homa p99",
                "Homa 1-prio p99",
                "TCP p99",
                "TCP ÷ Homa p99",
                "TCP ÷ Homa p50",
                "worst bucket p50 / p99",
                "buckets better under TCP",
            ],
            &[],
            &rows,
        ));
        let _ = writeln!(s);

        let _ = writeln!(s, "## Runs\n");
        let _ = writeln!(
            s,
            "Achieved = payload of the RPCs completed in the window, per host (requests plus responses). CPU = {}; skipped = Poisson arrivals not sent because the \
             client already had its maximum outstanding; lag = worst lateness of a generator against its schedule; \
             unfinished = RPCs still unanswered 5 s after the window, which count in the slowdowns with the time \
             they had waited (a lower bound).\n",
            self.cpu_meaning()
        );
        let mut rows = Vec::new();
        for w in &self.workloads {
            for r in &w.runs {
                let drops = r.switch.as_ref().map_or(NOT_AVAILABLE.to_string(), |sw| {
                    sw.iter().map(|p| p.drops).sum::<u64>().to_string()
                });
                rows.push(vec![
                    w.workload.clone(),
                    r.variant.label().to_string(),
                    f(r.target_gbps * 1000.0),
                    f(r.achieved_gbps * 1000.0),
                    r.completed.to_string(),
                    r.errors.to_string(),
                    r.unfinished.to_string(),
                    r.skipped.to_string(),
                    format!("{:.0}", r.max_send_lag_us),
                    format!("{:.2}", r.cpu_cores),
                    drops,
                ]);
            }
        }
        s.push_str(&markdown_table(
            &[
                "workload",
                "variant",
                "offered payload Mbit/s/host",
                "achieved",
                "RPCs",
                "errors",
                "unfinished",
                "skipped",
                "lag µs",
                "CPU cores",
                "switch drops",
            ],
            &[],
            &rows,
        ));
        let _ = writeln!(s);

        for w in &self.workloads {
            let _ = writeln!(s, "## {}\n", w.workload);
            let _ = writeln!(
                s,
                "![{} slowdown]({}/{})\n",
                w.workload,
                plot_dir,
                Self::plot_name(&w.workload)
            );
            let _ = writeln!(
                s,
                "Links {} Mbit/s, MTU {} B, wire factor {:.3}; Homa's RTTbytes assume a {:.0} µs round trip ({} B). Idle minimum RTT: {}.\n",
                w.rate_mbit,
                w.mtu,
                w.wire_factor,
                w.rtt_ns as f64 / 1e3,
                w.rate_mbit * w.rtt_ns / 8_000,
                idle_summary(&w.baseline)
            );
            let both = w.run(Variant::Tcp).zip(w.run(Variant::Homa));
            let mut header = vec!["sizes".to_string(), "% of messages".to_string()];
            for r in &w.runs {
                header.push(format!("{} p50", r.variant.label()));
                header.push(format!("{} p99", r.variant.label()));
            }
            if both.is_some() {
                header.push("TCP ÷ Homa p99".to_string());
            }
            let n = w.runs.first().map_or(0, |r| r.buckets.len());
            let rows: Vec<Vec<String>> = (0..n)
                .map(|i| {
                    let b0 = &w.runs[0].buckets[i];
                    let mut row = vec![
                        format!("{}–{}", fmt_size(b0.min_size), fmt_size(b0.max_size)),
                        format!("{:.0}–{:.0}", b0.lo_pct, b0.hi_pct),
                    ];
                    for r in &w.runs {
                        row.push(f(r.buckets[i].p50));
                        row.push(f(r.buckets[i].p99));
                    }
                    if let Some((t, h)) = both {
                        row.push(ratio(t.buckets[i].p99 / h.buckets[i].p99));
                    }
                    row
                })
                .collect();
            let header: Vec<&str> = header.iter().map(String::as_str).collect();
            s.push_str(&markdown_table(&header, &[], &rows));
            let _ = writeln!(s);
            let _ = writeln!(s, "{}\n", limits(w, self.real_hosts.is_some()));
            if let Some(c) = &w.one_vs_eight {
                let _ = writeln!(
                    s,
                    "Homa with 1 priority level ÷ 8 levels, shortest half: p99 {}, p50 {}; worst bucket p50 / p99 {} / {}.\n",
                    ratio(c.short_half_p99_ratio),
                    ratio(c.short_half_p50_ratio),
                    ratio(c.worst_bucket_p50_ratio),
                    ratio(c.worst_bucket_p99_ratio)
                );
            }
            switch_table(&mut s, w);
            for r in &w.runs {
                if !r.homa_counters.is_empty() {
                    let list = r
                        .homa_counters
                        .iter()
                        .map(|(k, v)| format!("{k} {v}"))
                        .collect::<Vec<_>>()
                        .join(", ");
                    let _ = writeln!(s, "{} counters (all hosts): {list}.\n", r.variant.label());
                }
            }
        }
        s
    }
}

/// What bounds Homa's short-message latency on this link, from the data:
/// the frame a packet of any priority must wait for, and the CPU.
fn limits(w: &WorkloadResult, real_hosts: bool) -> String {
    let frame_us = (w.mtu as f64 + 14.0) * 8.0 / w.rate_mbit as f64;
    let idle_us = w.baseline.first().map_or(f64::NAN, |p| p.1 / 1e3);
    let mut out = format!(
        "Limits: a full frame takes {frame_us:.0} µs on this link, {:.1}× the idle round trip of the \
         smallest message ({idle_us:.0} µs). Switch ports do not preempt, and the host NIC is a FIFO \
         that Homa's pacer keeps to about half a frame, so even at the top priority each direction of \
         a short RPC can wait up to ~2.5 frames (1.5 at the NIC, 1 at the switch port): up to ~{:.0}× \
         slowdown from frames alone, half that on average.",
        frame_us / idle_us,
        1.0 + 5.0 * frame_us / idle_us
    );
    if let Some(h) = w.run(Variant::Homa) {
        let _ = write!(
            out,
            " Homa's shortest half: p50 {}, p99 {}.",
            f(h.short_half.p50),
            f(h.short_half.p99),
        );
        let _ = if real_hosts {
            write!(
                out,
                " Each host's node used {:.2} cores on average during Homa's run.",
                h.cpu_cores
            )
        } else {
            write!(
                out,
                " The machine's 2 CPUs were {:.0}% busy during Homa's window.",
                h.cpu_cores / 2.0 * 100.0
            )
        };
    }
    out
}

/// "100B 45µs, 10KB 120µs, …": a few points of the idle baseline.
fn idle_summary(points: &[(u64, f64)]) -> String {
    if points.is_empty() {
        return "none".into();
    }
    let picks = [0, points.len() / 2, points.len() - 1];
    let mut out: Vec<String> = Vec::new();
    for (k, &i) in picks.iter().enumerate() {
        if k > 0 && i == picks[k - 1] {
            continue;
        }
        let (size, ns) = points[i];
        out.push(format!("{} {:.0} µs", fmt_size(size), ns / 1e3));
    }
    out.join(", ")
}

/// X-axis labels: the upper size of some buckets, at their right edge,
/// skipping labels that would overlap (closer than 6 percentage points).
fn size_ticks(buckets: &[Bucket]) -> Vec<(f64, String)> {
    let mut ticks: Vec<(f64, String)> = Vec::new();
    for b in buckets {
        if ticks.last().is_some_and(|t| b.hi_pct - t.0 < 6.0) {
            continue;
        }
        ticks.push((b.hi_pct.min(99.5), fmt_size(b.max_size)));
    }
    ticks
}
