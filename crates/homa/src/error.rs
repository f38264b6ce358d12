//! Errors of the runtime API.

use homa_core::RpcId;
use thiserror::Error;

/// Why a call failed.
///
/// More reasons may be added in a minor release (`#[non_exhaustive]`): a
/// `match` outside this crate needs a `_` arm.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    /// The wait ended before the message arrived. For `call`, the RPC has
    /// been aborted.
    #[error("timed out waiting for the message")]
    Timeout,
    /// The peer stopped answering; the RPC will never complete.
    #[error("the peer is not responding (presumed dead)")]
    PeerDead,
    /// The peer runs the other transport design (Homa vs SIRD).
    #[error(
        "the peer runs another transport design (Homa vs SIRD); set the same `design` on both ends"
    )]
    DesignMismatch,
    /// The message exceeds the configured maximum.
    #[error("message of {len} bytes exceeds the maximum of {max} bytes")]
    MessageTooLong {
        /// Bytes offered.
        len: usize,
        /// The limit (`Config::core.max_message_size`).
        max: u32,
    },
    /// The response exceeds this endpoint's maximum message size.
    #[error("the response of {len} bytes exceeds this endpoint's maximum of {max} bytes")]
    ResponseTooLong {
        /// Bytes the server announced.
        len: u32,
        /// The limit (`Config::core.max_message_size`).
        max: u32,
    },
    /// `recv_any_response` with no RPC outstanding.
    #[error("no RPC is outstanding")]
    NothingOutstanding,
    /// The endpoint was shut down.
    #[error("the endpoint is closed")]
    Closed,
    /// The address cannot be used.
    #[error("bad address: {0}")]
    BadAddress(String),
    /// Raw IP mode (protocol 146) needs root or CAP_NET_RAW.
    #[error("permission needed: {0}")]
    PermissionDenied(String),
    /// No RPC with this id (finished, failed, aborted, or never existed).
    #[error("no such RPC: {0}")]
    UnknownRpc(RpcId),
    /// `reply` for something that is not a request awaiting a reply.
    #[error("{0} is not a request awaiting a reply")]
    NotAwaitingReply(RpcId),
    /// A configured limit of the endpoint (named: `max_rpcs`,
    /// `tx_buffer_limit`, `max_peers`) would be exceeded; try again later.
    #[error("the endpoint is at its {0} limit")]
    Limit(&'static str),
    /// The configuration is invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The peer aborted the stream, or no longer knows it.
    #[error("the peer reset the stream")]
    StreamReset,
    /// The peer refused to open the stream (streams disabled there, or a
    /// limit).
    #[error("the peer refused the stream (streams disabled there, or a limit)")]
    StreamRefused,
    /// The peer never answered the stream's opening: dead, or an endpoint
    /// without stream support (Linux Homa).
    #[error("the peer never accepted the stream (dead, or without stream support)")]
    StreamOpenTimeout,
    /// `send` after `finish`, or on a stream that has closed.
    #[error("the stream is finished: no more messages can be sent")]
    StreamFinished,
    /// An operating-system error.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}

impl From<homa_core::Error> for Error {
    fn from(e: homa_core::Error) -> Error {
        match e {
            homa_core::Error::MessageTooLong { len, max } => Error::MessageTooLong { len, max },
            homa_core::Error::UnknownRpc(id) => Error::UnknownRpc(id),
            homa_core::Error::NotAwaitingReply(id) => Error::NotAwaitingReply(id),
            homa_core::Error::BadAddress(a, why) => Error::BadAddress(format!("{a}: {why}")),
            homa_core::Error::Limit(what) => Error::Limit(what),
        }
    }
}

impl From<homa_core::RpcError> for Error {
    fn from(e: homa_core::RpcError) -> Error {
        match e {
            homa_core::RpcError::PeerDead => Error::PeerDead,
            homa_core::RpcError::DesignMismatch => Error::DesignMismatch,
            homa_core::RpcError::ResponseTooLong { len, max } => {
                Error::ResponseTooLong { len, max }
            }
        }
    }
}

impl From<homa_core::StreamError> for Error {
    fn from(e: homa_core::StreamError) -> Error {
        match e {
            homa_core::StreamError::PeerDead => Error::PeerDead,
            homa_core::StreamError::Reset => Error::StreamReset,
            homa_core::StreamError::Refused => Error::StreamRefused,
            homa_core::StreamError::OpenTimeout => Error::StreamOpenTimeout,
        }
    }
}
