//! The `homa-perf` command: see `homa-perf --help`.

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use homa_perf::cluster::{self, ClusterArgs};
use homa_perf::{
    run_client, run_demo, ClientOptions, DemoOptions, Protocol, Server, ServerOptions, SizeDist,
    SizeSpec, StopRule,
};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Latency and throughput of Homa, TCP and UDP RPCs on loopback.
#[derive(Debug, Parser)]
#[command(name = "homa-perf", version, about)]
struct Cli {
    /// Log more (-v: info, -vv: debug); logs go to stderr.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Answer RPCs: each response has the size the request asks for.
    Server(ServerArgs),
    /// Send RPCs to a server and report latency percentiles and throughput.
    Client(ClientArgs),
    /// Start servers in-process and compare Homa, TCP and UDP in one table.
    Demo(DemoArgs),
    /// Be one host of a cluster benchmark: serve, and offer Poisson load to
    /// the other hosts (loopback or private addresses only).
    Cluster(ClusterArgs),
}

#[derive(Debug, Args)]
struct ServerArgs {
    /// Loopback address to listen on (e.g. 127.0.0.1:4000 or [::1]:4000).
    #[arg(long)]
    bind: SocketAddr,
    /// Transport.
    #[arg(long, value_enum, default_value_t = Protocol::Homa)]
    protocol: Protocol,
    /// Receiving threads (Homa and UDP; TCP uses one thread per connection).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Spin on the sockets instead of sleeping (one busy core per thread).
    #[arg(long)]
    busy_poll: bool,
    /// Homa runtime configuration (TOML); default: tuned for loopback.
    #[arg(long, value_name = "FILE.toml")]
    config: Option<PathBuf>,
    /// Stop after this many seconds (default: run until killed).
    #[arg(long, value_name = "S")]
    duration: Option<f64>,
}

#[derive(Debug, Args)]
struct ClientArgs {
    /// The server's loopback address.
    #[arg(long)]
    server: SocketAddr,
    /// Transport.
    #[arg(long, value_enum, default_value_t = Protocol::Homa)]
    protocol: Protocol,
    /// Request size in bytes (default 100 when no --workload is given).
    #[arg(long, conflicts_with = "workload")]
    size: Option<usize>,
    /// Draw request sizes from a workload: w1..w5, thesis-w3, thesis-w5, fixed:N or a
    /// `size_bytes,cdf` CSV file.
    #[arg(long)]
    workload: Option<String>,
    /// Workload sizes above this are sent at this size (the Homa/Linux
    /// paper truncated at 1,000,000 B; UDP is capped at 65,000 B).
    #[arg(long, default_value_t = 1_000_000)]
    max_size: usize,
    /// Measured RPCs (default 10,000 when no --seconds is given).
    #[arg(long, conflicts_with = "seconds")]
    count: Option<u64>,
    /// Measure for this long instead of a count of RPCs.
    #[arg(long)]
    seconds: Option<f64>,
    /// RPCs outstanding at once.
    #[arg(long, default_value_t = 1)]
    concurrency: usize,
    /// Response size asked of the server (bytes).
    #[arg(long, default_value_t = 100)]
    response_size: usize,
    /// Spin on the sockets instead of sleeping.
    #[arg(long)]
    busy_poll: bool,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// RPCs before the measurement, excluded from the statistics.
    #[arg(long, default_value_t = 100)]
    warmup: u64,
    /// Homa runtime configuration (TOML); default: tuned for loopback.
    #[arg(long, value_name = "FILE.toml")]
    config: Option<PathBuf>,
    /// Homa: one thread keeps --concurrency RPCs outstanding with
    /// send_request/recv_any_response, instead of one thread per RPC doing
    /// blocking calls.
    #[arg(long)]
    pipelined: bool,
    /// Give up on an RPC after this many milliseconds (counted as an error).
    #[arg(long, default_value_t = 5_000)]
    timeout_ms: u64,
    /// Seed of the request-size sampling.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[derive(Debug, Args)]
struct DemoArgs {
    /// Measured seconds per row.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Rows compared with each other run interleaved in this many rounds.
    #[arg(long, default_value_t = 4)]
    rounds: u32,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Homa runtime configuration (TOML); default: tuned for loopback.
    #[arg(long, value_name = "FILE.toml")]
    config: Option<PathBuf>,
}

fn main() {
    let cli = Cli::parse();
    init_logging(cli.verbose);
    keep_large_allocations();
    if let Err(e) = run(cli) {
        eprintln!("homa-perf: {e:#}");
        std::process::exit(1);
    }
}

/// Messages of hundreds of kilobytes are allocated and freed thousands of
/// times a second. By default glibc serves each from a fresh mmap (and
/// trims the heap), so every message costs page faults and zeroing; a
/// server would tune its allocator, and so does the benchmark. TCP's
/// buffers live in the kernel and never see this cost.
fn keep_large_allocations() {
    // SAFETY: mallopt only changes allocator thresholds; it is called once,
    // before any thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 64 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
    }
}

