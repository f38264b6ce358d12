//! What the core tells the application, and the errors of its API.

use crate::Message;
use std::fmt;
use std::net::SocketAddr;
use thiserror::Error;

/// Names one RPC on an endpoint: the peer it is with and the id as this
/// endpoint knows it (even on the client, odd on the server).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct RpcId {
    /// The id; even for RPCs this endpoint started as a client. (First, so
    /// that ordering compares the cheap, almost always distinct part first.)
    pub id: u64,
    /// The other end: the server for a client RPC, the client for a server RPC.
    pub peer: SocketAddr,
}

impl RpcId {
    /// True if this endpoint is the client of the RPC.
    pub fn is_client(&self) -> bool {
        self.id & 1 == 0
    }
}

/// Bits of a new client RPC's id the caller fixes
/// ([`crate::Endpoint::send_request_tagged`]); the rest stay random. Bit 0
/// (a client id is even) and an id of 0 are never the caller's to choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IdTag {
    /// Which bits are fixed (bit 0 is ignored).
    pub mask: u64,
    /// Their values (only the bits in `mask` count).
    pub bits: u64,
}

impl IdTag {
    /// No bit fixed: a random even id.
    pub const NONE: IdTag = IdTag { mask: 0, bits: 0 };

    /// The id drawn as `random` with the tag's bits in place (even).
    pub fn apply(self, random: u64) -> u64 {
        let mask = self.mask & !1;
        ((random & !mask) | (self.bits & mask)) & !1
    }
}

impl std::hash::Hash for RpcId {
    // By hand: the derived hash spends most of its time on the address's
    // five pieces (see `keyed::hash_addr`).
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.id);
        crate::keyed::hash_addr(&self.peer, state);
    }
}

impl fmt::Display for RpcId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rpc {} with {}", self.id, self.peer)
    }
}

/// Something the application must hear about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A whole request arrived; answer it with `Endpoint::reply`.
    Request {
        /// The server-side RPC to reply to.
        rpc: RpcId,
        /// The request message.
        message: Message,
    },
    /// The whole response to one of this endpoint's requests arrived; the
    /// RPC is finished.
    Response {
        /// The client-side RPC.
        rpc: RpcId,
        /// The response message.
        message: Message,
    },
    /// A client RPC failed and will never complete.
    Failed {
        /// The client-side RPC.
        rpc: RpcId,
        /// Why.
        error: RpcError,
    },
}

/// Why an RPC failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum RpcError {
    /// The peer stopped answering: `timeout_resends` RESENDs went unanswered.
    #[error("peer is not responding (presumed dead)")]
    PeerDead,
    /// The response was longer than this endpoint accepts.
    #[error("the response of {len} bytes exceeds the maximum message size of {max} bytes")]
    ResponseTooLong {
        /// Bytes the server announced.
        len: u32,
        /// `Config::max_message_size`.
        max: u32,
    },
    /// The peer runs another receiver-driven design (Homa vs SIRD), so
    /// neither can schedule the other's messages.
    #[error(
        "the peer runs another transport design (Homa vs SIRD); set the same `design` on both ends"
    )]
    DesignMismatch,
}

/// Misuse of the core's API.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Error {
    /// The message exceeds `Config::max_message_size`.
    #[error("message of {len} bytes exceeds the maximum of {max} bytes")]
    MessageTooLong {
        /// Bytes offered.
        len: usize,
        /// The limit.
        max: u32,
    },
    /// No RPC with this id exists (it finished, failed or was aborted).
    #[error("no such RPC: {0}")]
    UnknownRpc(RpcId),
    /// `reply` was called for a client RPC, or for a request already answered.
    #[error("{0} is not a request awaiting a reply")]
    NotAwaitingReply(RpcId),
    /// A configured limit (named) would be exceeded: `max_rpcs`,
    /// `tx_buffer_limit` or `max_peers`.
    #[error("the endpoint is at its {0} limit")]
    Limit(&'static str),
    /// The destination cannot be used (port 0 or an unspecified address).
    #[error("invalid destination {0}: {1}")]
    BadAddress(SocketAddr, &'static str),
}

#[cfg(test)]
mod id_tag_tests {
    use super::IdTag;

    #[test]
    fn tags_fix_their_bits_and_leave_ids_even() {
        let t = IdTag {
            mask: 0b1110,
            bits: 0b1011,
        };
        // Bits 1..3 from the tag (bit 0 never), the rest from the draw.
        assert_eq!(t.apply(0xffff_0000), 0xffff_000a);
        assert_eq!(t.apply(0xffff_ffff), 0xffff_fffa);
        assert_eq!(IdTag::NONE.apply(0x1235), 0x1234);
        for r in [0u64, 1, u64::MAX, 0x8000_0000_0000_0001] {
            assert_eq!(t.apply(r) & 1, 0);
            assert_eq!(t.apply(r) & 0b1110, 0b1010);
        }
    }
}
