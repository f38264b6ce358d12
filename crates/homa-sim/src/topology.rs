//! The two-tier leaf–spine network: its parameters, how packets are framed
//! on its links, how they are routed, and the unloaded latency of a message
//! (the slowdown denominator).

use crate::transport::HostId;
use crate::Time;
use serde::{Deserialize, Serialize};

/// Picoseconds per second, for rate arithmetic.
const PS_PER_S: u128 = 1_000_000_000_000;

/// How a message is cut into packets and what each packet costs on a link.
/// The same for every protocol, so that slowdowns are comparable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Packetization {
    /// Largest IP packet (bytes, IP header included).
    pub mtu: u32,
    /// IPv4 header bytes (Homa runs directly over IP, protocol 146).
    pub ip_header: u32,
    /// Transport header bytes of a data packet (Homa's DATA header).
    pub data_header: u32,
    /// Per-frame link overhead: Ethernet header 14 + FCS 4 + preamble 8 +
    /// inter-packet gap 12.
    pub framing: u32,
    /// Smallest frame on the wire: a 64-byte Ethernet frame plus preamble
    /// and gap.
    pub min_frame: u32,
}

impl Default for Packetization {
    fn default() -> Self {
        Packetization {
            mtu: 1500,
            ip_header: 20,
            data_header: homa_wire::DATA_HEADER_LEN as u32,
            framing: 38,
            min_frame: 84,
        }
    }
}

impl Packetization {
    /// Message bytes in one full data packet.
    pub fn max_payload(&self) -> u32 {
        self.mtu - self.ip_header - self.data_header
    }

    /// Wire bytes of a packet whose transport part (header and data) is
    /// `transport_bytes` long.
    pub fn frame_bytes(&self, transport_bytes: u32) -> u32 {
        (transport_bytes + self.ip_header + self.framing).max(self.min_frame)
    }

    /// Wire bytes of a data packet carrying `payload` message bytes.
    pub fn data_frame(&self, payload: u32) -> u32 {
        self.frame_bytes(self.data_header + payload)
    }

    /// Wire bytes of a full data packet.
    pub fn max_frame(&self) -> u32 {
        self.data_frame(self.max_payload())
    }

    /// Number of data packets of a `size`-byte message (an empty message
    /// still takes one packet).
    pub fn packets(&self, size: u64) -> u64 {
        size.div_ceil(self.max_payload() as u64).max(1)
    }

    /// Wire bytes of all data packets of a `size`-byte message.
    pub fn message_wire_bytes(&self, size: u64) -> u64 {
        let full = size / self.max_payload() as u64;
        let rest = (size % self.max_payload() as u64) as u32;
        let mut total = full * self.max_frame() as u64;
        if rest > 0 || size == 0 {
            total += self.data_frame(rest) as u64;
        }
        total
    }
}

/// How a ToR picks the uplink for a packet leaving the rack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UplinkSelection {
    /// A uniformly random uplink per packet (the thesis' packet spraying).
    Spray,
    /// A hash of the packet's flow (classic ECMP): one path per message.
    Hash,
}

/// Parameters of the network. Defaults are the thesis' simulations (§4.1.1):
/// 144 hosts in 9 racks, 4 spines, 10/40 Gbit/s, 250 ns store-and-forward
/// switches, 0.5 µs of software on each side plus 0.5 µs in the NIC.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TopologyConfig {
    /// Racks (ToR switches).
    pub racks: u32,
    /// Hosts under each ToR.
    pub hosts_per_rack: u32,
    /// Spine (aggregation) switches; every ToR has one link to each.
    pub spines: u32,
    /// Host ↔ ToR link rate (Gbit/s).
    pub host_link_gbps: f64,
    /// ToR ↔ spine link rate (Gbit/s). Oversubscription is
    /// `hosts_per_rack × host_link_gbps ÷ (spines × core_link_gbps)`.
    pub core_link_gbps: f64,
    /// Fixed per-packet switch latency (ns), on top of store-and-forward.
    pub switch_delay_ns: f64,
    /// Propagation delay of every link (ns).
    pub propagation_ns: f64,
    /// Host software delay on the send path (ns).
    pub host_tx_delay_ns: f64,
    /// NIC delay before a packet reaches the wire (ns).
    pub nic_tx_delay_ns: f64,
    /// Host software delay on the receive path (ns).
    pub host_rx_delay_ns: f64,
    /// Uplink choice for packets leaving a rack.
    pub uplink_selection: UplinkSelection,
    /// Packet sizes and header costs.
    pub packetization: Packetization,
    /// Hosts whose links differ from the others (extra delay, other rate;
    /// [`crate::links`]); none by default.
    pub host_links: Vec<crate::links::HostLinkOverride>,
}

