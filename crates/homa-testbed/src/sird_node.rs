//! `testbed sird-node`: one host of a `testbed sird` experiment.
//!
//! Every node binds one Homa endpoint (client and server share it, so one
//! pacer sees everything the host sends) and serves: each request gets an
//! 8-byte reply. A node with targets also runs one closed-loop client per
//! target: one RPC of `--size` bytes outstanding at a time, the next sent
//! when the previous one's reply arrives.
//!
//! All nodes share one clock (the machine's): the experiment starts at
//! `--start-unix-ms`, the window measured is `[start + warmup, start +
//! warmup + seconds)`, and each node writes a JSON [`NodeOutcome`] at the
//! end.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, Context, Result};
use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// Bytes of every reply (the paper's 8-byte replies and probes).
pub const REPLY_BYTES: usize = 8;

/// Seconds the servers keep serving after the window, so that the clients'
/// last RPCs are answered and nobody sees a vanished peer.
pub const LINGER_S: f64 = 0.5;

/// Options of `testbed sird-node`.
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct NodeArgs {
    /// Address of this node's endpoint.
    #[arg(long)]
    pub me: SocketAddr,
    /// Homa runtime configuration (TOML).
    #[arg(long)]
    pub config: PathBuf,
    /// Servers to load in closed loop, one RPC outstanding to each.
    #[arg(long, value_delimiter = ',')]
    pub targets: Vec<SocketAddr>,
    /// Request size of this node's clients (bytes).
    #[arg(long, default_value_t = REPLY_BYTES as u64)]
    pub size: u64,
    /// Keep every round-trip time of the window (the prober).
    #[arg(long)]
    pub record_rtts: bool,
    /// When the experiment starts (ms since the Unix epoch).
    #[arg(long)]
    pub start_unix_ms: u64,
    /// Seconds between the start and the measured window.
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    /// Length of the measured window (s).
    #[arg(long)]
    pub seconds: f64,
    /// Where to write the outcome (JSON).
    #[arg(long)]
    pub out: PathBuf,
}

impl NodeArgs {
    /// The command-line arguments that reproduce these options.
    pub fn to_args(&self) -> Vec<String> {
        let mut v = vec![
            "--me".to_string(),
            self.me.to_string(),
            "--config".into(),
            self.config.display().to_string(),
            "--size".into(),
            self.size.to_string(),
            "--start-unix-ms".into(),
            self.start_unix_ms.to_string(),
            "--warmup".into(),
            self.warmup.to_string(),
            "--seconds".into(),
            self.seconds.to_string(),
            "--out".into(),
            self.out.display().to_string(),
        ];
        if !self.targets.is_empty() {
            v.push("--targets".into());
            v.push(
                self.targets
                    .iter()
                    .map(|t| t.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            );
        }
        if self.record_rtts {
            v.push("--record-rtts".into());
        }
        v
    }
}

/// What one closed-loop client did in the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientOutcome {
    /// The server it loaded.
    pub target: String,
    /// Request size (bytes).
    pub size: u64,
    /// RPCs completed in the window.
    pub completed: u64,
    /// RPCs that failed (any time).
    pub errors: u64,
    /// Round-trip times of the window's RPCs (ns), if recorded.
    pub rtts_ns: Vec<u64>,
}

/// What one node did: its configuration as the endpoint saw it, the
/// requests it served and its clients' RPCs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeOutcome {
    /// This node's address.
    pub me: String,
    /// The endpoint's design: "homa" or "sird".
    pub design: String,
    /// The endpoint's `sird.pace_credit`.
    pub pace_credit: bool,
    /// The endpoint's `sird.sender_threshold`.
    pub sender_threshold: u32,
    /// The endpoint's `sird.priorities`.
    pub sird_priorities: bool,
    /// The endpoint's `num_priorities`.
    pub num_priorities: u8,
    /// Length of the window (s).
    pub window_s: f64,
    /// Requests this node's server completed in the window.
    pub served: u64,
    /// Request bytes this node's server received in the window.
    pub served_bytes: u64,
    /// `served_bytes` by client IP address.
    pub served_bytes_by_peer: BTreeMap<String, u64>,
    /// One entry per target.
    pub clients: Vec<ClientOutcome>,
    /// Packets received with CE marks (SIRD mode; 0 without a marking
    /// switch).
    pub ce_received: u64,
    /// Packets the kernel refused to send.
    pub send_drops: u64,
    /// CPU time this process used, user plus system (s), over its life.
    pub cpu_s: f64,
}

