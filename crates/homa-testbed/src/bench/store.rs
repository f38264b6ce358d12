//! Finished runs on disk, as they finish: an interrupted bench loses only
//! the run in progress, and a rerun with the same options resumes.
//!
//! A bench writing `OUT/NAME.md` keeps its runs in `OUT/NAME.partial/`:
//! `settings.json` (what the results depend on), and one JSON file per
//! finished unit, the idle round-trip times of a workload or one variant's
//! loaded run, named by workload, link and variant. The directory is
//! removed once the report is written.

use super::args::BenchArgs;
use crate::analysis::Baseline;
use crate::netns::TestbedSpec;
use crate::report::{Variant, VariantRun};
use anyhow::{bail, Context, Result};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::fs;
use std::path::{Path, PathBuf};

/// What every finished run of a bench depends on, besides its workload,
/// link and variant (which name its file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Hosts.
    pub hosts: usize,
    /// Switch buffer per port and class (bytes; none on real hosts).
    pub buffer_bytes: Option<u64>,
    /// Host NIC queue (bytes; none on real hosts).
    pub host_queue_bytes: Option<u64>,
    /// Real hosts (`testbed bench-ssh`): each host's ssh destination,
    /// port and data-plane address, in order; empty on the testbed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub real_hosts: Vec<String>,
    /// `--load`.
    pub load: f64,
    /// `--seconds`.
    pub seconds: f64,
    /// `--warmup`.
    pub warmup: f64,
    /// `--tcp-connections`.
    pub tcp_connections: usize,
    /// `--client-max`.
    pub client_max: usize,
    /// `--rtt-us`.
    pub rtt_us: Option<f64>,
    /// `--nic-queue-packets`.
    pub nic_queue_packets: f64,
    /// `--homa-set`.
    pub homa_set: Vec<String>,
    /// `--buckets`.
    pub buckets: usize,
    /// `--unloaded-points`.
    pub unloaded_points: usize,
    /// `--unloaded-count`.
    pub unloaded_count: usize,
}

impl Settings {
    /// The settings of a bench with `args` on `spec`.
    pub fn of(args: &BenchArgs, spec: &TestbedSpec) -> Settings {
        Settings {
            hosts: spec.hosts,
            buffer_bytes: Some(spec.buffer_bytes),
            host_queue_bytes: Some(spec.host_queue_bytes),
            ..Settings::of_hosts(args, Vec::new())
        }
    }

    /// The settings of a bench with `args` on real hosts, each described
    /// by one string (see [`Settings::real_hosts`]).
    pub fn of_hosts(args: &BenchArgs, real_hosts: Vec<String>) -> Settings {
        Settings {
            hosts: real_hosts.len(),
            buffer_bytes: None,
            host_queue_bytes: None,
            real_hosts,
            load: args.load,
            seconds: args.seconds,
            warmup: args.warmup,
            tcp_connections: args.tcp_connections,
            client_max: args.client_max,
            rtt_us: args.rtt_us,
            nic_queue_packets: args.nic_queue_packets,
            homa_set: args.homa_set.clone(),
            buckets: args.buckets,
            unloaded_points: args.unloaded_points,
            unloaded_count: args.unloaded_count,
        }
    }
}

/// The finished runs of a bench (see the module).
#[derive(Debug)]
pub struct Store {
    dir: PathBuf,
}

/// Where `args`' report goes, and the files that make it.
pub fn report_paths(args: &BenchArgs) -> [PathBuf; 2] {
    [
        args.out.join(format!("{}.md", args.name)),
        args.out.join(&args.name).join("results.json"),
    ]
}

/// The directory of finished runs of a bench writing `args`' report.
pub fn partial_dir(args: &BenchArgs) -> PathBuf {
    args.out.join(format!("{}.partial", args.name))
}

const SETTINGS: &str = "settings.json";

fn read_json<T: DeserializeOwned>(path: &Path) -> Result<Option<T>> {
    match fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .with_context(|| format!("{} is not what a bench wrote", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Writes `value` to `path` whole or not at all (a temporary file renamed).
fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let tmp = path.with_extension("tmp");
    fs::write(&tmp, serde_json::to_string_pretty(value)?)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))
}

/// Refuses, before anything runs, what the bench would otherwise find out
/// too late or do wrong: replacing a finished report without `--force`,
/// or mixing in runs kept from a bench with other settings (which
/// `--force` discards).
pub fn check(args: &BenchArgs, settings: &Settings) -> Result<()> {
    homa_measure::cli::refuse_overwrite(report_paths(args), args.force)?;
    let dir = partial_dir(args);
    if args.force {
        return Ok(());
    }
    if let Some(old) = read_json::<Settings>(&dir.join(SETTINGS))? {
        if old != *settings {
            bail!(
                "{} holds finished runs of a bench with other options; rerun with those \
                 options to resume it, or pass --force to discard its runs",
                dir.display()
            );
        }
    }
    Ok(())
}

impl Store {
    /// Opens (or starts) the store of `args`' bench, after [`check`];
    /// returns it and the number of runs it keeps.
    pub fn open(args: &BenchArgs, settings: &Settings) -> Result<(Store, usize)> {
        check(args, settings)?;
        let dir = partial_dir(args);
        let same = read_json::<Settings>(&dir.join(SETTINGS))?.as_ref() == Some(settings);
        if !same && dir.exists() {
            // Other settings, and --force (check refused otherwise).
            fs::remove_dir_all(&dir).with_context(|| format!("cannot remove {}", dir.display()))?;
        }
        fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        write_json(&dir.join(SETTINGS), settings)?;
        let kept = fs::read_dir(&dir)?
            .filter_map(|e| e.ok())
            .filter(|e| {
                let n = e.file_name();
                let n = n.to_string_lossy();
                n.ends_with(".json") && n != SETTINGS
            })
            .count();
        Ok((Store { dir }, kept))
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, key: &UnitKey, unit: &str) -> PathBuf {
        self.dir.join(format!(
            "{}-{}mbit-{}mtu-{unit}.json",
            key.workload.replace(['/', '.'], "_"),
            key.rate_mbit,
            key.mtu
        ))
    }

    /// The idle round-trip times of a workload, if measured.
    pub fn baseline(&self, key: &UnitKey) -> Result<Option<Baseline>> {
        read_json(&self.path(key, "idle"))
    }

    /// Keeps the idle round-trip times of a workload.
    pub fn save_baseline(&self, key: &UnitKey, baseline: &Baseline) -> Result<()> {
        write_json(&self.path(key, "idle"), baseline)
    }

    /// A variant's loaded run, if finished.
    pub fn run(&self, key: &UnitKey, variant: Variant) -> Result<Option<VariantRun>> {
        read_json(&self.path(key, variant.name()))
    }

    /// Keeps a variant's loaded run.
    pub fn save_run(&self, key: &UnitKey, run: &VariantRun) -> Result<()> {
        write_json(&self.path(key, run.variant.name()), run)
    }

    /// Removes the store, once the report holds everything.
    pub fn remove(self) -> Result<()> {
        fs::remove_dir_all(&self.dir)
            .with_context(|| format!("cannot remove {}", self.dir.display()))
    }
}

/// What names a workload's runs besides the settings.
#[derive(Debug, Clone, PartialEq)]
pub struct UnitKey {
    /// Workload name.
    pub workload: String,
    /// Link rate (Mbit/s).
    pub rate_mbit: u64,
    /// MTU (bytes).
    pub mtu: u32,
}
