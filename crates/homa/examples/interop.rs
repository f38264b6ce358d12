//! The host side of the live Linux Homa interoperability suite
//! (`scripts/linux-interop.sh`, docs/linux-interop.md): an echo client and
//! an echo server over raw IPv4 protocol 146 that print machine-readable
//! results and this endpoint's protocol counters.
//!
//! ```text
//! interop client SERVER_ADDR --sizes LIST [--conc N] [--rounds R]
//!                [--rpc-timeout S] [--expect-ok N] [--max-fail-ms MS]
//!                [--expect-unanswered SIZE] [--stay S] [TIMERS]
//! interop server BIND_ADDR --count N [--linger S] [--idle S] [TIMERS]
//! TIMERS: [--resend-ticks T] [--resend-interval T] [--timeout-resends N]
//!         [--max-overcommit N] [--udp] [--bytedance]
//! ```
//!
//! `--bytedance` runs the endpoint with the ByteDance mode on
//! (`homa::Config::with_bytedance`): its DATA carry the mode's flag, which
//! Linux ignores, and it must never send Linux an RTT_PROBE (Linux would
//! count an unknown packet type).
//!
//! The client sends every size `rounds` times, at most `conc` at once,
//! each payload a xorshift stream of its index, and checks that each
//! response is the exact echo. It exits 0 when every RPC succeeded; with
//! `--expect-ok N` (a peer that goes away after N requests), when at least
//! N succeeded and every other one failed, none later than `--max-fail-ms`
//! after the last success. With `--expect-unanswered SIZE`, RPCs of that
//! size must end by the client's own `--rpc-timeout` (Linux cannot send a
//! 0-byte message: it keeps such an RPC and answers BUSY for ever), and
//! every other RPC must succeed. The server echoes `count` requests, waits up to
//! `--linger` seconds for the clients' acks, and exits 0. Both shut the
//! endpoint down before exiting, which sends the acks they owe. With
//! `--stay S` the client keeps a second raw endpoint (another port) open
//! for S seconds after its own shut down, as a process with other endpoints
//! would: the host then has a protocol-146 socket, so its kernel does not
//! answer Linux's NEED_ACKs with ICMP protocol-unreachable (which makes
//! Linux drop the RPCs), and only the acks sent on shutdown end them.
//!
//! Output lines: `HOMARS RPC OK|FAIL ...`, `HOMARS ECHO ...`, `HOMARS DONE
//! ...`, and `HOMARS METRIC name value` for the counters the suite checks.

use bytes::Bytes;
use homa::{Config, Endpoint, Error, Metrics, RpcId, Transport};
use homa_wire::PacketType;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[path = "support/pattern.rs"]
mod support_pattern;
use support_pattern::pattern;

const USAGE: &str = "usage: interop client SERVER_ADDR --sizes LIST [--conc N] [--rounds R] \
     [--rpc-timeout S] [--expect-ok N] [--max-fail-ms MS] [--expect-unanswered SIZE] [--stay S] [TIMERS]\n       \
     interop server BIND_ADDR --count N [--linger S] [--idle S] [TIMERS]\n       \
     TIMERS: [--resend-ticks T] [--resend-interval T] [--timeout-resends N] [--max-overcommit N] [--udp] [--bytedance]";

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("interop: {e}");
            ExitCode::from(2)
        }
    }
}

/// Command-line options after the mode and address.
#[derive(Default)]
struct Opts {
    flags: BTreeMap<String, String>,
}

