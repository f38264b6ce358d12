//! Why a byte string is not a valid Homa packet.

use crate::packet::PacketType;
use thiserror::Error;

/// A malformed packet: what was wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WireError {
    /// Fewer bytes than the header of this packet type needs.
    #[error("truncated {what} packet: need {needed} bytes, got {got}")]
    Truncated {
        /// The packet type, or "unknown" when even the common header is short.
        what: &'static str,
        /// Bytes the header needs.
        needed: usize,
        /// Bytes present.
        got: usize,
    },
    /// The type byte (offset 11) names no Homa packet type.
    #[error("unknown packet type 0x{0:02x}")]
    UnknownType(u8),
    /// A GRANT or RESEND asks for a priority above the highest level (7).
    #[error("{what} priority {priority} is out of range 0..=7")]
    BadPriority {
        /// Packet type carrying the priority.
        what: &'static str,
        /// The priority found.
        priority: u8,
    },
    /// An ACK packet claims more than five ack entries.
    #[error("ACK packet claims {0} acks; at most 5 fit")]
    TooManyAcks(u16),
    /// A STREAM packet names no known op.
    #[error("STREAM packet with unknown op {0}")]
    BadStreamOp(u8),
    /// The bytes of a DATA packet reach past the end of its message.
    #[error("DATA bytes {offset}..{end} lie outside a message of {message_length} bytes")]
    DataOutOfRange {
        /// Offset of the first data byte.
        offset: u32,
        /// One past the last data byte.
        end: u64,
        /// Message length the header claims.
        message_length: u32,
    },
}

impl WireError {
    /// The packet type the error concerns, when the type byte was readable.
    pub fn packet_type(&self) -> Option<PacketType> {
        match self {
            WireError::Truncated { what, .. } | WireError::BadPriority { what, .. } => {
                PacketType::ALL.into_iter().find(|t| t.name() == *what)
            }
            WireError::UnknownType(_) => None,
            WireError::TooManyAcks(_) => Some(PacketType::Ack),
            WireError::BadStreamOp(_) => Some(PacketType::Stream),
            WireError::DataOutOfRange { .. } => Some(PacketType::Data),
        }
    }
}
