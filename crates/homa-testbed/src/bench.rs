//! `testbed bench`: Homa and TCP on the same emulated cluster, workload by
//! workload, and the report in `docs/results/testbed.md`.
//!
//! For each workload: set the link rate, measure Homa's idle RTT by size
//! (one host probes, the others only serve), then run every variant with
//! all hosts loading the network at the same time, each run bracketed by
//! switch counters. The nodes are this same binary (`testbed node`, which
//! is `homa-perf cluster`) started inside the host namespaces.

use crate::analysis::{self, Baseline};
use crate::cleanup;
use crate::netns::{self, TestbedSpec};
use crate::report::{BenchResult, PriorityTotals, Variant, VariantRun, WorkloadResult};
use crate::tc::{self, BacklogSampler, ClassStats};
use anyhow::{anyhow, bail, Context, Result};
use homa_perf::cluster::{ClusterArgs, NodeReport};
use homa_perf::{Protocol, SizeDist};
use std::collections::BTreeMap;
use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// The port every node's server listens on.
const SERVER_PORT: u16 = 4000;

/// Largest message size (the Homa/Linux paper truncated at 1 MB).
const MAX_SIZE: u64 = 1_000_000;

/// Seconds a node waits after its window for outstanding RPCs; those still
/// missing then count as unfinished, with the time they had waited.
const DRAIN_S: f64 = 5.0;

/// How often the switch backlog is sampled during a run.
const BACKLOG_INTERVAL: Duration = Duration::from_millis(250);

/// Default link per workload: (name, rate in Mbit/s, MTU in bytes).
///
/// Two cores must generate, carry and absorb 80% of every host's link at
/// once with CPU to spare, or the measurement is of the CPU scheduler, not
/// the network. Measured here (4 hosts, Homa, 80% load): w2 at 20 Mbit/s
/// and w4/w5 at 400 Mbit/s keep ~0.7-1.0 of the 2 cores busy, w3 at
/// 100 Mbit/s ~1.5; w3 at 500 Mbit/s or w4 at 1 Gbit/s saturate both.
/// - Short-message workloads are limited by RPCs per second (each costs
///   ~100 µs of CPU across both ends and the emulated network), so they
///   get slow links and 1500-byte frames, which cost little CPU at these
///   rates and keep a frame's transmission time close to a round trip.
/// - Long-message workloads are limited by packets per second, so they get
///   9000-byte frames (180 µs at 400 Mbit/s).
pub const DEFAULT_LINKS: [(&str, u64, u32); 5] = [
    ("w1", 20, 1500),
    ("w2", 20, 1500),
    ("w3", 100, 1500),
    ("w4", 400, 9000),
    ("w5", 400, 9000),
];

/// Software part of the round trip Homa assumes when `--rtt-us` is not
/// given (µs): about the idle RTT of a tiny RPC here (27–45 µs measured).
pub const SOFTWARE_RTT_US: f64 = 50.0;

/// The round trip Homa's RTTbytes should cover on a link (ns): the
/// software round trip plus a full frame's transmission through the two
/// shaped hops (host NIC, switch port) before the receiver can grant.
pub fn auto_rtt_ns(rate_mbit: u64, mtu: u32) -> u64 {
    let frame_ns = (mtu as u64 + 14) * 8_000 / rate_mbit.max(1);
    (SOFTWARE_RTT_US * 1e3) as u64 + 2 * frame_ns
}

/// Bytes each packet adds on the link: Ethernet (14), IPv4 (20), UDP (8)
/// and Homa's DATA header. TCP's headers are smaller but it adds ACKs; the
/// same figure is used for both, so both carry the same payload.
pub const PACKET_OVERHEAD: usize = 14 + 20 + 8 + homa_wire::DATA_HEADER_LEN;

/// Link bytes per payload byte for `workload`'s messages (truncated at
/// 1 MB) in packets of at most `mtu` bytes.
pub fn wire_factor(workload: &SizeDist, mtu: u32) -> f64 {
    let per_packet = (mtu as usize).saturating_sub(PACKET_OVERHEAD - 14).max(1) as u64;
    // The expectation over the size distribution, by quantiles.
    const STEPS: u32 = 20_000;
    let (mut payload, mut wire) = (0.0, 0.0);
    for k in 0..STEPS {
        let u = (k as f64 + 0.5) / STEPS as f64;
        let size = workload.quantile(u).min(MAX_SIZE);
        let packets = size.div_ceil(per_packet).max(1);
        payload += size as f64;
        wire += (size + packets * PACKET_OVERHEAD as u64) as f64;
    }
    if payload > 0.0 {
        wire / payload
    } else {
        1.0
    }
}

