//! `homa-sim reproduce bytedance`: the simulator's half of issue 14 —
//! ByteDance mode ("Leveraging Homa", seed 004; notes in
//! ../shared/reference/bytedance.md) against stock Homa on the same core:
//!
//! - **fixed sizes** (the paper's basic test): 40–500 KB messages at 50%
//!   load, static RTTbytes vs the detected per-peer windows;
//! - **heterogeneous links**: one rack behind 5 µs of extra delay each way,
//!   one rack on 100 Gbit/s links; the detected per-peer BDP against the
//!   true one, and the slowdowns;
//! - **coexistence**: a constant-rate flow ([`crate::background`]) at half
//!   of every downlink, W5 on top; Homa's slowdowns and the background
//!   flow's throughput, drops and queues.
//!
//! Writes `DIR/bytedance-sim.md` and `DIR/bytedance-sim/results.{json,csv}`.

use crate::background::BackgroundFlow;
use crate::homa::{addr, Homa};
use crate::links::HostLinkOverride;
use crate::report::RunReport;
use crate::scenario::Scenario;
use crate::sim::Simulation;
use crate::topology::{Topology, TopologyConfig};
use anyhow::{bail, Context, Result};
use homa_core::bytedance::bdp_bytes;
use homa_measure::progress::Progress;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Which experiment a run belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Experiment {
    /// Fixed message sizes at 50% load.
    FixedSizes,
    /// Heterogeneous host links.
    Heterogeneous,
    /// A constant-rate background flow on every downlink.
    Coexistence,
}

/// The detected and the true path between two classes of hosts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PeerPath {
    /// "nominal → far" etc.
    pub pair: String,
    /// Ordered host pairs with an RTT sample.
    pub pairs_measured: u64,
    /// Mean detected `rtt_min` (ns).
    pub rtt_min_ns: f64,
    /// Mean detected smoothed RTT at the end (ns).
    pub rtt_recent_ns: f64,
    /// The probe's round trip on the empty network (ns).
    pub true_probe_rtt_ns: f64,
    /// Mean detected BDP: `rtt_min × path rate` (bytes).
    pub detected_bdp: f64,
    /// The true BDP: a full packet out and a small one back on the empty
    /// path, at the path's rate (bytes).
    pub true_bdp: f64,
    /// Mean last unscheduled window the sender used (bytes; 0 = none).
    pub unsched_window: f64,
}

/// One run and its results.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    /// The experiment.
    pub experiment: Experiment,
    /// "stock" or "bytedance".
    pub mode: String,
    /// The varied parameter ("40 KB", "FIFO", ...).
    pub case: String,
    /// The scenario run.
    pub scenario: Scenario,
    /// Its report (per-port details dropped).
    pub report: RunReport,
    /// Background frames' downlinks: mean and peak queue (bytes), drops.
    pub bg_queue_mean: f64,
    /// Peak queue of a background downlink (bytes).
    pub bg_queue_peak: u64,
    /// Per-class detected paths (runs in the mode).
    pub peers: Vec<PeerPath>,
    /// Wall time of the run (s).
    pub wall_s: f64,
}

/// The network of every run: 4 racks of 8 hosts, 2 spines, 25 Gbit/s
/// hosts and 100 Gbit/s core links (no oversubscription; the paper's
/// 25G cluster's NICs), the thesis' switch and host delays.
pub fn base_topology() -> TopologyConfig {
    TopologyConfig {
        racks: 4,
        hosts_per_rack: 8,
        spines: 2,
        host_link_gbps: 25.0,
        core_link_gbps: 100.0,
        ..TopologyConfig::default()
    }
}

/// Message sizes of the fixed-size runs (the paper's 40–500 KB).
pub const FIXED_SIZES: [u64; 4] = [40_000, 100_000, 200_000, 500_000];

/// Extra one-way delay of the far rack's links (ns).
pub const FAR_DELAY_NS: f64 = 5_000.0;

/// Rate of the fast rack's links (Gbit/s).
pub const FAST_GBPS: f64 = 100.0;

/// The background flow's rate: half of each 25 Gbit/s downlink.
pub const BG_GBPS: f64 = 12.5;

fn scenario(label: &str, workload: &str, load: f64, messages: u64, bd: bool) -> Scenario {
    let mut s = Scenario {
        label: label.into(),
        messages,
        topology: base_topology(),
        ..Scenario::default()
    };
    s.traffic.workload = workload.into();
    s.traffic.load = load;
    s.homa.bytedance.enabled = bd;
    s
}

