//! `homa-perf demo`: the project's headline comparison in one command.
//!
//! Starts each server on 127.0.0.1 (a fresh one for every run, on an
//! ephemeral port), by default as a process of its own (closer to two
//! hosts, and each side's CPU time measured apart; see
//! [`crate::child_server`]) or else as threads of this process, runs the
//! client against it, stops it, and prints one table plus the ratios the
//! project tracks. Rows compared with each
//! other run interleaved in rounds, so that the machine's slow spells hit
//! them alike:
//! - 100 B RPCs, one outstanding, Homa/TCP/UDP, blocking and busy-poll;
//! - 500 KB requests (100 B responses), Homa and TCP, 1 and 4 outstanding.

use crate::child_server::{ChildServer, ChildServerOptions};
use crate::client::{measure, ClientOptions, Measured};
pub use crate::demo_ratios::Ratio;
use crate::demo_ratios::{ratios as ratios_of, set_spread};
use crate::error::PerfError;
use crate::proto::Protocol;
use crate::server::{Server, ServerOptions};
use crate::stats::{fmt_us, Recorder, Report, RunLabel};
use crate::worker::StopRule;
use crate::workload::SizeSpec;
use serde::Serialize;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Request size of the latency measurements (bytes).
pub const LATENCY_SIZE: usize = 100;
/// Request size of the throughput measurements (bytes).
pub const THROUGHPUT_SIZE: usize = 500_000;
/// Closed-loop clients of one server in the "clients" rows.
pub const MANY_CLIENTS: usize = 64;

/// What the demo runs.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// Measured time of each row (split over the rounds).
    pub seconds: f64,
    /// Rows that are compared with each other run interleaved, in this many
    /// rounds of `seconds / rounds` each, so that a slow spell of the
    /// machine hits all of them alike.
    pub rounds: u32,
    /// Homa runtime configuration of both ends.
    pub homa_config: homa::Config,
    /// Threads spinning at normal priority for the whole demo (a busy
    /// host; see [`crate::contention`]).
    pub busy_threads: usize,
    /// The `homa-perf` program to start each server with, as a process of
    /// its own; `None` runs the servers as threads of this process.
    pub server_exe: Option<std::path::PathBuf>,
}

impl DemoOptions {
    /// `seconds` per row in 4 rounds, `homa::Config::loopback()`, servers
    /// in this process.
    pub fn new(seconds: f64) -> DemoOptions {
        DemoOptions {
            seconds,
            rounds: 4,
            homa_config: homa::Config::loopback(),
            busy_threads: 0,
            server_exe: None,
        }
    }
}