impl Opts {
    fn parse(args: &[String]) -> Res<Opts> {
        let mut flags = BTreeMap::new();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let Some(name) = a.strip_prefix("--") else {
                return Err(format!("unexpected argument {a}\n{USAGE}").into());
            };
            if name == "udp" || name == "bytedance" {
                flags.insert(name.to_string(), String::new());
                continue;
            }
            let v = it.next().ok_or(format!("--{name} needs a value"))?;
            flags.insert(name.to_string(), v.clone());
        }
        Ok(Opts { flags })
    }

    fn num<T: std::str::FromStr>(&self, name: &str, default: T) -> Res<T>
    where
        T::Err: std::fmt::Display,
    {
        match self.flags.get(name) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|e| format!("--{name} {v}: {e}").into()),
        }
    }

    fn config(&self) -> Res<Config> {
        let mut c = Config::default();
        c.transport = if self.flags.contains_key("udp") {
            Transport::Udp
        } else {
            Transport::Raw
        };
        c.core.resend_ticks = self.num("resend-ticks", c.core.resend_ticks)?;
        c.core.resend_interval = self.num("resend-interval", c.core.resend_interval)?;
        c.core.timeout_resends = self.num("timeout-resends", c.core.timeout_resends)?;
        // Fewer messages granted at once: the others wait, and their timer
        // rounds probe the sender (who must answer) instead of asking for data.
        c.core.max_overcommit = self.num("max-overcommit", c.core.max_overcommit)?;
        if self.flags.contains_key("bytedance") {
            c = c.with_bytedance();
            let lower = if c.transport == Transport::Raw {
                20
            } else {
                28
            };
            c.core = c.effective_core(lower)?;
            println!(
                "HOMARS MODE bytedance gso_bytes={} gro_bytes={} max_unsched_bytes={}",
                c.core.bytedance.gso_bytes,
                c.core.bytedance.gro_bytes,
                c.core.bytedance.max_unsched_bytes
            );
        }
        Ok(c)
    }
}

fn run() -> Res<bool> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [mode, addr, rest @ ..] = args.as_slice() else {
        return Err(USAGE.into());
    };
    let opts = Opts::parse(rest)?;
    let addr: SocketAddr = addr.parse()?;
    match mode.as_str() {
        "client" => client(addr, &opts),
        "server" => server(addr, &opts),
        _ => Err(USAGE.into()),
    }
}

struct Pending {
    index: u64,
    size: usize,
    start: Instant,
    request: Bytes,
}

