//! `homa-sim reproduce sird`: the SIRD paper's simulations (seed 001, §5;
//! Table 5 and Fig. 3) rerun with the project's Homa and SIRD cores on the
//! paper's network ([`super::sird_preset`]), written as a markdown report
//! with the paper's numbers beside ours.
//!
//! Every run's result is cached in `DIR/runs/` (with the fingerprint of the
//! build that ran it) as soon as it finishes
//! (keyed by a hash of its scenario), so an interrupted reproduction
//! resumes where it stopped; an existing report is only overwritten with
//! `--force`.

use super::sird_preset::{self as preset, RunLength, Setup};
use crate::protocols;
use crate::report::RunReport;
use crate::scenario::{ProtocolChoice, Scenario};
use anyhow::{bail, Context, Result};
use homa_measure::progress::Progress;
use serde::{Deserialize, Serialize};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// How much to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Fewer loads, shorter runs, fewer Fig. 3 points.
    pub small: bool,
    /// Overwrite an existing report.
    pub force: bool,
}

impl Options {
    /// Offered loads of the Table 5 runs (nominal, headers excluded).
    pub fn loads(&self) -> &'static [f64] {
        if self.small {
            &[0.5, 0.8, 0.95]
        } else {
            &[0.25, 0.5, 0.7, 0.85, 0.95]
        }
    }

    /// Run length and message cap.
    pub fn length(&self) -> RunLength {
        RunLength {
            arrivals_us: if self.small { 1_200.0 } else { 2_500.0 },
            max_message: MAX_MESSAGE,
        }
    }

    /// Homa's overcommitment degrees and SIRD's B (×BDP) of Fig. 3.
    pub fn sweep(&self) -> (&'static [u32], &'static [f64]) {
        if self.small {
            (&[1, 2, 8], &[1.0, 1.5, 2.0])
        } else {
            (&[1, 2, 4, 8], &[1.0, 1.25, 1.5, 2.0, 3.0])
        }
    }

    /// The report's file name.
    pub fn report_name(&self) -> &'static str {
        if self.small {
            "sird-small.md"
        } else {
            "sird.md"
        }
    }
}

/// Messages are cut to this size (bytes) so that a run of a few
/// milliseconds lasts many times the transfer of its largest message.
pub const MAX_MESSAGE: u64 = 2_000_000;

/// A delivered/offered ratio over the second half of the window below this
/// marks a run unstable. (0.95 mislabels runs of a millisecond at 50% load,
/// whose ratio scatters by a few percent from heavy-tailed sizes alone.)
pub const STABLE_RATIO: f64 = 0.9;

/// Load of the Fig. 3 sweep (the paper: 95 Gbit/s per link applied).
pub const SWEEP_LOAD: f64 = 0.95;

/// Which experiment a run belongs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Kind {
    /// A Table 5 run: (setup, paper workload name).
    Table {
        /// "Balanced", "Core", "Incast".
        setup: String,
        /// "WKa".."WKc".
        paper_workload: String,
    },
    /// A Fig. 3 point: Homa's k or SIRD's B (×BDP).
    Sweep {
        /// Overcommitment in BDPs (Homa: k; SIRD: B/BDP).
        overcommit: f64,
    },
}

/// One cached run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cached {
    /// What it is.
    pub kind: Kind,
    /// Nominal (paper) load.
    pub load: f64,
    /// The scenario run.
    pub scenario: Scenario,
    /// Its results (per-port details dropped).
    pub report: RunReport,
    /// Peak resident set of the process after the run (KB), if known.
    pub peak_rss_kb: Option<u64>,
    /// The `homa-sim` build that ran it ([`build_id`]); empty for runs
    /// cached before builds were recorded.
    #[serde(default)]
    pub build: String,
}

/// A short fingerprint of the running `homa-sim` executable (a hash of its
/// bytes), so a cached run says which build produced it: the cache is keyed
/// by scenario, and a changed simulator may give different results.
pub fn build_id() -> String {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        std::env::current_exe()
            .and_then(std::fs::read)
            .map(|bytes| {
                let mut h = std::collections::hash_map::DefaultHasher::new();
                bytes.hash(&mut h);
                format!("{:016x}", h.finish())
            })
            .unwrap_or_else(|_| "unknown".into())
    })
    .clone()
}

impl Cached {
    /// Whether the run carried its load: delivered/offered over the second
    /// half of the window at least [`STABLE_RATIO`].
    pub fn stable(&self) -> bool {
        self.report.late_delivered_ratio >= STABLE_RATIO
    }
}