/// One measurement of the demo.
#[derive(Debug, Clone, Serialize)]
pub struct DemoRow {
    /// `latency` or `throughput`.
    pub test: &'static str,
    /// Transport.
    pub protocol: &'static str,
    /// Busy polling on both ends.
    pub busy_poll: bool,
    /// Homa with `poll_us = 0` on both ends (sleeps without polling first).
    pub no_poll: bool,
    /// One client thread keeps all RPCs outstanding (Homa:
    /// `send_request` + `recv_any_response`; TCP: a nonblocking connection
    /// per RPC under one epoll) instead of a thread per RPC.
    pub pipelined: bool,
    /// Outstanding RPCs.
    pub concurrency: usize,
    /// Request size (bytes).
    pub size: usize,
    /// The client's report, when the measurement worked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report: Option<Report>,
    /// CPU time per RPC (µs), both ends together (for TCP and UDP it
    /// includes the kernel work charged to them), from getrusage, less the
    /// busy threads' own; warm-up RPCs' CPU is counted but not the RPCs
    /// (under 1%).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_us_per_rpc: Option<f64>,
    /// The server's part of `cpu_us_per_rpc` (µs), when it ran as a process
    /// of its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_cpu_us_per_rpc: Option<f64>,
    /// Why the measurement failed, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Everything the demo measured.
#[derive(Debug, Clone, Serialize)]
pub struct DemoResult {
    /// Measured seconds per row.
    pub seconds: f64,
    /// Interleaved rounds per row.
    pub rounds: u32,
    /// How long a waiting Homa thread polls before it sleeps in the
    /// "blocking" rows (the configuration's `poll_us`).
    pub homa_poll_us: u64,
    /// Threads that spun at normal priority throughout (0: a quiet host).
    pub busy_threads: usize,
    /// `process`: each server ran as a process of its own; `thread`: as
    /// threads of the demo's process.
    pub servers: &'static str,
    /// Wall-clock time of the whole demo (s).
    pub total_s: f64,
    /// What the host was doing just before the measurements.
    pub host: crate::host::HostLoad,
    /// Set when other work kept the CPUs busy: the figures are not those
    /// of a quiet machine.
    pub warning: Option<String>,
    /// The measurements, in table order.
    pub rows: Vec<DemoRow>,
    /// The ratios the project tracks.
    pub ratios: Vec<Ratio>,
}

/// One row to measure.
#[derive(Debug, Clone, Copy)]
struct Spec {
    test: &'static str,
    protocol: Protocol,
    busy_poll: bool,
    /// Homa only: `poll_us = 0`, so that waiting threads sleep at once
    /// instead of polling first (the runtime's default polls 50 µs, like
    /// Homa/Linux); the like-for-like comparison with blocking TCP/UDP.
    no_poll: bool,
    /// One client thread keeps all RPCs outstanding (Homa and TCP).
    pipelined: bool,
    concurrency: usize,
    size: usize,
}

/// The rows, in groups whose members are compared with each other.
fn groups() -> Vec<Vec<Spec>> {
    let latency = |protocol, busy_poll, no_poll| Spec {
        test: "latency",
        protocol,
        busy_poll,
        no_poll,
        pipelined: false,
        concurrency: 1,
        size: LATENCY_SIZE,
    };
    let mut groups = vec![
        vec![
            latency(Protocol::Homa, false, false),
            latency(Protocol::Homa, false, true),
            latency(Protocol::Tcp, false, false),
            latency(Protocol::Udp, false, false),
        ],
        vec![
            latency(Protocol::Homa, true, false),
            latency(Protocol::Tcp, true, false),
            latency(Protocol::Udp, true, false),
        ],
    ];
    let throughput = |protocol, pipelined, concurrency| Spec {
        test: "throughput",
        protocol,
        busy_poll: false,
        no_poll: false,
        pipelined,
        concurrency,
        size: THROUGHPUT_SIZE,
    };
    groups.push(vec![
        throughput(Protocol::Homa, false, 1),
        throughput(Protocol::Tcp, false, 1),
    ]);
    // Several outstanding, two ways for each transport: one thread keeps
    // them all outstanding (Homa on one socket; TCP on a connection each
    // under one epoll), or a thread per RPC (Homa's threads share an
    // endpoint; TCP's each have a connection).
    groups.push(vec![
        throughput(Protocol::Homa, true, 4),
        throughput(Protocol::Tcp, true, 4),
        throughput(Protocol::Homa, false, 4),
        throughput(Protocol::Tcp, false, 4),
    ]);
    // Many clients of one server: 64 closed-loop clients of 100 B RPCs,
    // driven by one thread or by a thread each.
    let clients = |protocol, pipelined| Spec {
        test: "clients",
        protocol,
        busy_poll: false,
        no_poll: false,
        pipelined,
        concurrency: MANY_CLIENTS,
        size: LATENCY_SIZE,
    };
    groups.push(vec![
        clients(Protocol::Homa, true),
        clients(Protocol::Tcp, true),
        clients(Protocol::Homa, false),
        clients(Protocol::Tcp, false),
    ]);
    groups
}

/// What has been measured of one row so far.
struct Accumulated {
    recorder: Recorder,
    elapsed: Duration,
    /// CPU time of both ends (busy threads excluded) while the client ran,
    /// warm-up included (ns).
    cpu_ns: u64,
    /// The server process's part of `cpu_ns` (ns; 0 for in-process servers).
    server_cpu_ns: u64,
    homa_metrics: Option<serde_json::Value>,
    error: Option<String>,
}

/// Runs every measurement. Individual failures become rows with an error;
/// only an invalid option fails the whole demo.
pub fn run_demo(opts: &DemoOptions) -> Result<DemoResult, PerfError> {
    if !(opts.seconds.is_finite() && opts.seconds > 0.0 && opts.seconds <= 600.0) {
        return Err(PerfError::Usage(
            "--seconds must be a positive number of seconds (at most 600)".into(),
        ));
    }
    if !(1..=100).contains(&opts.rounds) {
        return Err(PerfError::Usage(
            "--rounds must be between 1 and 100".into(),
        ));
    }
    let slice = Duration::from_secs_f64(opts.seconds / f64::from(opts.rounds));
    // Before our own busy threads start: whatever runs now is other work.
    let host = crate::host::HostLoad::sample(Duration::from_millis(300));
    let busy = crate::Contention::start(opts.busy_threads)?;
    let began = Instant::now();
    let mut rows = Vec::new();
    // The same rows, each from one round's slice alone.
    let mut round_rows: Vec<Vec<DemoRow>> = vec![Vec::new(); opts.rounds as usize];
    let processes = opts.server_exe.is_some();
    for group in groups() {
        let mut acc: Vec<Accumulated> = group
            .iter()
            .map(|_| Accumulated {
                recorder: Recorder::new(false),
                elapsed: Duration::ZERO,
                cpu_ns: 0,
                server_cpu_ns: 0,
                homa_metrics: None,
                error: None,
            })
            .collect();
        for (round, this_round) in round_rows.iter_mut().enumerate() {
            let mut slices: Vec<Option<DemoRow>> = vec![None; group.len()];
            // Rotate the order so that no row always runs first.
            for k in 0..group.len() {
                let i = (k + round) % group.len();
                if acc[i].error.is_some() {
                    continue;
                }
                match measure_slice(opts, &group[i], slice, &busy) {
                    Ok((m, cpu)) => {
                        let both = cpu.client_ns + cpu.server_ns;
                        let report = Report::new(label(&group[i]), &m.recorder, m.elapsed);
                        slices[i] = Some(row(
                            &group[i],
                            Some(report),
                            both,
                            processes.then_some(cpu.server_ns),
                            None,
                        ));
                        acc[i].recorder.merge(&m.recorder);
                        acc[i].elapsed += m.elapsed;
                        acc[i].cpu_ns += both;
                        acc[i].server_cpu_ns += cpu.server_ns;
                        acc[i].homa_metrics = m.homa_metrics;
                    }
                    Err(e) => {
                        tracing::warn!("demo: {} {} failed: {e}", group[i].test, group[i].protocol);
                        acc[i].error = Some(e.to_string());
                    }
                }
            }
            this_round.extend(slices.into_iter().flatten());
        }
        for (spec, a) in group.iter().zip(acc) {
            let report = a.error.is_none().then(|| {
                let mut r = Report::new(label(spec), &a.recorder, a.elapsed);
                r.homa_metrics = a.homa_metrics;
                r
            });
            rows.push(row(
                spec,
                report,
                a.cpu_ns,
                processes.then_some(a.server_cpu_ns),
                a.error,
            ));
        }
    }
    let mut ratios = ratios_of(&rows);
    if opts.rounds > 1 {
        let per_round: Vec<Vec<Ratio>> = round_rows.iter().map(|r| ratios_of(r)).collect();
        set_spread(&mut ratios, &per_round);
    }
    Ok(DemoResult {
        seconds: opts.seconds,
        rounds: opts.rounds,
        homa_poll_us: opts.homa_config.poll_us,
        busy_threads: opts.busy_threads,
        servers: if opts.server_exe.is_some() {
            "process"
        } else {
            "thread"
        },
        total_s: (began.elapsed().as_secs_f64() * 10.0).round() / 10.0,
        warning: host.warning(),
        host,
        rows,
        ratios,
    })
}

/// How a row's report is labelled.
fn label(spec: &Spec) -> RunLabel {
    RunLabel {
        protocol: spec.protocol.name().to_string(),
        busy_poll: spec.busy_poll,
        concurrency: spec.concurrency,
        size: Some(spec.size),
        workload: None,
        response_size: LATENCY_SIZE,
    }
}

/// A row of the table: `spec` measured as `report` with `cpu_ns` of both
/// ends' CPU time, `server_ns` of it the server process's (`None` with
/// in-process servers).
fn row(
    spec: &Spec,
    report: Option<Report>,
    cpu_ns: u64,
    server_ns: Option<u64>,
    error: Option<String>,
) -> DemoRow {
    let rpcs = report.as_ref().map_or(0, |r| r.rpcs);
    let per_rpc = |ns: u64| ns as f64 / 1e3 / rpcs as f64;
    DemoRow {
        cpu_us_per_rpc: (rpcs > 0).then(|| per_rpc(cpu_ns)),
        server_cpu_us_per_rpc: server_ns.filter(|_| rpcs > 0).map(per_rpc),
        test: spec.test,
        protocol: spec.protocol.name(),
        busy_poll: spec.busy_poll,
        no_poll: spec.no_poll,
        pipelined: spec.pipelined,
        concurrency: spec.concurrency,
        size: spec.size,
        report,
        error,
    }
}

/// CPU time of one slice (ns).
struct SliceCpu {
    /// This process's, less the busy threads' (with in-process servers,
    /// both ends).
    client_ns: u64,
    /// The server process's (0 with in-process servers).
    server_ns: u64,
}

/// A server of one slice, in this process or a process of its own.
enum SliceServer {
    Thread(Server),
    Process(ChildServer),
}

impl SliceServer {
    fn start(
        opts: &DemoOptions,
        spec: &Spec,
        homa_config: &homa::Config,
    ) -> Result<SliceServer, PerfError> {
        let threads = server_threads(
            spec,
            std::thread::available_parallelism().map_or(1, |n| n.get()),
        );
        Ok(match &opts.server_exe {
            Some(exe) => SliceServer::Process(ChildServer::start(
                exe,
                &ChildServerOptions {
                    protocol: spec.protocol,
                    threads,
                    busy_poll: spec.busy_poll,
                    homa_config: homa_config.clone(),
                },
            )?),
            None => SliceServer::Thread(Server::start(&ServerOptions {
                protocol: spec.protocol,
                bind: (std::net::Ipv4Addr::LOCALHOST, 0).into(),
                threads,
                busy_poll: spec.busy_poll,
                homa_config: homa_config.clone(),
                work_per_request: Duration::ZERO,
            })?),
        })
    }

