//! `homa-sim reproduce thesis`: the thesis' simulation results (Montazeri,
//! 2019, chapters 5–6) rerun with the project's own Homa core, written as a
//! markdown report with plots and the thesis' numbers beside ours.
//!
//! The set: Homa's slowdown spectrum at 50% and 80% load on all seven
//! workloads; the maximum sustainable load of Homa and pFabric; queue
//! lengths at 80% load; the effect of the number of priority levels and of
//! the degree of overcommitment; Homa against pFabric at 80% load.

use crate::output;
use crate::plot::{self, Series, Stat};
use crate::report::RunReport;
use crate::scenario::{ProtocolChoice, Scenario};
use crate::search::{self, SearchResult};
use crate::sim;
use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// How much to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Messages per run, overriding the per-workload defaults.
    pub messages: Option<u64>,
    /// A fiftieth of the messages and a coarser search: checks the whole
    /// pipeline in a few minutes; the numbers are noisy.
    pub quick: bool,
    /// Runs in parallel.
    pub jobs: usize,
}

/// A workload of the set: our name, the thesis' name, and messages per run.
struct Workload {
    name: &'static str,
    thesis: &'static str,
    what: &'static str,
    /// Messages per spectrum run.
    messages: u64,
    /// Messages per probe of the load search: enough for the run to last
    /// tens of times the transfer time of its largest (truncated) message.
    search_messages: u64,
}

/// In the thesis' order (its W1..W7).
const WORKLOADS: [Workload; 7] = [
    Workload {
        name: "w1",
        thesis: "W1",
        what: "Memcached ETC",
        messages: 1_000_000,
        search_messages: 1_000_000,
    },
    Workload {
        name: "w2",
        thesis: "W2",
        what: "Google search",
        messages: 1_000_000,
        search_messages: 1_000_000,
    },
    Workload {
        name: "thesis-w3",
        thesis: "W3",
        what: "synthetic",
        messages: 1_000_000,
        search_messages: 500_000,
    },
    Workload {
        name: "w3",
        thesis: "W4",
        what: "Google all apps",
        messages: 1_000_000,
        search_messages: 1_000_000,
    },
    Workload {
        name: "thesis-w5",
        thesis: "W5",
        what: "Facebook web server",
        messages: 200_000,
        search_messages: 100_000,
    },
    Workload {
        name: "w4",
        thesis: "W6",
        what: "Facebook Hadoop",
        messages: 100_000,
        search_messages: 100_000,
    },
    Workload {
        name: "w5",
        thesis: "W7",
        what: "web search (DCTCP)",
        messages: 10_000,
        search_messages: 20_000,
    },
];

/// The thesis' Table 6.1 (KB, 80% load): (TOR→host mean, max), (TOR→aggr
/// mean, max), (aggr→TOR mean, max), indexed like [`WORKLOADS`].
const TABLE_6_1: [[(f64, f64); 3]; 7] = [
    [(1.7, 58.7), (0.7, 21.1), (0.8, 22.4)],
    [(5.5, 93.0), (1.0, 30.0), (1.1, 34.1)],
    [(15.4, 202.0), (1.7, 50.1), (2.2, 78.7)],
    [(12.8, 117.9), (1.6, 50.3), (1.8, 57.1)],
    [(18.1, 148.2), (1.7, 83.8), (1.9, 84.6)],
    [(17.3, 146.1), (1.7, 82.7), (1.7, 92.2)],
    [(17.3, 126.4), (1.7, 93.6), (1.6, 78.1)],
];

/// Threshold of the load search (see [`crate::search`]).
const SUSTAIN_THRESHOLD: f64 = 0.97;

/// Load searches truncate messages at this size (bytes), as the Homa/Linux
/// paper's cluster benchmark did: with the uncapped heavy tails (messages up
/// to 29 MB, 24 ms each at 10 Gbit/s) the backlog takes seconds of simulated
/// time to settle, and a search of tens of runs would take hours.
const SEARCH_MAX_MESSAGE: u64 = 1_000_000;

