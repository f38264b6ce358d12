//! `testbed`: build, inspect and remove an emulated cluster of network
//! namespaces behind a strict-priority switch, and run benchmarks on it.

use std::process::{Command, ExitCode, Stdio};

use anyhow::{bail, Result};
use clap::{Args, Parser, Subcommand};
use homa_perf::cluster::{self, ClusterArgs};
use tracing::{info, warn, Level};

use homa_measure::cli;
use homa_testbed::bench::{self, BenchArgs, SshArgs};
use homa_testbed::bytedance::{self, BdArgs};
use homa_testbed::cleanup;
use homa_testbed::netns::{self, TestbedSpec};
use homa_testbed::sird::{self, Experiment, SirdArgs};
use homa_testbed::sird_node::{self, NodeArgs};
use homa_testbed::sird_sniff::{self, SniffArgs};
use homa_testbed::tc;

#[derive(Parser, Debug)]
#[command(name = "testbed", version, about)]
struct Cli {
    /// More log output (-v: debug, which shows every command; -vv: trace).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Build the testbed (replacing one with the same prefix).
    Up(UpArgs),
    /// Remove the testbed and every process inside it.
    Down(PrefixArg),
    /// Show the configuration and the queue counters.
    Status {
        #[command(flatten)]
        prefix: PrefixArg,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Run Homa and TCP under load and write the report: builds the
    /// testbed (replacing one with the same prefix), sets the link rate per
    /// workload, and removes the testbed at the end unless --keep.
    Bench {
        #[command(flatten)]
        topology: BenchTopology,
        #[command(flatten)]
        args: Box<BenchArgs>,
    },
    /// Run the same bench on real hosts over ssh (docs/cluster.md): copies
    /// this binary to each host of --hosts-file, runs the nodes there and
    /// writes the same report, without switch counters. Needs no root;
    /// --rates (the hosts' link rate) is required, MTUs default to 1500
    /// and the report's --name to `cluster`.
    BenchSsh {
        #[command(flatten)]
        ssh: SshArgs,
        #[command(flatten)]
        args: Box<BenchArgs>,
    },
    /// Write a bench's report again from its results.json (no root needed).
    Report {
        /// The results.json a bench wrote.
        #[arg(long, default_value = "docs/results/testbed/results.json")]
        from: std::path::PathBuf,
        /// Directory of the report.
        #[arg(long, default_value = "docs/results")]
        out: std::path::PathBuf,
        /// Base name of the report files.
        #[arg(long, default_value = "testbed")]
        name: String,
    },
    /// The ByteDance paper's experiments (incast, split, sweep, hetero)
    /// with stock Homa and the ByteDance mode: builds a testbed (--prefix),
    /// runs, prints the tables, writes OUT/bytedance/EXPERIMENT.json and
    /// removes the testbed unless --keep.
    Bytedance(Box<BdArgs>),
    /// The SIRD paper's testbed experiments on a switch with one FIFO
    /// per port: builds the testbed, runs, writes docs/results/sird.md.
    Sird {
        #[command(subcommand)]
        command: SirdCmd,
    },
    /// One cluster node (`homa-perf cluster`), as the bench starts it
    /// inside each host namespace.
    #[command(hide = true)]
    Node(Box<ClusterArgs>),
    /// One host of `testbed sird`, as it starts it inside each namespace.
    #[command(hide = true)]
    SirdNode(Box<NodeArgs>),
    /// Counts DATA packets and `csn` marks on a switch port (run by
    /// `testbed sird` in the switch namespace).
    #[command(hide = true)]
    SirdSniff(SniffArgs),
}

#[derive(Subcommand, Debug)]
enum SirdCmd {
    /// 6-to-1 incast of 1 MB messages, a 7th host probing the receiver
    /// with 8-byte RPCs: SIRD with and without credit pacing, and Homa.
    Incast(SirdRun),
    /// One sender to 4 receivers plus one sender per receiver: SIRD with
    /// SThr = ∞ and SThr = BDP/2.
    Congested(SirdRun),
    /// Write the report again from the results (no root needed).
    Report {
        /// Directory of the report.
        #[arg(long, default_value = "docs/results")]
        out: std::path::PathBuf,
        /// Base name of the report files.
        #[arg(long, default_value = "sird")]
        name: String,
    },
}

#[derive(Args, Debug)]
struct SirdRun {
    #[command(flatten)]
    args: Box<SirdArgs>,
    /// Leave the testbed up afterwards.
    #[arg(long)]
    keep: bool,
    #[command(flatten)]
    prefix: PrefixArg,
}

#[derive(Args, Debug)]
struct BenchTopology {
    /// Number of hosts (2 to 16).
    #[arg(long, default_value_t = netns::DEFAULT_HOSTS)]
    hosts: usize,
    /// Buffer of each priority queue of a switch port, in kB (1000 bytes),
    /// from one MTU up.
    #[arg(long, default_value_t = netns::DEFAULT_BUFFER_BYTES / 1000)]
    buffer_kb: u64,
    /// Host NIC queue, in kB (1000 bytes), from one MTU up.
    #[arg(long, default_value_t = netns::DEFAULT_HOST_QUEUE_BYTES / 1000)]
    host_queue_kb: u64,
    /// Leave the testbed up after the bench.
    #[arg(long)]
    keep: bool,
    #[command(flatten)]
    prefix: PrefixArg,
}

#[derive(Args, Debug)]
struct PrefixArg {
    /// Prefix of the namespace names, [a-z0-9]{1,10}.
    #[arg(long, default_value = netns::DEFAULT_PREFIX)]
    prefix: String,
}

#[derive(Args, Debug)]
struct UpArgs {
    /// Number of hosts (2 to 16).
    #[arg(long, default_value_t = netns::DEFAULT_HOSTS)]
    hosts: usize,
    /// Link rate in Mbit/s, 1 to 100000.
    #[arg(long, default_value_t = netns::DEFAULT_RATE_MBIT)]
    rate_mbit: u64,
    /// Buffer of each priority queue of a switch port, in kB (1000 bytes),
    /// from one MTU up.
    #[arg(long, default_value_t = netns::DEFAULT_BUFFER_BYTES / 1000)]
    buffer_kb: u64,
    /// Host NIC queue, in kB (1000 bytes), from one MTU up.
    #[arg(long, default_value_t = netns::DEFAULT_HOST_QUEUE_BYTES / 1000)]
    host_queue_kb: u64,
    /// MTU of every link (bytes), 576 to 65000.
    #[arg(long, default_value_t = netns::DEFAULT_MTU)]
    mtu: u32,
    /// One FIFO per switch egress port instead of 8 priority queues.
    #[arg(long)]
    fifo: bool,
    #[command(flatten)]
    prefix: PrefixArg,
}

impl BenchTopology {
    /// The testbed of the bench at its first workload's link (the bench
    /// sets each workload's).
    fn spec(&self) -> TestbedSpec {
        TestbedSpec {
            prefix: self.prefix.prefix.clone(),
            hosts: self.hosts,
            rate_mbit: netns::DEFAULT_RATE_MBIT,
            buffer_bytes: self.buffer_kb.saturating_mul(1000),
            host_queue_bytes: self.host_queue_kb.saturating_mul(1000),
            mtu: netns::DEFAULT_MTU,
            switch_levels: tc::PRIORITIES,
        }
    }
}

impl UpArgs {
    fn spec(&self) -> TestbedSpec {
        TestbedSpec {
            prefix: self.prefix.prefix.clone(),
            hosts: self.hosts,
            rate_mbit: self.rate_mbit,
            buffer_bytes: self.buffer_kb.saturating_mul(1000),
            host_queue_bytes: self.host_queue_kb.saturating_mul(1000),
            mtu: self.mtu,
            switch_levels: if self.fifo { 1 } else { tc::PRIORITIES },
        }
    }
}

fn init_tracing(verbose: u8) {
    let level = match verbose {
        0 => Level::INFO,
        1 => Level::DEBUG,
        _ => Level::TRACE,
    };
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
}

/// Refuses early, with a clear message, what would otherwise fail halfway.
fn preflight() -> Result<()> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        bail!("testbed creates network namespaces and must run as root");
    }
    for tool in ["ip", "tc", "bridge"] {
        let found = Command::new(tool)
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !found {
            bail!("`{tool}` (iproute2) is missing; install the iproute2 package");
        }
    }
    Ok(())
}

