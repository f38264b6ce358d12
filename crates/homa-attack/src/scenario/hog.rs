//! `hog`: a malicious client (hand-made packets from its own UDP socket)
//! starts many small RPCs on the server, never acknowledges a response, and
//! sends one 56-byte packet (an empty DATA for one of its RPCs) every 50 ms
//! so the server keeps hearing from it. Reports how long the server keeps
//! the RPCs, its memory, the packets it sends per attacker byte, and what
//! a legitimate client gets meanwhile.

use crate::craft::{self, RateLimiter, LOWER_HEADERS};
use crate::legit::{Interval, LegitLoad};
use crate::report::{kib_as_mib, opt, Report};
use crate::target::{Memory, Target};
use crate::{Env, Result};
use homa_wire::AckEntry;
use serde::Serialize;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What to send.
#[derive(Debug, Clone)]
pub struct Options {
    /// RPCs the hog starts.
    pub rpcs: u32,
    /// How long the hog keeps the server hearing from it (s).
    pub seconds: f64,
    /// Gap between keep-alive packets (ms).
    pub keepalive_ms: u64,
    /// Bytes of each hog request.
    pub size: usize,
    /// Requests per second while starting the RPCs.
    pub start_rate: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            rpcs: 100_000,
            seconds: 5.0,
            keepalive_ms: 50,
            size: 100,
            start_rate: 20_000,
        }
    }
}

/// What happened.
#[derive(Debug, Clone, Serialize)]
pub struct HogReport {
    /// RPCs the hog started.
    pub rpcs: u32,
    /// Packets the hog sent (requests and keep-alives).
    pub attacker_packets: u64,
    /// IP bytes the hog sent.
    pub attacker_bytes: u64,
    /// Of those, keep-alive bytes.
    pub keepalive_bytes: u64,
    /// IP bytes that reached the hog's socket.
    pub bytes_to_attacker: u64,
    /// Packets the server's core sent from the first hog request to the end.
    pub server_packets_sent: Option<u64>,
    /// server_packets_sent / attacker_bytes.
    pub server_packets_per_attacker_byte: Option<f64>,
    /// Server `active_rpcs` right after the requests, then once a second
    /// while the hog keeps the peer alive.
    pub active_rpcs: Vec<Option<u64>>,
    /// Server memory before the hog.
    pub memory_before: Memory,
    /// Server memory at the end (`hwm_kib` is the peak).
    pub memory_after: Memory,
    /// Legitimate echo RPCs before the hog.
    pub legit_baseline: Interval,
    /// Legitimate echo RPCs while the hog kept its RPCs alive.
    pub legit_during: Interval,
}

impl Report for HogReport {
    fn title(&self) -> String {
        format!(
            "hog: {} unacknowledged RPCs kept alive by a packet every few tens of ms",
            self.rpcs
        )
    }

    fn rows(&self) -> Vec<(String, String)> {
        let series: Vec<String> = self.active_rpcs.iter().map(|v| opt(*v)).collect();
        vec![
            (
                "attacker sent".into(),
                format!(
                    "{} packets, {} B ({} B of keep-alives)",
                    self.attacker_packets, self.attacker_bytes, self.keepalive_bytes
                ),
            ),
            (
                "bytes reaching the attacker".into(),
                self.bytes_to_attacker.to_string(),
            ),
            ("server packets sent".into(), opt(self.server_packets_sent)),
            (
                "server packets per attacker byte".into(),
                self.server_packets_per_attacker_byte
                    .map_or_else(|| "n/a".into(), |v| format!("{v:.4}")),
            ),
            ("server active RPCs (per s)".into(), series.join(", ")),
            (
                "server RSS before".into(),
                kib_as_mib(self.memory_before.rss_kib),
            ),
            (
                "server peak RSS (VmHWM)".into(),
                kib_as_mib(self.memory_after.hwm_kib),
            ),
            (
                "server RSS after".into(),
                kib_as_mib(self.memory_after.rss_kib),
            ),
            (
                "legit RPC/s before".into(),
                format!("{:.1}", self.legit_baseline.rpc_per_s),
            ),
            (
                "legit RPC/s during".into(),
                format!("{:.1}", self.legit_during.rpc_per_s),
            ),
        ]
    }
}

/// Checks the options.
pub fn validate(o: &Options) -> Result<()> {
    super::check_range("--rpcs", o.rpcs, 1, 10_000_000)?;
    super::check_range("--seconds", o.seconds, 0.1, 3600.0)?;
    super::check_range("--keepalive-ms", o.keepalive_ms, 1, 60_000)?;
    super::check_range("--size", o.size, 1, craft::max_payload())?;
    super::check_range("--start-rate", o.start_rate, 1, 1_000_000)?;
    Ok(())
}

