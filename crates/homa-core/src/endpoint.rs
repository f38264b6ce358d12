//! One Homa endpoint (an address and port): its RPCs, peers, grant
//! scheduler and send queue, driven entirely by calls that carry the time.

use crate::ack::AckMemory;
use crate::config::RPC_MEMORY_CHARGE;
use crate::event::{Error, Event, RpcError, RpcId};
use crate::grant::{self, Candidate, FifoGrants, GrantParams};
use crate::incoming::InMessage;
use crate::metrics::Metrics;
use crate::outgoing::OutMessage;
use crate::peer::Peer;
use crate::priority::{unsched_priority, PriorityPlan, SizeSampler};
use crate::srpt::{self, SrptQueue};
use crate::{incast, Config, ConfigError, Nanos};
use bytes::{Bytes, BytesMut};
use homa_wire::{
    AckEntry, AckList, Body, CommonHeader, DataHeader, Packet, PacketType, DATA_FLAG_INCAST,
    DATA_HEADER_LEN, MAX_ACKS, RESEND_ALL,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use tracing::{debug, trace};

/// Control packets queued beyond this are dropped (and counted as sent
/// nowhere): a driver that never polls must not make the core grow.
const MAX_CONTROL_QUEUE: usize = 65_536;

/// One packet for the driver to send.
///
/// A DATA packet comes in two parts, the header and the message bytes
/// (a slice of the application's message, not a copy), so that a driver can
/// hand both to the kernel without copying (e.g. two iovecs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transmit {
    /// Where to: the peer's IP address and Homa port.
    pub dst: SocketAddr,
    /// Network priority 0..=7 (IP TOS `priority << 5`).
    pub priority: u8,
    /// The packet's type.
    pub packet_type: PacketType,
    /// The Homa header; for control packets, the whole packet.
    pub header: Bytes,
    /// Message bytes following the header (DATA only; empty otherwise).
    pub payload: Bytes,
}

impl Transmit {
    /// Bytes of the whole Homa packet.
    pub fn len(&self) -> usize {
        self.header.len() + self.payload.len()
    }

    /// Never true: every packet has a header.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The whole packet in one buffer (copies DATA packets).
    pub fn to_bytes(&self) -> Bytes {
        if self.payload.is_empty() {
            self.header.clone()
        } else {
            let mut b = BytesMut::with_capacity(self.len());
            b.extend_from_slice(&self.header);
            b.extend_from_slice(&self.payload);
            b.freeze()
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Client: sending the request and/or receiving the response.
    Client,
    /// Server: receiving the request.
    Receiving,
    /// Server: the application has the request.
    InService,
    /// Server: sending the response, then waiting for the ack.
    Responding,
}

/// What a silent RPC is waiting for from its peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// Data it expects: ask for this range again.
    Data { offset: u32, length: u32 },
    /// Nothing it can ask for (it waits for grants, or we withhold ours):
    /// probe that the peer is alive and still has the RPC.
    Probe,
    /// An ack for a fully sent response.
    Ack,
}

/// RPCs of one peer whose silence has lasted too long: those that want a
/// RESEND (or probe), and those that want a NEED_ACK.
type DuePerPeer = (Vec<(RpcId, Wait)>, Vec<RpcId>);

#[derive(Debug)]
struct Rpc {
    state: State,
    msgout: Option<OutMessage>,
    msgin: Option<InMessage>,
    /// Ticks since the last packet for this RPC while it waited on the peer.
    silent_ticks: u32,
    /// Incast control: a client's request asks for it / a server honours it.
    incast: bool,
    /// Current key in `Endpoint::sendable`.
    sendable: Option<srpt::Key>,
    /// Current key in `Endpoint::grantable`.
    grantable: Option<srpt::Key>,
}

impl Rpc {
    fn new(state: State) -> Rpc {
        Rpc {
            state,
            msgout: None,
            msgin: None,
            silent_ticks: 0,
            incast: false,
            sendable: None,
            grantable: None,
        }
    }

