//! `homa-attack`: hostile traffic against a Homa server on loopback,
//! measured. See the crate's README for each scenario.
#![deny(missing_docs)]

use clap::{Parser, Subcommand};
use homa_attack::report::{self, Report};
use homa_attack::scenario::{flood, forge, hog, late_dup, lying_incoming, reflect};
use homa_attack::{target, Env, Error, Result};
use std::net::SocketAddr;

/// Hostile traffic against a Homa echo server on loopback, measured.
#[derive(Debug, Parser)]
#[command(name = "homa-attack", version)]
struct Cli {
    /// Print the report as JSON instead of a table.
    #[arg(long, global = true)]
    json: bool,
    /// No progress lines on stderr.
    #[arg(long, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The target: a Homa echo server (started by the scenarios as a child).
    Serve {
        /// Address to bind (loopback).
        #[arg(long)]
        bind: SocketAddr,
        /// Print the core's metrics as JSON on stdout on exit or SIGTERM.
        #[arg(long)]
        print_metrics: bool,
        /// Handler threads.
        #[arg(long, default_value_t = 2)]
        workers: usize,
        /// Override the core's `max_rpcs` (default: the runtime's).
        #[arg(long)]
        max_rpcs: Option<u32>,
    },
    /// Spoofed first DATA packets from random peers (needs root).
    Flood {
        /// Packets per second.
        #[arg(long, default_value_t = 10_000)]
        rate: u64,
        /// Seconds of baseline and of flood.
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        /// One-second measurements after the flood.
        #[arg(long, default_value_t = 3)]
        after: u32,
        /// Bytes of each legitimate echo RPC.
        #[arg(long, default_value_t = 100)]
        legit_size: usize,
        /// Legitimate RPCs kept outstanding.
        #[arg(long, default_value_t = 2)]
        legit_concurrency: usize,
        /// Legitimate RPCs started per second at most (default: as fast as
        /// they complete, which on a small machine shares the CPU with the
        /// attacker).
        #[arg(long)]
        legit_rate: Option<f64>,
    },
    /// First DATA packets whose `incoming` claims the whole message (needs root).
    LyingIncoming {
        /// Packets per second.
        #[arg(long, default_value_t = 20)]
        rate: u64,
        /// Seconds of baseline and of attack.
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        /// One-second measurements after the attack.
        #[arg(long, default_value_t = 2)]
        after: u32,
        /// Bytes of each legitimate echo RPC.
        #[arg(long, default_value_t = 1_000_000)]
        legit_size: usize,
    },
    /// A spoofed request and RESENDs from a victim address (needs root).
    Reflect {
        /// RESENDs after the request.
        #[arg(long, default_value_t = 100)]
        resends: u32,
        /// Bytes of the request (the echo server returns as many).
        #[arg(long, default_value_t = 1_000_000)]
        size: usize,
        /// Gap between RESENDs (µs); shorter gaps let the server merge them.
        #[arg(long, default_value_t = 10_000)]
        interval_us: u64,
        /// Ask with length 0xFFFFFFFF ("all you sent") instead of the message length.
        #[arg(long)]
        resend_all: bool,
    },
    /// A forged response for a guessed RPC id (needs root).
    Forge,
    /// Many RPCs that are never acknowledged, kept alive by small packets.
    Hog {
        /// RPCs to start.
        #[arg(long, default_value_t = 100_000)]
        rpcs: u32,
        /// Seconds to keep them alive.
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        /// Gap between keep-alive packets (ms).
        #[arg(long, default_value_t = 50)]
        keepalive_ms: u64,
        /// Bytes of each request.
        #[arg(long, default_value_t = 100)]
        size: usize,
        /// Requests per second while starting the RPCs.
        #[arg(long, default_value_t = 20_000)]
        start_rate: u64,
    },
    /// Requests replayed after their RPCs were acknowledged (needs root).
    LateDup {
        /// Replay delay after each response (ms).
        #[arg(long, default_value_t = 700)]
        delay_ms: u64,
        /// RPCs to run and replay.
        #[arg(long, default_value_t = 100)]
        rpcs: u32,
        /// Bytes of each request.
        #[arg(long, default_value_t = 100)]
        size: usize,
    },
}

fn print(report: &impl Report, json: bool) {
    if json {
        println!("{}", report::json(report));
    } else {
        print!("{}", report::table(report));
    }
}

fn run(cli: Cli) -> Result<()> {
    let env = Env {
        exe: std::env::current_exe()?,
        progress: !cli.quiet,
    };
    let json = cli.json;
    match cli.command {
        Command::Serve {
            bind,
            print_metrics,
            workers,
            max_rpcs,
        } => {
            if !bind.ip().is_loopback() {
                return Err(Error::Usage(format!(
                    "--bind {bind}: the target must listen on a loopback address"
                )));
            }
            target::serve(bind, print_metrics, workers, max_rpcs)?;
        }
        Command::Flood {
            rate,
            seconds,
            after,
            legit_size,
            legit_concurrency,
            legit_rate,
        } => {
            let o = flood::Options {
                rate,
                seconds,
                after,
                legit_size,
                legit_concurrency,
                legit_rate,
            };
            print(&flood::run(&env, &o)?, json);
        }
        Command::LyingIncoming {
            rate,
            seconds,
            after,
            legit_size,
        } => {
            let o = lying_incoming::Options {
                rate,
                seconds,
                after,
                legit_size,
            };
            print(&lying_incoming::run(&env, &o)?, json);
        }
        Command::Reflect {
            resends,
            size,
            interval_us,
            resend_all,
        } => {
            let o = reflect::Options {
                resends,
                size,
                interval_us,
                resend_all,
            };
            print(&reflect::run(&env, &o)?, json);
        }
        Command::Forge => print(&forge::run(&env)?, json),
        Command::Hog {
            rpcs,
            seconds,
            keepalive_ms,
            size,
            start_rate,
        } => {
            let o = hog::Options {
                rpcs,
                seconds,
                keepalive_ms,
                size,
                start_rate,
            };
            print(&hog::run(&env, &o)?, json);
        }
        Command::LateDup {
            delay_ms,
            rpcs,
            size,
        } => {
            let o = late_dup::Options {
                rpcs,
                delay_ms,
                size,
            };
            print(&late_dup::run(&env, &o)?, json);
        }
    }
    Ok(())
}

fn main() {
    homa_measure::cli::exit_quietly_on_broken_pipe();
    let cli = Cli::parse();
    if let Err(e) = run(cli) {
        eprintln!("homa-attack: {e}");
        std::process::exit(1);
    }
}
