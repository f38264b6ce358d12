//! `testbed sird`: the SIRD paper's testbed experiments (its §6) on the
//! emulated switch, with one FIFO per egress port (no priorities).
//!
//! - `incast`: six hosts send 1 MB requests in closed loop to one receiver,
//!   which replies with 8 bytes; a seventh host sends 8-byte probes in
//!   closed loop to the receiver's host and records their round-trip
//!   times. Variants: SIRD with credit pacing, SIRD without, Homa.
//! - `congested`: one sender streams 1 MB requests to four receivers (it
//!   can fill only a quarter of each downlink); four other hosts each
//!   stream to one of them. Variants: SIRD with SThr = ∞ and with
//!   SThr = BDP/2.
//!
//! Each experiment writes `OUT/sird/EXPERIMENT.json` (refusing to replace
//! one unless `--force`), keeping finished runs in
//! `OUT/sird/EXPERIMENT.partial.json` as it goes (a rerun resumes from
//! them), and then `OUT/sird.md` from whatever results exist.

use std::collections::BTreeMap;
use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context, Result};
use homa_measure::plot::{line_plot, Series};
use homa_measure::quantile::nearest_rank;
use homa_measure::table::{markdown_table, Align};
use serde::{Deserialize, Serialize};

use crate::bench::{self, wait_all, Node};
use crate::cleanup;
use crate::netns::{self, TestbedSpec};
use crate::sird_node::{NodeArgs, NodeOutcome, LINGER_S};
use crate::sird_sniff::{self, FlagCounts};
use crate::tc;

/// The port every node's endpoint binds.
const PORT: u16 = 4000;

/// Seconds between launching the nodes and the experiment's start: time
/// to start the processes and bind their endpoints.
const STARTUP_S: f64 = 0.5;

/// Largest message the experiments send.
pub const MESSAGE_BYTES: u64 = 1_000_000;

/// The experiments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Experiment {
    /// 6-to-1 incast with a prober.
    Incast,
    /// One sender to 4 receivers, plus one sender per receiver.
    Congested,
}

impl Experiment {
    /// The name used in files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Experiment::Incast => "incast",
            Experiment::Congested => "congested",
        }
    }

    /// The variants it runs by default.
    pub fn default_variants(self) -> &'static [Variant] {
        match self {
            Experiment::Incast => &[Variant::SirdPaced, Variant::SirdUnpaced, Variant::Homa],
            Experiment::Congested => &[Variant::SirdSthrInf, Variant::SirdSthrHalf],
        }
    }
}

/// A protocol configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    /// SIRD, credit paced to the downlink, SThr = BDP/2.
    SirdPaced,
    /// SIRD without credit pacing, SThr = BDP/2.
    SirdUnpaced,
    /// Homa (one priority level: the switch has one queue).
    Homa,
    /// SIRD (paced) with informed overcommitment off: SThr = ∞.
    SirdSthrInf,
    /// SIRD (paced) with SThr = BDP/2.
    SirdSthrHalf,
}

impl Variant {
    /// Every variant, for parsing.
    pub const ALL: [Variant; 5] = [
        Variant::SirdPaced,
        Variant::SirdUnpaced,
        Variant::Homa,
        Variant::SirdSthrInf,
        Variant::SirdSthrHalf,
    ];

    /// The name on the command line and in the results.
    pub fn name(self) -> &'static str {
        match self {
            Variant::SirdPaced => "sird",
            Variant::SirdUnpaced => "sird-nopace",
            Variant::Homa => "homa",
            Variant::SirdSthrInf => "sthr-inf",
            Variant::SirdSthrHalf => "sthr-half",
        }
    }

    /// A label for tables and plots.
    pub fn label(self) -> &'static str {
        match self {
            Variant::SirdPaced => "SIRD, credit pacing",
            Variant::SirdUnpaced => "SIRD, no credit pacing",
            Variant::Homa => "Homa (1 level)",
            Variant::SirdSthrInf => "SIRD, SThr = ∞",
            Variant::SirdSthrHalf => "SIRD, SThr = BDP/2",
        }
    }

    /// Parses a variant name.
    pub fn parse(s: &str) -> Result<Variant> {
        let s = s.trim();
        Variant::ALL
            .into_iter()
            .find(|v| v.name() == s)
            .ok_or_else(|| {
                anyhow!(
                    "unknown variant {s:?}; expected one of {}",
                    Variant::ALL.map(|v| v.name()).join(", ")
                )
            })
    }

    /// Whether `experiment` can run it.
    pub fn fits(self, experiment: Experiment) -> bool {
        experiment.default_variants().contains(&self)
    }

    /// Sets the variant's design and SIRD parameters on `config` (sized
    /// for the link already). SIRD runs with one priority level
    /// (`sird.priorities = false`): the switch has one FIFO per port, so a
    /// second level would change nothing but the TOS byte.
    pub fn configure(self, config: &mut homa::Config) {
        let core = &mut config.core;
        core.num_priorities = 1;
        match self {
            Variant::Homa => core.design = homa_core::Design::Homa,
            _ => {
                core.design = homa_core::Design::Sird;
                core.sird.priorities = false;
                core.sird.pace_credit = self != Variant::SirdUnpaced;
                if self == Variant::SirdSthrInf {
                    core.sird.sender_threshold = u32::MAX;
                }
            }
        }
    }
}

/// What one host does in an experiment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Role {
    /// Host index.
    pub host: usize,
    /// Hosts it loads in closed loop (one RPC outstanding to each).
    pub targets: Vec<usize>,
    /// Request size of its clients (bytes).
    pub size: u64,
    /// Whether it records round-trip times (the prober).
    pub probe: bool,
}

/// The incast plan: host 0 receives, hosts `1..=senders` send `size`-byte
/// requests to it, host `senders + 1` probes it with 8-byte requests.
pub fn incast_plan(senders: usize, size: u64) -> Vec<Role> {
    let mut roles = vec![Role {
        host: 0,
        targets: vec![],
        size: 0,
        probe: false,
    }];
    for h in 1..=senders {
        roles.push(Role {
            host: h,
            targets: vec![0],
            size,
            probe: false,
        });
    }
    roles.push(Role {
        host: senders + 1,
        targets: vec![0],
        size: crate::sird_node::REPLY_BYTES as u64,
        probe: true,
    });
    roles
}

/// The congested-sender plan: host 0 sends `size`-byte requests to each
/// of hosts `1..=receivers`; host `receivers + r` sends `other_size`-byte
/// requests to host `r`.
pub fn congested_plan(receivers: usize, size: u64, other_size: u64) -> Vec<Role> {
    let mut roles = vec![Role {
        host: 0,
        targets: (1..=receivers).collect(),
        size,
        probe: false,
    }];
    for r in 1..=receivers {
        roles.push(Role {
            host: r,
            targets: vec![],
            size: 0,
            probe: false,
        });
    }
    for r in 1..=receivers {
        roles.push(Role {
            host: receivers + r,
            targets: vec![r],
            size: other_size,
            probe: false,
        });
    }
    roles
}

