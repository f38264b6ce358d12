//! First DATA packets that claim `incoming = message_length` must not stop
//! the server from granting real messages larger than the unscheduled
//! limit.

mod common;

use bytes::Bytes;
use homa_attack::scenario::flood::send_flood;
use homa_attack::target::Target;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Lying packets: 60 at 20 per second.
const PACKETS: u64 = 60;
const RATE: u64 = 20;
/// Each legitimate 1 MB echo must finish within this (a few ms normally).
const CALL_TIMEOUT: Duration = Duration::from_secs(2);
/// Legitimate calls that must complete while the lies go on.
const MIN_CALLS: u64 = 3;

#[test]
fn lying_incoming_does_not_stop_grants() {
    if !common::root_or_skip("lying_incoming_does_not_stop_grants") {
        return;
    }
    let env = common::env();
    let target = Target::spawn(&env.exe).expect("target");
    let client = homa::Endpoint::bind("127.0.0.1:0".parse().unwrap(), homa::Config::default())
        .expect("client");
    let message = Bytes::from(vec![0x42u8; 1_000_000]);
    // One call before the attack: the setup works.
    let r = client.call(target.addr(), message.clone(), CALL_TIMEOUT);
    assert_eq!(r.expect("baseline 1 MB echo").len(), message.len());

    let done = Arc::new(AtomicBool::new(false));
    let liar = {
        let (env, addr, done) = (env.clone(), target.addr_v4(), done.clone());
        std::thread::spawn(move || {
            let r = send_flood(&env, addr, RATE, PACKETS, true);
            done.store(true, Ordering::Release);
            r
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    let (mut ok, mut failed) = (0u64, Vec::new());
    while !done.load(Ordering::Acquire) {
        match client.call(target.addr(), message.clone(), CALL_TIMEOUT) {
            Ok(b) if b == message => ok += 1,
            Ok(b) => failed.push(format!("{} wrong bytes", b.len())),
            Err(e) => {
                failed.push(e.to_string());
                break;
            }
        }
    }
    let (sent, _, _) = liar.join().expect("liar thread").expect("lying packets");
    eprintln!("lying-incoming: {sent} lying packets; {ok} legit 1 MB calls completed, failures {failed:?}");
    assert!(
        failed.is_empty(),
        "a legitimate 1 MB echo failed during the lies: {failed:?} ({ok} completed before)"
    );
    assert!(
        ok >= MIN_CALLS,
        "only {ok} legitimate 1 MB echoes completed (at least {MIN_CALLS})"
    );
}
