//! Homa packet formats, byte-compatible with the Linux kernel implementation.
//!
//! Every Homa packet starts with a 28-byte [`CommonHeader`]; DATA packets
//! carry a further 28 bytes of [`DataHeader`] and then message bytes; every
//! other type carries a small fixed body (see [`Body`]). All multi-byte fields
//! are big-endian. On IPv4 the packet is the payload of IP protocol
//! [`IPPROTO_HOMA`] (146); over UDP the same bytes are the UDP payload.
//!
//! [`Packet::parse`] never panics: any byte string either parses or yields a
//! [`WireError`] that says what is wrong. [`Packet::emit`] writes exactly
//! [`Packet::wire_len`] bytes.
//!
//! ```
//! use homa_wire::{Body, CommonHeader, Packet};
//!
//! let grant = Packet {
//!     common: CommonHeader { sport: 4000, dport: 40000, sender_id: 1235 },
//!     body: Body::Grant { offset: 20_000, priority: 3 },
//! };
//! let bytes = grant.to_vec();
//! assert_eq!(bytes.len(), 33);
//! assert_eq!(Packet::parse(&bytes).unwrap(), grant);
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod error;
mod header_buf;
mod packet;

pub use error::WireError;
pub use header_buf::HeaderBuf;
pub use packet::{
    AckEntry, AckList, Body, CommonHeader, DataHeader, Packet, PacketType, RttInfo, StreamCtl,
    StreamOp, ACK_ENTRY_LEN, COMMON_HEADER_LEN, CUTOFF_UNLIMITED, DATA_FLAG_BYTEDANCE,
    DATA_FLAG_CSN, DATA_FLAG_FIN, DATA_FLAG_INCAST, DATA_FLAG_SIRD, DATA_FLAG_STREAM,
    DATA_HEADER_LEN, IPPROTO_HOMA, MAX_ACKS, MAX_HEADER_LEN, MAX_PRIORITIES, OFF_SENDER_ID,
    RATIO_UNKNOWN, RESEND_ALL, RESEND_DEFAULT_PRIORITY, RESEND_UPSTREAM_LEN, RTT_HEADER_LEN,
    STREAM_HEADER_LEN,
};
