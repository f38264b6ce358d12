//! Counters of everything the core does, so a performance or loss question
//! can be answered from numbers.

use homa_wire::PacketType;

/// Packets and bytes, per packet type.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct PerType {
    /// Packets of each type, indexed by [`PacketType::index`].
    pub packets: [u64; PacketType::COUNT],
    /// Bytes (Homa header and payload) of each type.
    pub bytes: [u64; PacketType::COUNT],
}

impl PerType {
    pub(crate) fn count(&mut self, ty: PacketType, bytes: usize) {
        self.packets[ty.index()] += 1;
        self.bytes[ty.index()] += bytes as u64;
    }

    /// Packets of one type.
    pub fn packets_of(&self, ty: PacketType) -> u64 {
        self.packets[ty.index()]
    }

    /// Bytes of one type.
    pub fn bytes_of(&self, ty: PacketType) -> u64 {
        self.bytes[ty.index()]
    }

    /// Packets of all types.
    pub fn total_packets(&self) -> u64 {
        self.packets.iter().sum()
    }
}

/// A snapshot of an endpoint's counters and gauges. More may be added in a
/// minor release (`#[non_exhaustive]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Metrics {
    /// Packets handed to the driver, by type.
    pub sent: PerType,
    /// Packets accepted from the driver, by type.
    pub received: PerType,
    /// Message bytes sent in DATA packets (first transmissions and retransmissions).
    pub data_bytes_sent: u64,
    /// Message bytes sent again because of a RESEND or a restart.
    pub data_bytes_retransmitted: u64,
    /// Message bytes received that were already present (duplicates).
    pub duplicate_data_bytes: u64,
    /// Requests sent by this endpoint as a client.
    pub requests_started: u64,
    /// Requests delivered to the application (server side).
    pub requests_delivered: u64,
    /// Responses delivered to the application (client side).
    pub responses_delivered: u64,
    /// GRANT packets whose grant was chosen by SRPT.
    pub grants_srpt: u64,
    /// GRANT packets given to the oldest message (FIFO share).
    pub grants_fifo: u64,
    /// Timer rounds that asked a silent peer for data or probed it (RESEND);
    /// NEED_ACK rounds are counted in `need_acks_sent`.
    pub timeouts: u64,
    /// RESENDs sent after a timeout (also counted in `sent`).
    pub resends_requested: u64,
    /// Timer rounds postponed because the downlink was busy (granted bytes
    /// are then most likely queued, not lost).
    pub timeouts_postponed_busy: u64,
    /// RESENDs sent at once for a range later packets had overtaken.
    pub fast_resends: u64,
    /// BUSY packets sent in answer to a RESEND.
    pub busy_replies: u64,
    /// Client RPCs restarted because the server did not know them.
    pub restarts: u64,
    /// RPCs given up because their peer left `timeout_resends` rounds
    /// unanswered (client RPCs fail with `PeerDead`; server RPCs are
    /// dropped).
    pub peers_dead: u64,
    /// Client RPCs that failed (any reason).
    pub rpcs_failed: u64,
    /// RPCs aborted by the application.
    pub rpcs_aborted: u64,
    /// Server RPCs discarded without a reply reaching the client (peer dead,
    /// RPC_UNKNOWN from the client).
    pub server_rpcs_discarded: u64,
    /// Acks received (piggy-backed and in ACK packets) that freed an RPC.
    pub acks_received: u64,
    /// Acks sent (piggy-backed and in ACK packets).
    pub acks_sent: u64,
    /// CUTOFFS packets sent because a sender used an old version.
    pub cutoffs_sent: u64,
    /// Times the receiver's own cutoffs changed.
    pub cutoff_updates: u64,
    /// Requests sent with the incast flag.
    pub incast_requests: u64,
    /// Packets that did not parse.
    pub malformed_dropped: u64,
    /// Packets that parsed but made no sense (wrong port, bad lengths,
    /// inconsistent message lengths, …).
    pub invalid_dropped: u64,
    /// Packets for RPCs this endpoint has no state for.
    pub unknown_rpc_packets: u64,
    /// DATA for an RPC acknowledged recently: stale duplicates, not executed.
    pub stale_duplicates: u64,
    /// Requests refused because they exceed `max_message_size`.
    pub oversized_requests: u64,
    /// DATA dropped because it would have taken the receive memory beyond
    /// `rx_buffer_limit`.
    pub rx_buffer_drops: u64,
    /// DATA bytes beyond what the sender may send (unscheduled allowance
    /// plus our grants): dropped.
    pub data_beyond_grant: u64,
    /// DATA that would have split a message into too many pieces: dropped.
    pub fragmented_dropped: u64,
    /// DATA packets that began below our grant and ended past it, taken
    /// whole (the grant then covers them). A Linux sender transmits whole
    /// packets while their start is below the grant, on its own packet
    /// grid (which restarts at its unscheduled limit, 40,000 bytes), so most
    /// of our grant offsets cut one of its packets.
    pub data_straddling_grant: u64,
    /// RPCs ended by an ICMP destination-unreachable that names them (the
    /// peer's port or protocol is gone; Linux's `homa_err_handler_v4`).
    pub unreachable_rpcs: u64,
    /// ICMP destination-unreachables that named no RPC of ours (stale, or
    /// forged without the RPC's id): ignored.
    pub unreachable_ignored: u64,
    /// NEED_ACKs for RPCs we do not know answered with an ACK (as Linux's
    /// `homa_need_ack_pkt` does), one packet each.
    pub need_ack_replies: u64,
    /// NEED_ACKs for RPCs we do not know that got no answer because their
    /// sender (or, for unknown senders, everyone together) had used its
    /// share of replies for the tick.
    pub need_ack_replies_limited: u64,
    /// New requests refused: `max_rpcs` (or the receive memory) reached and
    /// no partly received request old enough to evict.
    pub refused_rpc_limit: u64,
    /// New requests refused: the client has `max_server_rpcs_per_peer`.
    pub refused_peer_rpc_limit: u64,
    /// New requests refused: the peer table is full of busy peers.
    pub refused_peer_limit: u64,
    /// Partly received requests evicted to admit new ones.
    pub rpcs_evicted: u64,
    /// RESENDs ignored: the range was just retransmitted or is queued.
    pub resends_duplicate: u64,
    /// RESENDs ignored: the message used its retransmission budget (both
    /// allowances, or the one-packet allowance within its cooldown).
    pub resends_over_budget: u64,
    /// NEED_ACKs sent.
    pub need_acks_sent: u64,
    /// Fully sent responses freed without an ack after `timeout_resends`
    /// NEED_ACKs.
    pub need_ack_gave_up: u64,
    /// Timer rounds put off to the next tick by the per-peer limit.
    pub timer_rounds_deferred: u64,
    /// DATA from a peer of the other design (Homa vs SIRD), and MISMATCH
    /// answers that ended an RPC.
    pub design_mismatches: u64,
    /// First packets of new requests from unproven peers dropped unread
    /// while the driver was backlogged (see
    /// `Config::backlog_unproven_per_tick`).
    pub shed_unproven_requests: u64,
    /// Timer rounds of server RPCs whose client has never shown it hears
    /// us (see `Peer::proven`): counted towards giving up, nothing sent.
    pub silent_rounds: u64,
    /// Fully sent responses kept, with no packet sent, after their
    /// unproven client's silent rounds, until the client could still be
    /// asking for them (`Config::dead_peer_ns`): its RESEND then gets them.
    pub unproven_responses_kept: u64,
    /// Of those, responses freed early because a new RPC needed the room
    /// (the RPC table, the peer table or the send buffer was full).
    pub unproven_responses_evicted: u64,
    /// Acknowledged RPCs forgotten before `ack_memory_ns` because
    /// `max_remembered_acks` was reached.
    pub acks_forgotten_early: u64,
    /// ByteDance mode: RTT_PROBEs sent.
    pub rtt_probes_sent: u64,
    /// ByteDance mode: RTT_PROBEs answered with an RTT_RESPS.
    pub rtt_probes_answered: u64,
    /// ByteDance mode: RTT_RESPS that matched our outstanding probe (an
    /// RTT sample each).
    pub rtt_responses: u64,
    /// ByteDance mode: RTT_PROBE / RTT_RESPS dropped: the mode is off, the
    /// peer is unknown or unproven, an answer matches no outstanding probe
    /// or came too late, or the peer's probes exceed their rate.
    pub rtt_invalid: u64,
    /// ByteDance mode: times a peer's unscheduled window changed.
    pub bytedance_window_changes: u64,
    /// ByteDance mode (`no_grants_above_high`): pauses that held back a
    /// message's grants (a peer's first held message starts one).
    pub bytedance_grant_pauses: u64,
    /// ByteDance mode: pauses that ended because their latest sample grew
    /// older than `grant_pause_stale_ns` (the others ended with a sample
    /// at or below `rtt_high`).
    pub bytedance_stale_resumes: u64,
    /// Streams this endpoint opened.
    pub streams_opened: u64,
    /// Streams peers opened with us (established).
    pub streams_accepted: u64,
    /// Stream OPENs refused (streams disabled or a limit).
    pub streams_refused: u64,
    /// Streams closed cleanly (both directions ended).
    pub streams_closed: u64,
    /// Streams that failed or were aborted.
    pub streams_failed: u64,
    /// Stream messages started (FINs included).
    pub stream_messages_sent: u64,
    /// Stream messages delivered to the application.
    pub stream_messages_delivered: u64,
    /// Stream packets that contradict the stream's state (no such stream
    /// or not in that state, a sequence number never sent, a FIN with
    /// bytes): dropped.
    pub stream_invalid: u64,
    /// Stream DATA of messages already delivered (late copies): dropped.
    pub stream_stale: u64,
    /// Stream DATA beyond our receive window: dropped.
    pub stream_window_drops: u64,
    /// Control packets dropped because the driver did not poll.
    pub control_queue_drops: u64,
    /// Gauge: RPCs in existence (client and server); RPCs that ended but
    /// are not yet freed (`dead_rpcs`) are not counted.
    pub active_rpcs: u64,
    /// Gauge: client RPCs in existence.
    pub active_client_rpcs: u64,
    /// Gauge: bytes held in incoming message buffers.
    pub rx_bytes_buffered: u64,
    /// Gauge: bytes held in outgoing messages.
    pub tx_bytes_buffered: u64,
    /// Gauge: peers with state.
    pub peers: u64,
    /// Gauge: acknowledged RPCs remembered against stale duplicates.
    pub remembered_acks: u64,
    /// Gauge: requests partly received.
    pub partial_requests: u64,
    /// Gauge: timers filed (with those of ended RPCs not yet freed, see
    /// `dead_rpcs`).
    pub timers: u64,
    /// Gauge: RPCs that ended and wait to be freed (see
    /// `Endpoint::reap`); at most `MAX_DEAD_RPCS`.
    pub dead_rpcs: u64,
    /// Gauge: 1 while some incoming message needs grants (the receiver
    /// could use more downlink than it gets), else 0.
    pub grantable_messages: u64,
    /// Data packets sent out of the sender policy's preferred order (Homa:
    /// the oldest message's FIFO share).
    pub sender_out_of_order_packets: u64,
}
