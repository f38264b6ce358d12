//! The runtime's own counters: [`RuntimeStats`] as the API hands them out,
//! and the atomics the endpoint's threads update without its lock.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of the runtime itself (the protocol's are in
/// [`Metrics`](homa_core::Metrics)).
/// More may be added in a minor release (`#[non_exhaustive]`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct RuntimeStats {
    /// Packets handed to the kernel.
    pub packets_sent: u64,
    /// Send system calls (each may carry many packets).
    pub send_calls: u64,
    /// Packets the kernel refused (buffer full); Homa recovers them.
    pub send_drops: u64,
    /// Outgoing packets dropped on purpose by fault injection.
    pub injected_drops: u64,
    /// Outgoing packets sent twice by fault injection.
    pub injected_duplicates: u64,
    /// Outgoing packets held back (sent late) by fault injection.
    pub injected_reorders: u64,
    /// Received packets dropped on purpose by fault injection.
    pub injected_recv_drops: u64,
    /// Received packets processed twice by fault injection.
    pub injected_recv_duplicates: u64,
    /// Received packets held back (processed late) by fault injection.
    pub injected_recv_reorders: u64,
    /// Datagrams received.
    pub packets_received: u64,
    /// UDP only: received packets dropped because the source port in their
    /// Homa header differs from their UDP source port, or the destination
    /// port from this endpoint's port. (The runtime names a peer by its IP
    /// address and Homa source port; without this check any local process
    /// could make a server send to any port.)
    pub port_mismatch_drops: u64,
    /// Receive system calls that returned data.
    pub recv_calls: u64,
    /// Times the pacer held a packet back.
    pub pacer_holds: u64,
    /// Times a thread that is not the reader left a packet with the pacer
    /// and woke the reader so that it would send it on time.
    pub pacer_kicks: u64,
    /// Received packets whose IP header carried the ECN mark "congestion
    /// experienced" (CE), in packets (a GRO batch counts as the packets it
    /// holds). Read in SIRD mode only (the socket asks for the TOS byte
    /// then); always 0 in Homa mode. Each is handed to the core as
    /// `PacketMeta::ce`, which shrinks the sender's network bucket.
    pub ce_received: u64,
    /// Raw IPv4 only: ICMP destination-unreachables read for our packets
    /// (each ends the RPC it names, if any is still there).
    pub icmp_errors: u64,
    /// UDP only: times a reader asleep in its receive call was woken with a
    /// zero-length datagram to its own socket (its deadline came, another
    /// thread left it work, or the endpoint closed).
    pub self_kicks: u64,
    /// UDP only: times a reader asleep in its receive call woke because
    /// the socket's receive timeout (set for its next deadline a jiffy or
    /// more away: a timer of the core, a caller's timeout) expired, with
    /// nothing received.
    pub recv_timeouts: u64,
    /// Times the background thread woke up (a deadline of its own, a
    /// reader's deadline to kick, or a nudge from another thread).
    pub background_wakes: u64,
    /// Times the background thread took the reader role (nobody else was
    /// reading or waiting).
    pub background_reads: u64,
    /// Waits that polled the socket first (`Config::poll_us`) rather than
    /// sleeping at once: with `poll_adaptive`, only while the host had a
    /// CPU to spare.
    pub polled_waits: u64,
    /// Calls that waited in a lane of their own (`Config::lanes`).
    pub lane_calls: u64,
    /// Calls that found every lane taken and waited as any thread does.
    pub lane_calls_refused: u64,
    /// Sleeps in a lane's receive call that ended with nothing received
    /// (its timeout, `LANE_SLEEP` at most, or the caller's deadline).
    pub lane_timeouts: u64,
}

/// The runtime's counters, updated without the lock.
#[derive(Default)]
pub(super) struct Stats {
    pub(super) packets_sent: AtomicU64,
    pub(super) send_calls: AtomicU64,
    pub(super) send_drops: AtomicU64,
    pub(super) injected_drops: AtomicU64,
    pub(super) injected_duplicates: AtomicU64,
    pub(super) injected_reorders: AtomicU64,
    pub(super) injected_recv_drops: AtomicU64,
    pub(super) injected_recv_duplicates: AtomicU64,
    pub(super) injected_recv_reorders: AtomicU64,
    pub(super) packets_received: AtomicU64,
    pub(super) port_mismatch_drops: AtomicU64,
    pub(super) recv_calls: AtomicU64,
    pub(super) pacer_holds: AtomicU64,
    pub(super) pacer_kicks: AtomicU64,
    pub(super) ce_received: AtomicU64,
    pub(super) icmp_errors: AtomicU64,
    pub(super) self_kicks: AtomicU64,
    pub(super) recv_timeouts: AtomicU64,
    pub(super) background_wakes: AtomicU64,
    pub(super) background_reads: AtomicU64,
    pub(super) polled_waits: AtomicU64,
    pub(super) lane_calls: AtomicU64,
    pub(super) lane_calls_refused: AtomicU64,
    pub(super) lane_timeouts: AtomicU64,
}

impl Stats {
    /// The counters as they are now (each read on its own, not as one
    /// atomic snapshot).
    pub(super) fn snapshot(&self) -> RuntimeStats {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        RuntimeStats {
            packets_sent: get(&self.packets_sent),
            send_calls: get(&self.send_calls),
            send_drops: get(&self.send_drops),
            injected_drops: get(&self.injected_drops),
            injected_duplicates: get(&self.injected_duplicates),
            injected_reorders: get(&self.injected_reorders),
            injected_recv_drops: get(&self.injected_recv_drops),
            injected_recv_duplicates: get(&self.injected_recv_duplicates),
            injected_recv_reorders: get(&self.injected_recv_reorders),
            packets_received: get(&self.packets_received),
            port_mismatch_drops: get(&self.port_mismatch_drops),
            recv_calls: get(&self.recv_calls),
            pacer_holds: get(&self.pacer_holds),
            pacer_kicks: get(&self.pacer_kicks),
            ce_received: get(&self.ce_received),
            icmp_errors: get(&self.icmp_errors),
            self_kicks: get(&self.self_kicks),
            recv_timeouts: get(&self.recv_timeouts),
            background_wakes: get(&self.background_wakes),
            background_reads: get(&self.background_reads),
            polled_waits: get(&self.polled_waits),
            lane_calls: get(&self.lane_calls),
            lane_calls_refused: get(&self.lane_calls_refused),
            lane_timeouts: get(&self.lane_timeouts),
        }
    }
}
