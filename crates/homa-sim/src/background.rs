//! Constant-bit-rate background flows (`[[traffic.background]]`): a stand-in
//! for TCP sharing some hosts' downlinks with the transport under test.
//!
//! ```toml
//! [[traffic.background]]
//! hosts = "0-7"    # each of these hosts' ToR downlinks gets its own flow
//! gbps = 5.0       # rate of each flow, full-size frames (wire bytes)
//! priority = 0     # switch priority level (0 = lowest)
//! ```
//!
//! Each flow puts a full-size frame into its host's ToR → host port every
//! `frame / rate`, from a random phase, for the whole run. It reacts to
//! nothing: no congestion control, no retransmission; a frame the port has
//! no room for is dropped and counted. This is the simplest model of a
//! TCP flow that already holds its share of the link (a real TCP would
//! back off under loss and probe for more otherwise); what it shows is
//! how the transport under test treats a queue it shares with traffic it
//! does not control. Background frames are not messages: they count in no
//! slowdown, goodput or offered load, only in the port statistics and in
//! the `background_*` counters of the report (measured over the window).

use crate::topology::{tx_time, Topology};
use crate::transport::HostId;
use crate::Time;
use serde::{Deserialize, Serialize};

/// Packet-store indices at or above this are background frames (they have
/// no body; the simulator's slab never grows this large).
pub const FLAG: u32 = 1 << 31;

/// Whether a queued packet's index names a background frame.
pub fn is_background(idx: u32) -> bool {
    idx & FLAG != 0
}

/// One background flow set, as a scenario gives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackgroundFlow {
    /// Hosts whose downlinks get a flow each ("0-7,20", as
    /// [`crate::links::parse_hosts`]).
    pub hosts: String,
    /// Rate of each flow (Gbit/s of wire bytes).
    pub gbps: f64,
    /// Switch priority level, 0 (lowest) to 7.
    #[serde(default)]
    pub priority: u8,
}

impl BackgroundFlow {
    /// Checks what does not depend on the topology.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.gbps.is_finite() && self.gbps > 0.0 && self.gbps <= 10_000.0) {
            return Err(format!(
                "traffic.background.gbps must be in (0, 10000], got {}",
                self.gbps
            ));
        }
        if self.priority > 7 {
            return Err(format!(
                "traffic.background.priority must be 0..=7, got {}",
                self.priority
            ));
        }
        Ok(())
    }
}

/// One running flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flow {
    /// The host whose downlink it loads.
    pub host: HostId,
    /// Time between two frames.
    pub period: Time,
    /// Switch priority.
    pub priority: u8,
}

/// Wire bytes and frames of the background traffic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Frames offered to the downlinks.
    pub sent_frames: u64,
    /// Frames that reached their host.
    pub delivered_frames: u64,
    /// Frames a full port dropped.
    pub dropped_frames: u64,
}

/// All background flows of a run and their counts.
#[derive(Debug, Clone, Default)]
pub struct Background {
    /// The flows, indexed by the low bits of their frames' indices.
    pub flows: Vec<Flow>,
    /// Bytes of every frame (one full-size frame).
    pub frame_bytes: u32,
    /// Counts since the start.
    pub total: Counts,
    /// `total` when the measurement window opened.
    pub at_open: Counts,
    /// `total` when it closed.
    pub at_close: Option<Counts>,
}

impl Background {
    /// The flows of `sets` on `topo`, each sending `frame_bytes` frames.
    pub fn new(sets: &[BackgroundFlow], topo: &Topology, frame_bytes: u32) -> Result<Self, String> {
        let mut flows = Vec::new();
        for set in sets {
            set.validate()?;
            let bps = (set.gbps * 1e9).round() as u64;
            for host in crate::links::parse_hosts(&set.hosts, topo.hosts)? {
                flows.push(Flow {
                    host,
                    period: tx_time(frame_bytes, bps).max(1),
                    priority: set.priority,
                });
            }
        }
        Ok(Background {
            flows,
            frame_bytes,
            ..Default::default()
        })
    }

