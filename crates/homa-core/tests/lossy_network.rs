//! Randomized integration tests: several endpoints exchange RPCs over the
//! simulated network of `common` (loss, duplication, reordering, a server
//! that disappears), and every RPC must complete exactly once with the right
//! bytes, after which every endpoint must have freed all its state.
//!
//! Run with `--nocapture` to see a summary of each run, `HOMA_SEED=n` to
//! run the scenarios (except the determinism test) with another seed, and
//! `HOMA_TRACE=from_ns..to_ns` to print every packet delivered in that
//! window of virtual time.

mod common;

use common::{dead_peer_bound_ns, NetConfig, Network, Report, SizeDist, StreamWorkload, Workload};
use homa_core::{Config, RpcError};
use homa_wire::PacketType;
use std::time::Instant;

const MS: u64 = 1_000_000;
const SEC: u64 = 1_000_000_000;

/// The protocol configuration for lossy networks.
fn lossy_homa() -> Config {
    let mut c = Config::default();
    c.max_message_size = 16 << 20;
    // With 10% loss per packet, five unanswered RESENDs in a row to one
    // peer (each RESEND and its answer can be lost, so each round trip
    // fails with probability ≈ 0.19) happens about once in 4,000 rounds:
    // not rare in a run with thousands of RPCs. The default of 5 is tuned
    // for datacenters, where loss is rare and a silent peer is almost
    // certainly dead; ten in a row (≈ 1 in 16 million) keeps the test
    // about the protocol rather than about bad luck.
    c.timeout_resends = 10;
    c
}

/// A 10 Gbit/s network with 2 µs links and the given impairments.
fn lossy_net(n: usize, loss: f64, duplicate: f64, reorder: f64, workload: Workload) -> NetConfig {
    NetConfig {
        loss,
        duplicate,
        reorder,
        // Several full-size packet times (1.2 µs each), so reordered packets
        // really overtake others.
        reorder_max_delay_ns: 20_000,
        homa: lossy_homa(),
        workload,
        ..NetConfig::clean(n, 0)
    }
}

/// `default`, unless `HOMA_SEED` (decimal or 0x-hex) is set, to try others.
fn seed(default: u64) -> u64 {
    let Ok(v) = std::env::var("HOMA_SEED") else {
        return default;
    };
    let parsed = match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => v.parse(),
    };
    parsed.unwrap_or_else(|e| panic!("HOMA_SEED={v}: {e}"))
}

fn timed<T>(name: &str, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    println!("{name}: {:.2} s wall-clock", start.elapsed().as_secs_f64());
    out
}

/// No loss: everything completes, and nothing is ever retransmitted or
/// timed out.
#[test]
fn clean_network_needs_no_retransmissions() {
    // 2 endpoints, each a client and a server: 100 RPCs each, 4 outstanding,
    // sizes log-uniform up to 100 kB with packet-boundary sizes mixed in. At
    // most 8 × 2 × 100 kB are in flight, about 1.3 ms of link time: well
    // under the 5 ms after which a silent RPC times out.
    let cfg = NetConfig::clean(2, 100);
    let report = timed("clean_network", || {
        Network::new(seed(0xC1EA_0001), cfg).run_until_done(10 * SEC)
    });
    println!("{}", report.summary());
    assert_eq!(report.rpcs_issued, 200);
    assert_eq!(report.responses, 200);
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    assert_eq!(report.packets_lost, 0);
    for (i, m) in report.metrics.iter().enumerate() {
        assert_eq!(
            m.data_bytes_retransmitted, 0,
            "endpoint {i} retransmitted: {m:#?}"
        );
        assert_eq!(m.timeouts, 0, "endpoint {i} timed out: {m:#?}");
        assert_eq!(m.rpcs_failed, 0, "endpoint {i}: {m:#?}");
    }
}

/// The main test: 8 endpoints, all clients and servers, 10% loss, 5%
/// duplication, 10% reordering, 2,000 RPCs of up to 2 MB each way.
#[test]
fn lossy_all_to_all_exactly_once() {
    let homa = lossy_homa();
    let sizes = SizeDist::log_uniform_with_boundaries(2_000_000, &homa);
    let workload = Workload::all_to_all(8, 250, 8, sizes);
    let cfg = lossy_net(8, 0.10, 0.05, 0.10, workload);
    let report = timed("lossy_all_to_all", || {
        // About 16 s of virtual time are needed.
        Network::new(seed(0x1055_0002), cfg).run_until_done(120 * SEC)
    });
    println!("{}", report.summary());

    assert_eq!(report.rpcs_issued, 2_000);
    assert_eq!(report.responses, 2_000);
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    // The impairments happened…
    assert!(report.packets_lost > 0);
    assert!(report.packets_duplicated > 0);
    assert!(report.packets_reordered > 0);
    // …and the core noticed and recovered.
    assert!(report.total(|m| m.data_bytes_retransmitted) > 0);
    assert!(report.total(|m| m.resends_requested) > 0);
    assert!(report.total(|m| m.duplicate_data_bytes) > 0);
    assert_eq!(report.total(|m| m.requests_delivered), 2_000);
    assert_eq!(report.total(|m| m.responses_delivered), 2_000);
    assert_eq!(report.total(|m| m.rpcs_failed), 0);
}

