//! Responses kept for clients that have not shown they hear us.
//!
//! A server sends nothing to a client that has answered nothing it sent
//! (`Peer::proven`): its RPCs' timer rounds are silent, and after
//! `UNPROVEN_ROUNDS` of them they used to give up, so that a flood of
//! requests with forged sources leaves little behind. But a real client
//! whose one-packet first request was answered by a response that was
//! lost is in exactly that state: it has said nothing since its request,
//! and it will ask for the response with RESENDs (which prove it, as a
//! second packet for its RPC) for as long as `Config::dead_peer_ns`. A
//! response given up before it asked met those RESENDs with silence (the
//! RPC remembered as done), and the client failed a live server.
//!
//! So a fully sent response of an unproven client is kept, memory only,
//! with no packet and no timer round, until that client could no longer
//! be asking (`dead_peer_ns` after it was last heard), or until the RPC
//! table, the peer table or the send buffer needs the room: then the
//! oldest kept response goes first (as it would have gone before), before
//! any partly received request. Kept responses are in one ordered set
//! whose entries are live RPCs, so it is bounded by `max_rpcs`; each has
//! one timer, at its deadline.

use super::timer::{file_rpc_timer, on_tick};
use super::Endpoint;
use crate::event::RpcId;
use crate::rpc::Rpc;
use crate::{Config, Nanos};
use tracing::trace;

/// Until when a fully sent response of an unproven client is kept: while
/// the client may still ask for it (from when it was last heard).
pub(super) fn kept_until(config: &Config, rpc: &Rpc) -> Nanos {
    on_tick(config, rpc.last_heard.saturating_add(config.dead_peer_ns()))
}

impl Endpoint {
    /// Keeps server RPC `id`, whose unproven client let its silent rounds
    /// pass, until `until`: filed in the eviction order (once), its timer
    /// at `until`. Nothing is sent.
    pub(super) fn keep_response(&mut self, now: Nanos, id: RpcId, until: Nanos) {
        let Some(rpc) = self.rpcs.get_mut(&id) else {
            return;
        };
        if rpc.kept.is_none() {
            trace!(%id, "response kept for an unproven client");
            rpc.kept = Some(now);
            self.kept.insert((now, id));
            self.metrics.unproven_responses_kept += 1;
        }
        file_rpc_timer(&mut self.timers, id, rpc, until);
    }

    /// Frees the oldest kept response whose client is still unproven (it
    /// ends as a given-up one does: remembered as done, so that a restart
    /// does not run the request twice). Entries whose client has proven
    /// itself since are dropped from the order on the way (their RPCs go
    /// on). Returns false if there was none.
    pub(super) fn evict_kept(&mut self, now: Nanos) -> bool {
        while let Some((t, id)) = self.kept.pop_first() {
            let Some(rpc) = self.rpcs.get_mut(&id) else {
                continue;
            };
            rpc.kept = None;
            if self.peers.get(&id.peer).is_some_and(|p| p.proven) {
                continue;
            }
            trace!(%id, kept_at = t, "kept response evicted");
            self.discard_rpc(now, id);
            self.remember_done(now, id);
            self.metrics.unproven_responses_evicted += 1;
            return true;
        }
        false
    }

    /// Before a new client RPC of `len` bytes to `dest`: frees kept
    /// responses while the RPC table, the send buffer or the peer table
    /// would refuse it. (Only the comparisons when nothing is full.)
    #[inline]
    pub(super) fn room_for_request(&mut self, now: Nanos, dest: std::net::SocketAddr, len: u64) {
        if self.kept.is_empty() {
            return;
        }
        let c = &self.config;
        if self.rpcs.len() >= c.max_rpcs as usize
            || self.sender.buffered + len > c.tx_buffer_limit
            || self.peers.len() >= c.max_peers as usize
        {
            self.room_for_request_cold(now, dest, len);
        }
    }

    /// Whether the peer table has no room for a new peer: full, and no
    /// peer idle (forgettable).
    pub(super) fn peers_full(&self) -> bool {
        self.peers.len() >= self.config.max_peers.max(1) as usize && self.peers.idle_len() == 0
    }

    /// [`Endpoint::room_for_request`] when something is full.
    #[cold]
    #[inline(never)]
    fn room_for_request_cold(&mut self, now: Nanos, dest: std::net::SocketAddr, len: u64) {
        if dest.port() == 0 || dest.ip().is_unspecified() {
            return; // refused anyway (`check_new_rpc`)
        }
        while self.rpcs.len() >= self.config.max_rpcs as usize && self.evict_kept(now) {}
        let tx = self.config.tx_buffer_limit;
        while len <= tx && self.sender.buffered + len > tx && self.evict_kept(now) {}
        while self.peers.get(&dest).is_none() && self.peers_full() && self.evict_kept(now) {}
    }
}
