//! `testbed bytedance`: the ByteDance paper's testbed experiments (its §8,
//! notes in ../shared/reference/bytedance.md) with stock Homa and Homa in
//! the ByteDance mode (`core.bytedance.enabled`) on the emulated switch.
//!
//! As in the paper, several client "VMs" share one host NIC: every client
//! is its own `testbed node` process (`homa-perf cluster`) with its own
//! endpoint and port, and several of them run in one host namespace.
//!
//! - `incast`: `--clients` Homa clients on host 1 → one Homa server on
//!   host 0 (one server thread), W5, `--outstanding` RPCs each. Host 0's
//!   link runs at `--server-rate-mbit` (default half the rate), so the
//!   switch port towards the server is where the clients' bursts meet.
//! - `split`: host 0 runs a Homa and a TCP server; host 1 three TCP
//!   clients (W5, together `--tcp-share` of the server's link) and three
//!   Homa clients (W5, together `--homa-load` of it).
//! - `sweep`: one client on host 1, fixed request sizes (`--sizes`),
//!   100-byte responses, `--outstanding` RPCs at a time (default 1: the
//!   link is never full, the paper's "favourable conditions").
//! - `hetero`: host 2's link at `--slow-rate-mbit`; clients on hosts 1
//!   and 2 → host 0 (W5, `--outstanding` each): per-peer windows against
//!   one static RTTbytes.
//!
//! In the mode, every node records what its endpoint detected about each
//! peer; each run sets that against the true paths ([`paths`]).
//!
//! Writes `OUT/bytedance/EXPERIMENT.json` and prints the tables
//! ([`markdown`]). The testbed (prefix `--prefix`) is removed at the end,
//! also on failure, unless `--keep`.

mod args;
pub mod paths;
mod report;

pub use args::{BdArgs, Experiment};
pub use paths::{PeerPath, Ping};
pub use report::markdown;

use crate::analysis::{self, Baseline, Bucket};
use crate::bench::{self, link_config, spawn_node, wait_all, Node};
use crate::netns::{self, TestbedSpec};
use crate::rates;
use crate::tc::{self, BacklogSampler};
use anyhow::{Context, Result};
use homa_perf::cluster::{ClusterArgs, NodeReport, PeerRecord, ResponseSize};
use homa_perf::{Protocol, SizeDist};
use serde::{Deserialize, Serialize};
use std::fs;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A run's results (one variant; one size in `sweep`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BdRun {
    /// ByteDance mode on.
    pub bytedance: bool,
    /// Fixed request size (sweep), else `None`.
    pub size: Option<u64>,
    /// Homa RPCs completed in the window.
    pub homa_rpcs: u64,
    /// Homa RPCs failed, plus those unfinished at the end.
    pub homa_failed: u64,
    /// Homa payload completed, requests plus responses (Mbit/s).
    pub homa_mbps: f64,
    /// TCP payload completed (Mbit/s; split only).
    pub tcp_mbps: f64,
    /// Packets the switch dropped on the port towards host 0.
    pub switch_drops: u64,
    /// Largest backlog sampled on that port, one priority queue (bytes).
    pub switch_peak_bytes: u64,
    /// Packets host NIC queues dropped.
    pub nic_drops: u64,
    /// Homa slowdown by size bucket (every client).
    pub buckets: Vec<Bucket>,
    /// Homa slowdown by size bucket per client host (hetero).
    pub per_host: Vec<(usize, Vec<Bucket>)>,
    /// Core counters summed over every Homa endpoint.
    pub counters: Vec<(String, u64)>,
    /// ByteDance mode: detected against true path, per ordered pair of
    /// hosts (absent from results written before it existed).
    #[serde(default)]
    pub paths: Vec<PeerPath>,
}

/// An experiment's results.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BdResult {
    /// Which.
    pub experiment: Experiment,
    /// The command line.
    pub command: String,
    /// Link rate (Mbit/s), and hosts at other rates.
    pub rate_mbit: u64,
    /// `(host, Mbit/s)` of links at other rates.
    pub host_rates: Vec<(usize, u64)>,
    /// MTU.
    pub mtu: u32,
    /// Switch queue limit (bytes).
    pub buffer_bytes: u64,
    /// Queues per switch port (8 priorities, or 1 FIFO).
    #[serde(default)]
    pub switch_levels: u8,
    /// RTTbytes (static) every endpoint uses.
    pub rtt_bytes: u64,
    /// Unloaded round trips between each client host and host 0, the
    /// true RTTs of [`paths`] (absent from older results).
    #[serde(default)]
    pub pings: Vec<Ping>,
    /// The runs.
    pub runs: Vec<BdRun>,
}

