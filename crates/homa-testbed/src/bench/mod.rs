//! `testbed bench`: Homa and TCP on the same emulated cluster, workload by
//! workload, and the report in `docs/results/testbed.md`.
//!
//! For each workload: set the link rate, measure Homa's idle RTT by size
//! (one host probes, the others only serve), then run every variant with
//! all hosts loading the network at the same time, each run bracketed by
//! switch counters. The nodes are this same binary (`testbed node`, which
//! is `homa-perf cluster`) started inside the host namespaces.
//!
//! - [`args`]: the options, all checked before the testbed is built;
//! - [`link`]: each workload's link and the Homa configuration for it;
//! - `run`: one workload's runs; `nodes`: the node processes;
//!   `counters`: switch and Homa counters;
//! - `backend`: where the nodes run, the namespace testbed or, with
//!   `testbed bench-ssh`, real hosts over ssh ([`hosts`]: the hosts file,
//!   `ssh`: the backend, see `docs/cluster.md`);
//! - [`store`]: finished runs kept on disk as they finish, so that an
//!   interrupted bench resumes; progress and the time left go to stderr
//!   ([`homa_measure::progress`]).

pub mod args;
mod backend;
mod counters;
pub mod hosts;
pub mod link;
mod nodes;
mod run;
mod ssh;
pub mod store;

pub use args::BenchArgs;
pub use hosts::{HostsFile, SshArgs};
pub use link::{
    apply_overrides, auto_rtt_ns, link_config, offered_gbps, wire_factor, DEFAULT_LINKS, MAX_SIZE,
    PACKET_OVERHEAD, SOFTWARE_RTT_US,
};
pub(crate) use nodes::{proc_stat, spawn_node, wait_all, Node};

use crate::analysis::Baseline;
use crate::netns::TestbedSpec;
use crate::report::{BenchResult, Variant, VariantRun};
use anyhow::{bail, Context, Result};
use backend::{Backend, Namespaces};
use homa_measure::progress::Progress;
use homa_perf::SizeDist;
use run::RunCtx;
use std::fs;
use std::path::Path;
use std::time::Duration;
use store::{Settings, Store, UnitKey};

/// The port every node's server listens on.
const SERVER_PORT: u16 = 4000;

/// Seconds a node waits after its window for outstanding RPCs; those still
/// missing then count as unfinished, with the time they had waited.
const DRAIN_S: f64 = 5.0;

/// How often the switch backlog is sampled during a run.
const BACKLOG_INTERVAL: Duration = Duration::from_millis(250);

/// Checks everything `testbed bench` can check before it builds the
/// testbed: the options, each workload's link and Homa configuration, the
/// output directory, and that no finished report would be replaced (or
/// runs of another bench mixed in) without `--force`.
pub fn check(args: &BenchArgs, spec: &TestbedSpec) -> Result<Vec<Variant>> {
    let variants = args.validate(Some(spec))?;
    store::check(args, &Settings::of(args, spec))?;
    Ok(variants)
}

/// The defaults of `testbed bench-ssh` where they differ from the
/// testbed's: 1500-byte MTUs unless `--mtus` says otherwise, and the
/// report named `cluster` rather than `testbed` (the testbed's).
pub fn real_host_defaults(args: &mut BenchArgs) {
    if args.mtus.is_empty() {
        args.mtus = vec!["1500".into()];
    }
    if args.name == "testbed" {
        args.name = "cluster".into();
    }
}

/// Checks everything `testbed bench-ssh` can check before it connects to
/// a host: the options, the hosts file, each workload's link and Homa
/// configuration, and the output directory (as [`check`]).
pub fn check_ssh(args: &BenchArgs, ssh: &SshArgs) -> Result<(Vec<Variant>, HostsFile)> {
    if args.rates.is_empty() {
        bail!(
            "--rates is required on real hosts: their link rate in Mbit/s (e.g. --rates 10000); \
             the bench cannot measure or set it"
        );
    }
    let hosts = ssh.validate()?;
    let variants = args.validate(None)?;
    store::check(args, &Settings::of_hosts(args, hosts.keys()))?;
    Ok((variants, hosts))
}

/// A unit of the bench: a workload's idle round-trip times or one
/// variant's loaded run.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Unit {
    Idle,
    Loaded(Variant),
}