/// User plus system CPU time of this process so far (s).
fn own_cpu_s() -> f64 {
    // SAFETY: getrusage writes into the struct we pass and has no other
    // preconditions.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return f64::NAN;
    }
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

fn unix_now() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// The `Instant` of a Unix time (ms); instants cannot come before the
/// process's own clock, so a time in the past maps to now minus the gap.
fn instant_of(unix_ms: u64) -> Instant {
    let target = Duration::from_millis(unix_ms);
    let now_unix = unix_now();
    let now = Instant::now();
    if target >= now_unix {
        now + (target - now_unix)
    } else {
        now.checked_sub(now_unix - target).unwrap_or(now)
    }
}

/// Runs a node until the window (plus [`LINGER_S`]) is over and writes its
/// outcome.
pub fn run(args: &NodeArgs) -> Result<NodeOutcome> {
    let config = homa::Config::from_toml_file(&args.config)
        .map_err(|e| anyhow!("{}: {e}", args.config.display()))?;
    let core = config.core.clone();
    let ep = homa::Endpoint::bind(args.me, config)
        .map_err(|e| anyhow!("cannot bind a Homa endpoint at {}: {e}", args.me))?;
    let start = instant_of(args.start_unix_ms);
    let window_start = start + Duration::from_secs_f64(args.warmup);
    let window_end = window_start + Duration::from_secs_f64(args.seconds);
    let stop_at = window_end + Duration::from_secs_f64(LINGER_S);
    let stop = Arc::new(AtomicBool::new(false));

    let server = {
        let (ep, stop) = (ep.clone(), stop.clone());
        std::thread::Builder::new()
            .name("sird-server".into())
            .spawn(move || serve(&ep, &stop, window_start, window_end))?
    };
    let mut clients = Vec::new();
    for &target in &args.targets {
        let ep = ep.clone();
        let size = args.size;
        let record = args.record_rtts;
        clients.push(
            std::thread::Builder::new()
                .name(format!("sird-client-{target}"))
                .spawn(move || {
                    client(&ep, target, size, record, start, window_start, window_end)
                })?,
        );
    }
    let mut outcomes = Vec::new();
    for c in clients {
        outcomes.push(
            c.join()
                .map_err(|_| anyhow!("a client thread panicked"))??,
        );
    }
    std::thread::sleep(stop_at.saturating_duration_since(Instant::now()));
    stop.store(true, Ordering::SeqCst);
    let (served, served_bytes, by_peer) = server
        .join()
        .map_err(|_| anyhow!("the server thread panicked"))?;
    let stats = ep.runtime_stats();
    ep.shutdown();
    let outcome = NodeOutcome {
        me: args.me.to_string(),
        design: format!("{:?}", core.design).to_ascii_lowercase(),
        pace_credit: core.sird.pace_credit,
        sender_threshold: core.sird.sender_threshold,
        sird_priorities: core.sird.priorities,
        num_priorities: core.num_priorities,
        window_s: args.seconds,
        served,
        served_bytes,
        served_bytes_by_peer: by_peer,
        clients: outcomes,
        ce_received: stats.ce_received,
        send_drops: stats.send_drops,
        cpu_s: own_cpu_s(),
    };
    let text = serde_json::to_string(&outcome)?;
    std::fs::write(&args.out, text)
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    Ok(outcome)
}

type Served = (u64, u64, BTreeMap<String, u64>);