/// Core counters reported.
const COUNTERS: [&str; 8] = [
    "rtt_probes_sent",
    "rtt_responses",
    "rtt_invalid",
    "bytedance_window_changes",
    "data_bytes_retransmitted",
    "resends_requested",
    "data_beyond_grant",
    "rpcs_failed",
];

const SERVER_PORT: u16 = 4000;
const TCP_PORT: u16 = 5000;

/// Runs the experiment: builds the testbed, runs each variant, writes the
/// JSON and prints the tables; removes the testbed (unless `--keep`).
pub fn run(args: &BdArgs) -> Result<()> {
    let variants = args.validate()?;
    homa_measure::cli::check_output_dir("--out", &args.out)?;
    let (spec, host_rates) = args.spec();
    netns::up(&spec)?;
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_on(args, &variants, &spec, &host_rates)
    }))
    .unwrap_or_else(|_| Err(anyhow::anyhow!("internal error (panic); testbed removed")));
    if !args.keep {
        if let Err(e) = netns::down(&spec.prefix) {
            tracing::warn!("removing the testbed: {e:#}");
        }
    }
    let result = result?;
    let dir = args.out.join("bytedance");
    fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{}.json", args.experiment.name()));
    fs::write(&path, serde_json::to_string_pretty(&result)?)?;
    println!("{}", markdown(&result));
    eprintln!("testbed: wrote {}", path.display());
    Ok(())
}

struct Ctx<'a> {
    args: &'a BdArgs,
    spec: &'a TestbedSpec,
    work: PathBuf,
    exe: PathBuf,
    rtt_ns: u64,
    rates: Vec<u64>,
}

fn run_on(
    args: &BdArgs,
    variants: &[bool],
    spec: &TestbedSpec,
    host_rates: &[(usize, u64)],
) -> Result<BdResult> {
    for &(h, r) in host_rates {
        rates::set_host_rate(spec, h, r)?;
    }
    let work = std::env::temp_dir().join(format!("homa-bd-{}", spec.prefix));
    fs::create_dir_all(&work)?;
    let mut rates = vec![spec.rate_mbit; spec.hosts];
    for &(h, r) in host_rates {
        rates[h] = r;
    }
    let ctx = Ctx {
        args,
        spec,
        work,
        exe: std::env::current_exe().context("cannot find this program")?,
        rtt_ns: bench::auto_rtt_ns(spec.rate_mbit, spec.mtu),
        rates,
    };
    let w5 = SizeDist::by_name("w5")?;
    let bounds = homa_measure::buckets::cdf_bounds(&w5, bench::MAX_SIZE, 6);
    let (baseline, pings) = if args.experiment == Experiment::Sweep {
        (None, Vec::new())
    } else {
        let (b, p) = ctx.baseline()?;
        (Some(b), p)
    };
    // Variants alternate, size by size and repeat by repeat, so that a
    // change in the machine's load (2 shared cores) hits both alike.
    let mut runs = Vec::new();
    for _ in 0..args.repeats {
        match args.experiment {
            Experiment::Sweep => {
                for &size in &args.sizes {
                    for &bd in variants {
                        eprintln!("testbed: sweep {size} B, bytedance={bd}");
                        runs.push(ctx.loaded(bd, Some(size), None, &[], &w5, &bounds)?);
                    }
                }
            }
            _ => {
                for &bd in variants {
                    eprintln!("testbed: {}, bytedance={bd}", args.experiment.name());
                    runs.push(ctx.loaded(bd, None, baseline.as_ref(), &pings, &w5, &bounds)?);
                }
            }
        }
    }
    Ok(BdResult {
        experiment: args.experiment,
        command: bench::command_line(),
        rate_mbit: spec.rate_mbit,
        host_rates: host_rates.to_vec(),
        mtu: spec.mtu,
        buffer_bytes: spec.buffer_bytes,
        switch_levels: spec.switch_levels,
        rtt_bytes: ctx.base_config(0, false).core.unsched_bytes as u64,
        pings,
        runs,
    })
}

/// One node to start: its host and its flags.
struct NodePlan {
    host: usize,
    args: ClusterArgs,
}

