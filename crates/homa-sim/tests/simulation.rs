//! End-to-end behaviour of the simulator: unloaded latencies against the
//! topology's formula, determinism, strict priorities, complete runs of
//! both protocols, incast, bounded buffers with loss, scenario files and
//! the max-load search.
//!
//! Runs use a small network (2 racks × 4 hosts, 2 spines) and a few
//! thousand messages so that the whole file takes seconds.

use homa_sim::homa::{Homa, HomaConfig};
use homa_sim::pfabric::PFabric;
use homa_sim::report::RunReport;
use homa_sim::scenario::{Pattern, ProtocolChoice, Scenario, ScenarioError};
use homa_sim::search::max_sustainable_load;
use homa_sim::sim::{run_scenario, Simulation};
use homa_sim::topology::TopologyConfig;
use homa_sim::transport::Protocol;
use homa_sim::Time;

/// Picoseconds per microsecond and per millisecond.
const US: Time = 1_000_000;
const MS: Time = 1_000 * US;

/// The thesis topology (144 hosts, 16 per rack) with a Poisson scenario
/// whose own traffic never starts: arrivals are only scheduled by
/// [`Simulation::run`], so with `inject` + `run_until` the network carries
/// nothing but the injected messages.
fn quiet_thesis_scenario() -> Scenario {
    Scenario::default()
}

/// 2 racks × 4 hosts, 2 spines (10G hosts, 40G core as in the thesis).
fn small_topology() -> TopologyConfig {
    TopologyConfig {
        racks: 2,
        hosts_per_rack: 4,
        spines: 2,
        ..TopologyConfig::default()
    }
}

fn small_scenario(protocol: ProtocolChoice, messages: u64, load: f64, seed: u64) -> Scenario {
    let mut s = Scenario {
        protocol,
        seed,
        messages,
        topology: small_topology(),
        ..Scenario::default()
    };
    s.traffic.workload = "w3".into();
    s.traffic.load = load;
    s
}

/// Injects each `(src, dst, size)` into one quiet simulation, 20 ms apart,
/// and returns (completion time, unloaded latency) of each.
///
/// The gap matters for Homa: a server that has answered an RPC sends
/// NEED_ACK after two 1 ms ticks unless the client's ACK came piggybacked
/// on later data, and the client's 138-byte ACK (priority 7) then overtakes
/// data queued at the receiver's ToR. Messages injected 1 ms apart from the
/// same client to the same server were found to complete exactly 110.4 ns
/// (138 bytes at 10 Gbit/s) later than the formula for that reason; 20 ms
/// is long after all such follow-up traffic has finished.
fn unloaded<P: Protocol + Clone>(protocol: &P, messages: &[(u32, u32, u64)]) -> Vec<(Time, Time)> {
    let mut sim = Simulation::new(quiet_thesis_scenario(), protocol).expect("valid scenario");
    let topo = sim.topology().clone();
    let gap = 20 * MS;
    let mut out = Vec::new();
    for (k, &(src, dst, size)) in messages.iter().enumerate() {
        let at = k as Time * gap;
        let i = sim.inject(at, src, dst, size);
        sim.run_until(at + gap - 1);
        let t = sim
            .completion_time(i)
            .unwrap_or_else(|| panic!("{src}->{dst} {size} B did not complete"));
        let same = topo.rack_of(src) == topo.rack_of(dst);
        out.push((t, topo.unloaded_latency(size, same)));
    }
    out
}

#[test]
fn homa_unloaded_latency_equals_the_formula() {
    let homa = Homa::new(HomaConfig::default());
    // Host 16 is the first host of rack 1; host 1 shares host 0's rack.
    // 5,000 bytes (4 packets) are below RTTbytes (8,962), so all of it is
    // sent unscheduled at line rate: nothing but store-and-forward.
    let msgs = [
        (0, 16, 100),
        (0, 1, 100),
        (0, 16, 5_000),
        (2, 3, 5_000),
        (4, 20, 1),
        (5, 6, 0),
    ];
    let got = unloaded(&homa, &msgs);
    for (&(src, dst, size), &(t, formula)) in msgs.iter().zip(&got) {
        assert_eq!(t, formula, "homa {src}->{dst} {size} B");
    }
    // The hand numbers of tests/topology.rs.
    assert_eq!(got[0].0, 2_678_000);
    assert_eq!(got[1].0, 2_092_400);
}