/// Payload Gbit/s each host offers so that its link carries `load` of
/// `rate_mbit` (requests plus responses, headers included).
///
/// The Homa/Linux paper counts payload only; with its 3000-byte packets
/// at 25 Gbit/s CPU limits came first. Here, for a small-message
/// workload such as w2, headers add ~20%, and 80% of the link in
/// payload would overload it.
pub fn offered_gbps(load: f64, rate_mbit: u64, mtu: u32, workload: &SizeDist) -> f64 {
    load * rate_mbit as f64 / 1000.0 / wire_factor(workload, mtu)
}

/// `config` with `key=value` overrides (dotted TOML keys, TOML values)
/// applied and the result validated as the runtime will.
pub fn apply_overrides(config: &homa::Config, sets: &[String]) -> Result<homa::Config> {
    if sets.is_empty() {
        return Ok(config.clone());
    }
    let mut tree = toml::Value::try_from(config).context("cannot represent the configuration")?;
    for set in sets {
        let (key, value) = set
            .split_once('=')
            .ok_or_else(|| anyhow!("--homa-set {set:?}: expected key=value"))?;
        let value: toml::Value = toml::from_str::<toml::Table>(&format!("v = {}", value.trim()))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .ok_or_else(|| anyhow!("--homa-set {set:?}: {value:?} is not a TOML value"))?;
        let mut node = &mut tree;
        let parts: Vec<&str> = key.trim().split('.').collect();
        for (i, part) in parts.iter().enumerate() {
            let table = node
                .as_table_mut()
                .ok_or_else(|| anyhow!("--homa-set {set:?}: {part:?} is not in a table"))?;
            if i + 1 == parts.len() {
                if !table.contains_key(*part) {
                    bail!("--homa-set {set:?}: the configuration has no key {key:?}");
                }
                table.insert(part.to_string(), value.clone());
                break;
            }
            node = table
                .get_mut(*part)
                .ok_or_else(|| anyhow!("--homa-set {set:?}: no table {part:?}"))?;
        }
    }
    let text = toml::to_string(&tree)?;
    homa::Config::from_toml_str(&text).map_err(|e| anyhow!("--homa-set: {e}"))
}

/// The runtime configuration for a testbed link of `rate_mbit` and `mtu`
/// with round trip `rtt_ns` (Homa design, 8 priorities): the runtime's
/// defaults with the core sized by [`homa_core::Config::apply_link`] (the
/// one derivation of RTTbytes, and SIRD's BDP multiples), timers scaled to
/// the round trip, the pacer holding at most `nic_queue_packets` frames in
/// the NIC queue, no segmentation offload (the qdiscs must see MTU-sized
/// packets), and threads that sleep instead of polling.
pub fn link_config(rate_mbit: u64, mtu: u32, rtt_ns: u64, nic_queue_packets: f64) -> homa::Config {
    // The runtime's defaults (user-space timeouts), sized for this link.
    let base = homa::Config::default();
    let mut core = base.core.clone();
    core.apply_link(&homa_core::Link {
        mtu,
        ..homa_core::Link::new(rate_mbit, rtt_ns)
    });
    core.max_message_size = core.max_message_size.max(MAX_SIZE as u32);
    // Loss handling counts in ticks. Homa/Linux's 1 ms tick is ~70 of
    // its round trips; these links are 30-300x slower, and a 1 ms tick
    // would ask for resends of data merely queued behind a backlog
    // (then retransmit it, and make the backlog worse).
    core.tick_ns = core.tick_ns.max(10 * rtt_ns);
    // A server must remember acks longer than a client keeps retrying.
    core.ack_memory_ns = core.ack_memory_ns.max(2 * core.dead_peer_ns());
    // One full packet's transmission time.
    let packet_ns = mtu as u64 * 8_000 / rate_mbit.max(1);
    let mut config = base;
    config.core = core;
    config.max_nic_queue_ns = (nic_queue_packets * packet_ns as f64) as u64;
    // The qdiscs must see MTU-sized packets (priorities act per packet).
    config.segmentation_offload = false;
    // All hosts share two cores: a thread that polls takes CPU
    // from the one it waits for.
    config.poll_us = 0;
    config
}

