//! Streams at the endpoint ([`crate::stream`]): the application API, the
//! STREAM packets, and the hooks the RPC paths call for a stream's RPC.
//! Every field of a STREAM packet or a stream DATA is checked against state
//! we created (the stream, its handshake, the sequence numbers in flight,
//! our window); what fails is counted and dropped.

use super::Endpoint;
use crate::config::RPC_MEMORY_CHARGE;
use crate::event::{Error, RpcError, RpcId};
use crate::outgoing::OutMessage;
use crate::rpc::{Phase, Rpc};
use crate::stream::{
    unwrap_seq, wire_seq, Handshake, Queued, StreamError, StreamEvent, StreamState,
};
use crate::Nanos;
use bytes::Bytes;
use homa_wire::{Body, DataHeader, StreamCtl, StreamOp, DATA_FLAG_FIN, DATA_FLAG_STREAM};
use rand::Rng;
use std::net::SocketAddr;
use tracing::{debug, trace};

/// Widest span a 16-bit sequence number on the wire may name.
const SEQ_SPAN: u64 = 0x7FFF;

fn state_of(rpc: Option<&mut Rpc>) -> Option<&mut StreamState> {
    match rpc {
        Some(Rpc {
            phase: Phase::Stream(s),
            ..
        }) => Some(s),
        _ => None,
    }
}

/// The DATA flags and sequence number of a stream RPC's outgoing message
/// (zero for any other RPC).
pub(super) fn data_fields(phase: &Phase) -> (u8, u16) {
    match phase {
        Phase::Stream(s) => (
            DATA_FLAG_STREAM | if s.out_fin { DATA_FLAG_FIN } else { 0 },
            wire_seq(s.out_acked),
        ),
        _ => (0, 0),
    }
}

impl Endpoint {
    // ----------------------------------------------------------------
    // Application API

    /// Opens a stream to `dest` (a homa-rs endpoint with streams enabled):
    /// sends OPEN; messages given to [`Endpoint::stream_send`] meanwhile
    /// wait until the peer accepts. Fails later with
    /// [`StreamError::OpenTimeout`] if the peer never answers (a Linux Homa
    /// peer drops STREAM packets and so never sees stream data).
    pub fn open_stream(&mut self, now: Nanos, dest: SocketAddr) -> Result<RpcId, Error> {
        let window = self.config.stream_window;
        if window == 0 {
            return Err(Error::Limit("stream_window (streams disabled)"));
        }
        self.check_new_rpc(dest)?;
        let Ok(peer) = self.peers.get_or_create(dest) else {
            return Err(Error::Limit("max_peers"));
        };
        peer.proven = true;
        peer.rpcs += 1;
        self.refresh_peer(now, dest);
        let id = loop {
            let id = RpcId {
                peer: dest,
                id: self.id_tag.apply(self.rng.gen::<u64>()),
            };
            if id.id != 0 && !self.rpcs.contains_key(&id) {
                break id;
            }
        };
        let state = StreamState::new(Handshake::Opening, window, 0);
        self.rpcs
            .insert(id, Rpc::new(Phase::Stream(Box::new(state)), now));
        self.metrics.streams_opened += 1;
        self.queue_stream_ctl(id, StreamOp::Open, 0, window as u64);
        self.after_change(now, id);
        trace!(%id, "stream opening");
        Ok(id)
    }

