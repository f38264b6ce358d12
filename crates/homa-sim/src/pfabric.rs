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

/// A set of packet numbers `0..n`: one inline word for messages of up to 64
/// packets, a heap bitmap for longer ones.
#[derive(Debug, Clone)]
struct PacketSet {
    small: u64,
    large: Vec<u64>,
}

impl PacketSet {
    fn new(n: u32) -> Self {
        PacketSet {
            small: 0,
            large: if n <= 64 {
                Vec::new()
            } else {
                vec![0; (n as usize).div_ceil(64)]
            },
        }
    }

    fn word(&self, i: u32) -> u64 {
        if self.large.is_empty() {
            self.small
        } else {
            self.large[(i / 64) as usize]
        }
    }

    fn word_mut(&mut self, i: u32) -> &mut u64 {
        if self.large.is_empty() {
            &mut self.small
        } else {
            &mut self.large[(i / 64) as usize]
        }
    }

    fn contains(&self, i: u32) -> bool {
        self.word(i) & (1 << (i % 64)) != 0
    }

    /// Adds `i`; true if it was not there.
    fn insert(&mut self, i: u32) -> bool {
        let bit = 1 << (i % 64);
        let w = self.word_mut(i);
        let new = *w & bit == 0;
        *w |= bit;
        new
    }

    /// Removes `i`; true if it was there.
    fn remove(&mut self, i: u32) -> bool {
        let bit = 1 << (i % 64);
        let w = self.word_mut(i);
        let was = *w & bit != 0;
        *w &= !bit;
        was
    }
}

/// Sender state of one message.
///
/// Packet `s` is unsent if `s >= next_new`; otherwise it is acknowledged
/// (in `acked`), lost (in `lost`: timed out and not yet resent) or in
/// flight (neither).
#[derive(Debug)]
struct Flow {
    dst: HostId,
    index: u64,
    size: u64,
    packets: u32,
    hash: u64,
    next_new: u32,
    /// Every packet below is acknowledged.
    first_unacked: u32,
    /// No lost packet below this.
    resend_cursor: u32,
    acked: PacketSet,
    lost: PacketSet,
    acked_packets: u32,
    acked_bytes: u64,
    in_flight: u32,
    lost_packets: u32,
    cwnd: u32,
    ssthresh: u32,
    /// ACKs counted toward the next window increase above `ssthresh`.
    ca_acks: u32,
    consecutive_timeouts: u32,
    probing: bool,
    /// Deadline of the flow's RTO timer, mirrored in `PFabricHost::timers`.
    timer: Option<Time>,
    /// Remaining bytes under which the flow sits in `PFabricHost::ready`.
    ready_rank: Option<u64>,
}

impl Flow {
    /// Bytes not yet acknowledged: the flow's pFabric priority.
    fn remaining(&self) -> u64 {
        self.size - self.acked_bytes
    }

    /// Whether the flow may send a data packet now.
    fn can_send(&self) -> bool {
        !self.probing
            && self.in_flight < self.cwnd
            && (self.lost_packets > 0 || self.next_new < self.packets)
    }

    /// Rank of a packet sent now.
    fn rank(&self) -> u64 {
        self.remaining().max(1)
    }
}

/// Receiver state of one partially received multi-packet message.
#[derive(Debug)]
struct Incoming {
    index: u64,
    packets: u32,
    received: u32,
    got: PacketSet,
}

/// Which messages from one sender have been completely received.
#[derive(Debug, Default)]
struct Completed {
    /// Every message index below this is complete.
    below: u64,
    /// Complete indices at or above `below`.
    above: FxHashSet<u64>,
}

impl Completed {
    fn contains(&self, index: u64) -> bool {
        index < self.below || self.above.contains(&index)
    }

    fn insert(&mut self, index: u64) {
        if index == self.below {
            self.below += 1;
            while self.above.remove(&self.below) {
                self.below += 1;
            }
        } else if index > self.below {
            self.above.insert(index);
        }
    }
}