/// Options of `testbed bench`.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// Workloads to run, in order.
    #[arg(long, default_value = "w2,w3,w4,w5", value_delimiter = ',')]
    pub workloads: Vec<String>,
    /// Variants to run on each workload: homa (8 priorities), homa-1prio, tcp.
    #[arg(long, default_value = "homa,tcp,homa-1prio", value_delimiter = ',')]
    pub variants: Vec<String>,
    /// Offered load per host as a fraction of the link rate.
    #[arg(long, default_value_t = 0.8)]
    pub load: f64,
    /// Measured seconds per run.
    #[arg(long, default_value_t = 20.0)]
    pub seconds: f64,
    /// Seconds of load before the measurement starts.
    #[arg(long, default_value_t = 2.0)]
    pub warmup: f64,
    /// Link rates (Mbit/s): `500` for every workload or `w3=500` for one;
    /// comma-separated. Default: see `DEFAULT_LINKS` (and the README).
    #[arg(long = "rates", value_delimiter = ',')]
    pub rates: Vec<String>,
    /// Link MTUs (bytes), like --rates: `9000` or `w3=1500`.
    #[arg(long = "mtus", value_delimiter = ',')]
    pub mtus: Vec<String>,
    /// TCP connections from each client to each server.
    #[arg(long, default_value_t = 1)]
    pub tcp_connections: usize,
    /// Most RPCs one client keeps outstanding (arrivals beyond are skipped
    /// and counted; high enough that TCP's backlog is offered in full).
    #[arg(long, default_value_t = 10_000)]
    pub client_max: usize,
    /// Round-trip time Homa assumes (µs): RTTbytes = link rate × this.
    /// Default: 50 µs of software plus two frame times (`auto_rtt_ns`).
    #[arg(long)]
    pub rtt_us: Option<f64>,
    /// Transmission time Homa's pacer lets queue in the host NIC, in
    /// full-size packets. Homa/Linux allows 2 µs, under one of its packets'
    /// worth at 25 Gbit/s... in time, a sliver of its 15 µs round trip;
    /// here one frame takes longer than a round trip, so half a frame
    /// (measured on w4: short-message p99 slowdown 24 at 0.5, 37 at 1).
    #[arg(long, default_value_t = 0.5)]
    pub nic_queue_packets: f64,
    /// Overrides of the generated Homa configuration, as TOML
    /// `key=value` pairs with dotted keys, e.g.
    /// `core.fifo_grant_fraction=100` (comma-separated).
    #[arg(long = "homa-set", value_delimiter = ',')]
    pub homa_set: Vec<String>,
    /// Size buckets per workload (equal shares of messages).
    #[arg(long, default_value_t = 20)]
    pub buckets: usize,
    /// Sizes probed on the idle testbed.
    #[arg(long, default_value_t = 30)]
    pub unloaded_points: usize,
    /// RPCs per probed size on the idle testbed.
    #[arg(long, default_value_t = 20)]
    pub unloaded_count: usize,
    /// Directory of the report: writes NAME.md, NAME/*.png, NAME/results.json.
    #[arg(long, default_value = "docs/results")]
    pub out: PathBuf,
    /// Base name of the report files.
    #[arg(long, default_value = "testbed")]
    pub name: String,
}

impl BenchArgs {
    fn validate(&self) -> Result<Vec<Variant>> {
        if !(self.load.is_finite() && self.load > 0.0 && self.load <= 1.5) {
            bail!("--load must be in (0, 1.5], got {}", self.load);
        }
        if !(self.seconds.is_finite() && self.seconds > 0.0) {
            bail!("--seconds must be positive, got {}", self.seconds);
        }
        if !(self.warmup.is_finite() && self.warmup >= 0.0) {
            bail!("--warmup must not be negative, got {}", self.warmup);
        }
        if let Some(rtt) = self.rtt_us {
            if !(rtt.is_finite() && rtt >= 1.0) {
                bail!("--rtt-us must be at least 1, got {rtt}");
            }
        }
        if !(self.nic_queue_packets.is_finite() && self.nic_queue_packets >= 0.0) {
            bail!("--nic-queue-packets must not be negative");
        }
        if self.workloads.is_empty() {
            bail!("--workloads is empty");
        }
        for w in &self.workloads {
            SizeDist::by_name(w)?;
        }
        for r in &self.rates {
            parse_setting(r, "--rates")?;
        }
        for m in &self.mtus {
            parse_setting(m, "--mtus")?;
        }
        if self.tcp_connections == 0 || self.client_max == 0 || self.buckets == 0 {
            bail!("--tcp-connections, --client-max and --buckets must be at least 1");
        }
        let variants = self
            .variants
            .iter()
            .map(|v| Variant::parse(v))
            .collect::<Result<Vec<_>>>()?;
        if variants.is_empty() {
            bail!("--variants is empty");
        }
        Ok(variants)
    }

    /// The link rate and MTU for `workload`: the last matching `--rates`
    /// / `--mtus` entries, else [`DEFAULT_LINKS`].
    fn link_for(&self, workload: &str) -> (u64, u32) {
        let (mut rate, mut mtu) = DEFAULT_LINKS
            .iter()
            .find(|(w, _, _)| *w == workload)
            .map_or((100, 1500), |&(_, r, m)| (r, m));
        for (w, v) in self
            .rates
            .iter()
            .filter_map(|r| parse_setting(r, "--rates").ok())
        {
            if w.as_deref().is_none_or(|w| w == workload) {
                rate = v;
            }
        }
        for (w, v) in self
            .mtus
            .iter()
            .filter_map(|r| parse_setting(r, "--mtus").ok())
        {
            if w.as_deref().is_none_or(|w| w == workload) {
                mtu = v as u32;
            }
        }
        (rate, mtu)
    }
}