/// Round-trip-time quantiles (µs) of a set of samples.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Quantiles {
    /// Samples.
    pub count: usize,
    /// Median.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Largest.
    pub max_us: f64,
}

/// Sorts `ns` and returns its quantiles (nearest rank, `homa-measure`'s
/// definition); all NaN when there are no samples.
pub fn quantiles(ns: &mut [u64]) -> Quantiles {
    ns.sort_unstable();
    let q = |p: f64| nearest_rank(ns, p).map_or(f64::NAN, |v| v as f64 / 1e3);
    Quantiles {
        count: ns.len(),
        p50_us: q(0.5),
        p90_us: q(0.9),
        p99_us: q(0.99),
        p999_us: q(0.999),
        max_us: q(1.0),
    }
}

/// At most `points` points `(rtt µs, cumulative fraction)` of the CDF of
/// ascending `sorted`: evenly spaced fractions, then the tail above 99%
/// more finely, so a plot needs no raw samples.
pub fn cdf_points(sorted: &[u64], points: usize) -> Vec<(f64, f64)> {
    if sorted.is_empty() || points < 2 {
        return Vec::new();
    }
    let mut qs: Vec<f64> = (1..=points / 2)
        .map(|i| i as f64 / (points / 2) as f64 * 0.99)
        .collect();
    let tail = points - points / 2;
    qs.extend((1..=tail).map(|i| 0.99 + 0.01 * i as f64 / tail as f64));
    let mut out: Vec<(f64, f64)> = Vec::with_capacity(points + 1);
    out.push((sorted[0] as f64 / 1e3, 1.0 / sorted.len() as f64));
    for q in qs {
        if let Some(v) = nearest_rank(sorted, q) {
            out.push((v as f64 / 1e3, q));
        }
    }
    out.dedup_by(|b, a| a.0 == b.0 && a.1 >= b.1);
    out
}

/// Statistics of the switch egress queue towards one host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueStats {
    /// Backlog samples taken.
    pub samples: usize,
    /// Mean backlog (bytes).
    pub mean_bytes: f64,
    /// Median backlog (bytes).
    pub p50_bytes: u64,
    /// 99th percentile of the backlog (bytes).
    pub p99_bytes: u64,
    /// Largest backlog seen (bytes).
    pub max_bytes: u64,
    /// Packets dropped in the window.
    pub drops: u64,
    /// Bytes the port sent in the window (Ethernet headers included).
    pub sent_bytes: u64,
}

impl QueueStats {
    /// Summarises backlog samples (bytes); drops and bytes sent are left
    /// for the caller.
    pub fn from_samples(samples: &mut [u64]) -> QueueStats {
        samples.sort_unstable();
        let n = samples.len();
        QueueStats {
            samples: n,
            mean_bytes: if n > 0 {
                samples.iter().sum::<u64>() as f64 / n as f64
            } else {
                f64::NAN
            },
            p50_bytes: nearest_rank(samples, 0.5).unwrap_or(0),
            p99_bytes: nearest_rank(samples, 0.99).unwrap_or(0),
            max_bytes: samples.last().copied().unwrap_or(0),
            drops: 0,
            sent_bytes: 0,
        }
    }
}

/// Payload goodput in Mbit/s of `bytes` over `seconds`.
pub fn goodput_mbps(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 * 8.0 / seconds / 1e6
    } else {
        f64::NAN
    }
}

/// The emulated link and what SIRD derives from it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkInfo {
    /// Link rate (Mbit/s, Ethernet frames).
    pub rate_mbit: u64,
    /// MTU (bytes).
    pub mtu: u32,
    /// Round trip the configuration assumes (ns).
    pub rtt_ns: u64,
    /// BDP = rate × RTT (bytes), from `Config::apply_link`.
    pub bdp_bytes: u32,
    /// SIRD's global bucket B (bytes).
    pub bucket_bytes: u32,
    /// UnschT (bytes).
    pub unsched_threshold: u32,
    /// SThr when finite (bytes).
    pub sender_threshold: u32,
    /// Message bytes per full packet.
    pub payload_bytes: u32,
    /// Transmission time of a full frame (µs).
    pub frame_us: f64,
    /// Largest payload goodput of one link (Mbit/s): the rate times the
    /// payload share of a full frame.
    pub max_goodput_mbps: f64,
    /// Switch buffer per port (bytes).
    pub buffer_bytes: u64,
}

impl LinkInfo {
    /// Derives everything from the configuration `apply_link` sized.
    pub fn new(rate_mbit: u64, mtu: u32, rtt_ns: u64, buffer_bytes: u64) -> LinkInfo {
        let config = bench::link_config(rate_mbit, mtu, rtt_ns, 0.5);
        let core = &config.core;
        let frame = mtu as f64 + tc::ETHERNET_HEADER as f64;
        let payload = core.max_payload();
        LinkInfo {
            rate_mbit,
            mtu,
            rtt_ns,
            bdp_bytes: homa_core::Link {
                mtu,
                ..homa_core::Link::new(rate_mbit, rtt_ns)
            }
            .bdp_bytes(),
            bucket_bytes: core.sird.bucket,
            unsched_threshold: core.sird.unsched_threshold,
            sender_threshold: core.sird.sender_threshold,
            payload_bytes: payload,
            frame_us: frame * 8.0 / rate_mbit as f64,
            max_goodput_mbps: rate_mbit as f64 * payload as f64 / frame,
            buffer_bytes,
        }
    }

    /// Bytes of a full frame.
    pub fn frame_bytes(&self) -> f64 {
        self.mtu as f64 + tc::ETHERNET_HEADER as f64
    }
}

/// One incast run of one variant.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IncastRun {
    /// Variant name.
    pub variant: String,
    /// Repetition (1-based).
    pub repeat: usize,
    /// Probe round trips with the senders idle.
    pub unloaded: Quantiles,
    /// Probe round trips under the incast.
    pub loaded: Quantiles,
    /// CDF of the idle round trips: (µs, fraction).
    pub unloaded_cdf: Vec<(f64, f64)>,
    /// CDF of the loaded round trips: (µs, fraction).
    pub loaded_cdf: Vec<(f64, f64)>,
    /// Probes that failed.
    pub probe_errors: u64,
    /// The receiver's payload goodput (Mbit/s).
    pub goodput_mbps: f64,
    /// Each sender's goodput at the receiver (Mbit/s).
    pub sender_goodput_mbps: Vec<f64>,
    /// The switch queue towards the receiver.
    pub queue: QueueStats,
    /// Link throughput into the receiver in the window, from the switch
    /// counters (Mbit/s of frames, headers included).
    #[serde(default)]
    pub link_mbps: f64,
    /// Busy cores of the machine over the window.
    pub cpu_cores: f64,
    /// Cores the experiment's own processes used, on average over their
    /// life (the rest of `cpu_cores` is other work on the machine).
    #[serde(default)]
    pub node_cores: f64,
    /// Every endpoint's design, as it reported it.
    pub designs: Vec<String>,
    /// Whether every endpoint reported the variant's pacing and SThr.
    pub config_checked: bool,
    /// CE-marked packets received (no switch marks here: expect 0).
    pub ce_received: u64,
}