/// A message that needs grants: the first RTTbytes go unscheduled, and the
/// receiver's first grant (sent when the first packet arrives, 5.3 µs in)
/// is back at the sender (≈7.8 µs) before the sender has finished its
/// unscheduled packets (7 × 1.23 µs = 8.6 µs). If the receiver keeps one
/// RTTbytes granted ahead of what it has received, the sender's link
/// never idles and the message arrives exactly as fast as the
/// store-and-forward formula says.
///
/// Here the grant window is 2 × RTTbytes so that a grant is due after
/// every ~10 KB received (the core's `grant_increment`) while the window
/// still covers the round trip.
#[test]
fn homa_granted_message_keeps_the_link_busy_with_a_wide_grant_window() {
    let homa = Homa::new(HomaConfig {
        grant_window: Some(20_000),
        ..HomaConfig::default()
    });
    let msgs = [(0, 16, 100_000), (2, 3, 100_000), (4, 20, 1_000_000)];
    for (&(src, dst, size), &(t, formula)) in msgs.iter().zip(&unloaded(&homa, &msgs)) {
        let ratio = t as f64 / formula as f64;
        assert!(
            (1.0..1.01).contains(&ratio),
            "homa {src}->{dst} {size} B: {t} ps vs formula {formula} ps ({ratio:.3}x)"
        );
    }
}

/// The same with the default configuration: grant window = RTTbytes and a
/// grant for every packet received. (With a grant increment as large as the
/// window — the configuration the simulator first shipped with — the
/// receiver granted only after receiving the whole window, and 100 KB took
/// 149.3 µs instead of 90.6 µs; this test caught it.)
#[test]
fn homa_granted_message_is_close_to_the_formula_with_defaults() {
    let homa = Homa::new(HomaConfig::default());
    let msgs = [(0, 16, 100_000), (2, 3, 100_000)];
    for (&(src, dst, size), &(t, formula)) in msgs.iter().zip(&unloaded(&homa, &msgs)) {
        let ratio = t as f64 / formula as f64;
        assert!(
            (1.0..1.03).contains(&ratio),
            "homa {src}->{dst} {size} B: {t} ps vs formula {formula} ps ({ratio:.3}x)"
        );
    }
}

#[test]
fn pfabric_unloaded_latency_equals_the_formula() {
    // pFabric starts every flow at line rate with a window of one BDP and
    // grows it with every ACK, so on an empty network even a 100 KB
    // message leaves back to back and matches the formula exactly.
    let msgs = [
        (0, 16, 100),
        (0, 1, 100),
        (0, 16, 100_000),
        (2, 3, 100_000),
        (4, 20, 5_000),
    ];
    let got = unloaded(&PFabric::default(), &msgs);
    for (&(src, dst, size), &(t, formula)) in msgs.iter().zip(&got) {
        assert_eq!(t, formula, "pfabric {src}->{dst} {size} B");
    }
    assert_eq!(got[0].0, 2_678_000);
}

#[test]
fn inject_without_run_starts_no_scenario_traffic() {
    let homa = Homa::new(HomaConfig::default());
    let mut sim = Simulation::new(quiet_thesis_scenario(), &homa).unwrap();
    sim.run_until(10 * MS);
    // Nothing was generated: the first injected message gets index 0.
    let i = sim.inject(10 * MS, 3, 40, 100);
    assert_eq!(i, 0);
    assert_eq!(sim.completion_time(i), None, "not yet delivered");
    sim.run_until(11 * MS);
    assert_eq!(
        sim.completion_time(i),
        Some(sim.topology().unloaded_latency(100, false))
    );
    assert_eq!(sim.completion_time(1), None, "no such message");
}

/// A report with the fields that depend on the machine zeroed.
fn comparable(r: &RunReport) -> serde_json::Value {
    let mut v = serde_json::to_value(r).unwrap();
    v["wall_time_s"] = 0.into();
    v["events_per_sec"] = 0.into();
    v
}

#[test]
fn runs_are_deterministic_and_depend_on_the_seed() {
    for protocol in [ProtocolChoice::Homa, ProtocolChoice::Pfabric] {
        let s = small_scenario(protocol, 3_000, 0.5, 7);
        let a = run_scenario(&s, None).unwrap();
        let b = run_scenario(&s, None).unwrap();
        assert_eq!(comparable(&a), comparable(&b), "{protocol}");
        assert!(a.events > 10_000, "{protocol}: {} events", a.events);

        let mut other = s.clone();
        other.seed = 8;
        let c = run_scenario(&other, None).unwrap();
        assert_ne!(comparable(&a), comparable(&c), "{protocol}");
        assert_ne!(a.overall, c.overall, "{protocol}");
        assert_ne!(a.events, c.events, "{protocol}");
    }
}

