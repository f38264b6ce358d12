//! `homa-sim`: run simulated datacenter experiments with the Homa core.

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use homa_sim::report::RunReport;
use homa_sim::scenario::{ProtocolChoice, Scenario};
use homa_sim::{output, plot, protocols, reproduce, search, sim};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};

/// A simulation allocates and frees small nodes (B-tree and hash-table
/// entries, packet buffers) millions of times a second; mimalloc does that
/// faster than glibc's allocator. Results do not depend on the allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay`: its position in `mi_option_e`
/// (mimalloc v3's `include/mimalloc.h`, the version `libmimalloc-sys`
/// builds by default). The test below checks that this position holds the
/// option's default in that source, 1,000 ms.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Keeps freed memory mapped instead of returning it to the kernel a second
/// later: a simulation frees and reallocates the same few hundred MB all
/// run long, and every purged page costs a fault and a zeroing when it is
/// used again (2-3% of a w4 run). Peak RSS is unchanged; only the kernel's
/// work goes.
fn keep_freed_memory() {
    // SAFETY: mi_option_set stores an integer in mimalloc's option table;
    // called once at the start of main, before any other thread exists.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) }
}

#[derive(Parser)]
#[command(
    name = "homa-sim",
    version,
    about = "Packet-level datacenter simulator driving the Homa protocol core"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// One run: prints a summary and writes JSON, CSV and a plot to --out.
    Run(RunArgs),
    /// Finds the highest load the network sustains, by bisection.
    MaxLoad {
        #[command(flatten)]
        run: RunArgs,
        /// Lowest load tried (must be sustained).
        #[arg(long, default_value_t = 0.5)]
        lo: f64,
        /// Highest load tried.
        #[arg(long, default_value_t = 1.0)]
        hi: f64,
        /// Bisection rounds.
        #[arg(long, default_value_t = 5)]
        steps: u32,
        /// Delivered ÷ offered needed to call a load sustained.
        #[arg(long, default_value_t = 0.98)]
        threshold: f64,
    },
    /// Runs a published experiment set and writes a markdown report.
    Reproduce {
        /// Which set: "thesis" or "sird".
        which: String,
        /// Output directory (required for thesis; sird: default
        /// docs/results/sird-sim).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Messages per run (the default gives stable tails).
        #[arg(long)]
        messages: Option<u64>,
        /// Fewer, shorter runs (a smoke test of the whole pipeline).
        #[arg(long)]
        quick: bool,
        /// Runs at once (default: number of CPUs; thesis only).
        #[arg(long)]
        jobs: Option<usize>,
        /// sird: fewer loads and shorter runs (same conclusions, ~1/5 the cost).
        #[arg(long)]
        small: bool,
        /// sird: overwrite an existing report (cached runs are still reused).
        #[arg(long)]
        force: bool,
    },
    /// Prints the derived network numbers (RTT, RTTbytes, unloaded latency).
    Topology {
        /// Scenario file.
        #[arg(long)]
        scenario: Option<PathBuf>,
    },
}

#[derive(Args, Clone)]
struct RunArgs {
    /// TOML scenario file; the flags below override it.
    #[arg(long)]
    scenario: Option<PathBuf>,
    /// Transport: a registered protocol (homa, pfabric).
    #[arg(long)]
    protocol: Option<String>,
    /// Workload: w1..w5, thesis-w3, thesis-w5, fixed:N, or a CSV file.
    #[arg(long)]
    workload: Option<String>,
    /// Offered load (fraction of host link bandwidth).
    #[arg(long)]
    load: Option<f64>,
    /// Seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Messages to generate.
    #[arg(long)]
    messages: Option<u64>,
    /// Homa priority levels (1..=8).
    #[arg(long)]
    priorities: Option<u8>,
    /// Homa overcommitment (messages granted at once).
    #[arg(long)]
    overcommit: Option<u32>,
    /// Label for reports.
    #[arg(long)]
    label: Option<String>,
    /// Output directory (report.json, buckets.csv, summary.csv, ports.csv, slowdown.png).
    #[arg(long)]
    out: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

fn scenario_from(a: &RunArgs) -> Result<Scenario> {
    let mut s = match &a.scenario {
        Some(p) => Scenario::from_file(p)?,
        None => Scenario::default(),
    };
    if let Some(p) = &a.protocol {
        s.protocol = ProtocolChoice::from_name(p)?;
    }
    if let Some(w) = &a.workload {
        s.traffic.workload = w.clone();
    }
    if let Some(l) = a.load {
        s.traffic.load = l;
    }
    if let Some(v) = a.seed {
        s.seed = v;
    }
    if let Some(v) = a.messages {
        s.messages = v;
    }
    if let Some(v) = a.priorities {
        s.homa.num_priorities = v;
    }
    if let Some(v) = a.overcommit {
        s.homa.max_overcommit = Some(v);
    }
    if let Some(v) = &a.label {
        s.label = v.clone();
    }
    s.validate()?;
    Ok(s)
}

fn progress_bar(quiet: bool, what: &str) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(0);
    pb.set_style(
        ProgressStyle::with_template(
            "{prefix} [{elapsed_precise}] {bar:40} {pos}/{len} messages, ETA {eta}",
        )
        .expect("valid template"),
    );
    pb.set_prefix(what.to_string());
    pb
}

