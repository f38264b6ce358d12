//! The results of one run, as data. Writers for JSON, CSV, the stdout
//! summary and plots live in [`crate::output`] and [`crate::plot`].

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Slowdown statistics of one group of messages.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SlowdownStats {
    /// Messages in the group.
    pub count: u64,
    /// Mean slowdown.
    pub mean: f64,
    /// Median slowdown.
    pub p50: f64,
    /// 99th-percentile slowdown.
    pub p99: f64,
    /// Largest slowdown.
    pub max: f64,
}

/// One bucket of the slowdown spectrum: messages sorted by size and cut
/// into groups of equal count (the thesis' x-axis by size percentile).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Bucket {
    /// Where the bucket starts in the size order (0..1, fraction of
    /// measured messages).
    pub percentile_lo: f64,
    /// Where it ends (0..1).
    pub percentile_hi: f64,
    /// Smallest message in the bucket (bytes).
    pub size_lo: u64,
    /// Largest message in the bucket (bytes).
    pub size_hi: u64,
    /// Slowdowns of its messages.
    pub slowdown: SlowdownStats,
}

/// Queue occupancy of one group of switch egress ports (bytes waiting,
/// not counting the packet being transmitted, as the thesis' Table 6.1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueStats {
    /// Ports in the group.
    pub ports: u32,
    /// Time-averaged occupancy, averaged over the ports (bytes).
    pub mean_bytes: f64,
    /// Largest time-averaged occupancy of a single port (bytes).
    pub max_port_mean_bytes: f64,
    /// Largest occupancy seen on any port of the group (bytes).
    pub peak_bytes: u64,
    /// Fraction of the measurement window the ports spent transmitting.
    pub utilization: f64,
    /// Packets dropped because the buffer was full.
    pub drops: u64,
    /// Packets marked with ECN.
    pub ecn_marks: u64,
}

/// Whole-switch buffer occupancy of one group of switches (ToRs or
/// spines): bytes waiting in all egress ports of a switch at once.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SwitchQueueStats {
    /// Switches in the group.
    pub switches: u32,
    /// Time-averaged occupancy, averaged over the switches (bytes).
    pub mean_bytes: f64,
    /// Largest time-averaged occupancy of one switch (bytes).
    pub max_mean_bytes: f64,
    /// Largest occupancy of any switch at any instant (bytes).
    pub peak_bytes: u64,
}

/// Statistics of one egress port over the measurement window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PortReport {
    /// "host_nic", "tor_down", "tor_up" or "spine_down".
    pub kind: String,
    /// Port number (see `Topology`: host NICs `0..H`, ToR downlinks
    /// `H..2H`, then ToR uplinks, then spine downlinks).
    pub port: u32,
    /// Time-averaged waiting bytes.
    pub mean_bytes: f64,
    /// Most waiting bytes at any instant.
    pub peak_bytes: u64,
    /// Fraction of the window spent transmitting.
    pub utilization: f64,
    /// Packets dropped.
    pub drops: u64,
}

/// Everything measured in one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// Protocol name ("homa", "pfabric").
    pub protocol: String,
    /// Workload name ("w3", "fixed:1000", "incast").
    pub workload: String,
    /// Offered load as a fraction of host link bandwidth (see the README for
    /// the exact definition).
    pub load: f64,
    /// Seed of the run.
    pub seed: u64,
    /// Free-form label of the variant ("8 priorities", "overcommit 2"),
    /// used to tell runs apart in overlaid plots.
    pub label: String,
    /// Messages generated.
    pub messages_generated: u64,
    /// Messages measured (generated after the warm-up and completed).
    pub messages_measured: u64,
    /// Messages still incomplete when the run stopped.
    pub messages_incomplete: u64,
    /// Messages the transport gave up on.
    pub messages_failed: u64,
    /// Simulated time at the end (s).
    pub sim_time_s: f64,
    /// Length of the measurement window: from the first measured arrival to
    /// the last arrival (s).
    pub window_s: f64,
    /// Offered load in the window, measured from the generated messages
    /// (fraction of host link bandwidth).
    pub offered_load: f64,
    /// Message data delivered in the window, as wire bytes of minimal
    /// packetization, as a fraction of host link bandwidth.
    pub delivered_load: f64,
    /// Distinct message bytes received in the window ÷ message bytes
    /// generated in it.
    pub delivered_ratio: f64,
    /// The same over the second half of the window (by message count),
    /// after the backlog has settled; below 1 by more than noise means the
    /// load is not sustained.
    pub late_delivered_ratio: f64,
    /// Bytes of all packets the hosts transmitted in the window (data,
    /// control and retransmissions), as a fraction of host link bandwidth.
    pub host_tx_load: f64,
    /// Goodput: distinct message bytes the hosts received in the window,
    /// per host (Gbit/s; the SIRD paper's metric).
    #[serde(default)]
    pub goodput_gbps: f64,
    /// Message bytes generated in the window, per host (Gbit/s).
    #[serde(default)]
    pub offered_gbps: f64,
    /// Fraction of receiver downlink time wasted: idle while the receiver
    /// had partially received messages it could have asked for.
    pub wasted_bandwidth: f64,
    /// Slowdown of all measured messages.
    pub overall: SlowdownStats,
    /// Slowdown of the shortest half of the measured messages.
    pub short_half: SlowdownStats,
    /// The slowdown spectrum, shortest messages first.
    pub buckets: Vec<Bucket>,
    /// Queue statistics by port kind ("host_nic", "tor_down", "tor_up",
    /// "spine_down").
    pub queues: BTreeMap<String, QueueStats>,
    /// Whole-switch occupancy: "tor" and "spine".
    #[serde(default)]
    pub switches: BTreeMap<String, SwitchQueueStats>,
    /// Every port, in port order.
    pub ports: Vec<PortReport>,
    /// Transport counters summed over hosts.
    pub counters: BTreeMap<String, u64>,
    /// Events the simulator processed.
    pub events: u64,
    /// Wall-clock time of the run (s).
    pub wall_time_s: f64,
    /// Events per wall-clock second.
    pub events_per_sec: f64,
}
