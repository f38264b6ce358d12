//! Cluster mode: every host runs one node that is both a server and a
//! client, like the Homa/Linux paper's `cp_node`.
//!
//! A *loaded* node's client sends RPCs to the other nodes' servers with
//! Poisson arrivals, at the rate that makes the host send `--gbps` of
//! payload (its own requests plus the responses its server sends, which by
//! symmetry equal the responses it receives), and records the size and
//! round-trip time of every RPC issued in the measured window. An
//! *unloaded* node instead probes one RPC at a time, per size, to get the
//! minimum and median round trip; a *server-only* node just serves.
//!
//! Nodes run on loopback (tests) or in network namespaces on private
//! addresses; [`crate::error::check_cluster_addr`] refuses anything else.

mod homa;
mod peers;
mod tcp;
mod unloaded;

pub use peers::PeerRecord;

use crate::error::{check_cluster_addr, PerfError};
use crate::proto::{expected_response_size, Protocol, MAX_TCP_MESSAGE};
use crate::server::{Server, ServerOptions};
use crate::workload::SizeSpec;
use homa_measure::SizeDist;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How often the drain checks whether every RPC has come back.
const DRAIN_POLL: Duration = Duration::from_millis(1);

/// The response size a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseSize {
    /// As large as the request (the Homa/Linux paper's cluster benchmark).
    Same,
    /// This many bytes, whatever the request's size.
    Bytes(u64),
}

impl ResponseSize {
    /// The response size asked for by a request of `request` bytes.
    pub fn for_request(self, request: u64) -> u64 {
        match self {
            ResponseSize::Same => request,
            ResponseSize::Bytes(n) => n,
        }
    }

    /// The response length a correct server returns to a request of
    /// `request` bytes: requests under 4 bytes cannot carry the wanted size
    /// over Homa and get the default; TCP asks for the same so that both
    /// protocols move the same bytes.
    pub fn expected(self, request: u64) -> u64 {
        let want = usize::try_from(self.for_request(request)).unwrap_or(usize::MAX);
        let request = usize::try_from(request).unwrap_or(usize::MAX);
        expected_response_size(request, want) as u64
    }
}

impl FromStr for ResponseSize {
    type Err = String;

    fn from_str(s: &str) -> Result<ResponseSize, String> {
        if s.eq_ignore_ascii_case("same") {
            return Ok(ResponseSize::Same);
        }
        s.parse::<u64>()
            .map(ResponseSize::Bytes)
            .map_err(|_| format!("expected `same` or a number of bytes, got {s:?}"))
    }
}

impl std::fmt::Display for ResponseSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResponseSize::Same => f.write_str("same"),
            ResponseSize::Bytes(n) => write!(f, "{n}"),
        }
    }
}

/// The flags of `homa-perf cluster`: one host of a cluster benchmark.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct ClusterArgs {
    /// This node's server address; the client uses the same IP with an
    /// automatic port.
    #[arg(long, value_name = "ADDR:PORT")]
    pub me: SocketAddr,
    /// The servers of the cluster (comma-separated); an entry equal to
    /// --me is skipped.
    #[arg(
        long,
        value_name = "ADDR:PORT,...",
        value_delimiter = ',',
        required = true
    )]
    pub peers: Vec<SocketAddr>,
    /// Transport: homa or tcp.
    #[arg(long, value_enum, default_value_t = Protocol::Homa)]
    pub protocol: Protocol,
    /// Draw request sizes from a workload: w1..w5, thesis-w3, thesis-w5, fixed:N or a
    /// `size_bytes,cdf` CSV file.
    #[arg(long, conflicts_with = "size")]
    pub workload: Option<String>,
    /// Send every request with this many bytes instead of a workload.
    #[arg(long, value_name = "BYTES")]
    pub size: Option<u64>,
    /// Workload sizes above this are sent at this size.
    #[arg(long, value_name = "BYTES", default_value_t = 1_000_000)]
    pub max_size: u64,
    /// Response size: `same` as the request, or a number of bytes.
    #[arg(long, value_name = "same|BYTES", default_value_t = ResponseSize::Same)]
    pub response_size: ResponseSize,
    /// Payload Gbit/s this host sends (its requests plus its server's
    /// responses); sets the Poisson arrival rate.
    #[arg(long, value_name = "F", default_value_t = 1.0)]
    pub gbps: f64,
    /// Length of the measured window (s).
    #[arg(long, value_name = "S", default_value_t = 10.0)]
    pub seconds: f64,
    /// Load offered before the window and not recorded (s).
    #[arg(long, value_name = "S", default_value_t = 1.0)]
    pub warmup: f64,
    /// Most RPCs this client has outstanding; arrivals beyond are skipped.
    #[arg(long, value_name = "N", default_value_t = 500)]
    pub client_max: usize,
    /// TCP connections from this client to each peer.
    #[arg(long, value_name = "K", default_value_t = 1)]
    pub tcp_connections: usize,
    /// Homa server threads receiving requests.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub server_threads: usize,
    /// Homa runtime configuration (TOML); default: `homa::Config::default()`.
    #[arg(long, value_name = "FILE.toml")]
    pub config: Option<PathBuf>,
    /// Measure unloaded round trips (one RPC at a time) instead of
    /// offering Poisson load.
    #[arg(long, conflicts_with = "server_only")]
    pub unloaded: bool,
    /// Unloaded mode: workload quantiles probed (plus its extremes).
    #[arg(long, value_name = "N", default_value_t = 40)]
    pub unloaded_points: usize,
    /// Unloaded mode: RPCs per probed size.
    #[arg(long, value_name = "N", default_value_t = 30)]
    pub unloaded_count: u64,
    /// Only serve, for --warmup + --seconds + --linger seconds.
    #[arg(long)]
    pub server_only: bool,
    /// Keep serving this long after the client is done (s).
    #[arg(long, value_name = "S", default_value_t = 3.0)]
    pub linger: f64,
    /// After the window, wait this long for outstanding RPCs (s).
    #[arg(long, value_name = "S", default_value_t = 2.0)]
    pub drain: f64,
    /// Wait this long for every peer's server to answer (s).
    #[arg(long, value_name = "S", default_value_t = 15.0)]
    pub ready_timeout: f64,
    /// An RPC not answered within this many milliseconds is an error.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    pub timeout_ms: u64,
    /// Seed of arrivals, peers and sizes (mixed with --me).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write the JSON report to this file instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

