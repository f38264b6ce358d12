//! The SIRD paper's simulation setup (seed 001, §5.1, Table 2) as scenarios:
//! 144 hosts in 9 racks of 16 under 4 spines, 100 Gbit/s host links and
//! 400 Gbit/s ToR–spine links, MSS round trips of 5.5 µs in a rack and
//! 7.5 µs across, BDP = 100 KB, infinite buffers, ECN at NThr = 1.25×BDP,
//! packet spraying; SIRD with 2 priority levels, Homa with 8 and its
//! parameters scaled to the BDP. Three configurations (Balanced, Core,
//! Incast) × three workloads (WKa, WKb, WKc = our w3, w4, w5).

use crate::homa::{HomaConfig, SirdSimConfig};
use crate::scenario::{OverlayConfig, ProtocolChoice, Scenario, SwitchConfig};
use crate::topology::{tx_time, Packetization, Topology, TopologyConfig};
use homa_measure::cdf::SizeDist;

/// The paper's BDP (bytes).
pub const BDP: u32 = 100_000;
/// NThr, the ECN marking threshold: 1.25×BDP.
pub const NTHR: u64 = BDP as u64 * 5 / 4;
/// MSS round trip within a rack (ns).
pub const RTT_INTRA_NS: f64 = 5_500.0;
/// MSS round trip across racks (ns).
pub const RTT_INTER_NS: f64 = 7_500.0;
/// Fixed per-packet switch latency we choose (the thesis' value); the
/// propagation delay then follows from the round trips.
const SWITCH_DELAY_NS: f64 = 250.0;
/// Host send-side delays we choose (software, NIC); the receive side
/// then follows from the round trips.
const HOST_TX_NS: f64 = 500.0;
const NIC_TX_NS: f64 = 500.0;
/// Share of messages that cross the spines with uniform destinations
/// (128 of 143 other hosts), as the paper rounds it.
pub const CORE_SHARE: f64 = 0.89;
/// Share of the total load the incast overlay carries.
pub const INCAST_SHARE: f64 = 0.07;
/// Senders per incast round and their message size.
pub const INCAST_SENDERS: u32 = 30;
/// Size of each incast message (bytes).
pub const INCAST_BYTES: u64 = 500_000;

/// The paper's three traffic configurations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Setup {
    /// Non-oversubscribed leaf–spine, Poisson all-to-all.
    Balanced,
    /// ToR–spine links at 200 Gbit/s (2:1), host load scaled down by
    /// 0.89×2 so that the core sees the nominal load.
    Core,
    /// Balanced plus an incast overlay carrying 7% of the load.
    Incast,
}

impl Setup {
    /// In the paper's order.
    pub const ALL: [Setup; 3] = [Setup::Balanced, Setup::Core, Setup::Incast];

    /// Name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Setup::Balanced => "Balanced",
            Setup::Core => "Core",
            Setup::Incast => "Incast",
        }
    }
}

/// The paper's workloads and ours: (paper, ours, what).
pub const WORKLOADS: [(&str, &str, &str); 3] = [
    ("WKa", "w3", "Google all RPCs, mean 3 KB"),
    ("WKb", "w4", "Facebook Hadoop, mean 125 KB"),
    ("WKc", "w5", "web search, mean 2.5 MB"),
];

/// How long and with what message cap runs are.
#[derive(Debug, Clone, PartialEq)]
pub struct RunLength {
    /// Simulated time of Poisson arrivals per run (µs).
    pub arrivals_us: f64,
    /// Largest message (bytes); larger ones are cut to it.
    pub max_message: u64,
}

