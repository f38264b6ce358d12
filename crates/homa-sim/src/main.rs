//! `homa-sim`: run simulated datacenter experiments with the Homa core.

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use homa_measure::cli;
use homa_measure::SizeDist;
use homa_sim::report::RunReport;
use homa_sim::scenario::{ProtocolChoice, Scenario};
use homa_sim::{output, plot, protocols, reproduce, search, sim};
use indicatif::{ProgressBar, ProgressStyle};
use std::ops::Bound;
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

/// Highest bisection rounds of `max-load`: 2^-20 of the load range is far
/// below the noise of any run.
const MAX_STEPS: u32 = 20;

#[derive(Subcommand)]
enum Command {
    /// One run: prints a summary and writes JSON, CSV and a plot to --out.
    Run(RunArgs),
    /// Finds the highest load the network sustains, by bisection.
    MaxLoad(MaxLoadArgs),
    /// Runs a published experiment set and writes a markdown report.
    Reproduce(ReproduceArgs),
    /// Prints the derived network numbers (RTT, RTTbytes, unloaded latency).
    Topology {
        /// Scenario file [default: none: the built-in thesis setup].
        #[arg(long)]
        scenario: Option<PathBuf>,
    },
}

#[derive(Args, Clone)]
struct MaxLoadArgs {
    #[command(flatten)]
    run: RunArgs,
    /// Lowest load tried, in (0, 1]; it must be sustained, or the search
    /// reports 0.
    #[arg(long, default_value_t = 0.5, allow_negative_numbers = true)]
    lo: f64,
    /// Highest load tried, in (0, 1] and above --lo.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    hi: f64,
    /// Bisection rounds after trying --lo and --hi, 0 to 20.
    #[arg(long, default_value_t = 5)]
    steps: u32,
    /// Share of the offered data that must be delivered (over the second
    /// half of the measurement window) to call a load sustained, in (0, 1].
    #[arg(long, default_value_t = 0.98, allow_negative_numbers = true)]
    threshold: f64,
}

/// The published experiment sets.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Set {
    /// The thesis' simulations (chapters 5-6).
    Thesis,
    /// The SIRD paper's simulations.
    Sird,
    /// ByteDance mode's claims (issue 14) in the simulator.
    Bytedance,
}

#[derive(Args, Clone)]
struct ReproduceArgs {
    /// Which set.
    #[arg(value_enum)]
    which: Set,
    /// Output directory (required for thesis) [default: sird:
    /// docs/results/sird-sim].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Messages per run, at least 1 (thesis) [default: per workload, 10,000
    /// to 1,000,000, enough for stable tails].
    #[arg(long)]
    messages: Option<u64>,
    /// Fewer, shorter runs (a smoke test of the whole pipeline; thesis).
    #[arg(long)]
    quick: bool,
    /// Runs at once, at least 1 (thesis) [default: number of CPUs].
    #[arg(long)]
    jobs: Option<usize>,
    /// sird: fewer loads and shorter runs (same conclusions, ~1/5 the cost).
    #[arg(long)]
    small: bool,
    /// Replace an existing report (sird: finished runs are still reused).
    #[arg(long)]
    force: bool,
}