    /// Queues `message` on stream `stream`. At most `stream_window`
    /// messages may be unacknowledged: beyond that it fails with
    /// `Error::Limit("stream send window")` and a
    /// [`StreamEvent::Writable`] follows when there is room. After
    /// [`Endpoint::stream_finish`] it fails with `Error::NotAwaitingReply`.
    pub fn stream_send(&mut self, now: Nanos, stream: RpcId, message: Bytes) -> Result<(), Error> {
        self.check_length(message.len())?;
        let len = message.len() as u64;
        let over_buffer = self.sender.buffered + len > self.config.tx_buffer_limit;
        let s = state_of(self.rpcs.get_mut(&stream)).ok_or(Error::UnknownRpc(stream))?;
        if s.fin_queued {
            return Err(Error::NotAwaitingReply(stream));
        }
        if s.unacked() >= s.window {
            s.blocked = true;
            return Err(Error::Limit("stream send window"));
        }
        if over_buffer {
            s.blocked = true;
            return Err(Error::Limit("tx_buffer_limit"));
        }
        s.queue.push_back(Queued::Data(message));
        s.queued_bytes += len;
        self.sender.buffered += len;
        self.stream_pump(now, stream);
        Ok(())
    }

    /// Ends our direction of the stream (FIN, after every message queued
    /// before it). The stream closes ([`StreamEvent::Closed`]) once the
    /// peer has ended its direction too. Idempotent.
    pub fn stream_finish(&mut self, now: Nanos, stream: RpcId) -> Result<(), Error> {
        let s = state_of(self.rpcs.get_mut(&stream)).ok_or(Error::UnknownRpc(stream))?;
        if !s.fin_queued {
            s.fin_queued = true;
            s.queue.push_back(Queued::Fin);
            self.stream_pump(now, stream);
        }
        Ok(())
    }

    /// The application has taken one [`StreamEvent::Message`] of `stream`:
    /// the receive window moves (an ACK tells the peer when it was stalled
    /// or the window moved by half).
    pub fn stream_read(&mut self, _now: Nanos, stream: RpcId) -> Result<(), Error> {
        let s = state_of(self.rpcs.get_mut(&stream)).ok_or(Error::UnknownRpc(stream))?;
        s.consumed = (s.consumed + 1).min(s.in_next);
        let limit = s.limit();
        if s.advertised <= s.in_next || limit >= s.advertised + (s.window / 2).max(1) {
            s.advertised = limit;
            let next = s.in_next;
            self.queue_stream_ctl(stream, StreamOp::Ack, next, limit);
        }
        Ok(())
    }

    /// Aborts the stream: the peer gets RESET (its pending operations fail
    /// with [`StreamError::Reset`]); no event follows here.
    pub fn stream_abort(&mut self, now: Nanos, stream: RpcId) -> Result<(), Error> {
        if state_of(self.rpcs.get_mut(&stream)).is_none() {
            return Err(Error::UnknownRpc(stream));
        }
        self.queue_stream_ctl(stream, StreamOp::Reset, 0, 0);
        self.discard_rpc(now, stream);
        self.remember_done(now, stream);
        self.metrics.streams_failed += 1;
        self.schedule_grants(now);
        Ok(())
    }

    /// True if `id` is an open (or opening) stream.
    pub fn is_stream(&self, id: &RpcId) -> bool {
        self.rpcs
            .get(id)
            .is_some_and(|r| matches!(r.phase, Phase::Stream(_)))
    }

    /// The next stream event for the application.
    pub fn poll_stream_event(&mut self) -> Option<StreamEvent> {
        self.stream_events.pop_front()
    }

    // ----------------------------------------------------------------
    // Internals

    fn queue_stream_ctl(&mut self, id: RpcId, op: StreamOp, next: u64, limit: u64) {
        let body = Body::Stream(StreamCtl {
            op,
            next: wire_seq(next),
            limit: wire_seq(limit),
        });
        self.queue_control(id, body);
    }