    fn local_addr(&self) -> SocketAddr {
        match self {
            SliceServer::Thread(s) => s.local_addr(),
            SliceServer::Process(c) => c.local_addr(),
        }
    }

    /// Stops the server; returns the server process's CPU time while it
    /// served (ns), or 0 for a server in this process.
    fn shutdown(self) -> Result<u64, PerfError> {
        match self {
            SliceServer::Thread(s) => {
                s.shutdown();
                Ok(0)
            }
            SliceServer::Process(c) => c.shutdown(),
        }
    }
}

/// One server + client run of `duration`; the server is stopped afterwards
/// (busy-polling servers left running would starve the next row).
fn measure_slice(
    opts: &DemoOptions,
    spec: &Spec,
    duration: Duration,
    busy: &crate::Contention,
) -> Result<(Measured, SliceCpu), PerfError> {
    let mut homa_config = opts.homa_config.clone();
    if spec.no_poll {
        homa_config.poll_us = 0;
    }
    let server = SliceServer::start(opts, spec, &homa_config)?;
    let mut client = ClientOptions::new(spec.protocol, server.local_addr());
    client.sizes = SizeSpec::Fixed(spec.size);
    client.stop = StopRule::Duration(duration);
    client.concurrency = spec.concurrency;
    client.pipelined = spec.pipelined;
    client.busy_poll = spec.busy_poll;
    client.warmup = if spec.size > 10_000 { 10 } else { 100 };
    client.timeout = Duration::from_secs(1);
    client.homa_config = homa_config;
    let (cpu0, busy0) = (crate::contention::process_cpu_ns(), busy.cpu_ns());
    let measured = measure(&client);
    let spent = crate::contention::process_cpu_ns().saturating_sub(cpu0);
    let client_ns = spent.saturating_sub(busy.cpu_ns().saturating_sub(busy0));
    let server_ns = server.shutdown()?;
    measured.map(|m| {
        (
            m,
            SliceCpu {
                client_ns,
                server_ns,
            },
        )
    })
}

/// Homa's server threads for a row on a host of `cpus` CPUs: one per
/// outstanding RPC, up to the CPUs the client leaves free, and at least
/// one. A one-thread client keeps its CPU (it never sleeps while RPCs are
/// outstanding), so it leaves `cpus - 1`; a client with a thread per RPC
/// sleeps while it waits and leaves them all. A spinning server (busy-poll
/// rows) gets one: a spinning thread per RPC would starve a small machine.
/// Measured on two CPUs (docs/runtime-profile.md, eighth pass): beside a
/// one-thread client keeping 4 RPCs of 500 KB outstanding, a second server
/// thread cost Homa a fifth of its throughput; beside 4 threads (500 KB)
/// or 64 threads (100 B) it gained 7–25%. TCP's server has a thread per
/// connection whatever this says.
fn server_threads(spec: &Spec, cpus: usize) -> usize {
    if spec.busy_poll {
        return 1;
    }
    let free = if spec.pipelined {
        cpus.saturating_sub(1)
    } else {
        cpus
    };
    spec.concurrency.min(free).max(1)
}

impl DemoResult {
    /// The result as one JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// The result as one line of JSON, fields in declaration order.
    pub fn to_json_string(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "null".to_string())
    }