/// Checks a command's options before anything else (root, tools, the
/// testbed): bad input gets its one-line error first, and nothing is built
/// for options that would fail later.
fn validate(cmd: &Cmd) -> Result<()> {
    match cmd {
        Cmd::Up(args) => args.spec().validate(),
        Cmd::Down(p) | Cmd::Status { prefix: p, .. } => netns::validate_prefix(&p.prefix),
        Cmd::Bench { topology, args } => {
            let spec = topology.spec();
            spec.validate()?;
            bench::check(args, &spec).map(|_| ())
        }
        Cmd::BenchSsh { ssh, args } => bench::check_ssh(args, ssh).map(|_| ()),
        Cmd::Report { from, out, name } => {
            if !from.is_file() {
                bail!("--from {}: no such results file", from.display());
            }
            cli::check_output_dir("--out", out)?;
            if name.is_empty() || name.contains('/') {
                bail!("--name must be a file name, got {name:?}");
            }
            Ok(())
        }
        Cmd::Sird { command } => match command {
            SirdCmd::Report { out, .. } => Ok(cli::check_output_dir("--out", out)?),
            SirdCmd::Incast(run) | SirdCmd::Congested(run) => {
                let experiment = match command {
                    SirdCmd::Incast(_) => Experiment::Incast,
                    _ => Experiment::Congested,
                };
                // Refuse bad options before building anything...
                run.args.validate(experiment)?;
                netns::validate_prefix(&run.prefix.prefix)?;
                cli::check_output_dir("--out", &run.args.out)?;
                // ... and before touching a testbed that may be someone else's.
                sird::check_output(experiment, &run.args)
            }
        },
        Cmd::Bytedance(args) => {
            args.validate()?;
            cli::check_output_dir("--out", &args.out)?;
            Ok(())
        }
        Cmd::Node(_) | Cmd::SirdNode(_) | Cmd::SirdSniff(_) => Ok(()),
    }
}

