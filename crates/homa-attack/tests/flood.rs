//! A flood of spoofed first DATA packets (random peers, legal lengths,
//! never completed) must not let the server's state grow without bound,
//! must be forgotten once the senders stay silent, and must not stop a
//! legitimate client.

mod common;

use homa_attack::legit::LegitLoad;
use homa_attack::scenario::flood::send_flood;
use homa_attack::target::{Monitor, Target};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Spoofed packets sent, and their rate.
const PACKETS: u64 = 20_000;
const RATE: u64 = 10_000;
/// Bounds while the flood lasts (sampled every 50 ms).
const MAX_ACTIVE_RPCS: u64 = 4_096;
const MAX_PEERS: u64 = 4_096;
const MAX_RX_BUFFERED: u64 = 64 << 20;
/// Peak server memory growth allowed over its size before the flood (KiB).
const MAX_RSS_GROWTH_KIB: u64 = 256 << 10;
/// After the flood, within `SETTLE`: only the legitimate client's state.
const SETTLE: Duration = Duration::from_secs(3);
const LEGIT_CONCURRENCY: usize = 2;
const MAX_PEERS_AFTER: u64 = 8;
const MAX_RX_BUFFERED_AFTER: u64 = 64 << 10;
/// Legitimate RPCs that must complete during the flood and after it.
const MIN_LEGIT: u64 = 10;
/// Control packets (anything but DATA) the server may send while the flood
/// lasts, per spoofed packet: nothing is owed to a peer that never showed
/// it hears us (before, each spoofed packet drew a RESEND and a CUTOFFS).
const MAX_CONTROL_PER_SPOOFED: f64 = 0.05;

#[test]
fn spoofed_first_data_flood_is_bounded_and_forgotten() {
    if !common::root_or_skip("spoofed_first_data_flood_is_bounded_and_forgotten") {
        return;
    }
    let env = common::env();
    // The bound under test: the server admits at most MAX_ACTIVE_RPCS RPCs
    // and evicts the stalest partly received request to admit new ones.
    let max = MAX_ACTIVE_RPCS.to_string();
    let target = Arc::new(Target::spawn_with(&env.exe, &["--max-rpcs", &max]).expect("target"));
    let legit = LegitLoad::start(target.addr(), 100, LEGIT_CONCURRENCY).expect("legit client");
    std::thread::sleep(Duration::from_millis(300));
    let rss_before = target.memory().expect("memory").rss_kib;
    let monitor = Monitor::start(target.clone(), Duration::from_millis(50));
    let legit_before = legit.completed();
    let control_sent = || -> u64 {
        let by_type = target.stats().expect("stats").sent_by_type();
        assert!(!by_type.is_empty(), "the server's metrics lack `sent`");
        by_type
            .iter()
            .filter(|(t, _)| t != "Data")
            .map(|(_, n)| n)
            .sum()
    };
    let control_before = control_sent();
    let (sent, _, _) = send_flood(&env, target.addr_v4(), RATE, PACKETS, false).expect("flood");
    let control_during = control_sent() - control_before;
    let legit_during = legit.completed() - legit_before;
    let peaks = monitor.finish();
    let hwm = target.memory().expect("memory").hwm_kib;
    eprintln!(
        "flood: {sent} packets; peaks {peaks:?}; RSS {:.1} -> peak {:.1} MiB; legit RPCs during {legit_during}",
        common::mib(rss_before),
        common::mib(hwm)
    );

    // Settle: poll until only the legitimate client's state is left.
    let legit_after_start = legit.completed();
    let deadline = Instant::now() + SETTLE;
    let end = loop {
        let s = target.stats().expect("stats");
        let g = |n: &str| s.metric(n).unwrap_or_else(|| panic!("metric {n} missing"));
        let settled = g("active_rpcs") <= LEGIT_CONCURRENCY as u64
            && g("peers") <= MAX_PEERS_AFTER
            && g("rx_bytes_buffered") <= MAX_RX_BUFFERED_AFTER;
        if settled || Instant::now() >= deadline {
            break (g("active_rpcs"), g("peers"), g("rx_bytes_buffered"));
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    std::thread::sleep(Duration::from_millis(200));
    let legit_after = legit.completed() - legit_after_start;
    eprintln!(
        "flood: after settling active_rpcs {} peers {} rx_bytes_buffered {}; legit RPCs after {legit_after}",
        end.0, end.1, end.2
    );

    assert!(
        sent >= PACKETS * 9 / 10,
        "only {sent} flood packets went out"
    );
    assert!(
        peaks.active_rpcs <= MAX_ACTIVE_RPCS,
        "active RPCs reached {} (bound {MAX_ACTIVE_RPCS})",
        peaks.active_rpcs
    );
    assert!(
        peaks.peers <= MAX_PEERS,
        "peers reached {} (bound {MAX_PEERS})",
        peaks.peers
    );
    assert!(
        peaks.rx_bytes_buffered <= MAX_RX_BUFFERED,
        "rx_bytes_buffered reached {} (bound {MAX_RX_BUFFERED})",
        peaks.rx_bytes_buffered
    );
    assert!(
        hwm.saturating_sub(rss_before) <= MAX_RSS_GROWTH_KIB,
        "server RSS grew by {:.1} MiB (bound {:.1} MiB)",
        common::mib(hwm.saturating_sub(rss_before)),
        common::mib(MAX_RSS_GROWTH_KIB)
    );
    assert!(
        end.0 <= LEGIT_CONCURRENCY as u64
            && end.1 <= MAX_PEERS_AFTER
            && end.2 <= MAX_RX_BUFFERED_AFTER,
        "{SETTLE:?} after the flood: active_rpcs {} (bound {LEGIT_CONCURRENCY}), peers {} \
         (bound {MAX_PEERS_AFTER}), rx_bytes_buffered {} (bound {MAX_RX_BUFFERED_AFTER})",
        end.0,
        end.1,
        end.2
    );
    assert!(
        legit_during >= MIN_LEGIT && legit_after >= MIN_LEGIT,
        "legitimate RPCs completed: {legit_during} during the flood, {legit_after} after \
         (at least {MIN_LEGIT} each)"
    );
    assert_eq!(legit.wrong(), 0, "a legitimate client got wrong bytes");
    assert!(
        control_during as f64 <= MAX_CONTROL_PER_SPOOFED * sent as f64,
        "the server sent {control_during} control packets during a flood of {sent} spoofed \
         packets (bound {MAX_CONTROL_PER_SPOOFED} per packet)"
    );
}