impl ClusterArgs {
    /// The command-line defaults, for a node at `me` among `peers`. Set
    /// `workload` or `size` before running it.
    pub fn new(me: SocketAddr, peers: Vec<SocketAddr>, protocol: Protocol) -> ClusterArgs {
        ClusterArgs {
            me,
            peers,
            protocol,
            workload: None,
            size: None,
            max_size: 1_000_000,
            response_size: ResponseSize::Same,
            gbps: 1.0,
            seconds: 10.0,
            warmup: 1.0,
            client_max: 500,
            tcp_connections: 1,
            server_threads: 1,
            config: None,
            unloaded: false,
            unloaded_points: 40,
            unloaded_count: 30,
            server_only: false,
            linger: 3.0,
            drain: 2.0,
            ready_timeout: 15.0,
            timeout_ms: 10_000,
            seed: 1,
            out: None,
        }
    }

    /// The flags as arguments of `homa-perf cluster`, every value explicit
    /// (`--flag=value`, so negative numbers parse too). Paths that are not
    /// UTF-8 are converted lossily.
    pub fn to_args(&self) -> Vec<String> {
        let mut a = vec![format!("--me={}", self.me)];
        if !self.peers.is_empty() {
            let peers: Vec<String> = self.peers.iter().map(|p| p.to_string()).collect();
            a.push(format!("--peers={}", peers.join(",")));
        }
        a.push(format!("--protocol={}", self.protocol.name()));
        if let Some(w) = &self.workload {
            a.push(format!("--workload={w}"));
        }
        if let Some(s) = self.size {
            a.push(format!("--size={s}"));
        }
        a.push(format!("--max-size={}", self.max_size));
        a.push(format!("--response-size={}", self.response_size));
        a.push(format!("--gbps={}", self.gbps));
        a.push(format!("--seconds={}", self.seconds));
        a.push(format!("--warmup={}", self.warmup));
        a.push(format!("--client-max={}", self.client_max));
        a.push(format!("--tcp-connections={}", self.tcp_connections));
        a.push(format!("--server-threads={}", self.server_threads));
        if let Some(c) = &self.config {
            a.push(format!("--config={}", c.to_string_lossy()));
        }
        if self.unloaded {
            a.push("--unloaded".to_string());
        }
        a.push(format!("--unloaded-points={}", self.unloaded_points));
        a.push(format!("--unloaded-count={}", self.unloaded_count));
        if self.server_only {
            a.push("--server-only".to_string());
        }
        a.push(format!("--linger={}", self.linger));
        a.push(format!("--drain={}", self.drain));
        a.push(format!("--ready-timeout={}", self.ready_timeout));
        a.push(format!("--timeout-ms={}", self.timeout_ms));
        a.push(format!("--seed={}", self.seed));
        if let Some(o) = &self.out {
            a.push(format!("--out={}", o.to_string_lossy()));
        }
        a
    }
}

/// Round trips of one request size in unloaded mode.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct UnloadedPoint {
    /// Request size (bytes).
    pub size: u64,
    /// RPCs that completed (the others were errors).
    pub count: u64,
    /// Fastest round trip (ns).
    pub min_ns: u64,
    /// Median round trip (ns; the lower median for an even count).
    pub p50_ns: u64,
}

