//! The options of `testbed bench` and their checks, all made before the
//! testbed is built.

use super::link::{apply_overrides, auto_rtt_ns, link_config, DEFAULT_LINKS};
use crate::netns::{self, TestbedSpec};
use crate::report::Variant;
use anyhow::{anyhow, bail, Result};
use homa_measure::cli;
use homa_perf::SizeDist;
use std::ops::Bound;
use std::path::PathBuf;

/// Options of `testbed bench`.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// Workloads to run, in order: w1..w5 or a `size_bytes,cdf` CSV file
    /// (messages above 1 MB are cut to 1 MB).
    #[arg(long, default_value = "w2,w3,w4,w5", value_delimiter = ',')]
    pub workloads: Vec<String>,
    /// Variants to run on each workload: homa (8 priorities), homa-1prio, homa-bd
    /// (ByteDance mode), tcp.
    #[arg(long, default_value = "homa,tcp,homa-1prio", value_delimiter = ',')]
    pub variants: Vec<String>,
    /// Offered load per host as a fraction of the link rate, in (0, 1.5].
    #[arg(long, default_value_t = 0.8, allow_negative_numbers = true)]
    pub load: f64,
    /// Measured seconds per run (positive).
    #[arg(long, default_value_t = 20.0, allow_negative_numbers = true)]
    pub seconds: f64,
    /// Seconds of load before the measurement starts (0 or more).
    #[arg(long, default_value_t = 2.0, allow_negative_numbers = true)]
    pub warmup: f64,
    /// Link rates (Mbit/s, 1 to 100000): `500` for every workload or
    /// `w3=500` for one; comma-separated [default: w1 and w2 20, w3 100, w4
    /// and w5 400, others 100].
    #[arg(long = "rates", value_delimiter = ',')]
    pub rates: Vec<String>,
    /// Link MTUs (bytes, 576 to 65000), like --rates: `9000` or `w3=1500`
    /// [default: w1..w3 1500, w4 and w5 9000, others 1500].
    #[arg(long = "mtus", value_delimiter = ',')]
    pub mtus: Vec<String>,
    /// TCP connections from each client to each server.
    #[arg(long, default_value_t = 1)]
    pub tcp_connections: usize,
    /// Most RPCs one client keeps outstanding (arrivals beyond are skipped
    /// and counted; high enough that TCP's backlog is offered in full).
    #[arg(long, default_value_t = 10_000)]
    pub client_max: usize,
    /// Round-trip time Homa assumes (µs, at least 1): RTTbytes = link
    /// rate × this [default: 50 µs of software plus two frame times].
    #[arg(long, allow_negative_numbers = true)]
    pub rtt_us: Option<f64>,
    /// Transmission time Homa's pacer lets queue in the host NIC, in
    /// full-size packets. Homa/Linux allows 2 µs, under one of its packets'
    /// worth at 25 Gbit/s... in time, a sliver of its 15 µs round trip;
    /// here one frame takes longer than a round trip, so half a frame
    /// (measured on w4: short-message p99 slowdown 24 at 0.5, 37 at 1).
    #[arg(long, default_value_t = 0.5, allow_negative_numbers = true)]
    pub nic_queue_packets: f64,
    /// Overrides of the generated Homa configuration, as TOML
    /// `key=value` pairs with dotted keys, e.g.
    /// `core.fifo_grant_fraction=100` (comma-separated), checked before
    /// anything runs [default: none].
    #[arg(long = "homa-set", value_delimiter = ',')]
    pub homa_set: Vec<String>,
    /// Size buckets per workload (equal shares of messages), at least 1.
    #[arg(long, default_value_t = 20)]
    pub buckets: usize,
    /// Sizes probed on the idle testbed, at least 1.
    #[arg(long, default_value_t = 30)]
    pub unloaded_points: usize,
    /// RPCs per probed size on the idle testbed, at least 1.
    #[arg(long, default_value_t = 20)]
    pub unloaded_count: usize,
    /// Directory of the report: writes NAME.md, NAME/*.png,
    /// NAME/results.json, keeping finished runs in NAME.partial/ until the
    /// end (a rerun with the same options resumes from them).
    #[arg(long, default_value = "docs/results")]
    pub out: PathBuf,
    /// Base name of the report files.
    #[arg(long, default_value = "testbed")]
    pub name: String,
    /// Replace an existing report (the default --out holds the committed
    /// one), and discard finished runs of a bench with other options.
    #[arg(long)]
    pub force: bool,
}