impl Default for TopologyConfig {
    fn default() -> Self {
        TopologyConfig {
            racks: 9,
            hosts_per_rack: 16,
            spines: 4,
            host_link_gbps: 10.0,
            core_link_gbps: 40.0,
            switch_delay_ns: 250.0,
            propagation_ns: 0.0,
            host_tx_delay_ns: 500.0,
            nic_tx_delay_ns: 500.0,
            host_rx_delay_ns: 500.0,
            uplink_selection: UplinkSelection::Spray,
            packetization: Packetization::default(),
            host_links: Vec::new(),
        }
    }
}

/// Converts nanoseconds (possibly fractional) to simulator time.
pub fn ns(t: f64) -> Time {
    (t * 1000.0).round() as Time
}

/// Time to serialise `bytes` at `bps`.
pub fn tx_time(bytes: impl Into<u64>, bps: u64) -> Time {
    (bytes.into() as u128 * 8 * PS_PER_S / bps as u128) as Time
}

/// What kind of link an egress port drives; used to group statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PortKind {
    /// A host's NIC toward its ToR.
    HostNic,
    /// ToR → host downlink.
    TorDown,
    /// ToR → spine uplink.
    TorUp,
    /// Spine → ToR downlink.
    SpineDown,
}

/// Where a port's link leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// A host (the packet is delivered).
    Host(HostId),
    /// A ToR switch.
    Tor(u32),
    /// A spine switch.
    Spine(u32),
}

/// The validated network with its derived numbers and port numbering.
///
/// Ports are numbered: host NICs `0..H`, ToR downlinks `H..2H` (the one to
/// host `h` is `H + h`), ToR uplinks `2H + rack × spines + spine`, spine
/// downlinks `2H + racks × spines + spine × racks + rack`.
#[derive(Debug, Clone)]
pub struct Topology {
    /// The parameters.
    pub config: TopologyConfig,
    /// Number of hosts.
    pub hosts: u32,
    /// Host link rate (bit/s).
    pub host_bps: u64,
    /// Core link rate (bit/s).
    pub core_bps: u64,
    /// Fixed delay a switch adds to each packet.
    pub switch_delay: Time,
    /// Link propagation delay.
    pub propagation: Time,
    /// Fixed delay between a host's NIC and its ToR (software + NIC).
    pub host_tx_delay: Time,
    /// Fixed delay from the wire into the receiving transport.
    pub host_rx_delay: Time,
    /// Per host: its link's rate (bit/s) and extra one-way delay, after
    /// `config.host_links`.
    host_links: Vec<(u64, Time)>,
}

/// A topology parameter that makes no sense.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid topology: {0}")]
pub struct TopologyError(pub String);

impl Topology {
    /// Checks the parameters and derives rates and delays.
    pub fn new(config: TopologyConfig) -> Result<Topology, TopologyError> {
        let err = |s: &str| Err(TopologyError(s.to_string()));
        if config.racks == 0 || config.hosts_per_rack == 0 {
            return err("racks and hosts_per_rack must be at least 1");
        }
        if config.racks > 1 && config.spines == 0 {
            return err("more than one rack needs at least one spine");
        }
        if config.racks as u64 * config.hosts_per_rack as u64 > 1 << 20 {
            return err("at most 1,048,576 hosts");
        }
        for (name, v) in [
            ("host_link_gbps", config.host_link_gbps),
            ("core_link_gbps", config.core_link_gbps),
        ] {
            if !(v.is_finite() && v > 0.0 && v <= 10_000.0) {
                return Err(TopologyError(format!(
                    "{name} must be in (0, 10000], got {v}"
                )));
            }
        }
        for (name, v) in [
            ("switch_delay_ns", config.switch_delay_ns),
            ("propagation_ns", config.propagation_ns),
            ("host_tx_delay_ns", config.host_tx_delay_ns),
            ("nic_tx_delay_ns", config.nic_tx_delay_ns),
            ("host_rx_delay_ns", config.host_rx_delay_ns),
        ] {
            if !(v.is_finite() && (0.0..=1e9).contains(&v)) {
                return Err(TopologyError(format!(
                    "{name} must be in [0, 1e9] ns, got {v}"
                )));
            }
        }
        let p = &config.packetization;
        if p.mtu < p.ip_header + p.data_header + 64 || p.mtu > 65_535 {
            return Err(TopologyError(format!(
                "mtu {} must leave at least 64 payload bytes after {} + {} header bytes and be at most 65535",
                p.mtu, p.ip_header, p.data_header
            )));
        }
        let hosts = config.racks * config.hosts_per_rack;
        let host_bps = (config.host_link_gbps * 1e9).round() as u64;
        let host_links = crate::links::resolve(&config.host_links, hosts, host_bps)
            .map_err(TopologyError)?
            .into_iter()
            .map(|(bps, d)| (bps, ns(d)))
            .collect();
        Ok(Topology {
            hosts,
            host_links,
            host_bps,
            core_bps: (config.core_link_gbps * 1e9).round() as u64,
            switch_delay: ns(config.switch_delay_ns),
            propagation: ns(config.propagation_ns),
            host_tx_delay: ns(config.host_tx_delay_ns + config.nic_tx_delay_ns),
            host_rx_delay: ns(config.host_rx_delay_ns),
            config,
        })
    }

