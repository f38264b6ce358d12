//! A request spoofed from a victim, followed by RESENDs "from the victim",
//! must not make the server send the victim more than ten times what the
//! attacker sent.

mod common;

use homa_attack::scenario::reflect::{run_against, Options};
use homa_attack::target::Target;

const MAX_AMPLIFICATION: f64 = 10.0;

#[test]
fn resends_do_not_amplify_toward_a_victim() {
    if !common::root_or_skip("resends_do_not_amplify_toward_a_victim") {
        return;
    }
    let env = common::env();
    let target = Target::spawn(&env.exe).expect("target");
    let o = Options {
        resends: 100,
        size: 1_000_000,
        interval_us: 10_000,
        resend_all: false,
    };
    let r = run_against(&env, &target, &o).expect("scenario");
    eprintln!("reflect: {r:?}");
    assert!(
        r.attacker_bytes > o.size as u64,
        "the request did not go out"
    );
    assert!(
        r.victim_bytes as f64 <= MAX_AMPLIFICATION * r.attacker_bytes as f64,
        "the victim received {} B for the attacker's {} B ({:.1}x, bound {MAX_AMPLIFICATION}x)",
        r.victim_bytes,
        r.attacker_bytes,
        r.amplification
    );
    // The victim's socket may drop some; the server's own count must obey too.
    let server = r.server_bytes_sent.expect("metrics with bytes sent");
    assert!(
        server as f64 <= MAX_AMPLIFICATION * r.attacker_bytes as f64,
        "the server sent {server} B toward the victim for the attacker's {} B",
        r.attacker_bytes
    );
}
