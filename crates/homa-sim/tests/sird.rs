//! SIRD in the simulator: the `sird` protocol (the Homa adapter with
//! `design = Sird`) completes runs without loss, bounds an incast's queue
//! far below Homa's, and reacts to ECN marks from the switches.
//!
//! Small network (2 racks × 4 hosts, 2 spines, 10 Gbit/s hosts), a few
//! thousand messages: seconds per test.

use homa_sim::report::RunReport;
use homa_sim::scenario::{Pattern, ProtocolChoice, Scenario};
use homa_sim::sim::run_scenario;
use homa_sim::topology::TopologyConfig;

fn small(protocol: ProtocolChoice, workload: &str, messages: u64, load: f64) -> Scenario {
    let mut s = Scenario {
        protocol,
        messages,
        topology: TopologyConfig {
            racks: 2,
            hosts_per_rack: 4,
            spines: 2,
            ..TopologyConfig::default()
        },
        ..Scenario::default()
    };
    s.traffic.workload = workload.into();
    s.traffic.load = load;
    s
}

fn drops(r: &RunReport) -> u64 {
    r.queues.values().map(|q| q.drops).sum()
}

#[test]
fn sird_completes_every_message_without_drops() {
    let r = run_scenario(&small(ProtocolChoice::Sird, "w4", 600, 0.5), None).unwrap();
    assert_eq!(r.protocol, "sird");
    assert_eq!(r.messages_incomplete, 0);
    assert_eq!(r.messages_failed, 0);
    assert_eq!(drops(&r), 0);
    assert!(r.messages_measured >= 500);
    assert!(r.goodput_gbps > 0.0);
    // SIRD's credit is B-bounded: no ToR port ever holds much more than
    // B (1.5 × BDP) plus unscheduled prefixes of a few messages.
    let tor = r.switches["tor"].peak_bytes;
    assert!(tor > 0 && tor < 1_000_000, "ToR peak {tor}");
}

fn incast(protocol: ProtocolChoice) -> RunReport {
    let mut s = small(protocol, "fixed:300000", 0, 0.5);
    s.traffic.pattern = Pattern::Incast;
    s.traffic.incast.senders = 7;
    s.traffic.incast.rounds = 3;
    s.traffic.incast.interval_us = 2_000.0;
    run_scenario(&s, None).unwrap()
}

#[test]
fn sird_bounds_an_incast_queue_far_below_homa() {
    let homa = incast(ProtocolChoice::Homa);
    let sird = incast(ProtocolChoice::Sird);
    for r in [&homa, &sird] {
        assert_eq!(r.messages_incomplete, 0, "{}", r.protocol);
        assert_eq!(drops(r), 0);
    }
    let h = homa.queues["tor_down"].peak_bytes;
    let s = sird.queues["tor_down"].peak_bytes;
    // Homa: 7 unscheduled RTTbytes plus overcommitted grants; SIRD: at
    // most B of credit (messages above UnschT send nothing unscheduled).
    assert!(s * 3 < h, "SIRD {s} B vs Homa {h} B");
}

/// A 4:1 oversubscribed core under all-to-all traffic, with or without an
/// ECN threshold (NThr) on every switch port.
fn congested_core(nthr: Option<u64>) -> RunReport {
    let mut s = small(ProtocolChoice::Sird, "w4", 400, 0.6);
    s.topology.core_link_gbps = 5.0;
    s.topology.hosts_per_rack = 4;
    s.switch.ecn_threshold_bytes = nthr;
    run_scenario(&s, None).unwrap()
}

#[test]
fn ce_marks_reach_the_core_and_shrink_core_queues() {
    let plain = congested_core(None);
    let marked = congested_core(Some(3_000));
    assert_eq!(plain.counters["ce_marked_received"], 0);
    let ce = marked.counters["ce_marked_received"];
    assert!(ce > 100, "CE-marked packets delivered: {ce}");
    // The netBkt loop shrinks per-sender credit on marks, so the core
    // (ToR uplink) queues are smaller.
    let (p, m) = (
        plain.queues["tor_up"].mean_bytes,
        marked.queues["tor_up"].mean_bytes,
    );
    assert!(
        m < p * 0.8,
        "mean ToR uplink queue {m} with marks vs {p} without"
    );
    assert_eq!(marked.messages_incomplete, 0);
}

#[test]
fn incast_overlay_is_counted_in_load_but_not_in_slowdowns() {
    let mut s = small(ProtocolChoice::Sird, "w3", 2000, 0.3);
    s.traffic.overlay = Some(homa_sim::scenario::OverlayConfig {
        senders: 5,
        message_bytes: 100_000,
        interval_us: 500.0,
    });
    let with = run_scenario(&s, None).unwrap();
    s.traffic.overlay = None;
    let without = run_scenario(&s, None).unwrap();
    assert!(with.counters["overlay_messages"] >= 5);
    assert_eq!(with.messages_generated, without.messages_generated);
    assert_eq!(with.messages_measured, without.messages_measured);
    assert!(with.offered_gbps > without.offered_gbps * 1.2);
}