/// The same seed gives the same run, packet for packet; another seed does
/// not.
#[test]
fn same_seed_same_trace() {
    let run = |seed: u64| {
        let homa = lossy_homa();
        let sizes = SizeDist::log_uniform_with_boundaries(200_000, &homa);
        let workload = Workload::all_to_all(4, 30, 4, sizes);
        let cfg = lossy_net(4, 0.05, 0.05, 0.10, workload);
        Network::new(seed, cfg).run_until_done(60 * SEC)
    };
    let (a, b, c) = timed("same_seed_same_trace", || (run(7), run(7), run(8)));
    println!("{}\n{}", a.summary(), c.summary());
    assert!(a.packets_lost > 0, "the scenario should include losses");
    assert_eq!(
        a.trace_hash, b.trace_hash,
        "same seed, different packet trace"
    );
    assert_eq!(a.metrics, b.metrics, "same seed, different metrics");
    assert_eq!(a, b, "same seed, different report");
    assert_ne!(
        a.trace_hash, c.trace_hash,
        "different seeds, same packet trace"
    );
}

/// One 16 MB request over a link that loses 2% of packets.
#[test]
fn sixteen_megabyte_request_over_lossy_link() {
    let workload = Workload {
        clients: vec![0],
        servers: vec![1],
        rpcs_per_client: 1,
        outstanding: 1,
        request_sizes: SizeDist::Fixed(16 << 20),
        response_sizes: SizeDist::Uniform(0, 2_000),
        stop_after_failure: false,
    };
    let cfg = lossy_net(2, 0.02, 0.0, 0.0, workload);
    assert_eq!(cfg.homa.max_message_size, 16 << 20);
    let report = timed("sixteen_megabyte_request", || {
        Network::new(seed(0x16_0004), cfg).run_until_done(600 * SEC)
    });
    println!("{}", report.summary());
    assert_eq!(report.responses, 1);
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    assert_eq!(report.request_bytes, 16 << 20);
    assert!(report.packets_lost > 0);
    assert!(report.metrics[0].data_bytes_retransmitted > 0);
}

/// A server vanishes: every RPC its clients have outstanding fails with
/// `PeerDead` within the time the timeout parameters allow, and all state is
/// freed afterwards (on the clients and on the cut-off server).
#[test]
fn vanished_server_fails_outstanding_rpcs() {
    let homa = Config::default();
    let outstanding = 8;
    let workload = Workload {
        clients: vec![0, 1],
        servers: vec![2],
        // More than can finish before the server disappears.
        rpcs_per_client: 1_000_000,
        outstanding,
        request_sizes: SizeDist::log_uniform_with_boundaries(200_000, &homa),
        response_sizes: SizeDist::log_uniform_with_boundaries(200_000, &homa),
        stop_after_failure: true,
    };
    let cfg = NetConfig {
        workload,
        homa: homa.clone(),
        ..NetConfig::clean(3, 0)
    };
    let cut_at = 10 * MS;
    let mut net = Network::new(seed(0xDEAD_0005), cfg);
    net.isolate(2, cut_at);
    let report = timed("vanished_server", || net.run_until_done(10 * SEC));
    println!("{}", report.summary());

    // Silence starts at `cut_at` at the latest; the peer must be declared
    // dead within the resend schedule (plus timer granularity), and not
    // before several RESEND intervals have passed.
    let upper = cut_at + dead_peer_bound_ns(&homa);
    let lower =
        cut_at + (homa.timeout_resends as u64 - 1) * homa.resend_interval as u64 * homa.tick_ns;
    println!(
        "failures allowed in [{:.3}, {:.3}] ms; observed [{:.3}, {:.3}] ms",
        lower as f64 / 1e6,
        upper as f64 / 1e6,
        report
            .failures
            .iter()
            .map(|f| f.failed_at)
            .min()
            .unwrap_or(0) as f64
            / 1e6,
        report
            .failures
            .iter()
            .map(|f| f.failed_at)
            .max()
            .unwrap_or(0) as f64
            / 1e6,
    );
    assert!(
        report.responses > 0,
        "some RPCs should complete before the cut"
    );
    assert_eq!(
        report.failures.len(),
        2 * outstanding,
        "every RPC outstanding at the cut fails, and nothing else: {:#?}",
        report.failures
    );
    for f in &report.failures {
        assert_eq!(f.error, RpcError::PeerDead, "{f:?}");
        assert!(
            (lower..=upper).contains(&f.failed_at),
            "{f:?} failed outside [{lower}, {upper}] ns"
        );
    }
    for c in 0..2 {
        let m = &report.metrics[c];
        assert_eq!(m.rpcs_failed, outstanding as u64, "client {c}: {m:#?}");
        assert!(m.peers_dead >= 1, "client {c}: {m:#?}");
        assert_eq!(m.active_rpcs, 0, "client {c}: {m:#?}");
        assert_eq!(m.active_client_rpcs, 0, "client {c}: {m:#?}");
        assert_eq!(m.rx_bytes_buffered, 0, "client {c}: {m:#?}");
        assert_eq!(m.tx_bytes_buffered, 0, "client {c}: {m:#?}");
    }
    assert!(net.endpoint(0).is_idle() && net.endpoint(1).is_idle());
}