/// Wall time a unit should take (s), for the estimate of the time left:
/// what the estimate divides by the pace actually seen, so only the ratios
/// between units matter.
fn nominal_seconds(args: &BenchArgs, unit: Unit, workload: &SizeDist, key: &UnitKey) -> f64 {
    match unit {
        Unit::Loaded(_) => 2.0 + args.warmup + args.seconds,
        Unit::Idle => {
            let rtt_s = args.rtt_ns(key.rate_mbit, key.mtu) as f64 * 1e-9;
            let bps = key.rate_mbit as f64 * 1e6;
            let sizes =
                homa_perf::cluster::unloaded_sizes(workload, MAX_SIZE, args.unloaded_points);
            1.0 + args.unloaded_count as f64
                * sizes
                    .iter()
                    .map(|&s| rtt_s + 2.0 * s as f64 * 8.0 / bps)
                    .sum::<f64>()
        }
    }
}

/// What a workload has kept and still has to run.
struct Plan {
    name: String,
    workload: SizeDist,
    key: UnitKey,
    baseline: Option<Baseline>,
    runs: Vec<(Variant, Option<VariantRun>)>,
}

/// Runs the bench on the testbed described by `spec` (already up) and
/// writes the report. Changes the link rate per workload (re-creating the
/// testbed) and leaves it at the last workload's rate. Each finished run
/// is kept on disk at once ([`store`]); runs kept by an interrupted bench
/// with the same options are not run again.
pub fn run(args: &BenchArgs, spec: &TestbedSpec) -> Result<()> {
    let variants = check(args, spec)?;
    let mut backend = Namespaces::new(spec)?;
    run_on(args, &variants, &mut backend, &Settings::of(args, spec))
}

/// Runs the bench on the real hosts of `ssh`'s hosts file and writes the
/// report, as [`run`] does on the testbed: the same runs, results and
/// report, without the switch's counters. Copies this binary to each
/// host, runs the nodes there over ssh and removes it all afterwards.
pub fn run_ssh(args: &BenchArgs, ssh: &SshArgs) -> Result<()> {
    let (variants, hosts) = check_ssh(args, ssh)?;
    let settings = Settings::of_hosts(args, hosts.keys());
    let mut backend = ssh::SshHosts::connect(ssh, hosts)?;
    run_on(args, &variants, &mut backend, &settings)
}