/// What one node measured.
///
/// Of the RPCs issued in the window, `issued = completed + errors +
/// unfinished`; `skipped` arrivals were not issued at all.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NodeReport {
    /// `"homa"` or `"tcp"`.
    pub protocol: String,
    /// `"loaded"`, `"unloaded"` or `"server"`.
    pub mode: String,
    /// Workload name, `"fixed:N"` for a fixed size, `"none"` for a server
    /// given neither.
    pub workload: String,
    /// This node's server address.
    pub me: String,
    /// The servers this node's client sent to (without `me`).
    pub peers: Vec<String>,
    /// Payload Gbit/s this host was asked to send (0 unless loaded).
    pub target_gbps: f64,
    /// Poisson arrival rate of this client (RPCs/s; 0 unless loaded).
    pub offered_rate_rps: f64,
    /// The measured window (s): the load window, the unloaded probing
    /// time, or the serving time.
    pub seconds: f64,
    /// RPCs issued in the window.
    pub issued: u64,
    /// Of those, RPCs answered correctly within the timeout.
    pub completed: u64,
    /// Of those, RPCs that failed, timed out or got a wrong-size response.
    pub errors: u64,
    /// Arrivals in the window not sent because `client_max` RPCs were
    /// outstanding: the target load could not be offered.
    pub skipped: u64,
    /// Of the issued RPCs, those still outstanding after the drain.
    pub unfinished: u64,
    /// Request payload bytes of the completed RPCs.
    pub request_bytes: u64,
    /// Response payload bytes of the completed RPCs.
    pub response_bytes: u64,
    /// Worst lateness of an arrival versus the Poisson schedule (µs).
    pub max_send_lag_us: f64,
    /// `(request_size, rtt_ns)` of every completed RPC of the window.
    pub rpcs: Vec<(u64, u64)>,
    /// RPCs issued in the window that never finished (timed out or still
    /// outstanding after the drain): `(request size, ns waited)`, a lower
    /// bound on their round trip. Leaving them out would flatter the tail.
    #[serde(default)]
    pub censored: Vec<(u64, u64)>,
    /// Unloaded mode: one point per probed size.
    pub unloaded: Vec<UnloadedPoint>,
    /// User CPU time of the whole process over the run (s).
    pub cpu_user_s: f64,
    /// System CPU time of the whole process over the run (s).
    pub cpu_sys_s: f64,
    /// Homa only: the client and server endpoints' `metrics()` and
    /// `runtime_stats()`.
    pub homa: Option<serde_json::Value>,
    /// Homa in ByteDance mode only: what the endpoint detected about each
    /// peer it keeps state for, at the end of the run (absent from reports
    /// written before it existed, and empty in stock Homa).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bytedance_peers: Vec<PeerRecord>,
}

impl NodeReport {
    /// Payload Gbit/s of the completed RPCs, both directions, over the
    /// window.
    pub fn achieved_gbps(&self) -> f64 {
        if self.seconds > 0.0 {
            (self.request_bytes + self.response_bytes) as f64 * 8.0 / self.seconds / 1e9
        } else {
            0.0
        }
    }

    /// The `q`-quantile (0..=1, nearest rank) of the recorded round trips
    /// (ns); `None` when nothing was recorded.
    pub fn rtt_quantile_ns(&self, q: f64) -> Option<u64> {
        let mut rtts: Vec<u64> = self.rpcs.iter().map(|&(_, ns)| ns).collect();
        rtts.sort_unstable();
        homa_measure::nearest_rank(&rtts, q.clamp(0.0, 1.0))
    }

    /// One line for humans: counts, achieved rate and round-trip percentiles.
    pub fn summary(&self) -> String {
        let us = |q: f64| {
            self.rtt_quantile_ns(q)
                .map_or("-".to_string(), |ns| format!("{:.1}", ns as f64 / 1e3))
        };
        let head = format!(
            "{} {} {} on {}",
            self.protocol, self.mode, self.workload, self.me
        );
        match self.mode.as_str() {
            "server" => format!("{head}: served for {:.1} s", self.seconds),
            "unloaded" => format!(
                "{head}: {} sizes probed, {} completed, {} errors, RTT p50 {} us p99 {} us \
                 over all sizes",
                self.unloaded.len(),
                self.completed,
                self.errors,
                us(0.5),
                us(0.99),
            ),
            _ => format!(
                "{head}: {} completed, {} errors, {} skipped, {} unfinished, \
                 {:.3} of {} Gbit/s, RTT p50 {} us p99 {} us",
                self.completed,
                self.errors,
                self.skipped,
                self.unfinished,
                self.achieved_gbps(),
                self.target_gbps,
                us(0.5),
                us(0.99),
            ),
        }
    }