/// SIRD on the same core, clean network: everything completes, nothing is
/// retransmitted, nothing times out (credit is paced to the 10 Gbit/s link).
#[test]
fn sird_clean_network_needs_no_retransmissions() {
    let mut cfg = NetConfig::clean(2, 100);
    cfg.homa.design = homa_core::Design::Sird;
    let report = timed("sird_clean_network", || {
        Network::new(seed(0x51AD_0001), cfg).run_until_done(10 * SEC)
    });
    println!("{}", report.summary());
    assert_eq!(report.responses, 200);
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    for (i, m) in report.metrics.iter().enumerate() {
        assert_eq!(m.data_bytes_retransmitted, 0, "endpoint {i}: {m:#?}");
        assert_eq!(m.timeouts, 0, "endpoint {i} timed out: {m:#?}");
        assert_eq!(m.design_mismatches, 0, "endpoint {i}: {m:#?}");
    }
}

/// SIRD keeps Homa's guarantees on a hostile network: 6 endpoints, 10%
/// loss, 5% duplication, 10% reordering, 900 RPCs of up to 2 MB each way,
/// every one exactly once with the right bytes.
#[test]
fn sird_lossy_all_to_all_exactly_once() {
    let mut homa = lossy_homa();
    homa.design = homa_core::Design::Sird;
    let report = hostile_all_to_all("sird_lossy_all_to_all", 0x51AD_0002, homa);
    assert_eq!(report.total(|m| m.design_mismatches), 0);
}

/// 6 endpoints, 10% loss, 5% duplication, 10% reordering, 900 RPCs of up
/// to 2 MB each way with `homa`: checks that every RPC completed exactly
/// once, that the network did misbehave and that lost data was resent.
fn hostile_all_to_all(name: &str, seed_value: u64, homa: Config) -> Report {
    hostile_all_to_all_with(name, seed_value, homa, |_| {})
}

/// [`hostile_all_to_all`] with the network changed by `tweak`.
fn hostile_all_to_all_with(
    name: &str,
    seed_value: u64,
    homa: Config,
    tweak: impl FnOnce(&mut NetConfig),
) -> Report {
    let sizes = SizeDist::log_uniform_with_boundaries(2_000_000, &homa);
    let workload = Workload::all_to_all(6, 150, 8, sizes);
    let mut cfg = lossy_net(6, 0.10, 0.05, 0.10, workload);
    cfg.homa = homa;
    tweak(&mut cfg);
    let report = timed(name, || {
        Network::new(seed(seed_value), cfg).run_until_done(120 * SEC)
    });
    println!("{}", report.summary());
    assert_eq!(report.responses, 900);
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    assert!(report.packets_lost > 0 && report.packets_duplicated > 0);
    assert!(report.total(|m| m.data_bytes_retransmitted) > 0);
    assert_eq!(report.total(|m| m.requests_delivered), 900);
    assert_eq!(report.total(|m| m.responses_delivered), 900);
    report
}

/// ByteDance mode keeps Homa's guarantees on a hostile network (6
/// endpoints, 10% loss, 5% duplication, 10% reordering, 900 RPCs of up to
/// 2 MB each way), and its probes are answered and measured in spite of it.
#[test]
fn bytedance_lossy_all_to_all_exactly_once() {
    let mut homa = lossy_homa();
    homa.bytedance.enabled = true;
    let report = hostile_all_to_all("bytedance_lossy_all_to_all", 0xB17E_0001, homa);
    // Probes went out, were answered and gave samples; duplicated or late
    // answers are dropped as unmatched, never taken twice.
    let sent = report.total(|m| m.rtt_probes_sent);
    let samples = report.total(|m| m.rtt_responses);
    assert!(
        samples > 0 && samples <= sent,
        "{samples} samples of {sent} probes"
    );
    assert!(report.total(|m| m.rtt_probes_answered) >= samples);
    assert_eq!(report.total(|m| m.design_mismatches), 0);
    assert_eq!(report.total(|m| m.data_beyond_grant), 0);
}

