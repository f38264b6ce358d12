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

use std::fs;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::bench;
use crate::netns::{self, TestbedSpec};
use crate::sird_node::LINGER_S;
mod measure;
mod plan;
mod report;
mod stats;

pub use measure::config_matches;
pub use plan::{congested_plan, incast_plan, Role};
pub use report::{markdown, render, with_kept_notes, CCDF_PLOT, CDF_PLOT, NOTES_MARKER};
pub use stats::{
    added_p99, cdf_points, goodput_mbps, quantiles, CongestedRun, ExperimentResult, IncastRun,
    LinkInfo, Quantiles, QueueStats,
};

use measure::Ctx;
use stats::{read_result, write_json};

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

/// Options of `testbed sird`.
#[derive(clap::Args, Debug, Clone)]
pub struct SirdArgs {
    /// Variants (default: incast sird,sird-nopace,homa; congested
    /// sthr-inf,sthr-half).
    #[arg(long, value_delimiter = ',')]
    pub variants: Vec<String>,
    /// Link rate (Mbit/s), 1 to 100000.
    #[arg(long, default_value_t = 400)]
    pub rate_mbit: u64,
    /// MTU (bytes), 576 to 65000.
    #[arg(long, default_value_t = 9000)]
    pub mtu: u32,
    /// Round trip the configuration assumes (µs, at least 1) [default: 50
    /// µs of software plus two frame times, as `testbed bench`].
    #[arg(long, allow_negative_numbers = true)]
    pub rtt_us: Option<f64>,
    /// Switch buffer per port (kB), from one MTU up.
    #[arg(long, default_value_t = 1000)]
    pub buffer_kb: u64,
    /// Measured seconds per run (positive).
    #[arg(long, default_value_t = 10.0, allow_negative_numbers = true)]
    pub seconds: f64,
    /// Seconds of load before the window (0 or more).
    #[arg(long, default_value_t = 2.0, allow_negative_numbers = true)]
    pub warmup: f64,
    /// Seconds of idle probing before each incast run (positive).
    #[arg(long, default_value_t = 3.0, allow_negative_numbers = true)]
    pub unloaded_seconds: f64,
    /// Runs of each variant (interleaved), at least 1.
    #[arg(long, default_value_t = 2)]
    pub repeats: usize,
    /// Request size of the loaders (bytes), 8 to 16,000,000.
    #[arg(long, default_value_t = MESSAGE_BYTES)]
    pub size: u64,
    /// Request size of the congested experiment's one-to-one senders
    /// (bytes). Larger than --size, so that the receivers' SRPT prefers
    /// the congested sender's messages, as in the paper, where its
    /// messages had started first. 8 to 16,000,000.
    #[arg(long, default_value_t = 8 * MESSAGE_BYTES)]
    pub other_size: u64,
    /// Incast senders.
    #[arg(long, default_value_t = 6)]
    pub senders: usize,
    /// Receivers of the congested sender.
    #[arg(long, default_value_t = 4)]
    pub receivers: usize,
    /// How often the switch backlog is sampled (ms), at least 1.
    #[arg(long, default_value_t = 50)]
    pub sample_ms: u64,
    /// Overrides of the generated configuration (`key=value`, dotted
    /// TOML keys), applied to every variant and checked before anything
    /// runs [default: none].
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
        // The overrides on each variant's configuration, as its runs will
        // build it.
        for &v in &variants {
            self.config(v)?;
        }
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