/// The mode name of stock Homa with 4 × RTTbytes of unscheduled bytes
/// and grant window.
pub const STOCK_4X: &str = "stock 4x RTTbytes";

/// RTTbytes of [`base_topology`].
pub fn nominal_rtt_bytes() -> u32 {
    Topology::new(base_topology())
        .map(|t| t.rtt_bytes() as u32)
        .unwrap_or(1)
}

fn mode(s: &Scenario) -> &'static str {
    if s.homa.bytedance.enabled {
        "bytedance"
    } else if s.label == STOCK_4X {
        STOCK_4X
    } else {
        "stock"
    }
}

/// Coexistence cases: (name, switch priorities on, port buffer).
pub const COEXISTENCE_CASES: [(&str, bool, Option<u64>); 3] = [
    ("one FIFO", false, None),
    ("one FIFO, 200 KB buffer", false, Some(200_000)),
    ("8 priorities, flow at 0", true, None),
];

/// Every run: (experiment, case, scenario).
pub fn plan() -> Vec<(Experiment, String, Scenario)> {
    let mut v = Vec::new();
    for size in FIXED_SIZES {
        // At most about 3 M data packets per run.
        let messages = (3_000_000 / size.div_ceil(1_400)).min(20_000);
        let case = format!("{} KB", size / 1000);
        for bd in [false, true] {
            let s = scenario(&case, &format!("fixed:{size}"), 0.5, messages, bd);
            v.push((Experiment::FixedSizes, case.clone(), s));
        }
        // Stock Homa with a static window as large as the mode's on a clear
        // path: separates "bigger windows" from "detected windows".
        let mut s = scenario(&case, &format!("fixed:{size}"), 0.5, messages, false);
        let big = 4 * nominal_rtt_bytes();
        s.homa.unsched_bytes = Some(big);
        s.homa.grant_window = Some(big);
        s.label = STOCK_4X.into();
        v.push((Experiment::FixedSizes, case, s));
    }
    for bd in [false, true] {
        let mut s = scenario("hetero", "w4", 0.5, 20_000, bd);
        s.traffic.max_message = Some(1_000_000);
        s.topology.host_links = vec![
            HostLinkOverride {
                hosts: "0-7".into(),
                extra_delay_ns: FAR_DELAY_NS,
                gbps: None,
            },
            HostLinkOverride {
                hosts: "8-15".into(),
                extra_delay_ns: 0.0,
                gbps: Some(FAST_GBPS),
            },
        ];
        v.push((Experiment::Heterogeneous, "w4, 50%".into(), s));
    }
    for (case, priorities, buffer) in COEXISTENCE_CASES {
        for bd in [false, true] {
            let mut s = scenario(case, "w5", 0.3, 3_000, bd);
            s.traffic.max_message = Some(1_000_000);
            s.buckets = 5;
            s.switch.priorities = priorities;
            s.switch.buffer_bytes = buffer;
            s.traffic.background = vec![BackgroundFlow {
                hosts: "0-31".into(),
                gbps: BG_GBPS,
                priority: 0,
            }];
            v.push((Experiment::Coexistence, case.into(), s));
        }
    }
    v
}

/// Host classes of the heterogeneous network.
fn class_of(h: u32, hetero: bool) -> &'static str {
    match h {
        0..=7 if hetero => "far",
        8..=15 if hetero => "fast",
        _ => "nominal",
    }
}

/// Wire bytes of an RTT probe or its answer (42 B of Homa, IP, framing).
fn probe_frame(topo: &Topology) -> u32 {
    topo.config
        .packetization
        .frame_bytes(homa_wire::PacketType::RttProbe.header_len() as u32)
}