fn init_logging(verbose: u8) {
    let level = match verbose {
        0 => tracing::Level::WARN,
        1 => tracing::Level::INFO,
        _ => tracing::Level::DEBUG,
    };
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
}

fn homa_config(path: Option<&PathBuf>) -> Result<homa::Config> {
    match path {
        Some(p) => homa::Config::from_toml_file(p)
            .with_context(|| format!("cannot use Homa configuration {}", p.display())),
        None => Ok(homa::Config::loopback()),
    }
}

fn seconds(s: f64, flag: &str) -> Result<Duration> {
    if !(s.is_finite() && s > 0.0 && s <= 1e6) {
        bail!("{flag} must be a positive number of seconds, got {s}");
    }
    Ok(Duration::from_secs_f64(s))
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Server(a) => {
            let stop_after = a.duration.map(|d| seconds(d, "--duration")).transpose()?;
            let server = Server::start(&ServerOptions {
                protocol: a.protocol,
                bind: a.bind,
                threads: a.threads,
                busy_poll: a.busy_poll,
                homa_config: homa_config(a.config.as_ref())?,
            })?;
            eprintln!(
                "homa-perf: {} server on {}{}",
                a.protocol,
                server.local_addr(),
                if a.busy_poll { " (busy-poll)" } else { "" }
            );
            server.run(stop_after);
            Ok(())
        }
        Command::Client(a) => {
            let mut opts = ClientOptions::new(a.protocol, a.server);
            opts.sizes = match &a.workload {
                Some(w) => {
                    let max = if a.protocol == Protocol::Udp {
                        a.max_size.min(homa_perf::proto::MAX_UDP_MESSAGE)
                    } else {
                        a.max_size
                    };
                    SizeSpec::Workload {
                        workload: SizeDist::by_name(w)?,
                        max,
                    }
                }
                None => SizeSpec::Fixed(a.size.unwrap_or(100)),
            };
            opts.stop = match a.seconds {
                Some(s) => StopRule::Duration(seconds(s, "--seconds")?),
                None => StopRule::Count(a.count.unwrap_or(10_000)),
            };
            opts.concurrency = a.concurrency;
            opts.response_size = a.response_size;
            opts.busy_poll = a.busy_poll;
            opts.warmup = a.warmup;
            opts.timeout = Duration::from_millis(a.timeout_ms.max(1));
            opts.homa_config = homa_config(a.config.as_ref())?;
            opts.homa_pipelined = a.pipelined;
            opts.seed = a.seed;
            let report = run_client(&opts)?;
            if a.json {
                println!("{}", report.to_json_string());
            } else {
                print!("{}", report.to_table());
            }
            Ok(())
        }
        Command::Demo(a) => {
            let result = run_demo(&DemoOptions {
                seconds: a.seconds,
                rounds: a.rounds,
                homa_config: homa_config(a.config.as_ref())?,
            })?;
            if a.json {
                println!("{}", result.to_json_string());
            } else {
                print!("{}", result.to_table());
            }
            Ok(())
        }
        Command::Cluster(a) => {
            let report = cluster::run_node(&a)?;
            eprintln!("homa-perf: {}", report.summary());
            report.write_json(a.out.as_deref())?;
            Ok(())
        }
    }
}
