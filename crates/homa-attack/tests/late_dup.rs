//! A copy of a request that arrives after its RPC was acknowledged must not
//! run the handler again, within the documented ack memory (assumed at
//! least 1 s).

mod common;

use homa_attack::scenario::late_dup::{run_against, Options};
use homa_attack::target::Target;

const RPCS: u32 = 20;

fn replay(delay_ms: u64, test: &str) {
    if !common::root_or_skip(test) {
        return;
    }
    let env = common::env();
    let target = Target::spawn(&env.exe).expect("target");
    let o = Options {
        rpcs: RPCS,
        delay_ms,
        size: 100,
    };
    let r = run_against(&env, &target, &o).expect("scenario");
    eprintln!("late-dup: {r:?}");
    assert_eq!(
        r.replay_packets,
        u64::from(RPCS),
        "not every replay went out"
    );
    assert_eq!(
        r.repeat_runs, 0,
        "{} of {RPCS} requests ran twice when replayed {delay_ms} ms after their responses \
         (handler runs {})",
        r.repeat_runs, r.handler_runs
    );
    assert_eq!(r.handler_runs, u64::from(RPCS));
}

#[test]
fn duplicate_soon_after_ack_does_not_run_twice() {
    replay(50, "duplicate_soon_after_ack_does_not_run_twice");
}

#[test]
fn duplicate_700ms_after_ack_does_not_run_twice() {
    replay(700, "duplicate_700ms_after_ack_does_not_run_twice");
}