    /// The report as one line of JSON.
    pub fn to_json_string(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// Writes the JSON to `out`, or prints it on stdout when there is none.
    pub fn write_json(&self, out: Option<&std::path::Path>) -> Result<(), PerfError> {
        let json = self.to_json_string();
        match out {
            Some(path) => std::fs::write(path, json + "\n")
                .map_err(|e| PerfError::io(format!("write the report to {}", path.display()), e)),
            None => {
                println!("{json}");
                Ok(())
            }
        }
    }
}

/// The sizes unloaded mode probes: the workload's sizes at `points` evenly
/// spaced quantiles in (0, 1], plus its smallest and largest, each capped at
/// `max_size`, deduplicated and ascending.
pub fn unloaded_sizes(workload: &SizeDist, max_size: u64, points: usize) -> Vec<u64> {
    let mut sizes: Vec<u64> = (1..=points)
        .map(|i| workload.quantile(i as f64 / points as f64))
        .collect();
    // The smallest size a draw can return (rows of zero mass are skipped).
    sizes.push(workload.quantile(f64::MIN_POSITIVE));
    sizes.push(workload.quantile(1.0));
    for s in &mut sizes {
        *s = (*s).min(max_size);
    }
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

/// Runs one node as its flags say and reports what it measured.
pub fn run_node(args: &ClusterArgs) -> Result<NodeReport, PerfError> {
    let plan = Plan::new(args)?;
    let cpu0 = cpu_seconds();
    let server = Server::start_unchecked(&ServerOptions {
        protocol: plan.protocol,
        bind: plan.me,
        threads: plan.server_threads,
        busy_poll: false,
        homa_config: plan.homa_config.clone(),
        work_per_request: std::time::Duration::ZERO,
    })?;
    tracing::info!(
        "cluster node {}: {} server up, mode {}",
        plan.me,
        plan.protocol,
        plan.mode.name()
    );
    let mut report = plan.empty_report();
    let client = match plan.mode {
        Mode::Server => {
            let t = plan.warmup + plan.window + plan.linger;
            std::thread::sleep(t);
            report.seconds = t.as_secs_f64();
            None
        }
        Mode::Loaded => Some(run_loaded(&plan, server.homa_endpoint(), &mut report)?),
        Mode::Unloaded => Some(run_unloaded(&plan, server.homa_endpoint(), &mut report)?),
    };
    // The detected paths as the load left them (before the linger, when
    // nothing is sent and the smoothed RTTs no longer change).
    if let Some(ep) = server.homa_endpoint() {
        report.bytedance_peers = peers::records(ep);
    }
    if client.is_some() {
        std::thread::sleep(plan.linger);
    }
    if let Some(ep) = server.homa_endpoint() {
        // One endpoint served and sent this node's requests.
        let mut stats = serde_json::Map::new();
        stats.insert("endpoint".into(), endpoint_stats(ep));
        report.homa = Some(serde_json::Value::Object(stats));
    }
    server.shutdown();
    let cpu1 = cpu_seconds();
    report.cpu_user_s = cpu1.0 - cpu0.0;
    report.cpu_sys_s = cpu1.1 - cpu0.1;
    if report.errors > 0 || report.unfinished > 0 {
        tracing::warn!(
            "cluster node {}: {} errors, {} unfinished RPCs",
            plan.me,
            report.errors,
            report.unfinished
        );
    }
    Ok(report)
}

/// What a node does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Loaded,
    Unloaded,
    Server,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Loaded => "loaded",
            Mode::Unloaded => "unloaded",
            Mode::Server => "server",
        }
    }
}

/// The flags, checked and turned into what the run needs.
struct Plan {
    me: SocketAddr,
    peers: Vec<SocketAddr>,
    protocol: Protocol,
    mode: Mode,
    /// `None` only for a server given neither --workload nor --size.
    sizes: Option<SizeSpec>,
    label: String,
    response: ResponseSize,
    /// Distinct request sizes a draw can return, with their probabilities.
    masses: Vec<(u64, f64)>,
    gbps: f64,
    /// Poisson arrival rate (RPCs/s).
    rate: f64,
    window: Duration,
    warmup: Duration,
    drain: Duration,
    linger: Duration,
    ready_timeout: Duration,
    timeout: Duration,
    client_max: usize,
    tcp_connections: usize,
    server_threads: usize,
    homa_config: ::homa::Config,
    unloaded_points: usize,
    unloaded_count: u64,
    seed: u64,
}