/// Host NIC queue of the reproduction, in full packets: the thesis'
/// simulator handed the NIC its next packet only when the previous one had
/// left (L647), so a short message waits behind at most one full packet at
/// its sender. (Its text, §3.6, describes a two-packet queue, the scenario
/// default.)
const THESIS_NIC_QUEUE_PACKETS: f64 = 1.0;

enum Task {
    Run(Scenario),
    Search(Scenario, u32),
}

enum Outcome {
    Run(Box<RunReport>),
    Search(SearchResult),
}

impl Task {
    fn describe(&self) -> String {
        let (s, what) = match self {
            Task::Run(s) => (s, "run"),
            Task::Search(s, _) => (s, "load search"),
        };
        format!(
            "{what} {} {} {} {:.0}%",
            s.protocol,
            s.label,
            s.traffic.workload,
            s.traffic.load * 100.0
        )
    }
}

fn run_all(tasks: Vec<Task>, jobs: usize) -> Result<Vec<Outcome>> {
    let n = tasks.len();
    let pb = ProgressBar::new(n as u64);
    pb.set_style(
        ProgressStyle::with_template(
            "[{elapsed_precise}] {bar:40} {pos}/{len} experiments, ETA {eta} {msg}",
        )
        .expect("valid template"),
    );
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Outcome>>>> = Mutex::new((0..n).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(task) = tasks.get(i) else { break };
                let t0 = Instant::now();
                let out = match task {
                    Task::Run(s) => sim::run_scenario(s, None).map(|r| Outcome::Run(Box::new(r))),
                    Task::Search(s, steps) => {
                        search::max_sustainable_load(s, 0.5, 1.0, *steps, SUSTAIN_THRESHOLD, |sc| {
                            sim::run_scenario(sc, None)
                        })
                        .map(Outcome::Search)
                    }
                }
                .with_context(|| task.describe());
                let line = format!(
                    "done: {} ({:.1} s)",
                    task.describe(),
                    t0.elapsed().as_secs_f64()
                );
                if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
                    pb.println(line);
                } else {
                    // No progress bar without a terminal: log each run.
                    eprintln!("{line}");
                }
                pb.inc(1);
                results.lock().expect("no panics")[i] = Some(out);
            });
        }
    });
    pb.finish_and_clear();
    results
        .into_inner()
        .expect("no panics")
        .into_iter()
        .map(|r| r.expect("every task ran"))
        .collect()
}

fn base(w: &Workload, o: &Options, search: bool) -> Scenario {
    let mut s = Scenario::default();
    let n = if search {
        w.search_messages
    } else {
        w.messages
    };
    if search {
        s.traffic.max_message = Some(SEARCH_MAX_MESSAGE);
    }
    s.messages = o
        .messages
        .unwrap_or(if o.quick { (n / 50).max(2_000) } else { n });
    s.traffic.workload = w.name.to_string();
    s.nic_queue_packets = THESIS_NIC_QUEUE_PACKETS;
    s
}