    fn wait(&self) -> Option<Wait> {
        // An incoming message either expects granted bytes (ask for the
        // first gap) or waits on our own grants, in which case we still
        // probe now and then that the sender is alive.
        let incoming = |m: &InMessage| {
            Some(if m.outstanding() > 0 {
                let (s, e) = m.first_gap().unwrap_or((m.received, m.granted));
                Wait::Data {
                    offset: s,
                    length: e - s,
                }
            } else {
                Wait::Probe
            })
        };
        match self.state {
            State::Client => {
                if let Some(m) = &self.msgin {
                    incoming(m)
                } else if self.msgout.as_ref().is_some_and(|m| m.granted_all_sent()) {
                    Some(Wait::Data {
                        offset: 0,
                        length: RESEND_ALL,
                    })
                } else {
                    None
                }
            }
            State::Receiving => self.msgin.as_ref().and_then(incoming),
            State::InService => None,
            State::Responding => {
                let m = self.msgout.as_ref()?;
                if !m.granted_all_sent() {
                    None
                } else if !m.all_sent() {
                    Some(Wait::Probe)
                } else {
                    Some(Wait::Ack)
                }
            }
        }
    }
}

/// The Homa protocol for one local address and port.
///
/// Feed it packets ([`Endpoint::handle_packet`]), timer expiries
/// ([`Endpoint::handle_timeout`]) and application calls; take from it packets
/// to send ([`Endpoint::poll_transmit`]), the next timer deadline
/// ([`Endpoint::poll_timeout`]) and events for the application
/// ([`Endpoint::poll_event`]). Every call that depends on time takes `now`.
pub struct Endpoint {
    config: Config,
    local: SocketAddr,
    next_id: u64,
    seq: u64,
    rpcs: BTreeMap<RpcId, Rpc>,
    peers: BTreeMap<SocketAddr, Peer>,
    /// Outgoing messages with something to send, by bytes left to send.
    sendable: SrptQueue,
    /// Incoming messages that need grants, by bytes left to receive.
    grantable: SrptQueue,
    control: VecDeque<Transmit>,
    events: VecDeque<Event>,
    plan: PriorityPlan,
    plan_version: u16,
    sampler: SizeSampler,
    next_cutoff_update: Nanos,
    fifo: FifoGrants,
    data_packets: u64,
    /// DATA bytes (Homa header and payload) received since the last tick.
    rx_data_bytes_tick: u64,
    acked: AckMemory,
    tick: u64,
    next_tick: Nanos,
    /// When idle peers are next looked for.
    peer_sweep_at: Nanos,
    /// Granted-but-unreceived bytes over all incoming messages.
    incoming_outstanding: u64,
    rx_buffered: u64,
    tx_buffered: u64,
    client_rpcs: usize,
    metrics: Metrics,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("local", &self.local)
            .field("rpcs", &self.rpcs.len())
            .field("peers", &self.peers.len())
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// An endpoint for `local` (the address and Homa port packets to it
    /// carry). `seed` makes the RPC ids it picks reproducible.
    pub fn new(config: Config, local: SocketAddr, seed: u64) -> Result<Endpoint, ConfigError> {
        config.validate()?;
        let config_peer_idle = config.peer_idle_ns;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        // Random even start, so a restarted client does not reuse the ids
        // of its previous life that servers may still remember.
        let next_id = rng.gen_range(1u64..1 << 48) << 1;
        Ok(Endpoint {
            plan: PriorityPlan::default_for(config.num_priorities),
            sampler: SizeSampler::new(config.cutoff_sample_size as usize),
            fifo: FifoGrants::new(config.fifo_grant_fraction, config.fifo_grant_increment),
            next_cutoff_update: config.cutoff_update_interval_ns,
            next_tick: config.tick_ns,
            config,
            local,
            next_id,
            seq: 0,
            rpcs: BTreeMap::new(),
            peers: BTreeMap::new(),
            sendable: SrptQueue::default(),
            grantable: SrptQueue::default(),
            control: VecDeque::new(),
            events: VecDeque::new(),
            plan_version: 1,
            data_packets: 0,
            rx_data_bytes_tick: 0,
            acked: AckMemory::default(),
            tick: 0,
            peer_sweep_at: config_peer_idle,
            incoming_outstanding: 0,
            rx_buffered: 0,
            tx_buffered: 0,
            client_rpcs: 0,
            metrics: Metrics::default(),
        })
    }

    /// The local address and port.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The receiver's current unscheduled cutoffs and their version.
    pub fn cutoffs(&self) -> (PriorityPlan, u16) {
        (self.plan, self.plan_version)
    }

    /// True when there is no RPC, nothing queued to send and no ack owed:
    /// nothing will happen until a packet or an application call arrives.
    pub fn is_idle(&self) -> bool {
        self.rpcs.is_empty()
            && self.control.is_empty()
            && self.peers.values().all(|p| p.pending_acks.is_empty())
    }

    /// Primes the receiver's record of incoming message sizes with `sizes`
    /// and recomputes its priority allocation from them at once, by the same
    /// rule as the periodic measurement. This is the equivalent of
    /// configuring cutoffs for a known workload (Linux's `unsched_cutoffs`
    /// setting; the thesis' implementation precomputed them too); the
    /// periodic updates continue from this sample afterwards.
    pub fn prime_size_sample(&mut self, sizes: &[u32]) {
        for &s in sizes {
            self.sampler.record(s);
        }
        if !sizes.is_empty() {
            let new = PriorityPlan::from_sizes(
                self.sampler.sizes(),
                incast::unsched_limit(&self.config, u32::MAX, false),
                self.config.num_priorities,
            );
            if new != self.plan {
                self.plan = new;
                self.plan_version = self.plan_version.wrapping_add(1).max(1);
                self.metrics.cutoff_updates += 1;
            }
        }
    }

    /// True while some incoming message still needs grants: the receiver
    /// could use more downlink bandwidth than it is getting. Simulators use
    /// it to measure wasted bandwidth (idle downlink while this is true).
    pub fn has_grantable_incoming(&self) -> bool {
        !self.grantable.is_empty()
    }