    /// Rack of a host.
    pub fn rack_of(&self, h: HostId) -> u32 {
        h / self.config.hosts_per_rack
    }

    /// Total number of egress ports.
    pub fn num_ports(&self) -> usize {
        2 * self.hosts as usize + 2 * (self.config.racks * self.config.spines) as usize
    }

    /// The NIC port of host `h`.
    pub fn host_nic(&self, h: HostId) -> usize {
        h as usize
    }

    /// The ToR port toward host `h`.
    pub fn tor_down(&self, h: HostId) -> usize {
        (self.hosts + h) as usize
    }

    /// The uplink of ToR `rack` toward `spine`.
    pub fn tor_up(&self, rack: u32, spine: u32) -> usize {
        (2 * self.hosts + rack * self.config.spines + spine) as usize
    }

    /// The downlink of `spine` toward ToR `rack`.
    pub fn spine_down(&self, spine: u32, rack: u32) -> usize {
        let c = &self.config;
        (2 * self.hosts + c.racks * c.spines + spine * c.racks + rack) as usize
    }

    /// Kind, link rate and far end of every port, in port order.
    pub fn ports(&self) -> Vec<(PortKind, u64, Next)> {
        let c = &self.config;
        let mut v = Vec::with_capacity(self.num_ports());
        for h in 0..self.hosts {
            v.push((
                PortKind::HostNic,
                self.host_bps_of(h),
                Next::Tor(self.rack_of(h)),
            ));
        }
        for h in 0..self.hosts {
            v.push((PortKind::TorDown, self.host_bps_of(h), Next::Host(h)));
        }
        for _rack in 0..c.racks {
            for s in 0..c.spines {
                v.push((PortKind::TorUp, self.core_bps, Next::Spine(s)));
            }
        }
        for _s in 0..c.spines {
            for r in 0..c.racks {
                v.push((PortKind::SpineDown, self.core_bps, Next::Tor(r)));
            }
        }
        v
    }

    /// Delay from the end of serialisation on a port until the packet is
    /// in the next egress queue (or in the receiving transport).
    pub fn hop_delay(&self, kind: PortKind) -> Time {
        match kind {
            PortKind::HostNic => self.host_tx_delay + self.propagation + self.switch_delay,
            PortKind::TorDown => self.propagation + self.host_rx_delay,
            PortKind::TorUp | PortKind::SpineDown => self.propagation + self.switch_delay,
        }
    }

    /// Host `h`'s link rate (bit/s).
    pub fn host_bps_of(&self, h: HostId) -> u64 {
        self.host_links[h as usize].0
    }

    /// Extra one-way delay on host `h`'s link.
    pub fn extra_delay_of(&self, h: HostId) -> Time {
        self.host_links[h as usize].1
    }

    /// Whether any host's link differs from the nominal one.
    pub fn heterogeneous(&self) -> bool {
        self.host_links
            .iter()
            .any(|&(bps, d)| bps != self.host_bps || d != 0)
    }

    /// [`Topology::hop_delay`] of port `port` (numbered as
    /// [`Topology::ports`]), with its host link's extra delay.
    pub fn port_hop_delay(&self, port: usize, kind: PortKind) -> Time {
        let extra = match kind {
            PortKind::HostNic => self.extra_delay_of(port as HostId),
            PortKind::TorDown => self.extra_delay_of(port as HostId - self.hosts),
            _ => 0,
        };
        self.hop_delay(kind) + extra
    }

    /// Round trip between `a` and `b` on the empty network: a full data
    /// packet one way, a minimum-size packet back (as [`Topology::rtt`],
    /// with the two hosts' own links).
    pub fn rtt_between(&self, a: HostId, b: HostId) -> Time {
        let p = &self.config.packetization;
        self.pair_latency(&[p.max_frame()], a, b) + self.pair_latency(&[p.min_frame], b, a)
    }

