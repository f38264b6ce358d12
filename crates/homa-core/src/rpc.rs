//! One RPC's state. The phase is an enum whose variants carry exactly the
//! messages that phase has, so an RPC cannot be, say, in service with a
//! half-received request.

use crate::incoming::InMessage;
use crate::outgoing::OutMessage;
use crate::srpt;
use crate::stream::{Handshake, StreamState};
use crate::timers::RpcTimer;
use crate::Nanos;
use homa_wire::RESEND_ALL;

/// Where an RPC is in its life, with the data of that phase.
// (A tag of its own: without it the variant was encoded in spare values
// of a field deep in `Client`'s messages, and every `msgin`/`msgout` match,
// a dozen per packet, decoded it; those matches took about 125
// instructions per 100 B RPC on the server.)
#[derive(Debug)]
#[repr(u8)]
pub enum Phase {
    /// Client: sending the request; `response` once its first packet came
    /// (the request is then complete at the server). The request is kept
    /// so that it can be sent again if the server loses it.
    Client {
        /// The request.
        request: OutMessage,
        /// The response, being reassembled.
        response: Option<InMessage>,
    },
    /// Server: receiving the request.
    Receiving {
        /// The request, being reassembled.
        request: InMessage,
    },
    /// Server: the application has the request.
    InService,
    /// Server: sending the response, then waiting for the ack.
    Responding {
        /// The response.
        response: OutMessage,
    },
    /// Either side: a stream of messages in both directions
    /// ([`crate::stream`]); its current messages are `msgout`/`msgin`.
    Stream(Box<StreamState>),
}

impl Phase {
    /// The message this RPC sends, if any now.
    pub fn msgout(&self) -> Option<&OutMessage> {
        match self {
            Phase::Client { request, .. } => Some(request),
            Phase::Responding { response } => Some(response),
            Phase::Stream(s) => s.out.as_ref(),
            _ => None,
        }
    }

    /// Mutable [`Phase::msgout`].
    pub fn msgout_mut(&mut self) -> Option<&mut OutMessage> {
        match self {
            Phase::Client { request, .. } => Some(request),
            Phase::Responding { response } => Some(response),
            Phase::Stream(s) => s.out.as_mut(),
            _ => None,
        }
    }

    /// The message this RPC receives, if any now.
    pub fn msgin(&self) -> Option<&InMessage> {
        match self {
            Phase::Client { response, .. } => response.as_ref(),
            Phase::Receiving { request } => Some(request),
            Phase::Stream(s) => s.inbound.as_ref(),
            _ => None,
        }
    }

    /// Mutable [`Phase::msgin`].
    pub fn msgin_mut(&mut self) -> Option<&mut InMessage> {
        match self {
            Phase::Client { response, .. } => response.as_mut(),
            Phase::Receiving { request } => Some(request),
            Phase::Stream(s) => s.inbound.as_mut(),
            _ => None,
        }
    }

    /// A short name, for diagnostics.
    pub fn name(&self) -> &'static str {
        match self {
            Phase::Client { .. } => "client",
            Phase::Receiving { .. } => "receiving",
            Phase::InService => "in service",
            Phase::Responding { .. } => "responding",
            Phase::Stream(_) => "stream",
        }
    }
}

/// What a silent RPC is waiting for from its peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Data it expects: ask for the missing ranges again.
    Data,
    /// The whole response to a fully sent request: ask for everything.
    Response,
    /// Nothing it can ask for (it waits for grants, or we withhold ours):
    /// probe that the peer is alive and still has the RPC.
    Probe,
    /// An ack for a fully sent response.
    Ack,
}

/// Offset of the probe a sender waiting for grants sends (its RPC is a
/// server's response): beyond any message, and still positive as the `int`
/// Linux reads it as, so that Linux's `homa_resend_pkt` finds
/// `offset >= tx_end` and answers BUSY. (Its implicit grant up to the
/// RESEND's end changes nothing: the client's request, the message it
/// sends, is complete.)
pub const PROBE_PAST_END: u32 = 0x7FFF_FFFF;