    /// Starts the next queued message if none is on the wire and the
    /// peer's window allows (a FIN needs no window).
    fn stream_pump(&mut self, now: Nanos, id: RpcId) {
        let Some(s) = state_of(self.rpcs.get_mut(&id)) else {
            return;
        };
        if s.handshake == Handshake::Opening || s.out.is_some() {
            return;
        }
        let fin_next = matches!(s.queue.front(), Some(Queued::Fin));
        if !fin_next && s.out_next >= s.peer_limit {
            return;
        }
        let (data, fin) = match s.queue.pop_front() {
            None => return,
            Some(Queued::Fin) => (Bytes::new(), true),
            Some(Queued::Data(b)) => {
                s.queued_bytes -= b.len() as u64;
                (b, false)
            }
        };
        s.out_next += 1;
        let len = data.len() as u32;
        let prio = self.unscheduled_priority(id.peer, len);
        let unsched = self.unscheduled_for(id.peer, len, false);
        let seq = self.next_seq();
        let budget = self.retransmit_budget(len);
        let m = OutMessage::new(data, unsched, prio, seq, budget);
        let s = state_of(self.rpcs.get_mut(&id)).expect("present");
        s.out = Some(m);
        s.out_fin = fin;
        self.metrics.stream_messages_sent += 1;
        self.after_change(now, id);
    }

    /// A STREAM packet for `id`.
    pub(super) fn handle_stream_ctl(&mut self, now: Nanos, id: RpcId, c: StreamCtl) {
        match c.op {
            StreamOp::Open => self.stream_open_received(now, id, c),
            StreamOp::Accept => self.stream_accept_received(now, id, c),
            StreamOp::Ack | StreamOp::Missing => self.stream_ack_received(now, id, c),
            StreamOp::Reset => {
                if let Some(s) = state_of(self.rpcs.get_mut(&id)) {
                    debug!(%id, "stream reset by the peer");
                    // A RESET before the ACCEPT is the peer's refusal.
                    let error = if s.handshake == Handshake::Opening {
                        StreamError::Refused
                    } else {
                        StreamError::Reset
                    };
                    self.fail_stream(now, id, error);
                    self.schedule_grants(now);
                } else {
                    self.metrics.unknown_rpc_packets += 1;
                }
            }
        }
    }

    fn stream_open_received(&mut self, now: Nanos, id: RpcId, c: StreamCtl) {
        if id.is_client() {
            // An OPEN comes from the side that picked the (even) id.
            self.metrics.stream_invalid += 1;
            return;
        }
        match self.rpcs.get(&id).map(|r| &r.phase) {
            Some(Phase::Stream(s)) => {
                // A repeated OPEN: our ACCEPT was lost.
                if s.handshake == Handshake::Accepted {
                    let w = s.window;
                    self.queue_stream_ctl(id, StreamOp::Accept, 0, w);
                }
                return;
            }
            Some(_) => {
                self.metrics.stream_invalid += 1;
                return;
            }
            None => {}
        }
        if self.acked.contains(&id) {
            self.metrics.stale_duplicates += 1;
            return;
        }
        let window = self.config.stream_window;
        let refused = window == 0
            || self.rpcs.len() >= self.config.max_rpcs as usize
            || self
                .peers
                .get(&id.peer)
                .is_some_and(|p| p.server_rpcs >= self.config.max_server_rpcs_per_peer);
        let Some(p) = (!refused)
            .then(|| self.peers.get_or_create(id.peer).ok())
            .flatten()
        else {
            self.metrics.streams_refused += 1;
            self.queue_stream_ctl(id, StreamOp::Reset, 0, 0);
            return;
        };
        p.rpcs += 1;
        p.server_rpcs += 1;
        self.refresh_peer(now, id.peer);
        let limit = unwrap_seq(c.limit, 0, SEQ_SPAN).unwrap_or(0);
        let state = StreamState::new(Handshake::Accepted, window, limit as u16);
        self.rpcs
            .insert(id, Rpc::new(Phase::Stream(Box::new(state)), now));
        self.queue_stream_ctl(id, StreamOp::Accept, 0, window as u64);
        self.after_change(now, id);
    }

