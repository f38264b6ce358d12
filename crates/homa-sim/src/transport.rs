//! The interface between the network model and a transport protocol.
//!
//! The simulator knows nothing about Homa: each host runs one [`Transport`]
//! that it feeds packets, timer expiries and new messages, and that it asks
//! for the next packet whenever the host's NIC can take one. A protocol is
//! added by implementing [`Protocol`] (a factory of per-host transports) and
//! [`Transport`]; Homa ([`crate::homa`]) and pFabric ([`crate::pfabric`]) are
//! the two in this crate.

use crate::topology::Packetization;
use crate::Time;
use thiserror::Error;

/// Index of a host, `0..hosts`.
pub type HostId = u32;

/// What the network needs to know about a packet; the protocol's own
/// contents travel beside it in [`SimPacket::body`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketMeta {
    /// Sending host.
    pub src: HostId,
    /// Destination host.
    pub dst: HostId,
    /// Switch priority 0..=7, 7 the highest; strict-priority ports serve
    /// the highest non-empty level first.
    pub priority: u8,
    /// Rank for rank-ordered ports (pFabric): smaller is served first and
    /// larger is dropped first. Ignored by strict-priority ports.
    pub rank: u64,
    /// Bytes the packet occupies on a link: IP packet plus Ethernet header,
    /// FCS, preamble and inter-packet gap (see [`Packetization`]).
    pub wire_bytes: u32,
    /// Application message bytes carried (0 for control packets).
    pub payload_bytes: u32,
    /// True for a retransmission (excluded from goodput).
    pub retransmit: bool,
    /// Flow identity for hash-based path selection (per-flow ECMP).
    pub flow: u64,
    /// Set by a switch whose queue exceeded the ECN threshold.
    pub ecn: bool,
}

/// A packet in flight: network metadata plus the protocol's body.
#[derive(Debug, Clone)]
pub struct SimPacket<B> {
    /// What the network looks at.
    pub meta: PacketMeta,
    /// What only the protocol looks at.
    pub body: B,
}

/// A message fully received by its destination transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivered {
    /// The host that sent it.
    pub src: HostId,
    /// The key [`Transport::start_message`] returned on that host.
    pub key: u64,
}

/// Facts about the simulated network a transport may use to configure
/// itself; the same for every host.
#[derive(Debug, Clone)]
pub struct HostEnv {
    /// Number of hosts.
    pub hosts: u32,
    /// Host link rate (bit/s).
    pub host_link_bps: u64,
    /// Round trip of a full data packet out and a minimum-size control
    /// packet back between hosts in different racks, fixed delays included.
    pub rtt: Time,
    /// Bytes the host link carries in one `rtt` (RTTbytes), counting
    /// message bytes only.
    pub rtt_bytes: u64,
    /// How messages are cut into packets and what headers cost.
    pub packetization: Packetization,
    /// Largest message the workload can produce (bytes).
    pub max_message: u64,
    /// A sample of the workload's message sizes (drawn with its own seed,
    /// so that it does not perturb the traffic), for protocols that can be
    /// configured for a known workload.
    pub size_sample: std::sync::Arc<[u32]>,
    /// Seed for this run; transports derive per-host seeds from it.
    pub seed: u64,
}

/// A transport failed to set itself up, or refused a message.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TransportError {
    /// The protocol's parameters do not fit together.
    #[error("invalid {protocol} configuration: {reason}")]
    Config {
        /// Which protocol.
        protocol: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The transport cannot send this message.
    #[error("cannot send a {size}-byte message: {reason}")]
    Message {
        /// Message length.
        size: u64,
        /// Why not.
        reason: String,
    },
}

/// Per-host protocol state, driven by the simulator.
pub trait Transport {
    /// The protocol's packet contents.
    type Body;

    /// The application hands the transport a message of `size` bytes for
    /// `dst`. Returns a key, unique on this host, that identifies the message
    /// in [`Delivered`].
    fn start_message(&mut self, now: Time, dst: HostId, size: u64) -> Result<u64, TransportError>;

    /// A packet arrived (after the host's receive delay).
    fn receive(&mut self, now: Time, packet: SimPacket<Self::Body>);

    /// The NIC can take a packet: the next one to send, if any. Called
    /// repeatedly until it returns `None` or the NIC queue is full.
    fn poll_transmit(&mut self, now: Time) -> Option<SimPacket<Self::Body>>;

    /// When [`Transport::on_timeout`] should next be called.
    fn next_timeout(&self) -> Option<Time>;

    /// A timer set by [`Transport::next_timeout`] expired.
    fn on_timeout(&mut self, now: Time);

    /// The next message this host has finished receiving.
    fn poll_delivered(&mut self) -> Option<Delivered>;

    /// Message bytes received in data packets that carried nothing new
    /// (duplicates), since the start.
    fn duplicate_payload_bytes(&self) -> u64;

    /// True while the host has partially received messages that it could
    /// ask more data for (used for the wasted-bandwidth metric).
    fn has_grantable_incoming(&self) -> bool;

    /// Protocol counters for the report (name, value).
    fn counters(&self) -> Vec<(&'static str, u64)>;
}

/// How switch ports order and drop packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueDiscipline {
    /// 8 FIFO queues served highest priority first; a full buffer drops the
    /// arriving packet.
    StrictPriority,
    /// One queue served smallest rank first; a full buffer drops the packet
    /// with the largest rank (pFabric).
    Rank,
}

/// A protocol: builds one [`Transport`] per host.
pub trait Protocol {
    /// The per-host transport.
    type Host: Transport;

    /// Short name for reports ("homa", "pfabric").
    fn name(&self) -> &'static str;

    /// How switches should treat this protocol's packets.
    fn queue_discipline(&self) -> QueueDiscipline;

    /// Switch port buffer this protocol needs when the scenario leaves it
    /// unset (bytes; `None` = unlimited).
    fn default_buffer_bytes(&self, env: &HostEnv) -> Option<u64>;

    /// Wire bytes of the control packets every message of `size` bytes
    /// costs besides its own data packets, counted in the offered load
    /// (e.g. Homa's empty response and ACK, pFabric's per-packet ACKs).
    /// Packets whose number depends on conditions (grants, resends) are not
    /// included.
    fn message_overhead_bytes(&self, size: u64, env: &HostEnv) -> u64;

    /// The transport for host `id`.
    fn build_host(&self, id: HostId, env: &HostEnv) -> Result<Self::Host, TransportError>;
}