/// Detected vs true paths, per ordered pair of host classes.
fn peer_paths(sim: &Simulation<Homa>) -> Vec<PeerPath> {
    let topo = sim.topology();
    let hetero = topo.heterogeneous();
    let probe = probe_frame(topo);
    let full = topo.config.packetization.max_frame();
    let min = topo.config.packetization.min_frame;
    let mut acc: std::collections::BTreeMap<(&str, &str), Vec<[f64; 7]>> = Default::default();
    for a in 0..topo.hosts {
        let ep = sim.transport(a).endpoint();
        let local = ep.config().link_mbps;
        for b in 0..topo.hosts {
            let Some(p) = (a != b).then(|| ep.bytedance_peer(addr(b))).flatten() else {
                continue;
            };
            if !p.rtt.has_sample() {
                continue;
            }
            let rate = topo.host_bps_of(a).min(topo.host_bps_of(b)) as f64 / 1e6;
            let true_rtt = topo.pair_latency(&[full], a, b) + topo.pair_latency(&[min], b, a);
            let probe_rtt = topo.pair_latency(&[probe], a, b) + topo.pair_latency(&[probe], b, a);
            acc.entry((class_of(a, hetero), class_of(b, hetero)))
                .or_default()
                .push([
                    p.rtt.min_ns as f64,
                    p.rtt.recent_ns as f64,
                    probe_rtt as f64 / 1e3,
                    p.detected_bdp(local).unwrap_or(0.0),
                    bdp_bytes(true_rtt as f64 / 1e3, rate),
                    p.last_unsched_window as f64,
                    1.0,
                ]);
        }
    }
    acc.into_iter()
        .map(|((a, b), rows)| {
            let n = rows.len() as f64;
            let mean = |i: usize| rows.iter().map(|r| r[i]).sum::<f64>() / n;
            PeerPath {
                pair: format!("{a} → {b}"),
                pairs_measured: rows.len() as u64,
                rtt_min_ns: mean(0),
                rtt_recent_ns: mean(1),
                true_probe_rtt_ns: mean(2),
                detected_bdp: mean(3),
                true_bdp: mean(4),
                unsched_window: mean(5),
            }
        })
        .collect()
}

/// Runs the set and writes the report; returns the report's path.
pub fn run(out: &Path, force: bool) -> Result<PathBuf> {
    let md_path = out.join("bytedance-sim.md");
    let dir = out.join("bytedance-sim");
    if md_path.exists() && !force {
        bail!("{} exists; pass --force to overwrite it", md_path.display());
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let t0 = Instant::now();
    let plan = plan();
    let total: f64 = plan.iter().map(|(_, _, s)| super::work(s)).sum();
    let progress = Progress::new(total, plan.len(), false);
    let mut done = 0.0;
    let mut entries = Vec::with_capacity(plan.len());
    for (experiment, case, s) in plan {
        let bd = s.homa.bytedance.enabled;
        let what = format!("{experiment:?} {case} {}", mode(&s));
        progress.set_current(&what);
        let c = super::work(&s);
        let t = Instant::now();
        let protocol = Homa::new(s.homa.clone());
        let sim = Simulation::new(s.clone(), &protocol).with_context(|| what.clone())?;
        let mut cb = |completed: u64, messages: u64| {
            progress.set_done(done + c * completed as f64 / messages.max(1) as f64);
        };
        let (mut report, peers) =
            sim.run_inspect(
                Some(&mut cb),
                |sim| {
                    if bd {
                        peer_paths(sim)
                    } else {
                        Vec::new()
                    }
                },
            );
        let hosts = base_topology().racks * base_topology().hosts_per_rack;
        let bg: Vec<_> = report
            .ports
            .iter()
            .filter(|p| p.kind == "tor_down" && p.port >= hosts)
            .collect();
        let bg_queue_mean = bg.iter().map(|p| p.mean_bytes).sum::<f64>() / bg.len().max(1) as f64;
        let bg_queue_peak = bg.iter().map(|p| p.peak_bytes).max().unwrap_or(0);
        report.ports.clear();
        let wall_s = t.elapsed().as_secs_f64();
        done += c;
        progress.job_done(
            done,
            &format!(
                "{what}: {wall_s:.1} s, goodput {:.2} Gbit/s, p99 slowdown {:.2}",
                report.goodput_gbps, report.overall.p99
            ),
        );
        entries.push(Entry {
            experiment,
            mode: mode(&s).into(),
            case,
            scenario: s,
            report,
            bg_queue_mean,
            bg_queue_peak,
            peers,
            wall_s,
        });
    }
    progress.finish();
    std::fs::write(
        dir.join("results.json"),
        serde_json::to_string_pretty(&entries)?,
    )?;
    std::fs::write(
        dir.join("results.csv"),
        super::bytedance_report::csv(&entries),
    )?;
    let md = super::bytedance_report::markdown(&entries, t0.elapsed().as_secs_f64());
    std::fs::write(&md_path, md).with_context(|| format!("writing {}", md_path.display()))?;
    Ok(md_path)
}