    /// The stream state a control packet for `id` is about, if `id` is a
    /// stream of ours; a packet for an unknown RPC, or for one that is not
    /// a stream, is counted.
    fn stream_for_ctl(&mut self, id: RpcId) -> Option<&mut StreamState> {
        match self.rpcs.get(&id) {
            None => {
                self.metrics.unknown_rpc_packets += 1;
                return None;
            }
            Some(rpc) if !matches!(rpc.phase, Phase::Stream(_)) => {
                self.metrics.stream_invalid += 1;
                return None;
            }
            Some(_) => {}
        }
        state_of(self.rpcs.get_mut(&id))
    }

    fn stream_accept_received(&mut self, now: Nanos, id: RpcId, c: StreamCtl) {
        let Some(s) = self.stream_for_ctl(id) else {
            return;
        };
        match s.handshake {
            Handshake::Opening => {
                s.handshake = Handshake::Open;
                s.peer_limit = unwrap_seq(c.limit, 0, SEQ_SPAN).unwrap_or(0);
            }
            // A repeated ACCEPT: our ACK was lost; repeat it below.
            Handshake::Open if id.is_client() => {}
            _ => {
                self.metrics.stream_invalid += 1;
                return;
            }
        }
        let (next, limit) = (s.in_next, s.advertised);
        self.rpcs.get_mut(&id).expect("present").heard(now);
        if let Some(p) = self.peers.get_mut(&id.peer) {
            p.proven = true;
        }
        self.queue_stream_ctl(id, StreamOp::Ack, next, limit);
        self.stream_pump(now, id);
        self.after_change(now, id);
    }

    fn stream_ack_received(&mut self, now: Nanos, id: RpcId, c: StreamCtl) {
        let Some(s) = self.stream_for_ctl(id) else {
            return;
        };
        if s.handshake == Handshake::Opening {
            self.metrics.stream_invalid += 1;
            return;
        }
        // Only messages we started can be acknowledged.
        let Some(next) = unwrap_seq(c.next, s.out_acked, s.out_next - s.out_acked) else {
            self.metrics.stream_invalid += 1;
            return;
        };
        let opened = s.handshake == Handshake::Accepted;
        s.handshake = Handshake::Open;
        // The limit only grows; an older (reordered) one is ignored.
        if let Some(limit) = unwrap_seq(c.limit, s.peer_limit, SEQ_SPAN) {
            s.peer_limit = limit;
        }
        let acked_out = next > s.out_acked;
        s.out_acked = next;
        if c.op == StreamOp::Missing && !acked_out {
            if let Some(m) = s.out.as_mut().filter(|m| m.all_sent()) {
                trace!(%id, "stream message lost whole; sending it again");
                m.restart();
                self.metrics.restarts += 1;
            }
        }
        let rpc = self.rpcs.get_mut(&id).expect("present");
        rpc.heard(now);
        if acked_out {
            // The message on the wire arrived whole: free it.
            self.sender.forget(id, rpc);
            let Phase::Stream(s) = &mut rpc.phase else {
                unreachable!("checked above")
            };
            s.out = None;
            s.fin_acked |= std::mem::take(&mut s.out_fin);
        }
        let Phase::Stream(s) = &mut rpc.phase else {
            unreachable!("checked above")
        };
        let writable = s.blocked && s.unacked() < s.window;
        s.blocked &= !writable;
        let done = s.done();
        if let Some(p) = self.peers.get_mut(&id.peer) {
            p.proven = true;
        }
        if opened {
            self.metrics.streams_accepted += 1;
            self.stream_events
                .push_back(StreamEvent::Opened { stream: id });
        }
        if writable {
            self.stream_events
                .push_back(StreamEvent::Writable { stream: id });
        }
        if done {
            self.close_stream(now, id);
            return;
        }
        self.stream_pump(now, id);
        self.after_change(now, id);
    }