impl Ctx<'_> {
    fn addr(&self, host: usize, port: u16) -> SocketAddr {
        SocketAddr::new(self.spec.host_ip(host).into(), port)
    }

    /// Host `host`'s runtime configuration: RTTbytes of the testbed's base
    /// rate (every endpoint must agree on the unscheduled limits), the
    /// pacer at the host's own rate.
    fn base_config(&self, host: usize, bd: bool) -> homa::Config {
        let mut c = link_config(self.spec.rate_mbit, self.spec.mtu, self.rtt_ns, 0.5);
        let rate = self.rates.get(host).copied().unwrap_or(self.spec.rate_mbit);
        c.core.link_mbps = rate;
        c.max_nic_queue_ns = (u64::from(self.spec.mtu) * 8_000 / rate.max(1)) / 2;
        if bd {
            c = c.with_bytedance();
        }
        c
    }

    fn config_file(&self, host: usize, bd: bool) -> Result<PathBuf> {
        let mut c = bench::apply_overrides(&self.base_config(host, bd), &self.args.homa_set)?;
        c.core = c.effective_core(c.core.lower_header_bytes)?;
        let path = self
            .work
            .join(format!("homa-h{host}{}.toml", if bd { "-bd" } else { "" }));
        fs::write(&path, toml::to_string(&c)?)?;
        Ok(path)
    }

    fn node(&self, host: usize, port: u16, protocol: Protocol, tag: &str) -> ClusterArgs {
        // A server lists only itself (skipped) as its peer.
        let me = self.addr(host, port);
        let mut a = ClusterArgs::new(me, vec![me], protocol);
        a.seconds = self.args.seconds;
        a.warmup = self.args.warmup;
        a.timeout_ms = 60_000;
        a.drain = 3.0;
        a.seed = 1 + u64::from(port) + 100 * host as u64;
        a.out = Some(self.work.join(format!("{tag}-h{host}-{port}.json")));
        a
    }

    /// Unloaded round trips of stock Homa from host 1 to host 0 (W5
    /// sizes), then each client host's ping to host 0.
    fn baseline(&self) -> Result<(Baseline, Vec<Ping>)> {
        let tag = "unloaded";
        let mut server = self.node(0, SERVER_PORT, Protocol::Homa, tag);
        server.server_only = true;
        server.seconds = 24.0 * 3600.0;
        server.config = Some(self.config_file(0, false)?);
        let mut prober = self.node(1, SERVER_PORT + 100, Protocol::Homa, tag);
        prober.peers = vec![self.addr(0, SERVER_PORT)];
        prober.workload = Some("w5".into());
        prober.unloaded = true;
        prober.unloaded_points = 12;
        prober.unloaded_count = 8;
        prober.config = Some(self.config_file(1, false)?);
        let s = self.spawn(0, &server, tag)?;
        let outcome = self.probe(1, &prober, tag).and_then(|r| {
            let mut pings = Vec::new();
            for host in 1..self.spec.hosts {
                let mut ping = self.node(host, SERVER_PORT + 200, Protocol::Homa, "ping");
                ping.peers = vec![self.addr(0, SERVER_PORT)];
                ping.size = Some(paths::PING_BYTES);
                ping.response_size = ResponseSize::Bytes(paths::PING_BYTES);
                ping.unloaded = true;
                ping.unloaded_count = paths::PING_COUNT;
                ping.config = Some(self.config_file(host, false)?);
                let r = self.probe(host, &ping, "ping")?;
                if let Some(min_ns) = r.unloaded.iter().map(|p| p.min_ns).filter(|&m| m > 0).min() {
                    pings.push(Ping {
                        host,
                        bytes: paths::PING_BYTES,
                        min_ns,
                    });
                }
            }
            Ok((r, pings))
        });
        s.stop();
        let (r, pings) = outcome?;
        let b = Baseline::new(r.unloaded.iter().map(|p| (p.size, p.min_ns)).collect())?;
        Ok((b, pings))
    }

    /// Runs one unloaded prober on `host` against a running server; its
    /// report.
    fn probe(&self, host: usize, a: &ClusterArgs, tag: &str) -> Result<NodeReport> {
        let p = self.spawn(host, a, tag)?;
        wait_all(vec![p], Duration::from_secs(300))?;
        read(a)
    }

    fn spawn(&self, host: usize, a: &ClusterArgs, tag: &str) -> Result<Node> {
        let tag = format!("{tag}-{}", a.me.port());
        spawn_node(
            self.spec,
            &self.work,
            &self.exe,
            host,
            "node",
            a.to_args(),
            &tag,
        )
    }

    /// The nodes of one run.
    fn plan(&self, bd: bool, size: Option<u64>, tag: &str) -> Result<Vec<NodePlan>> {
        let a = self.args;
        let server_link = self.rates[0] as f64 / 1000.0;
        let mut plans = Vec::new();
        let mut server = self.node(0, SERVER_PORT, Protocol::Homa, tag);
        server.server_only = true;
        server.config = Some(self.config_file(0, bd)?);
        plans.push(NodePlan {
            host: 0,
            args: server,
        });
        let homa_client = |host: usize, i: usize, gbps: f64, max: usize| -> Result<NodePlan> {
            let mut c = self.node(host, SERVER_PORT + 1 + i as u16, Protocol::Homa, tag);
            c.peers = vec![self.addr(0, SERVER_PORT)];
            match size {
                Some(s) => {
                    c.size = Some(s);
                    c.response_size = ResponseSize::Bytes(100);
                }
                None => c.workload = Some("w5".into()),
            }
            c.gbps = gbps;
            c.client_max = max;
            c.config = Some(self.config_file(host, bd)?);
            Ok(NodePlan { host, args: c })
        };
        // Closed loop: far more arrivals than `max` outstanding complete.
        let saturate = 4.0 * self.spec.rate_mbit as f64 / 1000.0;
        match a.experiment {
            Experiment::Incast => {
                for i in 0..a.clients {
                    plans.push(homa_client(1, i, saturate, self.args.outstanding())?);
                }
            }
            Experiment::Sweep => plans.push(homa_client(1, 0, saturate, self.args.outstanding())?),
            Experiment::Hetero => {
                for host in [1, 2] {
                    for i in 0..3 {
                        plans.push(homa_client(host, i, saturate, self.args.outstanding())?);
                    }
                }
            }
            Experiment::Split => {
                let mut tcp = self.node(0, TCP_PORT, Protocol::Tcp, tag);
                tcp.server_only = true;
                plans.push(NodePlan { host: 0, args: tcp });
                for i in 0..3 {
                    // Requests and responses both count: half each way.
                    let g = a.homa_load * server_link * 2.0 / 3.0;
                    plans.push(homa_client(1, i, g, 500)?);
                    let mut t = self.node(1, TCP_PORT + 1 + i as u16, Protocol::Tcp, tag);
                    t.peers = vec![self.addr(0, TCP_PORT)];
                    t.workload = Some("w5".into());
                    t.gbps = a.tcp_share * server_link * 2.0 / 3.0;
                    plans.push(NodePlan { host: 1, args: t });
                }
            }
        }
        Ok(plans)
    }

    fn loaded(
        &self,
        bd: bool,
        size: Option<u64>,
        baseline: Option<&Baseline>,
        pings: &[Ping],
        w5: &SizeDist,
        bounds: &[u64],
    ) -> Result<BdRun> {
        let tag = format!(
            "{}-{}{}",
            self.args.experiment.name(),
            if bd { "bd" } else { "homa" },
            size.map(|s| format!("-{s}")).unwrap_or_default()
        );
        let plans = self.plan(bd, size, &tag)?;
        let before = tc::switch_port_stats(self.spec)?;
        let nic_before = tc::host_nic_stats(self.spec)?;
        let sampler = BacklogSampler::start(self.spec, Duration::from_millis(20));
        let mut nodes = Vec::new();
        for p in &plans {
            match self.spawn(p.host, &p.args, &tag) {
                Ok(n) => nodes.push(n),
                Err(e) => {
                    nodes.into_iter().for_each(Node::stop);
                    let _ = sampler.stop();
                    return Err(e);
                }
            }
        }
        let limit = Duration::from_secs_f64(self.args.warmup + self.args.seconds + 90.0);
        // Servers run until every client is done.
        let (servers, clients): (Vec<_>, Vec<_>) = nodes
            .into_iter()
            .zip(&plans)
            .partition(|(_, p)| p.args.server_only);
        let outcome = wait_all(clients.into_iter().map(|(n, _)| n).collect(), limit);
        servers.into_iter().for_each(|(n, _)| n.stop());
        let peaks = sampler.stop();
        outcome?;
        let after = tc::switch_port_stats(self.spec)?;
        let nic_after = tc::host_nic_stats(self.spec)?;
        let ports = tc::delta(&before, &after);
        let mut run = BdRun {
            bytedance: bd,
            size,
            homa_rpcs: 0,
            homa_failed: 0,
            homa_mbps: 0.0,
            tcp_mbps: 0.0,
            switch_drops: ports.iter().filter(|c| c.port == 0).map(|c| c.drops).sum(),
            switch_peak_bytes: peaks
                .iter()
                .filter(|p| p.0 == 0)
                .map(|p| p.2)
                .max()
                .unwrap_or(0),
            nic_drops: nic_after.iter().map(|n| n.drops).sum::<u64>()
                - nic_before.iter().map(|n| n.drops).sum::<u64>(),
            buckets: Vec::new(),
            per_host: Vec::new(),
            counters: Vec::new(),
            paths: Vec::new(),
        };
        let mut detected = Vec::new();
        let mut rpcs = Vec::new();
        let mut by_host: Vec<(usize, Vec<(u64, u64)>)> = Vec::new();
        let mut sums = vec![0u64; COUNTERS.len()];
        for p in &plans {
            let r = read(&p.args)?;
            detected.extend(r.bytedance_peers.iter().map(|x| (p.host, x.clone())));
            if let Some(h) = &r.homa {
                for (i, k) in COUNTERS.iter().enumerate() {
                    sums[i] += sum_key(h, k);
                }
            }
            if p.args.server_only {
                continue;
            }
            let mbps = (r.request_bytes + r.response_bytes) as f64 * 8.0 / r.seconds / 1e6;
            if p.args.protocol == Protocol::Tcp {
                run.tcp_mbps += mbps;
                continue;
            }
            run.homa_mbps += mbps;
            run.homa_rpcs += r.completed;
            run.homa_failed += r.errors + r.unfinished;
            let all: Vec<(u64, u64)> = r.rpcs.iter().chain(&r.censored).copied().collect();
            rpcs.extend(&all);
            match by_host.iter_mut().find(|(h, _)| *h == p.host) {
                Some((_, v)) => v.extend(all),
                None => by_host.push((p.host, all)),
            }
        }
        run.paths = self.paths(&detected, pings);
        run.counters = COUNTERS
            .iter()
            .zip(sums)
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        if let Some(b) = baseline {
            run.buckets = analysis::spectrum(&analysis::slowdowns(&rpcs, b), w5, bounds);
            if by_host.len() > 1 {
                run.per_host = by_host
                    .iter()
                    .map(|(h, v)| {
                        (
                            *h,
                            analysis::spectrum(&analysis::slowdowns(v, b), w5, bounds),
                        )
                    })
                    .collect();
            }
        }
        Ok(run)
    }
}

