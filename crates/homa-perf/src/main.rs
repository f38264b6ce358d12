//! The `homa-perf` command: see `homa-perf --help`.

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use homa_perf::cluster::{self, ClusterArgs};
use homa_perf::{
    run_client, run_demo, run_loss_matrix, ClientOptions, DemoOptions, LossMatrixOptions, Protocol,
    Server, ServerOptions, SizeDist, SizeSpec, StopRule,
};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Latency and throughput of Homa, TCP and UDP RPCs on loopback.
#[derive(Debug, Parser)]
#[command(name = "homa-perf", version, about)]
struct Cli {
    /// Log more (-v: info, -vv: debug); logs go to stderr.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// Threads that spin at normal priority while the command runs: a busy
    /// host everyone can reproduce (e.g. one per core).
    #[arg(long, global = true, default_value_t = 0, value_name = "N")]
    busy_threads: usize,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Answer RPCs: each response has the size the request asks for.
    Server(ServerArgs),
    /// Send RPCs to a server and report latency percentiles and throughput.
    Client(ClientArgs),
    /// Start servers (each a process of its own) and compare Homa, TCP and
    /// UDP in one table.
    Demo(DemoArgs),
    /// Be one host of a cluster benchmark: serve, and offer Poisson load to
    /// the other hosts (loopback or private addresses only).
    Cluster(ClusterArgs),
    /// Homa echo RPCs on loopback under injected loss (both directions, both
    /// ends): median and p99 latency per loss rate and size.
    Lossmatrix(LossMatrixArgs),
    /// Messages over streams against one RPC per message, in-process on
    /// loopback: messages/s and CPU µs per message.
    Streams(StreamsArgs),
    /// The demo's server process (started by `demo`; not for people).
    #[command(name = "demo-server", hide = true)]
    DemoServer(DemoServerArgs),
}

#[derive(Debug, Args)]
struct DemoServerArgs {
    #[arg(long, value_enum)]
    protocol: Protocol,
    #[arg(long)]
    threads: usize,
    #[arg(long)]
    busy_poll: bool,
    /// The Homa configuration as JSON.
    #[arg(long)]
    config_json: String,
}