fn plan(o: &Options) -> Vec<(Kind, f64, Scenario)> {
    let len = o.length();
    let mut v = Vec::new();
    for setup in Setup::ALL {
        for (paper, wl, _) in preset::WORKLOADS {
            for p in [ProtocolChoice::Homa, ProtocolChoice::Sird] {
                for &load in o.loads() {
                    let kind = Kind::Table {
                        setup: setup.name().into(),
                        paper_workload: paper.into(),
                    };
                    v.push((kind, load, preset::scenario(p, setup, wl, load, &len)));
                }
            }
        }
    }
    let (ks, bs) = o.sweep();
    for &k in ks {
        let mut s = preset::scenario(
            ProtocolChoice::Homa,
            Setup::Balanced,
            "w5",
            SWEEP_LOAD,
            &len,
        );
        s.homa.max_overcommit = Some(k);
        s.label = format!("k={k}");
        v.push((
            Kind::Sweep {
                overcommit: k as f64,
            },
            SWEEP_LOAD,
            s,
        ));
    }
    for &b in bs {
        let mut s = preset::scenario(
            ProtocolChoice::Sird,
            Setup::Balanced,
            "w5",
            SWEEP_LOAD,
            &len,
        );
        s.sird.bucket = Some((b * preset::BDP as f64).round() as u32);
        s.label = format!("B={b}");
        v.push((Kind::Sweep { overcommit: b }, SWEEP_LOAD, s));
    }
    v
}

/// The cache file of a scenario: readable prefix plus a hash of the whole
/// scenario.
fn cache_path(dir: &Path, s: &Scenario) -> PathBuf {
    let text = toml::to_string(s).unwrap_or_default();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    let name = format!(
        "{}-{}-{}-{:.0}-{:016x}.json",
        s.protocol,
        s.label.replace(['=', '.'], "_"),
        s.traffic.workload,
        s.traffic.load * 1000.0,
        h.finish()
    );
    dir.join("runs").join(name)
}

/// This process's peak resident set (KB), from /proc (Linux only).
fn peak_rss_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Runs (or loads from the cache) every run of the set, then writes the
/// report `DIR/sird.md` (`sird-small.md` with `--small`), its plots and
/// `DIR/summary.csv`. Returns the report's path.
pub fn run(out: &Path, o: &Options) -> Result<PathBuf> {
    let report_path = out.join(o.report_name());
    if report_path.exists() && !o.force {
        bail!(
            "{} exists; pass --force to overwrite it (finished runs in {} are reused either way)",
            report_path.display(),
            out.join("runs").display()
        );
    }
    std::fs::create_dir_all(out.join("runs"))
        .with_context(|| format!("creating {}", out.join("runs").display()))?;
    let t0 = Instant::now();
    let plan = plan(o);
    let n = plan.len();
    // The estimate of the time left rests on simulated work, not on the
    // count of runs, whose durations differ a hundredfold.
    let total: f64 = plan.iter().map(|(_, _, s)| super::work(s)).sum();
    let progress = Progress::new(total, n, false);
    let mut done = 0.0;
    let mut results = Vec::with_capacity(plan.len());
    for (kind, load, s) in plan {
        let what = format!(
            "{} {} {} load {:.0}%",
            s.protocol,
            s.label,
            s.traffic.workload,
            load * 100.0
        );
        let path = cache_path(out, &s);
        let c = super::work(&s);
        let cached: Option<Cached> = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
        let entry = match cached {
            Some(e) => {
                let note = if e.build == build_id() {
                    String::new()
                } else if e.build.is_empty() {
                    " (from an unrecorded build)".into()
                } else {
                    format!(" (from build {})", e.build)
                };
                progress.skip(c, &format!("{what}{note}"));
                e
            }
            None => {
                progress.set_current(&what);
                let t = Instant::now();
                let mut cb = |completed: u64, messages: u64| {
                    progress.set_done(done + c * completed as f64 / messages.max(1) as f64);
                };
                let mut report = protocols::run(&s, Some(&mut cb)).with_context(|| what.clone())?;
                report.ports.clear();
                let secs = t.elapsed().as_secs_f64();
                done += c;
                progress.job_done(
                    done,
                    &format!(
                        "{what}: {:.1} s, goodput {:.1} Gbit/s, max ToR queue {:.2} MB",
                        secs,
                        report.goodput_gbps,
                        report.switches.get("tor").map_or(0, |q| q.peak_bytes) as f64 / 1e6,
                    ),
                );
                let e = Cached {
                    kind,
                    load,
                    scenario: s,
                    report,
                    peak_rss_kb: peak_rss_kb(),
                    build: build_id(),
                };
                let tmp = path.with_extension("tmp");
                std::fs::write(&tmp, serde_json::to_string(&e)?)
                    .with_context(|| format!("writing {}", tmp.display()))?;
                std::fs::rename(&tmp, &path)?;
                e
            }
        };
        results.push(entry);
    }
    progress.finish();
    let md = super::sird_report::write_report(out, o, &results, t0.elapsed().as_secs_f64())?;
    std::fs::write(&report_path, md)
        .with_context(|| format!("writing {}", report_path.display()))?;
    Ok(report_path)
}
