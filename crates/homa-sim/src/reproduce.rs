//! `homa-sim reproduce thesis`: the thesis' simulation results (Montazeri,
//! 2019, chapters 5–6) rerun with the project's own Homa core, written as a
//! markdown report with plots and the thesis' numbers beside ours.
//!
//! The set: Homa's slowdown spectrum at 50% and 80% load on all seven
//! workloads; the maximum sustainable load of Homa and pFabric; queue
//! lengths at 80% load; the effect of the number of priority levels and of
//! the degree of overcommitment; Homa against pFabric at 80% load.

use crate::output;
use crate::protocols;
use crate::report::RunReport;
use crate::scenario::{ProtocolChoice, Scenario};
use crate::search::{self, SearchResult};
use anyhow::{Context, Result};
use homa_measure::progress::Progress;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

pub mod bytedance;
mod bytedance_report;
mod markdown;
pub mod sird;
pub mod sird_preset;
mod sird_report;

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
pub(crate) const THESIS_NIC_QUEUE_PACKETS: f64 = 1.0;

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
        let load = match self {
            Task::Run(s) => format!(" {:.0}%", s.traffic.load * 100.0),
            Task::Search(..) => String::new(),
        };
        let label = if s.label.is_empty() {
            String::new()
        } else {
            format!(" [{}]", s.label)
        };
        format!("{what} {}{label} {}{load}", s.protocol, s.traffic.workload)
    }
}

/// Payload bytes per simulated packet, for [`work`]: about a full packet
/// of the default topology.
const WORK_PACKET_BYTES: u64 = 1_400;

/// Work of building a simulation (the network, the hosts), in packets:
/// about what a run of a few thousand small messages costs besides.
const RUN_SETUP_WORK: f64 = 10_000.0;

/// The simulated work of one run of `s`, in data packets (a message of
/// any size takes one at least, and costs about one more in grants, acks
/// and bookkeeping), plus the building of the simulation: what a run's
/// wall time grows with, across workloads whose mean sizes differ ten
/// thousandfold, so the estimate of the time left rests on it rather than
/// on a count of runs.
pub fn work(s: &Scenario) -> f64 {
    let packets = homa_measure::cdf::SizeDist::by_name(&s.traffic.workload)
        .map(|d| {
            let d = d.capped(s.traffic.max_message.unwrap_or(u64::MAX));
            d.rows()
                .map(|(size, mass)| size.div_ceil(WORK_PACKET_BYTES).max(1) as f64 * mass)
                .sum::<f64>()
        })
        .unwrap_or(1.0);
    RUN_SETUP_WORK + s.messages as f64 * (packets + 1.0)
}

impl Task {
    /// Runs of the task: a search probes the lowest and highest load, then
    /// bisects `steps` times (it may stop sooner).
    fn runs(&self) -> u32 {
        match self {
            Task::Run(_) => 1,
            Task::Search(_, steps) => steps + 2,
        }
    }

    fn scenario(&self) -> &Scenario {
        match self {
            Task::Run(s) | Task::Search(s, _) => s,
        }
    }

    /// Its work in [`work`]'s units.
    fn work(&self) -> f64 {
        work(self.scenario()) * f64::from(self.runs())
    }
}

fn run_all(tasks: Vec<Task>, jobs: usize) -> Result<Vec<Outcome>> {
    let n = tasks.len();
    let total: f64 = tasks.iter().map(Task::work).sum();
    let progress = Progress::new(total, n, false);
    // Work done by each task so far (finished runs and the share of the
    // current one), updated from the simulations' progress callbacks.
    let done: Mutex<Vec<f64>> = Mutex::new(vec![0.0; n]);
    let set_done = |i: usize, w: f64| -> f64 {
        let mut d = done.lock().unwrap_or_else(|e| e.into_inner());
        d[i] = w;
        d.iter().sum()
    };
    // The largest tasks first: the runs in parallel finish together, and
    // the pace the estimate of the time left rests on is measured on the
    // bulk of the work from the start (small tasks last cannot surprise).
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| tasks[b].work().total_cmp(&tasks[a].work()));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Outcome>>>> = Mutex::new((0..n).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| {
                while let Some(&i) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let task = &tasks[i];
                    let t0 = Instant::now();
                    let per_run = work(task.scenario());
                    let mut runs_done = 0u32;
                    let one_run = |s: &Scenario, runs_done: u32| {
                        let mut cb = |completed: u64, total: u64| {
                            let share = completed as f64 / total.max(1) as f64;
                            let sum = set_done(i, per_run * (f64::from(runs_done) + share));
                            progress.set_done(sum);
                        };
                        protocols::run(s, Some(&mut cb))
                    };
                    let out = match task {
                        Task::Run(s) => one_run(s, 0).map(|r| Outcome::Run(Box::new(r))),
                        Task::Search(s, steps) => search::max_sustainable_load(
                            s,
                            0.5,
                            1.0,
                            *steps,
                            SUSTAIN_THRESHOLD,
                            |sc| {
                                let r = one_run(sc, runs_done);
                                runs_done += 1;
                                r
                            },
                        )
                        .map(Outcome::Search),
                    }
                    .with_context(|| task.describe());
                    // A search that stopped early still did its whole share.
                    let sum = set_done(i, task.work());
                    progress.job_done(
                        sum,
                        &format!("{} ({:.1} s)", task.describe(), t0.elapsed().as_secs_f64()),
                    );
                    results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(out);
                }
            });
        }
    });
    progress.finish();
    results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
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
    // (Run largest first by `run_all`, whatever the order here.)
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
    let md = markdown::write_report(out, &o, &runs, &searches, t0.elapsed().as_secs_f64())?;
    std::fs::write(out.join("thesis.md"), md)?;
    Ok(())
}