fn run_one(s: &Scenario, quiet: bool) -> Result<RunReport> {
    let pb = progress_bar(
        quiet,
        &format!(
            "{} {} {:.0}%",
            s.protocol,
            s.traffic.workload,
            s.traffic.load * 100.0
        ),
    );
    // Without a terminal (a log file, a pipe) the bar is invisible: say
    // how far the run is at every further tenth of its messages instead.
    let plain = !quiet && !std::io::IsTerminal::is_terminal(&std::io::stderr());
    let start = std::time::Instant::now();
    let mut next_tenth = 1;
    let mut cb = |done: u64, total: u64| {
        pb.set_length(total);
        pb.set_position(done);
        if plain && total > 0 && done * 10 >= next_tenth * total && next_tenth < 10 {
            let secs = start.elapsed().as_secs_f64();
            let eta = secs * (total - done) as f64 / done.max(1) as f64;
            eprintln!(
                "{} {} {:.0}%: {done}/{total} messages done, {secs:.0} s elapsed, ETA {eta:.0} s",
                s.protocol,
                s.traffic.workload,
                s.traffic.load * 100.0
            );
            next_tenth = done * 10 / total + 1;
        }
    };
    let r = protocols::run(s, Some(&mut cb))?;
    pb.finish_and_clear();
    Ok(r)
}

fn write_outputs(dir: &Path, reports: &[RunReport]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    output::write_json(&dir.join("report.json"), reports)?;
    output::write_buckets_csv(&dir.join("buckets.csv"), reports)?;
    output::write_summary_csv(&dir.join("summary.csv"), reports)?;
    output::write_ports_csv(&dir.join("ports.csv"), reports)?;
    if let Some(first) = reports.first() {
        let mut series = Vec::new();
        for r in reports {
            series.push(plot::spectrum_series(r, plot::Stat::P99));
            series.push(plot::spectrum_series(r, plot::Stat::P50));
        }
        plot::slowdown_plot(
            &dir.join("slowdown.png"),
            &format!("Slowdown by message size, {}", first.workload),
            "slowdown",
            &series,
            &plot::size_ticks(first, 10),
        )?;
    }
    Ok(())
}

fn main() -> std::process::ExitCode {
    keep_freed_memory();
    homa_measure::cli::exit_quietly_on_broken_pipe();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::WARN)
        .init();
    // One line per error, never a backtrace (whatever RUST_BACKTRACE says).
    match run(Cli::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("homa-sim: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Run(a) => {
            let s = scenario_from(&a)?;
            let r = run_one(&s, a.quiet)?;
            print!("{}", output::summary_table(std::slice::from_ref(&r)));
            if let Some(dir) = &a.out {
                write_outputs(dir, std::slice::from_ref(&r))?;
                println!("wrote {}", dir.display());
            }
        }
        Command::MaxLoad {
            run,
            lo,
            hi,
            steps,
            threshold,
        } => {
            let s = scenario_from(&run)?;
            let res = search::max_sustainable_load(&s, lo, hi, steps, threshold, |sc| {
                run_one(sc, run.quiet).map_err(|e| sim::SimError::Scenario(e.to_string()))
            })?;
            for p in &res.probes {
                println!(
                    "load {:.3}: offered {:.3}, late completed/generated {:.3}, wasted {:.1}% -> {}",
                    p.load,
                    p.offered,
                    p.delivered,
                    p.wasted_bandwidth * 100.0,
                    if p.sustained {
                        "sustained"
                    } else {
                        "not sustained"
                    }
                );
            }
            println!(
                "maximum sustainable load for {} on {}: {:.1}%",
                s.protocol,
                s.traffic.workload,
                res.max_load * 100.0
            );
            if let Some(dir) = &run.out {
                std::fs::create_dir_all(dir)?;
                std::fs::write(
                    dir.join("max_load.json"),
                    serde_json::to_string_pretty(&res)?,
                )?;
            }
        }
        Command::Reproduce {
            which,
            out,
            messages,
            quick,
            jobs,
            small,
            force,
        } => {
            if which == "sird" {
                if quick || messages.is_some() || jobs.is_some() {
                    bail!("reproduce sird takes --out, --small and --force only (it runs one simulation at a time)");
                }
                let out = out.unwrap_or_else(|| PathBuf::from("docs/results/sird-sim"));
                let path = reproduce::sird::run(&out, &reproduce::sird::Options { small, force })?;
                println!("wrote {}", path.display());
                return Ok(());
            }
            if which != "thesis" {
                bail!("unknown experiment set {which:?}; available: thesis, sird");
            }
            if small || force {
                bail!("--small and --force are options of reproduce sird");
            }
            let Some(out) = out else {
                bail!("reproduce thesis needs --out DIR");
            };
            let jobs =
                jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            reproduce::thesis(
                &out,
                reproduce::Options {
                    messages,
                    quick,
                    jobs,
                },
            )?;
            println!("wrote {}", out.join("thesis.md").display());
        }
        Command::Topology { scenario } => {
            let s = match scenario {
                Some(p) => Scenario::from_file(&p)?,
                None => Scenario::default(),
            };
            let t = homa_sim::topology::Topology::new(s.topology.clone())?;
            println!(
                "hosts: {} in {} racks, {} spines",
                t.hosts, s.topology.racks, s.topology.spines
            );
            println!("RTT: {:.3} us", t.rtt() as f64 / 1e6);
            println!("RTTbytes: {} message bytes", t.rtt_bytes());
            for size in [100u64, 1_000, 1_424, 10_000, 100_000, 1_000_000] {
                println!(
                    "unloaded one-way latency of {size} B: {:.3} us (other rack), {:.3} us (same rack)",
                    t.unloaded_latency(size, false) as f64 / 1e6,
                    t.unloaded_latency(size, true) as f64 / 1e6
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purge_delay_option_is_where_we_set_it() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return; // the environment chose a value; nothing to compare
        }
        // SAFETY: mi_option_get only reads mimalloc's option table.
        let v = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        assert_eq!(v, 1000, "option {MI_OPTION_PURGE_DELAY} is not purge_delay");
    }
}
