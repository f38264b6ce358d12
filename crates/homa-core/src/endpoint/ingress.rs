//! Where received packets enter the core: the driver's entry points (a
//! packet as one buffer, as shared bytes, or as header and payload), what a
//! driver knows beyond the bytes ([`PacketMeta`]), and load shedding while
//! the driver is backlogged. Parsing happens here; the checks against what
//! this endpoint sent or granted are in `input.rs`.

use super::Endpoint;
use crate::event::RpcId;
use crate::Nanos;
use bytes::Bytes;
use homa_wire::{Body, Packet};
use std::net::{IpAddr, SocketAddr};
use tracing::debug;

/// What the driver knows of a received packet beyond its bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PacketMeta {
    /// The IP header carried ECN "congestion experienced" (CE).
    pub ce: bool,
    /// The driver has more packets waiting than it could take in one go
    /// (its socket did not drain); see [`Endpoint::handle_packet_backlogged`].
    pub backlogged: bool,
}

impl Endpoint {
    /// Processes one received packet from `src` (the sender's IP address;
    /// its port is in the Homa header). DATA bytes are copied out of `data`.
    /// Malformed and invalid packets are counted and dropped.
    pub fn handle_packet(&mut self, now: Nanos, src: IpAddr, data: &[u8]) {
        self.handle_packet_meta(now, src, data, PacketMeta::default());
    }

    /// Like [`Endpoint::handle_packet`], for a driver that has more packets
    /// waiting than it could take in one go (its socket did not drain). A
    /// first packet of a new request from a peer that has never shown it
    /// hears us is then admitted only within
    /// `Config::backlog_unproven_per_tick`; beyond it, it is dropped after
    /// a look at its header (counted), so a flood of spoofed first packets
    /// costs little more than reading it, and the packets of known peers
    /// and RPCs among it keep their service. (Such a request's client
    /// restarts it when it probes and hears RPC_UNKNOWN.)
    pub fn handle_packet_backlogged(&mut self, now: Nanos, src: IpAddr, data: &[u8]) {
        let meta = PacketMeta {
            backlogged: true,
            ..PacketMeta::default()
        };
        self.handle_packet_meta(now, src, data, meta);
    }

    /// [`Endpoint::handle_packet`] with what the driver knows of the packet
    /// (ECN mark, backlog).
    pub fn handle_packet_meta(&mut self, now: Nanos, src: IpAddr, data: &[u8], meta: PacketMeta) {
        if meta.backlogged && self.shed_unproven_start(now, src, data) {
            self.metrics.shed_unproven_requests += 1;
            return;
        }
        match Packet::parse(data) {
            Ok(p) => {
                let payload = match &p.body {
                    Body::Data { payload, .. } => Bytes::copy_from_slice(payload),
                    _ => Bytes::new(),
                };
                self.dispatch(now, src, p, payload, data.len(), meta);
            }
            Err(e) => self.malformed(src, &e),
        }
    }

    /// True if `data` is the start of a new request from an unproven peer
    /// and this tick's admissions for such are used up (else counts it).
    fn shed_unproven_start(&mut self, now: Nanos, src: IpAddr, data: &[u8]) -> bool {
        let Some(c) = homa_wire::CommonHeader::peek_data(data) else {
            return false;
        };
        if c.sender_id & 1 != 0 || c.dport != self.local.port() {
            return false;
        }
        let peer = SocketAddr::new(src, c.sport);
        let id = RpcId {
            peer,
            id: c.sender_id ^ 1,
        };
        if self.rpcs.contains_key(&id) || self.peers.get(&peer).is_some_and(|p| p.proven) {
            return false;
        }
        let tick = self.tick(now);
        let (t, n) = &mut self.receiver.unproven_admitted;
        if *t != tick {
            (*t, *n) = (tick, 0);
        }
        if *n >= self.config.backlog_unproven_per_tick {
            return true;
        }
        *n += 1;
        false
    }

    /// Like [`Endpoint::handle_packet`], but DATA bytes are kept as slices
    /// of `data` (no copy) until the message is delivered.
    pub fn handle_packet_bytes(&mut self, now: Nanos, src: IpAddr, data: Bytes) {
        self.handle_packet_bytes_meta(now, src, data, PacketMeta::default());
    }

    /// [`Endpoint::handle_packet_bytes`] with what the driver knows of the
    /// packet (ECN mark, backlog), as [`Endpoint::handle_packet_meta`]. A
    /// driver that owns its receive buffer uses this to keep a large
    /// packet's payload without a copy; it should copy small packets
    /// instead (a slice keeps its whole buffer alive, and receive memory is
    /// counted in payload bytes).
    pub fn handle_packet_bytes_meta(
        &mut self,
        now: Nanos,
        src: IpAddr,
        data: Bytes,
        meta: PacketMeta,
    ) {
        if meta.backlogged && self.shed_unproven_start(now, src, &data) {
            self.metrics.shed_unproven_requests += 1;
            return;
        }
        match Packet::parse(&data) {
            Ok(p) => {
                let payload = match &p.body {
                    Body::Data { payload, .. } if !payload.is_empty() => data.slice_ref(payload),
                    _ => Bytes::new(),
                };
                self.dispatch(now, src, p, payload, data.len(), meta);
            }
            Err(e) => self.malformed(src, &e),
        }
    }

    /// Like [`Endpoint::handle_packet_bytes`] for a packet that comes as a
    /// Homa header and, for DATA, the message bytes separately (as a
    /// [`super::Transmit`] carries it): `header` holds the whole header,
    /// `payload` the bytes after it.
    pub fn handle_packet_parts(&mut self, now: Nanos, src: IpAddr, header: &[u8], payload: Bytes) {
        self.handle_packet_parts_meta(now, src, header, payload, PacketMeta::default());
    }

    /// [`Endpoint::handle_packet_parts`] with what the driver knows of the
    /// packet (the simulator's ECN marks).
    pub fn handle_packet_parts_meta(
        &mut self,
        now: Nanos,
        src: IpAddr,
        header: &[u8],
        payload: Bytes,
        meta: PacketMeta,
    ) {
        match Packet::parse(header) {
            Ok(p) => {
                let payload = match &p.body {
                    Body::Data {
                        payload: inline, ..
                    } if payload.is_empty() => Bytes::copy_from_slice(inline),
                    Body::Data { payload: &[], .. } => payload,
                    _ if payload.is_empty() => Bytes::new(),
                    _ => {
                        self.metrics.malformed_dropped += 1;
                        return;
                    }
                };
                let len = header.len() + payload.len();
                self.dispatch(now, src, p, payload, len, meta);
            }
            Err(e) => self.malformed(src, &e),
        }
    }

    fn malformed(&mut self, src: IpAddr, e: &homa_wire::WireError) {
        self.metrics.malformed_dropped += 1;
        debug!(%src, error = %e, "malformed packet dropped");
    }
}