/// One congested-sender run of one variant.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CongestedRun {
    /// Variant name.
    pub variant: String,
    /// Repetition (1-based).
    pub repeat: usize,
    /// Goodput into each receiver (Mbit/s).
    pub receiver_goodput_mbps: Vec<f64>,
    /// Of that, from the congested sender.
    pub from_congested_mbps: Vec<f64>,
    /// Of that, from the receiver's own sender.
    pub from_other_mbps: Vec<f64>,
    /// Sum over the receivers (Mbit/s).
    pub aggregate_mbps: f64,
    /// Packets dropped at the receivers' switch ports.
    pub drops: u64,
    /// Largest switch backlog towards a receiver (bytes, sampled).
    pub max_backlog_bytes: u64,
    /// Busy cores of the machine over the window.
    pub cpu_cores: f64,
    /// Cores the experiment's own processes used (see [`IncastRun`]).
    #[serde(default)]
    pub node_cores: f64,
    /// Link throughput into each receiver from the switch counters
    /// (Mbit/s of frames, headers included).
    #[serde(default)]
    pub receiver_link_mbps: Vec<f64>,
    /// Every endpoint's design.
    pub designs: Vec<String>,
    /// Whether every endpoint reported the variant's pacing and SThr.
    pub config_checked: bool,
    /// RPC errors at the clients.
    pub errors: u64,
    /// DATA packets into receiver 1 by sender, and how many carried `csn`
    /// (counted on its switch port for part of the window).
    #[serde(default)]
    pub csn_into_first_receiver: BTreeMap<String, FlagCounts>,
}

/// Everything one experiment produced.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExperimentResult {
    /// "incast" or "congested".
    pub experiment: String,
    /// The command that produced it.
    pub command: String,
    /// The link.
    pub link: LinkInfo,
    /// Hosts in the testbed.
    pub hosts: usize,
    /// Measured seconds per run.
    pub seconds: f64,
    /// Seconds of load before the window.
    pub warmup: f64,
    /// Request size of the loaders (bytes).
    pub size: u64,
    /// Request size of the congested experiment's one-to-one senders.
    #[serde(default)]
    pub other_size: u64,
    /// Repetitions of each variant.
    pub repeats: usize,
    /// Variants, in order.
    pub variants: Vec<String>,
    /// Load average (1 min) before the first run.
    pub load_before: f64,
    /// Incast runs.
    pub incast: Vec<IncastRun>,
    /// Congested-sender runs.
    pub congested: Vec<CongestedRun>,
    /// Whether every planned run finished.
    pub complete: bool,
}

impl ExperimentResult {
    /// Whether `other` was produced with the same settings (so its runs
    /// can be resumed into this one).
    pub fn same_settings(&self, other: &ExperimentResult) -> bool {
        self.experiment == other.experiment
            && self.link == other.link
            && self.hosts == other.hosts
            && self.seconds == other.seconds
            && self.warmup == other.warmup
            && self.size == other.size
            && self.other_size == other.other_size
    }

    fn has_run(&self, variant: Variant, repeat: usize) -> bool {
        self.incast
            .iter()
            .any(|r| r.variant == variant.name() && r.repeat == repeat)
            || self
                .congested
                .iter()
                .any(|r| r.variant == variant.name() && r.repeat == repeat)
    }
}

/// Options of `testbed sird`.
#[derive(clap::Args, Debug, Clone)]
pub struct SirdArgs {
    /// Variants (default: incast sird,sird-nopace,homa; congested
    /// sthr-inf,sthr-half).
    #[arg(long, value_delimiter = ',')]
    pub variants: Vec<String>,
    /// Link rate (Mbit/s).
    #[arg(long, default_value_t = 400)]
    pub rate_mbit: u64,
    /// MTU (bytes).
    #[arg(long, default_value_t = 9000)]
    pub mtu: u32,
    /// Round trip the configuration assumes (µs); default: 50 µs of
    /// software plus two frame times, as `testbed bench`.
    #[arg(long)]
    pub rtt_us: Option<f64>,
    /// Switch buffer per port (kB).
    #[arg(long, default_value_t = 1000)]
    pub buffer_kb: u64,
    /// Measured seconds per run.
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Seconds of load before the window.
    #[arg(long, default_value_t = 2.0)]
    pub warmup: f64,
    /// Seconds of idle probing before each incast run.
    #[arg(long, default_value_t = 3.0)]
    pub unloaded_seconds: f64,
    /// Runs of each variant (interleaved).
    #[arg(long, default_value_t = 2)]
    pub repeats: usize,
    /// Request size of the loaders (bytes).
    #[arg(long, default_value_t = MESSAGE_BYTES)]
    pub size: u64,
    /// Request size of the congested experiment's one-to-one senders
    /// (bytes). Larger than --size, so that the receivers' SRPT prefers
    /// the congested sender's messages, as in the paper, where its
    /// messages had started first.
    #[arg(long, default_value_t = 8 * MESSAGE_BYTES)]
    pub other_size: u64,
    /// Incast senders.
    #[arg(long, default_value_t = 6)]
    pub senders: usize,
    /// Receivers of the congested sender.
    #[arg(long, default_value_t = 4)]
    pub receivers: usize,
    /// How often the switch backlog is sampled (ms).
    #[arg(long, default_value_t = 50)]
    pub sample_ms: u64,
    /// Overrides of the generated configuration (`key=value`, dotted
    /// TOML keys), applied to every variant.
    #[arg(long = "homa-set", value_delimiter = ',')]
    pub homa_set: Vec<String>,
    /// Replace existing results.
    #[arg(long)]
    pub force: bool,
    /// Directory of the report: writes NAME.md and NAME/*.
    #[arg(long, default_value = "docs/results")]
    pub out: PathBuf,
    /// Base name of the report files.
    #[arg(long, default_value = "sird")]
    pub name: String,
}