/// The same hostile network with `no_grants_above_high` on, and reordered
/// packets held up to 200 µs (not 20): a delayed probe or answer is an RTT
/// sample far above `rtt_high` (~32 µs here), so grants to that peer
/// pause. Every RPC still completes exactly once: pauses end at the next
/// low sample or when their sample goes stale, and paused peers are probed.
#[test]
fn bytedance_grant_pause_lossy_all_to_all_exactly_once() {
    let mut homa = lossy_homa();
    homa.bytedance.enabled = true;
    homa.bytedance.no_grants_above_high = true;
    let report = hostile_all_to_all_with("bytedance_grant_pause_lossy", 0xB17E_0003, homa, |n| {
        n.reorder_max_delay_ns = 200_000;
    });
    let pauses = report.total(|m| m.bytedance_grant_pauses);
    let stale = report.total(|m| m.bytedance_stale_resumes);
    println!("grant pauses {pauses}, ended stale {stale}");
    assert!(pauses > 0, "no pause: the test exercises nothing");
    assert!(stale <= pauses);
    assert_eq!(report.total(|m| m.design_mismatches), 0);
    assert_eq!(report.total(|m| m.data_beyond_grant), 0);
}

/// A mixed network: endpoints 0–2 run ByteDance mode, 3–5 do not (as a
/// Linux Homa peer would not). Everything completes exactly once; peers
/// with the mode off never receive an RTT probe or answer, while the
/// others probe each other.
#[test]
fn bytedance_mixed_network_never_probes_peers_without_the_mode() {
    let homa = lossy_homa();
    let mut on = homa.clone();
    on.bytedance.enabled = true;
    let sizes = SizeDist::log_uniform_with_boundaries(500_000, &homa);
    let workload = Workload::all_to_all(6, 100, 4, sizes);
    let mut cfg = lossy_net(6, 0.02, 0.01, 0.05, workload);
    cfg.per_endpoint = (0..6).map(|i| (i < 3).then(|| on.clone())).collect();
    let report = timed("bytedance_mixed", || {
        Network::new(seed(0xB17E_0002), cfg).run_until_done(60 * SEC)
    });
    println!("{}", report.summary());
    assert_eq!(report.responses, 600);
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    for (i, m) in report.metrics.iter().enumerate() {
        let got = m.received.packets_of(PacketType::RttProbe)
            + m.received.packets_of(PacketType::RttResps);
        if i < 3 {
            assert!(m.rtt_probes_sent > 0, "endpoint {i}: {m:#?}");
            assert!(m.rtt_responses > 0, "endpoint {i}: {m:#?}");
        } else {
            assert_eq!(got, 0, "endpoint {i} (mode off) got RTT packets");
            assert_eq!(m.rtt_probes_sent + m.rtt_invalid, 0, "endpoint {i}");
        }
        assert_eq!(m.design_mismatches, 0, "endpoint {i}");
        assert_eq!(m.data_beyond_grant, 0, "endpoint {i}: {m:#?}");
    }
}

/// Streams keep their promise on a hostile network (4 endpoints, 10% loss,
/// 5% duplication, 10% reordering, RPCs alongside): 6 streams carry 150
/// messages each way, every one delivered once, in order, with the right
/// bytes, and every stream closes cleanly at both ends (`common/streams.rs`
/// checks each event).
#[test]
fn streams_lossy_every_message_once_in_order() {
    let homa = lossy_homa();
    let sizes = SizeDist::log_uniform_with_boundaries(30_000, &homa);
    let workload = Workload::all_to_all(4, 30, 2, sizes);
    let mut cfg = lossy_net(4, 0.10, 0.05, 0.10, workload);
    cfg.streams = StreamWorkload {
        pairs: vec![(0, 1), (1, 0), (0, 2), (2, 3), (3, 1), (3, 1)],
        messages: 150,
    };
    let report = timed("streams_lossy", || {
        Network::new(seed(0x57E4_0001), cfg).run_until_done(120 * SEC)
    });
    println!("{}", report.summary());
    assert_eq!(report.stream_messages, 6 * 2 * 150);
    assert_eq!(report.responses, 120);
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    assert!(report.packets_lost > 0 && report.packets_duplicated > 0);
    assert_eq!(report.total(|m| m.streams_closed), 12);
    assert_eq!(report.total(|m| m.streams_failed), 0);
    assert_eq!(report.total(|m| m.stream_messages_delivered), 6 * 2 * 150);
}
