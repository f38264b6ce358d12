//! An idealised pFabric (Alizadeh et al., SIGCOMM'13), the near-optimal
//! reference the thesis compares Homa against.
//!
//! # Mechanism
//!
//! * **Priorities in the packets.** Every data packet carries the number of
//!   bytes of its message that the sender has not yet seen acknowledged
//!   (pFabric's "remaining flow size"), sampled when the packet leaves the
//!   host, as [`PacketMeta::rank`]. Switch ports run
//!   [`QueueDiscipline::Rank`]: smallest rank first, and a full buffer drops
//!   the largest rank. Data ranks are at least 1 (a zero-byte message has
//!   rank 1), so control packets, which have rank 0, always go first and
//!   are dropped last. [`PacketMeta::priority`] is unused (always 0).
//! * **Shallow buffers.** Unless the scenario says otherwise a port holds
//!   2 × BDP ([`PFabricConfig::shallow_buffer_bytes`]), as in the paper.
//! * **Sender-side SRPT.** Whenever the NIC can take a packet, the host
//!   first sends queued control packets (ACKs, probe replies, probes), then
//!   one data packet of the message ("flow") with the fewest unacknowledged
//!   bytes among those whose window has room.
//! * **Minimal rate control.** A flow starts at line rate with a window of
//!   one bandwidth-delay product (`ceil(rtt_bytes / max_payload) + 1`
//!   packets). Every ACK that acknowledges a new packet grows the window:
//!   by one packet below the slow-start threshold, by one packet per window
//!   of ACKs above it. The window never exceeds the larger of the initial
//!   window and one BDP: one BDP in flight is all a single flow needs to
//!   fill the host link, and more would only build queues. There is no fast
//!   retransmission; loss is detected only by the retransmission timeout
//!   (RTO, [`PFabricConfig::rto_rtts`] × RTT, no exponential backoff). On a
//!   timeout the threshold becomes half the window (at least 2), the window
//!   becomes 1 and every packet still in flight is marked lost; lost
//!   packets are resent, oldest first, before any new data of that flow.
//!   After [`PFabricConfig::probe_after_timeouts`] consecutive timeouts
//!   the flow enters *probe mode*: instead of data it sends one
//!   minimum-size probe (a one-byte-payload frame) per RTO, and resumes in
//!   slow start when the receiver answers the probe or any new ACK arrives.
//! * **Per-packet ACKs.** The receiver sends a minimum-size ACK, rank 0,
//!   for every data packet it receives, duplicates included, ahead of its
//!   own data. The sender therefore knows exactly which packets arrived and
//!   retransmits selectively.
//! * **Exactly-once delivery.** The receiver keeps a bitmap of the packets
//!   of each partially received message and reports the message once the
//!   last one arrives; its state is then freed. Each data packet carries a
//!   per-(sender, receiver) message index that the sender assigns densely
//!   from 0, so the receiver remembers completed messages as a watermark
//!   (every index below it is complete) plus the set of completed indices
//!   above it. Late duplicates of completed messages are acknowledged but
//!   never delivered again, however late they arrive, and the memory stays
//!   bounded by the number of messages that overtook the oldest incomplete
//!   one from each sender.
//!
//! Single-packet messages (most messages in most workloads) never allocate
//! receive state, and messages of up to 64 packets keep their bitmaps
//! inline.

use crate::topology::Packetization;
use crate::transport::{
    Delivered, HostEnv, HostId, PacketMeta, Protocol, QueueDiscipline, SimPacket, Transport,
    TransportError,
};
use crate::Time;
use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, VecDeque};

/// The protocol's name in reports and errors.
const PROTOCOL: &str = "pfabric";

/// Transport header bytes of an ACK or a probe reply (an ACK is a
/// minimum-size packet: these plus the IP header and framing, at least
/// [`Packetization::min_frame`]).
pub const ACK_HEADER_BYTES: u32 = 32;