    /// Admits a stream DATA packet (`handle_data` goes on with the RPC's
    /// incoming message when this returns true): the stream must be ours
    /// and past OPEN, the sequence number the one we expect, within our
    /// window (a FIN needs none), and a FIN empty.
    pub(super) fn stream_data_admit(&mut self, now: Nanos, id: RpcId, h: &DataHeader) -> bool {
        let max_len = self.config.max_message_size;
        let Some(s) = state_of(self.rpcs.get_mut(&id)) else {
            if self.acked.contains(&id) {
                self.metrics.stale_duplicates += 1;
            } else {
                self.metrics.unknown_rpc_packets += 1;
            }
            return false;
        };
        let fin = h.flags & DATA_FLAG_FIN != 0;
        let bad = s.handshake == Handshake::Opening
            || s.peer_fin
            || (fin && h.message_length != 0)
            || h.message_length > max_len;
        if bad {
            self.metrics.stream_invalid += 1;
            return false;
        }
        if unwrap_seq(h.stream_seq, s.in_next, 0).is_none() {
            // Behind: a late copy of a message already delivered. Ahead:
            // impossible (one message at a time), so hostile.
            let behind = wire_seq(s.in_next).wrapping_sub(h.stream_seq) as u64 <= SEQ_SPAN;
            if behind {
                self.metrics.stream_stale += 1;
            } else {
                self.metrics.stream_invalid += 1;
            }
            return false;
        }
        if !fin && s.in_next >= s.limit() {
            self.metrics.stream_window_drops += 1;
            return false;
        }
        let opened = s.handshake == Handshake::Accepted;
        s.handshake = Handshake::Open;
        let need_new = s.inbound.is_none();
        s.inbound_fin = fin;
        if opened {
            self.metrics.streams_accepted += 1;
            self.stream_events
                .push_back(StreamEvent::Opened { stream: id });
        }
        if !need_new {
            return true;
        }
        if self.receiver.buffered + RPC_MEMORY_CHARGE > self.config.rx_buffer_limit {
            self.metrics.rx_buffer_drops += 1;
            return false;
        }
        let seq = self.next_seq();
        let (message, _) = self.receiver.admit(h, seq);
        let s = state_of(self.rpcs.get_mut(&id)).expect("present");
        s.inbound = Some(message);
        let _ = now;
        true
    }

    /// The stream's incoming message is whole: deliver it (or the end of
    /// the direction) and acknowledge it.
    pub(super) fn stream_msgin_complete(&mut self, now: Nanos, id: RpcId) {
        let rpc = self.rpcs.get_mut(&id).expect("present");
        rpc.heard(now);
        let Phase::Stream(s) = &mut rpc.phase else {
            return;
        };
        let m = s.inbound.take().expect("complete message");
        s.in_next += 1;
        let fin = std::mem::take(&mut s.inbound_fin);
        if fin {
            s.peer_fin = true;
            // The FIN takes no window: keep the limit where reads put it.
            s.consumed += 1;
        }
        let (next, limit) = (s.in_next, s.limit());
        s.advertised = limit;
        let done = s.done();
        self.receiver.release(&m);
        if fin {
            self.stream_events
                .push_back(StreamEvent::End { stream: id });
        } else {
            self.metrics.stream_messages_delivered += 1;
            self.stream_events.push_back(StreamEvent::Message {
                stream: id,
                message: m.into_message(),
            });
        }
        self.queue_stream_ctl(id, StreamOp::Ack, next, limit);
        if done {
            self.close_stream(now, id);
        } else {
            self.after_change(now, id);
        }
    }

    /// Both directions ended: free the stream, remembering it for a while
    /// so that late packets are recognised (and a NEED_ACK answered).
    fn close_stream(&mut self, now: Nanos, id: RpcId) {
        if self.discard_rpc(now, id) {
            self.remember_done(now, id);
            self.metrics.streams_closed += 1;
            self.stream_events
                .push_back(StreamEvent::Closed { stream: id });
            trace!(%id, "stream closed");
        }
    }

