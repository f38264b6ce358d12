//! The options of `testbed bytedance` and the testbed each experiment
//! builds.

use crate::netns::{self, TestbedSpec};
use crate::tc;
use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The experiments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Experiment {
    /// Six clients behind one NIC → one server.
    Incast,
    /// TCP and Homa share the server's link.
    Split,
    /// Fixed sizes, throughput.
    Sweep,
    /// Hosts with different link rates.
    Hetero,
}

impl Experiment {
    /// Its name in files.
    pub fn name(self) -> &'static str {
        match self {
            Experiment::Incast => "incast",
            Experiment::Split => "split",
            Experiment::Sweep => "sweep",
            Experiment::Hetero => "hetero",
        }
    }
}

/// The options of `testbed bytedance`.
#[derive(Debug, Clone, clap::Args)]
pub struct BdArgs {
    /// incast, split, sweep or hetero.
    #[arg(value_enum)]
    pub experiment: Experiment,
    /// Rate of every link (Mbit/s) unless said otherwise below.
    #[arg(long, default_value_t = 400)]
    pub rate_mbit: u64,
    /// incast: host 0's (the server's) link rate; 0 = half of --rate-mbit.
    #[arg(long, default_value_t = 0)]
    pub server_rate_mbit: u64,
    /// hetero: host 2's link rate; 0 = a quarter of --rate-mbit.
    #[arg(long, default_value_t = 0)]
    pub slow_rate_mbit: u64,
    /// MTU of every link.
    #[arg(long, default_value_t = 9000)]
    pub mtu: u32,
    /// Each switch priority queue's limit (KB).
    #[arg(long, default_value_t = 200)]
    pub buffer_kb: u64,
    /// Measured window of each run (s).
    #[arg(long, default_value_t = 6.0)]
    pub seconds: f64,
    /// Load before the window (s).
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    /// incast: client endpoints behind host 1's NIC.
    #[arg(long, default_value_t = 6)]
    pub clients: usize,
    /// RPCs each client keeps outstanding (default: 4; sweep: 1).
    #[arg(long)]
    pub outstanding: Option<usize>,
    /// sweep: request sizes (bytes).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "40000,100000,200000,500000"
    )]
    pub sizes: Vec<u64>,
    /// split: TCP's offered load, a fraction of the server's link.
    #[arg(long, default_value_t = 0.5)]
    pub tcp_share: f64,
    /// split: Homa's offered load, a fraction of the server's link.
    #[arg(long, default_value_t = 0.3)]
    pub homa_load: f64,
    /// One FIFO per switch port instead of eight priority queues (default:
    /// eight). The mode's probes travel at the top priority; with one FIFO
    /// they wait behind every queued byte.
    #[arg(long)]
    pub fifo: bool,
    /// Variants: homa (static RTTbytes) and homa-bd (ByteDance mode).
    #[arg(long, value_delimiter = ',', default_value = "homa,homa-bd")]
    pub variants: Vec<String>,
    /// Namespace prefix of the testbed this builds (and removes).
    #[arg(long, default_value = "bdtb")]
    pub prefix: String,
    /// Directory of the results (OUT/bytedance/EXPERIMENT.json).
    #[arg(long, default_value = "docs/results")]
    pub out: PathBuf,
    /// Overrides of the runtime configuration, every endpoint, both
    /// variants (e.g. core.bytedance.max_unsched_bytes=20528; default: none).
    #[arg(long, value_delimiter = ',')]
    pub homa_set: Vec<String>,
    /// Runs of each variant (and size), interleaved.
    #[arg(long, default_value_t = 1)]
    pub repeats: usize,
    /// Leave the testbed up afterwards.
    #[arg(long)]
    pub keep: bool,
}

impl BdArgs {
    /// Checks the options; returns the variants (`true` = ByteDance mode).
    pub fn validate(&self) -> Result<Vec<bool>> {
        netns::validate_prefix(&self.prefix)?;
        for r in [self.rate_mbit, self.server_rate(), self.slow_rate()] {
            netns::validate_link(r, self.mtu)?;
        }
        let seconds_ok = self.seconds > 0.0 && self.seconds <= 600.0;
        if !seconds_ok || !(0.0..=60.0).contains(&self.warmup) {
            bail!("--seconds must be in (0, 600] and --warmup in [0, 60]");
        }
        crate::bench::apply_overrides(&homa::Config::default(), &self.homa_set)?;
        if !(1..=20).contains(&self.repeats) {
            bail!("--repeats must be 1..=20, not {}", self.repeats);
        }
        if !(1..=12).contains(&self.clients) {
            bail!("--clients must be 1..=12, not {}", self.clients);
        }
        if self.outstanding.is_some_and(|o| !(1..=64).contains(&o)) {
            bail!("--outstanding must be 1..=64");
        }
        if self.sizes.is_empty() || self.sizes.iter().any(|&s| s == 0 || s > 1_000_000) {
            bail!("--sizes must be 1..=1000000 bytes each");
        }
        for (name, f) in [
            ("--tcp-share", self.tcp_share),
            ("--homa-load", self.homa_load),
        ] {
            if !(f > 0.0 && f <= 1.0) {
                bail!("{name} must be in (0, 1], not {f}");
            }
        }
        let mut out = Vec::new();
        for v in &self.variants {
            out.push(match v.as_str() {
                "homa" => false,
                "homa-bd" => true,
                _ => bail!("unknown variant {v:?}: choose homa or homa-bd"),
            });
        }
        if out.is_empty() {
            bail!("--variants is empty");
        }
        Ok(out)
    }

    pub(super) fn server_rate(&self) -> u64 {
        match self.server_rate_mbit {
            0 => (self.rate_mbit / 2).max(1),
            r => r,
        }
    }

    pub(super) fn slow_rate(&self) -> u64 {
        match self.slow_rate_mbit {
            0 => (self.rate_mbit / 4).max(1),
            r => r,
        }
    }

    pub(super) fn outstanding(&self) -> usize {
        self.outstanding.unwrap_or(match self.experiment {
            Experiment::Sweep => 1,
            _ => 4,
        })
    }

    /// The testbed and the hosts whose link differs from `rate_mbit`.
    pub(super) fn spec(&self) -> (TestbedSpec, Vec<(usize, u64)>) {
        let hosts = if self.experiment == Experiment::Hetero {
            3
        } else {
            2
        };
        let spec = TestbedSpec {
            prefix: self.prefix.clone(),
            hosts,
            rate_mbit: self.rate_mbit,
            buffer_bytes: self.buffer_kb * 1000,
            mtu: self.mtu,
            switch_levels: if self.fifo { 1 } else { tc::PRIORITIES },
            ..TestbedSpec::default()
        };
        let rates = match self.experiment {
            Experiment::Incast => vec![(0, self.server_rate())],
            Experiment::Hetero => vec![(2, self.slow_rate())],
            _ => vec![],
        };
        (spec, rates)
    }
}