    /// The packet-store index of flow `i`'s frames.
    pub fn index(i: u32) -> u32 {
        FLAG | i
    }

    /// Counts over the measurement window (to now if it is still open).
    pub fn window(&self) -> Counts {
        let end = self.at_close.unwrap_or(self.total);
        Counts {
            sent_frames: end.sent_frames - self.at_open.sent_frames,
            delivered_frames: end.delivered_frames - self.at_open.delivered_frames,
            dropped_frames: end.dropped_frames - self.at_open.dropped_frames,
        }
    }

    /// The report's counters: frames and delivered Gbit/s per flow over a
    /// window of `span_s` seconds.
    pub fn counters(&self, span_s: f64) -> Vec<(&'static str, u64)> {
        if self.flows.is_empty() {
            return Vec::new();
        }
        let w = self.window();
        let per_flow_mbps = |frames: u64| {
            (frames as f64 * self.frame_bytes as f64 * 8.0
                / span_s.max(1e-12)
                / self.flows.len() as f64
                / 1e6)
                .round() as u64
        };
        vec![
            ("background_flows", self.flows.len() as u64),
            ("background_sent_frames", w.sent_frames),
            ("background_delivered_frames", w.delivered_frames),
            ("background_dropped_frames", w.dropped_frames),
            (
                "background_offered_mbps_per_flow",
                per_flow_mbps(w.sent_frames),
            ),
            (
                "background_delivered_mbps_per_flow",
                per_flow_mbps(w.delivered_frames),
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::TopologyConfig;

    #[test]
    fn period_gives_the_rate() {
        let topo = Topology::new(TopologyConfig::default()).unwrap();
        let sets = vec![BackgroundFlow {
            hosts: "0-3,10".into(),
            gbps: 5.0,
            priority: 2,
        }];
        let b = Background::new(&sets, &topo, 1538).unwrap();
        assert_eq!(b.flows.len(), 5);
        assert_eq!(b.flows[4].host, 10);
        // 1,538 B at 5 Gbit/s: 2.4608 µs per frame, so 5 Gbit/s exactly.
        let p = b.flows[0].period;
        assert_eq!(p, 2_460_800);
        let gbps = 1538.0 * 8.0 / (p as f64 * 1e-12) / 1e9;
        assert!((gbps - 5.0).abs() < 1e-9);
        assert!(is_background(Background::index(3)));
        assert!(!is_background(3));
    }

    #[test]
    fn config_checks() {
        let ok: BackgroundFlow = toml::from_str("hosts = \"1\"\ngbps = 2.5\n").unwrap();
        assert_eq!(ok.priority, 0);
        assert!(ok.validate().is_ok());
        assert!(toml::from_str::<BackgroundFlow>("hosts = \"1\"\ngbps = 1.0\nprio = 1").is_err());
        let bad = BackgroundFlow {
            priority: 8,
            ..ok.clone()
        };
        assert!(bad.validate().is_err());
        let bad = BackgroundFlow { gbps: 0.0, ..ok };
        assert!(bad.validate().is_err());
        let topo = Topology::new(TopologyConfig::default()).unwrap();
        let far = BackgroundFlow {
            hosts: "500".into(),
            gbps: 1.0,
            priority: 0,
        };
        assert!(Background::new(&[far], &topo, 1538).is_err());
    }

    #[test]
    fn window_counts() {
        let mut b = Background {
            flows: vec![Flow {
                host: 0,
                period: 1,
                priority: 0,
            }],
            frame_bytes: 1250,
            ..Default::default()
        };
        b.total.sent_frames = 10;
        b.at_open = b.total;
        b.total.sent_frames = 110;
        b.total.delivered_frames = 100;
        b.at_close = Some(b.total);
        b.total.sent_frames = 500;
        assert_eq!(b.window().sent_frames, 100);
        // 100 frames of 10 kbit in 1 ms = 1,000 Mbit/s.
        let c = b.counters(1e-3);
        assert!(c.contains(&("background_offered_mbps_per_flow", 1000)));
        assert!(c.contains(&("background_delivered_mbps_per_flow", 1000)));
    }
}