/// Completion time of a 100-byte message from host 5 to host 0 sent 20 µs
/// after hosts 1–4, 6 and 7 each started a 1 MB message to host 0.
fn tiny_behind_incast(priorities: bool) -> (Time, Time) {
    let mut s = small_scenario(ProtocolChoice::Homa, 1, 0.5, 1);
    s.switch.priorities = priorities;
    let mut sim = Simulation::new(s, &Homa::new(HomaConfig::default())).unwrap();
    for src in [1, 2, 3, 4, 6, 7] {
        sim.inject(0, src, 0, 1_000_000);
    }
    sim.run_until(20 * US);
    let i = sim.inject(20 * US, 5, 0, 100);
    sim.run_until(10 * MS);
    let t = sim.completion_time(i).expect("tiny message completed");
    (t, sim.topology().unloaded_latency(100, false))
}

#[test]
fn strict_priorities_let_a_tiny_message_bypass_an_incast() {
    let (with, unloaded) = tiny_behind_incast(true);
    let (fifo, _) = tiny_behind_incast(false);
    // With priorities the tiny message waits at most for the data packet
    // on the wire at each hop: one 1538-byte frame at 10G is 1.23 µs.
    assert!(with >= unloaded);
    assert!(with <= unloaded + 3 * US, "priorities: {with} ps");
    // With one FIFO per port it queues behind the unscheduled bursts and
    // granted data of six senders.
    assert!(fifo > 4 * with, "fifo {fifo} ps vs priorities {with} ps");
}

fn check_complete_run(r: &RunReport, load: f64) {
    let p = &r.protocol;
    assert_eq!(r.messages_incomplete, 0, "{p}");
    assert_eq!(r.messages_failed, 0, "{p}");
    assert_eq!(r.messages_generated, 2_000, "{p}");
    // 10% warm-up.
    assert_eq!(r.messages_measured, 1_800, "{p}");
    assert!(
        r.overall.p50 >= 1.0 && r.overall.p50 < 5.0,
        "{p}: p50 {}",
        r.overall.p50
    );
    // No message is faster than on the empty network.
    for b in &r.buckets {
        assert!(
            b.slowdown.max >= b.slowdown.p50 && b.slowdown.p50 >= 1.0,
            "{p}: {b:?}"
        );
    }
    assert!(r.overall.p99 >= r.overall.p50 && r.overall.max >= r.overall.p99);
    assert!(!r.buckets.is_empty(), "{p}");
    assert_eq!(r.buckets.len(), 20, "{p}");
    assert_eq!(
        r.buckets.iter().map(|b| b.slowdown.count).sum::<u64>(),
        r.messages_measured,
        "{p}"
    );
    for w in r.buckets.windows(2) {
        assert!(w[0].size_hi <= w[1].size_lo, "{p}: buckets not sorted");
        assert_eq!(w[0].percentile_hi, w[1].percentile_lo, "{p}");
    }
    for b in &r.buckets {
        assert!(b.size_lo <= b.size_hi, "{p}: {b:?}");
    }
    for (name, ports) in [
        ("tor_down", 8),
        ("tor_up", 4),
        ("spine_down", 4),
        ("host_nic", 8),
    ] {
        let q = r
            .queues
            .get(name)
            .unwrap_or_else(|| panic!("{p}: no {name} stats"));
        assert_eq!(q.ports, ports, "{p} {name}");
        assert!(
            q.utilization > 0.0 && q.utilization <= 1.0,
            "{p} {name}: {q:?}"
        );
    }
    // w3 is heavy-tailed (up to 15 MB): over 1,800 measured messages the
    // offered load swings widely around the target (0.24–1.79 over seeds
    // 1–30 at 0.5), so only its presence is checked here;
    // `offered_load_matches_the_requested_load` checks the accounting with
    // light-tailed workloads.
    assert!(r.offered_load > 0.0, "{p}: offered {}", r.offered_load);
    assert_eq!(r.load, load, "{p}: the report carries the requested load");
    assert!(r.counters["data_packets_sent"] > 0, "{p}");
    assert!(r.window_s > 0.0 && r.sim_time_s >= r.window_s, "{p}");
}

#[test]
fn homa_small_run_completes_with_sane_slowdowns() {
    let s = small_scenario(ProtocolChoice::Homa, 2_000, 0.5, 3);
    let r = run_scenario(&s, None).unwrap();
    check_complete_run(&r, 0.5);
    assert_eq!(r.protocol, "homa");
    assert!(r.counters["grants_sent"] > 0);
}