/// One RPC.
#[derive(Debug)]
pub struct Rpc {
    /// Phase and its messages.
    pub phase: Phase,
    /// Last time the peer showed progress on this RPC (any packet for it).
    pub last_heard: Nanos,
    /// Timer rounds (RESENDs, probes or NEED_ACKs) sent since then.
    pub unanswered: u32,
    /// Silence check filed in the timer table, if any.
    pub timer: Option<RpcTimer>,
    /// Whether the RPC waited on its peer when last looked at.
    pub waiting: bool,
    /// A timer-packet slot reserved for this tick (see
    /// `Peer::reserve_timer_slot`): the round goes out when it comes.
    pub slot: Option<u64>,
    /// Incast control: a client's request asks for it / a server honours it.
    pub incast: bool,
    /// Current key in the sender's SRPT queue.
    pub sendable: Option<srpt::Key>,
    /// Scheduled credit of the outgoing message counted in the sender's
    /// total (bytes granted, not sent).
    pub credit: u32,
    /// The receiver's policy was told of this RPC's incoming message (and
    /// not yet told to forget it).
    pub in_grant_policy: bool,
    /// Current key in the table of partly received requests (server).
    pub embryo: Option<Nanos>,
    /// Probe rounds sent (timer rounds of [`Wait::Probe`]).
    pub probes: u32,
    /// A server's fully sent response kept for a client that has not
    /// shown it hears us, past that client's silent rounds: when it was
    /// kept (ns), its key in the endpoint's eviction order (oldest first).
    pub kept: Option<Nanos>,
    /// Ended, waiting to be freed: absent to every lookup of the RPC
    /// table (see [`crate::rpc_table::RpcTable::kill`]).
    pub(crate) dead: bool,
}

impl Rpc {
    /// A new RPC in `phase`, heard from at `now`.
    pub fn new(phase: Phase, now: Nanos) -> Rpc {
        Rpc {
            phase,
            last_heard: now,
            unanswered: 0,
            timer: None,
            waiting: false,
            slot: None,
            incast: false,
            sendable: None,
            credit: 0,
            in_grant_policy: false,
            embryo: None,
            probes: 0,
            kept: None,
            dead: false,
        }
    }

    /// True for a server RPC in service that nothing holds filed: not in
    /// the sender's queue (no message, no credit), not in the receiver's
    /// policy nor its eviction order, not waiting on its peer. Re-filing
    /// it (`Endpoint::after_change`) would change nothing: a request
    /// complete in its first packet is such an RPC when it is handed over.
    pub fn in_service_unfiled(&self) -> bool {
        matches!(self.phase, Phase::InService)
            && !self.waiting
            && self.sendable.is_none()
            && self.credit == 0
            && !self.in_grant_policy
            && self.embryo.is_none()
    }

    /// True if this endpoint is the client.
    pub fn is_client(&self) -> bool {
        matches!(self.phase, Phase::Client { .. })
    }

    /// The peer showed progress.
    pub fn heard(&mut self, now: Nanos) {
        self.last_heard = now;
        self.unanswered = 0;
    }

    /// The peer showed signs of life on this RPC, but only an ack (not a
    /// GRANT or BUSY) ends the wait of a fully sent response: a client must
    /// not keep a finished RPC alive with cheap packets.
    pub fn heard_unless_acking(&mut self, now: Nanos) {
        if self.wait() != Some(Wait::Ack) {
            self.heard(now);
        }
    }