/// Message-sized bytes a probe occupies on the wire: pFabric's probes are
/// minimum-size packets with a one-byte payload. They carry no message
/// bytes ([`PacketMeta::payload_bytes`] is 0).
const PROBE_PAYLOAD_BYTES: u32 = 1;

/// Parameters of pFabric. Every field has a default; unknown fields are an
/// error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PFabricConfig {
    /// Window a new flow starts with (packets in flight). `None` = one
    /// bandwidth-delay product, `ceil(rtt_bytes / max_payload) + 1`
    /// packets: pFabric starts flows at line rate. Must be at least 1. The
    /// window may later grow to the larger of this and one BDP.
    pub initial_window_packets: Option<u32>,
    /// Retransmission timeout in units of [`HostEnv::rtt`]. pFabric uses a
    /// small fixed timeout of about 3 RTTs. Must be positive and finite.
    pub rto_rtts: f64,
    /// Switch port buffer (bytes). `None` = 2 × BDP rounded up to whole
    /// full-size frames ([`PFabricConfig::shallow_buffer_bytes`]), the
    /// paper's shallow buffers. Must hold at least one full-size frame.
    /// Used only when the scenario does not set a buffer itself.
    pub buffer_bytes: Option<u64>,
    /// After this many consecutive timeouts of a flow without an ACK in
    /// between, the flow stops retransmitting data and sends one
    /// minimum-size probe per RTO until the receiver answers. Must be at
    /// least 1.
    pub probe_after_timeouts: u32,
}

impl Default for PFabricConfig {
    fn default() -> Self {
        PFabricConfig {
            initial_window_packets: None,
            rto_rtts: 3.0,
            buffer_bytes: None,
            probe_after_timeouts: 5,
        }
    }
}

impl PFabricConfig {
    /// One bandwidth-delay product in full data packets, plus one:
    /// `ceil(rtt_bytes / max_payload) + 1`.
    pub fn bdp_packets(env: &HostEnv) -> u32 {
        let mp = env.packetization.max_payload().max(1) as u64;
        let packets = env.rtt_bytes.div_ceil(mp) + 1;
        packets.min(u32::MAX as u64) as u32
    }

    /// pFabric's shallow port buffer: 2 × BDP of message bytes
    /// (`2 × rtt_bytes`), rounded up to whole full-size data packets and
    /// counted in wire bytes (full frames, headers and framing included).
    pub fn shallow_buffer_bytes(env: &HostEnv) -> u64 {
        let p = &env.packetization;
        let frames = (2 * env.rtt_bytes)
            .div_ceil(p.max_payload().max(1) as u64)
            .max(1);
        frames * p.max_frame() as u64
    }

    /// The window a new flow starts with.
    pub fn initial_window(&self, env: &HostEnv) -> u32 {
        self.initial_window_packets
            .unwrap_or_else(|| Self::bdp_packets(env))
    }

    /// Checks the parameters against the network; returns the derived
    /// per-host settings.
    fn validate(&self, env: &HostEnv) -> Result<Params, TransportError> {
        let err = |reason: String| TransportError::Config {
            protocol: PROTOCOL,
            reason,
        };
        if !self.rto_rtts.is_finite() || self.rto_rtts <= 0.0 {
            return Err(err(format!(
                "rto_rtts must be a positive finite number, got {}",
                self.rto_rtts
            )));
        }
        if self.initial_window_packets == Some(0) {
            return Err(err(
                "initial_window_packets must be at least 1 packet".to_string()
            ));
        }
        if self.probe_after_timeouts == 0 {
            return Err(err("probe_after_timeouts must be at least 1".to_string()));
        }
        if env.packetization.max_payload() == 0 {
            return Err(err(
                "the packetization leaves no room for message bytes in a packet".to_string(),
            ));
        }
        if env.rtt == 0 {
            return Err(err("the network's RTT is 0".to_string()));
        }
        if let Some(b) = self.buffer_bytes {
            let frame = env.packetization.max_frame() as u64;
            if b < frame {
                return Err(err(format!(
                    "buffer_bytes ({b}) must hold at least one full-size frame ({frame} bytes)"
                )));
            }
        }
        let rto = self.rto_rtts * env.rtt as f64;
        if rto >= u64::MAX as f64 / 4.0 {
            return Err(err(format!(
                "rto_rtts {} gives a timeout beyond the simulator's time range",
                self.rto_rtts
            )));
        }
        let initial_cwnd = self.initial_window(env);
        Ok(Params {
            initial_cwnd,
            max_cwnd: initial_cwnd.max(Self::bdp_packets(env)),
            rto: (rto.round() as Time).max(1),
            probe_after: self.probe_after_timeouts,
        })
    }
}