/// Runs the thesis set and writes `thesis.md`, plots, JSON and CSV to `out`.
pub fn thesis(out: &Path, o: Options) -> Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let t0 = Instant::now();
    let steps = if o.quick { 2 } else { 5 };
    let mut tasks = Vec::new();
    // Load searches first: they are the longest.
    for w in &WORKLOADS {
        for p in [ProtocolChoice::Homa, ProtocolChoice::Pfabric] {
            let mut s = base(w, &o, true);
            s.protocol = p;
            tasks.push(Task::Search(s, steps));
        }
    }
    let overcommit_workloads = ["w3", "w4"];
    for name in overcommit_workloads {
        let w = WORKLOADS.iter().find(|w| w.name == name).expect("known");
        for oc in [1u32, 2, 4] {
            let mut s = base(w, &o, true);
            s.homa.max_overcommit = Some(oc);
            s.label = format!("overcommit {oc}");
            tasks.push(Task::Search(s, steps));
        }
    }
    for w in &WORKLOADS {
        for load in [0.5, 0.8] {
            let mut s = base(w, &o, false);
            s.traffic.load = load;
            tasks.push(Task::Run(s));
        }
        let mut s = base(w, &o, false);
        s.traffic.load = 0.8;
        s.protocol = ProtocolChoice::Pfabric;
        tasks.push(Task::Run(s));
    }
    for name in overcommit_workloads {
        let w = WORKLOADS.iter().find(|w| w.name == name).expect("known");
        for prios in [1u8, 2, 4] {
            let mut s = base(w, &o, false);
            s.traffic.load = 0.8;
            s.homa.num_priorities = prios;
            s.label = format!("{prios} prio");
            tasks.push(Task::Run(s));
        }
    }
    let descriptions: Vec<(String, Scenario)> = tasks
        .iter()
        .map(|t| match t {
            Task::Run(s) | Task::Search(s, _) => (t.describe(), s.clone()),
        })
        .collect();
    let outcomes = run_all(tasks, o.jobs)?;
    let mut runs: Vec<RunReport> = Vec::new();
    let mut searches: Vec<(Scenario, SearchResult)> = Vec::new();
    for ((_, s), out) in descriptions.into_iter().zip(outcomes) {
        match out {
            Outcome::Run(r) => runs.push(*r),
            Outcome::Search(r) => searches.push((s, r)),
        }
    }
    output::write_json(&out.join("runs.json"), &runs)?;
    output::write_buckets_csv(&out.join("buckets.csv"), &runs)?;
    output::write_summary_csv(&out.join("summary.csv"), &runs)?;
    output::write_ports_csv(&out.join("ports.csv"), &runs)?;
    let search_json: Vec<serde_json::Value> = searches
        .iter()
        .map(|(s, r)| {
            serde_json::json!({
                "protocol": s.protocol.to_string(),
                "workload": s.traffic.workload,
                "label": s.label,
                "messages": s.messages,
                "max_load": r.max_load,
                "probes": r.probes,
            })
        })
        .collect();
    std::fs::write(
        out.join("max_load.json"),
        serde_json::to_string_pretty(&search_json)?,
    )?;
    let md = write_report(out, &o, &runs, &searches, t0.elapsed().as_secs_f64())?;
    std::fs::write(out.join("thesis.md"), md)?;
    Ok(())
}

fn find<'a>(
    runs: &'a [RunReport],
    protocol: &str,
    workload: &str,
    load: f64,
    label: &str,
) -> Option<&'a RunReport> {
    runs.iter().find(|r| {
        r.protocol == protocol
            && r.workload == workload
            && (r.load - load).abs() < 1e-9
            && r.label == label
    })
}

fn max_load(
    searches: &[(Scenario, SearchResult)],
    p: ProtocolChoice,
    wl: &str,
    label: &str,
) -> Option<f64> {
    searches
        .iter()
        .find(|(s, _)| s.protocol == p && s.traffic.workload == wl && s.label == label)
        .map(|(_, r)| r.max_load)
}

fn pct(x: Option<f64>) -> String {
    match x {
        None => "–".into(),
        // The search's lowest probe already failed.
        Some(0.0) => "< 50%".into(),
        Some(v) => format!("{:.0}%", v * 100.0),
    }
}

fn kb(x: f64) -> String {
    format!("{:.1}", x / 1000.0)
}

