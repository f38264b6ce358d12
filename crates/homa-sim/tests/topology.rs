//! The network model's arithmetic checked against hand formulas: framing,
//! serialisation, store-and-forward latency, RTT and RTTbytes, and the
//! rejection of nonsensical parameters.
//!
//! Everything is in picoseconds and computed with integer arithmetic, so
//! the comparisons are exact.

use homa_sim::topology::{
    tx_time, Packetization, PortKind, Topology, TopologyConfig, TopologyError,
};
use homa_sim::Time;

/// Picoseconds per nanosecond.
const NS: Time = 1_000;

/// Picoseconds to serialise `bytes` at `gbps` Gbit/s (exact for the rates
/// used here: 8 bits × 1000 ps/ns ÷ gbps).
fn ser(bytes: u64, gbps: u64) -> Time {
    bytes * 8 * 1_000 / gbps
}

/// Bytes on the wire of a data packet carrying `payload` message bytes with
/// the default packetization, spelled out by hand: payload + Homa DATA
/// header (56) + IPv4 header (20) + Ethernet header, FCS, preamble and
/// inter-packet gap (14 + 4 + 8 + 12 = 38), at least the 84-byte minimum
/// frame.
fn frame(payload: u64) -> u64 {
    (payload + 56 + 20 + 38).max(84)
}

/// Message bytes in a full 1500-byte IP packet: 1500 − 20 − 56.
const MAX_PAYLOAD: u64 = 1500 - 20 - 56;

fn thesis() -> Topology {
    Topology::new(TopologyConfig::default()).expect("default topology is valid")
}

// Fixed delays of the defaults.
const HOST_TX: Time = 500 * NS + 500 * NS; // software + NIC
const SWITCH: Time = 250 * NS;
const HOST_RX: Time = 500 * NS;

/// Latency of a single frame of `f` wire bytes on an empty path.
fn single_frame_latency(f: u64, same_rack: bool) -> Time {
    if same_rack {
        // host → ToR → host: two 10G links, one switch.
        HOST_TX + ser(f, 10) + SWITCH + ser(f, 10) + HOST_RX
    } else {
        // host → ToR → spine → ToR → host: 10G, 40G, 40G, 10G, three
        // switches.
        HOST_TX
            + ser(f, 10)
            + SWITCH
            + ser(f, 40)
            + SWITCH
            + ser(f, 40)
            + SWITCH
            + ser(f, 10)
            + HOST_RX
    }
}

#[test]
fn default_packetization_matches_the_header_sizes() {
    let p = Packetization::default();
    assert_eq!(p.data_header, 56, "Homa DATA header");
    assert_eq!(p.max_payload() as u64, MAX_PAYLOAD);
    assert_eq!(p.max_frame() as u64, 1538);
    assert_eq!(p.data_frame(100) as u64, frame(100));
    assert_eq!(frame(100), 214);
}

#[test]
fn single_small_packet_latency_matches_hand_formula() {
    let t = thesis();
    let f = frame(100); // 214 bytes
    assert_eq!(ser(f, 10), 171_200);
    assert_eq!(ser(f, 40), 42_800);

    // Other rack: 1 µs + 171.2 + 250 + 42.8 + 250 + 42.8 + 250 + 171.2 ns
    // + 0.5 µs = 2.678 µs.
    let cross = single_frame_latency(f, false);
    assert_eq!(cross, 2_678_000);
    assert_eq!(t.unloaded_latency(100, false), cross);

    // Same rack: 1 µs + 171.2 + 250 + 171.2 ns + 0.5 µs = 2.0924 µs.
    let same = single_frame_latency(f, true);
    assert_eq!(same, 2_092_400);
    assert_eq!(t.unloaded_latency(100, true), same);

    // The building blocks agree with the formula too.
    assert_eq!(tx_time(f as u32, t.host_bps), ser(f, 10));
    assert_eq!(tx_time(f as u32, t.core_bps), ser(f, 40));
    assert_eq!(t.hop_delay(PortKind::HostNic), HOST_TX + SWITCH);
    assert_eq!(t.hop_delay(PortKind::TorUp), SWITCH);
    assert_eq!(t.hop_delay(PortKind::SpineDown), SWITCH);
    assert_eq!(t.hop_delay(PortKind::TorDown), HOST_RX);
}