fn serve(ep: &homa::Endpoint, stop: &AtomicBool, from: Instant, to: Instant) -> Served {
    let reply = Bytes::from_static(&[0u8; REPLY_BYTES]);
    let (mut n, mut bytes) = (0u64, 0u64);
    let mut by_peer: BTreeMap<String, u64> = BTreeMap::new();
    while !stop.load(Ordering::SeqCst) {
        match ep.recv_request(Some(Duration::from_millis(50))) {
            Ok(req) => {
                let now = Instant::now();
                if now >= from && now < to {
                    n += 1;
                    bytes += req.message.len() as u64;
                    *by_peer.entry(req.id.peer.ip().to_string()).or_default() +=
                        req.message.len() as u64;
                }
                let _ = ep.reply(req.id, reply.clone());
            }
            Err(homa::Error::Timeout) => {}
            Err(_) => break,
        }
    }
    (n, bytes, by_peer)
}

fn client(
    ep: &homa::Endpoint,
    target: SocketAddr,
    size: u64,
    record: bool,
    start: Instant,
    from: Instant,
    to: Instant,
) -> Result<ClientOutcome> {
    let request = Bytes::from(vec![0u8; usize::try_from(size).unwrap_or(usize::MAX)]);
    let mut out = ClientOutcome {
        target: target.to_string(),
        size,
        ..Default::default()
    };
    std::thread::sleep(start.saturating_duration_since(Instant::now()));
    // The servers bound their endpoints before the start; a tiny RPC
    // proves this one answers.
    let ready_by = start + Duration::from_secs(10);
    loop {
        match ep.call(
            target,
            Bytes::from_static(&[0u8; 8]),
            Duration::from_millis(200),
        ) {
            Ok(_) => break,
            Err(e) if Instant::now() >= ready_by => {
                return Err(anyhow!("server {target} did not answer within 10 s: {e}"))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    while Instant::now() < to {
        let sent = Instant::now();
        let id = match ep.send_request(target, request.clone()) {
            Ok(id) => id,
            Err(e) => {
                out.errors += 1;
                if out.errors > 1000 {
                    return Err(anyhow!("send_request to {target} keeps failing: {e}"));
                }
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
        };
        // Wait until the reply comes or the window (plus a grace) ends.
        let patience = (to + Duration::from_secs_f64(LINGER_S / 2.0))
            .saturating_duration_since(Instant::now());
        match ep.recv_response(id, Some(patience)) {
            Ok(_) => {
                let done = Instant::now();
                if done >= from && done < to {
                    out.completed += 1;
                    if record {
                        out.rtts_ns
                            .push(done.duration_since(sent).as_nanos() as u64);
                    }
                }
            }
            Err(homa::Error::Timeout) => {
                let _ = ep.abort(id);
                break;
            }
            Err(_) => {
                let _ = ep.abort(id);
                out.errors += 1;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        a: NodeArgs,
    }

    #[test]
    fn node_args_round_trip_through_the_command_line() {
        let a = NodeArgs {
            me: "10.111.0.1:4000".parse().unwrap(),
            config: "/tmp/x.toml".into(),
            targets: vec![
                "10.111.0.2:4000".parse().unwrap(),
                "10.111.0.3:4000".parse().unwrap(),
            ],
            size: 1_000_000,
            record_rtts: true,
            start_unix_ms: 123,
            warmup: 0.5,
            seconds: 2.0,
            out: "/tmp/o.json".into(),
        };
        let mut argv = vec!["x".to_string()];
        argv.extend(a.to_args());
        let b = Wrap::try_parse_from(argv).unwrap().a;
        assert_eq!(a, b);
    }

    #[test]
    fn instants_of_unix_times_keep_their_order() {
        let now = unix_now().as_millis() as u64;
        let a = instant_of(now + 500);
        let b = instant_of(now + 1500);
        let d = b.duration_since(a);
        assert!(d >= Duration::from_millis(990) && d <= Duration::from_millis(1010));
        assert!(instant_of(now.saturating_sub(10_000)) <= Instant::now());
    }
}