#[test]
fn pfabric_small_run_completes_with_sane_slowdowns() {
    let s = small_scenario(ProtocolChoice::Pfabric, 2_000, 0.5, 3);
    let r = run_scenario(&s, None).unwrap();
    check_complete_run(&r, 0.5);
    assert_eq!(r.protocol, "pfabric");
    assert!(r.counters["acks_sent"] >= r.counters["data_packets_sent"] / 2);
}

/// The arrival rate is derived from the workload's mean wire bytes plus the
/// protocol's per-message control packets, and the report measures the
/// same quantity over the window; with a light-tailed workload they agree
/// to within sampling noise (±8% over seeds 1–30 with 1,800 messages).
#[test]
fn offered_load_matches_the_requested_load() {
    for protocol in [ProtocolChoice::Homa, ProtocolChoice::Pfabric] {
        for (workload, load) in [("w1", 0.5), ("fixed:1000", 0.5), ("w1", 0.8)] {
            let mut s = small_scenario(protocol, 2_000, load, 4);
            s.traffic.workload = workload.into();
            let r = run_scenario(&s, None).unwrap();
            assert_eq!(r.messages_incomplete, 0, "{protocol} {workload}");
            assert!(
                (r.offered_load - load).abs() <= 0.1 * load,
                "{protocol} {workload}: offered {} for load {load}",
                r.offered_load
            );
            // Hosts send at least the message data and no more than the
            // offered data plus control packets (pFabric sends exactly the
            // per-packet ACKs the offered load counts; Homa piggybacks
            // most ACKs that its estimate counts as separate packets, so
            // it sends less: 0.38 of 0.50 with w1).
            assert!(
                r.host_tx_load > r.delivered_load && r.host_tx_load < r.offered_load + 0.05 * load,
                "{protocol} {workload}: host tx {} offered {} delivered {}",
                r.host_tx_load,
                r.offered_load,
                r.delivered_load
            );
            if protocol == ProtocolChoice::Pfabric {
                assert!(
                    (r.host_tx_load - r.offered_load).abs() < 0.05 * load,
                    "{workload}: host tx {} offered {}",
                    r.host_tx_load,
                    r.offered_load
                );
            }
            // Below capacity nearly all generated data arrives within the
            // window.
            assert!(
                r.delivered_ratio > 0.9,
                "{protocol} {workload}: {}",
                r.delivered_ratio
            );
        }
    }
}

#[test]
fn incast_pattern_completes_every_message() {
    for protocol in [ProtocolChoice::Homa, ProtocolChoice::Pfabric] {
        let mut s = small_scenario(protocol, 1, 0.5, 5);
        s.traffic.pattern = Pattern::Incast;
        s.traffic.workload = "fixed:50000".into();
        s.traffic.incast.senders = 6;
        s.traffic.incast.rounds = 4;
        s.traffic.incast.interval_us = 100.0;
        s.warmup_fraction = 0.0;
        let r = run_scenario(&s, None).unwrap();
        assert_eq!(r.messages_generated, 24, "{protocol}");
        assert_eq!(r.messages_incomplete, 0, "{protocol}");
        assert_eq!(r.messages_measured, 24, "{protocol}");
        // Six 50 KB messages into one 10G link take at least 6× as long
        // as one alone: the last of each round is slowed down.
        assert!(r.overall.max > 4.0, "{protocol}: {:?}", r.overall);
    }
}

#[test]
fn incast_with_too_many_senders_is_refused() {
    let mut s = small_scenario(ProtocolChoice::Homa, 1, 0.5, 5);
    s.traffic.pattern = Pattern::Incast;
    s.traffic.incast.senders = 8;
    assert!(run_scenario(&s, None).is_err());
}

#[test]
fn homa_recovers_from_drops_in_small_buffers() {
    let mut s = small_scenario(ProtocolChoice::Homa, 2_000, 0.5, 11);
    // Room for five full frames per port: the downlinks of busy receivers
    // overflow.
    s.switch.buffer_bytes = Some(8_000);
    let r = run_scenario(&s, None).unwrap();
    let drops: u64 = r.queues.values().map(|q| q.drops).sum();
    assert!(drops > 0, "no drops with an 8 KB buffer");
    // Every loss is repaired (by RESENDs after the core's timeouts)
    // before the drain deadline, and no RPC is given up.
    assert_eq!(r.messages_incomplete, 0);
    assert_eq!(r.messages_failed, 0);
    assert_eq!(r.messages_measured, 1_800);
    assert!(r.counters["resends_sent"] > 0);
    assert!(r.counters["data_bytes_retransmitted"] > 0);
}