#[test]
fn tiny_messages_pay_the_minimum_frame() {
    let t = thesis();
    // 0 and 1 byte: 56 + 20 + 38 + {0, 1} = 114/115 > 84, so the minimum
    // does not bite for data packets; both are a single packet.
    for size in [0u64, 1] {
        assert_eq!(
            t.unloaded_latency(size, false),
            single_frame_latency(frame(size), false)
        );
    }
}

/// Store-and-forward pipelining of a train of frames. With frames of equal
/// size (or a smaller last one), the 10G host links are the bottleneck: the
/// 40G hops and the fixed delays only shift every packet by the same amount.
/// The sender's NIC puts a frame on the wire every `ser(full, 10)`; each
/// later hop finishes a frame no earlier than it receives it, and because
/// the 10G downlink takes exactly as long as the 10G uplink, frame k leaves
/// the last link `ser(full, 10)` after frame k−1. Hence
///
///   latency(n full frames) = latency(1 full frame) + (n − 1) · ser(full, 10).
///
/// With a smaller last frame of `l` bytes, the n−1 full frames arrive as
/// above. The short last frame leaves the NIC only ser(l, 10) after frame
/// n−1, so it may queue behind it on the 40G hops (for l = 214 bytes,
/// 171.2 ns < 307.6 ns), but it still reaches the last ToR long before
/// frame n−1 has finished its 1230.4 ns on the 10G downlink. It is
/// therefore sent right after frame n−1 there and arrives ser(l, 10) later:
///
///   latency = latency(n−1 full) + ser(l, 10)
///           = latency(1 full) + (n − 2) · ser(full, 10) + ser(l, 10).
#[test]
fn multi_packet_latency_is_first_packet_plus_bottleneck_serialisation() {
    let t = thesis();
    let full = frame(MAX_PAYLOAD);
    assert_eq!(full, 1538);
    let one = single_frame_latency(full, false);
    let one_same = single_frame_latency(full, true);
    // 1 µs + 1230.4 + 250 + 307.6 + 250 + 307.6 + 250 + 1230.4 ns + 0.5 µs.
    assert_eq!(one, 5_326_000);
    assert_eq!(t.unloaded_latency(MAX_PAYLOAD, false), one);
    for n in [2u64, 7, 100] {
        let size = n * MAX_PAYLOAD;
        let expect = one + (n - 1) * ser(full, 10);
        assert_eq!(t.unloaded_latency(size, false), expect, "{n} packets");
        // Same rack: both links are 10G, same argument.
        let expect_same = one_same + (n - 1) * ser(full, 10);
        assert_eq!(t.unloaded_latency(size, true), expect_same, "{n} packets");
    }

    // 7 full packets and one carrying 100 bytes.
    let size = 7 * MAX_PAYLOAD + 100;
    let expect = one + 6 * ser(full, 10) + ser(frame(100), 10);
    assert_eq!(t.unloaded_latency(size, false), expect);
    assert_eq!(expect, 5_326_000 + 6 * 1_230_400 + 171_200);

    // A message just one byte over a full packet.
    let size = MAX_PAYLOAD + 1;
    let expect = one + ser(frame(1), 10);
    assert_eq!(t.unloaded_latency(size, false), expect);
}

/// With a 10G core the per-frame argument still holds: every link now has
/// the same rate, so the train leaves every hop one frame time apart.
#[test]
fn multi_packet_latency_with_uniform_link_rates() {
    let t = Topology::new(TopologyConfig {
        core_link_gbps: 10.0,
        ..TopologyConfig::default()
    })
    .unwrap();
    let full = frame(MAX_PAYLOAD);
    let one = HOST_TX + 4 * ser(full, 10) + 3 * SWITCH + HOST_RX;
    assert_eq!(t.unloaded_latency(MAX_PAYLOAD, false), one);
    assert_eq!(
        t.unloaded_latency(10 * MAX_PAYLOAD, false),
        one + 9 * ser(full, 10)
    );
}

