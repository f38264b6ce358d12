//! A client that starts many RPCs and never acknowledges them, while it
//! keeps its peer state alive with a small packet every 50 ms, must have its
//! RPCs freed within a bounded time, and must not stop a legitimate client.

mod common;

use homa_attack::scenario::hog::{run_against, Options};
use homa_attack::target::Target;

/// RPCs the hog starts.
const RPCS: u32 = 2_000;
/// Keep-alive period: 3 s is 3,000 ticks of the server's 1 ms timer, far
/// beyond any ack or NEED_ACK patience.
const SECONDS: f64 = 3.0;
/// Server RPCs left at the end: the legitimate client's one, plus slack.
const MAX_ACTIVE_AT_END: u64 = 4;
const MIN_LEGIT: u64 = 10;

#[test]
fn unacknowledged_rpcs_are_freed_despite_keepalives() {
    let env = common::env();
    let target = Target::spawn(&env.exe).expect("target");
    let o = Options {
        rpcs: RPCS,
        seconds: SECONDS,
        keepalive_ms: 50,
        size: 100,
        start_rate: 20_000,
    };
    let r = run_against(&env, &target, &o).expect("scenario");
    eprintln!("hog: {r:?}");
    let first = r.active_rpcs[0].expect("active_rpcs metric");
    let last = r
        .active_rpcs
        .last()
        .copied()
        .flatten()
        .expect("active_rpcs metric");
    assert!(
        first > 0,
        "the hog's requests never became RPCs (active {first}); the test proves nothing"
    );
    assert!(
        last <= MAX_ACTIVE_AT_END,
        "{last} server RPCs still alive {SECONDS} s after {RPCS} unacknowledged ones \
         (bound {MAX_ACTIVE_AT_END}); per second: {:?}",
        r.active_rpcs
    );
    assert!(
        r.legit_during.completed >= MIN_LEGIT,
        "only {} legitimate RPCs completed while the hog was active",
        r.legit_during.completed
    );
}
