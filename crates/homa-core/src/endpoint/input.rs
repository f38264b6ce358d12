//! Received packets. Every header field is a claim checked against what
//! this endpoint sent or granted; a packet that fails a check is counted
//! and dropped, and a refused packet leaves no state behind.

use super::{Endpoint, PacketMeta};
use crate::config::RPC_MEMORY_CHARGE;
use crate::event::{Event, RpcError, RpcId};
use crate::incoming::Refused;
use crate::outgoing::ResendOutcome;
use crate::policy::DataSignal;
use crate::rpc::{Phase, Rpc};
use crate::timers::Timer;
use crate::Design;
use crate::Nanos;
use bytes::Bytes;
use homa_wire::{
    AckEntry, AckList, Body, DataHeader, Packet, DATA_FLAG_CSN, DATA_FLAG_INCAST, DATA_FLAG_SIRD,
    DATA_FLAG_STREAM, MAX_ACKS, RESEND_ALL,
};
use std::net::{IpAddr, SocketAddr};
use tracing::{debug, trace};

impl Endpoint {
    pub(super) fn dispatch(
        &mut self,
        now: Nanos,
        src: IpAddr,
        packet: Packet<'_>,
        payload: Bytes,
        len: usize,
        meta: PacketMeta,
    ) {
        debug_assert!(self.sweep_filed_if_idle());
        self.metrics.received.count(packet.packet_type(), len);
        if matches!(packet.body, Body::Data { .. }) {
            let tick = self.tick(now);
            self.receiver.count_data(tick, len);
        }
        if packet.common.dport != self.local.port() || packet.common.sport == 0 {
            self.metrics.invalid_dropped += 1;
            debug!(%src, dport = packet.common.dport, "packet for another port dropped");
            return;
        }
        self.acked.expire(now);
        let peer = SocketAddr::new(src, packet.common.sport);
        // The sender's id with the low bit flipped is ours for the RPC.
        let id = RpcId {
            peer,
            id: packet.common.sender_id ^ 1,
        };
        // A second packet for an RPC we already have shows a peer that goes
        // on with what it started, unlike the spoofed source of a first
        // packet (see `Peer::proven`).
        let known = self.rpcs.contains_key(&id);
        if let Some(p) = self.peers.get_mut(&peer) {
            p.last_heard = now;
            p.unreachable_since = None;
            p.proven |= known;
        }
        let top = self.config.top_priority();
        match packet.body {
            Body::Data { header, .. } => self.handle_data(now, id, &header, payload, meta, known),
            Body::Grant { offset, priority } => {
                self.handle_grant(now, id, offset, priority.min(top))
            }
            Body::Resend {
                offset,
                length,
                priority,
            } => self.handle_resend(now, id, offset, length, priority.min(top)),
            Body::RpcUnknown => self.handle_unknown(now, id),
            Body::Busy => match self.rpcs.get_mut(&id) {
                Some(rpc) => rpc.heard_unless_acking(now),
                None => self.metrics.unknown_rpc_packets += 1,
            },
            Body::Cutoffs { cutoffs, version } => match self.peers.get_mut(&peer) {
                Some(p) => {
                    p.proven = true;
                    p.cutoffs = cutoffs;
                    p.cutoff_version = version;
                }
                None => self.metrics.unknown_rpc_packets += 1,
            },
            Body::Freeze => {}
            Body::Mismatch => self.handle_mismatch(now, id),
            Body::RttProbe(info) => self.handle_rtt_probe(now, peer, &info),
            Body::RttResps(info) => self.handle_rtt_resps(now, peer, &info),
            Body::Stream(c) => self.handle_stream_ctl(now, id, c),
            Body::NeedAck => self.handle_need_ack(now, id),
            Body::Ack { acks } => {
                if packet.common.sender_id & 1 == 0 && packet.common.sender_id != 0 {
                    self.handle_ack(now, id);
                }
                for a in acks.as_slice() {
                    self.handle_piggybacked_ack(now, peer, a);
                }
            }
        }
    }