/// Settings derived from a validated [`PFabricConfig`].
#[derive(Debug, Clone, Copy)]
struct Params {
    initial_cwnd: u32,
    max_cwnd: u32,
    rto: Time,
    probe_after: u32,
}

/// The pFabric protocol: a factory of [`PFabricHost`]s.
#[derive(Debug, Clone, Default)]
pub struct PFabric {
    /// Its parameters.
    pub config: PFabricConfig,
}

impl PFabric {
    /// pFabric with the given parameters (checked by
    /// [`Protocol::build_host`]).
    pub fn new(config: PFabricConfig) -> Self {
        PFabric { config }
    }
}

impl Protocol for PFabric {
    type Host = PFabricHost;

    fn name(&self) -> &'static str {
        PROTOCOL
    }

    fn queue_discipline(&self) -> QueueDiscipline {
        QueueDiscipline::Rank
    }

    /// [`PFabricConfig::buffer_bytes`], or by default pFabric's shallow
    /// 2 × BDP buffer ([`PFabricConfig::shallow_buffer_bytes`]).
    fn default_buffer_bytes(&self, env: &HostEnv) -> Option<u64> {
        Some(
            self.config
                .buffer_bytes
                .unwrap_or_else(|| PFabricConfig::shallow_buffer_bytes(env)),
        )
    }

    fn message_overhead_bytes(&self, size: u64, env: &HostEnv) -> u64 {
        // One ACK per data packet.
        let p = &env.packetization;
        p.packets(size) * p.frame_bytes(ACK_HEADER_BYTES) as u64
    }

    fn build_host(&self, id: HostId, env: &HostEnv) -> Result<PFabricHost, TransportError> {
        let params = self.config.validate(env)?;
        Ok(PFabricHost::new(id, env, params))
    }
}

/// The body of a pFabric packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PfBody {
    /// Message data.
    Data {
        /// The message's key on its sending host.
        key: u64,
        /// Dense per-(sender, receiver) number of the message, from 0, so
        /// the receiver can remember completed messages compactly.
        index: u64,
        /// Packet number within the message; its bytes start at
        /// `seq × max_payload`.
        seq: u32,
        /// Message bytes carried.
        len: u32,
        /// Total message length (bytes).
        msg_size: u64,
    },
    /// The receiver got data packet `seq` of message `key`.
    Ack {
        /// The message's key on its sending host.
        key: u64,
        /// The packet acknowledged.
        seq: u32,
    },
    /// A flow in probe mode asks whether the path to the receiver works.
    Probe {
        /// The message's key on its sending host.
        key: u64,
    },
    /// The receiver's answer to a [`PfBody::Probe`].
    ProbeAck {
        /// The message's key on its sending host.
        key: u64,
    },
}

/// Totals reported by [`Transport::counters`].
#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    messages_started: u64,
    messages_acked: u64,
    messages_delivered: u64,
    data_packets_sent: u64,
    data_bytes_sent: u64,
    retransmitted_packets: u64,
    timeouts: u64,
    probes_sent: u64,
    acks_sent: u64,
    probe_acks_sent: u64,
    acks_received: u64,
    duplicate_acks_received: u64,
    data_packets_received: u64,
    duplicate_packets_received: u64,
    duplicate_payload_bytes: u64,
}

mod flow;
mod host;
#[cfg(test)]
mod tests;

use flow::*;
pub use host::PFabricHost;
