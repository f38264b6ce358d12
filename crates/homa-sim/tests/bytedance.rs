//! ByteDance mode, heterogeneous links and background flows in the
//! simulator: small runs that must complete, exchange probes and measure
//! what the network really is.

use homa_sim::background::BackgroundFlow;
use homa_sim::homa::{addr, Homa};
use homa_sim::links::HostLinkOverride;
use homa_sim::scenario::Scenario;
use homa_sim::sim::{run_scenario, Simulation};
use homa_sim::topology::{Topology, TopologyConfig};
use homa_sim::Time;

/// 2 racks × 4 hosts, 2 spines, 10G hosts, w3 at 40% load.
fn small(messages: u64, bytedance: bool) -> Scenario {
    let mut s = Scenario {
        messages,
        topology: TopologyConfig {
            racks: 2,
            hosts_per_rack: 4,
            spines: 2,
            ..TopologyConfig::default()
        },
        ..Scenario::default()
    };
    s.traffic.workload = "w3".into();
    s.traffic.load = 0.4;
    s.homa.bytedance.enabled = bytedance;
    s
}

#[test]
fn bytedance_mode_runs_exchanges_probes_and_delivers_everything() {
    let r = run_scenario(&small(3_000, true), None).unwrap();
    assert_eq!(r.messages_incomplete, 0);
    assert_eq!(r.messages_failed, 0);
    let c = |k: &str| r.counters.get(k).copied().unwrap_or(0);
    assert!(c("rtt_probes_sent") > 0, "{:?}", r.counters);
    assert!(c("rtt_probes_answered") > 0);
    assert!(c("rtt_responses") > 0);
    // The network loses nothing: every probe is answered, or refused by a
    // server that has seen only one-packet requests from us (we are not a
    // proven peer there; docs/protocol-notes.md), and every answer is a
    // sample.
    assert_eq!(
        c("rtt_probes_answered") + c("rtt_invalid"),
        c("rtt_probes_sent")
    );
    assert_eq!(c("rtt_responses"), c("rtt_probes_answered"));
    assert!(
        c("rtt_invalid") * 4 < c("rtt_probes_sent"),
        "{:?}",
        r.counters
    );
    assert_eq!(c("data_beyond_grant"), 0);
    // Stock Homa never probes.
    let r = run_scenario(&small(500, false), None).unwrap();
    assert_eq!(r.counters["rtt_probes_sent"], 0);
    assert_eq!(r.messages_incomplete, 0);
}

#[test]
fn bytedance_mode_refused_for_other_protocols() {
    let mut s = small(10, true);
    s.protocol = homa_sim::scenario::ProtocolChoice::Pfabric;
    assert!(s.validate().is_err());
    let text = "[homa.bytedance]\nenabled = true\ngso_bytes = 0\n";
    let s = Scenario::from_toml_str(text, "test").unwrap();
    assert!(s.homa.bytedance.enabled);
}

#[test]
fn extra_delay_and_rate_change_the_measured_path() {
    let mut s = small(2_000, true);
    s.topology.host_links = vec![
        HostLinkOverride {
            hosts: "0".into(),
            extra_delay_ns: 10_000.0,
            gbps: None,
        },
        HostLinkOverride {
            hosts: "5".into(),
            extra_delay_ns: 0.0,
            gbps: Some(25.0),
        },
    ];
    let topo = Topology::new(s.topology.clone()).unwrap();
    // Each direction of host 0's link is 10 µs longer.
    assert_eq!(topo.rtt_between(0, 4) - topo.rtt_between(1, 4), 20_000_000);
    // A faster first hop (the bottleneck is still the 10G downlink).
    assert!(topo.unloaded_latency_between(100_000, 5, 1) < topo.unloaded_latency(100_000, false));
    assert_eq!(
        topo.unloaded_latency_between(100_000, 1, 6),
        topo.unloaded_latency(100_000, false)
    );
    assert_eq!(topo.rtt(), {
        let nominal = Topology::new(small(1, false).topology).unwrap();
        nominal.rtt()
    });
    let protocol = Homa::new(s.homa.clone());
    let sim = Simulation::new(s, &protocol).unwrap();
    let (r, peers) = sim.run_inspect(None, |sim| {
        let ep = sim.transport(4).endpoint();
        (
            ep.bytedance_peer(addr(0)),
            ep.bytedance_peer(addr(1)),
            ep.bytedance_peer(addr(5)),
        )
    });
    assert_eq!(r.messages_incomplete, 0);
    let (far, near, fast) = peers;
    let (far, near) = (far.unwrap(), near.unwrap());
    assert!(far.rtt.has_sample() && near.rtt.has_sample());
    // The far peer's minimum RTT is about 20 µs longer than the near one's.
    let diff = far.rtt.min_ns as i64 - near.rtt.min_ns as i64;
    assert!((19_000..21_000).contains(&diff), "{diff} ns");
    // Host 5 told host 4 its 25 Gbit/s link.
    assert_eq!(fast.unwrap().link_mbps, 25_000);
    assert_eq!(sim_link_mbps(&protocol, 5), 25_000);
}

/// The link rate host `h`'s core is configured with, in a fresh run of the
/// same scenario.
fn sim_link_mbps(protocol: &Homa, h: u32) -> u64 {
    let mut s = small(1, true);
    s.topology.host_links = vec![HostLinkOverride {
        hosts: "5".into(),
        extra_delay_ns: 0.0,
        gbps: Some(25.0),
    }];
    let sim = Simulation::new(s, protocol).unwrap();
    sim.transport(h).endpoint().config().link_mbps
}

#[test]
fn background_flow_delivers_its_rate_and_is_dropped_when_the_buffer_is_full() {
    let mut s = small(2_000, false);
    s.traffic.background = vec![BackgroundFlow {
        hosts: "0-1".into(),
        gbps: 4.0,
        priority: 0,
    }];
    let r = run_scenario(&s, None).unwrap();
    assert_eq!(r.messages_incomplete, 0);
    let c = &r.counters;
    assert_eq!(c["background_flows"], 2);
    assert!(c["background_sent_frames"] > 0);
    // It offers 4 Gbit/s per flow; with room in the buffer nearly all of
    // it arrives (frames still queued at the end are the difference).
    let offered = c["background_offered_mbps_per_flow"] as f64;
    assert!((offered - 4_000.0).abs() < 100.0, "{offered}");
    assert!(c["background_delivered_mbps_per_flow"] as f64 > 0.95 * offered);
    assert_eq!(c["background_dropped_frames"], 0);
    // A flow faster than the link into a small buffer loses the excess.
    s.traffic.background[0].gbps = 15.0;
    s.switch.buffer_bytes = Some(50_000);
    s.messages = 300;
    let r = run_scenario(&s, None).unwrap();
    assert!(r.counters["background_dropped_frames"] > 0);
    let delivered = r.counters["background_delivered_mbps_per_flow"];
    assert!(delivered <= 10_000, "{delivered} Mbit/s through a 10G link");
}

#[test]
fn background_priority_decides_who_waits() {
    // At the top priority a full-rate flow starves Homa's data on those
    // downlinks far more than at the lowest.
    let mut slow = Vec::new();
    for priority in [0u8, 7] {
        let mut s = small(600, false);
        s.traffic.background = vec![BackgroundFlow {
            hosts: "0-7".into(),
            gbps: 6.0,
            priority,
        }];
        let r = run_scenario(&s, None).unwrap();
        slow.push(r.overall.p50);
    }
    assert!(slow[1] > slow[0], "{slow:?}");
    let _: Time = 0;
}