#[test]
fn pfabric_drops_in_its_shallow_buffers_and_still_completes() {
    let s = small_scenario(ProtocolChoice::Pfabric, 2_000, 0.7, 12);
    let r = run_scenario(&s, None).unwrap();
    let drops: u64 = r.queues.values().map(|q| q.drops).sum();
    assert!(drops > 0, "pFabric's 2×BDP buffers never overflowed");
    assert_eq!(r.messages_incomplete, 0);
    assert!(r.counters["retransmitted_packets"] > 0);
    // Ports never hold more than the buffer.
    let env_buffer = 13 * 1538; // ceil(2 × 8,962 / 1,424) full frames
    for (name, q) in &r.queues {
        if name != "host_nic" {
            assert!(q.peak_bytes <= env_buffer, "{name}: {q:?}");
        }
    }
}

#[test]
fn scenario_toml_sets_nested_fields() {
    let text = r#"
        protocol = "pfabric"
        label = "tiny"
        seed = 42
        messages = 500
        warmup_fraction = 0.2

        [topology]
        racks = 3
        hosts_per_rack = 5
        core_link_gbps = 100.0

        [topology.packetization]
        mtu = 9000

        [switch]
        buffer_bytes = 50000
        priorities = false

        [traffic]
        workload = "w1"
        load = 0.7

        [traffic.incast]
        senders = 3

        [homa]
        num_priorities = 4
        max_overcommit = 2

        [pfabric]
        rto_rtts = 5.0
    "#;
    let s = Scenario::from_toml_str(text, "inline").unwrap();
    assert_eq!(s.protocol, ProtocolChoice::Pfabric);
    assert_eq!(s.label, "tiny");
    assert_eq!((s.seed, s.messages, s.warmup_fraction), (42, 500, 0.2));
    assert_eq!(s.topology.racks, 3);
    assert_eq!(s.topology.hosts_per_rack, 5);
    assert_eq!(s.topology.core_link_gbps, 100.0);
    assert_eq!(s.topology.spines, TopologyConfig::default().spines);
    assert_eq!(s.topology.packetization.mtu, 9000);
    assert_eq!(s.topology.packetization.ip_header, 20);
    assert_eq!(s.switch.buffer_bytes, Some(50_000));
    assert!(!s.switch.priorities);
    assert_eq!(s.traffic.workload, "w1");
    assert_eq!(s.traffic.load, 0.7);
    assert_eq!(s.traffic.incast.senders, 3);
    assert_eq!(s.traffic.incast.rounds, 100);
    assert_eq!(s.homa.num_priorities, 4);
    assert_eq!(s.homa.max_overcommit, Some(2));
    assert_eq!(s.pfabric.rto_rtts, 5.0);

    // An empty file is the default scenario.
    assert_eq!(
        Scenario::from_toml_str("", "empty").unwrap(),
        Scenario::default()
    );
}

#[test]
fn scenario_toml_rejects_unknown_keys_and_bad_values() {
    for (text, key) in [
        ("sede = 3", "sede"),
        ("[topology]\nrack = 3", "rack"),
        ("[traffic]\nloads = 0.5", "loads"),
        ("[switch]\npriority = true", "priority"),
        ("[homa]\novercommit = 3", "overcommit"),
    ] {
        let e = Scenario::from_toml_str(text, "bad.toml").unwrap_err();
        assert!(matches!(e, ScenarioError::Toml { .. }), "{text}: {e:?}");
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("unknown field `{key}`")),
            "{text}: {msg}"
        );
        assert!(msg.contains("bad.toml"), "{text}: {msg}");
    }
    for load in ["0.0", "-0.5", "2.5", "nan", "inf"] {
        let e = Scenario::from_toml_str(&format!("[traffic]\nload = {load}"), "x").unwrap_err();
        assert!(matches!(e, ScenarioError::Invalid(_)), "{load}: {e:?}");
        assert!(e.to_string().contains("traffic.load"), "{load}: {e}");
    }
    // Wrong types are TOML errors.
    assert!(Scenario::from_toml_str("messages = \"many\"", "x").is_err());
    assert!(Scenario::from_toml_str("protocol = \"tcp\"", "x").is_err());
    // Other range checks.
    assert!(Scenario::from_toml_str("messages = 0", "x").is_err());
    assert!(Scenario::from_toml_str("warmup_fraction = 1.0", "x").is_err());
    assert!(Scenario::from_toml_str("[homa]\nnum_priorities = 9", "x").is_err());
    // A topology error surfaces when the simulation is built.
    let s = Scenario::from_toml_str("[topology]\nracks = 0", "x").unwrap();
    assert!(run_scenario(&s, None).is_err());
}