/// Delays (switch, propagation, host tx, NIC tx, host rx; ns) that give a
/// full (MSS) data packet and a minimum-size reply the paper's round trips
/// on links of `host_gbps` and `core_gbps`.
pub fn derive_delays(p: &Packetization, host_gbps: f64, core_gbps: f64) -> [f64; 5] {
    let ser = |bytes: u32, gbps: f64| bytes as f64 * 8.0 / gbps;
    let (data, ctl) = (p.max_frame(), p.min_frame);
    // Across racks the path adds, each way, two core links and two hops
    // (propagation + switch) over the in-rack path.
    let extra_ser = 2.0 * (ser(data, core_gbps) + ser(ctl, core_gbps));
    let per_hop = (RTT_INTER_NS - RTT_INTRA_NS - extra_ser) / 4.0;
    let prop = per_hop - SWITCH_DELAY_NS;
    // In a rack: each way two host links, two propagations, one switch,
    // the send-side and receive-side host delays.
    let intra_ser = 2.0 * (ser(data, host_gbps) + ser(ctl, host_gbps));
    let rx = (RTT_INTRA_NS - intra_ser - 4.0 * prop - 2.0 * SWITCH_DELAY_NS) / 2.0
        - HOST_TX_NS
        - NIC_TX_NS;
    [SWITCH_DELAY_NS, prop, HOST_TX_NS, NIC_TX_NS, rx]
}

/// The paper's network for `setup`.
pub fn topology(setup: Setup) -> TopologyConfig {
    let core_gbps = if setup == Setup::Core { 200.0 } else { 400.0 };
    let packetization = Packetization::default();
    // The delays are fixed by the balanced network's round trips; the
    // slower core of the Core setup only adds serialisation.
    let [switch, prop, htx, nic, rx] = derive_delays(&packetization, 100.0, 400.0);
    TopologyConfig {
        racks: 9,
        hosts_per_rack: 16,
        spines: 4,
        host_link_gbps: 100.0,
        core_link_gbps: core_gbps,
        switch_delay_ns: switch,
        propagation_ns: prop,
        host_tx_delay_ns: htx,
        nic_tx_delay_ns: nic,
        host_rx_delay_ns: rx,
        packetization,
        ..TopologyConfig::default()
    }
}

/// MSS round trip of `topo` within a rack (ps): a full data packet out,
/// a minimum-size frame back.
pub fn rtt_intra(topo: &Topology) -> crate::Time {
    let p = &topo.config.packetization;
    let one_way = |frame: u32| {
        tx_time(frame, topo.host_bps) * 2
            + topo.host_tx_delay
            + 2 * topo.propagation
            + topo.switch_delay
            + topo.host_rx_delay
    };
    one_way(p.max_frame()) + one_way(p.min_frame)
}

/// Host payload load (fraction of the host link) behind a nominal load of
/// `load`: the Core setup scales it down by 0.89×2 so that the core links
/// see `load`.
pub fn host_load(setup: Setup, load: f64) -> f64 {
    match setup {
        Setup::Core => load / (CORE_SHARE * 2.0),
        _ => load,
    }
}

/// The incast overlay for a total (payload) load of `load`: 7% of it in
/// rounds of 30 × 500 KB.
pub fn overlay(load: f64, hosts: u32, host_gbps: f64) -> OverlayConfig {
    let rate_bps = INCAST_SHARE * load * hosts as f64 * host_gbps * 1e9;
    let round_bits = (INCAST_SENDERS as u64 * INCAST_BYTES * 8) as f64;
    OverlayConfig {
        senders: INCAST_SENDERS,
        message_bytes: INCAST_BYTES,
        interval_us: round_bits / rate_bps * 1e6,
    }
}

