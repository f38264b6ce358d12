//! Whole-switch buffer occupancy: the bytes waiting in all egress ports of
//! one switch at once, over time (the SIRD paper's "ToR queuing", which it
//! compares with a switch's shared buffer).

use crate::report::SwitchQueueStats;
use crate::topology::{PortKind, Topology};
use crate::Time;

/// Occupancy of one switch's shared buffer over a measurement window.
#[derive(Debug, Clone, Default)]
struct Occupancy {
    bytes: u64,
    last_change: Time,
    window_start: Time,
    area: u128,
    peak: u64,
}

impl Occupancy {
    fn set(&mut self, now: Time, bytes: u64) {
        self.area += self.bytes as u128 * (now - self.last_change) as u128;
        self.last_change = now;
        self.bytes = bytes;
        self.peak = self.peak.max(bytes);
    }

    fn reset(&mut self, now: Time) {
        self.set(now, self.bytes);
        self.window_start = now;
        self.area = 0;
        self.peak = self.bytes;
    }

    /// (time-averaged bytes, peak bytes) since the window started.
    fn stats(&mut self, now: Time) -> (f64, u64) {
        self.set(now, self.bytes);
        let span = now.saturating_sub(self.window_start).max(1);
        (self.area as f64 / span as f64, self.peak)
    }
}

/// Buffer occupancy of every switch: ToRs `0..racks`, then spines.
#[derive(Debug, Clone)]
pub struct Switches {
    racks: usize,
    /// Switch of each egress port (`None` for host NICs).
    switch_of_port: Vec<Option<u32>>,
    occupancy: Vec<Occupancy>,
}

impl Switches {
    /// All switches of `topo`, empty.
    pub fn new(topo: &Topology) -> Switches {
        let racks = topo.config.racks as usize;
        let spines = topo.config.spines;
        let mut switch_of_port = Vec::with_capacity(topo.num_ports());
        for (i, (kind, _, _)) in topo.ports().into_iter().enumerate() {
            let hosts = topo.hosts as usize;
            let rack_spine = (topo.config.racks * spines) as usize;
            switch_of_port.push(match kind {
                PortKind::HostNic => None,
                PortKind::TorDown => Some(topo.rack_of((i - hosts) as u32)),
                PortKind::TorUp => Some(((i - 2 * hosts) as u32) / spines.max(1)),
                PortKind::SpineDown => {
                    let spine = (i - 2 * hosts - rack_spine) / racks.max(1);
                    Some((racks + spine) as u32)
                }
            });
        }
        Switches {
            racks,
            switch_of_port,
            occupancy: vec![Occupancy::default(); racks + spines as usize],
        }
    }

    /// Port `port`'s waiting bytes went from `before` to `after` at `now`.
    pub fn port_changed(&mut self, now: Time, port: usize, before: u64, after: u64) {
        if before == after {
            return;
        }
        if let Some(s) = self.switch_of_port[port] {
            let o = &mut self.occupancy[s as usize];
            let bytes = (o.bytes + after).saturating_sub(before);
            o.set(now, bytes);
        }
    }

    /// Starts a new measurement window at `now`.
    pub fn reset(&mut self, now: Time) {
        for o in &mut self.occupancy {
            o.reset(now);
        }
    }

    /// Statistics of the ToRs and of the spines since the window started.
    pub fn stats(&mut self, now: Time) -> (SwitchQueueStats, SwitchQueueStats) {
        let mut tor = SwitchQueueStats::default();
        let mut spine = SwitchQueueStats::default();
        for (i, o) in self.occupancy.iter_mut().enumerate() {
            let (mean, peak) = o.stats(now);
            let g = if i < self.racks { &mut tor } else { &mut spine };
            g.switches += 1;
            g.mean_bytes += mean;
            g.max_mean_bytes = g.max_mean_bytes.max(mean);
            g.peak_bytes = g.peak_bytes.max(peak);
        }
        for g in [&mut tor, &mut spine] {
            g.mean_bytes /= g.switches.max(1) as f64;
        }
        (tor, spine)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::TopologyConfig;

    #[test]
    fn ports_map_to_their_switch_and_sum() {
        let topo = Topology::new(TopologyConfig {
            racks: 2,
            hosts_per_rack: 2,
            spines: 2,
            ..TopologyConfig::default()
        })
        .unwrap();
        let mut s = Switches::new(&topo);
        // ToR 1: its downlink to host 3 and its uplink to spine 0.
        s.port_changed(0, topo.tor_down(3), 0, 1000);
        s.port_changed(0, topo.tor_up(1, 0), 0, 500);
        // Spine 1 toward rack 0.
        s.port_changed(0, topo.spine_down(1, 0), 0, 700);
        // A host NIC is not a switch.
        s.port_changed(0, topo.host_nic(0), 0, 9999);
        s.port_changed(10, topo.tor_down(3), 1000, 0);
        let (tor, spine) = s.stats(20);
        assert_eq!((tor.switches, spine.switches), (2, 2));
        assert_eq!(tor.peak_bytes, 1500);
        assert_eq!(spine.peak_bytes, 700);
        // ToR 1: 1500 for 10 ps, 500 for 10 ps = mean 1000; ToR 0: 0.
        assert!((tor.max_mean_bytes - 1000.0).abs() < 1e-9);
        assert!((tor.mean_bytes - 500.0).abs() < 1e-9);
    }
}