    /// One table of all measurements, then the ratios.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let _ =
            writeln!(
            out,
            "homa-perf demo on 127.0.0.1, {} s per row in {} interleaved rounds ({} s in all){}",
            self.seconds,
            self.rounds,
            self.total_s,
            match self.busy_threads {
                0 => String::new(),
                n => format!(", {n} busy thread{} spinning", if n == 1 { "" } else { "s" }),
            }
        );
        let _ = writeln!(out, "{}", self.host.describe());
        let _ = writeln!(
            out,
            "servers: {}",
            if self.servers == "process" {
                "a process of their own (cpu us/rpc: both ends; server: its part)"
            } else {
                "threads of the demo's process (cpu us/rpc: both ends)"
            }
        );
        if let Some(w) = &self.warning {
            let _ = writeln!(out, "{w}");
        }
        let _ = writeln!(
            out,
            "{:<11} {:<5} {:<9} {:>3} {:>7} {:>9} {:>9} {:>9} {:>8} {:>9} {:>6} {:>10} {:>7}",
            "test",
            "proto",
            "mode",
            "out",
            "size",
            "p50 us",
            "p99 us",
            "p99.9 us",
            "Gbit/s",
            "rpc/s",
            "errors",
            "cpu us/rpc",
            "server"
        );
        for r in &self.rows {
            let mode = match (r.busy_poll, r.no_poll, r.pipelined) {
                (true, _, _) => "busy-poll",
                (false, true, _) => "no-poll",
                (false, false, true) => "pipelined",
                (false, false, false) => "blocking",
            };
            let size = if r.size >= 1_000 {
                format!("{}KB", r.size / 1_000)
            } else {
                format!("{}B", r.size)
            };
            match (&r.report, &r.error) {
                (Some(rep), _) => {
                    let _ = writeln!(
                        out,
                        "{:<11} {:<5} {:<9} {:>3} {:>7} {:>9} {:>9} {:>9} {:>8.2} {:>9} {:>6} {:>10} {:>7}",
                        r.test,
                        r.protocol,
                        mode,
                        r.concurrency,
                        size,
                        fmt_us(rep.p50_us),
                        fmt_us(rep.p99_us),
                        fmt_us(rep.p999_us),
                        rep.gbps,
                        rep.rpcs_per_s,
                        rep.errors,
                        r.cpu_us_per_rpc.map_or("-".into(), |c| format!("{c:.1}")),
                        r.server_cpu_us_per_rpc
                            .map_or("-".into(), |c| format!("{c:.1}"))
                    );
                }
                (None, e) => {
                    let _ = writeln!(
                        out,
                        "{:<11} {:<5} {:<9} {:>3} {:>7} FAILED: {}",
                        r.test,
                        r.protocol,
                        mode,
                        r.concurrency,
                        size,
                        e.as_deref().unwrap_or("unknown error")
                    );
                }
            }
        }
        let _ = writeln!(
            out,
            "modes: blocking = TCP/UDP sleep in recv, Homa polls {} us first (its default, like \
             Homa/Linux);\n       no-poll = Homa sleeps at once; busy-poll = every waiter spins;\n       \
             pipelined = one client thread keeps all RPCs outstanding (Homa: blocking waits on one \
             endpoint;\n       TCP: a nonblocking connection per RPC under one epoll)",
            self.homa_poll_us
        );
        let _ = writeln!(
            out,
            "ratios (lower latency ratio / higher throughput ratio is better for homa){}:",
            if self.rounds > 1 {
                "; each round's lowest-highest after it"
            } else {
                ""
            }
        );
        for r in &self.ratios {
            let v = r
                .value
                .map_or_else(|| "-".to_string(), |v| format!("{v:.2}"));
            let spread = match (r.low, r.high) {
                (Some(lo), Some(hi)) => format!("   rounds {lo:.2}-{hi:.2}"),
                _ => String::new(),
            };
            let _ = writeln!(out, "  {:<52} {v:>6}{spread}", r.name);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(busy_poll: bool, pipelined: bool, concurrency: usize) -> Spec {
        Spec {
            test: "t",
            protocol: Protocol::Homa,
            busy_poll,
            no_poll: false,
            pipelined,
            concurrency,
            size: 100,
        }
    }

    #[test]
    fn server_threads_fill_the_cpus_the_client_leaves() {
        // Two CPUs: a one-thread client leaves one; sleeping threads both.
        assert_eq!(server_threads(&spec(false, true, 4), 2), 1);
        assert_eq!(server_threads(&spec(false, true, 64), 2), 1);
        assert_eq!(server_threads(&spec(false, false, 4), 2), 2);
        assert_eq!(server_threads(&spec(false, false, 64), 2), 2);
        assert_eq!(server_threads(&spec(false, false, 1), 2), 1);
        // Sixteen: one per outstanding RPC, up to the CPUs left.
        assert_eq!(server_threads(&spec(false, true, 4), 16), 4);
        assert_eq!(server_threads(&spec(false, false, 4), 16), 4);
        assert_eq!(server_threads(&spec(false, true, 64), 16), 15);
        assert_eq!(server_threads(&spec(false, false, 64), 16), 16);
        // A spinning server has one thread, and every row at least one.
        assert_eq!(server_threads(&spec(true, false, 1), 16), 1);
        assert_eq!(server_threads(&spec(false, false, 1), 1), 1);
    }
}
