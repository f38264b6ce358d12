//! `lying-incoming`: spoofed first DATA packets of maximum-size messages
//! whose `incoming` field claims the whole message will arrive without
//! grants. A receiver that believes it counts those bytes against its
//! incoming budget and stops granting real messages; legitimate echo RPCs
//! larger than the unscheduled limit (1 MB by default) are counted before,
//! during and after.

use super::flood::{send_flood, Gauges};
use crate::craft::{self, RawSender};
use crate::legit::{Interval, LegitLoad};
use crate::report::{opt, Report};
use crate::target::Target;
use crate::{Env, Result};
use serde::Serialize;
use std::time::{Duration, Instant};

/// What to send.
#[derive(Debug, Clone)]
pub struct Options {
    /// Lying packets per second.
    pub rate: u64,
    /// Length of the baseline and of the attack (s).
    pub seconds: f64,
    /// One-second measurements after the attack.
    pub after: u32,
    /// Bytes of each legitimate echo RPC (above the unscheduled limit).
    pub legit_size: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            rate: 20,
            seconds: 5.0,
            after: 2,
            legit_size: 1_000_000,
        }
    }
}

/// What happened.
#[derive(Debug, Clone, Serialize)]
pub struct LyingReport {
    /// Packets per second asked for.
    pub rate_pps: u64,
    /// Lying packets sent.
    pub packets_sent: u64,
    /// IP bytes of those packets.
    pub attacker_bytes: u64,
    /// Bytes of each legitimate RPC.
    pub legit_size: usize,
    /// Legitimate RPCs before the attack.
    pub baseline: Interval,
    /// Legitimate RPCs during the attack.
    pub during: Interval,
    /// Legitimate RPCs in each second after it.
    pub after: Vec<Interval>,
    /// Legitimate RPCs that failed or were abandoned.
    pub legit_failed: u64,
    /// Server gauges at the end of the attack.
    pub gauges_during: Gauges,
}

impl Report for LyingReport {
    fn title(&self) -> String {
        format!(
            "lying-incoming: {} first DATA packets with incoming = message_length at {} pkt/s",
            self.packets_sent, self.rate_pps
        )
    }

    fn rows(&self) -> Vec<(String, String)> {
        let mut rows = vec![
            ("attacker bytes".into(), self.attacker_bytes.to_string()),
            ("legit RPC size".into(), format!("{} B", self.legit_size)),
            (
                "legit RPCs before".into(),
                format!(
                    "{} in {:.1} s ({:.1}/s)",
                    self.baseline.completed, self.baseline.seconds, self.baseline.rpc_per_s
                ),
            ),
            (
                "legit RPCs during".into(),
                format!(
                    "{} in {:.1} s ({:.1}/s)",
                    self.during.completed, self.during.seconds, self.during.rpc_per_s
                ),
            ),
        ];
        for (i, a) in self.after.iter().enumerate() {
            rows.push((
                format!("legit RPCs after +{}s", i + 1),
                a.completed.to_string(),
            ));
        }
        rows.push(("legit RPCs failed".into(), self.legit_failed.to_string()));
        rows.push((
            "server active RPCs (end of attack)".into(),
            opt(self.gauges_during.active_rpcs),
        ));
        rows
    }
}

/// Checks the options.
pub fn validate(o: &Options) -> Result<()> {
    super::check_range("--rate", o.rate, 1, 100_000)?;
    super::check_range("--seconds", o.seconds, 0.1, 3600.0)?;
    super::check_range("--after", o.after, 0, 600)?;
    super::check_range(
        "--legit-size",
        o.legit_size,
        8,
        craft::max_message() as usize,
    )?;
    Ok(())
}

/// Runs the scenario.
pub fn run(env: &Env, o: &Options) -> Result<LyingReport> {
    validate(o)?;
    RawSender::new()?;
    let target = Target::spawn(&env.exe)?;
    let legit = LegitLoad::start(target.addr(), o.legit_size, 1)?;
    std::thread::sleep(Duration::from_millis(300));
    env.say(format!("baseline for {} s", o.seconds));
    let baseline = legit.measure(Duration::from_secs_f64(o.seconds));
    let count = (o.rate as f64 * o.seconds).round().max(1.0) as u64;
    env.say(format!("lying: {count} packets at {} pkt/s", o.rate));
    let before = legit.completed();
    let t0 = Instant::now();
    let (packets_sent, attacker_bytes, _) = send_flood(env, target.addr_v4(), o.rate, count, true)?;
    let during_s = t0.elapsed().as_secs_f64();
    let done = legit.completed() - before;
    let gauges_during = Gauges::of(&target)?;
    let during = Interval {
        seconds: during_s,
        completed: done,
        rpc_per_s: done as f64 / during_s,
    };
    let mut after = Vec::new();
    for _ in 0..o.after {
        after.push(legit.measure(Duration::from_secs(1)));
    }
    let legit_failed = legit.failed();
    Ok(LyingReport {
        rate_pps: o.rate,
        packets_sent,
        attacker_bytes,
        legit_size: o.legit_size,
        baseline,
        during,
        after,
        legit_failed,
        gauges_during,
    })
}