#[test]
fn propagation_delay_is_paid_once_per_link() {
    let t = Topology::new(TopologyConfig {
        propagation_ns: 100.0,
        ..TopologyConfig::default()
    })
    .unwrap();
    let f = frame(100);
    assert_eq!(
        t.unloaded_latency(100, false),
        single_frame_latency(f, false) + 4 * 100 * NS
    );
    assert_eq!(
        t.unloaded_latency(100, true),
        single_frame_latency(f, true) + 2 * 100 * NS
    );
}

#[test]
fn rtt_and_rtt_bytes_of_the_thesis_topology() {
    let t = thesis();
    // A full data frame out to another rack and an 84-byte control frame
    // back.
    let out = single_frame_latency(1538, false);
    let back = single_frame_latency(84, false);
    // 1 µs + 67.2 + 250 + 16.8 + 250 + 16.8 + 250 + 67.2 ns + 0.5 µs
    assert_eq!(back, 2_418_000);
    let rtt = out + back;
    assert_eq!(t.rtt(), rtt);
    // 5.326 + 2.418 = 7.744 µs: about 7.7 µs (the thesis quotes 7.8 µs
    // with slightly different headers).
    assert_eq!(rtt, 7_744_000);
    assert!((7_600_000..=7_900_000).contains(&t.rtt()), "{}", t.rtt());

    // RTTbytes: bytes a 10G link carries in one RTT, at full-packet
    // efficiency (1424 message bytes per 1538-byte frame).
    let wire = rtt as u128 * 10 / 8 / 1_000; // ps × 10 Gbit/s → bytes
    let expect = (wire * MAX_PAYLOAD as u128 / 1538) as u64;
    assert_eq!(t.rtt_bytes(), expect);
    assert!(
        (8_000..=10_000).contains(&t.rtt_bytes()),
        "rtt_bytes {}",
        t.rtt_bytes()
    );
}

#[test]
fn rtt_of_a_single_rack_uses_the_same_rack_path() {
    let t = Topology::new(TopologyConfig {
        racks: 1,
        spines: 0,
        ..TopologyConfig::default()
    })
    .unwrap();
    assert_eq!(
        t.rtt(),
        single_frame_latency(1538, true) + single_frame_latency(84, true)
    );
    // A one-rack network has no other rack: `same_rack = false` falls back
    // to the same-rack path.
    assert_eq!(
        t.unloaded_latency(100, false),
        t.unloaded_latency(100, true)
    );
}

#[test]
fn packetization_counts_packets_and_wire_bytes() {
    let p = Packetization::default();
    let mp = p.max_payload() as u64;
    assert_eq!(p.packets(0), 1, "an empty message still takes a packet");
    assert_eq!(p.packets(1), 1);
    assert_eq!(p.packets(mp), 1);
    assert_eq!(p.packets(mp + 1), 2);
    assert_eq!(p.packets(10 * mp), 10);
    assert_eq!(p.packets(10 * mp + 1), 11);

    assert_eq!(p.message_wire_bytes(0), frame(0));
    assert_eq!(p.message_wire_bytes(0), 114);
    assert_eq!(p.message_wire_bytes(1), 115);
    assert_eq!(p.message_wire_bytes(mp), 1538);
    assert_eq!(p.message_wire_bytes(mp + 1), 1538 + 115);
    assert_eq!(p.message_wire_bytes(3 * mp), 3 * 1538);
    assert_eq!(p.message_wire_bytes(3 * mp + 500), 3 * 1538 + frame(500));

    // The minimum frame: anything whose IP packet is shorter than 46 bytes
    // is padded to 84 bytes on the wire.
    assert_eq!(p.min_frame, 84);
    assert_eq!(p.frame_bytes(0), 84);
    assert_eq!(p.frame_bytes(26), 84);
    assert_eq!(p.frame_bytes(27), 85);
}

#[test]
fn packetization_with_smaller_headers_reaches_the_minimum_frame() {
    // A tiny transport header so that small data packets hit the minimum.
    let p = Packetization {
        data_header: 8,
        ..Packetization::default()
    };
    assert_eq!(p.max_payload(), 1472);
    assert_eq!(p.message_wire_bytes(0), 84);
    assert_eq!(p.message_wire_bytes(18), 84);
    assert_eq!(p.message_wire_bytes(19), 85);
    assert_eq!(p.message_wire_bytes(1473), 1538 + 84);
}