impl Plan {
    fn new(a: &ClusterArgs) -> Result<Plan, PerfError> {
        let usage = |m: String| Err(PerfError::Usage(m));
        if a.protocol == Protocol::Udp {
            return usage(
                "cluster mode runs --protocol homa or tcp; udp has no loss recovery, \
                 so it cannot carry a loaded cluster's traffic"
                    .into(),
            );
        }
        let mode = match (a.server_only, a.unloaded) {
            (true, true) => return usage("--server-only and --unloaded exclude each other".into()),
            (true, false) => Mode::Server,
            (false, true) => Mode::Unloaded,
            (false, false) => Mode::Loaded,
        };
        check_cluster_addr(a.me)?;
        if a.me.port() == 0 {
            return usage(format!(
                "--me {} needs a port: the other nodes must know it",
                a.me
            ));
        }
        for &p in &a.peers {
            check_cluster_addr(p)?;
            if p.is_ipv4() != a.me.is_ipv4() {
                return usage(format!(
                    "peer {p} and --me {} are of different IP versions",
                    a.me
                ));
            }
        }
        let peers: Vec<SocketAddr> = a.peers.iter().copied().filter(|&p| p != a.me).collect();
        if peers.is_empty() && mode != Mode::Server {
            return usage(format!(
                "--peers lists no node other than --me {}: nobody to send to",
                a.me
            ));
        }
        if a.max_size == 0 {
            return usage("--max-size must be at least 1 byte".into());
        }
        let (sizes, label, masses) = match (&a.workload, a.size) {
            (Some(_), Some(_)) => return usage("give --workload or --size, not both".into()),
            (None, None) if mode == Mode::Server => (None, "none".to_string(), Vec::new()),
            (None, None) => return usage("give --workload w1..w5 or --size N".into()),
            (None, Some(n)) => {
                if n > a.max_size {
                    return usage(format!("--size {n} exceeds --max-size {}", a.max_size));
                }
                let spec = SizeSpec::Fixed(to_usize(n)?);
                (Some(spec), format!("fixed:{n}"), vec![(n, 1.0)])
            }
            (Some(w), None) => {
                let workload = SizeDist::by_name(w)?;
                let masses = size_masses(&workload, a.max_size);
                let label = workload.name().to_string();
                let spec = SizeSpec::Workload {
                    workload,
                    max: to_usize(a.max_size)?,
                };
                (Some(spec), label, masses)
            }
        };
        let homa_config = match (&a.config, a.protocol) {
            (Some(path), Protocol::Homa) => ::homa::Config::from_toml_file(path).map_err(|e| {
                PerfError::homa(format!("load Homa configuration {}", path.display()), e)
            })?,
            _ => ::homa::Config::default(),
        };
        // Nothing may exceed what the transport carries: the server would
        // truncate the response and every RPC would count as an error.
        let largest_request = masses.iter().map(|&(s, _)| s).max().unwrap_or(0);
        let largest_response = masses
            .iter()
            .map(|&(s, _)| a.response_size.expected(s))
            .max()
            .unwrap_or(0);
        let (limit, what) = match a.protocol {
            Protocol::Homa => (
                u64::from(homa_config.core.max_message_size),
                "the Homa configuration's max_message_size",
            ),
            _ => (MAX_TCP_MESSAGE as u64, "the TCP message limit"),
        };
        if largest_request.max(largest_response) > limit {
            return usage(format!(
                "requests of up to {largest_request} B and responses of up to \
                 {largest_response} B exceed {what} ({limit} B); lower --max-size or \
                 --response-size"
            ));
        }
        if !(a.gbps.is_finite() && a.gbps > 0.0) {
            return usage(format!("--gbps must be a positive number, got {}", a.gbps));
        }
        let mean_request = match &sizes {
            Some(SizeSpec::Workload { workload, .. }) => workload.capped(a.max_size).mean(),
            _ => masses.iter().map(|&(s, p)| s as f64 * p).sum(),
        };
        let mean_response: f64 = masses
            .iter()
            .map(|&(s, p)| a.response_size.expected(s) as f64 * p)
            .sum();
        let rate = a.gbps * 1e9 / 8.0 / (mean_request + mean_response);
        if mode == Mode::Loaded && !(rate.is_finite() && rate > 0.0) {
            return usage("requests and responses are all empty: no rate gives that load".into());
        }
        let count = |v: u64, flag: &str| {
            if v == 0 {
                Err(PerfError::Usage(format!("{flag} must be at least 1")))
            } else {
                Ok(v)
            }
        };
        Ok(Plan {
            me: a.me,
            peers,
            protocol: a.protocol,
            mode,
            sizes,
            label,
            response: a.response_size,
            masses,
            gbps: a.gbps,
            rate,
            window: seconds(a.seconds, "--seconds", false)?,
            warmup: seconds(a.warmup, "--warmup", true)?,
            drain: seconds(a.drain, "--drain", true)?,
            linger: seconds(a.linger, "--linger", true)?,
            ready_timeout: seconds(a.ready_timeout, "--ready-timeout", false)?,
            timeout: Duration::from_millis(count(a.timeout_ms, "--timeout-ms")?),
            client_max: count(a.client_max as u64, "--client-max")? as usize,
            tcp_connections: count(a.tcp_connections as u64, "--tcp-connections")? as usize,
            server_threads: count(a.server_threads as u64, "--server-threads")? as usize,
            homa_config,
            unloaded_points: a.unloaded_points,
            unloaded_count: count(a.unloaded_count, "--unloaded-count")?,
            seed: node_seed(a.seed, a.me),
        })
    }

    /// The largest request this node sends.
    fn max_request(&self) -> usize {
        self.sizes.as_ref().map_or(0, SizeSpec::max)
    }