    /// The RESEND (offset, length) of a timer round that waits for a whole
    /// response (everything: `RESEND_ALL`) or can ask for nothing (a probe:
    /// length 0, "are you alive and do you still have this RPC?").
    ///
    /// A probe's offset is chosen so that a Linux peer answers it. Linux's
    /// `homa_resend_pkt` (homa_incoming.c) answers BUSY only when it is a
    /// server that has no response yet, or when the RESEND's offset is at or
    /// beyond `tx_end`, the bytes it has transmitted; with an offset below
    /// `tx_end` and length 0 it resends nothing and says nothing. It also
    /// takes a RESEND's end beyond its grant as a lost GRANT and sends up to
    /// it. So:
    /// - an incoming message whose granted bytes have all arrived (we
    ///   withhold grants) probes at our grant: the sender has transmitted at
    ///   most that (BUSY), or lost our GRANT up to it (it sends what we did
    ///   grant);
    /// - a request waiting for the server's grants: a Linux server with no
    ///   response yet answers BUSY whatever the offset: 0;
    /// - a response waiting for the client's grants: [`PROBE_PAST_END`].
    ///
    /// homa-rs peers answer any RESEND of length 0 with BUSY (or
    /// RPC_UNKNOWN).
    pub fn resend_range(&self, wait: Wait) -> (u32, u32) {
        match (wait, &self.phase) {
            (Wait::Response, _) => (0, RESEND_ALL),
            (_, Phase::Responding { .. }) => (PROBE_PAST_END, 0),
            (_, phase) => match phase.msgin() {
                Some(m) => (m.granted.min(m.length), 0),
                None => (0, 0),
            },
        }
    }

    /// Whether this RPC's silence check may run up to a jiffy late: a
    /// server's response is all sent and only its ack is awaited, so a late
    /// NEED_ACK only keeps the RPC's state a little longer. (A stream's
    /// acks move the stream on: they stay strict.)
    pub fn lenient_wait(&self) -> bool {
        self.wait().is_some_and(|wait| self.lenient_wait_for(wait))
    }

    /// [`Rpc::lenient_wait`] of an RPC known to wait for `wait` (what
    /// [`Rpc::wait`] says, worked out by the caller).
    pub fn lenient_wait_for(&self, wait: Wait) -> bool {
        matches!(self.phase, Phase::Responding { .. }) && wait == Wait::Ack
    }

    /// What the RPC waits for from its peer, if anything.
    pub fn wait(&self) -> Option<Wait> {
        // An incoming message either expects granted bytes (ask for the
        // gaps) or waits on our own grants, in which case we still probe
        // now and then that the sender is alive.
        let incoming = |m: &InMessage| {
            if m.outstanding() > 0 {
                Wait::Data
            } else {
                Wait::Probe
            }
        };
        match &self.phase {
            Phase::Client { request, response } => match response {
                Some(m) => Some(incoming(m)),
                None => request.granted_all_sent().then_some(if request.all_sent() {
                    Wait::Response
                } else {
                    Wait::Probe
                }),
            },
            Phase::Receiving { request } => Some(incoming(request)),
            Phase::InService => None,
            // A stream waits for its handshake, then for its incoming
            // message, then for the ack of its outgoing one (Wait::Ack: a
            // NEED_ACK asks the peer to repeat its STREAM ACK). An idle
            // stream waits for nothing (no keepalive).
            Phase::Stream(s) => {
                if s.handshake != Handshake::Open {
                    Some(Wait::Ack)
                } else if let Some(m) = &s.inbound {
                    Some(incoming(m))
                } else {
                    match &s.out {
                        Some(o) if !o.granted_all_sent() => None,
                        Some(o) if !o.all_sent() => Some(Wait::Probe),
                        Some(_) => Some(Wait::Ack),
                        // Blocked by the peer's window: probe it (a lost
                        // window update would otherwise stall the stream).
                        None if !s.queue.is_empty() && s.out_next >= s.peer_limit => {
                            Some(Wait::Ack)
                        }
                        None => None,
                    }
                }
            }
            Phase::Responding { response } => {
                if !response.granted_all_sent() {
                    None
                } else if !response.all_sent() {
                    Some(Wait::Probe)
                } else {
                    Some(Wait::Ack)
                }
            }
        }
    }
}
