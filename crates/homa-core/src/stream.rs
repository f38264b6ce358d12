//! RPC streaming (ByteDance paper §7): a bidirectional stream of messages
//! between two endpoints that lives in one RPC's state.
//!
//! A stream is one RPC id (even at the side that opened it, odd at the
//! other, like any RPC) whose phase is [`crate::rpc::Phase::Stream`]. Each
//! direction is a sequence of messages numbered 0, 1, 2, …; one message per
//! direction is on the wire at a time and is reassembled, granted and
//! recovered by the usual Homa machinery (it is the RPC's `msgout` at the
//! sender and `msgin` at the receiver). The next message starts when the
//! receiver has acknowledged the previous one whole (STREAM ACK), and only
//! below the receiver's window limit, which moves when the application
//! reads: that is the backpressure. An empty message with the FIN flag ends
//! a direction; the stream ends when both directions have ended and our FIN
//! was acknowledged. The wire extension and the state machine are in
//! docs/protocol-notes.md, "RPC streaming".

use crate::event::RpcId;
use crate::incoming::InMessage;
use crate::message::Message;
use crate::outgoing::OutMessage;
use bytes::Bytes;
use std::collections::VecDeque;
use thiserror::Error;

/// Why a stream failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum StreamError {
    /// The peer stopped answering while something was outstanding.
    #[error("stream peer is not responding (presumed dead)")]
    PeerDead,
    /// The peer aborted the stream (or lost it: it no longer knows it).
    #[error("the peer reset the stream")]
    Reset,
    /// The peer refused to open the stream (streams disabled or a limit).
    #[error("the peer refused the stream")]
    Refused,
    /// The peer never answered the stream's opening: it is dead, or not a
    /// homa-rs endpoint (Linux Homa drops STREAM packets).
    #[error("the peer never accepted the stream (dead, or without stream support)")]
    OpenTimeout,
}

/// What the core tells the application about streams
/// ([`crate::Endpoint::poll_stream_event`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEvent {
    /// A peer opened a stream with us (server side), now established.
    Opened {
        /// The stream.
        stream: RpcId,
    },
    /// The next message of the stream, in order. Tell the core when the
    /// application has taken it ([`crate::Endpoint::stream_read`]): that
    /// moves the receive window.
    Message {
        /// The stream.
        stream: RpcId,
        /// The message.
        message: Message,
    },
    /// The peer finished its direction: no more messages will come.
    End {
        /// The stream.
        stream: RpcId,
    },
    /// A message was acknowledged and there is room to send again (after
    /// [`crate::Endpoint::stream_send`] refused for a full window).
    Writable {
        /// The stream.
        stream: RpcId,
    },
    /// Both directions ended and our end was acknowledged; the state is
    /// gone.
    Closed {
        /// The stream.
        stream: RpcId,
    },
    /// The stream failed; the state is gone.
    Failed {
        /// The stream.
        stream: RpcId,
        /// Why.
        error: StreamError,
    },
}

/// Where the stream's handshake is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handshake {
    /// Client: OPEN sent, waiting for ACCEPT.
    Opening,
    /// Server: ACCEPT sent, waiting for the client's first ACK or DATA
    /// (until then the stream is not reported to the application, and a
    /// spoofed OPEN costs only a few timer rounds).
    Accepted,
    /// Established.
    Open,
}

/// A message waiting to be sent: its bytes, or the end of the direction.
#[derive(Debug)]
pub enum Queued {
    /// A message.
    Data(Bytes),
    /// FIN: the empty message that ends the direction.
    Fin,
}

/// One stream's state (the phase of its RPC).
#[derive(Debug)]
pub struct StreamState {
    /// The handshake.
    pub handshake: Handshake,
    /// Outgoing message on the wire (its sequence number is `out_acked`).
    pub out: Option<OutMessage>,
    /// Whether `out` is the FIN.
    pub out_fin: bool,
    /// Messages the application sent that have not started.
    pub queue: VecDeque<Queued>,
    /// Bytes in `queue` (counted in the sender's buffered bytes).
    pub queued_bytes: u64,
    /// Sequence number of the next message to start.
    pub out_next: u64,
    /// Messages the peer acknowledged (all below this arrived whole).
    pub out_acked: u64,
    /// The peer accepts messages below this.
    pub peer_limit: u64,
    /// The application queued our FIN (no more sends).
    pub fin_queued: bool,
    /// The peer acknowledged our FIN.
    pub fin_acked: bool,
    /// Incoming message being reassembled (its sequence number is `in_next`).
    pub inbound: Option<InMessage>,
    /// Whether `inbound` is the peer's FIN.
    pub inbound_fin: bool,
    /// Sequence number of the next message expected.
    pub in_next: u64,
    /// Messages the application has read.
    pub consumed: u64,
    /// The limit we last advertised.
    pub advertised: u64,
    /// The peer's FIN arrived.
    pub peer_fin: bool,
    /// `stream_send` was refused for a full window: report `Writable`.
    pub blocked: bool,
    /// Our receive window (messages).
    pub window: u64,
}

impl StreamState {
    /// A new stream with receive window `window`; `handshake` says which side.
    pub fn new(handshake: Handshake, window: u16, peer_limit: u16) -> StreamState {
        StreamState {
            handshake,
            out: None,
            out_fin: false,
            queue: VecDeque::new(),
            queued_bytes: 0,
            out_next: 0,
            out_acked: 0,
            peer_limit: peer_limit as u64,
            fin_queued: false,
            fin_acked: false,
            inbound: None,
            inbound_fin: false,
            in_next: 0,
            consumed: 0,
            advertised: window as u64,
            peer_fin: false,
            blocked: false,
            window: window as u64,
        }
    }

    /// Our receive limit now: messages below it may be sent to us.
    pub fn limit(&self) -> u64 {
        self.consumed + self.window
    }

    /// Messages the application sent that are not acknowledged yet.
    pub fn unacked(&self) -> u64 {
        self.queue.len() as u64 + self.out.is_some() as u64
    }

    /// Both directions are done: the stream can be freed.
    pub fn done(&self) -> bool {
        self.fin_acked && self.peer_fin
    }
}

/// The full sequence number that a 16-bit wire value `wire` names, given
/// that it must lie in `base..=base + span` (span < 2^15); `None` if it
/// does not.
pub fn unwrap_seq(wire: u16, base: u64, span: u64) -> Option<u64> {
    let delta = wire.wrapping_sub(base as u16) as u64;
    (delta <= span).then_some(base + delta)
}

/// The low 16 bits of a sequence number, as carried on the wire.
pub fn wire_seq(seq: u64) -> u16 {
    seq as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_numbers_unwrap_within_their_span_only() {
        assert_eq!(unwrap_seq(5, 3, 4), Some(5));
        assert_eq!(unwrap_seq(3, 3, 0), Some(3));
        assert_eq!(unwrap_seq(2, 3, 4), None); // behind
        assert_eq!(unwrap_seq(8, 3, 4), None); // beyond
                                               // Across the 16-bit wrap.
        let base = 0xFFFE_u64 + (7 << 16);
        assert_eq!(unwrap_seq(1, base, 4), Some(base + 3));
        assert_eq!(wire_seq(base + 3), 1);
    }

    #[test]
    fn window_moves_with_reads() {
        let mut s = StreamState::new(Handshake::Open, 4, 4);
        assert_eq!(s.limit(), 4);
        s.consumed = 3;
        assert_eq!(s.limit(), 7);
        assert!(!s.done());
        s.fin_acked = true;
        s.peer_fin = true;
        assert!(s.done());
    }
}