fn invalid(c: TopologyConfig) -> TopologyError {
    match Topology::new(c.clone()) {
        Ok(_) => panic!("accepted {c:?}"),
        Err(e) => e,
    }
}

#[test]
fn nonsensical_topologies_are_rejected() {
    let d = TopologyConfig::default;
    let e = invalid(TopologyConfig { racks: 0, ..d() });
    assert!(e.to_string().contains("racks"), "{e}");
    invalid(TopologyConfig {
        hosts_per_rack: 0,
        ..d()
    });
    let e = invalid(TopologyConfig { spines: 0, ..d() });
    assert!(e.to_string().contains("spine"), "{e}");

    for bad in [0.0, -10.0, f64::NAN, f64::INFINITY] {
        let e = invalid(TopologyConfig {
            host_link_gbps: bad,
            ..d()
        });
        assert!(e.to_string().contains("host_link_gbps"), "{e}");
        let e = invalid(TopologyConfig {
            core_link_gbps: bad,
            ..d()
        });
        assert!(e.to_string().contains("core_link_gbps"), "{e}");
    }
    for bad in [-1.0, f64::NAN, f64::INFINITY] {
        let e = invalid(TopologyConfig {
            switch_delay_ns: bad,
            ..d()
        });
        assert!(e.to_string().contains("switch_delay_ns"), "{e}");
        invalid(TopologyConfig {
            propagation_ns: bad,
            ..d()
        });
        invalid(TopologyConfig {
            host_tx_delay_ns: bad,
            ..d()
        });
        invalid(TopologyConfig {
            nic_tx_delay_ns: bad,
            ..d()
        });
        invalid(TopologyConfig {
            host_rx_delay_ns: bad,
            ..d()
        });
    }

    // An MTU that leaves fewer than 64 payload bytes, and one above 65535.
    for mtu in [0, 100, 20 + 56 + 63, 65_536] {
        let e = invalid(TopologyConfig {
            packetization: Packetization {
                mtu,
                ..Packetization::default()
            },
            ..d()
        });
        assert!(e.to_string().contains("mtu"), "{e}");
    }
    // The smallest legal MTU works.
    Topology::new(TopologyConfig {
        packetization: Packetization {
            mtu: 20 + 56 + 64,
            ..Packetization::default()
        },
        ..d()
    })
    .unwrap();

    // Too many hosts.
    invalid(TopologyConfig {
        racks: 1 << 11,
        hosts_per_rack: 1 << 10,
        ..d()
    });
}

#[test]
fn a_single_rack_needs_no_spine_and_ports_are_numbered_as_documented() {
    let t = Topology::new(TopologyConfig {
        racks: 1,
        hosts_per_rack: 4,
        spines: 0,
        ..TopologyConfig::default()
    })
    .unwrap();
    assert_eq!(t.hosts, 4);
    assert_eq!(t.num_ports(), 8);

    let t = Topology::new(TopologyConfig {
        racks: 2,
        hosts_per_rack: 4,
        spines: 2,
        ..TopologyConfig::default()
    })
    .unwrap();
    let ports = t.ports();
    assert_eq!(ports.len(), t.num_ports());
    assert_eq!(t.num_ports(), 8 + 8 + 4 + 4);
    assert_eq!(ports[t.host_nic(5)].0, PortKind::HostNic);
    assert_eq!(ports[t.tor_down(5)].0, PortKind::TorDown);
    assert_eq!(ports[t.tor_up(1, 1)].0, PortKind::TorUp);
    assert_eq!(ports[t.spine_down(1, 0)].0, PortKind::SpineDown);
    assert_eq!(t.tor_up(1, 1), 2 * 8 + 2 + 1);
    assert_eq!(t.spine_down(1, 0), 2 * 8 + 4 + 2);
    assert_eq!(t.rack_of(3), 0);
    assert_eq!(t.rack_of(4), 1);
}