#[derive(Args, Clone)]
struct RunArgs {
    /// TOML scenario file; the flags below override it [default: none: the
    /// built-in thesis setup].
    #[arg(long)]
    scenario: Option<PathBuf>,
    /// Transport: homa, pfabric or sird [default: homa, or the scenario's].
    #[arg(long)]
    protocol: Option<String>,
    /// Workload: w1..w5, thesis-w3, thesis-w5, fixed:N (N bytes), or a
    /// `size_bytes,cdf` CSV file [default: w3, or the scenario's].
    #[arg(long)]
    workload: Option<String>,
    /// Offered load: fraction of host link bandwidth, in (0, 2] [default:
    /// 0.5, or the scenario's].
    #[arg(long, allow_negative_numbers = true)]
    load: Option<f64>,
    /// Seed [default: 1, or the scenario's].
    #[arg(long)]
    seed: Option<u64>,
    /// Messages to generate, at least 1 [default: 100000, or the
    /// scenario's].
    #[arg(long)]
    messages: Option<u64>,
    /// Homa priority levels, 1 to 8 [default: 8, or the scenario's].
    #[arg(long)]
    priorities: Option<u8>,
    /// Homa overcommitment (messages granted at once), at least 1
    /// [default: the core's, 8, or the scenario's].
    #[arg(long)]
    overcommit: Option<u32>,
    /// Homa with ByteDance mode on (per-peer RTT probes and windows;
    /// the scenario key `homa.bytedance.enabled`).
    #[arg(long)]
    bytedance: bool,
    /// Label for reports [default: none, or the scenario's].
    #[arg(long)]
    label: Option<String>,
    /// Output directory (run: report.json, buckets.csv, summary.csv,
    /// ports.csv, slowdown.png; max-load: max_load.json) [default: none:
    /// only the summary on stdout].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Replace results of an earlier run in --out.
    #[arg(long)]
    force: bool,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

/// Files `run` writes to its --out directory.
const RUN_FILES: [&str; 5] = [
    "report.json",
    "buckets.csv",
    "summary.csv",
    "ports.csv",
    "slowdown.png",
];

/// The file `max-load` writes to its --out directory.
const MAX_LOAD_FILE: &str = "max_load.json";

/// Checks the flags that need no scenario, and that `files` can be written
/// into --out (and replace nothing without --force), before any work.
fn check_run_args(a: &RunArgs, files: &[&str]) -> Result<()> {
    if let Some(l) = a.load {
        cli::check_in("--load", l, (Bound::Excluded(0.0), Bound::Included(2.0)))?;
    }
    if a.messages == Some(0) {
        bail!("--messages must be at least 1");
    }
    if let Some(p) = a.priorities {
        cli::check_in("--priorities", f64::from(p), 1.0..=8.0)?;
    }
    if a.overcommit == Some(0) {
        bail!("--overcommit must be at least 1");
    }
    if let Some(dir) = &a.out {
        cli::check_output_dir("--out", dir)?;
        cli::refuse_overwrite(files.iter().map(|f| dir.join(f)), a.force)?;
    }
    Ok(())
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
    if a.bytedance {
        s.homa.bytedance.enabled = true;
    }
    if let Some(v) = &a.label {
        s.label = v.clone();
    }
    s.validate()?;
    // The workload is read when the simulation starts; a bad name or file
    // is refused now instead.
    SizeDist::by_name(&s.traffic.workload)?;
    Ok(s)
}

/// Checks `max-load`'s own flags: a search range inside (0, 1], a
/// threshold that a load can meet.
fn check_search_args(m: &MaxLoadArgs) -> Result<()> {
    cli::check_in("--lo", m.lo, cli::FRACTION)?;
    cli::check_in("--hi", m.hi, cli::FRACTION)?;
    if m.lo >= m.hi {
        return Err(cli::ArgError::Invalid(format!(
            "--lo ({}) must be below --hi ({})",
            m.lo, m.hi
        ))
        .into());
    }
    cli::check_in("--threshold", m.threshold, cli::FRACTION)?;
    cli::check_in("--steps", f64::from(m.steps), 0.0..=f64::from(MAX_STEPS))?;
    if m.run.load.is_some() {
        bail!("max-load chooses the load itself; give the range with --lo and --hi, not --load");
    }
    Ok(())
}

fn progress_bar(quiet: bool, what: &str) -> ProgressBar {
    if quiet || !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
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
                "{} {} {:.0}%: {done}/{total} messages done, {secs:.0} s elapsed, ETA {}",
                s.protocol,
                s.traffic.workload,
                s.traffic.load * 100.0,
                homa_measure::progress::fmt_duration(eta)
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
    cli::exit_quietly_on_broken_pipe();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::WARN)
        .init();
    // One line per error, never a backtrace (whatever RUST_BACKTRACE says).
    match run(Cli::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("homa-sim: error: {}", cli::error_line(e.as_ref()));
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Run(a) => {
            check_run_args(&a, &RUN_FILES)?;
            let s = scenario_from(&a)?;
            let r = run_one(&s, a.quiet)?;
            // The files first: a closed stdout must not lose them.
            if let Some(dir) = &a.out {
                write_outputs(dir, std::slice::from_ref(&r))?;
            }
            print!("{}", output::summary_table(std::slice::from_ref(&r)));
            if let Some(dir) = &a.out {
                println!("wrote {}", dir.display());
            }
        }
        Command::MaxLoad(m) => {
            check_run_args(&m.run, &[MAX_LOAD_FILE])?;
            check_search_args(&m)?;
            let s = scenario_from(&m.run)?;
            let res = search::max_sustainable_load(&s, m.lo, m.hi, m.steps, m.threshold, |sc| {
                run_one(sc, m.run.quiet).map_err(|e| sim::SimError::Scenario(e.to_string()))
            })?;
            if let Some(dir) = &m.run.out {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
                let path = dir.join(MAX_LOAD_FILE);
                std::fs::write(&path, serde_json::to_string_pretty(&res)?)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
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
            if res.probes.first().is_some_and(|p| !p.sustained) {
                println!(
                    "the lowest load tried, {:.1}%, is not sustained; try a lower --lo",
                    m.lo * 100.0
                );
            }
            println!(
                "maximum sustainable load for {} on {}: {:.1}%",
                s.protocol,
                s.traffic.workload,
                res.max_load * 100.0
            );
        }
        Command::Reproduce(r) => reproduce_cmd(r)?,
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

fn reproduce_cmd(r: ReproduceArgs) -> Result<()> {
    match r.which {
        Set::Sird => {
            if r.quick || r.messages.is_some() || r.jobs.is_some() {
                bail!("reproduce sird takes --out, --small and --force only (it runs one simulation at a time)");
            }
            let out = r
                .out
                .unwrap_or_else(|| PathBuf::from("docs/results/sird-sim"));
            cli::check_output_dir("--out", &out)?;
            let o = reproduce::sird::Options {
                small: r.small,
                force: r.force,
            };
            let path = reproduce::sird::run(&out, &o)?;
            println!("wrote {}", path.display());
        }
        Set::Bytedance => {
            if r.quick || r.messages.is_some() || r.jobs.is_some() || r.small {
                bail!("reproduce bytedance takes --out and --force only");
            }
            let out = r.out.unwrap_or_else(|| PathBuf::from("docs/results"));
            cli::check_output_dir("--out", &out)?;
            let path = reproduce::bytedance::run(&out, r.force)?;
            println!("wrote {}", path.display());
        }
        Set::Thesis => {
            if r.small {
                bail!("--small is an option of reproduce sird");
            }
            let Some(out) = r.out else {
                bail!("reproduce thesis needs --out DIR");
            };
            if r.messages == Some(0) {
                bail!("--messages must be at least 1");
            }
            if r.jobs == Some(0) {
                bail!("--jobs must be at least 1");
            }
            cli::check_output_dir("--out", &out)?;
            cli::refuse_overwrite([out.join("thesis.md")], r.force)?;
            let jobs = r
                .jobs
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            reproduce::thesis(
                &out,
                reproduce::Options {
                    messages: r.messages,
                    quick: r.quick,
                    jobs,
                },
            )?;
            println!("wrote {}", out.join("thesis.md").display());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn help_states_every_default() {
        let cmd = Cli::command();
        assert_eq!(
            cli::options_without_default(&cmd),
            Vec::<String>::new(),
            "options whose --help does not say what happens without them"
        );
    }

    /// The defaults written in the help of the flags that override the
    /// scenario are the scenario's own.
    #[test]
    fn help_defaults_are_the_scenarios() {
        let d = Scenario::default();
        let cmd = Cli::command();
        let run = cmd.find_subcommand("run").expect("run");
        let help = |id: &str| {
            run.get_arguments()
                .find(|a| a.get_id() == id)
                .and_then(|a| a.get_help())
                .map(|h| h.to_string())
                .unwrap_or_default()
        };
        for (id, value) in [
            ("protocol", d.protocol.to_string()),
            ("workload", d.traffic.workload.clone()),
            ("load", d.traffic.load.to_string()),
            ("seed", d.seed.to_string()),
            ("messages", d.messages.to_string()),
            ("priorities", d.homa.num_priorities.to_string()),
        ] {
            let h = help(id);
            assert!(h.contains(&format!("[default: {value}")), "--{id}: {h}");
        }
        let names = ProtocolChoice::names();
        let h = help("protocol");
        assert!(names.iter().all(|n| h.contains(n)), "{h}");
    }

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