fn write_report(
    out: &Path,
    o: &Options,
    runs: &[RunReport],
    searches: &[(Scenario, SearchResult)],
    wall: f64,
) -> Result<String> {
    let topo = crate::topology::Topology::new(Scenario::default().topology)?;
    let mut md = String::new();
    let events: u64 = runs.iter().map(|r| r.events).sum();
    let run_wall: f64 = runs.iter().map(|r| r.wall_time_s).sum();
    writeln!(md, "# Thesis reproduction: generated data\n")?;
    writeln!(
        md,
        "Generated by `homa-sim reproduce thesis{}` in {:.0} s of wall time ({} jobs). \
         {} runs and {} load searches. The spectrum runs processed {} events in {:.0} s of \
         run time ({:.2} M events/s per run).\n",
        if o.quick { " --quick" } else { "" },
        wall,
        o.jobs,
        runs.len(),
        searches.len(),
        events,
        run_wall,
        events as f64 / run_wall.max(1e-9) / 1e6
    )?;
    writeln!(
        md,
        "Network: {} hosts in {} racks of {}, {} spines, {} / {} Gbit/s, {} ns per switch, \
         RTT {:.2} µs, RTTbytes {} B. Host NICs as in the thesis' simulator: the transport \
         hands the NIC its next packet only when at most {} full packet{} would be queued \
         (the thesis' text, §3.6, allows two; `nic_queue_packets` in a scenario). Homa is the \
         project's core with its defaults for this link. Seed 1 everywhere.\n",
        topo.hosts,
        topo.config.racks,
        topo.config.hosts_per_rack,
        topo.config.spines,
        topo.config.host_link_gbps,
        topo.config.core_link_gbps,
        topo.config.switch_delay_ns,
        topo.rtt() as f64 / 1e6,
        topo.rtt_bytes(),
        THESIS_NIC_QUEUE_PACKETS,
        if THESIS_NIC_QUEUE_PACKETS == 1.0 {
            ""
        } else {
            "s"
        }
    )?;

    // 1. Spectrum.
    writeln!(
        md,
        "## 1. Homa slowdown by message size, 50% and 80% load\n"
    )?;
    writeln!(
        md,
        "The thesis (Fig. 6.1): at 80% load the 99th-percentile slowdown of the shortest 50% \
         of messages is at most 2.2 in every workload.\n"
    )?;
    writeln!(
        md,
        "| ours | thesis | msgs | p99 short half 50% | p99 short half 80% | p50 all 80% | p99 all 80% | largest bucket p99 80% |"
    )?;
    writeln!(md, "|---|---|---|---|---|---|---|---|")?;
    for w in &WORKLOADS {
        let r50 = find(runs, "homa", w.name, 0.5, "");
        let r80 = find(runs, "homa", w.name, 0.8, "");
        let f = |r: Option<&RunReport>, g: &dyn Fn(&RunReport) -> f64| {
            r.map_or("–".to_string(), |r| format!("{:.2}", g(r)))
        };
        writeln!(
            md,
            "| {} | {} ({}) | {} | {} | {} | {} | {} | {} |",
            w.name,
            w.thesis,
            w.what,
            r80.map_or(0, |r| r.messages_measured),
            f(r50, &|r| r.short_half.p99),
            f(r80, &|r| r.short_half.p99),
            f(r80, &|r| r.overall.p50),
            f(r80, &|r| r.overall.p99),
            f(r80, &|r| r.buckets.last().map_or(0.0, |b| b.slowdown.p99)),
        )?;
        // Plot: Homa 50/80 and pFabric 80, p99 and p50.
        let mut series = Vec::new();
        for r in [r50, r80, find(runs, "pfabric", w.name, 0.8, "")]
            .into_iter()
            .flatten()
        {
            series.push(plot::spectrum_series(r, Stat::P99));
        }
        if let Some(r) = r80 {
            series.push(plot::spectrum_series(r, Stat::P50));
            plot::slowdown_plot(
                &out.join(format!("spectrum_{}.png", w.name)),
                &format!(
                    "{} = thesis {} ({}): slowdown by size",
                    w.name, w.thesis, w.what
                ),
                "slowdown",
                &series,
                &plot::size_ticks(r, 11),
            )?;
        }
    }
    writeln!(md)?;
    for w in &WORKLOADS {
        writeln!(md, "![{0}](spectrum_{0}.png)", w.name)?;
    }
    writeln!(md)?;

    // 2. Max load.
    writeln!(md, "## 2. Maximum sustainable load\n")?;
    writeln!(
        md,
        "The thesis (Fig. 6.3): Homa 89–92%, pFabric 75–87% over its workloads. Ours: bisection \
         over [50%, 100%] ({} rounds); a load is sustained when, over the second half of the \
         run, the hosts receive at least {:.0}% of the message bytes generated (see \
         `crates/homa-sim/src/search.rs`). Messages are truncated at {} bytes for the search \
         (see `SEARCH_MAX_MESSAGE` in `crates/homa-sim/src/reproduce.rs`).\n",
        if o.quick { 2 } else { 5 },
        SUSTAIN_THRESHOLD * 100.0,
        SEARCH_MAX_MESSAGE
    )?;
    writeln!(md, "| ours | thesis | msgs per probe | Homa | pFabric |")?;
    writeln!(md, "|---|---|---|---|---|")?;
    let mut groups = Vec::new();
    for w in &WORKLOADS {
        let h = max_load(searches, ProtocolChoice::Homa, w.name, "");
        let p = max_load(searches, ProtocolChoice::Pfabric, w.name, "");
        let msgs = searches
            .iter()
            .find(|(s, _)| s.traffic.workload == w.name)
            .map_or(0, |(s, _)| s.messages);
        writeln!(
            md,
            "| {} | {} | {} | {} | {} |",
            w.name,
            w.thesis,
            msgs,
            pct(h),
            pct(p)
        )?;
        groups.push((
            format!("{} ({})", w.name, w.thesis),
            vec![
                ("Homa".to_string(), h.unwrap_or(0.0) * 100.0),
                ("pFabric".to_string(), p.unwrap_or(0.0) * 100.0),
            ],
        ));
    }
    plot::bar_plot(
        &out.join("max_load.png"),
        "Maximum sustainable load",
        "load (%)",
        &groups,
    )?;
    writeln!(md, "\n![max load](max_load.png)\n")?;
    writeln!(
        md,
        "Every probe (load: completed ÷ generated in the late window):\n"
    )?;
    for (s, r) in searches {
        let probes: Vec<String> = r
            .probes
            .iter()
            .map(|p| {
                format!(
                    "{:.0}%: {:.3}{}",
                    p.load * 100.0,
                    p.delivered,
                    if p.sustained { "" } else { " ✗" }
                )
            })
            .collect();
        writeln!(
            md,
            "- {} {} {}: {}",
            s.protocol,
            s.traffic.workload,
            s.label,
            probes.join(", ")
        )?;
    }
    writeln!(md)?;

    // 3. Queues.
    writeln!(md, "## 3. Queue lengths at 80% load (KB)\n")?;
    writeln!(
        md,
        "Time-averaged bytes waiting (not counting the packet being sent), mean over the ports \
         of a kind; max = the largest occupancy seen on any such port. The thesis' Table 6.1 \
         in brackets.\n"
    )?;
    writeln!(
        md,
        "| ours (thesis) | TOR→host mean | TOR→host max | TOR→spine mean | TOR→spine max | spine→TOR mean | spine→TOR max | downlink utilization |"
    )?;
    writeln!(md, "|---|---|---|---|---|---|---|---|")?;
    for (i, w) in WORKLOADS.iter().enumerate() {
        let Some(r) = find(runs, "homa", w.name, 0.8, "") else {
            continue;
        };
        let q = |k: &str| r.queues.get(k).cloned().unwrap_or_default();
        let (down, up, spine) = (q("tor_down"), q("tor_up"), q("spine_down"));
        let t = TABLE_6_1[i];
        writeln!(
            md,
            "| {} ({}) | {} ({}) | {} ({}) | {} ({}) | {} ({}) | {} ({}) | {} ({}) | {:.0}% |",
            w.name,
            w.thesis,
            kb(down.mean_bytes),
            t[0].0,
            kb(down.peak_bytes as f64),
            t[0].1,
            kb(up.mean_bytes),
            t[1].0,
            kb(up.peak_bytes as f64),
            t[1].1,
            kb(spine.mean_bytes),
            t[2].0,
            kb(spine.peak_bytes as f64),
            t[2].1,
            down.utilization * 100.0
        )?;
    }
    writeln!(md)?;

    // 4. Priorities and overcommitment.
    writeln!(
        md,
        "## 4. Priority levels and overcommitment (w3 = thesis W4, w4 = thesis W6)\n"
    )?;
    writeln!(
        md,
        "The thesis: 4 levels are almost as good as 8, 2 are noticeably worse, 1 is more than \
         2.5× worse for short messages (Figs. 6.7, 6.9, §7.2.1); with one active message W6 \
         (Hadoop) tops out near 63% load, with 7 near 90% (Figs. 5.2, 5.4).\n"
    )?;
    writeln!(
        md,
        "| workload | priority levels | p99 short half 80% | p99 all 80% | p50 all 80% |"
    )?;
    writeln!(md, "|---|---|---|---|---|")?;
    for name in ["w3", "w4"] {
        let mut series = Vec::new();
        let mut ticks = Vec::new();
        for prios in [1u8, 2, 4, 8] {
            let label = if prios == 8 {
                String::new()
            } else {
                format!("{prios} prio")
            };
            let Some(r) = find(runs, "homa", name, 0.8, &label) else {
                continue;
            };
            writeln!(
                md,
                "| {} | {} | {:.2} | {:.2} | {:.2} |",
                name, prios, r.short_half.p99, r.overall.p99, r.overall.p50
            )?;
            let mut s = plot::spectrum_series(r, Stat::P99);
            s.label = format!("{prios} levels p99");
            series.push(s);
            ticks = plot::size_ticks(r, 11);
        }
        if !series.is_empty() {
            plot::slowdown_plot(
                &out.join(format!("priorities_{name}.png")),
                &format!("{name}: p99 slowdown at 80% load by number of priority levels"),
                "p99 slowdown",
                &series,
                &ticks,
            )?;
        }
    }
    writeln!(md)?;
    writeln!(
        md,
        "![priorities w3](priorities_w3.png)\n![priorities w4](priorities_w4.png)\n"
    )?;
    writeln!(
        md,
        "| workload | messages granted at once | max sustainable load |"
    )?;
    writeln!(md, "|---|---|---|")?;
    let mut oc_series = Vec::new();
    for name in ["w3", "w4"] {
        let mut pts = Vec::new();
        for oc in [1u32, 2, 4, 8] {
            let label = if oc == 8 {
                String::new()
            } else {
                format!("overcommit {oc}")
            };
            let m = max_load(searches, ProtocolChoice::Homa, name, &label);
            writeln!(md, "| {} | {} | {} |", name, oc, pct(m))?;
            if let Some(m) = m {
                pts.push((oc as f64, m * 100.0));
            }
        }
        oc_series.push(Series {
            label: name.to_string(),
            points: pts,
        });
    }
    plot::line_plot(
        &out.join("overcommit.png"),
        "Maximum sustainable load by degree of overcommitment",
        "messages granted at once",
        "max load (%)",
        &oc_series,
        false,
    )?;
    writeln!(md, "\n![overcommitment](overcommit.png)\n")?;

    // 5. Homa vs pFabric.
    writeln!(md, "## 5. Homa and pFabric at 80% load\n")?;
    writeln!(
        md,
        "The thesis: Homa's tail is within about 5% of pFabric's for short messages and better \
         for large messages on heavy-tailed workloads (W6, W7), where pFabric's drops hurt.\n"
    )?;
    writeln!(
        md,
        "| ours | thesis | Homa p99 short half | pFabric p99 short half | Homa p99 largest bucket | pFabric p99 largest bucket | pFabric drops |"
    )?;
    writeln!(md, "|---|---|---|---|---|---|---|")?;
    for w in &WORKLOADS {
        let (Some(h), Some(p)) = (
            find(runs, "homa", w.name, 0.8, ""),
            find(runs, "pfabric", w.name, 0.8, ""),
        ) else {
            continue;
        };
        let last = |r: &RunReport| r.buckets.last().map_or(0.0, |b| b.slowdown.p99);
        let drops: u64 = p.queues.values().map(|q| q.drops).sum();
        writeln!(
            md,
            "| {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {} |",
            w.name,
            w.thesis,
            h.short_half.p99,
            p.short_half.p99,
            last(h),
            last(p),
            drops
        )?;
    }
    writeln!(
        md,
        "\nThe spectrum plots of section 1 overlay pFabric's p99.\n"
    )?;
    writeln!(md, "## All runs\n")?;
    md.push_str(&output::markdown_table(runs));
    Ok(md)
}
