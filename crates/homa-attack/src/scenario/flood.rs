//! `flood`: spoofed first DATA packets (random RPC ids, source ports and
//! 127.0.0.x addresses, legal lengths of more than one packet, so no
//! message ever completes) at a fixed rate, while a legitimate client
//! measures echo RPCs per second before, during and after.

use crate::craft::{self, RateLimiter, RawSender};
use crate::legit::{Interval, LegitLoad};
use crate::report::{kib_as_mib, mib, opt, Report};
use crate::target::{Memory, Monitor, Peaks, Target};
use crate::{Env, Result};
use serde::Serialize;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What to send.
#[derive(Debug, Clone)]
pub struct Options {
    /// Spoofed packets per second.
    pub rate: u64,
    /// Length of the baseline and of the flood (s).
    pub seconds: f64,
    /// One-second measurements after the flood.
    pub after: u32,
    /// Bytes of each legitimate echo RPC.
    pub legit_size: usize,
    /// Legitimate RPCs kept outstanding.
    pub legit_concurrency: usize,
    /// Legitimate RPCs started per second at most (`None`: as fast as they
    /// complete).
    pub legit_rate: Option<f64>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            rate: 10_000,
            seconds: 5.0,
            after: 3,
            legit_size: 100,
            legit_concurrency: 2,
            legit_rate: None,
        }
    }
}

/// Gauges of the server's core at one moment.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Gauges {
    /// RPCs in existence.
    pub active_rpcs: Option<u64>,
    /// Peers with state.
    pub peers: Option<u64>,
    /// Bytes in incoming message buffers.
    pub rx_bytes_buffered: Option<u64>,
}

impl Gauges {
    /// Reads the gauges of `target`.
    pub fn of(target: &Target) -> Result<Gauges> {
        let s = target.stats()?;
        Ok(Gauges {
            active_rpcs: s.metric("active_rpcs"),
            peers: s.metric("peers"),
            rx_bytes_buffered: s.metric("rx_bytes_buffered"),
        })
    }
}

/// What happened.
#[derive(Debug, Clone, Serialize)]
pub struct FloodReport {
    /// Packets per second asked for.
    pub rate_pps: u64,
    /// Spoofed packets sent.
    pub packets_sent: u64,
    /// IP bytes of those packets.
    pub attacker_bytes: u64,
    /// Achieved packets per second.
    pub achieved_pps: f64,
    /// Legitimate RPCs before the flood.
    pub baseline: Interval,
    /// Legitimate RPCs during the flood.
    pub during: Interval,
    /// Legitimate RPCs in each second after the flood.
    pub after: Vec<Interval>,
    /// Legitimate RPCs that failed or were abandoned.
    pub legit_failed: u64,
    /// Server memory before the flood.
    pub memory_before: Memory,
    /// Server memory at the end (`hwm_kib` is the peak over the whole run).
    pub memory_after: Memory,
    /// Peak gauges sampled during and after the flood.
    pub peaks: Peaks,
    /// Gauges at the end.
    pub end: Gauges,
    /// Packets the server sent while the flood lasted, by type name.
    pub server_sent_during: Vec<(String, u64)>,
}

impl Report for FloodReport {
    fn title(&self) -> String {
        format!(
            "flood: {} spoofed first DATA packets at {} pkt/s",
            self.packets_sent, self.rate_pps
        )
    }

    fn rows(&self) -> Vec<(String, String)> {
        let mut rows = vec![
            (
                "achieved rate".into(),
                format!("{:.0} pkt/s", self.achieved_pps),
            ),
            ("attacker bytes".into(), mib(self.attacker_bytes)),
            (
                "legit RPC/s before".into(),
                format!("{:.1}", self.baseline.rpc_per_s),
            ),
            (
                "legit RPC/s during".into(),
                format!("{:.1}", self.during.rpc_per_s),
            ),
        ];
        for (i, a) in self.after.iter().enumerate() {
            rows.push((
                format!("legit RPC/s after +{}s", i + 1),
                format!("{:.1}", a.rpc_per_s),
            ));
        }
        let sent: Vec<String> = self
            .server_sent_during
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(t, n)| format!("{t} {n}"))
            .collect();
        rows.push(("server sent during".into(), sent.join(", ")));
        rows.extend([
            ("legit RPCs failed".into(), self.legit_failed.to_string()),
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
                "peak active RPCs".into(),
                self.peaks.active_rpcs.to_string(),
            ),
            ("peak peers".into(), self.peaks.peers.to_string()),
            (
                "peak rx bytes buffered".into(),
                mib(self.peaks.rx_bytes_buffered),
            ),
            ("active RPCs at end".into(), opt(self.end.active_rpcs)),
            ("peers at end".into(), opt(self.end.peers)),
            (
                "rx bytes buffered at end".into(),
                opt(self.end.rx_bytes_buffered),
            ),
        ]);
        rows
    }
}