    /// Ends a stream with `error`; the application hears of it unless the
    /// stream never got past the server's side of the handshake.
    fn fail_stream(&mut self, now: Nanos, id: RpcId, error: StreamError) {
        let Some(rpc) = self.remove_rpc(now, id) else {
            return;
        };
        self.remember_done(now, id);
        self.metrics.streams_failed += 1;
        if matches!(&rpc.phase, Phase::Stream(s) if s.handshake == Handshake::Accepted) {
            return;
        }
        self.stream_events
            .push_back(StreamEvent::Failed { stream: id, error });
    }

    /// Hook of `fail_client_rpc`: a client-side stream fails as a stream.
    pub(super) fn stream_failed_hook(&mut self, now: Nanos, id: RpcId, e: RpcError) -> bool {
        let Some(s) = state_of(self.rpcs.get_mut(&id)) else {
            return false;
        };
        let error = match e {
            RpcError::PeerDead if s.handshake == Handshake::Opening => StreamError::OpenTimeout,
            RpcError::PeerDead => StreamError::PeerDead,
            RpcError::DesignMismatch => StreamError::Refused,
            RpcError::ResponseTooLong { .. } => StreamError::Reset,
        };
        self.fail_stream(now, id, error);
        true
    }

    /// Hook of the timer's `give_up`.
    pub(super) fn stream_give_up(&mut self, now: Nanos, id: RpcId) -> bool {
        self.stream_failed_hook(now, id, RpcError::PeerDead)
    }

    /// Hook of the timer's `Wait::Ack` round: a stream in its handshake
    /// repeats OPEN or ACCEPT (true); otherwise a NEED_ACK goes (false).
    pub(super) fn stream_handshake_round(&mut self, id: RpcId) -> bool {
        let Some(s) = state_of(self.rpcs.get_mut(&id)) else {
            return false;
        };
        let (op, w) = match s.handshake {
            Handshake::Opening => (StreamOp::Open, s.window),
            Handshake::Accepted => (StreamOp::Accept, s.window),
            Handshake::Open => return false,
        };
        self.queue_stream_ctl(id, op, 0, w);
        true
    }

    /// Hook of `handle_need_ack`: a stream repeats its ACK; a closed one
    /// answers RPC_UNKNOWN (its peer then knows we closed). True if handled.
    pub(super) fn stream_need_ack(&mut self, id: RpcId) -> bool {
        match self.rpcs.get_mut(&id) {
            Some(rpc) => {
                let Some(s) = state_of(Some(rpc)) else {
                    return false;
                };
                if s.handshake != Handshake::Opening {
                    // With none of the next message here, say so: a message
                    // lost whole draws no RESEND, so its sender restarts it.
                    // (A partial one is repaired by our RESENDs.)
                    s.advertised = s.limit();
                    let op = if s.inbound.is_some() {
                        StreamOp::Ack
                    } else {
                        StreamOp::Missing
                    };
                    let (next, limit) = (s.in_next, s.advertised);
                    self.queue_stream_ctl(id, op, next, limit);
                }
                true
            }
            None if self.acked.contains(&id) => {
                self.queue_control(id, Body::RpcUnknown);
                true
            }
            None => false,
        }
    }

    /// Hook of `handle_unknown`: the peer has no such stream. If it has all
    /// our messages (our FIN went out whole) and we have its FIN, it closed
    /// after our last ACK was lost: close too. Otherwise it lost the
    /// stream: fail. True if `id` is a stream.
    pub(super) fn stream_unknown(&mut self, now: Nanos, id: RpcId) -> bool {
        let Some(s) = state_of(self.rpcs.get_mut(&id)) else {
            return false;
        };
        let fin_out = s.out_fin && s.out.as_ref().is_some_and(OutMessage::all_sent);
        if s.peer_fin && fin_out {
            s.fin_acked = true;
            self.close_stream(now, id);
        } else {
            self.fail_stream(now, id, StreamError::Reset);
        }
        self.schedule_grants(now);
        true
    }
}