#[derive(Debug, Args)]
struct StreamsArgs {
    /// Streams (or RPC callers) at once.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Message size (bytes).
    #[arg(long, default_value_t = 100)]
    size: usize,
    /// Length of each mode's run (s).
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Homa runtime configuration (TOML); default: tuned for loopback.
    #[arg(long, value_name = "FILE.toml")]
    config: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct LossMatrixArgs {
    /// Loss rates in percent (each end drops this fraction of the packets
    /// it sends, so each direction loses it).
    #[arg(long, value_delimiter = ',', default_value = "0,5,10,20")]
    losses: Vec<f64>,
    /// Message sizes in bytes (requests and responses alike).
    #[arg(long, value_delimiter = ',', default_value = "100,30000,1000000")]
    sizes: Vec<usize>,
    /// RPCs per cell.
    #[arg(long, default_value_t = 200)]
    count: u64,
    /// Uncounted RPCs run first in each cell.
    #[arg(long, default_value_t = 5)]
    warmup: u64,
    /// Time limit of a cell: RPCs outstanding then are reported as
    /// censored, RPCs not started as not run.
    #[arg(long, default_value_t = 60.0)]
    cell_seconds: f64,
    /// The extra row's RPCs outstanding at once; 0 skips the row.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// The extra row's loss rate (%).
    #[arg(long, default_value_t = 20.0)]
    concurrent_loss: f64,
    /// The extra row's message size (bytes).
    #[arg(long, default_value_t = 1_000_000)]
    concurrent_size: usize,
    /// Seed of the fault injection.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print one JSON object instead of a markdown table.
    #[arg(long)]
    json: bool,
    /// Homa runtime configuration (TOML); default: tuned for loopback.
    #[arg(long, value_name = "FILE.toml")]
    config: Option<PathBuf>,
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
    /// CPU time (µs, at most 1,000,000) spent in a busy loop on each
    /// request before it is answered: an application's own work, which
    /// several server threads can do at once.
    #[arg(long, value_name = "US", default_value_t = 0)]
    work_us: u64,
    /// Homa runtime configuration (TOML); default: tuned for loopback.
    #[arg(long, value_name = "FILE.toml")]
    config: Option<PathBuf>,
    /// Homa: microseconds a waiting thread polls before it sleeps,
    /// overriding the configuration's `poll_us` (0: sleeps at once).
    #[arg(long, value_name = "US")]
    poll_us: Option<u64>,
    /// Stop after this many seconds (default: run until SIGINT/SIGTERM).
    #[arg(long, value_name = "S")]
    duration: Option<f64>,
    /// Homa: print the protocol's metrics and the runtime's counters as
    /// one line of JSON on stdout when the server stops.
    #[arg(long)]
    print_metrics: bool,
    /// Homa: also print them every SECS seconds (implies --print-metrics).
    #[arg(long, value_name = "SECS")]
    metrics_every: Option<f64>,
}

#[derive(Debug, Args)]
struct ClientArgs {
    /// The server's loopback address.
    #[arg(long)]
    server: SocketAddr,
    /// Transport.
    #[arg(long, value_enum, default_value_t = Protocol::Homa)]
    protocol: Protocol,
    /// Request size in bytes (default 100 when no --workload is given). At
    /// most 16 MiB for Homa (the loopback configuration's
    /// `core.max_message_size`; a --config may change it), 65,000 B for
    /// UDP; checked before anything runs.
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
    /// Homa: microseconds a waiting thread polls before it sleeps,
    /// overriding the configuration's `poll_us` (0: sleeps at once).
    #[arg(long, value_name = "US")]
    poll_us: Option<u64>,
    /// One thread keeps --concurrency RPCs outstanding instead of one
    /// thread per RPC: Homa with send_request/recv_any_response, TCP with
    /// --concurrency nonblocking connections under one epoll (not for UDP).
    #[arg(long)]
    pipelined: bool,
    /// Homa: each client thread has an endpoint of its own, as separate
    /// client processes would (TCP's clients each have a connection),
    /// instead of all sharing one.
    #[arg(long, conflicts_with = "pipelined")]
    endpoint_per_client: bool,
    /// Homa: sockets on the client endpoint's address steered by RPC id
    /// (the runtime configuration's `lanes`; 0 or 1: none): each
    /// thread's call sleeps on a socket of its own while one is free. A
    /// power of two up to 64.
    #[arg(long, value_name = "N")]
    lanes: Option<usize>,
    /// Homa: connect the client's socket to the server (`yes`), as the UDP
    /// and TCP clients' are, or not (`no`); `auto`: when busy-polling
    /// (a connected endpoint's readers sleep in ppoll, not in the receive
    /// call). Only where the configuration allows: UDP, one socket.
    #[arg(long, value_enum, default_value_t = Connect::Auto)]
    connect: Connect,
    /// Give up on an RPC after this many milliseconds (counted as an error).
    #[arg(long, default_value_t = 5_000)]
    timeout_ms: u64,
    /// Seed of the request-size sampling.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// Whether a Homa client's socket is connected to its server.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Connect {
    /// When busy-polling.
    Auto,
    /// Always.
    Yes,
    /// Never.
    No,
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
    /// Run each server as threads of the demo's own process instead of a
    /// process of its own (the demo's way before its thirteenth pass).
    #[arg(long)]
    in_process: bool,
}

fn main() {
    homa_measure::cli::exit_quietly_on_broken_pipe();
    let cli = Cli::parse();
    init_logging(cli.verbose);
    keep_large_allocations();
    if let Err(e) = run(cli) {
        eprintln!("homa-perf: {}", homa_measure::cli::error_line(e.as_ref()));
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

/// `config` with its `poll_us` replaced by `--poll-us`, if given.
fn with_poll_us(mut config: homa::Config, poll_us: Option<u64>) -> homa::Config {
    if let Some(us) = poll_us {
        config.poll_us = us;
    }
    config
}

fn seconds(s: f64, flag: &str) -> Result<Duration> {
    if !(s.is_finite() && s > 0.0 && s <= 1e6) {
        bail!("{flag} must be a positive number of seconds, got {s}");
    }
    Ok(Duration::from_secs_f64(s))
}

fn run(cli: Cli) -> Result<()> {
    if cli.busy_threads > homa_perf::contention::MAX_BUSY_THREADS {
        bail!(
            "--busy-threads must be at most {}, got {}",
            homa_perf::contention::MAX_BUSY_THREADS,
            cli.busy_threads
        );
    }
    // The demo starts (and reports) its own; other commands run under
    // contention started here, before their servers and clients.
    let _busy = match cli.command {
        Command::Demo(_) | Command::DemoServer(_) => None,
        _ => Some(homa_perf::Contention::start(cli.busy_threads)?),
    };
    match cli.command {
        Command::Server(a) => {
            let stop_after = a.duration.map(|d| seconds(d, "--duration")).transpose()?;
            let every = a
                .metrics_every
                .map(|s| seconds(s, "--metrics-every"))
                .transpose()?;
            let print = a.print_metrics || every.is_some();
            if print && a.protocol != Protocol::Homa {
                bail!("--print-metrics and --metrics-every need --protocol homa");
            }
            if a.work_us > 1_000_000 {
                bail!(
                    "--work-us {} is over the limit of 1,000,000 (one second per request)",
                    a.work_us
                );
            }
            let work = Duration::from_micros(a.work_us);
            // Before any thread starts, so that every thread inherits the
            // mask and only sigtimedwait below sees these signals.
            let signals = StopSignals::block()?;
            let server = Server::start(&ServerOptions {
                protocol: a.protocol,
                bind: a.bind,
                threads: a.threads,
                busy_poll: a.busy_poll,
                homa_config: with_poll_us(homa_config(a.config.as_ref())?, a.poll_us),
                work_per_request: work,
            })?;
            eprintln!(
                "homa-perf: {} server on {}{}",
                a.protocol,
                server.local_addr(),
                if a.busy_poll { " (busy-poll)" } else { "" }
            );
            let start = Instant::now();
            let end = stop_after.map(|d| start + d);
            let mut next_print = every.map(|e| start + e);
            loop {
                let now = Instant::now();
                let until = [end, next_print].into_iter().flatten().min();
                let wait = until.map(|t| t.saturating_duration_since(now));
                if let Some(sig) = signals.wait(wait) {
                    eprintln!("homa-perf: signal {sig}, stopping");
                    break;
                }
                let now = Instant::now();
                if end.is_some_and(|e| now >= e) {
                    break;
                }
                if let (Some(t), Some(e)) = (next_print, every) {
                    if now >= t {
                        print_server_metrics(&server, start, false);
                        next_print = Some(t + e);
                    }
                }
            }
            if print {
                print_server_metrics(&server, start, true);
            }
            server.shutdown();
            Ok(())
        }
        Command::Lossmatrix(a) => {
            let mut opts = LossMatrixOptions::new();
            opts.losses = a.losses;
            opts.sizes = a.sizes;
            opts.count = a.count;
            opts.warmup = a.warmup;
            opts.cell_limit = seconds(a.cell_seconds, "--cell-seconds")?;
            opts.concurrent = (a.concurrency > 0).then_some((
                a.concurrency,
                a.concurrent_loss,
                a.concurrent_size,
            ));
            opts.seed = a.seed;
            opts.homa_config = homa_config(a.config.as_ref())?;
            let m = run_loss_matrix(&opts, &mut |line| eprintln!("{line}"))?;
            if a.json {
                println!("{}", m.to_json_string());
            } else {
                print!("{}", m.to_markdown());
            }
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
            opts.homa_config = with_poll_us(homa_config(a.config.as_ref())?, a.poll_us);
            if let Some(n) = a.lanes {
                opts.homa_config.lanes = n;
                opts.homa_config.check().context("--lanes")?;
            }
            opts.pipelined = a.pipelined;
            opts.homa_endpoint_per_client = a.endpoint_per_client;
            opts.homa_connect = match a.connect {
                Connect::Auto => None,
                Connect::Yes => Some(true),
                Connect::No => Some(false),
            };
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
                busy_threads: cli.busy_threads,
                server_exe: if a.in_process {
                    None
                } else {
                    Some(
                        std::env::current_exe()
                            .context("cannot find this program to start the servers")?,
                    )
                },
            })?;
            if a.json {
                if let Some(w) = &result.warning {
                    eprintln!("homa-perf: {w}");
                }
                println!("{}", result.to_json_string());
            } else {
                print!("{}", result.to_table());
            }
            Ok(())
        }
        Command::DemoServer(a) => {
            let homa_config: homa::Config = serde_json::from_str(&a.config_json)
                .context("--config-json is not a Homa configuration")?;
            homa_perf::child_server::serve_for_parent(
                &homa_perf::child_server::ChildServerOptions {
                    protocol: a.protocol,
                    threads: a.threads,
                    busy_poll: a.busy_poll,
                    homa_config,
                },
            )?;
            Ok(())
        }
        Command::Streams(a) => {
            let o = homa_perf::streams::StreamsOptions {
                concurrency: a.concurrency,
                size: a.size,
                seconds: a.seconds,
                config: homa_config(a.config.as_ref())?,
            };
            let r = homa_perf::streams::run_streams(&o)?;
            print!("{}", homa_perf::streams::streams_table(&o, &r));
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

/// Prints a Homa server's metrics and runtime counters as one JSON line.
fn print_server_metrics(server: &Server, start: Instant, last: bool) {
    if let Some(mut v) = server.homa_report() {
        v["elapsed_s"] = serde_json::json!((start.elapsed().as_secs_f64() * 1e3).round() / 1e3);
        v["final"] = serde_json::json!(last);
        println!("{v}");
    }
}

/// SIGINT and SIGTERM, blocked in every thread and taken synchronously by
/// the main thread, so that the server stops cleanly (and can print its
/// metrics) instead of dying.
struct StopSignals(libc::sigset_t);

impl StopSignals {
    fn block() -> Result<StopSignals> {
        // SAFETY: sigset_t is plain data that sigemptyset initialises;
        // pthread_sigmask only changes this thread's signal mask.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGINT);
            libc::sigaddset(&mut set, libc::SIGTERM);
            let r = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            if r != 0 {
                bail!(
                    "cannot block SIGINT/SIGTERM: {}",
                    std::io::Error::from_raw_os_error(r)
                );
            }
            Ok(StopSignals(set))
        }
    }

    /// Waits up to `timeout` (for ever if `None`) for one of the signals;
    /// returns its number, or `None` when the time is up.
    fn wait(&self, timeout: Option<Duration>) -> Option<i32> {
        let end = timeout.map(|t| Instant::now() + t);
        loop {
            let left = end.map(|e| e.saturating_duration_since(Instant::now()));
            if left.is_some_and(|l| l.is_zero()) {
                return None;
            }
            // Wake up now and then even without a timeout: harmless, and it
            // keeps the timespec small.
            let slice = left
                .unwrap_or(Duration::from_secs(3_600))
                .min(Duration::from_secs(3_600));
            let ts = libc::timespec {
                tv_sec: slice.as_secs() as libc::time_t,
                tv_nsec: slice.subsec_nanos() as libc::c_long,
            };
            // SAFETY: the set was initialised in `block`; a null siginfo
            // pointer is allowed; ts lives across the call.
            let r = unsafe { libc::sigtimedwait(&self.0, std::ptr::null_mut(), &ts) };
            if r > 0 {
                return Some(r);
            }
            // EAGAIN (time up for this slice) or EINTR: look again.
        }
    }
}