/// `500` → (None, 500); `w3=500` → (Some("w3"), 500).
fn parse_setting(s: &str, flag: &str) -> Result<(Option<String>, u64)> {
    let (w, v) = match s.split_once('=') {
        Some((w, v)) => (Some(w.trim().to_ascii_lowercase()), v),
        None => (None, s),
    };
    let v: u64 = v
        .trim()
        .parse()
        .map_err(|_| anyhow!("{flag} {s:?}: expected a number, or wN=number"))?;
    if v == 0 {
        bail!("{flag} {s:?}: must be positive");
    }
    Ok((w, v))
}

/// Runs the bench on the testbed described by `spec` (already up) and
/// writes the report. Changes the link rate per workload (re-creating the
/// testbed) and leaves it at the last workload's rate.
pub fn run(args: &BenchArgs, spec: &TestbedSpec) -> Result<()> {
    let variants = args.validate()?;
    let exe = std::env::current_exe().context("cannot find the testbed executable")?;
    let work = std::env::temp_dir().join(format!("homa-testbed-{}", spec.prefix));
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(&work).with_context(|| format!("cannot create {}", work.display()))?;
    let mut spec = spec.clone();
    let mut results = Vec::new();
    for name in &args.workloads {
        let workload = SizeDist::by_name(name)?;
        let (rate, mtu) = args.link_for(name);
        if rate != spec.rate_mbit || mtu != spec.mtu || !netns::exists(&spec.prefix) {
            spec.rate_mbit = rate;
            spec.mtu = mtu;
            spec.validate()?;
            eprintln!("testbed: links at {rate} Mbit/s, MTU {mtu} B for {name}");
            netns::up(&spec)?;
        }
        let ctx = RunCtx {
            args,
            spec: &spec,
            exe: &exe,
            work: &work,
            workload_name: name,
            rtt_ns: args
                .rtt_us
                .map_or_else(|| auto_rtt_ns(rate, mtu), |us| (us * 1e3) as u64),
        };
        results.push(ctx.workload(&workload, &variants)?);
    }
    let result = BenchResult {
        command: command_line(),
        hosts: spec.hosts,
        buffer_bytes: spec.buffer_bytes,
        host_queue_bytes: spec.host_queue_bytes,
        load: args.load,
        seconds: args.seconds,
        tcp_connections: args.tcp_connections,
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        kernel: fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
        homa_config: homa_config_summary(args),
        workloads: results,
    };
    write_report(args, &result)
}

fn homa_config_summary(args: &BenchArgs) -> String {
    let rtt = match args.rtt_us {
        Some(us) => format!("RTTbytes = link rate × {us} µs"),
        None => format!("RTTbytes = link rate × ({SOFTWARE_RTT_US:.0} µs + 2 frame times)"),
    };
    let mut s = format!(
        "the runtime over UDP, one endpoint per host (client and server share it, so one pacer \
         sees all its traffic); {rtt}; the pacer keeps at most {} frame(s) in the NIC queue, \
         small packets bypass it but count; timer tick 10 round trips (≥ 1 ms); threads sleep \
         instead of polling (all hosts share 2 cores); no segmentation offload",
        args.nic_queue_packets
    );
    if !args.homa_set.is_empty() {
        s.push_str(&format!("; overrides: {}", args.homa_set.join(", ")));
    }
    s.push('.');
    s
}

pub(crate) fn command_line() -> String {
    let mut words: Vec<String> = std::env::args().collect();
    if let Some(first) = words.first_mut() {
        *first = "testbed".into();
    }
    words.join(" ")
}

/// Writes the report again from a bench's `results.json` (e.g. after the
/// report's format changed), without rerunning anything.
pub fn rerender(results: &Path, out: &Path, name: &str) -> Result<()> {
    let text = fs::read_to_string(results)
        .with_context(|| format!("cannot read {}", results.display()))?;
    let result: BenchResult = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a bench result", results.display()))?;
    render(&result, out, name, false)
}

fn write_report(args: &BenchArgs, result: &BenchResult) -> Result<()> {
    render(result, &args.out, &args.name, true)
}

/// Writes `out/name.md` and the plots in `out/name/`, and with
/// `with_json` the data (`out/name/results.json`).
fn render(result: &BenchResult, out: &Path, name: &str, with_json: bool) -> Result<()> {
    let dir = out.join(name);
    fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    result.write_plots(&dir)?;
    if with_json {
        fs::write(
            dir.join("results.json"),
            serde_json::to_string_pretty(result)?,
        )?;
    }
    let md = out.join(format!("{name}.md"));
    fs::write(&md, result.to_markdown(name))
        .with_context(|| format!("cannot write {}", md.display()))?;
    eprintln!("testbed: wrote {}", md.display());
    Ok(())
}

/// What every run of one workload shares.
struct RunCtx<'a> {
    args: &'a BenchArgs,
    spec: &'a TestbedSpec,
    exe: &'a Path,
    work: &'a Path,
    workload_name: &'a str,
    rtt_ns: u64,
}