/// A synthetic report of a network that can carry a load of 0.85.
fn synthetic(s: &Scenario) -> RunReport {
    let load = s.traffic.load;
    let delivered = load.min(0.85);
    RunReport {
        load,
        offered_load: load,
        delivered_load: delivered,
        delivered_ratio: delivered / load,
        late_delivered_ratio: delivered / load,
        ..RunReport::default()
    }
}

#[test]
fn max_load_search_bisects_to_the_capacity() {
    let base = Scenario::default();
    let mut calls = Vec::new();
    let r = max_sustainable_load(&base, 0.5, 1.0, 8, 0.98, |s| {
        calls.push(s.traffic.load);
        Ok(synthetic(s))
    })
    .unwrap();
    // lo, hi, then 8 bisection steps.
    assert_eq!(calls.len(), 10);
    assert_eq!(r.probes.len(), 10);
    assert_eq!(calls[..2], [0.5, 1.0]);
    let step = 0.5 / 256.0;
    // Sustained up to 0.85 / 0.98 ≈ 0.867 under a 0.98 threshold.
    let top = 0.85 / 0.98;
    assert!(
        r.max_load <= top && r.max_load > top - step,
        "max_load {}",
        r.max_load
    );
    assert!(r.max_load >= 0.85 - 1e-9);
    for p in &r.probes {
        assert_eq!(p.sustained, p.load <= top, "{p:?}");
    }

    // With a threshold of 1 the search finds the capacity itself, to
    // within one bisection step.
    let r = max_sustainable_load(&base, 0.5, 1.0, 8, 1.0, |s| Ok(synthetic(s))).unwrap();
    assert!(
        r.max_load <= 0.85 && r.max_load > 0.85 - step,
        "max_load {}",
        r.max_load
    );

    // A lo that is not sustained gives 0; a hi that is gives hi.
    let r = max_sustainable_load(&base, 0.9, 1.0, 5, 0.98, |s| Ok(synthetic(s))).unwrap();
    assert_eq!((r.max_load, r.probes.len()), (0.0, 1));
    let r = max_sustainable_load(&base, 0.1, 0.8, 5, 0.98, |s| Ok(synthetic(s))).unwrap();
    assert_eq!((r.max_load, r.probes.len()), (0.8, 2));
}

/// ToR uplinks of rack 1 that carried traffic while host 4 (rack 1) sent a
/// 1 MB message to host 0 (rack 0).
fn used_uplinks_of_rack1(selection: homa_sim::topology::UplinkSelection) -> usize {
    // Incast to host 0 from hosts 1–4: host 4 is in rack 1. Two rounds
    // 5 ms apart, so that the measurement window (first to last arrival)
    // covers all of the first round's transfers.
    let mut s = Scenario {
        topology: TopologyConfig {
            racks: 2,
            hosts_per_rack: 4,
            spines: 4,
            uplink_selection: selection,
            ..TopologyConfig::default()
        },
        warmup_fraction: 0.0,
        ..Scenario::default()
    };
    s.traffic.pattern = Pattern::Incast;
    s.traffic.workload = "fixed:1000000".into();
    s.traffic.incast.senders = 4;
    s.traffic.incast.rounds = 2;
    s.traffic.incast.interval_us = 5_000.0;
    let r = run_scenario(&s, None).unwrap();
    assert_eq!(r.messages_incomplete, 0);
    // Ports: 8 NICs, 8 ToR downlinks, then ToR uplinks rack 0 (16..20)
    // and rack 1 (20..24). The 1 MB message from host 4 (rack 1) to host 0
    // leaves through rack 1's uplinks.
    r.ports
        .iter()
        .filter(|p| p.kind == "tor_up" && (20..24).contains(&p.port))
        .filter(|p| p.utilization > 0.0)
        .count()
}

#[test]
fn spraying_uses_every_uplink_and_hashing_one_per_message() {
    use homa_sim::topology::UplinkSelection;
    assert_eq!(used_uplinks_of_rack1(UplinkSelection::Spray), 4);
    assert_eq!(used_uplinks_of_rack1(UplinkSelection::Hash), 1);
}