fn client(server: SocketAddr, opts: &Opts) -> Res<bool> {
    let sizes: Vec<usize> = opts
        .flags
        .get("sizes")
        .ok_or("--sizes is required")?
        .split(',')
        .map(|s| s.trim().parse())
        .collect::<Result<_, _>>()?;
    let conc: usize = opts.num("conc", 1usize)?.max(1);
    let rounds: usize = opts.num("rounds", 1usize)?.max(1);
    let rpc_timeout = Duration::from_secs_f64(opts.num("rpc-timeout", 30.0)?);
    let expect_ok: Option<usize> = opts.flags.get("expect-ok").map(|v| v.parse()).transpose()?;
    let max_fail_ms: u64 = opts.num("max-fail-ms", 5_000)?;
    let unanswered: Option<usize> = opts
        .flags
        .get("expect-unanswered")
        .map(|v| v.parse())
        .transpose()?;
    let mut unanswered_seen = 0;
    let config = opts.config()?;
    let local: SocketAddr = if server.is_ipv4() {
        "0.0.0.0:0".parse()?
    } else {
        "[::]:0".parse()?
    };
    let stay = Duration::from_secs_f64(opts.num("stay", 0.0)?);
    let bystander = if stay > Duration::ZERO {
        Some(Endpoint::bind(local, config.clone())?)
    } else {
        None
    };
    let ep = Endpoint::bind(local, config)?;
    println!(
        "HOMARS START mode=client local={} server={server} conc={conc} rounds={rounds}",
        ep.local_addr()
    );
    let items: Vec<usize> = sizes
        .iter()
        .flat_map(|&s| std::iter::repeat_n(s, rounds))
        .collect();
    let t0 = Instant::now();
    let mut next = 0;
    let mut pending: BTreeMap<RpcId, Pending> = BTreeMap::new();
    let (mut ok, mut fail) = (0usize, 0usize);
    let mut last_ok: Option<Instant> = None;
    let mut last_fail: Option<Instant> = None;
    let mut bad_errors = 0;
    // Once the server is dead, no new RPC is started (each would wait out
    // the dead-peer bound on its own).
    let mut dead = false;
    while (next < items.len() && !dead) || !pending.is_empty() {
        while next < items.len() && pending.len() < conc && !dead {
            let size = items[next];
            let request = pattern(next as u64, size);
            match ep.send_request(server, request.clone()) {
                Ok(id) => {
                    pending.insert(
                        id,
                        Pending {
                            index: next as u64,
                            size,
                            start: Instant::now(),
                            request,
                        },
                    );
                }
                Err(e) => {
                    fail += 1;
                    println!("HOMARS RPC FAIL size={size} index={next} error=send:{e}");
                }
            }
            next += 1;
        }
        if pending.is_empty() {
            continue;
        }
        let oldest = pending.values().map(|p| p.start).min().expect("pending");
        let wait = (oldest + rpc_timeout).saturating_duration_since(Instant::now());
        match ep.recv_any_response(Some(wait.max(Duration::from_millis(1)))) {
            Ok((id, outcome)) => {
                let Some(p) = pending.remove(&id) else {
                    continue;
                };
                let us = p.start.elapsed().as_micros();
                match outcome {
                    Ok(resp) if resp == p.request => {
                        ok += 1;
                        last_ok = Some(Instant::now());
                        println!("HOMARS RPC OK size={} index={} us={us}", p.size, p.index);
                    }
                    Ok(resp) => {
                        fail += 1;
                        bad_errors += 1;
                        let at = resp
                            .iter()
                            .zip(p.request.iter())
                            .position(|(a, b)| a != b)
                            .unwrap_or(resp.len().min(p.request.len()));
                        println!(
                            "HOMARS RPC FAIL size={} index={} us={us} error=mismatch:len={}:offset={at}",
                            p.size,
                            p.index,
                            resp.len()
                        );
                    }
                    Err(e) => {
                        fail += 1;
                        last_fail = Some(Instant::now());
                        if matches!(e, Error::PeerDead) {
                            dead = true;
                        } else {
                            bad_errors += 1;
                        }
                        println!(
                            "HOMARS RPC FAIL size={} index={} us={us} error={}",
                            p.size,
                            p.index,
                            error_name(&e)
                        );
                    }
                }
            }
            Err(Error::Timeout) => {
                let now = Instant::now();
                let expired: Vec<RpcId> = pending
                    .iter()
                    .filter(|(_, p)| now >= p.start + rpc_timeout)
                    .map(|(id, _)| *id)
                    .collect();
                for id in expired {
                    let p = pending.remove(&id).expect("listed");
                    let _ = ep.abort(id);
                    if unanswered == Some(p.size) {
                        unanswered_seen += 1;
                        println!(
                            "HOMARS RPC UNANSWERED size={} index={} us={} (expected)",
                            p.size,
                            p.index,
                            p.start.elapsed().as_micros()
                        );
                        continue;
                    }
                    fail += 1;
                    bad_errors += 1;
                    last_fail = Some(now);
                    println!(
                        "HOMARS RPC FAIL size={} index={} us={} error=timeout",
                        p.size,
                        p.index,
                        p.start.elapsed().as_micros()
                    );
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    let elapsed = t0.elapsed();
    if next < items.len() {
        println!(
            "HOMARS STOPPED after peer-dead: {} RPC(s) not started",
            items.len() - next
        );
    }
    let fail_after_ms = match (last_ok, last_fail) {
        (Some(a), Some(b)) if b > a => (b - a).as_millis(),
        (None, Some(b)) => (b - t0).as_millis(),
        _ => 0,
    };
    // Shutting down sends the acks we owe (no NEED_ACKs left behind): at
    // once after the last response, before the acks' own timer.
    ep.shutdown();
    print_metrics(&ep.metrics());
    if let Some(b) = bystander {
        std::thread::sleep(stay);
        println!(
            "HOMARS STAYED {} ms with another endpoint ({} packets for other ports)",
            stay.as_millis(),
            b.metrics().invalid_dropped
        );
    }
    println!(
        "HOMARS DONE ok={ok} fail={fail} unanswered={unanswered_seen} elapsed_ms={} last_fail_after_ok_ms={fail_after_ms}",
        elapsed.as_millis()
    );
    if let Some(size) = unanswered {
        let want = items.iter().filter(|&&s| s == size).count();
        let good = unanswered_seen == want && fail == 0;
        println!(
            "HOMARS EXPECT {want} RPC(s) of {size} B unanswered, all others OK: {}",
            if good { "met" } else { "NOT met" }
        );
        return Ok(good);
    }
    Ok(match expect_ok {
        None => fail == 0,
        Some(n) => {
            let good = ok >= n && bad_errors == 0 && fail_after_ms <= max_fail_ms as u128;
            println!(
                "HOMARS EXPECT ok>={n} and only peer-dead failures within {max_fail_ms} ms: {}",
                if good { "met" } else { "NOT met" }
            );
            good
        }
    })
}

fn error_name(e: &Error) -> String {
    match e {
        Error::PeerDead => "peer-dead".into(),
        Error::Timeout => "timeout".into(),
        other => other.to_string().replace(' ', "_"),
    }
}

fn server(bind: SocketAddr, opts: &Opts) -> Res<bool> {
    let count: usize = opts.num("count", 0usize)?;
    let linger = Duration::from_secs_f64(opts.num("linger", 3.0)?);
    let idle = Duration::from_secs_f64(opts.num("idle", 120.0)?);
    let ep = Endpoint::bind(bind, opts.config()?)?;
    println!(
        "HOMARS START mode=server local={} count={count}",
        ep.local_addr()
    );
    let (mut echoed, mut failed) = (0usize, 0usize);
    let mut reason = "count";
    while count == 0 || echoed + failed < count {
        match ep.recv_request(Some(idle)) {
            Ok(req) => {
                let size = req.message.len();
                match ep.reply(req.id, req.message) {
                    Ok(()) => {
                        echoed += 1;
                        println!("HOMARS ECHO n={echoed} size={size} from={}", req.id.peer);
                    }
                    Err(e) => {
                        failed += 1;
                        println!("HOMARS ECHO FAIL size={size} error={e}");
                    }
                }
            }
            Err(Error::Timeout) => {
                reason = "idle";
                break;
            }
            Err(e) => return Err(e.into()),
        }
    }
    // Keep answering until every response is out, and then until the
    // clients have gone quiet: a response fully sent may not be fully
    // received (a slow guest still grants, acks or asks for a resend), and
    // a packet to a closed raw socket draws an ICMP protocol-unreachable,
    // on which Linux aborts every RPC to this host (EPROTONOSUPPORT).
    let t = Instant::now();
    while ep.metrics().active_rpcs > 0 && t.elapsed() < linger {
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut heard = ep.runtime_stats().packets_received;
    while t.elapsed() < linger {
        std::thread::sleep(Duration::from_millis(250));
        let now = ep.runtime_stats().packets_received;
        if now == heard {
            break;
        }
        heard = now;
    }
    let left = ep.metrics().active_rpcs;
    print_metrics(&ep.metrics());
    ep.shutdown();
    println!(
        "HOMARS DONE ok={echoed} fail={failed} reason={reason} unacked={left} linger_ms={}",
        t.elapsed().as_millis()
    );
    Ok(failed == 0 && reason == "count")
}

fn print_metrics(m: &Metrics) {
    for ty in PacketType::ALL {
        let (s, r) = (m.sent.packets_of(ty), m.received.packets_of(ty));
        if s > 0 || r > 0 {
            println!("HOMARS METRIC sent_{} {s}", ty.name());
            println!("HOMARS METRIC rcvd_{} {r}", ty.name());
        }
    }
    for (name, v) in [
        ("malformed_dropped", m.malformed_dropped),
        ("invalid_dropped", m.invalid_dropped),
        ("unknown_rpc_packets", m.unknown_rpc_packets),
        ("data_beyond_grant", m.data_beyond_grant),
        ("data_straddling_grant", m.data_straddling_grant),
        ("data_bytes_sent", m.data_bytes_sent),
        ("data_bytes_retransmitted", m.data_bytes_retransmitted),
        ("duplicate_data_bytes", m.duplicate_data_bytes),
        ("timeouts", m.timeouts),
        ("resends_requested", m.resends_requested),
        ("fast_resends", m.fast_resends),
        ("busy_replies", m.busy_replies),
        ("restarts", m.restarts),
        ("peers_dead", m.peers_dead),
        ("rpcs_failed", m.rpcs_failed),
        ("need_acks_sent", m.need_acks_sent),
        ("need_ack_replies", m.need_ack_replies),
        ("need_ack_replies_limited", m.need_ack_replies_limited),
        ("acks_sent", m.acks_sent),
        ("acks_received", m.acks_received),
        ("unreachable_rpcs", m.unreachable_rpcs),
        ("unreachable_ignored", m.unreachable_ignored),
        ("requests_delivered", m.requests_delivered),
        ("responses_delivered", m.responses_delivered),
        ("active_rpcs", m.active_rpcs),
        ("rtt_probes_sent", m.rtt_probes_sent),
        ("rtt_probes_answered", m.rtt_probes_answered),
        ("rtt_responses", m.rtt_responses),
        ("rtt_invalid", m.rtt_invalid),
    ] {
        println!("HOMARS METRIC {name} {v}");
    }
}