/// Checks the options.
pub fn validate(o: &Options) -> Result<()> {
    super::check_range("--rate", o.rate, 1, 1_000_000)?;
    super::check_range("--seconds", o.seconds, 0.1, 3600.0)?;
    super::check_range("--after", o.after, 0, 600)?;
    super::check_range(
        "--legit-size",
        o.legit_size,
        8,
        craft::max_message() as usize,
    )?;
    super::check_range("--legit-concurrency", o.legit_concurrency, 1, 64)?;
    if let Some(r) = o.legit_rate {
        super::check_range("--legit-rate", r, 1.0, 1_000_000.0)?;
    }
    Ok(())
}

/// Sends `count` spoofed first DATA packets to `target` at `rate`, printing
/// progress once a second. Returns (packets, bytes, seconds taken).
pub fn send_flood(
    env: &Env,
    target: std::net::SocketAddrV4,
    rate: u64,
    count: u64,
    lie: bool,
) -> Result<(u64, u64, f64)> {
    let mut raw = RawSender::new()?;
    let mut rng = rand::thread_rng();
    // Lies are most effective with the largest message; honest floods use
    // lengths of two packets and more, so that no message completes.
    let lengths = if lie {
        craft::max_message()..=craft::max_message()
    } else {
        2 * craft::max_payload() as u32..=craft::max_message()
    };
    let mut pace = RateLimiter::new(rate as f64);
    let t0 = Instant::now();
    let mut last_say = Instant::now();
    for i in 0..count {
        pace.wait_turn();
        let (src, bytes) = craft::spoofed_first_data(&mut rng, target.port(), lengths.clone(), lie);
        raw.send_udp(src, target, &bytes)?;
        if last_say.elapsed() >= Duration::from_secs(1) {
            last_say = Instant::now();
            env.say(format!("{} / {count} packets sent", i + 1));
        }
    }
    Ok((raw.packets, raw.bytes, t0.elapsed().as_secs_f64()))
}

/// Runs the scenario.
pub fn run(env: &Env, o: &Options) -> Result<FloodReport> {
    validate(o)?;
    RawSender::new()?; // fail early without the privilege
    let target = Arc::new(Target::spawn(&env.exe)?);
    let legit = LegitLoad::start_paced(
        target.addr(),
        o.legit_size,
        o.legit_concurrency,
        o.legit_rate,
    )?;
    std::thread::sleep(Duration::from_millis(300));
    env.say(format!("baseline for {} s", o.seconds));
    let baseline = legit.measure(Duration::from_secs_f64(o.seconds));
    let memory_before = target.memory()?;
    let monitor = Monitor::start(target.clone(), Duration::from_millis(100));
    let count = (o.rate as f64 * o.seconds).round().max(1.0) as u64;
    env.say(format!("flooding: {count} packets at {} pkt/s", o.rate));
    let before = legit.completed();
    let sent_before = target.stats()?.sent_by_type();
    let t0 = Instant::now();
    let (packets_sent, attacker_bytes, secs) =
        send_flood(env, target.addr_v4(), o.rate, count, false)?;
    let during_s = t0.elapsed().as_secs_f64();
    let done = legit.completed() - before;
    let server_sent_during = target
        .stats()?
        .sent_by_type()
        .into_iter()
        .zip(sent_before)
        .map(|((t, n), (_, m))| (t, n.saturating_sub(m)))
        .collect();
    let during = Interval {
        seconds: during_s,
        completed: done,
        rpc_per_s: done as f64 / during_s,
    };
    let mut after = Vec::new();
    for i in 0..o.after {
        env.say(format!("after the flood: second {}/{}", i + 1, o.after));
        after.push(legit.measure(Duration::from_secs(1)));
    }
    let peaks = monitor.finish();
    let end = Gauges::of(&target)?;
    let memory_after = target.memory()?;
    let legit_failed = legit.failed();
    drop(legit);
    Ok(FloodReport {
        rate_pps: o.rate,
        packets_sent,
        attacker_bytes,
        achieved_pps: packets_sent as f64 / secs,
        baseline,
        during,
        after,
        legit_failed,
        memory_before,
        memory_after,
        peaks,
        end,
        server_sent_during,
    })
}
