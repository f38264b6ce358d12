//! One Homa endpoint (an address and port), made of owned parts:
//!
//! - the RPC table ([`crate::rpc_table::RpcTable`], bounded by `max_rpcs`
//!   and per peer), each RPC's state an enum whose variants carry their
//!   messages ([`crate::rpc`]);
//! - the peer table ([`crate::peer::PeerTable`], bounded, idle peers
//!   forgotten first);
//! - the receiver (`receiver::Receiver`: reassembly budget, cutoffs, and
//!   the [`ReceiverPolicy`] that grants);
//! - the sender (`sender::Sender`: the control queue and the
//!   [`SenderPolicy`] that orders data);
//! - acks ([`crate::ack::AckMemory`]) and all timers in one table, strict
//!   and lenient ones apart ([`crate::timers::TimerTable`]).
//!
//! An RPC that ends (a client's response delivered, a server's response
//! acked, an abort, a failure) leaves at once everything that decides what
//! the protocol does: the RPC table's lookups and counts, the sender's and
//! the receiver's policies (grants), the peer's counts, the buffer
//! accounting; a packet or a timer for it is handled exactly as if it were
//! gone. Freeing it (its messages, its slot and map entry, cancelling its
//! timer) waits for [`Endpoint::reap`], which a driver calls when it has
//! nothing better to do (as Linux's `homa_rpc_reap`), so that the work is
//! off the path from a packet's arrival to the application. The invariant:
//! a dead RPC is absent to every lookup and every count ([`Metrics`]'s
//! `active_rpcs` counts live RPCs only; `dead_rpcs` the others), and at
//! most [`MAX_DEAD_RPCS`] wait (the endpoint reaps by itself past that,
//! when the RPC table would otherwise exceed `max_rpcs` slots, and before
//! an id that is still dead is used again; an RPC whose messages add up to
//! [`EAGER_FREE_BYTES`] or more is freed at once). A dead RPC's timer may stay
//! filed until it is reaped: when it comes first it finds no RPC and does
//! nothing, and the other timers keep their order; it only counts in the
//! `timers` gauge and may make [`Endpoint::poll_timeout`] earlier than
//! needed.
//!
//! In the same spirit, a little bookkeeping that producing the next packet
//! does not need waits for [`Endpoint::settle`], which a driver calls right
//! after its send system call: filing the silence timer of the RPC whose
//! packet just went out, recording a new message's size for the cutoffs,
//! remembering the server RPC just acked. Each waits in a one-entry slot
//! of its own table (a second one files the first), and every answer of
//! that table counts it as filed, so nothing the endpoint does depends on
//! when, or whether, the driver settles.
//!
//! The code is split by what drives it: the application API here,
//! `input` for received packets, `output` for packets to send,
//! `timer` for timeouts, `diag` for diagnostics.

mod bytedance;
mod diag;
mod ingress;
mod input;
mod output;
mod receiver;
mod sender;
mod stream;
mod timer;
mod unproven;

pub use diag::RpcSnapshot;
pub use ingress::PacketMeta;
pub use output::Transmit;

use crate::ack::AckMemory;
use crate::event::{Error, Event, IdTag, RpcError, RpcId};
use crate::metrics::Metrics;
use crate::outgoing::OutMessage;
use crate::peer::PeerTable;
use crate::policy::homa::{HomaReceiver, HomaSender};
use crate::policy::sird::{SirdReceiver, SirdSender};
use crate::policy::{ReceiverPolicy, SenderPolicy};
use crate::priority::unsched_priority;
use crate::rpc::{Phase, Rpc};
use crate::rpc_table::RpcTable;
use crate::timers::{Timer, TimerTable};
use crate::{incast, Config, ConfigError, Design, Nanos};
use bytes::Bytes;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use receiver::Receiver;
use sender::Sender;
use std::collections::{BTreeSet, VecDeque};
use std::net::SocketAddr;
use tracing::trace;

/// Most ended RPCs that wait to be freed (see [`Endpoint::reap`]): past it,
/// ending an RPC frees the oldest one at once. (Each holds its messages
/// until freed.)
pub const MAX_DEAD_RPCS: usize = 64;