    /// A report with the run's description and no measurements yet.
    fn empty_report(&self) -> NodeReport {
        let loaded = self.mode == Mode::Loaded;
        NodeReport {
            protocol: self.protocol.name().to_string(),
            mode: self.mode.name().to_string(),
            workload: self.label.clone(),
            me: self.me.to_string(),
            peers: self.peers.iter().map(|p| p.to_string()).collect(),
            target_gbps: if loaded { self.gbps } else { 0.0 },
            offered_rate_rps: if loaded { self.rate } else { 0.0 },
            seconds: if loaded {
                self.window.as_secs_f64()
            } else {
                0.0
            },
            issued: 0,
            completed: 0,
            errors: 0,
            skipped: 0,
            unfinished: 0,
            request_bytes: 0,
            response_bytes: 0,
            max_send_lag_us: 0.0,
            rpcs: Vec::new(),
            censored: Vec::new(),
            unloaded: Vec::new(),
            cpu_user_s: 0.0,
            cpu_sys_s: 0.0,
            homa: None,
            bytedance_peers: Vec::new(),
        }
    }
}

fn to_usize(n: u64) -> Result<usize, PerfError> {
    usize::try_from(n).map_err(|_| PerfError::Usage(format!("{n} bytes is too large here")))
}

fn seconds(s: f64, flag: &str, zero_ok: bool) -> Result<Duration, PerfError> {
    let ok = s.is_finite() && s <= 1e6 && (s > 0.0 || (zero_ok && s == 0.0));
    if !ok {
        let what = if zero_ok { "non-negative" } else { "positive" };
        return Err(PerfError::Usage(format!(
            "{flag} must be a {what} number of seconds, got {s}"
        )));
    }
    Ok(Duration::from_secs_f64(s))
}

/// Mixes the node's address into the seed so that hosts differ, the same
/// way on every run (FNV-1a: stable across Rust versions, unlike std's
/// hasher).
fn node_seed(seed: u64, me: SocketAddr) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in me.to_string().bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Every size `workload` can draw, capped at `cap` bytes, with its
/// probability, ascending.
fn size_masses(workload: &SizeDist, cap: u64) -> Vec<(u64, f64)> {
    workload.capped(cap).rows().collect()
}

/// Process CPU time so far: (user, system) seconds.
fn cpu_seconds() -> (f64, f64) {
    // SAFETY: rusage is plain old data, so all-zero bytes are a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF is valid and `ru` is a live, writable rusage.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    if rc != 0 {
        tracing::warn!("getrusage failed: {}", std::io::Error::last_os_error());
        return (0.0, 0.0);
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(ru.ru_utime), secs(ru.ru_stime))
}

/// A Homa endpoint's protocol and runtime counters as JSON.
fn endpoint_stats(ep: &::homa::Endpoint) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    m.insert(
        "metrics".into(),
        serde_json::to_value(ep.metrics()).unwrap_or(serde_json::Value::Null),
    );
    m.insert(
        "runtime".into(),
        serde_json::to_value(ep.runtime_stats()).unwrap_or(serde_json::Value::Null),
    );
    serde_json::Value::Object(m)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// One RPC in flight.
#[derive(Debug, Clone, Copy)]
struct Pending {
    /// Request size (bytes).
    size: u64,
    /// Response length a correct server returns.
    want: u64,
    /// Just before the request went to the transport.
    start: Instant,
    /// Issued inside the measured window (else it is not recorded).
    in_window: bool,
}

/// Outcomes of the window's RPCs, kept per thread and merged at the end.
#[derive(Debug, Default)]
struct Tally {
    completed: u64,
    errors: u64,
    unfinished: u64,
    request_bytes: u64,
    response_bytes: u64,
    rpcs: Vec<(u64, u64)>,
    censored: Vec<(u64, u64)>,
}

impl Tally {
    /// A response of `got` bytes arrived `rtt` after the request left.
    fn finish(&mut self, p: &Pending, got: u64, rtt: Duration, timeout: Duration) {
        if got != p.want {
            tracing::debug!(
                "response of {got} B to a {} B request, expected {} B",
                p.size,
                p.want
            );
            self.fail(p);
        } else if rtt > timeout {
            self.fail(p);
        } else if p.in_window {
            self.completed += 1;
            self.request_bytes += p.size;
            self.response_bytes += got;
            self.rpcs.push((p.size, nanos(rtt)));
        }
    }

    fn fail(&mut self, p: &Pending) {
        if p.in_window {
            self.errors += 1;
        }
    }

    fn unfinished(&mut self, p: &Pending) {
        if p.in_window {
            self.unfinished += 1;
            self.censored.push((p.size, nanos(p.start.elapsed())));
        }
    }

    /// Given up on after `timeout` without an answer.
    fn timed_out(&mut self, p: &Pending) {
        if p.in_window {
            self.errors += 1;
            self.censored.push((p.size, nanos(p.start.elapsed())));
        }
    }