/// A 64-bit mix of a message's identity, for [`PacketMeta::flow`].
fn flow_hash(src: HostId, key: u64) -> u64 {
    let mut z = key
        .wrapping_add((src as u64) << 40)
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Puts `flow` into (or takes it out of) the SRPT set of flows that may
/// send, keyed by its current remaining bytes.
fn refresh_ready(ready: &mut BTreeSet<(u64, u64)>, flow: &mut Flow, key: u64) {
    let want = flow.can_send().then(|| flow.remaining());
    if want != flow.ready_rank {
        if let Some(r) = flow.ready_rank {
            ready.remove(&(r, key));
        }
        if let Some(r) = want {
            ready.insert((r, key));
        }
        flow.ready_rank = want;
    }
}

/// Sets (or clears) the flow's RTO deadline.
fn set_timer(timers: &mut BTreeSet<(Time, u64)>, flow: &mut Flow, key: u64, at: Option<Time>) {
    if at != flow.timer {
        if let Some(t) = flow.timer {
            timers.remove(&(t, key));
        }
        if let Some(t) = at {
            timers.insert((t, key));
        }
        flow.timer = at;
    }
}

/// A minimum-size control packet (rank 0).
fn control_packet(
    pk: &Packetization,
    src: HostId,
    dst: HostId,
    flow: u64,
    transport_bytes: u32,
    rank: u64,
    body: PfBody,
) -> SimPacket<PfBody> {
    SimPacket {
        meta: PacketMeta {
            src,
            dst,
            priority: 0,
            rank,
            wire_bytes: pk.frame_bytes(transport_bytes),
            payload_bytes: 0,
            retransmit: false,
            flow,
            ecn: false,
        },
        body,
    }
}

/// pFabric on one host: the sender side of its outgoing messages and the
/// receiver side of its incoming ones.
#[derive(Debug)]
pub struct PFabricHost {
    id: HostId,
    hosts: u32,
    pk: Packetization,
    max_payload: u64,
    params: Params,
    next_key: u64,
    /// Next message index per destination.
    next_index: FxHashMap<HostId, u64>,
    flows: FxHashMap<u64, Flow>,
    /// Flows that may send now, by (remaining bytes, key): the first is the
    /// SRPT choice. A set rather than a scan because under SRPT large
    /// messages can wait behind many small ones, so a host may hold
    /// hundreds of active flows at high load; each change costs O(log n).
    ready: BTreeSet<(u64, u64)>,
    /// Armed RTO timers by (deadline, key).
    timers: BTreeSet<(Time, u64)>,
    /// ACKs, probe replies and probes, sent before any data.
    control: VecDeque<SimPacket<PfBody>>,
    incoming: FxHashMap<(HostId, u64), Incoming>,
    completed: FxHashMap<HostId, Completed>,
    delivered: VecDeque<Delivered>,
    counters: Counters,
}

impl PFabricHost {
    fn new(id: HostId, env: &HostEnv, params: Params) -> Self {
        PFabricHost {
            id,
            hosts: env.hosts,
            pk: env.packetization,
            max_payload: env.packetization.max_payload() as u64,
            params,
            next_key: 0,
            next_index: FxHashMap::default(),
            flows: FxHashMap::default(),
            ready: BTreeSet::new(),
            timers: BTreeSet::new(),
            control: VecDeque::new(),
            incoming: FxHashMap::default(),
            completed: FxHashMap::default(),
            delivered: VecDeque::new(),
            counters: Counters::default(),
        }
    }

    /// Outgoing messages not yet fully acknowledged.
    pub fn active_flows(&self) -> usize {
        self.flows.len()
    }

    /// Incoming messages partially received.
    pub fn incomplete_incoming(&self) -> usize {
        self.incoming.len()
    }

    /// The next data packet in SRPT order, if a flow may send.
    fn next_data(&mut self, now: Time) -> Option<SimPacket<PfBody>> {
        let &(_, key) = self.ready.first()?;
        let flow = self
            .flows
            .get_mut(&key)
            .expect("every ready flow is active");
        let retransmit = flow.lost_packets > 0;
        let seq = if retransmit {
            let mut s = flow.resend_cursor;
            while !flow.lost.contains(s) {
                s += 1;
            }
            debug_assert!(s < flow.next_new);
            flow.lost.remove(s);
            flow.lost_packets -= 1;
            flow.resend_cursor = s + 1;
            s
        } else {
            flow.next_new += 1;
            flow.next_new - 1
        };
        flow.in_flight += 1;
        let offset = seq as u64 * self.max_payload;
        let len = (flow.size - offset).min(self.max_payload) as u32;
        let packet = SimPacket {
            meta: PacketMeta {
                src: self.id,
                dst: flow.dst,
                priority: 0,
                rank: flow.rank(),
                wire_bytes: self.pk.data_frame(len),
                payload_bytes: len,
                retransmit,
                flow: flow.hash,
                ecn: false,
            },
            body: PfBody::Data {
                key,
                index: flow.index,
                seq,
                len,
                msg_size: flow.size,
            },
        };
        if flow.timer.is_none() {
            let at = now.saturating_add(self.params.rto);
            set_timer(&mut self.timers, flow, key, Some(at));
        }
        refresh_ready(&mut self.ready, flow, key);
        self.counters.data_packets_sent += 1;
        self.counters.data_bytes_sent += len as u64;
        if retransmit {
            self.counters.retransmitted_packets += 1;
        }
        Some(packet)
    }

    /// A data packet arrived: acknowledge it, record it, deliver the
    /// message if it is now complete.
    fn on_data(&mut self, src: HostId, key: u64, index: u64, seq: u32, msg_size: u64) {
        self.counters.data_packets_received += 1;
        self.counters.acks_sent += 1;
        self.control.push_back(control_packet(
            &self.pk,
            self.id,
            src,
            flow_hash(src, key),
            ACK_HEADER_BYTES,
            0,
            PfBody::Ack { key, seq },
        ));
        let max_payload = self.pk.max_payload() as u64;
        let len = msg_size
            .saturating_sub(seq as u64 * max_payload)
            .min(max_payload);
        let done = self.completed.entry(src).or_default();
        if done.contains(index) {
            self.counters.duplicate_packets_received += 1;
            self.counters.duplicate_payload_bytes += len;
            return;
        }
        let packets = self.pk.packets(msg_size).min(u32::MAX as u64) as u32;
        if seq >= packets {
            debug_assert!(false, "data packet {seq} of a {packets}-packet message");
            return;
        }
        if packets > 1 {
            let msg = self.incoming.entry((src, key)).or_insert_with(|| Incoming {
                index,
                packets,
                received: 0,
                got: PacketSet::new(packets),
            });
            if !msg.got.insert(seq) {
                self.counters.duplicate_packets_received += 1;
                self.counters.duplicate_payload_bytes += len;
                return;
            }
            msg.received += 1;
            if msg.received < msg.packets {
                return;
            }
            debug_assert_eq!(msg.index, index);
            self.incoming.remove(&(src, key));
        }
        done.insert(index);
        self.counters.messages_delivered += 1;
        self.delivered.push_back(Delivered { src, key });
    }

    /// An ACK for packet `seq` of our message `key` arrived.
    fn on_ack(&mut self, now: Time, key: u64, seq: u32) {
        self.counters.acks_received += 1;
        let Some(flow) = self.flows.get_mut(&key) else {
            // The message was already fully acknowledged.
            self.counters.duplicate_acks_received += 1;
            return;
        };
        if seq >= flow.next_new || !flow.acked.insert(seq) {
            self.counters.duplicate_acks_received += 1;
            return;
        }
        flow.acked_packets += 1;
        let offset = seq as u64 * self.max_payload;
        flow.acked_bytes += (flow.size - offset).min(self.max_payload);
        if flow.lost.remove(seq) {
            // The original arrived after its timeout.
            flow.lost_packets -= 1;
        } else {
            flow.in_flight -= 1;
        }
        while flow.first_unacked < flow.packets && flow.acked.contains(flow.first_unacked) {
            flow.first_unacked += 1;
        }
        if flow.acked_packets == flow.packets {
            set_timer(&mut self.timers, flow, key, None);
            if let Some(r) = flow.ready_rank {
                self.ready.remove(&(r, key));
            }
            self.flows.remove(&key);
            self.counters.messages_acked += 1;
            return;
        }
        // Progress: the path works.
        flow.consecutive_timeouts = 0;
        flow.probing = false;
        if flow.cwnd < flow.ssthresh {
            flow.cwnd += 1;
        } else {
            flow.ca_acks += 1;
            if flow.ca_acks >= flow.cwnd {
                flow.ca_acks = 0;
                flow.cwnd += 1;
            }
        }
        flow.cwnd = flow.cwnd.min(self.params.max_cwnd);
        let at = (flow.in_flight > 0).then(|| now.saturating_add(self.params.rto));
        set_timer(&mut self.timers, flow, key, at);
        refresh_ready(&mut self.ready, flow, key);
    }

    /// The receiver answered a probe of our message `key`.
    fn on_probe_ack(&mut self, key: u64) {
        let Some(flow) = self.flows.get_mut(&key) else {
            return;
        };
        if !flow.probing {
            return;
        }
        flow.probing = false;
        flow.consecutive_timeouts = 0;
        flow.cwnd = 1;
        flow.ca_acks = 0;
        let at = (flow.in_flight > 0).then_some(flow.timer).flatten();
        set_timer(&mut self.timers, flow, key, at);
        refresh_ready(&mut self.ready, flow, key);
    }

    /// The RTO of message `key` expired (its timer entry is already gone).
    fn flow_timeout(&mut self, now: Time, key: u64) {
        let Some(flow) = self.flows.get_mut(&key) else {
            return;
        };
        flow.timer = None;
        if !flow.probing {
            if flow.in_flight == 0 {
                // Nothing of this flow is in the network (it is waiting for
                // the NIC); the next send rearms the timer.
                return;
            }
            flow.ssthresh = (flow.cwnd / 2).max(2);
            flow.cwnd = 1;
            flow.ca_acks = 0;
            for s in flow.first_unacked..flow.next_new {
                if !flow.acked.contains(s) {
                    flow.lost.insert(s);
                }
            }
            flow.lost_packets += flow.in_flight;
            flow.in_flight = 0;
            flow.resend_cursor = flow.first_unacked;
        }
        self.counters.timeouts += 1;
        flow.consecutive_timeouts += 1;
        if flow.consecutive_timeouts >= self.params.probe_after {
            flow.probing = true;
            self.counters.probes_sent += 1;
            self.control.push_back(SimPacket {
                meta: PacketMeta {
                    src: self.id,
                    dst: flow.dst,
                    priority: 0,
                    rank: flow.rank(),
                    wire_bytes: self.pk.data_frame(PROBE_PAYLOAD_BYTES),
                    payload_bytes: 0,
                    retransmit: false,
                    flow: flow.hash,
                    ecn: false,
                },
                body: PfBody::Probe { key },
            });
            let at = now.saturating_add(self.params.rto);
            set_timer(&mut self.timers, flow, key, Some(at));
        }
        refresh_ready(&mut self.ready, flow, key);
    }
}

impl Transport for PFabricHost {
    type Body = PfBody;

    fn start_message(&mut self, now: Time, dst: HostId, size: u64) -> Result<u64, TransportError> {
        let _ = now;
        if dst >= self.hosts {
            return Err(TransportError::Message {
                size,
                reason: format!("destination {dst} does not exist ({} hosts)", self.hosts),
            });
        }
        let packets = self.pk.packets(size);
        if packets > u32::MAX as u64 {
            return Err(TransportError::Message {
                size,
                reason: format!("{packets} packets is more than pFabric numbers"),
            });
        }
        let packets = packets as u32;
        let key = self.next_key;
        self.next_key += 1;
        let next = self.next_index.entry(dst).or_insert(0);
        let index = *next;
        *next += 1;
        let mut flow = Flow {
            dst,
            index,
            size,
            packets,
            hash: flow_hash(self.id, key),
            next_new: 0,
            first_unacked: 0,
            resend_cursor: 0,
            acked: PacketSet::new(packets),
            lost: PacketSet::new(packets),
            acked_packets: 0,
            acked_bytes: 0,
            in_flight: 0,
            lost_packets: 0,
            cwnd: self.params.initial_cwnd,
            ssthresh: self.params.max_cwnd,
            ca_acks: 0,
            consecutive_timeouts: 0,
            probing: false,
            timer: None,
            ready_rank: None,
        };
        refresh_ready(&mut self.ready, &mut flow, key);
        self.flows.insert(key, flow);
        self.counters.messages_started += 1;
        Ok(key)
    }

    fn receive(&mut self, now: Time, packet: SimPacket<PfBody>) {
        let src = packet.meta.src;
        match packet.body {
            PfBody::Data {
                key,
                index,
                seq,
                msg_size,
                ..
            } => self.on_data(src, key, index, seq, msg_size),
            PfBody::Ack { key, seq } => self.on_ack(now, key, seq),
            PfBody::Probe { key } => {
                self.counters.probe_acks_sent += 1;
                self.control.push_back(control_packet(
                    &self.pk,
                    self.id,
                    src,
                    flow_hash(src, key),
                    ACK_HEADER_BYTES,
                    0,
                    PfBody::ProbeAck { key },
                ));
            }
            PfBody::ProbeAck { key } => self.on_probe_ack(key),
        }
    }

    fn poll_transmit(&mut self, now: Time) -> Option<SimPacket<PfBody>> {
        if let Some(p) = self.control.pop_front() {
            return Some(p);
        }
        self.next_data(now)
    }

    fn next_timeout(&self) -> Option<Time> {
        self.timers.first().map(|&(t, _)| t)
    }

    fn on_timeout(&mut self, now: Time) {
        while let Some(&(t, key)) = self.timers.first() {
            if t > now {
                break;
            }
            self.timers.pop_first();
            self.flow_timeout(now, key);
        }
    }

    fn poll_delivered(&mut self) -> Option<Delivered> {
        self.delivered.pop_front()
    }

    fn duplicate_payload_bytes(&self) -> u64 {
        self.counters.duplicate_payload_bytes
    }

    fn has_grantable_incoming(&self) -> bool {
        !self.incoming.is_empty()
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = &self.counters;
        vec![
            ("messages_started", c.messages_started),
            ("messages_acked", c.messages_acked),
            ("messages_delivered", c.messages_delivered),
            ("data_packets_sent", c.data_packets_sent),
            ("data_bytes_sent", c.data_bytes_sent),
            ("retransmitted_packets", c.retransmitted_packets),
            ("timeouts", c.timeouts),
            ("probes_sent", c.probes_sent),
            ("acks_sent", c.acks_sent),
            ("probe_acks_sent", c.probe_acks_sent),
            ("acks_received", c.acks_received),
            ("duplicate_acks_received", c.duplicate_acks_received),
            ("data_packets_received", c.data_packets_received),
            ("duplicate_packets_received", c.duplicate_packets_received),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::tx_time;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use std::collections::{BTreeMap, HashMap};

    fn env() -> HostEnv {
        HostEnv {
            hosts: 3,
            host_link_bps: 10_000_000_000,
            rtt: 8_000_000,
            rtt_bytes: 10_000,
            packetization: Packetization::default(),
            max_message: 10_000_000,
            size_sample: Default::default(),
            seed: 1,
        }
    }

    fn mp() -> u64 {
        Packetization::default().max_payload() as u64
    }

    fn host(id: HostId) -> PFabricHost {
        PFabric::default().build_host(id, &env()).unwrap()
    }

    fn counter(h: &PFabricHost, name: &str) -> u64 {
        h.counters()
            .into_iter()
            .find(|&(n, _)| n == name)
            .unwrap_or_else(|| panic!("no counter {name}"))
            .1
    }

    fn total(hosts: &[PFabricHost], name: &str) -> u64 {
        hosts.iter().map(|h| counter(h, name)).sum()
    }

    type DropFn = Box<dyn FnMut(Time, &SimPacket<PfBody>) -> bool>;

    /// Hosts joined by a wire: each host has a link of `env().host_link_bps`
    /// that it feeds one packet at a time; a packet arrives `delay` after
    /// its last bit left, unless `drop` says otherwise.
    struct Wire {
        hosts: Vec<PFabricHost>,
        now: Time,
        delay: Time,
        free_at: Vec<Time>,
        busy: Vec<bool>,
        flying: BTreeMap<(Time, u64), SimPacket<PfBody>>,
        serial: u64,
        /// Every packet the hosts sent, with its send time.
        log: Vec<(Time, SimPacket<PfBody>)>,
        /// Deliveries per receiving host.
        delivered: Vec<Vec<Delivered>>,
        drop: DropFn,
        dropped: u64,
    }

    impl Wire {
        fn new(n: u32, proto: &PFabric) -> Self {
            Wire {
                hosts: (0..n)
                    .map(|i| proto.build_host(i, &env()).unwrap())
                    .collect(),
                now: 0,
                delay: 2_000_000,
                free_at: vec![0; n as usize],
                busy: vec![false; n as usize],
                flying: BTreeMap::new(),
                serial: 0,
                log: Vec::new(),
                delivered: vec![Vec::new(); n as usize],
                drop: Box::new(|_, _| false),
                dropped: 0,
            }
        }

        fn start(&mut self, src: HostId, dst: HostId, size: u64) -> u64 {
            self.busy[src as usize] = true;
            self.hosts[src as usize]
                .start_message(self.now, dst, size)
                .unwrap()
        }

        /// Runs until nothing is left to do (true) or `until` (false).
        fn run(&mut self, until: Time) -> bool {
            let bps = env().host_link_bps;
            loop {
                while let Some(entry) = self.flying.first_entry() {
                    if entry.key().0 > self.now {
                        break;
                    }
                    let p = entry.remove();
                    let dst = p.meta.dst as usize;
                    self.hosts[dst].receive(self.now, p);
                    self.busy[dst] = true;
                }
                for (i, h) in self.hosts.iter_mut().enumerate() {
                    if h.next_timeout().is_some_and(|t| t <= self.now) {
                        h.on_timeout(self.now);
                        self.busy[i] = true;
                    }
                }
                for (i, h) in self.hosts.iter_mut().enumerate() {
                    if self.busy[i] && self.free_at[i] <= self.now {
                        match h.poll_transmit(self.now) {
                            Some(p) => {
                                assert_eq!(p.meta.src, i as HostId);
                                let done = self.now + tx_time(p.meta.wire_bytes, bps);
                                self.free_at[i] = done;
                                self.log.push((self.now, p.clone()));
                                if (self.drop)(self.now, &p) {
                                    self.dropped += 1;
                                } else {
                                    self.serial += 1;
                                    self.flying.insert((done + self.delay, self.serial), p);
                                }
                            }
                            None => self.busy[i] = false,
                        }
                    }
                    while let Some(d) = h.poll_delivered() {
                        self.delivered[i].push(d);
                    }
                }
                let mut next = self.flying.first_key_value().map(|(k, _)| k.0);
                for (i, h) in self.hosts.iter().enumerate() {
                    let t = h.next_timeout();
                    let link = (self.busy[i]).then_some(self.free_at[i].max(self.now));
                    for c in [t, link].into_iter().flatten() {
                        next = Some(next.map_or(c, |n: Time| n.min(c)));
                    }
                }
                match next {
                    None => return true,
                    Some(t) if t > until => return false,
                    Some(t) => self.now = t.max(self.now),
                }
            }
        }

        /// Checks that exactly `expected` (src, dst, key) were delivered,
        /// each once, and that no state is left behind.
        fn check_all_delivered(&self, expected: &[(HostId, HostId, u64)]) {
            let mut seen: HashMap<(HostId, HostId, u64), u32> = HashMap::new();
            for (dst, ds) in self.delivered.iter().enumerate() {
                for d in ds {
                    *seen.entry((d.src, dst as HostId, d.key)).or_default() += 1;
                }
            }
            for e in expected {
                assert_eq!(seen.get(e), Some(&1), "message {e:?} delivered {seen:?}");
            }
            assert_eq!(seen.len(), expected.len(), "unexpected deliveries {seen:?}");
            for h in &self.hosts {
                assert_eq!(h.active_flows(), 0);
                assert_eq!(h.incomplete_incoming(), 0);
                assert!(!h.has_grantable_incoming());
                assert_eq!(h.next_timeout(), None);
            }
        }

        fn data_sent(&self) -> impl Iterator<Item = &SimPacket<PfBody>> {
            self.log
                .iter()
                .map(|(_, p)| p)
                .filter(|p| matches!(p.body, PfBody::Data { .. }))
        }
    }

    #[test]
    fn small_and_large_messages_are_delivered_once() {
        let mut w = Wire::new(2, &PFabric::default());
        let a = w.start(0, 1, 100);
        let b = w.start(0, 1, 100 * mp());
        assert!(w.run(1_000_000_000_000));
        w.check_all_delivered(&[(0, 1, a), (0, 1, b)]);
        assert_eq!(w.data_sent().count(), 101);
        assert_eq!(total(&w.hosts, "retransmitted_packets"), 0);
        assert_eq!(total(&w.hosts, "timeouts"), 0);
        assert_eq!(counter(&w.hosts[1], "acks_sent"), 101);
        assert_eq!(counter(&w.hosts[0], "messages_acked"), 2);
        let bytes: u64 = w.data_sent().map(|p| p.meta.payload_bytes as u64).sum();
        assert_eq!(bytes, 101 * mp() - mp() + 100);
        for p in w.data_sent() {
            let PfBody::Data { len, .. } = p.body else {
                unreachable!()
            };
            assert_eq!(p.meta.payload_bytes, len);
            assert_eq!(p.meta.wire_bytes, Packetization::default().data_frame(len));
            assert_eq!(p.meta.priority, 0);
            assert!(!p.meta.retransmit);
        }
    }

    #[test]
    fn zero_byte_message_sends_one_empty_packet() {
        let mut w = Wire::new(2, &PFabric::default());
        let k = w.start(0, 1, 0);
        assert!(w.run(1_000_000_000_000));
        w.check_all_delivered(&[(0, 1, k)]);
        let data: Vec<_> = w.data_sent().collect();
        assert_eq!(data.len(), 1);
        assert_eq!(data[0].meta.payload_bytes, 0);
        assert_eq!(data[0].meta.rank, 1);
    }

    fn mixed_traffic(w: &mut Wire) -> Vec<(HostId, HostId, u64)> {
        let mut expected = Vec::new();
        let plan: [(HostId, HostId, u64); 11] = [
            (0, 1, 0),
            (0, 1, 1),
            (0, 1, mp()),
            (0, 1, mp() + 1),
            (0, 1, 50_000),
            (0, 1, 300_000),
            (2, 1, 200_000),
            (2, 1, 10),
            (1, 0, 100_000),
            (1, 2, 3_000),
            (2, 0, 64 * mp() + 7),
        ];
        for (src, dst, size) in plan {
            let k = w.start(src, dst, size);
            expected.push((src, dst, k));
        }
        expected
    }

    #[test]
    fn every_fifth_data_packet_dropped() {
        let mut w = Wire::new(3, &PFabric::default());
        let mut n = 0u64;
        w.drop = Box::new(move |_, p| {
            if matches!(p.body, PfBody::Data { .. }) {
                n += 1;
                n % 5 == 0
            } else {
                false
            }
        });
        let expected = mixed_traffic(&mut w);
        assert!(w.run(10_000_000_000_000));
        w.check_all_delivered(&expected);
        assert!(w.dropped > 0);
        assert!(total(&w.hosts, "retransmitted_packets") > 0);
        assert!(total(&w.hosts, "timeouts") > 0);
        let retx = w.data_sent().filter(|p| p.meta.retransmit).count() as u64;
        assert_eq!(retx, total(&w.hosts, "retransmitted_packets"));
    }

    #[test]
    fn random_loss_of_any_packet() {
        for seed in 0..5 {
            let mut w = Wire::new(3, &PFabric::default());
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            w.drop = Box::new(move |_, _| rng.gen_bool(0.15));
            let expected = mixed_traffic(&mut w);
            assert!(w.run(10_000_000_000_000));
            w.check_all_delivered(&expected);
            assert!(total(&w.hosts, "retransmitted_packets") > 0);
            // Lost ACKs make the sender resend packets that had arrived.
            assert!(total(&w.hosts, "duplicate_packets_received") > 0);
        }
    }

    #[test]
    fn blackout_leads_to_probe_mode_then_recovery() {
        let mut w = Wire::new(2, &PFabric::default());
        // Nothing gets through for 300 µs (more than 5 RTOs of 24 µs).
        w.drop = Box::new(|now, _| now < 300_000_000);
        let a = w.start(0, 1, 20 * mp());
        let b = w.start(0, 1, 500);
        assert!(w.run(10_000_000_000_000));
        w.check_all_delivered(&[(0, 1, a), (0, 1, b)]);
        let h = &w.hosts[0];
        assert!(counter(h, "timeouts") >= 5);
        assert!(counter(h, "probes_sent") > 0);
        assert!(counter(&w.hosts[1], "probe_acks_sent") > 0);
        // While probing a flow sends no data: one probe per RTO.
        let rto = 3 * env().rtt;
        let probes: Vec<Time> = w
            .log
            .iter()
            .filter(|(_, p)| matches!(p.body, PfBody::Probe { key } if key == a))
            .map(|&(t, _)| t)
            .collect();
        assert!(!probes.is_empty());
        for pair in probes.windows(2) {
            assert!(pair[1] - pair[0] >= rto);
        }
        let p = w
            .log
            .iter()
            .find(|(_, p)| matches!(p.body, PfBody::Probe { .. }))
            .unwrap();
        assert_eq!(p.1.meta.payload_bytes, 0);
        assert_eq!(
            p.1.meta.wire_bytes,
            Packetization::default().data_frame(PROBE_PAYLOAD_BYTES)
        );
    }

    fn data_key(p: &SimPacket<PfBody>) -> u64 {
        match p.body {
            PfBody::Data { key, .. } => key,
            ref b => panic!("expected data, got {b:?}"),
        }
    }

    #[test]
    fn sender_sends_shortest_message_first() {
        let mut h = host(0);
        let long = h.start_message(0, 1, 100 * mp()).unwrap();
        let short = h.start_message(0, 1, 3 * mp()).unwrap();
        let keys: Vec<u64> = (0..5)
            .map(|_| data_key(&h.poll_transmit(0).unwrap()))
            .collect();
        assert_eq!(keys, [short, short, short, long, long]);

        // A short message that shows up later overtakes the long one.
        let mut h = host(0);
        let long = h.start_message(0, 2, 100 * mp()).unwrap();
        assert_eq!(data_key(&h.poll_transmit(0).unwrap()), long);
        assert_eq!(data_key(&h.poll_transmit(0).unwrap()), long);
        let short = h.start_message(10, 2, 2 * mp()).unwrap();
        assert_eq!(data_key(&h.poll_transmit(10).unwrap()), short);
        assert_eq!(data_key(&h.poll_transmit(10).unwrap()), short);
        assert_eq!(data_key(&h.poll_transmit(10).unwrap()), long);
    }

    #[test]
    fn ranks_shrink_as_a_message_progresses() {
        let mut w = Wire::new(2, &PFabric::default());
        let size = 100 * mp() + 5;
        let k = w.start(0, 1, size);
        assert!(w.run(1_000_000_000_000));
        w.check_all_delivered(&[(0, 1, k)]);
        let ranks: Vec<u64> = w.data_sent().map(|p| p.meta.rank).collect();
        assert_eq!(ranks.len(), 101);
        assert_eq!(ranks[0], size);
        assert!(ranks.windows(2).all(|r| r[1] <= r[0]), "{ranks:?}");
        assert!(*ranks.last().unwrap() < 10 * mp());
        // Remaining unacknowledged bytes: packets sent before the first ACK
        // returns carry the full size, later ones one packet less per ACK.
        let first_ack = w
            .log
            .iter()
            .find(|(_, p)| matches!(p.body, PfBody::Ack { .. }))
            .unwrap()
            .0;
        let before = w
            .log
            .iter()
            .filter(|(t, p)| *t < first_ack + w.delay && matches!(p.body, PfBody::Data { .. }))
            .count();
        assert!(before >= 2);
        assert!(ranks[..before].iter().all(|&r| r == size));
        assert!(ranks[before + 1] < size);
    }

    #[test]
    fn acks_have_rank_zero_and_go_before_data() {
        let mut sender = host(0);
        let mut receiver = host(1);
        let k = sender.start_message(0, 1, 2 * mp()).unwrap();
        let own = receiver.start_message(0, 0, 10 * mp()).unwrap();
        let d = sender.poll_transmit(0).unwrap();
        receiver.receive(100, d);
        let ack = receiver.poll_transmit(100).unwrap();
        assert_eq!(ack.body, PfBody::Ack { key: k, seq: 0 });
        assert_eq!(ack.meta.rank, 0);
        assert_eq!(ack.meta.src, 1);
        assert_eq!(ack.meta.dst, 0);
        assert_eq!(ack.meta.payload_bytes, 0);
        assert_eq!(
            ack.meta.wire_bytes,
            Packetization::default().frame_bytes(ACK_HEADER_BYTES)
        );
        assert_eq!(data_key(&receiver.poll_transmit(100).unwrap()), own);
        assert!(receiver.has_grantable_incoming());

        // Duplicates are acknowledged too, but counted and not delivered.
        let d2 = sender.poll_transmit(0).unwrap();
        receiver.receive(200, d2.clone());
        assert_eq!(
            receiver.poll_delivered(),
            Some(Delivered { src: 0, key: k })
        );
        assert!(!receiver.has_grantable_incoming());
        receiver.receive(300, d2);
        assert_eq!(receiver.poll_delivered(), None);
        assert_eq!(counter(&receiver, "duplicate_packets_received"), 1);
        assert_eq!(counter(&receiver, "acks_sent"), 3);
        for _ in 0..2 {
            let p = receiver.poll_transmit(300).unwrap();
            assert!(matches!(p.body, PfBody::Ack { key, seq: 1 } if key == k));
            assert_eq!(p.meta.rank, 0);
        }
    }

    #[test]
    fn late_duplicate_of_single_packet_message_is_not_redelivered() {
        let mut sender = host(0);
        let mut receiver = host(1);
        let mut keys = Vec::new();
        let mut first = Vec::new();
        for _ in 0..3 {
            keys.push(sender.start_message(0, 1, 10).unwrap());
            first.push(sender.poll_transmit(0).unwrap());
        }
        // Out of order: the watermark waits for message index 0.
        for i in [2, 1, 0, 2, 1] {
            receiver.receive(1, first[i].clone());
        }
        let got: Vec<u64> = std::iter::from_fn(|| receiver.poll_delivered())
            .map(|d| d.key)
            .collect();
        assert_eq!(got, [keys[2], keys[1], keys[0]]);
        assert_eq!(counter(&receiver, "duplicate_packets_received"), 2);
        let done = &receiver.completed[&0];
        assert_eq!(done.below, 3);
        assert!(done.above.is_empty());
    }

    #[test]
    fn window_limits_packets_in_flight() {
        let mut h = host(0);
        let k = h.start_message(0, 1, 100 * mp()).unwrap();
        let mut sent = Vec::new();
        while let Some(p) = h.poll_transmit(0) {
            sent.push(p);
        }
        let bdp = PFabricConfig::bdp_packets(&env());
        assert_eq!(bdp, 9);
        assert_eq!(sent.len(), bdp as usize);
        // Two ACKs open room for two more (the window is already at its
        // one-BDP cap).
        h.receive(
            5,
            control_packet(&h.pk, 1, 0, 0, 32, 0, PfBody::Ack { key: k, seq: 0 }),
        );
        h.receive(
            5,
            control_packet(&h.pk, 1, 0, 0, 32, 0, PfBody::Ack { key: k, seq: 1 }),
        );
        let more = std::iter::from_fn(|| h.poll_transmit(5)).count();
        assert_eq!(more, 2);

        let cfg = PFabricConfig {
            initial_window_packets: Some(3),
            ..PFabricConfig::default()
        };
        let mut h = PFabric::new(cfg).build_host(0, &env()).unwrap();
        let k = h.start_message(0, 1, 100 * mp()).unwrap();
        assert_eq!(std::iter::from_fn(|| h.poll_transmit(0)).count(), 3);
        // Below one BDP the window grows by one per ACK (slow start).
        h.receive(
            5,
            control_packet(&h.pk, 1, 0, 0, 32, 0, PfBody::Ack { key: k, seq: 0 }),
        );
        assert_eq!(std::iter::from_fn(|| h.poll_transmit(5)).count(), 2);
    }

    #[test]
    fn timeout_resends_oldest_unacknowledged_packet() {
        let mut h = host(0);
        let k = h.start_message(1_000, 1, 20 * mp()).unwrap();
        let first: Vec<_> = std::iter::from_fn(|| h.poll_transmit(1_000)).collect();
        assert_eq!(first.len(), 9);
        let rto = 3 * env().rtt;
        assert_eq!(h.next_timeout(), Some(1_000 + rto));
        // Packet 0 is acknowledged: progress rearms the timer.
        h.receive(
            2_000,
            control_packet(&h.pk, 1, 0, 0, 32, 0, PfBody::Ack { key: k, seq: 0 }),
        );
        assert_eq!(h.next_timeout(), Some(2_000 + rto));
        let p = h.poll_transmit(2_000).unwrap();
        assert!(matches!(p.body, PfBody::Data { seq: 9, .. }));
        // A spurious early call does nothing.
        h.on_timeout(2_000 + rto - 1);
        assert_eq!(counter(&h, "timeouts"), 0);
        assert!(h.poll_transmit(2_000 + rto - 1).is_none());
        // A late one resends packet 1 only (window 1).
        let late = 2_000 + rto + 500;
        h.on_timeout(late);
        assert_eq!(counter(&h, "timeouts"), 1);
        let r = h.poll_transmit(late).unwrap();
        assert!(matches!(r.body, PfBody::Data { key, seq: 1, .. } if key == k));
        assert!(r.meta.retransmit);
        assert_eq!(r.meta.rank, 19 * mp());
        assert!(h.poll_transmit(late).is_none());
        assert_eq!(h.next_timeout(), Some(late + rto));
        assert_eq!(counter(&h, "retransmitted_packets"), 1);
        // Its ACK lets two more go (slow start): the next lost ones.
        h.receive(
            late + 10,
            control_packet(&h.pk, 1, 0, 0, 32, 0, PfBody::Ack { key: k, seq: 1 }),
        );
        let seqs: Vec<u32> = std::iter::from_fn(|| h.poll_transmit(late + 10))
            .map(|p| match p.body {
                PfBody::Data { seq, .. } => seq,
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(seqs, [2, 3]);
    }

    #[test]
    fn config_errors() {
        let bad = [
            PFabricConfig {
                rto_rtts: 0.0,
                ..Default::default()
            },
            PFabricConfig {
                rto_rtts: -1.0,
                ..Default::default()
            },
            PFabricConfig {
                rto_rtts: f64::NAN,
                ..Default::default()
            },
            PFabricConfig {
                rto_rtts: f64::INFINITY,
                ..Default::default()
            },
            PFabricConfig {
                initial_window_packets: Some(0),
                ..Default::default()
            },
            PFabricConfig {
                probe_after_timeouts: 0,
                ..Default::default()
            },
            PFabricConfig {
                buffer_bytes: Some(1000),
                ..Default::default()
            },
        ];
        for cfg in bad {
            match PFabric::new(cfg.clone()).build_host(0, &env()) {
                Err(TransportError::Config { protocol, reason }) => {
                    assert_eq!(protocol, "pfabric");
                    assert!(!reason.is_empty());
                }
                other => panic!("{cfg:?} gave {other:?}"),
            }
        }
        let mut h = host(0);
        assert!(matches!(
            h.start_message(0, 3, 10),
            Err(TransportError::Message { .. })
        ));
    }

    #[test]
    fn config_defaults_and_parsing() {
        let p = PFabric::default();
        assert_eq!(p.name(), "pfabric");
        assert_eq!(p.queue_discipline(), QueueDiscipline::Rank);
        let pk = Packetization::default();
        // 2 × 10 000 bytes = 15 full packets of 1424 bytes.
        assert_eq!(
            p.default_buffer_bytes(&env()),
            Some(15 * pk.max_frame() as u64)
        );
        let cfg: PFabricConfig = serde_json::from_str("{}").unwrap();
        assert_eq!(cfg, PFabricConfig::default());
        let cfg: PFabricConfig =
            serde_json::from_str(r#"{"rto_rtts": 2.5, "buffer_bytes": 50000}"#).unwrap();
        assert_eq!(cfg.rto_rtts, 2.5);
        assert_eq!(PFabric::new(cfg).default_buffer_bytes(&env()), Some(50_000));
        assert!(serde_json::from_str::<PFabricConfig>(r#"{"rto": 2}"#).is_err());
        let names: Vec<&str> = host(0).counters().iter().map(|c| c.0).collect();
        for n in [
            "data_packets_sent",
            "retransmitted_packets",
            "timeouts",
            "acks_sent",
            "duplicate_packets_received",
        ] {
            assert!(names.contains(&n));
        }
    }

    #[test]
    fn many_hosts_many_messages_with_loss() {
        let proto = PFabric::default();
        let mut w = Wire::new(3, &proto);
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut drop_rng = ChaCha8Rng::seed_from_u64(8);
        w.drop = Box::new(move |_, _| drop_rng.gen_bool(0.05));
        let mut expected = Vec::new();
        for _ in 0..300 {
            let src = rng.gen_range(0..3);
            let dst = (src + rng.gen_range(1..3)) % 3;
            let size = match rng.gen_range(0..4) {
                0 => rng.gen_range(0..200),
                1 => rng.gen_range(0..5_000),
                2 => rng.gen_range(0..100_000),
                _ => rng.gen_range(0..1_000_000),
            };
            expected.push((src, dst, w.start(src, dst, size)));
        }
        assert!(w.run(100_000_000_000_000));
        w.check_all_delivered(&expected);
    }
}