/// An ending RPC whose messages add up to at least this many bytes is freed
/// at once instead of waiting for [`Endpoint::reap`]: handing back a large
/// message's buffers costs little next to moving it, and a buffer returned
/// late is a buffer the next message finds cold (500 KB RPCs lost about a
/// tenth of their throughput on loopback with every ending RPC deferred).
pub const EAGER_FREE_BYTES: usize = 64 * 1024;

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
    /// Picks client RPC ids: unpredictable to anyone without the seed.
    rng: ChaCha8Rng,
    /// Bits every new client id (RPC or stream) has unless its caller
    /// chooses them ([`Endpoint::set_id_tag`]).
    id_tag: IdTag,
    /// Creation order of messages (SRPT tie-breaks, FIFO shares).
    seq: u64,
    rpcs: RpcTable,
    peers: PeerTable,
    timers: TimerTable,
    receiver: Receiver,
    sender: Sender,
    acked: AckMemory,
    /// Fully sent responses kept for unproven clients (see `unproven`), as
    /// (when kept, RPC), oldest first: live RPCs only.
    kept: BTreeSet<(Nanos, RpcId)>,
    events: VecDeque<Event>,
    /// Stream events ([`crate::stream::StreamEvent`]), apart from `events`
    /// so that drivers without streams see no new `Event` variant.
    stream_events: VecDeque<crate::stream::StreamEvent>,
    client_rpcs: usize,
    /// Deadline of the idle-peer sweep, if filed.
    sweep_timer: Option<Nanos>,
    /// Something changed what the receiver should grant: the decision is
    /// made when the driver next asks for a packet, so a batch of input
    /// costs one decision, not one per packet (as Linux recalculates
    /// grants once per batch).
    grants_due: bool,
    /// NEED_ACK answers this tick to senders we keep no peer state for
    /// (see `handle_need_ack`), and the tick.
    stray_need_ack_tick: u64,
    stray_need_ack_replies: u32,
    /// ByteDance mode's endpoint-wide state (probe nonces, ratio meter).
    bytedance: bytedance::ByteDance,
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
    /// A Homa endpoint for `local` (the address and Homa port packets to it
    /// carry). `seed` seeds the generator of RPC ids: give each endpoint an
    /// unpredictable seed (the runtime uses the OS's randomness), or ids can
    /// be guessed and responses forged.
    pub fn new(config: Config, local: SocketAddr, seed: u64) -> Result<Endpoint, ConfigError> {
        let (receiver, sender): (Box<dyn ReceiverPolicy>, Box<dyn SenderPolicy>) =
            match config.design {
                Design::Homa => (
                    Box::new(HomaReceiver::new(&config)),
                    Box::new(HomaSender::new(&config)),
                ),
                Design::Sird => (
                    Box::new(SirdReceiver::new(&config)),
                    Box::new(SirdSender::new(&config)),
                ),
            };
        Endpoint::with_policies(config, local, seed, receiver, sender)
    }

    /// An endpoint whose receiver and sender decisions are made by the given
    /// policies (Homa's are [`HomaReceiver`] and [`HomaSender`]).
    pub fn with_policies(
        config: Config,
        local: SocketAddr,
        seed: u64,
        receiver: Box<dyn ReceiverPolicy>,
        sender: Box<dyn SenderPolicy>,
    ) -> Result<Endpoint, ConfigError> {
        config.validate()?;
        Ok(Endpoint {
            rng: ChaCha8Rng::seed_from_u64(seed),
            id_tag: IdTag::NONE,
            peers: PeerTable::new(config.max_peers as usize, config.num_priorities),
            receiver: Receiver::new(&config, receiver),
            sender: Sender::new(sender),
            config,
            local,
            seq: 0,
            rpcs: RpcTable::default(),
            timers: TimerTable::default(),
            sweep_timer: None,
            grants_due: false,
            stray_need_ack_tick: 0,
            stray_need_ack_replies: 0,
            acked: AckMemory::default(),
            kept: BTreeSet::new(),
            events: VecDeque::new(),
            stream_events: VecDeque::new(),
            client_rpcs: 0,
            bytedance: bytedance::ByteDance::new(seed),
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
    pub fn cutoffs(&self) -> (crate::PriorityPlan, u16) {
        self.receiver.cutoffs()
    }

    /// True when there is no RPC, nothing queued to send and no ack owed.
    pub fn is_idle(&self) -> bool {
        self.rpcs.is_empty()
            && self.sender.control_is_empty()
            && self.peers.idle_len() == self.peers.len()
    }

    /// Primes the receiver's record of incoming message sizes with `sizes`
    /// and recomputes its priority allocation from them at once, by the same
    /// rule as the periodic measurement (like configuring Linux's
    /// `unsched_cutoffs` for a known workload).
    pub fn prime_size_sample(&mut self, sizes: &[u32]) {
        if self.receiver.prime_sizes(&self.config, sizes) {
            self.metrics.cutoff_updates += 1;
        }
    }

    /// True while some incoming message still needs grants: the receiver
    /// could use more downlink bandwidth than it gets (the simulator's
    /// wasted-bandwidth measure; also the gauge `grantable_messages`).
    pub fn has_grantable_incoming(&self) -> bool {
        self.receiver.policy.has_candidates()
    }

    /// Counters and gauges.
    pub fn metrics(&self) -> Metrics {
        let mut m = self.metrics.clone();
        m.active_rpcs = self.rpcs.len() as u64;
        m.dead_rpcs = self.rpcs.dead_len() as u64;
        m.active_client_rpcs = self.client_rpcs as u64;
        m.rx_bytes_buffered = self.receiver.buffered;
        m.tx_bytes_buffered = self.sender.buffered;
        m.peers = self.peers.len() as u64;
        m.remembered_acks = self.acked.len() as u64;
        m.acks_forgotten_early = self.acked.forgotten_early();
        m.partial_requests = self.receiver.embryos() as u64;
        m.timers = self.timers.len() as u64;
        m.grantable_messages = self.receiver.policy.has_candidates() as u64;
        m.sender_out_of_order_packets = self.sender.policy.out_of_order_packets();
        m
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// The timer tick `now` falls in (rate limits count per tick).
    fn tick(&self, now: Nanos) -> u64 {
        now / self.config.tick_ns
    }

    // ----------------------------------------------------------------
    // Application API

    /// Whether a new client RPC (or stream) to `dest` may start: a real
    /// address and port, and room in the RPC table.
    pub(crate) fn check_new_rpc(&self, dest: SocketAddr) -> Result<(), Error> {
        if dest.port() == 0 {
            return Err(Error::BadAddress(dest, "port 0 is reserved"));
        }
        if dest.ip().is_unspecified() {
            return Err(Error::BadAddress(dest, "the unspecified address"));
        }
        if self.rpcs.len() >= self.config.max_rpcs as usize {
            return Err(Error::Limit("max_rpcs"));
        }
        Ok(())
    }

    /// Starts an RPC: sends `message` as a request to `dest`. The response
    /// comes as [`Event::Response`] (or [`Event::Failed`]).
    pub fn send_request(
        &mut self,
        now: Nanos,
        dest: SocketAddr,
        message: Bytes,
    ) -> Result<RpcId, Error> {
        self.send_request_tagged(now, dest, message, self.id_tag)
    }

    /// Sets the bits every new client id has from now on (RPCs from
    /// [`Endpoint::send_request`], streams), e.g. a driver steering
    /// packets by id keeps those it did not place out of the others' way.
    pub fn set_id_tag(&mut self, tag: IdTag) {
        self.id_tag = tag;
    }

    /// [`Endpoint::send_request`] with some bits of the new RPC's id chosen
    /// by the caller (`tag`; the others stay random): a driver that steers
    /// received packets by id, e.g. to one socket per waiting thread,
    /// picks where the RPC's packets will arrive.
    pub fn send_request_tagged(
        &mut self,
        now: Nanos,
        dest: SocketAddr,
        message: Bytes,
        tag: IdTag,
    ) -> Result<RpcId, Error> {
        self.check_length(message.len())?;
        self.room_for_request(now, dest, message.len() as u64);
        self.check_new_rpc(dest)?;
        let len = message.len() as u32;
        if self.sender.buffered + len as u64 > self.config.tx_buffer_limit {
            return Err(Error::Limit("tx_buffer_limit"));
        }
        let Ok(peer) = self.peers.get_or_create(dest) else {
            return Err(Error::Limit("max_peers"));
        };
        // We chose to talk to it: not state an attacker made us create.
        peer.proven = true;
        peer.rpcs += 1;
        // (`unscheduled_priority` from the peer at hand: a refresh does not
        // change its cutoffs.)
        let prio = unscheduled_level(&self.config, &peer.cutoffs, len);
        if peer.needs_refresh() {
            self.refresh_peer(now, dest);
        }
        let incast = incast::request_needs_flag(&self.config, self.client_rpcs);
        let unsched = self.unscheduled_for(dest, len, false);
        let seq = self.next_seq();
        let budget = self.retransmit_budget(len);
        self.make_room_for_rpc();
        // Ids are random (even, never 0, not live): a server or an off-path
        // host cannot guess the next one and forge its response. (Drawn in
        // the table's probe: nothing above uses the generator or the table.)
        let rng = &mut self.rng;
        let (id, replaced) = self.rpcs.insert_fresh(
            || RpcId {
                peer: dest,
                id: tag.apply(rng.gen::<u64>()),
            },
            || {
                let request = OutMessage::new(message, unsched, prio, seq, budget);
                let mut rpc = Rpc::new(
                    Phase::Client {
                        request,
                        response: None,
                    },
                    now,
                );
                rpc.incast = incast;
                rpc
            },
        );
        if let Some(timer) = replaced {
            self.timers.cancel_rpc(id, timer);
        }
        self.client_rpcs += 1;
        self.sender.buffered += len as u64;
        self.metrics.requests_started += 1;
        self.metrics.incast_requests += incast as u64;
        // (Filed with the sender alone: see `file_new_message`.)
        let filed = match self.rpcs.get_mut(&id) {
            Some(rpc) => file_new_message(&mut self.sender, id, rpc),
            None => false,
        };
        if !filed {
            self.after_change(now, id);
        }
        trace!(%id, len, incast, "request started");
        Ok(id)
    }

    /// Answers a request delivered as [`Event::Request`].
    pub fn reply(&mut self, now: Nanos, rpc: RpcId, message: Bytes) -> Result<(), Error> {
        let r = self.rpcs.get(&rpc).ok_or(Error::UnknownRpc(rpc))?;
        if !matches!(r.phase, Phase::InService) {
            return Err(Error::NotAwaitingReply(rpc));
        }
        let incast = r.incast;
        self.check_length(message.len())?;
        let len = message.len() as u32;
        let prio = self.unscheduled_priority(rpc.peer, len);
        let unsched = self.unscheduled_for(rpc.peer, len, incast);
        let seq = self.next_seq();
        let budget = self.retransmit_budget(len);
        let r = self.rpcs.get_mut(&rpc).expect("checked above");
        // (Made where it lies, over a phase known to own nothing: made
        // first and then moved in, the message was copied twice.)
        match &mut r.phase {
            phase @ Phase::InService => {
                *phase = Phase::Responding {
                    response: OutMessage::new(message, unsched, prio, seq, budget),
                }
            }
            _ => unreachable!("checked above"),
        }
        r.heard(now);
        self.sender.buffered += len as u64;
        // (Filed with the sender alone: see `file_new_message`.)
        if !file_new_message(&mut self.sender, rpc, r) {
            self.after_change(now, rpc);
        }
        Ok(())
    }

    /// Gives up on an RPC. A client RPC produces no further event; a server
    /// RPC is dropped without a reply and remembered like an acked one, so
    /// the request is not delivered again (the client will time out).
    pub fn abort(&mut self, now: Nanos, rpc: RpcId) -> Result<(), Error> {
        if !self.discard_rpc(now, rpc) {
            return Err(Error::UnknownRpc(rpc));
        }
        if !rpc.is_client() {
            self.remember_done(now, rpc);
        }
        self.metrics.rpcs_aborted += 1;
        self.schedule_grants(now);
        Ok(())
    }

    /// Ends every RPC and queues the ACKs this endpoint owes, for a driver
    /// that is about to close its socket: send what
    /// [`Endpoint::poll_transmit`] then gives (control packets only), and
    /// servers free the RPCs they keep for us. Without this a Linux server
    /// sends NEED_ACK for each of our last RPCs on every timer tick (1 ms),
    /// for as long as it runs (homa_timer_check_rpc has no limit), to a
    /// port that no longer answers. Client RPCs still in progress are acked
    /// too: their server may drop them (Linux answers a NEED_ACK for an RPC
    /// it abandoned the same way). Server RPCs are dropped. No event
    /// follows for any of them. Peers are scanned once, in address order.
    pub fn close(&mut self, now: Nanos) {
        let mut ids: Vec<RpcId> = self.rpcs.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            if id.is_client() {
                if let Some(p) = self.peers.get_mut(&id.peer) {
                    p.pending_acks.push_back(id.id);
                }
                self.metrics.rpcs_aborted += 1;
            } else {
                self.metrics.server_rpcs_discarded += 1;
            }
            self.discard_rpc(now, id);
        }
        self.grants_due = false;
        for peer in self.peers.owed_acks() {
            self.flush_acks(now, peer, 0);
        }
        self.reap(usize::MAX);
    }

    /// Frees up to `max` of the RPCs that ended and wait to be freed (their
    /// messages, their places in the RPC and timer tables), oldest first;
    /// returns how many it freed. Nothing the protocol does depends on it:
    /// an ended RPC is already gone for every packet and timer. Call it when
    /// there is nothing more urgent to do (e.g. before blocking for input),
    /// not between a packet's arrival and handing its message over. The
    /// endpoint frees them by itself when more than [`MAX_DEAD_RPCS`] wait,
    /// so a driver that never calls this holds at most that many.
    // (Never inlined: off the hot path, and a profile shows its cost.)
    #[inline(never)]
    pub fn reap(&mut self, max: usize) -> usize {
        let mut n = 0;
        while n < max {
            let Some((id, timer)) = self.rpcs.reap() else {
                break;
            };
            self.timers.cancel_rpc(id, timer);
            n += 1;
        }
        n
    }

    /// RPCs that ended and wait for [`Endpoint::reap`].
    pub fn reapable(&self) -> usize {
        self.rpcs.dead_len()
    }

    /// Does the bookkeeping that the calls since the last one left for
    /// later: recording the size of the message that started last (the
    /// cutoffs' sample), and remembering the server RPC acked last (the
    /// at-most-once memory). (The silence timer of the RPC whose packet
    /// went out last is not filed here: it waits in the timer table's slot
    /// until the next RPC timer takes the slot or a timer runs, and leaves
    /// it at no cost if its RPC ends first; see `TimerTable`.) Call it right after handing the packets of
    /// [`Endpoint::poll_transmit`] to the network (after the send system
    /// call), so that the work is off the path from a packet's arrival to
    /// the answer it brings. Nothing the endpoint does or answers depends
    /// on it: what waits is O(1) (one timer, one size, one acked RPC; a
    /// second one files the first), and every call that looks at them
    /// sees them as if filed ([`Endpoint::poll_timeout`],
    /// [`Endpoint::handle_timeout`], [`Endpoint::metrics`], a stale
    /// request's lookup...). A driver that never calls it only does the
    /// same work a call later.
    // (The check inline: a driver calls it after every send; the work
    // never inlined, and a profile shows its cost.)
    #[inline]
    pub fn settle(&mut self) {
        if self.unsettled() {
            self.settle_now();
        }
    }

    /// [`Endpoint::settle`]'s work.
    #[inline(never)]
    fn settle_now(&mut self) {
        self.receiver.settle();
        self.acked.settle();
    }

    /// True while some bookkeeping waits for [`Endpoint::settle`].
    pub fn unsettled(&self) -> bool {
        self.receiver.unsettled() || self.acked.unsettled()
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
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

    /// Bytes a message of `len` bytes may retransmit over its life in whole
    /// ranges: `retransmit_pct` of it, plus one packet for each round a
    /// receiver may ask before giving up (a short message may need several
    /// tries). As many again may go one packet at a time
    /// (`OutMessage::resend`).
    fn retransmit_budget(&self, len: u32) -> u64 {
        let c = &self.config;
        len as u64 * c.retransmit_pct as u64 / 100
            + c.timeout_resends as u64 * c.max_payload() as u64
    }

    // ----------------------------------------------------------------
    // Bookkeeping shared by the input, output and timer paths

    /// Re-files an RPC everywhere after anything about it changed: the
    /// sender's and receiver's policies, and its silence timer. O(log n).
    fn after_change(&mut self, now: Nanos, id: RpcId) {
        let grant_window = self.bytedance_grant_window(now, id.peer);
        let Some(rpc) = self.rpcs.get_mut(&id) else {
            return;
        };
        self.sender.refile(id, rpc);
        self.receiver.refile(now, id, rpc, grant_window);
        let held = grant_window == Some(0) && rpc.in_grant_policy;
        refile_wait(&self.config, &mut self.timers, now, id, rpc);
        if held {
            self.hold_for_pause(now, id);
        }
    }

    /// Adds a new RPC to the table. An RPC of the same id that ended and
    /// was not yet freed is freed first (its timer cancelled), and when the
    /// table's slots would otherwise exceed `max_rpcs` every ended RPC is.
    /// The RPC is built by `make`, in its slot (see
    /// [`RpcTable::insert_with`]).
    fn insert_rpc(&mut self, id: RpcId, make: impl FnOnce() -> Rpc) {
        self.make_room_for_rpc();
        // (Callers insert ids that are not live: what this replaces is a
        // dead RPC.)
        if let Some(timer) = self.rpcs.insert_with(id, make) {
            self.timers.cancel_rpc(id, timer);
        }
    }

    /// Before a new RPC goes into the table: every ended RPC is freed when
    /// the table's slots would otherwise exceed `max_rpcs`.
    #[inline]
    fn make_room_for_rpc(&mut self) {
        let dead = self.rpcs.dead_len();
        if dead > 0 && self.rpcs.len() + dead >= self.config.max_rpcs as usize {
            self.reap(usize::MAX);
        }
    }

    /// Frees an RPC and everything filed under it at once, and returns it.
    fn remove_rpc(&mut self, now: Nanos, id: RpcId) -> Option<Rpc> {
        let client = self.unfile_rpc(id)?;
        let mut rpc = self.rpcs.remove(&id);
        if let Some(r) = rpc.as_mut() {
            self.timers.cancel_rpc(id, r.timer.take());
        }
        self.rpc_gone(now, id, client, true);
        rpc
    }

    /// Ends an RPC: gone at once for the protocol (see the module's
    /// documentation), freed later by [`Endpoint::reap`]. Returns false if
    /// there was no such RPC.
    fn discard_rpc(&mut self, now: Nanos, id: RpcId) -> bool {
        self.end_rpc(now, id, true)
    }

    /// [`Endpoint::discard_rpc`]; without `refresh`, the peer is not filed
    /// as idle or busy again (see `rpc_gone`).
    fn end_rpc(&mut self, now: Nanos, id: RpcId, refresh: bool) -> bool {
        // An RPC that holds large messages is freed at once (as Homa/Linux
        // reaps at once past `dead_buffs_limit`): its buffers then go back
        // while they are still in the cache, to the next message that needs
        // them, and a dead RPC never pins more than this.
        // (One lookup for both the size and the unfiling.)
        let Some(rpc) = self.rpcs.get_mut(&id) else {
            return false;
        };
        let out = rpc.phase.msgout().map_or(0, |m| m.length);
        let inb = rpc.phase.msgin().map_or(0, |m| m.length);
        if out as usize + inb as usize >= EAGER_FREE_BYTES {
            return self.remove_rpc(now, id).is_some();
        }
        let client = unfile(
            &mut self.kept,
            &mut self.sender,
            &mut self.receiver,
            id,
            rpc,
        );
        // Its silence timer, if it still waits in the timer table's slot,
        // leaves now (O(1)), instead of being filed in a B-tree later and
        // taken out of it when the RPC is freed. (A timer of a dead RPC
        // does nothing when it runs; only the driver's wake-up for it, if
        // it came before the RPC was freed, is saved.)
        if let Some(t) = rpc.timer {
            if self.timers.cancel_deferred_rpc(id, t) {
                rpc.timer = None;
            }
        }
        self.rpcs.kill(&id);
        self.rpc_gone(now, id, client, refresh);
        if self.rpcs.dead_len() > MAX_DEAD_RPCS {
            self.reap(1);
        }
        true
    }

    /// Takes RPC `id` out of the sender and the receiver (not the timers),
    /// leaving it in the table; returns whether it is a client RPC.
    fn unfile_rpc(&mut self, id: RpcId) -> Option<bool> {
        let rpc = self.rpcs.get_mut(&id)?;
        Some(unfile(
            &mut self.kept,
            &mut self.sender,
            &mut self.receiver,
            id,
            rpc,
        ))
    }

    /// The peer's and the endpoint's counts after RPC `id` left the table;
    /// with `refresh`, the peer filed as idle or busy accordingly (a caller
    /// that refreshes it next itself, with nothing in between that looks,
    /// may leave it: see `Endpoint::ack_refresh_suffices`).
    fn rpc_gone(&mut self, now: Nanos, id: RpcId, client: bool, refresh: bool) {
        if client {
            self.client_rpcs -= 1;
        }
        let stale = match self.peers.get_mut(&id.peer) {
            Some(p) => {
                p.rpcs = p.rpcs.saturating_sub(1);
                if !id.is_client() {
                    p.server_rpcs = p.server_rpcs.saturating_sub(1);
                }
                p.needs_refresh()
            }
            None => false,
        };
        if refresh && stale {
            self.refresh_peer(now, id.peer);
        }
    }

    /// Whether a client RPC whose response just came may leave its peer's
    /// refresh to the one `queue_ack` makes right after (the ack it owes
    /// makes the peer busy): the peer, proven, would go idle only for that
    /// moment, its idle entry pushed and popped again, and nothing looks
    /// in between. That changes nothing when the idle sweep is filed
    /// already (`arm_sweep` would do nothing) and the push would not
    /// compact the idle list. (Between the response's arrival and the next
    /// request: a peer lookup and refresh less.)
    fn ack_refresh_suffices(&self) -> bool {
        self.sweep_timer.is_some() && !self.peers.idle_push_compacts()
    }

    /// Files a peer as idle or busy after its RPCs or acks changed. (A
    /// caller holding the peer may skip it when `Peer::needs_refresh` says
    /// nothing changed: then the peer table would not change, and neither
    /// would `arm_sweep`, as the sweep is filed whenever any peer is on the
    /// idle list: every push there is followed by `arm_sweep`, and the
    /// sweep re-arms itself when it runs.)
    fn refresh_peer(&mut self, now: Nanos, addr: SocketAddr) {
        self.peers.refresh(addr, now);
        self.arm_sweep(now);
    }

    /// The invariant that lets callers skip `refresh_peer`: the idle sweep
    /// is filed whenever the idle list holds anything (checked in debug
    /// builds as packets come and go).
    fn sweep_filed_if_idle(&self) -> bool {
        self.sweep_timer.is_some() || self.peers.oldest_idle().is_none()
    }

    /// Remembers a finished server RPC so a stale copy of its request is
    /// not run again.
    fn remember_done(&mut self, now: Nanos, id: RpcId) {
        let max = self.config.max_remembered_acks as usize;
        // (Filed at `settle`; early forgetting is counted in `metrics`.)
        self.acked.remember(now, self.config.ack_memory_ns, max, id);
    }

    fn fail_client_rpc(&mut self, now: Nanos, id: RpcId, error: RpcError) {
        if self.stream_failed_hook(now, id, error) {
            return;
        }
        if self.discard_rpc(now, id) {
            self.metrics.rpcs_failed += 1;
            self.events.push_back(Event::Failed { rpc: id, error });
        }
    }

    /// Notes that the receiver's grants must be decided again before the
    /// next packet goes out.
    fn schedule_grants(&mut self, _now: Nanos) {
        self.grants_due = true;
    }

    /// The priority of the unscheduled bytes of a `len`-byte message to
    /// `peer`: Homa takes it from the receiver's cutoffs; SIRD sends them
    /// at its high level.
    #[inline]
    fn unscheduled_priority(&self, peer: SocketAddr, len: u32) -> u8 {
        match self.config.design {
            Design::Homa => self
                .peers
                .get(&peer)
                .map_or(0, |p| unscheduled_level(&self.config, &p.cutoffs, len)),
            Design::Sird => self.config.top_priority(),
        }
    }

    /// Grants to the incoming messages that deserve it now, if anything
    /// changed since the last decision. (The check inline: every packet
    /// taken, and every poll that finds none, makes it.)
    #[inline]
    fn decide_grants(&mut self, now: Nanos) {
        if self.grants_due {
            self.decide_due_grants(now);
        }
    }

    /// [`Endpoint::decide_grants`] when something changed.
    #[inline(never)]
    fn decide_due_grants(&mut self, now: Nanos) {
        self.grants_due = false;
        let grants = self.receiver.schedule(now);
        for g in grants {
            let Some(rpc) = self.rpcs.get_mut(&g.id) else {
                continue;
            };
            if let Some(m) = rpc.phase.msgin_mut() {
                self.receiver.apply_grant(m, &g, &mut self.metrics);
                self.sender.queue_control(
                    self.local.port(),
                    g.id,
                    homa_wire::Body::Grant {
                        offset: g.offset,
                        priority: g.priority,
                    },
                    self.config.top_priority(),
                    &mut self.metrics,
                );
            }
            self.after_change(now, g.id);
        }
        // A policy that must decide again at a set time (paced credit) has
        // one entry in the timer table.
        let wake = self.receiver.policy.wakeup();
        if wake != self.receiver.policy_timer {
            let old = self.receiver.policy_timer.take();
            self.timers.cancel(Timer::Policy, old);
            if let Some(at) = wake {
                self.receiver.policy_timer = Some(self.timers.set(Timer::Policy, None, at));
            }
        }
    }
}

/// [`Endpoint::after_change`]'s last part, for RPC `id` (`rpc`): whether
/// it waits on its peer (silence counted from when it started to), and
/// its silence timer.
#[inline]
fn refile_wait(config: &Config, timers: &mut TimerTable, now: Nanos, id: RpcId, rpc: &mut Rpc) {
    // (What it waits for is worked out once here: `heard` changes
    // nothing it depends on.)
    let wait = rpc.wait();
    let waiting = wait.is_some();
    if waiting && !rpc.waiting {
        // Silence counts from when the RPC started waiting (a message
        // that sat in the sender's queue was not waiting on its peer).
        rpc.heard(now.max(rpc.last_heard));
    }
    rpc.waiting = waiting;
    if let Some(wait) = wait {
        let lenient = rpc.lenient_wait_for(wait);
        match rpc.timer {
            None => {
                let at = timer::due_for(config, rpc, wait);
                rpc.timer = Some(timers.set_rpc(id, at, lenient));
            }
            // It waits for more than an ack again: the same deadline,
            // kept strictly.
            Some(t) if t.lenient && !lenient => {
                timers.cancel_rpc(id, Some(t));
                rpc.timer = Some(timers.set_rpc(id, t.at, lenient));
            }
            Some(_) => {}
        }
    }
}

/// [`Endpoint::after_change`] of RPC `id` (`rpc`, found by the caller)
/// after a DATA packet of its outgoing message was made, when it has no
/// incoming message and nothing in the receiver's care (its policy, its
/// table of partly received requests): the receiver's refiling would then
/// change nothing, and neither would ByteDance's grant pause (it holds
/// RPCs in the receiver's policy only), so only the sender's filing and
/// [`refile_wait`] are done here, without looking the RPC up again.
/// Returns false, having changed nothing, for any other RPC: the caller
/// then calls `after_change`. (Between a packet's making and its send.)
#[inline]
fn refile_sent(
    sender: &mut Sender,
    config: &Config,
    timers: &mut TimerTable,
    now: Nanos,
    id: RpcId,
    rpc: &mut Rpc,
) -> bool {
    if rpc.phase.msgin().is_some()
        || matches!(rpc.phase, Phase::Receiving { .. })
        || rpc.in_grant_policy
        || rpc.embryo.is_some()
    {
        return false;
    }
    sender.refile(id, rpc);
    refile_wait(config, timers, now, id, rpc);
    true
}

/// [`Endpoint::after_change`] of RPC `id` (`rpc`, found by the caller)
/// whose outgoing message was just made (a new request, a reply), when it
/// has no incoming message, nothing in the receiver's care (its policy,
/// its table of partly received requests) and waits for nothing from its
/// peer (none of the message is sent yet): all `after_change` would then
/// change is the sender's filing and `rpc.waiting` (false), and that is
/// done here, without the receiver's, the timers' and ByteDance's checks.
/// Returns false, having changed nothing, for any other RPC: the caller
/// then calls `after_change`. (On the path from a response's arrival to
/// the next request, and from a request's to its reply.)
#[inline]
fn file_new_message(sender: &mut Sender, id: RpcId, rpc: &mut Rpc) -> bool {
    if rpc.phase.msgin().is_some()
        || matches!(rpc.phase, Phase::Receiving { .. })
        || rpc.in_grant_policy
        || rpc.embryo.is_some()
        || rpc.wait().is_some()
    {
        return false;
    }
    sender.refile(id, rpc);
    rpc.waiting = false;
    true
}

/// [`Endpoint::unfile_rpc`] of RPC `id`, found already (`rpc`): out of
/// `kept`, the sender and the receiver; returns whether it is a client RPC.
fn unfile(
    kept: &mut BTreeSet<(Nanos, RpcId)>,
    sender: &mut Sender,
    receiver: &mut Receiver,
    id: RpcId,
    rpc: &mut Rpc,
) -> bool {
    if let Some(k) = rpc.kept.take() {
        kept.remove(&(k, id));
    }
    // A stream's queued messages give back their buffer.
    if let Phase::Stream(s) = &rpc.phase {
        sender.buffered -= s.queued_bytes;
    }
    sender.forget(id, rpc);
    receiver.forget(id, rpc);
    rpc.is_client()
}

/// [`Endpoint::unscheduled_priority`] for a peer whose cutoffs are
/// `cutoffs`.
#[inline]
fn unscheduled_level(config: &Config, cutoffs: &[u32; homa_wire::MAX_PRIORITIES], len: u32) -> u8 {
    match config.design {
        Design::Homa => unsched_priority(cutoffs, len, config.num_priorities),
        Design::Sird => config.top_priority(),
    }
}

#[cfg(test)]
mod tests;