    fn handle_piggybacked_ack(&mut self, now: Nanos, peer: SocketAddr, a: &AckEntry) {
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

    /// A DATA packet for RPC `id`; `known`: whether `id` was live when the
    /// packet came (`dispatch` looked).
    fn handle_data(
        &mut self,
        now: Nanos,
        id: RpcId,
        h: &DataHeader,
        payload: Bytes,
        meta: PacketMeta,
        known: bool,
    ) {
        if h.offset as u64 + payload.len() as u64 > h.message_length as u64 {
            self.metrics.invalid_dropped += 1;
            return;
        }
        let sird = h.flags & DATA_FLAG_SIRD != 0;
        if sird != (self.config.design == Design::Sird) {
            // The sender runs the other design: neither can schedule the
            // other's messages. Say so (one small packet per packet, like
            // RPC_UNKNOWN) and keep nothing.
            self.metrics.design_mismatches += 1;
            self.queue_control(id, Body::Mismatch);
            return;
        }
        // Whether the message started with this packet: its grant is then
        // the initial one already.
        let mut fresh = false;
        if h.flags & DATA_FLAG_STREAM != 0 {
            if !self.stream_data_admit(now, id, h) {
                return;
            }
        } else if id.is_client() {
            if !self.rpcs.get(&id).is_some_and(Rpc::is_client) {
                self.metrics.unknown_rpc_packets += 1;
                return;
            }
        } else {
            let mut owed = self.handle_request_ack(now, id.peer, &h.ack);
            let admitted = self.admit_request_data(now, id, h, payload.len(), known, &mut owed);
            // (A new request leaves its peer busy and filed so:
            // `accept_request` refreshes it if needed.)
            if owed && admitted != Some(true) {
                self.refresh_owed(now, id.peer);
            }
            match admitted {
                Some(new) => fresh = new,
                None => return,
            }
        }
        if !self.has_response_started(&id) {
            if !self.start_response(now, id, h) {
                return;
            }
            fresh = true;
        }
        if self.receiver.buffered + payload.len() as u64 > self.config.rx_buffer_limit {
            self.metrics.rx_buffer_drops += 1;
            return;
        }
        let rpc = self.rpcs.get_mut(&id).expect("present");
        if rpc.phase.msgin().expect("present").length != h.message_length {
            self.metrics.invalid_dropped += 1;
            return;
        }
        rpc.heard(now);
        let m = rpc.phase.msgin_mut().expect("present");
        let before = m.outstanding();
        if !fresh {
            // (A message that started with this packet was admitted with
            // exactly this grant: `Receiver::admit`.)
            m.granted = m
                .granted
                .max(self.receiver.initial_grant(m.length, h.incoming, h.flags));
        }
        // A packet that starts below our grant and ends past it is taken
        // whole: a Linux sender transmits every packet that starts below its
        // grant (homa_xmit_data), on a packet grid that restarts at its
        // unscheduled limit, so our grant offsets usually fall inside one of
        // its packets. Dropping it would leave a gap to RESEND at every
        // grant. At most one packet past each grant, within the message.
        let end = h.offset as u64 + payload.len() as u64;
        if (h.offset < m.granted)
            && end > m.granted as u64
            && payload.len() <= self.config.max_payload() as usize
        {
            m.granted = end as u32;
            self.metrics.data_straddling_grant += 1;
        }
        let result = m.add(h.offset, payload);
        let after = m.outstanding();
        let complete = m.is_complete();
        self.receiver.outstanding = self.receiver.outstanding + after as u64 - before as u64;
        let added = match result {
            Ok(a) => a,
            Err(Refused::BeyondGrant) => {
                self.metrics.data_beyond_grant += 1;
                self.after_change(now, id);
                return;
            }
            Err(Refused::TooFragmented) => {
                self.metrics.fragmented_dropped += 1;
                return;
            }
        };
        self.receiver.buffered += added.new as u64;
        self.metrics.duplicate_data_bytes += added.duplicate as u64;
        // Nothing is sent in answer to a packet from a peer that has not
        // shown it hears us (a spoofed first packet must not buy a RESEND or
        // a CUTOFFS: under a flood they cost as much as the flood itself);
        // the peer's second packet proves it, and from then on both flow.
        // A complete request is answered anyway, so its CUTOFFS rides along.
        let proven = id.is_client() || self.peers.get(&id.peer).is_some_and(|p| p.proven);
        if proven && self.config.fast_resend_packets > 0 && !complete && added.new > 0 {
            self.fast_resend(id);
        }
        self.receiver.policy.on_data(
            now,
            &DataSignal {
                id,
                bytes: added.new + added.duplicate,
                new_bytes: added.new,
                csn: h.flags & DATA_FLAG_CSN != 0,
                ce: meta.ce,
            },
        );
        if (proven || complete) && self.config.design == Design::Homa {
            self.maybe_send_cutoffs(now, id, h.cutoff_version);
        }
        if complete {
            self.complete_msgin(now, id);
        } else {
            self.after_change(now, id);
        }
        self.schedule_grants(now);
    }

    /// The ack a request's DATA carries (server side). It usually ends the
    /// peer's last RPC and the request makes the peer busy again: its
    /// refresh (idle for a moment, an entry pushed on the idle list and
    /// popped) is then left to the caller when that changes nothing
    /// ([`Endpoint::ack_refresh_suffices`]: the sweep is filed and the push
    /// would not compact). Returns true if it was left: the caller then
    /// calls [`Endpoint::refresh_owed`] before anything that looks at the
    /// peer table's idle list or pushes to it, with the same `now`.
    fn handle_request_ack(&mut self, now: Nanos, peer: SocketAddr, a: &AckEntry) -> bool {
        if a.client_id == 0 || a.server_port != self.local.port() {
            return false;
        }
        let id = RpcId {
            peer,
            id: a.client_id | 1,
        };
        let leave = self.ack_refresh_suffices();
        self.handle_ack_refresh(now, id, !leave) && leave
    }

    /// Files `peer` as idle or busy if it changed since it was last filed
    /// (the refresh [`Endpoint::handle_request_ack`] left).
    fn refresh_owed(&mut self, now: Nanos, peer: SocketAddr) {
        if self.peers.get(&peer).is_some_and(|p| p.needs_refresh()) {
            self.refresh_peer(now, peer);
        }
    }

    /// Whether a request's DATA goes on to reassembly (server side):
    /// `Some(true)` if it started a new request, `Some(false)` for one
    /// under way, `None` if dropped (a stale duplicate of an acked RPC, a
    /// duplicate of a complete request, a refused new one). `known`:
    /// whether `id` was live when the packet came; `owed`: see
    /// [`Endpoint::handle_request_ack`].
    fn admit_request_data(
        &mut self,
        now: Nanos,
        id: RpcId,
        h: &DataHeader,
        first: usize,
        known: bool,
        owed: &mut bool,
    ) -> Option<bool> {
        if self.acked.contains(&id) {
            self.metrics.stale_duplicates += 1;
            return None;
        }
        // An id that was not live is not live now: the ack handled since
        // only ends RPCs. (A lookup less for every new request, a miss of
        // the table's remembered lookup since the ack's RPC was looked up
        // in between: a hash lookup.)
        let rpc = if known { self.rpcs.get(&id) } else { None };
        match rpc {
            None => self.accept_request(now, id, h, first, owed).then_some(true),
            Some(rpc) if !matches!(rpc.phase, Phase::Receiving { .. }) => {
                // The request is already complete: a duplicate.
                self.metrics.duplicate_data_bytes += first as u64;
                None
            }
            Some(_) => Some(false),
        }
    }

    /// Asks at once for missing ranges that later packets have overtaken
    /// (see `Config::fast_resend_packets`).
    fn fast_resend(&mut self, id: RpcId) {
        let behind = self.config.fast_resend_packets * self.config.max_payload();
        let max = self.config.resend_gaps as usize;
        let Some(m) = self.rpcs.get_mut(&id).and_then(|r| r.phase.msgin_mut()) else {
            return;
        };
        for (s, e) in m.overtaken_gaps(behind, max) {
            self.metrics.fast_resends += 1;
            self.queue_resend(id, s, e - s);
        }
    }

    /// Queues a RESEND for `length` bytes at `offset` of RPC `id`, at the
    /// top priority (as all control packets).
    pub(super) fn queue_resend(&mut self, id: RpcId, offset: u32, length: u32) {
        let priority = self.config.top_priority();
        let body = Body::Resend {
            offset,
            length,
            priority,
        };
        self.queue_control(id, body);
    }

    fn has_response_started(&self, id: &RpcId) -> bool {
        self.rpcs.get(id).is_some_and(|r| r.phase.msgin().is_some())
    }

    /// Admits a new request (server side): within the per-peer and global
    /// limits, evicting the partly received request that has made no
    /// progress for longest (at least a tick) when the table or the receive
    /// memory is full. Returns false, with nothing created, if refused.
    /// `owed`: see [`Endpoint::handle_request_ack`] (settled before an
    /// eviction).
    fn accept_request(
        &mut self,
        now: Nanos,
        id: RpcId,
        h: &DataHeader,
        first: usize,
        owed: &mut bool,
    ) -> bool {
        if h.message_length > self.config.max_message_size {
            // Refuse it for good: remembered like an acked RPC, it draws no
            // RPC_UNKNOWN, so the client does not restart it over and over.
            self.metrics.invalid_dropped += 1;
            self.metrics.oversized_requests += 1;
            self.remember_done(now, id);
            return false;
        }
        if self
            .peers
            .get(&id.peer)
            .is_some_and(|p| p.server_rpcs >= self.config.max_server_rpcs_per_peer)
        {
            self.metrics.refused_peer_rpc_limit += 1;
            return false;
        }
        let need = RPC_MEMORY_CHARGE + first as u64;
        loop {
            let full = self.rpcs.len() >= self.config.max_rpcs as usize;
            let no_memory = self.receiver.buffered + need > self.config.rx_buffer_limit;
            if !full && !no_memory {
                break;
            }
            // A response kept for an unproven client goes first (it would
            // have been given up already): it holds no receive memory.
            if full && !self.kept.is_empty() {
                if std::mem::take(owed) {
                    self.refresh_owed(now, id.peer);
                }
                if self.evict_kept(now) {
                    continue;
                }
            }
            match self.stalest_embryo() {
                Some((t, victim)) if t + self.config.tick_ns <= now => {
                    if std::mem::take(owed) {
                        self.refresh_owed(now, id.peer);
                    }
                    trace!(%victim, "partly received request evicted");
                    self.discard_rpc(now, victim);
                    self.metrics.rpcs_evicted += 1;
                }
                _ if full => {
                    self.metrics.refused_rpc_limit += 1;
                    return false;
                }
                _ => {
                    self.metrics.rx_buffer_drops += 1;
                    return false;
                }
            }
        }
        // (`kept` first: it is nearly always empty, and then no peer lookup.)
        if !self.kept.is_empty() && self.peers.get(&id.peer).is_none() && self.peers_full() {
            if std::mem::take(owed) {
                self.refresh_owed(now, id.peer);
            }
            while self.peers_full() && self.evict_kept(now) {}
        }
        let Ok(p) = self.peers.get_or_create(id.peer) else {
            self.metrics.refused_peer_limit += 1;
            return false;
        };
        p.rpcs += 1;
        p.server_rpcs += 1;
        if p.needs_refresh() {
            self.refresh_peer(now, id.peer);
        }
        let seq = self.next_seq();
        let (request, granted) = self.receiver.admit(h, seq);
        self.record_size(now, h.message_length);
        self.bytedance_new_message(now, id, h, granted);
        // (Made where it goes: an RPC kept across the calls above was
        // copied once more, and one passed in twice.)
        let incast = h.flags & DATA_FLAG_INCAST != 0;
        self.insert_rpc(id, || {
            let mut rpc = Rpc::new(Phase::Receiving { request }, now);
            rpc.incast = incast;
            rpc
        });
        true
    }

    /// The partly received request that made no progress for longest:
    /// brings the filed keys it passes up to date with their RPCs'
    /// `last_heard` (each key is refreshed at most once per packet heard,
    /// so this is O(log n) per packet amortised).
    fn stalest_embryo(&mut self) -> Option<(Nanos, RpcId)> {
        loop {
            let (t, id) = self.receiver.stalest_embryo()?;
            let Some(rpc) = self.rpcs.get_mut(&id) else {
                return Some((t, id));
            };
            if rpc.last_heard == t {
                return Some((t, id));
            }
            self.receiver.rekey_embryo(id, t, rpc.last_heard);
            rpc.embryo = Some(rpc.last_heard);
        }
    }

    /// The first packet of a response: starts reassembly (client side).
    fn start_response(&mut self, now: Nanos, id: RpcId, h: &DataHeader) -> bool {
        if h.message_length > self.config.max_message_size {
            // A response we will never accept: fail the RPC now rather
            // than let it time out.
            self.metrics.invalid_dropped += 1;
            let max = self.config.max_message_size;
            let len = h.message_length;
            self.fail_client_rpc(now, id, RpcError::ResponseTooLong { len, max });
            return false;
        }
        if self.receiver.buffered + RPC_MEMORY_CHARGE > self.config.rx_buffer_limit {
            self.metrics.rx_buffer_drops += 1;
            return false;
        }
        let seq = self.next_seq();
        let rpc = self.rpcs.get_mut(&id).expect("present");
        let Phase::Client { request, response } = &mut rpc.phase else {
            return false;
        };
        // The server has the whole request: stop sending it.
        request.finish();
        let (message, granted) = self.receiver.admit(h, seq);
        *response = Some(message);
        self.record_size(now, h.message_length);
        self.bytedance_new_message(now, id, h, granted);
        true
    }

    /// Records a new message's size for the cutoffs, which are recomputed
    /// `cutoff_update_interval_ns` after the first size since the last time.
    fn record_size(&mut self, now: Nanos, length: u32) {
        self.receiver.record_size(length);
        if self.receiver.cutoffs_timer.is_none() {
            let at = now + self.config.cutoff_update_interval_ns;
            self.receiver.cutoffs_timer = Some(self.timers.set(Timer::Cutoffs, None, at));
        }
    }

    fn maybe_send_cutoffs(&mut self, now: Nanos, id: RpcId, their_version: u16) {
        let version = self.receiver.plan_version();
        if their_version == version {
            return;
        }
        let tick_ns = self.config.tick_ns;
        let Some(p) = self.peers.get_mut(&id.peer) else {
            return;
        };
        if p.cutoffs_sent_at.is_some_and(|t| now < t + tick_ns) {
            return;
        }
        p.cutoffs_sent_at = Some(now);
        self.metrics.cutoffs_sent += 1;
        let body = Body::Cutoffs {
            cutoffs: self.receiver.cutoffs().0.cutoffs,
            version,
        };
        self.queue_control(id, body);
    }

    /// A whole message arrived: hand it to the application.
    fn complete_msgin(&mut self, now: Nanos, id: RpcId) {
        let rpc = self.rpcs.get_mut(&id).expect("present");
        if matches!(rpc.phase, Phase::Stream(_)) {
            return self.stream_msgin_complete(now, id);
        }
        // (The message is taken where it lies, then its phase moves on: no
        // copy of the `InMessage`.)
        let m = match &mut rpc.phase {
            Phase::Client { response, .. } => response.as_mut().expect("complete response"),
            Phase::Receiving { request } => request,
            _ => unreachable!("only receiving RPCs complete messages"),
        };
        self.receiver.release(m);
        let message = m.take_message();
        match &mut rpc.phase {
            Phase::Client { response, .. } => *response = None,
            phase => *phase = Phase::InService,
        }
        if id.is_client() {
            if let Some(p) = self.peers.get_mut(&id.peer) {
                p.proven = true;
            }
            // (The ack queued below refreshes the peer.)
            let refresh = !self.ack_refresh_suffices();
            self.end_rpc(now, id, refresh);
            self.metrics.responses_delivered += 1;
            self.events.push_back(Event::Response { rpc: id, message });
            self.queue_ack(now, id);
        } else {
            let rpc = self.rpcs.get_mut(&id).expect("present");
            rpc.heard(now);
            // (A request that came whole in its first packet left nothing
            // filed: re-filing it would change nothing, and the work would
            // sit between the request's arrival and its reply.)
            if !rpc.in_service_unfiled() {
                self.after_change(now, id);
            }
            self.metrics.requests_delivered += 1;
            self.events.push_back(Event::Request { rpc: id, message });
        }
    }

    /// Owes the server an ack for a finished client RPC; a full batch goes
    /// out at once, smaller ones ride on requests or answer the server's
    /// NEED_ACK (as in Homa/Linux); an ACK packet of its own only if the
    /// server has not asked two ticks after it would have (a server stays
    /// silent towards a client it has heard only once from).
    fn queue_ack(&mut self, now: Nanos, id: RpcId) {
        let delay = (self.config.need_ack_ticks as u64 + 2) * self.config.tick_ns;
        let Some(p) = self.peers.get_mut(&id.peer) else {
            return;
        };
        p.pending_acks.push_back(id.id);
        if p.acks_timer.is_none() {
            // Not on a tick boundary, unlike RPC timers: when every client
            // flushed at the same boundary, the ACK packets of a whole
            // cluster met at the receivers' downlinks at the top priority
            // (the simulator's w3, 144 hosts, 1M messages: short-half p99
            // 2.43 with ACKs at the second tick boundary, 2.28 two ticks
            // after each first owed ack, 2.27 with this delay and 40% fewer
            // ACK packets). Flushing every peer's acks on every tick was
            // worse still (a burst of one ACK per peer).
            let at = now + delay;
            p.acks_timer = Some(self.timers.set(Timer::Acks(id.peer), None, at));
        }
        let full = p.pending_acks.len() >= MAX_ACKS;
        if p.needs_refresh() {
            self.refresh_peer(now, id.peer);
        }
        if full {
            self.flush_acks(now, id.peer, 0);
        }
    }

    /// Sends every ack owed to `peer` in ACK packets; `header_id` goes in
    /// the common header (an RPC being acked, or 0).
    pub(super) fn flush_acks(&mut self, now: Nanos, peer: SocketAddr, header_id: u64) {
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
        let timer = p.acks_timer.take();
        self.timers.cancel(Timer::Acks(peer), timer);
        self.refresh_peer(now, peer);
        for acks in batches {
            self.metrics.acks_sent += acks.len() as u64;
            self.queue_control(
                RpcId {
                    peer,
                    id: header_id,
                },
                Body::Ack { acks },
            );
        }
    }

    fn handle_grant(&mut self, now: Nanos, id: RpcId, offset: u32, priority: u8) {
        let Some(rpc) = self.rpcs.get_mut(&id) else {
            self.metrics.unknown_rpc_packets += 1;
            return;
        };
        if let Some(m) = rpc.phase.msgout_mut() {
            m.grant(offset, priority);
            rpc.heard_unless_acking(now);
            self.after_change(now, id);
        }
    }

    fn handle_resend(&mut self, now: Nanos, id: RpcId, offset: u32, length: u32, priority: u8) {
        let Some(rpc) = self.rpcs.get_mut(&id) else {
            self.metrics.unknown_rpc_packets += 1;
            if !self.acked.contains(&id) {
                self.queue_control(id, Body::RpcUnknown);
            }
            return;
        };
        let cooldown = self.config.resend_interval as u64 * self.config.tick_ns / 2;
        let max_payload = self.config.max_payload();
        let outcome = match &mut rpc.phase {
            // A client whose response has started: the request is complete.
            Phase::Client {
                response: Some(_), ..
            } => ResendOutcome::NotSentYet,
            phase => match phase.msgout_mut() {
                Some(m) => {
                    // "Everything" comes from a client that has no byte of
                    // the response: the first packet restarts it, after
                    // which the client asks for exactly what it misses (the
                    // rest may well be on its way).
                    let all = length == RESEND_ALL;
                    let length = if all {
                        m.next_offset.saturating_sub(offset).min(max_payload)
                    } else {
                        length
                    };
                    if all && m.next_offset == 0 {
                        // Only the announcing packet went out (a request
                        // for credit) and the peer has nothing: announce
                        // again.
                        m.resend(now, cooldown, max_payload, 0, 0, priority)
                    } else if length == 0 && m.length > 0 {
                        ResendOutcome::NotSentYet
                    } else {
                        m.resend(now, cooldown, max_payload, offset, length, priority)
                    }
                }
                None => ResendOutcome::NotSentYet,
            },
        };
        match outcome {
            ResendOutcome::Queued => rpc.heard(now),
            ResendOutcome::NotSentYet => {
                // The peer is alive; but its probe says nothing of granted
                // bytes we still wait for.
                if rpc.phase.msgin().is_none_or(|m| m.outstanding() == 0) {
                    rpc.heard(now);
                }
                self.metrics.busy_replies += 1;
                self.queue_control(id, Body::Busy);
            }
            // Nothing to send now, but we are alive: BUSY (one small packet
            // per RESEND). It does not end a response's wait for its ack.
            ResendOutcome::Duplicate | ResendOutcome::OverBudget => {
                if outcome == ResendOutcome::Duplicate {
                    self.metrics.resends_duplicate += 1;
                } else {
                    self.metrics.resends_over_budget += 1;
                }
                self.metrics.busy_replies += 1;
                self.queue_control(id, Body::Busy);
            }
        }
        self.after_change(now, id);
    }

    /// The peer runs the other design (Homa vs SIRD): a client RPC fails
    /// with a clear error; a server RPC is dropped.
    fn handle_mismatch(&mut self, now: Nanos, id: RpcId) {
        if !self.rpcs.contains_key(&id) {
            self.metrics.unknown_rpc_packets += 1;
            return;
        }
        self.metrics.design_mismatches += 1;
        if id.is_client() {
            self.fail_client_rpc(now, id, RpcError::DesignMismatch);
        } else {
            self.discard_rpc(now, id);
            self.metrics.server_rpcs_discarded += 1;
        }
        self.schedule_grants(now);
    }

    fn handle_unknown(&mut self, now: Nanos, id: RpcId) {
        if self.stream_unknown(now, id) {
            return;
        }
        let Some(rpc) = self.rpcs.get_mut(&id) else {
            self.metrics.unknown_rpc_packets += 1;
            return;
        };
        if rpc.is_client() {
            // The server has no trace of the request: send it again.
            rpc.heard(now);
            let Phase::Client { request, response } = &mut rpc.phase else {
                unreachable!("checked above")
            };
            request.restart();
            if let Some(m) = response.take() {
                self.receiver.release(&m);
            }
            self.metrics.restarts += 1;
            debug!(%id, "server does not know the RPC; restarting it");
            self.after_change(now, id);
        } else {
            // The client has finished or abandoned it.
            let finished = matches!(rpc.phase, Phase::Responding { .. });
            self.discard_rpc(now, id);
            self.remember_done(now, id);
            if !finished {
                self.metrics.server_rpcs_discarded += 1;
            }
            self.schedule_grants(now);
        }
    }

    /// A server asks us (the client) to acknowledge RPC `id`. If we still
    /// have it, our own timer asks for what is missing. If we do not (we
    /// acked it and the ACK was lost, or we abandoned it), we answer with
    /// one ACK packet naming it, as Linux's `homa_need_ack_pkt` does, with
    /// up to four more acks owed to that server. One small packet per
    /// NEED_ACK at most, and at most `timer_packets_per_peer` per peer per
    /// tick (`backlog_unproven_per_tick` per tick for all senders we keep
    /// no state for together), so a flood of NEED_ACKs with a forged source
    /// buys a bounded trickle of ACKs.
    fn handle_need_ack(&mut self, now: Nanos, id: RpcId) {
        if self.stream_need_ack(id) {
            return;
        }
        if !id.is_client() {
            self.metrics.invalid_dropped += 1;
            return;
        }
        if self.rpcs.contains_key(&id) {
            // We still wait for (part of) the response; our own timer asks
            // for it.
            return;
        }
        let tick = self.tick(now);
        let allowed = match self.peers.get_mut(&id.peer) {
            Some(p) => p.take_need_ack_reply(tick, self.config.timer_packets_per_peer),
            None => {
                if self.stray_need_ack_tick != tick {
                    self.stray_need_ack_tick = tick;
                    self.stray_need_ack_replies = 0;
                }
                let ok = self.stray_need_ack_replies < self.config.backlog_unproven_per_tick.max(1);
                self.stray_need_ack_replies += ok as u32;
                ok
            }
        };
        if !allowed {
            self.metrics.need_ack_replies_limited += 1;
            return;
        }
        let mut acks = AckList::new();
        if let Some(p) = self.peers.get_mut(&id.peer) {
            p.pending_acks.retain(|&c| c != id.id);
            while !acks.is_full() {
                let Some(client_id) = p.pending_acks.pop_front() else {
                    break;
                };
                let _ = acks.push(AckEntry {
                    client_id,
                    server_port: id.peer.port(),
                });
            }
            if p.pending_acks.is_empty() {
                let timer = p.acks_timer.take();
                self.timers.cancel(Timer::Acks(id.peer), timer);
            }
            self.refresh_peer(now, id.peer);
        }
        self.metrics.need_ack_replies += 1;
        self.metrics.acks_sent += 1 + acks.len() as u64;
        self.queue_control(id, Body::Ack { acks });
    }

    fn handle_ack(&mut self, now: Nanos, id: RpcId) {
        self.handle_ack_refresh(now, id, true);
    }

    /// [`Endpoint::handle_ack`]; without `refresh`, the peer is not filed
    /// as idle or busy again (see `Endpoint::end_rpc`). Returns true if it
    /// ended the RPC.
    fn handle_ack_refresh(&mut self, now: Nanos, id: RpcId, refresh: bool) -> bool {
        let Some(rpc) = self.rpcs.get(&id) else {
            return false;
        };
        if !matches!(rpc.phase, Phase::Responding { .. }) {
            return false;
        }
        if let Some(p) = self.peers.get_mut(&id.peer) {
            // (Proven before it may go idle: an unproven idle peer is
            // forgotten, not filed.)
            p.proven = true;
        }
        self.end_rpc(now, id, refresh);
        self.remember_done(now, id);
        self.metrics.acks_received += 1;
        true
    }

    /// An ICMP destination-unreachable came back for a packet we sent to
    /// `dst`; `returned` is the start of that packet as the ICMP message
    /// quoted it (the Homa header). When it names one of our RPCs (ports
    /// and RPC id, which an off-path sender cannot guess), that RPC ends at
    /// once, as Linux's `homa_err_handler_v4` ends the RPCs of a port or
    /// host that is unreachable: a client RPC fails with
    /// [`RpcError::PeerDead`], a server RPC is dropped. The peer's other
    /// RPCs give up at their next timer round unless the peer is heard from
    /// first (an ICMP is rate-limited by its sender, so not every RPC gets
    /// its own). Returns true if an RPC was ended.
    pub fn handle_unreachable(&mut self, now: Nanos, dst: IpAddr, returned: &[u8]) -> bool {
        let Some((sport, dport, sender_id)) = homa_wire::CommonHeader::peek_ports_and_id(returned)
        else {
            self.metrics.unreachable_ignored += 1;
            return false;
        };
        let id = RpcId {
            peer: SocketAddr::new(dst, dport),
            id: sender_id,
        };
        if sport != self.local.port() || !self.rpcs.contains_key(&id) {
            self.metrics.unreachable_ignored += 1;
            return false;
        }
        debug!(%id, "ICMP destination unreachable: ending the RPC");
        self.metrics.unreachable_rpcs += 1;
        if let Some(p) = self.peers.get_mut(&id.peer) {
            p.unreachable_since = Some(now);
        }
        if id.is_client() || self.is_stream(&id) {
            self.fail_client_rpc(now, id, RpcError::PeerDead);
        } else {
            let seen = self
                .rpcs
                .get(&id)
                .is_some_and(|r| matches!(r.phase, Phase::InService | Phase::Responding { .. }));
            self.discard_rpc(now, id);
            self.metrics.server_rpcs_discarded += 1;
            if seen {
                self.remember_done(now, id);
            }
        }
        self.schedule_grants(now);
        true
    }

    /// Queues a control packet for `id` at the top priority.
    pub(super) fn queue_control(&mut self, id: RpcId, body: Body<'static>) {
        let top = self.config.top_priority();
        self.sender
            .queue_control(self.local.port(), id, body, top, &mut self.metrics);
    }
}