impl Ctx<'_> {
    /// The detected paths of one run against the true ones.
    fn paths(&self, detected: &[(usize, PeerRecord)], pings: &[Ping]) -> Vec<PeerPath> {
        let ips: Vec<IpAddr> = (0..self.spec.hosts)
            .map(|h| IpAddr::V4(self.spec.host_ip(h)))
            .collect();
        paths::aggregate(
            detected,
            &paths::PathSetting {
                ips: &ips,
                rates: &self.rates,
                pings,
                ping_frame: paths::PING_BYTES + bench::PACKET_OVERHEAD as u64,
                full_frame: u64::from(self.spec.mtu) + 14,
            },
        )
    }
}

fn read(a: &ClusterArgs) -> Result<NodeReport> {
    let path = a.out.as_deref().context("a node without --out")?;
    read_report(path)
}

fn read_report(path: &Path) -> Result<NodeReport> {
    let text = fs::read_to_string(path)
        .with_context(|| format!("cannot read the node report {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("bad node report {}", path.display()))
}

/// Sum of every number under `key` anywhere in `v`.
fn sum_key(v: &serde_json::Value, key: &str) -> u64 {
    match v {
        serde_json::Value::Object(m) => m
            .iter()
            .map(|(k, x)| match x.as_u64() {
                Some(n) if k == key => n,
                _ => sum_key(x, key),
            })
            .sum(),
        serde_json::Value::Array(a) => a.iter().map(|x| sum_key(x, key)).sum(),
        _ => 0,
    }
}
