//! What the experiments measure: latency quantiles, queue and goodput
//! statistics, the link's derived numbers and the result records.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use anyhow::{Context, Result};
use homa_measure::quantile::nearest_rank;
use serde::{Deserialize, Deserializer, Serialize};

use super::Variant;
use crate::bench;
use crate::sird_sniff::FlagCounts;
use crate::tc;

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
    #[serde(deserialize_with = "f64_or_nan")]
    pub cpu_cores: f64,
    /// Cores the experiment's own processes used, on average over their
    /// life (the rest of `cpu_cores` is other work on the machine).
    #[serde(default)]
    #[serde(deserialize_with = "f64_or_nan")]
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
    #[serde(deserialize_with = "f64_or_nan")]
    pub cpu_cores: f64,
    /// Cores the experiment's own processes used (see [`IncastRun`]).
    #[serde(default)]
    #[serde(deserialize_with = "f64_or_nan")]
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

    pub(super) fn has_run(&self, variant: Variant, repeat: usize) -> bool {
        self.incast
            .iter()
            .any(|r| r.variant == variant.name() && r.repeat == repeat)
            || self
                .congested
                .iter()
                .any(|r| r.variant == variant.name() && r.repeat == repeat)
    }
}

/// Added p99 latency (µs) of a run over its idle p99, and the number of
/// full frames that takes at the link rate.
pub fn added_p99(run: &IncastRun, link: &LinkInfo) -> (f64, f64) {
    let added = run.loaded.p99_us - run.unloaded.p99_us;
    (added, added / link.frame_us)
}

pub(super) fn write_json(path: &Path, result: &ExperimentResult) -> Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let tmp = path.with_extension("tmp");
    fs::write(&tmp, serde_json::to_string_pretty(result)?)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))
}

pub(super) fn read_result(path: &Path) -> Result<Option<ExperimentResult>> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(serde_json::from_str(&text).with_context(|| {
            format!("{} is not a `testbed sird` result", path.display())
        })?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Reads a number that may have been written as `null`: JSON has no NaN,
/// and serde_json writes a NaN (a CPU share that could not be measured)
/// as `null`.
fn f64_or_nan<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[derive(Serialize, Deserialize)]
    struct Cores {
        #[serde(deserialize_with = "f64_or_nan")]
        cpu_cores: f64,
    }

    /// A CPU share that could not be measured survives the JSON round trip
    /// (it used to make a finished experiment unreadable).
    #[test]
    fn unmeasured_cpu_share_round_trips() {
        let text = serde_json::to_string(&Cores {
            cpu_cores: f64::NAN,
        })
        .unwrap();
        assert_eq!(text, r#"{"cpu_cores":null}"#);
        let back: Cores = serde_json::from_str(&text).unwrap();
        assert!(back.cpu_cores.is_nan());
        let back: Cores = serde_json::from_str(r#"{"cpu_cores":1.5}"#).unwrap();
        assert_eq!(back.cpu_cores, 1.5);
    }
}
