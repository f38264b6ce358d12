//! `late-dup`: N RPCs run normally; then, D ms after each one's response
//! arrived (the client acknowledges it at once or on the server's NEED_ACK,
//! a few timer ticks later), a copy of its request DATA packets is sent
//! again from the client's address. The server counts how many times its
//! handler ran the same request (see [`crate::target::DUP_TAG`]).

use crate::craft::{self, RawSender};
use crate::report::{opt, Report};
use crate::target::{Target, DUP_TAG};
use crate::{Env, Result};
use bytes::Bytes;
use serde::Serialize;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// What to send.
#[derive(Debug, Clone)]
pub struct Options {
    /// RPCs to run and replay.
    pub rpcs: u32,
    /// Delay of each replay after its response (ms).
    pub delay_ms: u64,
    /// Bytes of each request.
    pub size: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            rpcs: 100,
            delay_ms: 700,
            size: 100,
        }
    }
}

/// What happened.
#[derive(Debug, Clone, Serialize)]
pub struct LateDupReport {
    /// RPCs run (and replayed).
    pub rpcs: u32,
    /// Replay delay after the response (ms).
    pub delay_ms: u64,
    /// Bytes of each request.
    pub size: usize,
    /// Replayed DATA packets sent.
    pub replay_packets: u64,
    /// Handler runs for this scenario's requests (ideally `rpcs`).
    pub handler_runs: u64,
    /// Requests the handler ran a second (or later) time.
    pub repeat_runs: u64,
    /// The core's `stale_duplicates` counter over the replays.
    pub stale_duplicates: Option<u64>,
}

impl Report for LateDupReport {
    fn title(&self) -> String {
        format!(
            "late-dup: {} requests replayed {} ms after their responses",
            self.rpcs, self.delay_ms
        )
    }

    fn rows(&self) -> Vec<(String, String)> {
        vec![
            ("request size".into(), format!("{} B", self.size)),
            ("replayed packets".into(), self.replay_packets.to_string()),
            ("handler runs".into(), self.handler_runs.to_string()),
            (
                "requests run twice".into(),
                format!("{} of {}", self.repeat_runs, self.rpcs),
            ),
            (
                "stale duplicates dropped by the core".into(),
                opt(self.stale_duplicates),
            ),
        ]
    }
}

/// Checks the options.
pub fn validate(o: &Options) -> Result<()> {
    super::check_range("--rpcs", o.rpcs, 1, 100_000)?;
    super::check_range("--delay-ms", o.delay_ms, 0, 600_000)?;
    super::check_range(
        "--size",
        o.size,
        DUP_TAG.len() + 12,
        craft::max_message() as usize,
    )?;
    Ok(())
}

/// Runs the scenario against an already running target.
pub fn run_against(env: &Env, target: &Target, o: &Options) -> Result<LateDupReport> {
    validate(o)?;
    let mut raw = RawSender::new()?;
    let client = homa::Endpoint::bind(
        "127.0.0.1:0".parse().expect("literal"),
        homa::Config::default(),
    )?;
    let client_addr = match client.local_addr() {
        SocketAddr::V4(a) => a,
        SocketAddr::V6(_) => unreachable!("bound to 127.0.0.1"),
    };
    let server = target.addr_v4();
    let start = target.stats()?;
    let nonce: u64 = rand::random();
    env.say(format!("running {} RPCs", o.rpcs));
    let mut done = Vec::with_capacity(o.rpcs as usize);
    for i in 0..o.rpcs {
        let mut v = vec![0u8; o.size];
        v[..DUP_TAG.len()].copy_from_slice(DUP_TAG);
        v[DUP_TAG.len()..DUP_TAG.len() + 8].copy_from_slice(&nonce.to_be_bytes());
        v[DUP_TAG.len() + 8..DUP_TAG.len() + 12].copy_from_slice(&i.to_be_bytes());
        let req = Bytes::from(v);
        let id = client.send_request(SocketAddr::V4(server), req.clone())?;
        client.recv_response(id, Some(Duration::from_secs(5)))?;
        done.push((id.id, req, Instant::now()));
    }
    env.say(format!(
        "replaying each request {} ms after its response",
        o.delay_ms
    ));
    let mut replay_packets = 0u64;
    for (id, req, at) in &done {
        let due = *at + Duration::from_millis(o.delay_ms);
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        for p in craft::message_packets(client_addr.port(), server.port(), *id, req) {
            raw.send_udp(client_addr, server, &p)?;
            replay_packets += 1;
        }
    }
    // Let the server take and run what it accepted.
    std::thread::sleep(Duration::from_millis(300));
    let end = target.stats()?;
    client.shutdown();
    Ok(LateDupReport {
        rpcs: o.rpcs,
        delay_ms: o.delay_ms,
        size: o.size,
        replay_packets,
        handler_runs: end.handler_runs - start.handler_runs,
        repeat_runs: end.repeat_runs - start.repeat_runs,
        stale_duplicates: end
            .metric("stale_duplicates")
            .zip(start.metric("stale_duplicates"))
            .map(|(a, b)| a - b),
    })
}

/// Runs the scenario.
pub fn run(env: &Env, o: &Options) -> Result<LateDupReport> {
    validate(o)?;
    RawSender::new()?;
    let target = Target::spawn(&env.exe)?;
    run_against(env, &target, o)
}