/// The hog's socket, counting what it sends.
struct Counted<'a> {
    sock: &'a UdpSocket,
    packets: u64,
    bytes: u64,
}

impl Counted<'_> {
    fn send(&mut self, p: &[u8]) {
        // A full buffer drops the packet; the hog does not care.
        if self.sock.send(p).is_ok() {
            self.packets += 1;
            self.bytes += (p.len() + LOWER_HEADERS) as u64;
        }
    }
}

/// Runs the scenario against an already running target.
pub fn run_against(env: &Env, target: &Target, o: &Options) -> Result<HogReport> {
    validate(o)?;
    let sock = UdpSocket::bind("127.0.0.1:0")?;
    sock.connect(target.addr())?;
    let port = sock.local_addr()?.port();
    let server_port = target.addr().port();
    // Drain (and count) what the server sends the hog.
    let received = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let drain = {
        let s = sock.try_clone()?;
        s.set_read_timeout(Some(Duration::from_millis(20)))?;
        let (r, st) = (received.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 65_536];
            while !st.load(Ordering::Acquire) {
                if let Ok(n) = s.recv(&mut buf) {
                    r.fetch_add((n + LOWER_HEADERS) as u64, Ordering::Relaxed);
                }
            }
        })
    };
    let legit = LegitLoad::start(target.addr(), 100, 1)?;
    std::thread::sleep(Duration::from_millis(200));
    let legit_baseline = legit.measure(Duration::from_secs(1));
    let memory_before = target.memory()?;
    let sent_before = target.stats()?.packets_sent();

    let mut out = Counted {
        sock: &sock,
        packets: 0,
        bytes: 0,
    };
    let request = vec![0x68u8; o.size];
    let id_of = |i: u32| 2 * (u64::from(i) + 1);
    env.say(format!("starting {} RPCs at {}/s", o.rpcs, o.start_rate));
    let mut pace = RateLimiter::new(o.start_rate as f64);
    let mut last_say = Instant::now();
    for i in 0..o.rpcs {
        pace.wait_turn();
        let p = craft::data_packet(
            port,
            server_port,
            id_of(i),
            o.size as u32,
            o.size as u32,
            0,
            &request,
            AckEntry::default(),
        );
        out.send(&p);
        if last_say.elapsed() >= Duration::from_secs(1) {
            last_say = Instant::now();
            env.say(format!("{} / {} RPCs started", i + 1, o.rpcs));
        }
    }
    let mut active_rpcs = vec![target.stats()?.metric("active_rpcs")];
    let before_keepalive = out.bytes;
    env.say(format!("keeping the RPCs alive for {} s", o.seconds));
    let legit_before = legit.completed();
    let t0 = Instant::now();
    let mut next_sample = Duration::from_secs(1);
    let mut k: u32 = 0;
    while t0.elapsed() < Duration::from_secs_f64(o.seconds) {
        let p = craft::data_packet(
            port,
            server_port,
            id_of(k % o.rpcs),
            o.size as u32,
            o.size as u32,
            0,
            &[],
            AckEntry::default(),
        );
        out.send(&p);
        k = k.wrapping_add(1);
        std::thread::sleep(Duration::from_millis(o.keepalive_ms));
        if t0.elapsed() >= next_sample {
            next_sample += Duration::from_secs(1);
            active_rpcs.push(target.stats()?.metric("active_rpcs"));
            env.say(format!(
                "{:.0} s: server active RPCs {}",
                t0.elapsed().as_secs_f64(),
                opt(*active_rpcs.last().expect("just pushed"))
            ));
        }
    }
    let legit_s = t0.elapsed().as_secs_f64();
    let legit_done = legit.completed() - legit_before;
    let legit_during = Interval {
        seconds: legit_s,
        completed: legit_done,
        rpc_per_s: legit_done as f64 / legit_s,
    };
    drop(legit);
    let (packets, bytes) = (out.packets, out.bytes);
    let sent_after = target.stats()?.packets_sent();
    let memory_after = target.memory()?;
    stop.store(true, Ordering::Release);
    let _ = drain.join();
    let server_packets_sent = sent_after.zip(sent_before).map(|(a, b)| a - b);
    Ok(HogReport {
        rpcs: o.rpcs,
        attacker_packets: packets,
        attacker_bytes: bytes,
        keepalive_bytes: bytes - before_keepalive,
        bytes_to_attacker: received.load(Ordering::Relaxed),
        server_packets_sent,
        server_packets_per_attacker_byte: server_packets_sent
            .map(|p| p as f64 / bytes.max(1) as f64),
        active_rpcs,
        memory_before,
        memory_after,
        legit_baseline,
        legit_during,
    })
}

/// Runs the scenario.
pub fn run(env: &Env, o: &Options) -> Result<HogReport> {
    validate(o)?;
    let target = Target::spawn(&env.exe)?;
    run_against(env, &target, o)
}