    /// Counters and gauges.
    pub fn metrics(&self) -> Metrics {
        let mut m = self.metrics.clone();
        m.active_rpcs = self.rpcs.len() as u64;
        m.active_client_rpcs = self.client_rpcs as u64;
        m.rx_bytes_buffered = self.rx_buffered;
        m.tx_bytes_buffered = self.tx_buffered;
        m.peers = self.peers.len() as u64;
        m.remembered_acks = self.acked.len() as u64;
        m
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Restarts the tick clock when the endpoint leaves idleness, so the
    /// first tick comes one full period after the first RPC.
    fn wake_timer(&mut self, now: Nanos) {
        if self.is_idle() {
            self.next_tick = now + self.config.tick_ns;
        }
    }

    fn peer(&mut self, addr: SocketAddr, now: Nanos) -> &mut Peer {
        let n = self.config.num_priorities;
        let p = self.peers.entry(addr).or_insert_with(|| Peer::new(now, n));
        p.last_active = now;
        p
    }

    // ----------------------------------------------------------------
    // Application API

    /// Starts an RPC: sends `message` as a request to `dest`. The response
    /// comes as [`Event::Response`] (or [`Event::Failed`]).
    pub fn send_request(
        &mut self,
        now: Nanos,
        dest: SocketAddr,
        message: Bytes,
    ) -> Result<RpcId, Error> {
        self.check_length(message.len())?;
        if dest.port() == 0 {
            return Err(Error::BadAddress(dest, "port 0 is reserved"));
        }
        if dest.ip().is_unspecified() {
            return Err(Error::BadAddress(dest, "the unspecified address"));
        }
        self.wake_timer(now);
        let id = RpcId {
            peer: dest,
            id: self.next_id,
        };
        self.next_id = self.next_id.wrapping_add(2).max(2);
        let incast = incast::request_needs_flag(&self.config, self.client_rpcs);
        let len = message.len() as u32;
        let unsched = incast::unsched_limit(&self.config, len, false);
        let np = self.config.num_priorities;
        let prio = unsched_priority(&self.peer(dest, now).cutoffs, len, np);
        let seq = self.next_seq();
        let mut rpc = Rpc::new(State::Client);
        rpc.incast = incast;
        rpc.msgout = Some(OutMessage::new(message, unsched, prio, seq));
        self.rpcs.insert(id, rpc);
        self.client_rpcs += 1;
        self.tx_buffered += len as u64;
        self.metrics.requests_started += 1;
        self.metrics.incast_requests += incast as u64;
        self.update_sendable(id);
        trace!(%id, len, incast, "request started");
        Ok(id)
    }

    /// Answers a request delivered as [`Event::Request`].
    pub fn reply(&mut self, now: Nanos, rpc: RpcId, message: Bytes) -> Result<(), Error> {
        let state = self.rpcs.get(&rpc).ok_or(Error::UnknownRpc(rpc))?.state;
        if state != State::InService {
            return Err(Error::NotAwaitingReply(rpc));
        }
        self.check_length(message.len())?;
        let len = message.len() as u32;
        let np = self.config.num_priorities;
        let prio = unsched_priority(&self.peer(rpc.peer, now).cutoffs, len, np);
        let seq = self.next_seq();
        let config = &self.config;
        let r = self.rpcs.get_mut(&rpc).expect("checked above");
        let unsched = incast::unsched_limit(config, len, r.incast);
        r.msgout = Some(OutMessage::new(message, unsched, prio, seq));
        r.state = State::Responding;
        r.silent_ticks = 0;
        self.tx_buffered += len as u64;
        self.update_sendable(rpc);
        Ok(())
    }

    /// Gives up on an RPC. A client RPC produces no further event; a server
    /// RPC is dropped without a reply and remembered like an acked one, so
    /// the request is not delivered again (the client will time out).
    pub fn abort(&mut self, now: Nanos, rpc: RpcId) -> Result<(), Error> {
        if self.remove_rpc(rpc).is_none() {
            return Err(Error::UnknownRpc(rpc));
        }
        if !rpc.is_client() {
            self.acked.remember(now, self.config.ack_memory_ns, rpc);
        }
        self.metrics.rpcs_aborted += 1;
        self.schedule_grants();
        Ok(())
    }

    fn check_length(&self, len: usize) -> Result<(), Error> {
        if len > self.config.max_message_size as usize {
            Err(Error::MessageTooLong {
                len,
                max: self.config.max_message_size,
            })
        } else {
            Ok(())
        }
    }

    /// A one-line description of RPC `id`'s state, for diagnostics (e.g.
    /// when an application gives up on it): the role, how far each message
    /// got, and whether it is queued to send or to be granted.
    pub fn describe_rpc(&self, id: RpcId) -> Option<String> {
        let rpc = self.rpcs.get(&id)?;
        let mut s = format!("{:?}, silent {} ticks", rpc.state, rpc.silent_ticks);
        if let Some(m) = &rpc.msgout {
            s += &format!(
                "; out {} B: sent {}, granted {}, {} resend ranges, {}",
                m.length,
                m.next_offset,
                m.granted,
                m.resend_ranges(),
                if rpc.sendable.is_some() {
                    "sendable"
                } else {
                    "not sendable"
                }
            );
        }
        if let Some(m) = &rpc.msgin {
            s += &format!(
                "; in {} B: received {}, granted {}, {}",
                m.length,
                m.received,
                m.granted,
                if rpc.grantable.is_some() {
                    "grantable"
                } else {
                    "not grantable"
                }
            );
        }
        if rpc.incast {
            s += "; incast";
        }
        Some(s)
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    // ----------------------------------------------------------------
    // Output

    /// The next packet to send, when the driver's link can take one: control
    /// packets first, then data of the message with the fewest bytes left to
    /// send (with a small share for the oldest message).
    pub fn poll_transmit(&mut self, _now: Nanos) -> Option<Transmit> {
        let t = match self.control.pop_front() {
            Some(t) => t,
            None => self.next_data_packet()?,
        };
        self.metrics.sent.count(t.packet_type, t.len());
        Some(t)
    }

    /// Like [`Self::poll_transmit`], but only a packet of fewer than
    /// `max_len` bytes (Homa header included): a control packet, or data of
    /// the message SRPT would send next when its next packet is that small.
    /// A driver whose pacer is holding back a full-size packet uses this to
    /// let small packets bypass the pacer, as Homa/Linux does; otherwise a
    /// grant or a one-packet message would wait behind the held packet.
    pub fn poll_transmit_small(&mut self, now: Nanos, max_len: usize) -> Option<Transmit> {
        if let Some(t) = self.control.front() {
            return if t.len() < max_len {
                self.poll_transmit(now)
            } else {
                None
            };
        }
        let id = self.sendable.shortest()?;
        let chunk = self
            .rpcs
            .get(&id)
            .and_then(|rpc| rpc.msgout.as_ref())
            .and_then(|m| m.next_chunk_len(self.config.max_payload()))?;
        if DATA_HEADER_LEN + (chunk as usize) >= max_len {
            return None;
        }
        let t = self.data_packet_of(id)?;
        self.metrics.sent.count(t.packet_type, t.len());
        Some(t)
    }

    fn next_data_packet(&mut self) -> Option<Transmit> {
        let fraction = self.config.pacer_fifo_fraction as u64;
        let fifo_turn =
            fraction > 0 && self.data_packets % (1000 / fraction) == 1000 / fraction - 1;
        let id = if fifo_turn {
            self.sendable.oldest()
        } else {
            self.sendable.shortest()
        }?;
        if fifo_turn && self.sendable.shortest() != Some(id) {
            self.metrics.pacer_fifo_packets += 1;
        }
        self.data_packet_of(id)
    }

    /// The next packet of sendable RPC `id`'s outgoing message.
    fn data_packet_of(&mut self, id: RpcId) -> Option<Transmit> {
        self.data_packets += 1;
        let max_payload = self.config.max_payload();
        let rpc = self.rpcs.get_mut(&id).expect("sendable RPC exists");
        let is_client = rpc.state == State::Client;
        let incast = rpc.incast && is_client;
        let m = rpc.msgout.as_mut().expect("sendable RPC has a message");
        let chunk = m
            .next_chunk(max_payload)
            .expect("sendable message has data");
        let (length, incoming) = (m.length, m.incoming());
        let payload = m
            .data
            .slice(chunk.offset as usize..(chunk.offset + chunk.len) as usize);
        let peer = self.peers.get_mut(&id.peer).expect("RPC peer exists");
        let ack = if is_client {
            peer.pending_acks
                .pop_front()
                .map(|client_id| AckEntry {
                    client_id,
                    server_port: id.peer.port(),
                })
                .unwrap_or_default()
        } else {
            AckEntry::default()
        };
        self.metrics.acks_sent += (ack.client_id != 0) as u64;
        let header = DataHeader {
            message_length: length,
            incoming,
            ack,
            cutoff_version: peer.cutoff_version,
            retransmit: chunk.retransmit,
            flags: if incast { DATA_FLAG_INCAST } else { 0 },
            offset: chunk.offset,
        };
        let common = CommonHeader {
            sport: self.local.port(),
            dport: id.peer.port(),
            sender_id: id.id,
        };
        let mut buf = BytesMut::with_capacity(DATA_HEADER_LEN);
        Packet::emit_data_header(&common, &header, &mut buf);
        self.metrics.data_bytes_sent += chunk.len as u64;
        if chunk.retransmit {
            self.metrics.data_bytes_retransmitted += chunk.len as u64;
        }
        self.update_sendable(id);
        Some(Transmit {
            dst: id.peer,
            priority: chunk.priority.min(self.config.top_priority()),
            packet_type: PacketType::Data,
            header: buf.freeze(),
            payload,
        })
    }

    fn queue_control(&mut self, dst: SocketAddr, sender_id: u64, body: Body<'static>) {
        if self.control.len() >= MAX_CONTROL_QUEUE {
            debug!("control queue full; dropping {}", body.packet_type());
            return;
        }
        let packet = Packet {
            common: CommonHeader {
                sport: self.local.port(),
                dport: dst.port(),
                sender_id,
            },
            body,
        };
        self.control.push_back(Transmit {
            dst,
            priority: self.config.top_priority(),
            packet_type: packet.packet_type(),
            header: Bytes::from(packet.to_vec()),
            payload: Bytes::new(),
        });
    }

    /// Re-files an RPC in the sender's SRPT queue after its message changed.
    fn update_sendable(&mut self, id: RpcId) {
        let Some(rpc) = self.rpcs.get_mut(&id) else {
            return;
        };
        let key = rpc
            .msgout
            .as_ref()
            .filter(|m| m.has_sendable())
            .map(|m| (m.bytes_left(), m.seq));
        rpc.sendable = self.sendable.refile(id, rpc.sendable, key);
    }

    /// Re-files an RPC in the receiver's grant queue after its incoming
    /// message changed.
    fn update_grantable(&mut self, id: RpcId) {
        let Some(rpc) = self.rpcs.get_mut(&id) else {
            return;
        };
        let key = rpc
            .msgin
            .as_ref()
            .filter(|m| m.granted < m.length)
            .map(|m| (m.remaining(), m.seq));
        rpc.grantable = self.grantable.refile(id, rpc.grantable, key);
    }

    /// Frees an RPC and everything filed under it.
    fn remove_rpc(&mut self, id: RpcId) -> Option<Rpc> {
        let mut rpc = self.rpcs.remove(&id)?;
        if let Some(k) = rpc.sendable.take() {
            self.sendable.remove(id, k);
        }
        if let Some(k) = rpc.grantable.take() {
            self.grantable.remove(id, k);
        }
        if let Some(m) = &rpc.msgin {
            self.release_msgin(m);
        }
        if let Some(m) = &rpc.msgout {
            self.tx_buffered -= m.length as u64;
        }
        if rpc.state == State::Client {
            self.client_rpcs -= 1;
        }
        Some(rpc)
    }

    fn release_msgin(&mut self, m: &InMessage) {
        self.incoming_outstanding -= m.outstanding() as u64;
        self.rx_buffered -= m.length as u64 + RPC_MEMORY_CHARGE;
    }

    // ----------------------------------------------------------------
    // Input

    /// Processes one received packet from `src` (the sender's IP address;
    /// its port is in the Homa header). Malformed packets are counted and
    /// dropped.
    pub fn handle_packet(&mut self, now: Nanos, src: IpAddr, data: &[u8]) {
        let packet = match Packet::parse(data) {
            Ok(p) => p,
            Err(e) => {
                self.metrics.malformed_dropped += 1;
                debug!(%src, error = %e, "malformed packet dropped");
                return;
            }
        };
        self.metrics
            .received
            .count(packet.packet_type(), data.len());
        if packet.packet_type() == PacketType::Data {
            self.rx_data_bytes_tick += data.len() as u64;
        }
        if packet.common.dport != self.local.port() || packet.common.sport == 0 {
            self.metrics.invalid_dropped += 1;
            debug!(%src, dport = packet.common.dport, "packet for another port dropped");
            return;
        }
        let peer = SocketAddr::new(src, packet.common.sport);
        if let Some(p) = self.peers.get_mut(&peer) {
            p.heard_from(now);
        }
        // The sender's id with the low bit flipped is ours for the RPC.
        let id = RpcId {
            peer,
            id: packet.common.sender_id ^ 1,
        };
        match packet.body {
            Body::Data { header, payload } => self.handle_data(now, id, &header, payload),
            Body::Grant { offset, priority } => self.handle_grant(id, offset, priority),
            Body::Resend {
                offset,
                length,
                priority,
            } => self.handle_resend(id, offset, length, priority),
            Body::RpcUnknown => self.handle_unknown(now, id),
            Body::Busy => match self.rpcs.get_mut(&id) {
                Some(rpc) => rpc.silent_ticks = 0,
                None => self.metrics.unknown_rpc_packets += 1,
            },
            Body::Cutoffs { cutoffs, version } => match self.peers.get_mut(&peer) {
                Some(p) => {
                    p.cutoffs = cutoffs;
                    p.cutoff_version = version;
                }
                None => self.metrics.unknown_rpc_packets += 1,
            },
            Body::Freeze => {}
            Body::NeedAck => self.handle_need_ack(id),
            Body::Ack { acks } => {
                if packet.common.sender_id & 1 == 0 && packet.common.sender_id != 0 {
                    self.handle_ack(now, id);
                }
                for a in acks.as_slice() {
                    if a.client_id != 0 && a.server_port == self.local.port() {
                        self.handle_ack(
                            now,
                            RpcId {
                                peer,
                                id: a.client_id | 1,
                            },
                        );
                    }
                }
            }
        }
    }

    fn handle_data(&mut self, now: Nanos, id: RpcId, h: &DataHeader, payload: &[u8]) {
        if id.is_client() {
            if !self.rpcs.contains_key(&id) {
                self.metrics.unknown_rpc_packets += 1;
                return;
            }
        } else {
            if h.ack.client_id != 0 && h.ack.server_port == self.local.port() {
                self.handle_ack(
                    now,
                    RpcId {
                        peer: id.peer,
                        id: h.ack.client_id | 1,
                    },
                );
            }
            if self.acked.contains(&id) {
                self.metrics.stale_duplicates += 1;
                return;
            }
            if !self.rpcs.contains_key(&id) {
                if h.message_length > self.config.max_message_size {
                    // Refuse it for good: remembered like an acked RPC, it
                    // draws no RPC_UNKNOWN, so the client does not restart
                    // it over and over; it fails when its timers give up.
                    self.metrics.invalid_dropped += 1;
                    self.metrics.oversized_requests += 1;
                    self.acked.remember(now, self.config.ack_memory_ns, id);
                    return;
                }
                self.wake_timer(now);
                self.peer(id.peer, now);
                let mut rpc = Rpc::new(State::Receiving);
                rpc.incast = h.flags & DATA_FLAG_INCAST != 0;
                self.rpcs.insert(id, rpc);
            }
        }
        let (state, has_msgin) = {
            let rpc = &self.rpcs[&id];
            (rpc.state, rpc.msgin.is_some())
        };
        if matches!(state, State::InService | State::Responding) {
            // The request is already complete: a duplicate.
            self.metrics.duplicate_data_bytes += payload.len() as u64;
            return;
        }
        if !has_msgin {
            if h.message_length > self.config.max_message_size {
                // A response we will never accept: fail the RPC now rather
                // than let it time out.
                self.metrics.invalid_dropped += 1;
                let max = self.config.max_message_size;
                self.fail_client_rpc(
                    id,
                    RpcError::ResponseTooLong {
                        len: h.message_length,
                        max,
                    },
                );
                return;
            }
            let charge = h.message_length as u64 + RPC_MEMORY_CHARGE;
            if self.rx_buffered + charge > self.config.rx_buffer_limit {
                self.metrics.rx_buffer_drops += 1;
                if state == State::Receiving {
                    self.remove_rpc(id);
                }
                return;
            }
            self.rx_buffered += charge;
            self.sampler.record(h.message_length);
            let seq = self.next_seq();
            let rpc = self.rpcs.get_mut(&id).expect("present");
            rpc.msgin = Some(InMessage::new(h.message_length, seq));
            if state == State::Client {
                // The server has the whole request: stop sending it.
                if let Some(m) = rpc.msgout.as_mut() {
                    m.finish();
                }
            }
        }
        let rpc = self.rpcs.get_mut(&id).expect("present");
        let m = rpc.msgin.as_mut().expect("created above");
        if m.length != h.message_length {
            self.metrics.invalid_dropped += 1;
            return;
        }
        rpc.silent_ticks = 0;
        let before = m.outstanding();
        m.granted = m.granted.max(h.incoming.min(m.length));
        let added = m.add(h.offset, payload);
        let after = m.outstanding();
        let complete = m.is_complete();
        self.incoming_outstanding = self.incoming_outstanding + after as u64 - before as u64;
        self.metrics.duplicate_data_bytes += added.duplicate as u64;
        self.fifo.record_received(added.new);
        self.maybe_send_cutoffs(id, h.cutoff_version);
        if complete {
            self.complete_msgin(now, id);
        } else {
            self.update_sendable(id);
            self.update_grantable(id);
        }
        self.schedule_grants();
    }

    fn maybe_send_cutoffs(&mut self, id: RpcId, their_version: u16) {
        if their_version == self.plan_version {
            return;
        }
        let tick = self.tick;
        let Some(p) = self.peers.get_mut(&id.peer) else {
            return;
        };
        if p.cutoffs_sent_tick == Some(tick) {
            return;
        }
        p.cutoffs_sent_tick = Some(tick);
        self.metrics.cutoffs_sent += 1;
        let body = Body::Cutoffs {
            cutoffs: self.plan.cutoffs,
            version: self.plan_version,
        };
        self.queue_control(id.peer, id.id, body);
    }

    /// A whole message arrived: hand it to the application.
    fn complete_msgin(&mut self, now: Nanos, id: RpcId) {
        let rpc = self.rpcs.get_mut(&id).expect("present");
        let m = rpc.msgin.take().expect("complete message");
        if let Some(k) = rpc.grantable.take() {
            self.grantable.remove(id, k);
        }
        let state = rpc.state;
        self.release_msgin(&m);
        let message = m.into_bytes();
        if state == State::Client {
            self.remove_rpc(id);
            self.metrics.responses_delivered += 1;
            self.events.push_back(Event::Response { rpc: id, message });
            self.queue_ack(now, id);
        } else {
            let rpc = self.rpcs.get_mut(&id).expect("present");
            rpc.state = State::InService;
            rpc.silent_ticks = 0;
            self.metrics.requests_delivered += 1;
            self.events.push_back(Event::Request { rpc: id, message });
        }
    }

    /// Owes the server an ack for a finished client RPC; a full batch goes
    /// out at once, smaller ones ride on requests, or go in an ACK packet
    /// once they have waited a whole tick.
    fn queue_ack(&mut self, now: Nanos, id: RpcId) {
        let tick = self.tick;
        let p = self.peer(id.peer, now);
        if p.pending_acks.is_empty() {
            p.acks_pending_since = tick;
        }
        p.pending_acks.push_back(id.id);
        if p.pending_acks.len() >= MAX_ACKS {
            self.flush_acks(id.peer, 0);
        }
    }

    /// Sends every ack owed to `peer` in ACK packets; `header_id` goes in
    /// the common header (an RPC being acked, or 0).
    fn flush_acks(&mut self, peer: SocketAddr, header_id: u64) {
        let Some(p) = self.peers.get_mut(&peer) else {
            return;
        };
        let mut batches = Vec::new();
        while !p.pending_acks.is_empty() || (batches.is_empty() && header_id != 0) {
            let mut acks = AckList::new();
            while !acks.is_full() {
                let Some(client_id) = p.pending_acks.pop_front() else {
                    break;
                };
                let _ = acks.push(AckEntry {
                    client_id,
                    server_port: peer.port(),
                });
            }
            batches.push(acks);
        }
        for acks in batches {
            self.metrics.acks_sent += acks.len() as u64;
            self.queue_control(peer, header_id, Body::Ack { acks });
        }
    }

    fn fail_client_rpc(&mut self, id: RpcId, error: RpcError) {
        if self.remove_rpc(id).is_some() {
            self.metrics.rpcs_failed += 1;
            self.events.push_back(Event::Failed { rpc: id, error });
        }
    }

    fn handle_grant(&mut self, id: RpcId, offset: u32, priority: u8) {
        let Some(rpc) = self.rpcs.get_mut(&id) else {
            self.metrics.unknown_rpc_packets += 1;
            return;
        };
        if let Some(m) = rpc.msgout.as_mut() {
            rpc.silent_ticks = 0;
            m.grant(offset, priority);
            self.update_sendable(id);
        }
    }

    fn handle_resend(&mut self, id: RpcId, offset: u32, length: u32, priority: u8) {
        let Some(rpc) = self.rpcs.get_mut(&id) else {
            self.metrics.unknown_rpc_packets += 1;
            if !self.acked.contains(&id) {
                self.queue_control(id.peer, id.id, Body::RpcUnknown);
            }
            return;
        };
        let resent = match rpc.msgout.as_mut() {
            // A client whose response has started: the request is complete.
            Some(_) if rpc.state == State::Client && rpc.msgin.is_some() => false,
            Some(m) => {
                let length = if length == RESEND_ALL {
                    m.next_offset.saturating_sub(offset)
                } else {
                    length
                };
                (length > 0 || m.length == 0) && m.resend(offset, length, priority)
            }
            None => false,
        };
        // The RESEND may also have granted bytes never sent: re-file first.
        self.update_sendable(id);
        if !resent {
            self.metrics.busy_replies += 1;
            self.queue_control(id.peer, id.id, Body::Busy);
        }
    }

    fn handle_unknown(&mut self, now: Nanos, id: RpcId) {
        let Some(rpc) = self.rpcs.get_mut(&id) else {
            self.metrics.unknown_rpc_packets += 1;
            return;
        };
        if rpc.state == State::Client {
            // The server has no trace of the request: send it again.
            rpc.silent_ticks = 0;
            let old = rpc.msgin.take();
            if let Some(m) = rpc.msgout.as_mut() {
                m.restart();
            }
            if let Some(m) = old {
                self.release_msgin(&m);
                self.update_grantable(id);
            }
            self.metrics.restarts += 1;
            debug!(%id, "server does not know the RPC; restarting it");
            self.update_sendable(id);
        } else {
            // The client has finished or abandoned it.
            let finished = rpc.state == State::Responding;
            self.remove_rpc(id);
            self.acked.remember(now, self.config.ack_memory_ns, id);
            if !finished {
                self.metrics.server_rpcs_discarded += 1;
            }
            self.schedule_grants();
        }
    }

    fn handle_need_ack(&mut self, id: RpcId) {
        if !id.is_client() {
            self.metrics.invalid_dropped += 1;
            return;
        }
        if self.rpcs.contains_key(&id) {
            // We still wait for (part of) the response; our own timer asks
            // for it.
            return;
        }
        if let Some(p) = self.peers.get_mut(&id.peer) {
            p.pending_acks.retain(|&c| c != id.id);
        }
        self.metrics.acks_sent += 1;
        if self.peers.contains_key(&id.peer) {
            self.flush_acks(id.peer, id.id);
        } else {
            self.queue_control(
                id.peer,
                id.id,
                Body::Ack {
                    acks: AckList::new(),
                },
            );
        }
    }

    fn handle_ack(&mut self, now: Nanos, id: RpcId) {
        let Some(rpc) = self.rpcs.get(&id) else {
            return;
        };
        if rpc.state != State::Responding {
            return;
        }
        self.remove_rpc(id);
        self.acked.remember(now, self.config.ack_memory_ns, id);
        self.metrics.acks_received += 1;
    }

    // ----------------------------------------------------------------
    // Grants

    /// Grants to the incoming messages that deserve it now.
    fn schedule_grants(&mut self) {
        if self.grantable.is_empty() {
            return;
        }
        let params = GrantParams {
            max_overcommit: self.config.max_overcommit,
            grant_window: self.config.grant_window,
            max_incoming: self.config.max_incoming,
            grant_increment: self.config.grant_increment,
            packet_payload: self.config.max_payload(),
            sched_levels: self.plan.sched_levels,
        };
        let rpcs = &self.rpcs;
        let candidates = self.grantable.iter().map(|id| {
            let m = rpcs[&id].msgin.as_ref().expect("grantable has msgin");
            Candidate {
                key: id,
                peer: id.peer,
                length: m.length,
                received: m.received,
                granted: m.granted,
            }
        });
        let grants = grant::plan(candidates, &params, self.incoming_outstanding);
        for g in grants {
            self.apply_grant(g.key, g.offset, g.priority);
            self.metrics.grants_srpt += 1;
        }
        while let Some(bytes) = self.fifo.take_due() {
            // Top the oldest message up to `bytes` beyond what has arrived;
            // never stack grants on a sender that has not used the last
            // ones. (Adding `bytes` to the previous grant each turn piled up
            // granted-but-unreceived bytes on a busy sender until they held
            // all of max_incoming, freezing every other message's grants —
            // found in the simulator: mid-size W6 messages at p99 24–42×.)
            // A message whose sender still owes it that much is skipped for
            // the next oldest: giving the turn up instead left the younger
            // long messages without grants for seconds (testbed, w3).
            let rpcs = &self.rpcs;
            let pick = self.grantable.iter_by_age().find_map(|id| {
                let m = rpcs[&id].msgin.as_ref().expect("grantable has msgin");
                let offset = m.received.saturating_add(bytes).min(m.length);
                (offset > m.granted).then_some((id, offset))
            });
            let Some((id, offset)) = pick else {
                break;
            };
            let top_sched = self.plan.sched_levels.saturating_sub(1);
            self.apply_grant(id, offset, top_sched);
            self.metrics.grants_fifo += 1;
        }
    }

    /// Raises an incoming message's grant and sends the GRANT; returns the
    /// bytes added.
    fn apply_grant(&mut self, id: RpcId, offset: u32, priority: u8) -> u32 {
        let rpc = self.rpcs.get_mut(&id).expect("granted RPC exists");
        let m = rpc.msgin.as_mut().expect("granted RPC has msgin");
        let before = m.outstanding();
        let added = offset.saturating_sub(m.granted);
        m.granted = m.granted.max(offset);
        m.priority = priority;
        let after = m.outstanding();
        self.incoming_outstanding = self.incoming_outstanding + after as u64 - before as u64;
        self.update_grantable(id);
        self.queue_control(id.peer, id.id, Body::Grant { offset, priority });
        added
    }

    // ----------------------------------------------------------------
    // Timers

    /// When [`Endpoint::handle_timeout`] should next run, if ever.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        if !self.is_idle() {
            Some(self.next_tick)
        } else {
            let sweep = (!self.peers.is_empty()).then_some(self.peer_sweep_at);
            [self.acked.next_expiry(), sweep]
                .into_iter()
                .flatten()
                .min()
        }
    }