    /// One-way latency of a `size`-byte message from `src` to `dst` on the
    /// empty network, with the hosts' own link rates and delays (equal to
    /// [`Topology::unloaded_latency`] when neither link is overridden).
    pub fn unloaded_latency_between(&self, size: u64, src: HostId, dst: HostId) -> Time {
        let p = &self.config.packetization;
        let n = p.packets(size);
        let last_payload = size - (n - 1) * p.max_payload() as u64;
        let mut frames = vec![p.max_frame(); n as usize - 1];
        frames.push(p.data_frame(last_payload as u32));
        self.pair_latency(&frames, src, dst)
    }

    /// Time from handing the first of `frames` (wire bytes) to `src`'s NIC
    /// until the last is in `dst`'s transport, on an empty path, with the
    /// two hosts' own links.
    pub fn pair_latency(&self, frames: &[u32], src: HostId, dst: HostId) -> Time {
        let mut hops = self.path_rates(src, dst);
        hops[0].0 = self.host_bps_of(src);
        hops.last_mut().expect("hops").0 = self.host_bps_of(dst);
        let mut arrivals = vec![0; frames.len()];
        for (i, &(bps, kind)) in hops.iter().enumerate() {
            let mut delay = self.hop_delay(kind);
            if i == 0 {
                delay += self.extra_delay_of(src);
            } else if kind == PortKind::TorDown {
                delay += self.extra_delay_of(dst);
            }
            let mut free = 0;
            for (a, &f) in arrivals.iter_mut().zip(frames) {
                let end = (*a).max(free) + tx_time(f, bps);
                free = end;
                *a = end + delay;
            }
        }
        *arrivals.last().expect("at least one frame")
    }

    /// Link rates of the ports a packet from `src` to `dst` crosses.
    fn path_rates(&self, src: HostId, dst: HostId) -> Vec<(u64, PortKind)> {
        if self.rack_of(src) == self.rack_of(dst) {
            vec![
                (self.host_bps, PortKind::HostNic),
                (self.host_bps, PortKind::TorDown),
            ]
        } else {
            vec![
                (self.host_bps, PortKind::HostNic),
                (self.core_bps, PortKind::TorUp),
                (self.core_bps, PortKind::SpineDown),
                (self.host_bps, PortKind::TorDown),
            ]
        }
    }

    /// One-way latency of a `size`-byte message on the empty network, from
    /// the moment the sender's transport has it until the receiver's
    /// transport has all of it: the packets leave back to back and each hop
    /// stores and forwards them in order. This is the slowdown denominator,
    /// the same for every protocol.
    pub fn unloaded_latency(&self, size: u64, same_rack: bool) -> Time {
        let p = &self.config.packetization;
        let n = p.packets(size);
        let last_payload = size - (n - 1) * p.max_payload() as u64;
        let mut frames = vec![p.max_frame(); n as usize - 1];
        frames.push(p.data_frame(last_payload as u32));
        self.train_latency(&frames, same_rack)
    }

    /// Time from handing the first of `frames` to the sender's NIC until the
    /// last is in the receiving transport, on an empty path.
    fn train_latency(&self, frames: &[u32], same_rack: bool) -> Time {
        let (src, dst) = if same_rack || self.config.racks == 1 {
            (0, 0)
        } else {
            (0, self.config.hosts_per_rack)
        };
        let mut arrivals = vec![0; frames.len()];
        for (bps, kind) in self.path_rates(src, dst) {
            let delay = self.hop_delay(kind);
            let mut free = 0;
            for (a, &f) in arrivals.iter_mut().zip(frames) {
                let end = (*a).max(free) + tx_time(f, bps);
                free = end;
                *a = end + delay;
            }
        }
        *arrivals.last().expect("at least one frame")
    }

    /// Round trip used for RTTbytes: a full data packet to a host in another
    /// rack (the same rack if there is only one), and a minimum-size control
    /// packet back.
    pub fn rtt(&self) -> Time {
        let same = self.config.racks == 1;
        let p = &self.config.packetization;
        self.train_latency(&[p.max_frame()], same) + self.train_latency(&[p.min_frame], same)
    }

    /// RTTbytes: message bytes the host link carries in one [`Topology::rtt`].
    pub fn rtt_bytes(&self) -> u64 {
        let p = &self.config.packetization;
        let wire = self.rtt() as u128 * self.host_bps as u128 / (8 * PS_PER_S);
        // Convert wire bytes to message bytes at full-packet efficiency.
        (wire * p.max_payload() as u128 / p.max_frame() as u128) as u64
    }
}