/// One run of the SIRD set: `protocol` on `setup` with workload `wl` (ours)
/// at nominal payload load `load` (the paper's: a fraction of link
/// capacity, headers excluded).
pub fn scenario(
    protocol: ProtocolChoice,
    setup: Setup,
    wl: &str,
    load: f64,
    len: &RunLength,
) -> Scenario {
    let topology = topology(setup);
    let pk = topology.packetization;
    let dist = SizeDist::by_name(wl)
        .map(|d| d.capped(len.max_message))
        .unwrap_or_else(|_| SizeDist::fixed(1000));
    // The paper's load excludes headers; ours counts the data packets'
    // wire bytes.
    let wire_per_payload = dist.mean_wire_bytes(&pk) / dist.mean().max(1.0);
    let payload_load = host_load(setup, load);
    let background = match setup {
        Setup::Incast => payload_load * (1.0 - INCAST_SHARE),
        _ => payload_load,
    };
    let hosts = topology.racks * topology.hosts_per_rack;
    let per_host_rate = background * topology.host_link_gbps * 1e9 / (8.0 * dist.mean());
    let messages = (per_host_rate * hosts as f64 * len.arrivals_us * 1e-6).round() as u64;
    let mut s = Scenario {
        protocol,
        label: setup.name().to_string(),
        messages: messages.max(1000),
        topology,
        switch: SwitchConfig {
            buffer_bytes: None,
            ecn_threshold_bytes: Some(NTHR),
            priorities: true,
        },
        homa: HomaConfig {
            num_priorities: 8,
            grant_window: Some(BDP),
            unsched_bytes: Some(BDP),
            ..HomaConfig::default()
        },
        sird: SirdSimConfig::default(),
        ..Scenario::default()
    };
    s.traffic.workload = wl.to_string();
    s.traffic.max_message = Some(len.max_message);
    s.traffic.load = background * wire_per_payload;
    if setup == Setup::Incast {
        s.traffic.overlay = Some(overlay(payload_load, hosts, s.topology.host_link_gbps));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_match_the_paper() {
        for setup in [Setup::Balanced, Setup::Incast] {
            let t = Topology::new(topology(setup)).unwrap();
            assert_eq!(t.hosts, 144);
            // Topology::rtt is the cross-rack MSS round trip.
            let inter = t.rtt() as f64 / 1000.0;
            let intra = rtt_intra(&t) as f64 / 1000.0;
            assert!((inter - RTT_INTER_NS).abs() < 1.0, "inter {inter}");
            assert!((intra - RTT_INTRA_NS).abs() < 1.0, "intra {intra}");
        }
        let core = Topology::new(topology(Setup::Core)).unwrap();
        assert_eq!(core.core_bps, 200_000_000_000);
    }

    #[test]
    fn core_and_incast_configurations() {
        let len = RunLength {
            arrivals_us: 100.0,
            max_message: 2_000_000,
        };
        let b = scenario(ProtocolChoice::Sird, Setup::Balanced, "w4", 0.5, &len);
        let c = scenario(ProtocolChoice::Sird, Setup::Core, "w4", 0.5, &len);
        let i = scenario(ProtocolChoice::Sird, Setup::Incast, "w4", 0.5, &len);
        assert_eq!(b.switch.ecn_threshold_bytes, Some(125_000));
        assert_eq!(b.switch.buffer_bytes, None);
        assert!(b.traffic.overlay.is_none() && c.traffic.overlay.is_none());
        // Core: host load scaled by 1/(0.89×2).
        assert!((c.traffic.load * 1.78 - b.traffic.load).abs() < 1e-9);
        assert_eq!(c.topology.core_link_gbps, 200.0);
        // Incast: background 93%, overlay 7% of the total load.
        assert!((i.traffic.load - 0.93 * b.traffic.load).abs() < 1e-9);
        let o = i.traffic.overlay.as_ref().unwrap();
        assert_eq!((o.senders, o.message_bytes), (30, 500_000));
        let overlay_bps = 30.0 * 500_000.0 * 8.0 / (o.interval_us * 1e-6);
        let total_bps = 0.5 * 144.0 * 100e9;
        assert!(
            (overlay_bps / total_bps - 0.07).abs() < 1e-9,
            "{}",
            overlay_bps / total_bps
        );
        assert!(Scenario::validate(&i).is_ok());
    }
}
