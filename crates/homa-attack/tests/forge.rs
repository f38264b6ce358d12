//! A client must not accept a forged response for a guessable RPC id,
//! whether it claims the server's own port or another one.

mod common;

use homa_attack::scenario::forge::run_against;
use homa_attack::target::Target;

#[test]
fn forged_responses_are_not_accepted() {
    if !common::root_or_skip("forged_responses_are_not_accepted") {
        return;
    }
    let env = common::env();
    let target = Target::spawn(&env.exe).expect("target");
    let r = run_against(&env, &target).expect("scenario");
    eprintln!("forge: {r:?}");
    for (name, a) in [("same port", &r.same_port), ("other port", &r.other_port)] {
        assert!(
            !a.accepted,
            "{name}: the client accepted a forged response for id {} (guessed from {} as {})",
            a.actual_id, a.observed_id, a.guessed_id
        );
        assert_eq!(
            a.outcome, "the real response",
            "{name}: the legitimate RPC did not complete normally"
        );
    }
}
