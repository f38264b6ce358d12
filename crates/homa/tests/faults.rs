//! The runtime's fault shim over real sockets: 10% loss, 5% duplication
//! and reordering in both directions at both ends. Echo RPCs of several
//! sizes up to 1 MB must all complete with every byte right, and every
//! kind of fault must have happened.

mod common;

use common::{assert_bytes, pattern, EchoServer, CALL_TIMEOUT};
use homa::{Config, Endpoint, FaultInjection, RuntimeStats};
use std::net::SocketAddr;

fn faulty(seed: u64) -> Config {
    let mut f = FaultInjection::loss(0.10, seed);
    f.duplicate_rate = 0.05;
    f.reorder_rate = 0.05;
    f.recv_duplicate_rate = 0.05;
    f.recv_reorder_rate = 0.05;
    f.reorder_max_packets = 4;
    f.reorder_max_delay_us = 2_000;
    let mut config = Config::default();
    config.fault_injection = Some(f);
    config
}

fn sum(a: RuntimeStats, b: RuntimeStats) -> RuntimeStats {
    let mut s = RuntimeStats::default();
    s.injected_drops = a.injected_drops + b.injected_drops;
    s.injected_duplicates = a.injected_duplicates + b.injected_duplicates;
    s.injected_reorders = a.injected_reorders + b.injected_reorders;
    s.injected_recv_drops = a.injected_recv_drops + b.injected_recv_drops;
    s.injected_recv_duplicates = a.injected_recv_duplicates + b.injected_recv_duplicates;
    s.injected_recv_reorders = a.injected_recv_reorders + b.injected_recv_reorders;
    s
}

#[test]
fn echo_under_loss_duplication_and_reordering_both_ways() {
    const SEED: u64 = 0xfa_0175;
    const SIZES: [usize; 7] = [0, 100, 1_500, 30_000, 100_000, 400_000, 1_000_000];
    const CLIENTS: u64 = 4;
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let server = EchoServer::bind(any, faulty(SEED), 2);
    let dest = server.addr;
    let handles: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let ep = Endpoint::bind(any, faulty(SEED + 1 + c)).unwrap();
            std::thread::spawn(move || {
                for (i, &len) in SIZES.iter().enumerate() {
                    let tag = c * 100 + i as u64;
                    let msg = pattern(tag, len);
                    let r = ep
                        .call(dest, msg.clone(), CALL_TIMEOUT)
                        .unwrap_or_else(|e| panic!("client {c}, {len} B: {e}"));
                    assert_bytes(&msg, &r, &format!("client {c}, {len} B"));
                }
                assert_eq!(ep.metrics().rpcs_failed, 0);
                ep.runtime_stats()
            })
        })
        .collect();
    let mut total = server.endpoint().runtime_stats();
    for h in handles {
        total = sum(total, h.join().expect("client thread panicked"));
    }
    let sm = server.endpoint().metrics();
    eprintln!(
        "{} RPCs; faults injected: {total:#?}",
        CLIENTS * SIZES.len() as u64
    );
    assert_eq!(
        sm.requests_delivered,
        CLIENTS * SIZES.len() as u64,
        "each exactly once"
    );
    assert!(total.injected_drops > 0 && total.injected_recv_drops > 0);
    assert!(total.injected_duplicates > 0 && total.injected_recv_duplicates > 0);
    assert!(total.injected_reorders > 0 && total.injected_recv_reorders > 0);
    server.stop();
}

#[test]
fn old_drop_only_tables_still_load_and_bad_rates_are_refused() {
    let c = Config::from_toml_str("[fault_injection]\ndrop_rate = 0.25\nseed = 3\n").unwrap();
    let f = c.fault_injection.unwrap();
    assert_eq!((f.drop_rate, f.seed), (0.25, 3));
    assert_eq!(f.recv_drop_rate, 0.0);
    assert_eq!(f.reorder_rate, 0.0);
    let e = Config::from_toml_str("[fault_injection]\nrecv_drop_rate = 1.5\n").unwrap_err();
    assert!(e.to_string().contains("recv_drop_rate"), "{e}");
    let mut f = FaultInjection::default();
    f.duplicate_rate = -0.1;
    let mut bad = Config::default();
    bad.fault_injection = Some(f);
    let e = Endpoint::bind("127.0.0.1:0".parse().unwrap(), bad).unwrap_err();
    assert!(e.to_string().contains("duplicate_rate"), "{e}");
}