fn run(cli: Cli) -> Result<()> {
    validate(&cli.command)?;
    // A node runs inside a namespace the bench made; it needs no tools.
    let needs_root = !matches!(
        cli.command,
        Cmd::Node(_)
            | Cmd::BenchSsh { .. }
            | Cmd::SirdNode(_)
            | Cmd::SirdSniff(_)
            | Cmd::Report { .. }
            | Cmd::Sird {
                command: SirdCmd::Report { .. }
            }
    );
    if needs_root {
        preflight()?;
    }
    match cli.command {
        Cmd::Up(args) => {
            let spec = args.spec();
            // A Ctrl-C in the middle of `up` must leave nothing behind.
            cleanup::install(&spec.prefix);
            netns::up(&spec)?;
            println!(
                "testbed '{}' up: {} hosts {}..{} ({}), {} Mbit/s, MTU {}",
                spec.prefix,
                spec.hosts,
                spec.host_ip(0),
                spec.host_ip(spec.hosts - 1),
                spec.host_ns(0),
                spec.rate_mbit,
                spec.mtu
            );
            Ok(())
        }
        Cmd::Down(PrefixArg { prefix }) => {
            if netns::down(&prefix)? {
                println!("testbed '{prefix}' removed");
            } else {
                println!("testbed '{prefix}' was not up");
            }
            Ok(())
        }
        Cmd::Status { prefix, json } => {
            let status = netns::status(&prefix.prefix)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&status)?);
            } else {
                print!("{status}");
            }
            Ok(())
        }
        Cmd::Bench { topology, args } => {
            let spec = topology.spec();
            cleanup::install(&spec.prefix);
            let result = bench::run(&args, &spec);
            if topology.keep {
                info!("testbed '{}' left up (--keep)", spec.prefix);
            } else if let Err(e) = netns::down(&spec.prefix) {
                warn!("removing the testbed after the bench: {e:#}");
            }
            result
        }
        Cmd::BenchSsh { ssh, args } => {
            // Ctrl-C kills the nodes and cleans the hosts up (a hook).
            cleanup::install_handler();
            bench::run_ssh(&args, &ssh)
        }
        Cmd::Report { from, out, name } => bench::rerender(&from, &out, &name),
        Cmd::Sird { command } => {
            let (experiment, run) = match command {
                SirdCmd::Report { out, name } => return sird::render(&out, &name),
                SirdCmd::Incast(run) => (Experiment::Incast, run),
                SirdCmd::Congested(run) => (Experiment::Congested, run),
            };
            // Options and outputs were checked by `validate`.
            cleanup::install(&run.prefix.prefix);
            // A panic must not leave the testbed behind either.
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                sird::run(experiment, &run.args, &run.prefix.prefix)
            }))
            .unwrap_or_else(|_| Err(anyhow::anyhow!("internal error (panic); testbed removed")));
            if run.keep {
                info!("testbed '{}' left up (--keep)", run.prefix.prefix);
            } else if let Err(e) = netns::down(&run.prefix.prefix) {
                warn!("removing the testbed: {e:#}");
            }
            result
        }
        Cmd::SirdSniff(args) => sird_sniff::run(&args).map(|_| ()),
        Cmd::Bytedance(args) => {
            cleanup::install(&args.prefix);
            bytedance::run(&args)
        }
        Cmd::SirdNode(args) => {
            let o = sird_node::run(&args)?;
            eprintln!(
                "sird-node {}: served {} ({} B), clients {:?}",
                o.me,
                o.served,
                o.served_bytes,
                o.clients
                    .iter()
                    .map(|c| (c.completed, c.errors))
                    .collect::<Vec<_>>()
            );
            Ok(())
        }
        Cmd::Node(args) => {
            let report = cluster::run_node(&args)?;
            eprintln!("node: {}", report.summary());
            report.write_json(args.out.as_deref())?;
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    cli::exit_quietly_on_broken_pipe();
    let mut cli = Cli::parse();
    if let Cmd::BenchSsh { args, .. } = &mut cli.command {
        bench::real_host_defaults(args);
    }
    init_tracing(cli.verbose);
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // An error caused by a signal is the handler's to report.
            cleanup::wait_if_interrupted();
            eprintln!("testbed: {}", cli::error_line(e.as_ref()));
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn help_states_every_default() {
        assert_eq!(
            cli::options_without_default(&Cli::command()),
            Vec::<String>::new(),
            "options whose --help does not say what happens without them"
        );
    }
}