impl BenchArgs {
    /// Checks every option, the link and the Homa configuration of each
    /// workload on `spec`'s topology (or on real hosts, given `None`), and
    /// the output directory, before anything runs; returns the variants to
    /// run.
    pub fn validate(&self, spec: Option<&TestbedSpec>) -> Result<Vec<Variant>> {
        cli::check_in(
            "--load",
            self.load,
            (Bound::Excluded(0.0), Bound::Included(1.5)),
        )?;
        cli::check_in(
            "--seconds",
            self.seconds,
            (Bound::Excluded(0.0), Bound::Excluded(f64::INFINITY)),
        )?;
        cli::check_in("--warmup", self.warmup, 0.0..f64::INFINITY)?;
        if let Some(rtt) = self.rtt_us {
            cli::check_in("--rtt-us", rtt, 1.0..f64::INFINITY)?;
        }
        cli::check_in(
            "--nic-queue-packets",
            self.nic_queue_packets,
            0.0..f64::INFINITY,
        )?;
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
        for (flag, v) in [
            ("--tcp-connections", self.tcp_connections),
            ("--client-max", self.client_max),
            ("--buckets", self.buckets),
            ("--unloaded-points", self.unloaded_points),
            ("--unloaded-count", self.unloaded_count),
        ] {
            if v == 0 {
                bail!("{flag} must be at least 1");
            }
        }
        let variants = self
            .variants
            .iter()
            .map(|v| Variant::parse(v))
            .collect::<Result<Vec<_>>>()?;
        if variants.is_empty() {
            bail!("--variants is empty");
        }
        if self.name.is_empty() || self.name.contains('/') {
            bail!("--name must be a file name, got {:?}", self.name);
        }
        // Each workload's link and Homa configuration, as its runs will
        // build them.
        for w in &self.workloads {
            let (rate, mtu) = self.link_for(w);
            match spec {
                Some(spec) => TestbedSpec {
                    rate_mbit: rate,
                    mtu,
                    ..spec.clone()
                }
                .validate(),
                None => netns::validate_link(rate, mtu),
            }
            .map_err(|e| anyhow!("workload {w}: {e:#} (see --rates, --mtus)"))?;
            let rtt_ns = self.rtt_ns(rate, mtu);
            for priorities in [8, 1] {
                let mut config = link_config(rate, mtu, rtt_ns, self.nic_queue_packets);
                config.core.num_priorities = priorities;
                apply_overrides(&config, &self.homa_set)
                    .map_err(|e| anyhow!("workload {w}: {e:#}"))?;
            }
        }
        cli::check_output_dir("--out", &self.out)?;
        Ok(variants)
    }

    /// The round trip Homa assumes on a link (ns).
    pub fn rtt_ns(&self, rate_mbit: u64, mtu: u32) -> u64 {
        self.rtt_us
            .map_or_else(|| auto_rtt_ns(rate_mbit, mtu), |us| (us * 1e3) as u64)
    }

    /// The link rate and MTU for `workload`: the last matching `--rates`
    /// / `--mtus` entries, else [`DEFAULT_LINKS`].
    pub fn link_for(&self, workload: &str) -> (u64, u32) {
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
                // Out of range either way; kept so validation refuses it.
                mtu = u32::try_from(v).unwrap_or(u32::MAX);
            }
        }
        (rate, mtu)
    }
}

/// `500` → (None, 500); `w3=500` → (Some("w3"), 500).
pub(super) fn parse_setting(s: &str, flag: &str) -> Result<(Option<String>, u64)> {
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
