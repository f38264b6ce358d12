//! The seams where receiver-driven designs differ.
//!
//! The endpoint owns RPCs, reassembly, retransmission, acks and timers; the
//! policies decide what the designs disagree on:
//!
//! - a [`ReceiverPolicy`] decides which incoming messages get how many bytes
//!   of grant (credit), at which priority, and when. Homa's controlled
//!   overcommitment ([`homa::HomaReceiver`]) is one implementation.
//! - a [`SenderPolicy`] decides how many bytes of a message go unscheduled
//!   and which granted message sends next. Homa's SRPT with a FIFO share
//!   ([`homa::HomaSender`]) is one implementation.
//!
//! Policies keep their own view of the messages they schedule: the endpoint
//! tells them of every change ([`ReceiverPolicy::update`],
//! [`SenderPolicy::update`]) and of removals, and applies what they decide.
//! Every call carries `now`. The per-peer state a policy needs (RTT,
//! windows, link rate) belongs in [`crate::peer::Peer`].

pub mod aimd;
pub mod homa;
pub mod sird;

use crate::{Config, Nanos, RpcId};
use std::fmt::Debug;
use std::net::SocketAddr;

/// An incoming message as a receiver policy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InView {
    /// The RPC.
    pub id: RpcId,
    /// Message length (bytes).
    pub length: u32,
    /// Distinct bytes received.
    pub received: u32,
    /// Bytes the sender may send without further grants.
    pub granted: u32,
    /// Arrival order (smaller is older).
    pub seq: u64,
    /// The window to keep open for this message when the endpoint sets one
    /// per peer (ByteDance mode's scheduled window; bytes, 0 = no grants);
    /// `None`: the policy's own.
    pub grant_window: Option<u32>,
}

impl InView {
    /// The sender.
    pub fn peer(&self) -> SocketAddr {
        self.id.peer
    }
}

/// Why a grant was given (for metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantKind {
    /// The scheduling order's choice (e.g. SRPT).
    Scheduled,
    /// A share for the oldest message, so that none starves.
    Fifo,
}

/// A grant a receiver policy decided on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrantDecision {
    /// Which message.
    pub id: RpcId,
    /// New grant offset (exclusive, bytes).
    pub offset: u32,
    /// Priority for the sender to use.
    pub priority: u8,
    /// Why.
    pub kind: GrantKind,
}

/// What a receiver policy may use when it schedules.
#[derive(Debug, Clone, Copy)]
pub struct GrantContext {
    /// Granted-but-unreceived bytes over all incoming messages.
    pub outstanding: u64,
    /// Priority levels available for scheduled packets (0..sched_levels).
    pub sched_levels: u8,
}

/// What one accepted DATA packet told the receiver, beyond its bytes: the
/// congestion signals a policy may react to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataSignal {
    /// The RPC (its `peer` is the sender).
    pub id: RpcId,
    /// Payload bytes in the packet (new or not).
    pub bytes: u32,
    /// Of those, bytes not received before.
    pub new_bytes: u32,
    /// The sender set SIRD's congested-sender bit (`csn`).
    pub csn: bool,
    /// The packet arrived with IP ECN "congestion experienced".
    pub ce: bool,
}

/// Receiver-side scheduling: which messages get grants.
pub trait ReceiverPolicy: Debug + Send {
    /// Bytes of a `length`-byte message its sender may send before any
    /// grant (the receiver enforces it: a sender's `incoming` claim counts
    /// only up to this).
    fn unscheduled_allowance(&self, length: u32) -> u32;
    /// A message still being received changed (or appeared). Called after
    /// every change to its `received` or `granted`, also once it is fully
    /// granted (its credit is outstanding until its bytes arrive).
    fn update(&mut self, now: Nanos, m: &InView);
    /// The message is complete or gone.
    fn remove(&mut self, id: RpcId);
    /// A DATA packet of an incoming message was accepted.
    fn on_data(&mut self, now: Nanos, signal: &DataSignal);
    /// Decides grants now; appends them to `out`. The endpoint applies them
    /// in order and calls [`ReceiverPolicy::update`] for each.
    fn schedule(&mut self, now: Nanos, ctx: &GrantContext, out: &mut Vec<GrantDecision>);
    /// True while some message still needs grants.
    fn has_candidates(&self) -> bool;
    /// When [`ReceiverPolicy::schedule`] should run again even if nothing
    /// changes (e.g. credit paced to the link), if ever. Only while
    /// [`ReceiverPolicy::has_candidates`]: the endpoint skips `schedule`
    /// otherwise, so a time kept from an earlier decision would fire, not
    /// be consumed, and fire again at once.
    fn wakeup(&self) -> Option<Nanos> {
        None
    }
}

/// An outgoing message as a sender policy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutView {
    /// The RPC.
    pub id: RpcId,
    /// Bytes never sent (the SRPT key).
    pub bytes_left: u32,
    /// Creation order (smaller is older).
    pub seq: u64,
}

/// Sender-side choices: unscheduled bytes and transmission order.
pub trait SenderPolicy: Debug + Send {
    /// Unscheduled bytes for a new message of `length` bytes to `peer`
    /// (`incast`: the receiver asked for incast control).
    fn unscheduled_bytes(
        &self,
        config: &Config,
        peer: SocketAddr,
        length: u32,
        incast: bool,
    ) -> u32;
    /// A message with something to send changed (or appeared).
    fn update(&mut self, m: &OutView);
    /// The message has nothing to send now, or is gone.
    fn remove(&mut self, id: RpcId);
    /// The message to send the next data packet of. (The endpoint does not
    /// call it while no message is filed, every one [`SenderPolicy::update`]
    /// added having been removed: it would have to answer `None`.)
    fn next(&mut self, now: Nanos) -> Option<RpcId>;
    /// A data packet went out (whichever path chose it).
    fn on_data_sent(&mut self);
    /// The message [`SenderPolicy::next`] would most likely pick, without
    /// choosing (for small packets that bypass a pacer).
    fn peek(&self) -> Option<RpcId>;
    /// Data packets sent out of the preferred order (for metrics).
    fn out_of_order_packets(&self) -> u64;
    /// Extension flags for the next DATA packet (`homa_wire::DATA_FLAG_*`),
    /// given the scheduled credit (granted, not yet sent) held over all
    /// messages. Homa sets none.
    fn data_flags(&self, unspent_credit: u64) -> u8 {
        let _ = unspent_credit;
        0
    }
}