impl SirdArgs {
    /// Checks the options; returns the variants to run.
    pub fn validate(&self, experiment: Experiment) -> Result<Vec<Variant>> {
        if !(self.seconds.is_finite() && self.seconds > 0.0) {
            bail!("--seconds must be positive, got {}", self.seconds);
        }
        if !(self.warmup.is_finite() && self.warmup >= 0.0) {
            bail!("--warmup must not be negative, got {}", self.warmup);
        }
        if !(self.unloaded_seconds.is_finite() && self.unloaded_seconds > 0.0) {
            bail!("--unloaded-seconds must be positive");
        }
        if let Some(rtt) = self.rtt_us {
            if !(rtt.is_finite() && rtt >= 1.0) {
                bail!("--rtt-us must be at least 1, got {rtt}");
            }
        }
        if self.repeats == 0 {
            bail!("--repeats must be at least 1");
        }
        for (flag, v) in [("--size", self.size), ("--other-size", self.other_size)] {
            if !(8..=16_000_000).contains(&v) {
                bail!("{flag} must be 8..=16000000 bytes, got {v}");
            }
        }
        if self.sample_ms == 0 {
            bail!("--sample-ms must be at least 1");
        }
        if self.name.is_empty() || self.name.contains('/') {
            bail!("--name must be a file name, got {:?}", self.name);
        }
        let hosts = self.hosts(experiment);
        if experiment == Experiment::Incast && self.senders == 0 {
            bail!("--senders must be at least 1");
        }
        if experiment == Experiment::Congested && self.receivers == 0 {
            bail!("--receivers must be at least 1");
        }
        if hosts > netns::MAX_HOSTS {
            bail!(
                "{} needs {hosts} hosts; the testbed has at most {}",
                experiment.name(),
                netns::MAX_HOSTS
            );
        }
        let variants = if self.variants.is_empty() {
            experiment.default_variants().to_vec()
        } else {
            self.variants
                .iter()
                .map(|v| Variant::parse(v))
                .collect::<Result<Vec<_>>>()?
        };
        for v in &variants {
            if !v.fits(experiment) {
                bail!(
                    "variant {} is not one of {}'s ({})",
                    v.name(),
                    experiment.name(),
                    experiment
                        .default_variants()
                        .iter()
                        .map(|v| v.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
        }
        self.spec("x", experiment).validate()?;
        bench::apply_overrides(&homa::Config::default(), &self.homa_set)?;
        Ok(variants)
    }

    /// Hosts the experiment needs.
    pub fn hosts(&self, experiment: Experiment) -> usize {
        match experiment {
            Experiment::Incast => self.senders + 2,
            Experiment::Congested => 1 + 2 * self.receivers,
        }
    }

    /// The testbed: one FIFO per switch port.
    pub fn spec(&self, prefix: &str, experiment: Experiment) -> TestbedSpec {
        TestbedSpec {
            prefix: prefix.to_string(),
            hosts: self.hosts(experiment),
            rate_mbit: self.rate_mbit,
            buffer_bytes: self.buffer_kb.saturating_mul(1000),
            host_queue_bytes: netns::DEFAULT_HOST_QUEUE_BYTES,
            mtu: self.mtu,
            switch_levels: 1,
        }
    }

    /// The round trip (ns) the configuration assumes.
    pub fn rtt_ns(&self) -> u64 {
        self.rtt_us.map_or_else(
            || bench::auto_rtt_ns(self.rate_mbit, self.mtu),
            |us| (us * 1e3) as u64,
        )
    }

    /// The runtime configuration of `variant`.
    pub fn config(&self, variant: Variant) -> Result<homa::Config> {
        let mut c = bench::link_config(self.rate_mbit, self.mtu, self.rtt_ns(), 0.5);
        c.core.max_message_size = c
            .core
            .max_message_size
            .max(self.size.max(self.other_size) as u32);
        variant.configure(&mut c);
        bench::apply_overrides(&c, &self.homa_set)
    }

    fn result_path(&self, experiment: Experiment, partial: bool) -> PathBuf {
        let suffix = if partial { ".partial" } else { "" };
        self.out
            .join(&self.name)
            .join(format!("{}{suffix}.json", experiment.name()))
    }
}

/// Refuses to run when `experiment`'s results exist and `--force` was not
/// given (committed results are replaced only on request).
pub fn check_output(experiment: Experiment, args: &SirdArgs) -> Result<()> {
    let path = args.result_path(experiment, false);
    if path.exists() && !args.force {
        bail!(
            "{} exists; pass --force to replace it (or --out/--name elsewhere)",
            path.display()
        );
    }
    Ok(())
}

/// Runs `experiment` on a testbed it builds (with `prefix`) and writes the
/// results and the report. The caller removes the testbed.
pub fn run(experiment: Experiment, args: &SirdArgs, prefix: &str) -> Result<()> {
    let variants = args.validate(experiment)?;
    let final_path = args.result_path(experiment, false);
    let partial_path = args.result_path(experiment, true);
    check_output(experiment, args)?;
    let spec = args.spec(prefix, experiment);
    let link = LinkInfo::new(args.rate_mbit, args.mtu, args.rtt_ns(), spec.buffer_bytes);
    let mut result = ExperimentResult {
        experiment: experiment.name().into(),
        command: bench::command_line(),
        link,
        hosts: spec.hosts,
        seconds: args.seconds,
        warmup: args.warmup,
        size: args.size,
        other_size: if experiment == Experiment::Congested {
            args.other_size
        } else {
            0
        },
        repeats: args.repeats,
        variants: variants.iter().map(|v| v.name().to_string()).collect(),
        load_before: load_average(),
        ..Default::default()
    };
    if let Some(old) = read_result(&partial_path)? {
        if result.same_settings(&old) && !args.force {
            eprintln!(
                "testbed: resuming from {} ({} finished runs)",
                partial_path.display(),
                old.incast.len() + old.congested.len()
            );
            result.incast = old.incast;
            result.congested = old.congested;
        }
    }
    eprintln!(
        "testbed: sird {}: {} hosts, {} Mbit/s, MTU {}, RTT {:.0} µs, BDP {} B, B {} B, \
         one FIFO per switch port of {} kB; load average {:.2}",
        experiment.name(),
        spec.hosts,
        link.rate_mbit,
        link.mtu,
        link.rtt_ns as f64 / 1e3,
        link.bdp_bytes,
        link.bucket_bytes,
        args.buffer_kb,
        result.load_before
    );
    netns::up(&spec)?;
    let exe = std::env::current_exe().context("cannot find the testbed executable")?;
    let work = std::env::temp_dir().join(format!("homa-testbed-{prefix}"));
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(&work).with_context(|| format!("cannot create {}", work.display()))?;
    let ctx = Ctx {
        args,
        spec: &spec,
        exe: &exe,
        work: &work,
    };
    let plan: Vec<(usize, Variant)> = (1..=args.repeats)
        .flat_map(|r| variants.iter().map(move |&v| (r, v)))
        .collect();
    let per_run_s = args.warmup
        + args.seconds
        + LINGER_S
        + STARTUP_S
        + 1.0
        + if experiment == Experiment::Incast {
            args.unloaded_seconds + LINGER_S + STARTUP_S + 1.0
        } else {
            0.0
        };
    let todo: Vec<&(usize, Variant)> = plan
        .iter()
        .filter(|(r, v)| !result.has_run(*v, *r))
        .collect();
    let started = Instant::now();
    for (i, &&(repeat, variant)) in todo.iter().enumerate() {
        let eta = if i == 0 {
            per_run_s * todo.len() as f64
        } else {
            started.elapsed().as_secs_f64() / i as f64 * (todo.len() - i) as f64
        };
        eprintln!(
            "testbed: [{}/{}] {} {} run {repeat}/{}: ~{:.0} s; ETA {}",
            i + 1,
            todo.len(),
            experiment.name(),
            variant.label(),
            args.repeats,
            per_run_s,
            fmt_duration(eta)
        );
        let config = ctx.write_config(variant)?;
        match experiment {
            Experiment::Incast => {
                let run = ctx.incast(variant, repeat, &config)?;
                eprintln!(
                    "testbed:   probe p50/p99 {:.0}/{:.0} µs (idle {:.0}/{:.0}), goodput {:.0} \
                     Mbit/s, queue p99 {:.1} kB, drops {}, CPU {:.2} cores",
                    run.loaded.p50_us,
                    run.loaded.p99_us,
                    run.unloaded.p50_us,
                    run.unloaded.p99_us,
                    run.goodput_mbps,
                    run.queue.p99_bytes as f64 / 1e3,
                    run.queue.drops,
                    run.cpu_cores
                );
                result.incast.push(run);
            }
            Experiment::Congested => {
                let run = ctx.congested(variant, repeat, &config)?;
                eprintln!(
                    "testbed:   aggregate {:.0} Mbit/s of {:.0} ({:.0}%), drops {}, CPU {:.2} \
                     cores",
                    run.aggregate_mbps,
                    link.max_goodput_mbps * args.receivers as f64,
                    100.0 * run.aggregate_mbps / (link.max_goodput_mbps * args.receivers as f64),
                    run.drops,
                    run.cpu_cores
                );
                result.congested.push(run);
            }
        }
        write_json(&partial_path, &result)?;
    }
    result.complete = true;
    // Runs in plan order, whatever order they were resumed in.
    let order = |v: &str, r: usize| {
        plan.iter()
            .position(|&(pr, pv)| pv.name() == v && pr == r)
            .unwrap_or(usize::MAX)
    };
    result.incast.sort_by_key(|r| order(&r.variant, r.repeat));
    result
        .congested
        .sort_by_key(|r| order(&r.variant, r.repeat));
    write_json(&final_path, &result)?;
    let _ = fs::remove_file(&partial_path);
    render(&args.out, &args.name)
}

fn fmt_duration(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    format!("{}m{:02}s", s / 60, s % 60)
}

fn load_average() -> f64 {
    fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

fn write_json(path: &Path, result: &ExperimentResult) -> Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let tmp = path.with_extension("tmp");
    fs::write(&tmp, serde_json::to_string_pretty(result)?)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))
}

fn read_result(path: &Path) -> Result<Option<ExperimentResult>> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(serde_json::from_str(&text).with_context(|| {
            format!("{} is not a `testbed sird` result", path.display())
        })?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// What the runs of one experiment share.
struct Ctx<'a> {
    args: &'a SirdArgs,
    spec: &'a TestbedSpec,
    exe: &'a Path,
    work: &'a Path,
}

/// What a phase watches besides its nodes.
#[derive(Clone, Copy, Default)]
struct Taps<'a> {
    /// Switch ports whose queues are sampled.
    queues: &'a [usize],
    /// A switch port whose DATA packets are counted by sender.
    sniff: Option<usize>,
}