impl RunCtx<'_> {
    fn addr(&self, host: usize) -> SocketAddr {
        SocketAddr::new(self.spec.host_ip(host).into(), SERVER_PORT)
    }

    fn peers(&self) -> Vec<SocketAddr> {
        (0..self.spec.hosts).map(|h| self.addr(h)).collect()
    }

    /// Writes the Homa runtime configuration for this link and returns its path.
    fn homa_config(&self, priorities: u8) -> Result<PathBuf> {
        let mut config = link_config(
            self.spec.rate_mbit,
            self.spec.mtu,
            self.rtt_ns,
            self.args.nic_queue_packets,
        );
        config.core.num_priorities = priorities;
        let config = apply_overrides(&config, &self.args.homa_set)?;
        let path = self.work.join(format!("homa-{priorities}prio.toml"));
        let text = toml::to_string(&config).context("cannot write the Homa configuration")?;
        fs::write(&path, text)?;
        Ok(path)
    }

    fn node_args(&self, host: usize, protocol: Protocol, tag: &str) -> ClusterArgs {
        let mut a = ClusterArgs::new(self.addr(host), self.peers(), protocol);
        a.workload = Some(self.workload_name.to_string());
        a.max_size = MAX_SIZE;
        a.seed = 1 + host as u64;
        a.out = Some(self.work.join(format!("{tag}-h{host}.json")));
        a
    }

    fn workload(&self, workload: &SizeDist, variants: &[Variant]) -> Result<WorkloadResult> {
        let name = self.workload_name;
        eprintln!("testbed: {name}: idle round-trip times");
        let homa8 = self.homa_config(8)?;
        let baseline = self.unloaded(&homa8)?;
        let bounds = homa_measure::buckets::cdf_bounds(workload, MAX_SIZE, self.args.buckets);
        let mut runs = Vec::new();
        for &v in variants {
            eprintln!(
                "testbed: {name}: {} at {:.0}% load",
                v.label(),
                self.args.load * 100.0
            );
            let config = match v {
                Variant::Homa => Some(homa8.clone()),
                Variant::Homa1Prio => Some(self.homa_config(1)?),
                Variant::Tcp => None,
            };
            runs.push(self.loaded(v, config, workload, &baseline, &bounds)?);
        }
        let cmp = |a: Variant, b: Variant| {
            let (x, y) = (
                runs.iter().find(|r| r.variant == a)?,
                runs.iter().find(|r| r.variant == b)?,
            );
            Some(analysis::compare(
                (&x.short_half, &x.buckets),
                (&y.short_half, &y.buckets),
            ))
        };
        let tcp_vs_homa = cmp(Variant::Homa, Variant::Tcp);
        let one_vs_eight = cmp(Variant::Homa, Variant::Homa1Prio);
        Ok(WorkloadResult {
            workload: name.to_string(),
            rate_mbit: self.spec.rate_mbit,
            mtu: self.spec.mtu,
            wire_factor: wire_factor(workload, self.spec.mtu),
            rtt_ns: self.rtt_ns,
            baseline: baseline.points().to_vec(),
            runs,
            tcp_vs_homa,
            one_vs_eight,
        })
    }

    /// Host 0 probes every size one RPC at a time; the others serve.
    fn unloaded(&self, config: &Path) -> Result<Baseline> {
        let tag = format!("{}-unloaded", self.workload_name);
        let mut servers = Vec::new();
        for h in 1..self.spec.hosts {
            let mut a = self.node_args(h, Protocol::Homa, &tag);
            a.config = Some(config.to_path_buf());
            a.server_only = true;
            // Stopped by the bench once the probe is done.
            a.seconds = 24.0 * 3600.0;
            servers.push(self.spawn(h, &a, &tag)?);
        }
        let mut a = self.node_args(0, Protocol::Homa, &tag);
        a.config = Some(config.to_path_buf());
        a.unloaded = true;
        a.unloaded_points = self.args.unloaded_points;
        a.unloaded_count = self.args.unloaded_count as u64;
        a.peers = (1..self.spec.hosts).map(|h| self.addr(h)).collect();
        a.peers.push(self.addr(0));
        let prober = self.spawn(0, &a, &tag)?;
        let limit = Duration::from_secs(300);
        let outcome = wait_all(vec![prober], limit);
        for mut s in servers {
            let _ = s.child.kill();
            let _ = s.child.wait();
            cleanup::unregister_child(s.child.id());
        }
        outcome?;
        let report = read_report(a.out.as_deref())?;
        Baseline::new(report.unloaded.iter().map(|p| (p.size, p.min_ns)).collect())
    }

    fn loaded(
        &self,
        variant: Variant,
        config: Option<PathBuf>,
        workload: &SizeDist,
        baseline: &Baseline,
        bounds: &[u64],
    ) -> Result<VariantRun> {
        let tag = format!("{}-{}", self.workload_name, variant.name());
        let protocol = if variant == Variant::Tcp {
            Protocol::Tcp
        } else {
            Protocol::Homa
        };
        let gbps = offered_gbps(self.args.load, self.spec.rate_mbit, self.spec.mtu, workload);
        let mut argsets = Vec::new();
        for h in 0..self.spec.hosts {
            let mut a = self.node_args(h, protocol, &tag);
            a.config = config.clone();
            a.gbps = gbps;
            a.seconds = self.args.seconds;
            a.warmup = self.args.warmup;
            a.client_max = self.args.client_max;
            a.tcp_connections = self.args.tcp_connections;
            // Under SRPT at 80% load the longest messages can wait seconds;
            // they are measured, not given up on.
            a.timeout_ms = 120_000;
            a.drain = DRAIN_S;
            argsets.push(a);
        }
        let before = tc::switch_port_stats(self.spec)?;
        let sampler = BacklogSampler::start(self.spec, BACKLOG_INTERVAL);
        let started = Instant::now();
        let mut nodes = Vec::new();
        for (h, a) in argsets.iter().enumerate() {
            nodes.push(self.spawn(h, a, &tag)?);
        }
        // Machine-wide CPU over the measured window (after the nodes found
        // each other and warmed up; a second is ample for the former).
        let window_start = Duration::from_secs_f64(1.0 + self.args.warmup);
        let window = Duration::from_secs_f64((self.args.seconds - 0.5).max(0.2));
        let cpu = CpuWindow::measure(started, window_start, window);
        let limit = Duration::from_secs_f64(self.args.warmup + self.args.seconds + DRAIN_S + 60.0);
        let outcome = wait_all(nodes, limit);
        let peaks = sampler.stop();
        outcome?;
        let after = tc::switch_port_stats(self.spec)?;
        let cpu_cores = cpu.map(|c| c.finish()).unwrap_or(f64::NAN);
        let mut reports = Vec::new();
        for a in &argsets {
            reports.push(read_report(a.out.as_deref())?);
        }
        // Unfinished RPCs count with the time they had waited: a lower
        // bound, but leaving them out would flatter the tail.
        let rpcs: Vec<(u64, u64)> = reports
            .iter()
            .flat_map(|r| r.rpcs.iter().chain(&r.censored).copied())
            .collect();
        if rpcs.is_empty() {
            bail!(
                "{tag}: no RPC completed; see the node logs in {}",
                self.work.display()
            );
        }
        let samples = analysis::slowdowns(&rpcs, baseline);
        let ports = tc::delta(&before, &after);
        let sum = |f: fn(&NodeReport) -> u64| reports.iter().map(f).sum::<u64>();
        let bytes = sum(|r| r.request_bytes + r.response_bytes);
        let window_s = reports.first().map_or(self.args.seconds, |r| r.seconds);
        Ok(VariantRun {
            variant,
            target_gbps: gbps,
            achieved_gbps: bytes as f64 * 8.0 / window_s / 1e9 / self.spec.hosts as f64,
            completed: sum(|r| r.completed),
            errors: sum(|r| r.errors),
            skipped: sum(|r| r.skipped),
            unfinished: sum(|r| r.unfinished),
            max_send_lag_us: reports
                .iter()
                .map(|r| r.max_send_lag_us)
                .fold(0.0, f64::max),
            cpu_cores,
            buckets: analysis::spectrum(&samples, workload, bounds),
            short_half: analysis::short_half(&samples, workload),
            switch: priority_totals(&ports, &peaks),
            ports,
            homa_counters: homa_counters(&reports),
        })
    }

    fn spawn(&self, host: usize, args: &ClusterArgs, tag: &str) -> Result<Node> {
        spawn_node(
            self.spec,
            self.work,
            self.exe,
            host,
            "node",
            args.to_args(),
            tag,
        )
    }
}