fn run_on(
    args: &BenchArgs,
    variants: &[Variant],
    backend: &mut dyn Backend,
    settings: &Settings,
) -> Result<()> {
    let (store, kept) = Store::open(args, settings)?;
    if kept > 0 {
        eprintln!(
            "testbed: resuming: {kept} finished runs kept in {} (delete it, or pass --force \
             with other options, to start over)",
            store.dir().display()
        );
    }
    let mut plans = Vec::new();
    for name in &args.workloads {
        let workload = SizeDist::by_name(name)?;
        let (rate_mbit, mtu) = args.link_for(name);
        let key = UnitKey {
            workload: name.clone(),
            rate_mbit,
            mtu,
        };
        let baseline = store.baseline(&key)?;
        let runs = variants
            .iter()
            .map(|&v| Ok((v, store.run(&key, v)?)))
            .collect::<Result<Vec<_>>>()?;
        plans.push(Plan {
            name: name.clone(),
            workload,
            key,
            baseline,
            runs,
        });
    }
    let units = plans.len() * (1 + variants.len());
    let total: f64 = plans
        .iter()
        .map(|p| {
            nominal_seconds(args, Unit::Idle, &p.workload, &p.key)
                + p.runs
                    .iter()
                    .map(|(v, _)| nominal_seconds(args, Unit::Loaded(*v), &p.workload, &p.key))
                    .sum::<f64>()
        })
        .sum();
    let progress = Progress::new(total, units, false);
    for p in &plans {
        if p.baseline.is_some() {
            let w = nominal_seconds(args, Unit::Idle, &p.workload, &p.key);
            progress.skip(w, &format!("{}: idle round-trip times", p.name));
        }
        for (v, r) in &p.runs {
            if r.is_some() {
                let w = nominal_seconds(args, Unit::Loaded(*v), &p.workload, &p.key);
                progress.skip(w, &format!("{}: {}", p.name, v.label()));
            }
        }
    }

    let mut done = 0.0;
    let mut results = Vec::new();
    for plan in plans {
        let Plan {
            name,
            workload,
            key,
            baseline,
            runs,
        } = plan;
        let rtt_ns = args.rtt_ns(key.rate_mbit, key.mtu);
        let complete = baseline.is_some() && runs.iter().all(|(_, r)| r.is_some());
        if !complete {
            backend.prepare_link(&name, key.rate_mbit, key.mtu, &progress)?;
        }
        let ctx = RunCtx::new(args, &*backend, &key)?;
        let homa8 = if complete {
            None
        } else {
            Some(ctx.homa_config(8, false)?)
        };
        let baseline = match baseline {
            Some(b) => b,
            None => {
                progress.set_current(&format!("{name}: idle round-trip times"));
                let b = ctx.unloaded(homa8.as_deref().expect("not complete"))?;
                store.save_baseline(&key, &b)?;
                done += nominal_seconds(args, Unit::Idle, &workload, &key);
                progress.job_done(done, &format!("{name}: idle round-trip times measured"));
                b
            }
        };
        let bounds = homa_measure::buckets::cdf_bounds(&workload, MAX_SIZE, args.buckets);
        let mut finished = Vec::new();
        for (v, kept) in runs {
            let run = match kept {
                Some(r) => r,
                None => {
                    let what = format!("{name}: {} at {:.0}% load", v.label(), args.load * 100.0);
                    progress.set_current(&what);
                    let config = match v {
                        Variant::Homa => homa8.clone(),
                        Variant::Homa1Prio => Some(ctx.homa_config(1, false)?),
                        Variant::HomaBd => Some(ctx.homa_config(8, true)?),
                        Variant::Tcp => None,
                    };
                    let r = ctx.loaded(v, config.as_deref(), &workload, &baseline, &bounds)?;
                    store.save_run(&key, &r)?;
                    done += nominal_seconds(args, Unit::Loaded(v), &workload, &key);
                    progress.job_done(
                        done,
                        &format!(
                            "{what}: {} RPCs, {:.3} of {:.3} Gbit/s per host",
                            r.completed, r.achieved_gbps, r.target_gbps
                        ),
                    );
                    r
                }
            };
            finished.push(run);
        }
        results.push(run::workload_result(
            &name, &key, &workload, rtt_ns, &baseline, finished,
        ));
    }
    progress.finish();
    let cluster = backend.describe();
    let result = BenchResult {
        command: command_line(),
        hosts: backend.hosts(),
        buffer_bytes: cluster.buffer_bytes,
        host_queue_bytes: cluster.host_queue_bytes,
        load: args.load,
        seconds: args.seconds,
        tcp_connections: args.tcp_connections,
        cpus: cluster.cpus,
        kernel: cluster.kernel,
        real_hosts: cluster.real_hosts,
        homa_config: homa_config_summary(args, backend.local()),
        workloads: results,
    };
    render(&result, &args.out, &args.name, true)?;
    store.remove()
}

fn homa_config_summary(args: &BenchArgs, testbed: bool) -> String {
    let rtt = match args.rtt_us {
        Some(us) => format!("RTTbytes = link rate × {us} µs"),
        None => format!("RTTbytes = link rate × ({SOFTWARE_RTT_US:.0} µs + 2 frame times)"),
    };
    let mut s = format!(
        "the runtime over UDP, one endpoint per host (client and server share it, so one pacer \
         sees all its traffic); {rtt}; the pacer keeps at most {} frame(s) in the NIC queue, \
         small packets bypass it but count; timer tick 10 round trips (≥ 1 ms); threads sleep \
         instead of polling ({}); no segmentation offload",
        args.nic_queue_packets,
        if testbed {
            "all hosts share 2 cores"
        } else {
            "the testbed's setting, kept on real hosts; `--homa-set poll_us=N` to poll"
        }
    );
    if !args.homa_set.is_empty() {
        s.push_str(&format!("; overrides: {}", args.homa_set.join(", ")));
    }
    s.push('.');
    s
}

/// The command line this process was started with, as `testbed ...`.
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

#[cfg(test)]
mod tests;