    /// Runs the timer: loss detection, RESENDs, dead peers, NEED_ACK, ack
    /// flushing, cutoff updates and cleanup. Call at or after
    /// [`Endpoint::poll_timeout`]; calling early is harmless.
    pub fn handle_timeout(&mut self, now: Nanos) {
        self.acked.expire(now);
        if now >= self.peer_sweep_at {
            self.forget_idle_peers(now);
            self.peer_sweep_at = now + (self.config.peer_idle_ns / 4).max(self.config.tick_ns);
        }
        if now < self.next_tick {
            return;
        }
        // One tick per call; a late driver does not cause a burst.
        self.next_tick = if now >= self.next_tick + self.config.tick_ns {
            now + self.config.tick_ns
        } else {
            self.next_tick + self.config.tick_ns
        };
        self.tick += 1;
        if now >= self.next_cutoff_update {
            self.next_cutoff_update = now + self.config.cutoff_update_interval_ns;
            self.update_cutoffs();
        }
        // A downlink that carried at least 3/4 of its capacity in DATA over
        // the last tick was busy: bytes we granted may be queued behind that
        // traffic at a lower level rather than lost.
        let capacity = self.config.link_mbps * self.config.tick_ns / 8_000;
        let downlink_busy = capacity > 0 && self.rx_data_bytes_tick * 4 >= capacity * 3;
        self.rx_data_bytes_tick = 0;
        self.check_rpcs(now, downlink_busy);
        // Acks owed for less than a full tick are left to ride on the next
        // request to that server: flushing every peer's acks on every tick
        // sends a burst of one ACK per peer that delays the host's short
        // messages (found in the simulator at 144 hosts).
        let tick = self.tick;
        let owed: Vec<SocketAddr> = self
            .peers
            .iter()
            .filter(|(_, p)| !p.pending_acks.is_empty() && tick >= p.acks_pending_since + 2)
            .map(|(a, _)| *a)
            .collect();
        for peer in owed {
            self.flush_acks(peer, 0);
        }
    }