/// Starts `exe SUBCOMMAND ARGS` in host `host`'s namespace of `spec`, its
/// output (without panic backtraces) going to `work/TAG-hHOST.log`.
pub(crate) fn spawn_node(
    spec: &TestbedSpec,
    work: &Path,
    exe: &Path,
    host: usize,
    subcommand: &str,
    args: Vec<String>,
    tag: &str,
) -> Result<Node> {
    let log_path = work.join(format!("{tag}-h{host}.log"));
    let log = fs::File::create(&log_path)?;
    let mut argv = vec![subcommand.to_string()];
    argv.extend(args);
    let mut cmd = netns::command_in(&spec.host_ns(host), exe.as_os_str(), &argv);
    cmd.stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .env("RUST_BACKTRACE", "0");
    let child = cmd
        .spawn()
        .with_context(|| format!("cannot start the node on host {host}"))?;
    cleanup::register_child(child.id());
    Ok(Node {
        child,
        host,
        log: log_path,
    })
}

/// A node process and where its output goes.
pub(crate) struct Node {
    pub(crate) child: Child,
    pub(crate) host: usize,
    pub(crate) log: PathBuf,
}

/// Waits for every node to exit successfully; kills all of them if one
/// fails or `limit` passes.
pub(crate) fn wait_all(mut nodes: Vec<Node>, limit: Duration) -> Result<()> {
    let deadline = Instant::now() + limit;
    let mut failure: Option<anyhow::Error> = None;
    while !nodes.is_empty() && failure.is_none() {
        let mut i = 0;
        while i < nodes.len() {
            match nodes[i].child.try_wait() {
                Ok(Some(status)) => {
                    let n = nodes.swap_remove(i);
                    cleanup::unregister_child(n.child.id());
                    if !status.success() {
                        failure = Some(anyhow!(
                            "the node on host {} failed ({status}):\n{}",
                            n.host,
                            log_tail(&n.log)
                        ));
                    }
                }
                Ok(None) => i += 1,
                Err(e) => {
                    failure = Some(anyhow!("cannot wait for host {}: {e}", nodes[i].host));
                    break;
                }
            }
        }
        if failure.is_none() && !nodes.is_empty() {
            if Instant::now() > deadline {
                failure = Some(anyhow!(
                    "nodes on hosts {:?} still running after {:?}",
                    nodes.iter().map(|n| n.host).collect::<Vec<_>>(),
                    limit
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    for mut n in nodes {
        let _ = n.child.kill();
        let _ = n.child.wait();
        cleanup::unregister_child(n.child.id());
    }
    failure.map_or(Ok(()), Err)
}

fn log_tail(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

fn read_report(path: Option<&Path>) -> Result<NodeReport> {
    let path = path.ok_or_else(|| anyhow!("a node was started without --out"))?;
    let text = fs::read_to_string(path)
        .with_context(|| format!("cannot read the node report {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("bad node report {}", path.display()))
}

/// Switch counters summed by priority level, with the sampled peaks.
fn priority_totals(ports: &[ClassStats], peaks: &[(usize, u8, u64)]) -> Vec<PriorityTotals> {
    let mut by: BTreeMap<u8, PriorityTotals> = BTreeMap::new();
    for c in ports {
        let t = by.entry(c.priority).or_insert(PriorityTotals {
            priority: c.priority,
            ..Default::default()
        });
        t.bytes += c.bytes;
        t.packets += c.packets;
        t.drops += c.drops;
    }
    for &(_, prio, peak) in peaks {
        let t = by.entry(prio).or_insert(PriorityTotals {
            priority: prio,
            ..Default::default()
        });
        t.peak_backlog_bytes = t.peak_backlog_bytes.max(peak);
    }
    by.into_values().rev().collect()
}

/// Homa counters worth reporting, summed over hosts and endpoints.
const HOMA_COUNTERS: [&str; 9] = [
    "grants_srpt",
    "grants_fifo",
    "data_bytes_retransmitted",
    "resends_requested",
    "timeouts",
    "rpcs_failed",
    "cutoff_updates",
    "pacer_holds",
    "send_drops",
];

fn homa_counters(reports: &[NodeReport]) -> Vec<(String, u64)> {
    let mut sums: BTreeMap<&str, u64> = BTreeMap::new();
    let mut any = false;
    for r in reports {
        if let Some(v) = &r.homa {
            any = true;
            add_leaves(v, &mut sums);
        }
    }
    if !any {
        return Vec::new();
    }
    HOMA_COUNTERS
        .iter()
        .map(|&k| (k.to_string(), sums.get(k).copied().unwrap_or(0)))
        .collect()
}

fn add_leaves(v: &serde_json::Value, sums: &mut BTreeMap<&'static str, u64>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                if let (Some(n), Some(&key)) = (x.as_u64(), HOMA_COUNTERS.iter().find(|c| *c == k))
                {
                    *sums.entry(key).or_default() += n;
                } else {
                    add_leaves(x, sums);
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| add_leaves(x, sums)),
        _ => {}
    }
}

/// Busy CPU time of the whole machine (all processes and the kernel's
/// packet processing) over a window, from `/proc/stat`.
struct CpuWindow {
    handle: std::thread::JoinHandle<Option<f64>>,
}

impl CpuWindow {
    fn measure(t0: Instant, start: Duration, len: Duration) -> Option<CpuWindow> {
        let handle = std::thread::Builder::new()
            .name("cpu-window".into())
            .spawn(move || {
                std::thread::sleep((t0 + start).saturating_duration_since(Instant::now()));
                let a = proc_stat()?;
                let t = Instant::now();
                std::thread::sleep(len);
                let b = proc_stat()?;
                let wall = t.elapsed().as_secs_f64();
                let hz = 100.0; // USER_HZ: /proc/stat counts in 1/100 s on Linux.
                Some((b.0 - a.0) as f64 / hz / wall)
            })
            .ok()?;
        Some(CpuWindow { handle })
    }

    /// Busy cores on average over the window (NaN if unmeasured).
    fn finish(self) -> f64 {
        self.handle.join().ok().flatten().unwrap_or(f64::NAN)
    }
}

/// (busy, total) jiffies of all CPUs.
pub(crate) fn proc_stat() -> Option<(u64, u64)> {
    let text = fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().next()?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3)? + v.get(4)?;
    Some((total - idle, total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_default_per_workload_and_can_be_overridden() {
        let mut a = BenchArgs {
            workloads: vec!["w2".into()],
            variants: vec!["homa".into()],
            load: 0.8,
            seconds: 1.0,
            warmup: 0.0,
            rates: vec![],
            mtus: vec![],
            tcp_connections: 1,
            client_max: 10,
            rtt_us: None,
            nic_queue_packets: 1.0,
            homa_set: vec![],
            buckets: 10,
            unloaded_points: 5,
            unloaded_count: 5,
            out: "x".into(),
            name: "t".into(),
        };
        assert_eq!(a.link_for("w5"), (400, 9000));
        assert_eq!(a.link_for("w2"), (20, 1500));
        a.rates = vec!["300".into(), "w5=700".into()];
        a.mtus = vec!["w2=3000".into()];
        assert_eq!(a.link_for("w2"), (300, 3000));
        assert_eq!(a.link_for("w5"), (700, 9000));
        assert!(a.validate().is_ok());
        a.rates = vec!["w5=fast".into()];
        let e = a.validate().unwrap_err().to_string();
        assert!(e.contains("expected a number"), "{e}");
        a.rates = vec![];
        a.variants = vec!["quic".into()];
        assert!(a.validate().is_err());
    }

    #[test]
    fn wire_factor_counts_a_header_per_packet() {
        let one = SizeDist::from_csv_str("t", "size_bytes,cdf\n1000,1\n").unwrap();
        let f = wire_factor(&one, 1500);
        assert!(
            (f - (1000.0 + PACKET_OVERHEAD as f64) / 1000.0).abs() < 1e-9,
            "{f}"
        );
        // 10,000 B in 1500-byte frames: 8 packets.
        let ten = SizeDist::from_csv_str("t", "size_bytes,cdf\n10000,1\n").unwrap();
        let per = 1500 - (PACKET_OVERHEAD - 14);
        assert_eq!(10_000usize.div_ceil(per), 8);
        let f = wire_factor(&ten, 1500);
        assert!((f - (10_000.0 + 8.0 * PACKET_OVERHEAD as f64) / 10_000.0).abs() < 1e-9);
        // Small-message workloads pay more for headers.
        let w2 = SizeDist::by_name("w2").unwrap();
        let w5 = SizeDist::by_name("w5").unwrap();
        assert!(wire_factor(&w2, 1500) > 1.15);
        assert!(wire_factor(&w5, 9000) < 1.02);
        let g = offered_gbps(0.8, 1000, 9000, &w5);
        assert!(g < 0.8 && g > 0.78, "{g}");
    }

    #[test]
    fn homa_overrides_change_keys_and_refuse_unknown_ones() {
        let base = homa::Config::default();
        let c = apply_overrides(
            &base,
            &["core.fifo_grant_fraction=200".into(), "poll_us = 7".into()],
        )
        .unwrap();
        assert_eq!(c.core.fifo_grant_fraction, 200);
        assert_eq!(c.poll_us, 7);
        assert!(apply_overrides(&base, &["core.nonsense=1".into()]).is_err());
        assert!(apply_overrides(&base, &["poll_us".into()]).is_err());
        assert!(apply_overrides(&base, &["poll_us=[".into()]).is_err());
        // Values are checked like a configuration file.
        assert!(apply_overrides(&base, &["core.mtu=\"big\"".into()]).is_err());
    }

    #[test]
    fn auto_rtt_covers_two_frames() {
        // 9014-byte frames at 400 Mbit/s take 180 µs each.
        assert_eq!(auto_rtt_ns(400, 9000), 50_000 + 2 * 180_280);
        assert_eq!(auto_rtt_ns(100, 1500), 50_000 + 2 * 121_120);
    }

    #[test]
    fn priority_totals_sum_ports_and_keep_the_peak() {
        let c = |port, priority, bytes, drops| ClassStats {
            port,
            priority,
            bytes,
            packets: 1,
            drops,
            backlog_bytes: 0,
            backlog_packets: 0,
            overlimits: 0,
        };
        let t = priority_totals(
            &[c(0, 7, 100, 0), c(1, 7, 50, 1), c(0, 0, 10, 2)],
            &[(0, 7, 3000), (1, 7, 9000), (1, 0, 5)],
        );
        assert_eq!(t.len(), 2);
        assert_eq!(
            (
                t[0].priority,
                t[0].bytes,
                t[0].drops,
                t[0].peak_backlog_bytes
            ),
            (7, 150, 1, 9000)
        );
        assert_eq!((t[1].priority, t[1].packets, t[1].drops), (0, 1, 2));
    }

    #[test]
    fn proc_stat_reads_busy_and_total() {
        let (busy, total) = proc_stat().expect("/proc/stat");
        assert!(busy <= total && total > 0);
    }
}