    fn merge(&mut self, other: Tally) {
        self.completed += other.completed;
        self.errors += other.errors;
        self.unfinished += other.unfinished;
        self.request_bytes += other.request_bytes;
        self.response_bytes += other.response_bytes;
        self.rpcs.extend(other.rpcs);
        self.censored.extend(other.censored);
    }

    fn into_report(self, r: &mut NodeReport) {
        r.completed = self.completed;
        r.errors = self.errors;
        r.unfinished = self.unfinished;
        r.request_bytes = self.request_bytes;
        r.response_bytes = self.response_bytes;
        r.rpcs = self.rpcs;
        r.censored = self.censored;
    }
}

/// A loaded client's transport side: hands requests over and tracks them.
trait Issuer {
    /// RPCs sent and not yet answered or given up.
    fn outstanding(&self) -> usize;
    /// Sends a request of `size` bytes to peer number `peer`. Errs only when
    /// the client cannot go on.
    fn issue(&mut self, peer: usize, size: u64, in_window: bool) -> Result<(), PerfError>;
}

/// What the generator did.
#[derive(Debug, Default)]
struct Generated {
    issued: u64,
    skipped: u64,
    max_lag: Duration,
}

/// Waits for `t` by sleeping. The generator never spins: on a small
/// machine running several hosts, a spinning generator takes the CPU the
/// protocol stacks need. With the thread's timer slack at 1 µs (see
/// [`tight_timer_slack`]) a sleep ends within tens of microseconds of `t`,
/// and any lateness shows in `max_send_lag_us`.
fn wait_until(t: Instant) {
    let now = Instant::now();
    if t > now {
        std::thread::sleep(t - now);
    }
}