    fn update_cutoffs(&mut self) {
        if self.sampler.sizes().len() < self.config.cutoff_min_samples as usize {
            return;
        }
        let new = PriorityPlan::from_sizes(
            self.sampler.sizes(),
            incast::unsched_limit(&self.config, u32::MAX, false),
            self.config.num_priorities,
        );
        if new.differs_significantly(&self.plan) {
            self.plan = new;
            self.plan_version = self.plan_version.wrapping_add(1).max(1);
            self.metrics.cutoff_updates += 1;
            debug!(cutoffs = ?new.cutoffs, sched_levels = new.sched_levels, "new unscheduled cutoffs");
        }
    }

    /// Counts silent ticks, and for each peer with RPCs waiting on it past
    /// their limit sends one RESEND (rotating over its RPCs) and any
    /// NEED_ACKs, at most once per `resend_interval`; a peer that has left
    /// `timeout_resends` of these unanswered is declared dead.
    ///
    /// A tick in which the downlink was busy (`downlink_busy`) does not
    /// count as silent for an incoming message that waits for bytes we have
    /// granted: they are most likely queued in the ToR behind the
    /// higher-priority traffic that kept the link busy. (The lowest-ranked
    /// granted message's packets can wait there for many milliseconds; a
    /// RESEND then had them retransmitted at the top level, ahead of short
    /// messages, every 5 ms while the originals still waited: found in the
    /// simulator, w5 at 80% load, with no packet lost.) Real losses are
    /// found in the next ticks that are not busy.
    fn check_rpcs(&mut self, now: Nanos, downlink_busy: bool) {
        let cfg = self.config.clone();
        // Per peer: RPCs due for a RESEND or probe, and RPCs due for NEED_ACK.
        let mut due: BTreeMap<SocketAddr, DuePerPeer> = BTreeMap::new();
        for (&id, rpc) in self.rpcs.iter_mut() {
            let Some(wait) = rpc.wait() else {
                rpc.silent_ticks = 0;
                continue;
            };
            if downlink_busy && rpc.msgin.as_ref().is_some_and(|m| m.outstanding() > 0) {
                continue;
            }
            rpc.silent_ticks += 1;
            let limit = if wait == Wait::Ack {
                cfg.need_ack_ticks
            } else {
                cfg.resend_ticks
            };
            if rpc.silent_ticks < limit {
                continue;
            }
            let entry = due.entry(id.peer).or_default();
            if wait == Wait::Ack {
                entry.1.push(id);
            } else {
                entry.0.push((id, wait));
            }
        }
        let tick = self.tick;
        for (peer, (resends, need_acks)) in due {
            let p = self
                .peers
                .get_mut(&peer)
                .expect("every RPC's peer has state");
            if p.last_resend_tick
                .is_some_and(|t| tick - t < cfg.resend_interval as u64)
            {
                continue;
            }
            if p.outstanding_resends >= cfg.timeout_resends {
                self.peer_dead(now, peer);
                continue;
            }
            p.outstanding_resends += 1;
            p.last_resend_tick = Some(tick);
            // Missing data first; probes only when nothing is missing.
            let missing: Vec<(RpcId, Wait)> = resends
                .iter()
                .copied()
                .filter(|(_, w)| matches!(w, Wait::Data { .. }))
                .collect();
            let pool = if missing.is_empty() {
                &resends
            } else {
                &missing
            };
            if !pool.is_empty() {
                // Rotate: the first due RPC after the one resent last time.
                let i = pool
                    .iter()
                    .position(|(id, _)| id.id > p.resend_cursor)
                    .unwrap_or(0);
                let (id, wait) = pool[i];
                p.resend_cursor = id.id;
                self.metrics.timeouts += 1;
                self.metrics.resends_requested += 1;
                let (offset, length) = match wait {
                    Wait::Data { offset, length } => (offset, length),
                    _ => (0, 0), // probe: "do you still have this RPC?"
                };
                let priority = self.config.top_priority();
                trace!(%id, offset, length, "RESEND");
                self.queue_control(
                    peer,
                    id.id,
                    Body::Resend {
                        offset,
                        length,
                        priority,
                    },
                );
            }
            for id in need_acks {
                self.queue_control(peer, id.id, Body::NeedAck);
            }
        }
    }

