//! What the ByteDance mode detected about each peer, recorded at the end of
//! a node's run (`NodeReport::bytedance_peers`), so that an experiment can
//! set the detected per-peer BDP against the true one.

use serde::{Deserialize, Serialize};

/// One peer as an endpoint in ByteDance mode saw it when the run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerRecord {
    /// The peer's address.
    pub peer: String,
    /// RTT samples taken (0: none; every RTT below is then 0).
    pub samples: u64,
    /// Detected `rtt_min` (ns).
    pub rtt_min_ns: u64,
    /// Smoothed recent RTT at the end (ns).
    pub rtt_recent_ns: u64,
    /// The peer's link rate as it told us (Mbit/s; 0 = unknown).
    pub peer_link_mbps: u64,
    /// Our own link rate as configured (Mbit/s; 0 = unknown).
    pub local_mbps: u64,
    /// The path's rate the mode uses: the slower of the two (Mbit/s).
    pub path_mbps: u64,
    /// Detected BDP: `rtt_min` × the path's rate (bytes;
    /// `PeerState::detected_bdp`); `None` before a sample or a rate.
    pub detected_bdp: Option<f64>,
    /// Unscheduled window a new message to this peer would get now
    /// (bytes, sender busy); `None` while nothing is measured.
    pub unsched_window: Option<u32>,
    /// Grant window for this peer's messages now (bytes); `None` while
    /// nothing is measured.
    pub grant_window: Option<u32>,
}

/// The records of every peer `ep` keeps state for, in address order; empty
/// unless the endpoint runs in ByteDance mode.
pub fn records(ep: &::homa::Endpoint) -> Vec<PeerRecord> {
    let core = &ep.config().core;
    if !core.bytedance.enabled {
        return Vec::new();
    }
    let local = core.link_mbps;
    let payload = core.max_payload();
    ep.bytedance_peers()
        .into_iter()
        .map(|(addr, p)| PeerRecord {
            peer: addr.to_string(),
            samples: p.rtt.samples,
            rtt_min_ns: p.rtt.min_ns,
            rtt_recent_ns: p.rtt.recent_ns,
            peer_link_mbps: u64::from(p.link_mbps),
            local_mbps: local,
            path_mbps: p.path_mbps(local),
            detected_bdp: p.detected_bdp(local),
            unsched_window: p.unscheduled_window(&core.bytedance, local, payload, false),
            // The record is taken after the load, when a grant pause
            // would say nothing about the run.
            grant_window: p.band_grant_window(&core.bytedance, local, payload),
        })
        .collect()
}