/// Asks the kernel to wake this thread's sleeps on time (the default slack
/// of 50 µs would delay every arrival by up to that much).
fn tight_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes an integer argument and only changes
    // the calling thread's timer slack; no memory is passed.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1_000 as libc::c_ulong, 0, 0, 0) };
    if rc != 0 {
        tracing::debug!(
            "cannot set the timer slack: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// Offers Poisson load from `t0`: warm-up, then the window. A late arrival
/// is sent at once, never dropped to catch up.
fn generate(
    issuer: &mut dyn Issuer,
    plan: &Plan,
    sizes: &SizeSpec,
    t0: Instant,
) -> Result<Generated, PerfError> {
    tight_timer_slack();
    let mut rng = ChaCha8Rng::seed_from_u64(plan.seed);
    let warm_end = t0 + plan.warmup;
    let end = warm_end + plan.window;
    let mut g = Generated::default();
    let mut next = t0;
    loop {
        // gen() is in [0, 1); 1 - it is in (0, 1], so the log is finite.
        let u = 1.0 - rng.gen::<f64>();
        let gap = Duration::try_from_secs_f64(-u.ln() / plan.rate).unwrap_or(Duration::MAX);
        next = match next.checked_add(gap) {
            Some(t) if t < end => t,
            _ => break,
        };
        wait_until(next);
        let now = Instant::now();
        if now >= end {
            break;
        }
        g.max_lag = g.max_lag.max(now - next);
        let in_window = now >= warm_end;
        let peer = rng.gen_range(0..plan.peers.len());
        let size = sizes.next(&mut rng) as u64;
        if issuer.outstanding() >= plan.client_max {
            if in_window {
                g.skipped += 1;
            }
            continue;
        }
        issuer.issue(peer, size, in_window)?;
        if in_window {
            g.issued += 1;
        }
    }
    Ok(g)
}

/// Waits until `outstanding()` is zero or `drain` has passed.
fn drain_wait(outstanding: impl Fn() -> usize, drain: Duration) {
    let deadline = Instant::now() + drain;
    while outstanding() > 0 && Instant::now() < deadline {
        std::thread::sleep(DRAIN_POLL);
    }
}

/// Readiness check, load, drain; fills the report. `ep` is the server's
/// Homa endpoint, which the Homa client shares.
fn run_loaded(
    plan: &Plan,
    ep: Option<&::homa::Endpoint>,
    report: &mut NodeReport,
) -> Result<(), PerfError> {
    let Some(sizes) = &plan.sizes else {
        return Err(PerfError::Usage("no request sizes given".into()));
    };
    let ready_deadline = Instant::now() + plan.ready_timeout;
    let (generated, tally) = match (plan.protocol, ep) {
        (Protocol::Homa, Some(ep)) => {
            let mut client = homa::LoadedHoma::start(plan, ready_deadline, ep.clone())?;
            let t0 = Instant::now();
            let generated = generate(&mut client, plan, sizes, t0);
            let tally = client.finish(plan.drain)?;
            (generated?, tally)
        }
        (Protocol::Homa, None) => return Err(no_endpoint()),
        _ => {
            let mut client = tcp::LoadedTcp::start(plan, ready_deadline)?;
            let t0 = Instant::now();
            let generated = generate(&mut client, plan, sizes, t0);
            let tally = client.finish(plan.drain)?;
            (generated?, tally)
        }
    };
    tally.into_report(report);
    report.issued = generated.issued;
    report.skipped = generated.skipped;
    report.max_send_lag_us = generated.max_lag.as_secs_f64() * 1e6;
    if generated.skipped > 0 {
        tracing::warn!(
            "cluster node {}: {} arrivals skipped at --client-max {}: the target load was not offered",
            plan.me,
            generated.skipped,
            plan.client_max
        );
    }
    Ok(())
}

fn no_endpoint() -> PerfError {
    PerfError::Usage("the Homa server has no endpoint to send requests from".into())
}

/// Readiness check and the one-at-a-time probes; fills the report.
fn run_unloaded(
    plan: &Plan,
    ep: Option<&::homa::Endpoint>,
    report: &mut NodeReport,
) -> Result<(), PerfError> {
    let sizes = match &plan.sizes {
        Some(SizeSpec::Fixed(n)) => vec![*n as u64],
        Some(SizeSpec::Workload { workload, max }) => {
            unloaded_sizes(workload, *max as u64, plan.unloaded_points)
        }
        None => return Err(PerfError::Usage("no request sizes given".into())),
    };
    let ready_deadline = Instant::now() + plan.ready_timeout;
    let probed = match (plan.protocol, ep) {
        (Protocol::Homa, Some(ep)) => {
            let mut client = homa::ProbeHoma::start(plan, &sizes, ready_deadline, ep.clone())?;
            unloaded::probe(&mut client, plan, &sizes)
        }
        (Protocol::Homa, None) => return Err(no_endpoint()),
        _ => {
            let mut client = tcp::ProbeTcp::start(plan, ready_deadline)?;
            unloaded::probe(&mut client, plan, &sizes)
        }
    };
    report.issued = probed.issued;
    report.seconds = probed.elapsed.as_secs_f64();
    report.unloaded = probed.points;
    probed.tally.into_report(report);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masses_cover_the_distribution() {
        let w = SizeDist::from_csv_str("t", "size_bytes,cdf\n2,0.25\n10,0.25\n20,0.75\n40,1\n")
            .unwrap();
        let m = size_masses(&w, 30);
        let sizes: Vec<u64> = m.iter().map(|&(s, _)| s).collect();
        assert_eq!(sizes, vec![2, 20, 30]);
        let probs: Vec<f64> = m.iter().map(|&(_, p)| p).collect();
        for (p, want) in probs.iter().zip([0.25, 0.5, 0.25]) {
            assert!((p - want).abs() < 1e-12, "{m:?}");
        }
    }

    #[test]
    fn masses_match_the_workload_mean() {
        for name in homa_measure::BUILTIN {
            let w = SizeDist::by_name(name).unwrap();
            let m = size_masses(&w, 1_000_000);
            let total: f64 = m.iter().map(|&(_, p)| p).sum();
            assert!((total - 1.0).abs() < 1e-9, "{name}: {total}");
            let mean: f64 = m.iter().map(|&(s, p)| s as f64 * p).sum();
            let exact = w.capped(1_000_000).mean();
            assert!(
                (mean - exact).abs() / exact < 1e-9,
                "{name}: {mean} vs {exact}"
            );
        }
    }

    #[test]
    fn response_sizes_parse_and_print() {
        for text in ["same", "0", "12345"] {
            let r: ResponseSize = text.parse().unwrap();
            assert_eq!(r.to_string(), text);
        }
        assert!("big".parse::<ResponseSize>().is_err());
        assert_eq!(ResponseSize::Same.expected(3), 100);
        assert_eq!(ResponseSize::Same.expected(500), 500);
        assert_eq!(ResponseSize::Bytes(7).expected(500), 7);
    }

    #[test]
    fn arrival_rate_counts_both_directions() {
        let me: SocketAddr = "127.0.0.1:1000".parse().unwrap();
        let peer: SocketAddr = "127.0.0.1:1001".parse().unwrap();
        let mut a = ClusterArgs::new(me, vec![me, peer], Protocol::Tcp);
        a.size = Some(1_000);
        a.gbps = 0.016;
        // 2 MB/s over 2,000 B per RPC.
        let plan = Plan::new(&a).unwrap();
        assert!((plan.rate - 1_000.0).abs() < 1e-6, "{}", plan.rate);
        a.response_size = ResponseSize::Bytes(3_000);
        assert!((Plan::new(&a).unwrap().rate - 500.0).abs() < 1e-6);
    }

    #[test]
    fn node_seeds_differ_by_address() {
        let a: SocketAddr = "10.0.0.1:4000".parse().unwrap();
        let b: SocketAddr = "10.0.0.2:4000".parse().unwrap();
        assert_ne!(node_seed(1, a), node_seed(1, b));
        assert_eq!(node_seed(1, a), node_seed(1, a));
    }
}