    /// Fails every RPC with a peer that stopped answering.
    fn peer_dead(&mut self, now: Nanos, peer: SocketAddr) {
        self.metrics.peers_dead += 1;
        debug!(%peer, "peer declared dead");
        // (Rare: a scan is fine.)
        let ids: Vec<RpcId> = self
            .rpcs
            .keys()
            .filter(|id| id.peer == peer)
            .copied()
            .collect();
        for id in ids {
            if id.is_client() {
                self.fail_client_rpc(id, RpcError::PeerDead);
            } else if let Some(rpc) = self.remove_rpc(id) {
                self.metrics.server_rpcs_discarded += 1;
                if matches!(rpc.state, State::InService | State::Responding) {
                    // The application has seen this request. If the client
                    // was alive after all and restarts it, the restart must
                    // not run it a second time.
                    self.acked.remember(now, self.config.ack_memory_ns, id);
                }
            }
        }
        if let Some(p) = self.peers.get_mut(&peer) {
            p.outstanding_resends = 0;
            p.last_resend_tick = None;
        }
        self.schedule_grants();
    }

    fn forget_idle_peers(&mut self, now: Nanos) {
        let idle = self.config.peer_idle_ns;
        let busy: std::collections::BTreeSet<SocketAddr> =
            self.rpcs.keys().map(|id| id.peer).collect();
        self.peers.retain(|addr, p| {
            busy.contains(addr)
                || !p.pending_acks.is_empty()
                || now.saturating_sub(p.last_active) < idle
        });
    }
}

#[cfg(test)]
mod tests;