/// The nodes of one phase, their options and what they reported.
struct Phase {
    args: Vec<NodeArgs>,
    outcomes: Vec<NodeOutcome>,
    cpu_cores: f64,
    node_cores: f64,
    queues: Vec<PortSamples>,
    /// `csn` counts on the sniffed port, if one was.
    csn: BTreeMap<String, FlagCounts>,
}

impl Ctx<'_> {
    fn addr(&self, host: usize) -> SocketAddr {
        SocketAddr::new(self.spec.host_ip(host).into(), PORT)
    }

    fn write_config(&self, variant: Variant) -> Result<PathBuf> {
        let config = self.args.config(variant)?;
        let path = self.work.join(format!("{}.toml", variant.name()));
        fs::write(&path, toml::to_string(&config)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(path)
    }

    /// Runs `roles` for `seconds` after `warmup`, sampling the backlog of
    /// the switch ports towards `watch`.
    fn phase(
        &self,
        tag: &str,
        roles: &[Role],
        config: &Path,
        warmup: f64,
        seconds: f64,
        taps: Taps<'_>,
    ) -> Result<Phase> {
        let (watch, sniff) = (taps.queues, taps.sniff);
        let start_unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as u64
            + (STARTUP_S * 1e3) as u64;
        let argsets: Vec<NodeArgs> = roles
            .iter()
            .map(|r| NodeArgs {
                me: self.addr(r.host),
                config: config.to_path_buf(),
                targets: r.targets.iter().map(|&t| self.addr(t)).collect(),
                size: r.size.max(1),
                record_rtts: r.probe,
                start_unix_ms,
                warmup,
                seconds,
                out: self.work.join(format!("{tag}-h{}.json", r.host)),
            })
            .collect();
        for a in &argsets {
            let _ = fs::remove_file(&a.out);
        }
        let sampler = QueueSampler::start(
            self.spec,
            watch,
            Duration::from_millis(self.args.sample_ms),
            Instant::now() + Duration::from_secs_f64(STARTUP_S + warmup),
            Duration::from_secs_f64(seconds),
        );
        let launched = Instant::now();
        let mut nodes = Vec::new();
        let sniff_out = self.work.join(format!("{tag}-sniff.json"));
        let _ = fs::remove_file(&sniff_out);
        if let Some(port) = sniff {
            // The middle of the window, at most 3 s (it costs CPU).
            let len = (seconds / 2.0).min(3.0);
            let argv = vec![
                "sird-sniff".to_string(),
                "--dev".into(),
                format!("p{port}"),
                "--delay".into(),
                (STARTUP_S + warmup + (seconds - len) / 2.0).to_string(),
                "--seconds".into(),
                len.to_string(),
                "--out".into(),
                sniff_out.display().to_string(),
            ];
            let log_path = self.work.join(format!("{tag}-sniff.log"));
            let log = fs::File::create(&log_path)?;
            let mut cmd = netns::command_in(&self.spec.switch_ns(), self.exe.as_os_str(), &argv);
            cmd.stdin(Stdio::null())
                .stdout(log.try_clone()?)
                .stderr(log)
                .env("RUST_BACKTRACE", "0");
            let child = cmd.spawn().context("cannot start the packet counter")?;
            cleanup::register_child(child.id());
            nodes.push(Node {
                child,
                host: usize::MAX,
                log: log_path,
            });
        }
        for (r, a) in roles.iter().zip(&argsets) {
            match self.spawn(r.host, a, tag) {
                Ok(n) => nodes.push(n),
                Err(e) => {
                    let _ = wait_all(nodes, Duration::ZERO);
                    return Err(e);
                }
            }
        }
        let cpu = CpuWindow::start(
            launched + Duration::from_secs_f64(STARTUP_S + warmup),
            Duration::from_secs_f64(seconds),
        );
        let limit = Duration::from_secs_f64(STARTUP_S + warmup + seconds + LINGER_S + 30.0);
        let outcome = wait_all(nodes, limit);
        let lifetime_s = launched.elapsed().as_secs_f64();
        let queues = sampler.stop();
        let cpu_cores = cpu.finish();
        outcome?;
        let outcomes = argsets
            .iter()
            .map(|a| {
                let text = fs::read_to_string(&a.out)
                    .with_context(|| format!("cannot read {}", a.out.display()))?;
                serde_json::from_str(&text).with_context(|| format!("bad {}", a.out.display()))
            })
            .collect::<Result<Vec<NodeOutcome>>>()?;
        let node_cores = outcomes.iter().map(|o| o.cpu_s).sum::<f64>() / lifetime_s;
        let csn = if sniff.is_some() {
            sird_sniff::read(&sniff_out)?
        } else {
            BTreeMap::new()
        };
        Ok(Phase {
            args: argsets,
            outcomes,
            cpu_cores,
            node_cores,
            queues,
            csn,
        })
    }

    fn spawn(&self, host: usize, args: &NodeArgs, tag: &str) -> Result<Node> {
        let log_path = self.work.join(format!("{tag}-h{host}.log"));
        let log = fs::File::create(&log_path)?;
        let mut argv = vec!["sird-node".to_string()];
        argv.extend(args.to_args());
        let mut cmd = netns::command_in(&self.spec.host_ns(host), self.exe.as_os_str(), &argv);
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

    fn incast(&self, variant: Variant, repeat: usize, config: &Path) -> Result<IncastRun> {
        let a = self.args;
        let plan = incast_plan(a.senders, a.size);
        let receiver = 0;
        let prober = a.senders + 1;
        let tag = format!("incast-{}-{repeat}", variant.name());
        // Idle: the prober and the receiver only.
        let idle_roles: Vec<Role> = plan
            .iter()
            .filter(|r| r.host == receiver || r.host == prober)
            .cloned()
            .collect();
        let idle = self.phase(
            &format!("{tag}-idle"),
            &idle_roles,
            config,
            0.5,
            a.unloaded_seconds,
            Taps::default(),
        )?;
        let mut idle_rtts = probe_rtts(&idle);
        let unloaded = quantiles(&mut idle_rtts);
        let before = tc::switch_port_stats(self.spec)?;
        let loaded_phase = self.phase(
            &tag,
            &plan,
            config,
            a.warmup,
            a.seconds,
            Taps {
                queues: &[receiver],
                sniff: None,
            },
        )?;
        let after = tc::switch_port_stats(self.spec)?;
        let mut rtts = probe_rtts(&loaded_phase);
        let loaded = quantiles(&mut rtts);
        if loaded.count == 0 {
            bail!("{tag}: no probe completed; logs in {}", self.work.display());
        }
        let rx = &loaded_phase.outcomes[receiver];
        let window = rx.window_s;
        let sender_goodput_mbps = (1..=a.senders)
            .map(|h| {
                let ip = self.spec.host_ip(h).to_string();
                goodput_mbps(
                    rx.served_bytes_by_peer.get(&ip).copied().unwrap_or(0),
                    window,
                )
            })
            .collect();
        let watched = loaded_phase
            .queues
            .iter()
            .find(|p| p.port == receiver)
            .cloned()
            .unwrap_or_default();
        let mut samples = watched.backlog.clone();
        let mut queue = QueueStats::from_samples(&mut samples);
        let port = tc::delta(&before, &after)
            .into_iter()
            .filter(|c| c.port == receiver)
            .fold((0, 0), |(d, b), c| (d + c.drops, b + c.bytes));
        queue.drops = port.0;
        queue.sent_bytes = port.1;
        let all = idle.outcomes.iter().chain(&loaded_phase.outcomes);
        Ok(IncastRun {
            variant: variant.name().into(),
            repeat,
            unloaded,
            loaded,
            unloaded_cdf: cdf_points(&idle_rtts, 200),
            loaded_cdf: cdf_points(&rtts, 200),
            probe_errors: loaded_phase.outcomes[prober]
                .clients
                .iter()
                .map(|c| c.errors)
                .sum(),
            goodput_mbps: goodput_mbps(rx.served_bytes, window),
            sender_goodput_mbps,
            queue,
            link_mbps: watched.rate_mbps(),
            cpu_cores: loaded_phase.cpu_cores,
            node_cores: loaded_phase.node_cores,
            designs: loaded_phase
                .outcomes
                .iter()
                .map(|o| o.design.clone())
                .collect(),
            config_checked: all.clone().all(|o| config_matches(variant, o)),
            ce_received: all.map(|o| o.ce_received).sum(),
        })
    }

    fn congested(&self, variant: Variant, repeat: usize, config: &Path) -> Result<CongestedRun> {
        let a = self.args;
        let plan = congested_plan(a.receivers, a.size, a.other_size);
        let tag = format!("congested-{}-{repeat}", variant.name());
        let receivers: Vec<usize> = (1..=a.receivers).collect();
        let before = tc::switch_port_stats(self.spec)?;
        let phase = self.phase(
            &tag,
            &plan,
            config,
            a.warmup,
            a.seconds,
            Taps {
                queues: &receivers,
                sniff: Some(1),
            },
        )?;
        let after = tc::switch_port_stats(self.spec)?;
        let congested_ip = self.spec.host_ip(0).to_string();
        let (mut total, mut from_c, mut from_o) = (Vec::new(), Vec::new(), Vec::new());
        for &r in &receivers {
            let o = &phase.outcomes[r];
            let other_ip = self.spec.host_ip(a.receivers + r).to_string();
            let get = |ip: &str| o.served_bytes_by_peer.get(ip).copied().unwrap_or(0);
            total.push(goodput_mbps(o.served_bytes, o.window_s));
            from_c.push(goodput_mbps(get(&congested_ip), o.window_s));
            from_o.push(goodput_mbps(get(&other_ip), o.window_s));
        }
        let ports = tc::delta(&before, &after);
        let drops = ports
            .iter()
            .filter(|c| receivers.contains(&c.port))
            .map(|c| c.drops)
            .sum();
        let receiver_link_mbps = phase.queues.iter().map(|p| p.rate_mbps()).collect();
        Ok(CongestedRun {
            variant: variant.name().into(),
            repeat,
            aggregate_mbps: total.iter().sum(),
            receiver_goodput_mbps: total,
            from_congested_mbps: from_c,
            from_other_mbps: from_o,
            drops,
            max_backlog_bytes: phase
                .queues
                .iter()
                .flat_map(|p| p.backlog.iter().copied())
                .max()
                .unwrap_or(0),
            cpu_cores: phase.cpu_cores,
            node_cores: phase.node_cores,
            receiver_link_mbps,
            designs: phase.outcomes.iter().map(|o| o.design.clone()).collect(),
            config_checked: phase.outcomes.iter().all(|o| config_matches(variant, o)),
            csn_into_first_receiver: phase.csn.clone(),
            errors: phase
                .outcomes
                .iter()
                .flat_map(|o| &o.clients)
                .map(|c| c.errors)
                .sum(),
        })
    }
}

/// Whether an endpoint ran `variant`'s configuration.
pub fn config_matches(variant: Variant, o: &NodeOutcome) -> bool {
    match variant {
        Variant::Homa => o.design == "homa",
        Variant::SirdPaced | Variant::SirdSthrHalf => {
            o.design == "sird" && o.pace_credit && o.sender_threshold != u32::MAX
        }
        Variant::SirdUnpaced => o.design == "sird" && !o.pace_credit,
        Variant::SirdSthrInf => o.design == "sird" && o.sender_threshold == u32::MAX,
    }
}

fn probe_rtts(phase: &Phase) -> Vec<u64> {
    phase
        .args
        .iter()
        .zip(&phase.outcomes)
        .filter(|(a, _)| a.record_rtts)
        .flat_map(|(_, o)| o.clients.iter().flat_map(|c| c.rtts_ns.iter().copied()))
        .collect()
}

/// What the sampler saw at one switch port in the window.
#[derive(Debug, Clone, Default)]
struct PortSamples {
    port: usize,
    /// Backlog samples (bytes).
    backlog: Vec<u64>,
    /// (time, bytes sent so far) of the first and the latest sample.
    first: Option<(Instant, u64)>,
    last: Option<(Instant, u64)>,
}

impl PortSamples {
    /// Mbit/s the port sent between the first and the last sample.
    fn rate_mbps(&self) -> f64 {
        match (self.first, self.last) {
            (Some((t0, b0)), Some((t1, b1))) if t1 > t0 => {
                goodput_mbps(b1.saturating_sub(b0), t1.duration_since(t0).as_secs_f64())
            }
            _ => f64::NAN,
        }
    }
}

/// Samples the backlog and byte counter of some switch ports in a
/// background thread within a window.
struct QueueSampler {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<Vec<PortSamples>>,
}

impl QueueSampler {
    fn start(
        spec: &TestbedSpec,
        ports: &[usize],
        every: Duration,
        from: Instant,
        len: Duration,
    ) -> QueueSampler {
        let (stop, stopped) = mpsc::channel::<()>();
        let ns = spec.switch_ns();
        let ports = ports.to_vec();
        let thread = std::thread::spawn(move || {
            let mut out: Vec<PortSamples> = ports
                .iter()
                .map(|&port| PortSamples {
                    port,
                    ..Default::default()
                })
                .collect();
            if ports.is_empty() {
                return out;
            }
            if stopped
                .recv_timeout(from.saturating_duration_since(Instant::now()))
                .is_ok()
            {
                return out;
            }
            let end = from + len;
            while Instant::now() < end {
                let t = Instant::now();
                for p in out.iter_mut() {
                    if let Some((backlog, bytes)) = port_counters(&ns, p.port) {
                        let now = Instant::now();
                        p.backlog.push(backlog);
                        p.first.get_or_insert((now, bytes));
                        p.last = Some((now, bytes));
                    }
                }
                match stopped.recv_timeout(every.saturating_sub(t.elapsed())) {
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    _ => break,
                }
            }
            out
        });
        QueueSampler { stop, thread }
    }

    fn stop(self) -> Vec<PortSamples> {
        let _ = self.stop.send(());
        self.thread.join().unwrap_or_default()
    }
}

/// (bytes queued now, bytes sent so far) at switch port `p{port}`, over
/// all its leaves.
fn port_counters(switch_ns: &str, port: usize) -> Option<(u64, u64)> {
    let out = Command::new("tc")
        .args(["-n", switch_ns, "-s", "-j", "qdisc", "show", "dev"])
        .arg(format!("p{port}"))
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let qdiscs = tc::parse_qdisc_json(&String::from_utf8_lossy(&out.stdout)).ok()?;
    let leaves = qdiscs.iter().filter(|q| q.kind == "bfifo");
    Some(leaves.fold((0, 0), |(q, b), l| (q + l.backlog_bytes, b + l.bytes)))
}

/// Busy cores of the whole machine over a window, from `/proc/stat`.
struct CpuWindow(JoinHandle<Option<f64>>);

impl CpuWindow {
    fn start(from: Instant, len: Duration) -> CpuWindow {
        CpuWindow(std::thread::spawn(move || {
            std::thread::sleep(from.saturating_duration_since(Instant::now()));
            let a = bench::proc_stat()?;
            let t = Instant::now();
            std::thread::sleep(len);
            let b = bench::proc_stat()?;
            Some((b.0 - a.0) as f64 / 100.0 / t.elapsed().as_secs_f64())
        }))
    }

    fn finish(self) -> f64 {
        self.0.join().ok().flatten().unwrap_or(f64::NAN)
    }
}

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

/// Added p99 latency (µs) of a run over its idle p99, and the number of
/// full frames that takes at the link rate.
pub fn added_p99(run: &IncastRun, link: &LinkInfo) -> (f64, f64) {
    let added = run.loaded.p99_us - run.unloaded.p99_us;
    (added, added / link.frame_us)
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
         in `sird.rs` (`markdown`). Data: `",
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
    let mut s = String::from("## 6-to-1 incast: probe round trips\n\n");
    s.push_str(&format!("Command: `{}`\n\n", r.command));
    if !r.complete {
        s.push_str("**Partial: not every planned run finished.**\n\n");
    }
    s.push_str(&link_md(r));
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
                format!("{:.2} / {:.2}", x.cpu_cores, x.node_cores),
            ]
        })
        .collect();
    s.push_str(&markdown_table(
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
        &[
            Align::Left,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
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
    let mut s = String::from("## Congested sender\n\n");
    s.push_str(&format!("Command: `{}`\n\n", r.command));
    if !r.complete {
        s.push_str("**Partial: not every planned run finished.**\n\n");
    }
    s.push_str(&link_md(r));
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
                format!("{:.2} / {:.2}", x.cpu_cores, x.node_cores),
            ]
        })
        .collect();
    s.push_str(&markdown_table(
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
        &[
            Align::Left,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incast_plan_has_six_senders_a_prober_and_a_receiver() {
        let p = incast_plan(6, 1_000_000);
        assert_eq!(p.len(), 8);
        assert!(p[0].targets.is_empty());
        for r in &p[1..7] {
            assert_eq!(
                (r.targets.as_slice(), r.size, r.probe),
                (&[0][..], 1_000_000, false)
            );
        }
        assert_eq!((p[7].host, p[7].size, p[7].probe), (7, 8, true));
        assert_eq!(p[7].targets, vec![0]);
    }

    #[test]
    fn congested_plan_pairs_each_receiver_with_one_sender() {
        let p = congested_plan(4, 1_000_000, 8_000_000);
        assert_eq!(p.len(), 9);
        assert_eq!(p[0].targets, vec![1, 2, 3, 4]);
        assert_eq!(p[0].size, 1_000_000);
        for r in 1..=4 {
            assert!(p[r].targets.is_empty());
            assert_eq!(p[4 + r].host, 4 + r);
            assert_eq!(p[4 + r].targets, vec![r]);
            assert_eq!(p[4 + r].size, 8_000_000);
        }
        // Every receiver is loaded by exactly two hosts.
        for r in 1..=4 {
            let n = p.iter().filter(|x| x.targets.contains(&r)).count();
            assert_eq!(n, 2);
        }
    }

    #[test]
    fn quantiles_use_nearest_rank() {
        let mut v: Vec<u64> = (1..=1000).rev().map(|x| x * 1000).collect();
        let q = quantiles(&mut v);
        assert_eq!(q.count, 1000);
        assert_eq!(q.p50_us, 500.0);
        assert_eq!(q.p90_us, 900.0);
        assert_eq!(q.p99_us, 990.0);
        assert_eq!(q.p999_us, 999.0);
        assert_eq!(q.max_us, 1000.0);
        let e = quantiles(&mut []);
        assert_eq!(e.count, 0);
        assert!(e.p99_us.is_nan());
    }

    #[test]
    fn cdf_points_rise_and_reach_one() {
        let v: Vec<u64> = (1..=10_000).map(|x| x * 10).collect();
        let c = cdf_points(&v, 100);
        assert!(c.len() > 50 && c.len() <= 101);
        assert!(c.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
        assert_eq!(c.last().unwrap(), &(100.0, 1.0));
        assert!(cdf_points(&[], 100).is_empty());
    }

    #[test]
    fn goodput_and_queue_statistics() {
        assert_eq!(goodput_mbps(125_000_000, 10.0), 100.0);
        assert!(goodput_mbps(1, 0.0).is_nan());
        let mut s = vec![0, 10, 20, 30, 40];
        let q = QueueStats::from_samples(&mut s);
        assert_eq!((q.samples, q.p50_bytes, q.max_bytes), (5, 20, 40));
        assert_eq!(q.mean_bytes, 20.0);
    }

    #[test]
    fn link_info_follows_apply_link() {
        let l = LinkInfo::new(400, 9000, 410_560, 1_000_000);
        // 400 Mbit/s × 410.56 µs = 20,528 B.
        assert_eq!(l.bdp_bytes, 20_528);
        assert_eq!(l.bucket_bytes, 20_528 + 10_264);
        assert_eq!(l.sender_threshold, 10_264);
        assert_eq!(l.unsched_threshold, 20_528);
        assert!((l.frame_us - 180.28).abs() < 1e-9);
        assert!(l.max_goodput_mbps < 400.0 && l.max_goodput_mbps > 390.0);
    }

    #[test]
    fn variants_set_design_pacing_and_threshold() {
        let a = args();
        let c = a.config(Variant::SirdSthrInf).unwrap();
        assert_eq!(c.core.design, homa_core::Design::Sird);
        assert_eq!(c.core.sird.sender_threshold, u32::MAX);
        assert!(c.core.sird.pace_credit && !c.core.sird.priorities);
        assert_eq!(c.core.num_priorities, 1);
        let c = a.config(Variant::SirdUnpaced).unwrap();
        assert!(!c.core.sird.pace_credit);
        assert_eq!(
            c.core.sird.sender_threshold,
            c.core.sird.unsched_threshold / 2
        );
        let c = a.config(Variant::Homa).unwrap();
        assert_eq!(c.core.design, homa_core::Design::Homa);
        assert!(c.core.max_message_size >= 1_000_000);
        // And the check of what the endpoints report agrees.
        let o = |design: &str, pace: bool, sthr: u32| NodeOutcome {
            design: design.into(),
            pace_credit: pace,
            sender_threshold: sthr,
            ..Default::default()
        };
        assert!(config_matches(
            Variant::SirdSthrInf,
            &o("sird", true, u32::MAX)
        ));
        assert!(!config_matches(
            Variant::SirdSthrHalf,
            &o("sird", true, u32::MAX)
        ));
        assert!(!config_matches(Variant::SirdPaced, &o("homa", true, 5)));
        assert!(config_matches(Variant::SirdUnpaced, &o("sird", false, 5)));
    }

    fn args() -> SirdArgs {
        SirdArgs {
            variants: vec![],
            rate_mbit: 400,
            mtu: 9000,
            rtt_us: None,
            buffer_kb: 1000,
            seconds: 1.0,
            warmup: 0.5,
            unloaded_seconds: 1.0,
            repeats: 1,
            size: MESSAGE_BYTES,
            other_size: 8 * MESSAGE_BYTES,
            senders: 6,
            receivers: 4,
            sample_ms: 50,
            homa_set: vec![],
            force: false,
            out: "x".into(),
            name: "sird".into(),
        }
    }

    #[test]
    fn validation_refuses_bad_options() {
        let mut a = args();
        assert_eq!(a.validate(Experiment::Incast).unwrap().len(), 3);
        assert_eq!(a.hosts(Experiment::Incast), 8);
        assert_eq!(a.hosts(Experiment::Congested), 9);
        assert_eq!(a.spec("p", Experiment::Incast).switch_levels, 1);
        a.variants = vec!["sthr-inf".into()];
        let e = a.validate(Experiment::Incast).unwrap_err().to_string();
        assert!(e.contains("not one of incast"), "{e}");
        a.variants = vec!["tcp".into()];
        assert!(a.validate(Experiment::Congested).is_err());
        a.variants = vec![];
        a.senders = 20;
        assert!(a.validate(Experiment::Incast).is_err());
        a.senders = 6;
        a.seconds = 0.0;
        assert!(a.validate(Experiment::Incast).is_err());
    }

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
