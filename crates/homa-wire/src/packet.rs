//! Packet layouts, parsing and emission.
//!
//! Offsets (bytes, big-endian) of the common header, which starts every packet:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 2 | source port |
//! | 2 | 2 | destination port |
//! | 4 | 4 | sequence (DATA: offset of the first data byte; else zero) |
//! | 8 | 3 | unused, zero |
//! | 11 | 1 | packet type |
//! | 12 | 1 | doff: header length in 4-byte words in the high nibble |
//! | 13 | 7 | flags, window, checksum, urgent: zero |
//! | 20 | 8 | RPC id as the sender of the packet knows it |

use crate::error::WireError;
use bytes::BufMut;

/// IP protocol number assigned to Homa by IANA.
pub const IPPROTO_HOMA: u8 = 146;
/// Length of the header every packet starts with.
pub const COMMON_HEADER_LEN: usize = 28;
/// Length of a DATA packet's headers; message bytes follow.
pub const DATA_HEADER_LEN: usize = 56;
/// Length of one ack entry (client id u64, server port u16).
pub const ACK_ENTRY_LEN: usize = 10;
/// Ack entries an ACK packet has room for.
pub const MAX_ACKS: usize = 5;
/// Priority levels the wire format can express (0 lowest … 7 highest).
pub const MAX_PRIORITIES: usize = 8;
/// RESEND length meaning "nothing received yet: resend all you have sent".
pub const RESEND_ALL: u32 = 0xFFFF_FFFF;
/// Length of a RESEND in HomaModule's stripped "upstream" build (the
/// variant submitted to the Linux kernel, `__STRIP__`): offset and length
/// without the priority byte, 36 bytes instead of 37. [`Packet::parse`]
/// accepts both; we always send the 37-byte form, which the upstream
/// build reads (it ignores bytes past its header).
pub const RESEND_UPSTREAM_LEN: usize = COMMON_HEADER_LEN + 8;
/// Priority given to a RESEND that carries none (the 36-byte upstream
/// layout): the highest level, which is what HomaModule's full build
/// always asks for (`homa_request_retrans`: `num_priorities - 1`).
pub const RESEND_DEFAULT_PRIORITY: u8 = (MAX_PRIORITIES - 1) as u8;
/// Length of an RTT_PROBE or RTT_RESPS: the common header, then a 64-bit
/// nonce (the paper's `timestamp_ns`), the link rate (Mbit/s, u32) and the
/// unscheduled ratio (thousandths, u16; [`RATIO_UNKNOWN`] = none).
pub const RTT_HEADER_LEN: usize = COMMON_HEADER_LEN + 14;
/// Unscheduled cutoff meaning "no size limit" (Linux reads cutoffs as `int`).
pub const CUTOFF_UNLIMITED: u32 = 0x7FFF_FFFF;
/// Bit in a DATA packet's first pad byte (offset 49): the client has many
/// RPCs outstanding and asks the server to send the response with a small
/// unscheduled prefix (incast control). This is an extension: Linux Homa
/// writes zero there and ignores the byte, so both directions stay compatible.
pub const DATA_FLAG_INCAST: u8 = 0x01;
/// Bit in the same byte: the sender runs SIRD (credit-scheduled), not Homa.
/// A receiver of the other design answers [`PacketType::Mismatch`]. Linux
/// never sets it, so Homa mode stays byte-for-byte Linux-compatible.
pub const DATA_FLAG_SIRD: u8 = 0x02;
/// Bit in the same byte: SIRD's congested-sender notification (`sird.csn`):
/// the sender holds at least its threshold of unspent credit over all
/// receivers.
pub const DATA_FLAG_CSN: u8 = 0x04;
/// Bit in the same byte: the sender runs ByteDance mode and answers
/// [`PacketType::RttProbe`]. A peer is sent RTT probes only once it has set
/// this bit; Linux never sets it (nor reads it), so a Linux peer never sees
/// an RTT_PROBE.
pub const DATA_FLAG_BYTEDANCE: u8 = 0x08;
/// Bit in the same byte: the DATA belongs to an RPC stream (an extension
/// between homa-rs endpoints, see [`PacketType::Stream`]); its
/// [`DataHeader::stream_seq`] is the message's sequence number in its
/// direction. Sent only on a stream the peer accepted, so never to Linux.
pub const DATA_FLAG_STREAM: u8 = 0x10;
/// Bit in the same byte, with [`DATA_FLAG_STREAM`]: this message is the
/// last its sender sends on the stream (end of stream in that direction).
pub const DATA_FLAG_FIN: u8 = 0x20;
/// Length of a STREAM packet: the common header, then op (u8), a zero
/// byte, `next` (u16) and `limit` (u16), and two zero bytes.
pub const STREAM_HEADER_LEN: usize = COMMON_HEADER_LEN + 8;
/// Unscheduled ratio meaning "not measured yet" in RTT_PROBE / RTT_RESPS.
pub const RATIO_UNKNOWN: u16 = 0xFFFF;
/// Length of the longest header of any packet type: an ACK's (80 bytes).
/// A control packet is never longer; see [`crate::HeaderBuf`].
pub const MAX_HEADER_LEN: usize = COMMON_HEADER_LEN + 2 + MAX_ACKS * ACK_ENTRY_LEN;

// Header offsets shared by emit and parse.
const OFF_SPORT: usize = 0;
const OFF_DPORT: usize = 2;
const OFF_SEQUENCE: usize = 4;
const OFF_TYPE: usize = 11;
/// Offset of the common header's `sender_id` (8 bytes, big-endian): where a
/// receiver's packet filter finds the RPC id (e.g. to steer by it).
pub const OFF_SENDER_ID: usize = 20;
const OFF_BODY: usize = COMMON_HEADER_LEN;
// DATA body offsets.
const OFF_MSG_LEN: usize = 28;
const OFF_INCOMING: usize = 32;
const OFF_ACK: usize = 36;
const OFF_CUTOFF_VERSION: usize = 46;
const OFF_RETRANSMIT: usize = 48;
const OFF_FLAGS: usize = 49;
const OFF_STREAM_SEQ: usize = 50;
const OFF_DATA_OFFSET: usize = 52;

/// The kinds of Homa packet and their type codes (byte 11).
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PacketType {
    /// Message bytes.
    Data = 0x10,
    /// Receiver to sender: you may send up to an offset, at a priority.
    Grant = 0x11,
    /// Receiver to sender: send this byte range again.
    Resend = 0x12,
    /// "I have no state for this RPC."
    RpcUnknown = 0x13,
    /// "I am alive but choose not to send for this RPC now."
    Busy = 0x14,
    /// Receiver to sender: the unscheduled priority cutoffs to use.
    Cutoffs = 0x15,
    /// Debugging only: freeze the peer's time trace.
    Freeze = 0x16,
    /// Server to client: acknowledge this response so I can free it.
    NeedAck = 0x17,
    /// Client to server: these RPCs are finished.
    Ack = 0x18,
    /// "I run another receiver-driven design (Homa vs SIRD): this RPC
    /// cannot proceed." An extension (Linux never sends it and drops it).
    Mismatch = 0x1f,
    /// ByteDance mode: "echo this nonce" (an RTT measurement), with the
    /// sender's link rate and unscheduled ratio. An extension: sent only to
    /// peers that set [`DATA_FLAG_BYTEDANCE`].
    RttProbe = 0x1d,
    /// ByteDance mode: the answer to an RTT_PROBE, echoing its nonce, with
    /// the responder's link rate and unscheduled ratio. An extension.
    RttResps = 0x1e,
    /// RPC streaming: open/accept a stream, acknowledge its messages (with
    /// the receive window), or reset it. An extension between homa-rs
    /// endpoints: a Linux peer drops it (unknown type) and never gets
    /// stream DATA, which is sent only after the peer accepted the stream.
    Stream = 0x1c,
}

impl PacketType {
    /// Number of packet types. Adding a variant to [`PacketType`] forces
    /// [`PacketType::index`] (an exhaustive match) to be extended, and the
    /// length of [`PacketType::ALL`] must then be raised with this count.
    pub const COUNT: usize = 13;

    /// Every packet type, in code order.
    pub const ALL: [PacketType; Self::COUNT] = [
        PacketType::Data,
        PacketType::Grant,
        PacketType::Resend,
        PacketType::RpcUnknown,
        PacketType::Busy,
        PacketType::Cutoffs,
        PacketType::Freeze,
        PacketType::NeedAck,
        PacketType::Ack,
        PacketType::RttProbe,
        PacketType::RttResps,
        PacketType::Mismatch,
        PacketType::Stream,
    ];

    /// The type with this code, if any.
    pub fn from_code(code: u8) -> Option<PacketType> {
        Self::ALL.into_iter().find(|t| *t as u8 == code)
    }

    /// The type's code on the wire.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// Dense index `0..COUNT`, for per-type counters (`[u64; COUNT]`).
    pub const fn index(self) -> usize {
        match self {
            PacketType::Data => 0,
            PacketType::Grant => 1,
            PacketType::Resend => 2,
            PacketType::RpcUnknown => 3,
            PacketType::Busy => 4,
            PacketType::Cutoffs => 5,
            PacketType::Freeze => 6,
            PacketType::NeedAck => 7,
            PacketType::Ack => 8,
            PacketType::RttProbe => 9,
            PacketType::RttResps => 10,
            PacketType::Mismatch => 11,
            PacketType::Stream => 12,
        }
    }

    /// Upper-case name as used in the Homa literature.
    pub fn name(self) -> &'static str {
        match self {
            PacketType::Data => "DATA",
            PacketType::Grant => "GRANT",
            PacketType::Resend => "RESEND",
            PacketType::RpcUnknown => "RPC_UNKNOWN",
            PacketType::Busy => "BUSY",
            PacketType::Cutoffs => "CUTOFFS",
            PacketType::Freeze => "FREEZE",
            PacketType::NeedAck => "NEED_ACK",
            PacketType::Ack => "ACK",
            PacketType::Mismatch => "MISMATCH",
            PacketType::RttProbe => "RTT_PROBE",
            PacketType::RttResps => "RTT_RESPS",
            PacketType::Stream => "STREAM",
        }
    }

    /// Bytes of header this type occupies (for DATA, before the message bytes).
    pub fn header_len(self) -> usize {
        match self {
            PacketType::Data => DATA_HEADER_LEN,
            PacketType::Grant => COMMON_HEADER_LEN + 5,
            PacketType::Resend => COMMON_HEADER_LEN + 9,
            PacketType::Cutoffs => COMMON_HEADER_LEN + 4 * MAX_PRIORITIES + 2,
            PacketType::Ack => COMMON_HEADER_LEN + 2 + MAX_ACKS * ACK_ENTRY_LEN,
            PacketType::RttProbe | PacketType::RttResps => RTT_HEADER_LEN,
            PacketType::Stream => STREAM_HEADER_LEN,
            PacketType::RpcUnknown
            | PacketType::Busy
            | PacketType::Freeze
            | PacketType::NeedAck
            | PacketType::Mismatch => COMMON_HEADER_LEN,
        }
    }

    /// The fewest bytes a packet of this type may have: [`Self::header_len`],
    /// except RESEND, which HomaModule's stripped upstream build sends
    /// without its priority byte ([`RESEND_UPSTREAM_LEN`]).
    pub fn min_len(self) -> usize {
        match self {
            PacketType::Resend => RESEND_UPSTREAM_LEN,
            _ => self.header_len(),
        }
    }

    /// The doff byte (offset 12) Linux writes for this type: header length in
    /// 4-byte words in the high nibble; 14 words for DATA, 5 for the rest.
    pub fn doff(self) -> u8 {
        match self {
            PacketType::Data => ((DATA_HEADER_LEN / 4) as u8) << 4,
            _ => 5 << 4,
        }
    }
}

impl std::fmt::Display for PacketType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The fields of the common header that carry information. The type byte is
/// implied by the [`Body`], the doff byte by the type, and the sequence field
/// by the DATA offset; the remaining bytes are zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CommonHeader {
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// RPC id as known to the sender of the packet: even from a client,
    /// `id | 1` from a server. The receiver's own id is `sender_id ^ 1`.
    pub sender_id: u64,
}

impl CommonHeader {
    /// The sender's RPC id and, for a DATA packet, its retransmit flag,
    /// read straight from the bytes of a packet this host built (for a
    /// driver that needs only these; nothing is validated, and `None` means
    /// `buf` is too short to hold them).
    pub fn peek_id_and_retransmit(buf: &[u8]) -> Option<(u64, bool)> {
        if buf.len() < COMMON_HEADER_LEN {
            return None;
        }
        let retransmit = buf[OFF_TYPE] == PacketType::Data as u8
            && buf.len() > OFF_RETRANSMIT
            && buf[OFF_RETRANSMIT] != 0;
        Some((be64(buf, OFF_SENDER_ID), retransmit))
    }

    /// Source port, destination port and RPC id of a packet's common
    /// header, whatever its type (e.g. the start of one of our packets as
    /// an ICMP error quotes it); `None` if `buf` is shorter than the common
    /// header. Nothing else is checked.
    pub fn peek_ports_and_id(buf: &[u8]) -> Option<(u16, u16, u64)> {
        if buf.len() < COMMON_HEADER_LEN {
            return None;
        }
        Some((
            be16(buf, OFF_SPORT),
            be16(buf, OFF_DPORT),
            be64(buf, OFF_SENDER_ID),
        ))
    }

    /// The common header of `buf` if it is a DATA packet long enough to
    /// hold a DATA header; nothing else is checked (for a receiver that
    /// must sort packets cheaply before parsing them, e.g. under a flood).
    pub fn peek_data(buf: &[u8]) -> Option<CommonHeader> {
        if buf.len() < DATA_HEADER_LEN || buf[OFF_TYPE] != PacketType::Data as u8 {
            return None;
        }
        Some(CommonHeader {
            sport: be16(buf, OFF_SPORT),
            dport: be16(buf, OFF_DPORT),
            sender_id: be64(buf, OFF_SENDER_ID),
        })
    }
}

/// One acknowledgement: the server may free the state of this RPC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AckEntry {
    /// The client's id for the RPC; 0 means "no ack".
    pub client_id: u64,
    /// The server port the RPC was sent to.
    pub server_port: u16,
}

impl AckEntry {
    fn read(b: &[u8]) -> AckEntry {
        AckEntry {
            client_id: be64(b, 0),
            server_port: be16(b, 8),
        }
    }

    fn write(&self, out: &mut impl BufMut) {
        out.put_u64(self.client_id);
        out.put_u16(self.server_port);
    }
}

impl RttInfo {
    // `b` holds at least the 14 body bytes (checked against the length).
    fn read(b: &[u8]) -> RttInfo {
        RttInfo {
            nonce: be64(b, 0),
            link_mbps: be32(b, 8),
            unsched_ratio: be16(b, 12),
        }
    }

    fn write(&self, out: &mut impl BufMut) {
        out.put_u64(self.nonce);
        out.put_u32(self.link_mbps);
        out.put_u16(self.unsched_ratio);
    }
}

/// Up to [`MAX_ACKS`] ack entries, as carried by an ACK packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AckList {
    len: u8,
    entries: [AckEntry; MAX_ACKS],
}

impl AckList {
    /// An empty list.
    pub fn new() -> AckList {
        AckList::default()
    }

    /// Adds an entry; returns it back if the list is already full.
    pub fn push(&mut self, entry: AckEntry) -> Result<(), AckEntry> {
        if self.is_full() {
            return Err(entry);
        }
        self.entries[self.len as usize] = entry;
        self.len += 1;
        Ok(())
    }

    /// Number of valid entries.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True when no more entries fit.
    pub fn is_full(&self) -> bool {
        self.len as usize == MAX_ACKS
    }

    /// The valid entries.
    pub fn as_slice(&self) -> &[AckEntry] {
        &self.entries[..self.len as usize]
    }
}

impl<'a> FromIterator<&'a AckEntry> for AckList {
    /// Collects at most [`MAX_ACKS`] entries; further ones are ignored.
    fn from_iter<I: IntoIterator<Item = &'a AckEntry>>(iter: I) -> Self {
        let mut list = AckList::new();
        for e in iter.into_iter().take(MAX_ACKS) {
            let _ = list.push(*e);
        }
        list
    }
}

/// The DATA-specific header fields (bytes 28..56).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DataHeader {
    /// Total bytes in the message.
    pub message_length: u32,
    /// The receiver can count on every byte below this offset arriving
    /// without more grants. HomaModule's stripped upstream build has no
    /// grants and leaves this field (its `reserved1`) zero: a receiver
    /// reads 0 as "no claim" (see `homa_core`).
    pub incoming: u32,
    /// One piggy-backed acknowledgement (client id 0 = none).
    pub ack: AckEntry,
    /// Version of the newest CUTOFFS the sender got from this receiver; 0 = none
    /// (always 0 from the upstream build, which has no CUTOFFS).
    pub cutoff_version: u16,
    /// Sent because of a RESEND.
    pub retransmit: bool,
    /// Extension flags in the first pad byte; see [`DATA_FLAG_INCAST`].
    pub flags: u8,
    /// Offset in the message of this packet's first data byte.
    pub offset: u32,
    /// With [`DATA_FLAG_STREAM`]: the message's sequence number in its
    /// direction of the stream (bytes 50-51, pad that Linux writes as zero
    /// and never reads); 0 otherwise.
    pub stream_seq: u16,
}

/// What follows the common header, by packet type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body<'a> {
    /// Message bytes.
    Data {
        /// DATA header fields.
        header: DataHeader,
        /// The message bytes this packet carries.
        payload: &'a [u8],
    },
    /// The sender may now send every byte below `offset`.
    Grant {
        /// Grant limit (exclusive).
        offset: u32,
        /// Priority for all further DATA of this message.
        priority: u8,
    },
    /// Please send `length` bytes starting at `offset` again.
    Resend {
        /// First byte wanted.
        offset: u32,
        /// Bytes wanted; [`RESEND_ALL`] = everything sent so far. (This
        /// implementation sends 0 as a liveness probe for an RPC whose
        /// message waits for grants; Linux never sends 0.)
        length: u32,
        /// Priority for the retransmitted DATA.
        priority: u8,
    },
    /// No state for this RPC.
    RpcUnknown,
    /// Alive, but not sending for this RPC now.
    Busy,
    /// Unscheduled priority cutoffs: `cutoffs[i]` is the largest message
    /// length that uses priority `i`.
    Cutoffs {
        /// One cutoff per priority level.
        cutoffs: [u32; MAX_PRIORITIES],
        /// Version number of this set of cutoffs.
        version: u16,
    },
    /// Debugging aid; may be ignored.
    Freeze,
    /// Please acknowledge this RPC's response.
    NeedAck,
    /// The receiver runs another design (see [`PacketType::Mismatch`]).
    Mismatch,
    /// These RPCs are finished.
    Ack {
        /// The acknowledgements.
        acks: AckList,
    },
    /// ByteDance mode: please echo `nonce` at once (RTT measurement).
    RttProbe(RttInfo),
    /// ByteDance mode: the echo of a probe's `nonce`.
    RttResps(RttInfo),
    /// RPC streaming control (see [`StreamCtl`]).
    Stream(StreamCtl),
}

/// What a STREAM packet does.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum StreamOp {
    /// Client to server: open a stream on this RPC id; `limit` is the
    /// client's receive window (the server may send messages below it).
    #[default]
    Open = 1,
    /// Server to client: the stream is accepted; `limit` is the server's
    /// receive window.
    Accept = 2,
    /// Every message below `next` arrived whole; messages below `limit`
    /// may be sent (the receive window, moved by the application reading).
    Ack = 3,
    /// The stream is aborted: the receiver drops it and fails what waits.
    Reset = 4,
    /// An [`StreamOp::Ack`] in answer to NEED_ACK, from a receiver that has
    /// no byte of message `next`: a message lost whole draws no RESEND, so
    /// its sender sends it again.
    Missing = 5,
}

impl StreamOp {
    /// The op with this code, if any.
    pub fn from_code(code: u8) -> Option<StreamOp> {
        [
            StreamOp::Open,
            StreamOp::Accept,
            StreamOp::Ack,
            StreamOp::Reset,
            StreamOp::Missing,
        ]
        .into_iter()
        .find(|o| *o as u8 == code)
    }
}

/// The body of a STREAM packet. Sequence numbers are the low 16 bits of
/// per-direction message counters, compared modulo 2^16 (a window is far
/// smaller than 2^15).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct StreamCtl {
    /// What the packet does.
    pub op: StreamOp,
    /// [`StreamOp::Ack`]: the next message expected (all below arrived).
    pub next: u16,
    /// The sender of this packet accepts messages with a sequence number
    /// below this (its receive window).
    pub limit: u16,
}

/// The body of RTT_PROBE and RTT_RESPS (ByteDance mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RttInfo {
    /// Opaque to the receiver: a probe's sender puts what it likes there
    /// (homa-core: a random nonce, never a clock a peer could fake), a
    /// response echoes the probe's.
    pub nonce: u64,
    /// The packet sender's link rate (Mbit/s); 0 = unknown.
    pub link_mbps: u32,
    /// The packet sender's measured unscheduled ratio as a receiver
    /// (thousandths of its incoming bytes; [`RATIO_UNKNOWN`] = none yet).
    pub unsched_ratio: u16,
}

impl Body<'_> {
    /// The packet type of this body.
    pub fn packet_type(&self) -> PacketType {
        match self {
            Body::Data { .. } => PacketType::Data,
            Body::Grant { .. } => PacketType::Grant,
            Body::Resend { .. } => PacketType::Resend,
            Body::RpcUnknown => PacketType::RpcUnknown,
            Body::Busy => PacketType::Busy,
            Body::Mismatch => PacketType::Mismatch,
            Body::Cutoffs { .. } => PacketType::Cutoffs,
            Body::Freeze => PacketType::Freeze,
            Body::NeedAck => PacketType::NeedAck,
            Body::Ack { .. } => PacketType::Ack,
            Body::RttProbe(_) => PacketType::RttProbe,
            Body::RttResps(_) => PacketType::RttResps,
            Body::Stream(_) => PacketType::Stream,
        }
    }
}

/// A whole Homa packet, borrowing its message bytes from the buffer it was
/// parsed from (or that the caller built it from).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<'a> {
    /// Ports and RPC id.
    pub common: CommonHeader,
    /// Type-specific fields.
    pub body: Body<'a>,
}

impl<'a> Packet<'a> {
    /// Parses one packet. Never panics. Bytes after the fixed body of a
    /// control packet are ignored (a sender may pad short packets); for DATA
    /// they are the message bytes. A 36-byte RESEND (HomaModule's upstream
    /// layout, no priority byte) parses with [`RESEND_DEFAULT_PRIORITY`].
    pub fn parse(buf: &'a [u8]) -> Result<Packet<'a>, WireError> {
        if buf.len() < COMMON_HEADER_LEN {
            return Err(WireError::Truncated {
                what: "unknown",
                needed: COMMON_HEADER_LEN,
                got: buf.len(),
            });
        }
        let code = buf[OFF_TYPE];
        let ty = PacketType::from_code(code).ok_or(WireError::UnknownType(code))?;
        if buf.len() < ty.min_len() {
            return Err(WireError::Truncated {
                what: ty.name(),
                needed: ty.min_len(),
                got: buf.len(),
            });
        }
        let common = CommonHeader {
            sport: be16(buf, OFF_SPORT),
            dport: be16(buf, OFF_DPORT),
            sender_id: be64(buf, OFF_SENDER_ID),
        };
        let b = OFF_BODY;
        let body = match ty {
            PacketType::Data => {
                let header = DataHeader {
                    message_length: be32(buf, OFF_MSG_LEN),
                    incoming: be32(buf, OFF_INCOMING),
                    ack: AckEntry::read(&buf[OFF_ACK..OFF_ACK + ACK_ENTRY_LEN]),
                    cutoff_version: be16(buf, OFF_CUTOFF_VERSION),
                    retransmit: buf[OFF_RETRANSMIT] != 0,
                    flags: buf[OFF_FLAGS],
                    offset: match be32(buf, OFF_DATA_OFFSET) {
                        // Linux writes -1 here when the offset is only in
                        // the sequence field (single-packet sends, TSO).
                        u32::MAX => be32(buf, OFF_SEQUENCE),
                        offset => offset,
                    },
                    stream_seq: be16(buf, OFF_STREAM_SEQ),
                };
                let payload = &buf[DATA_HEADER_LEN..];
                let end = header.offset as u64 + payload.len() as u64;
                if end > header.message_length as u64 {
                    return Err(WireError::DataOutOfRange {
                        offset: header.offset,
                        end,
                        message_length: header.message_length,
                    });
                }
                Body::Data { header, payload }
            }
            PacketType::Grant => Body::Grant {
                offset: be32(buf, b),
                priority: check_priority(ty, buf[b + 4])?,
            },
            PacketType::Resend => Body::Resend {
                offset: be32(buf, b),
                length: be32(buf, b + 4),
                // The upstream layout ends before the priority byte.
                priority: match buf.get(b + 8) {
                    Some(&p) => check_priority(ty, p)?,
                    None => RESEND_DEFAULT_PRIORITY,
                },
            },
            PacketType::RpcUnknown => Body::RpcUnknown,
            PacketType::Busy => Body::Busy,
            PacketType::Mismatch => Body::Mismatch,
            PacketType::Cutoffs => {
                let mut cutoffs = [0u32; MAX_PRIORITIES];
                for (i, c) in cutoffs.iter_mut().enumerate() {
                    *c = be32(buf, b + 4 * i);
                }
                Body::Cutoffs {
                    cutoffs,
                    version: be16(buf, b + 4 * MAX_PRIORITIES),
                }
            }
            PacketType::Freeze => Body::Freeze,
            PacketType::NeedAck => Body::NeedAck,
            PacketType::Ack => {
                let n = be16(buf, b);
                if n as usize > MAX_ACKS {
                    return Err(WireError::TooManyAcks(n));
                }
                let mut acks = AckList::new();
                for i in 0..n as usize {
                    let at = b + 2 + i * ACK_ENTRY_LEN;
                    let _ = acks.push(AckEntry::read(&buf[at..at + ACK_ENTRY_LEN]));
                }
                Body::Ack { acks }
            }
            PacketType::RttProbe => Body::RttProbe(RttInfo::read(&buf[b..])),
            PacketType::RttResps => Body::RttResps(RttInfo::read(&buf[b..])),
            PacketType::Stream => Body::Stream(StreamCtl {
                op: StreamOp::from_code(buf[b]).ok_or(WireError::BadStreamOp(buf[b]))?,
                next: be16(buf, b + 2),
                limit: be16(buf, b + 4),
            }),
        };
        Ok(Packet { common, body })
    }

    /// The packet's type.
    pub fn packet_type(&self) -> PacketType {
        self.body.packet_type()
    }

    /// Bytes [`Packet::emit`] writes.
    pub fn wire_len(&self) -> usize {
        let payload = match &self.body {
            Body::Data { payload, .. } => payload.len(),
            _ => 0,
        };
        self.packet_type().header_len() + payload
    }

    /// Appends the packet's bytes to `out`.
    pub fn emit(&self, out: &mut impl BufMut) {
        let ty = self.packet_type();
        let sequence = match &self.body {
            Body::Data { header, .. } => header.offset,
            _ => 0,
        };
        if let Body::Data { header, payload } = &self.body {
            out.put_slice(&data_header_bytes(&self.common, header));
            out.put_slice(payload);
            return;
        }
        emit_common(&self.common, ty, sequence, out);
        match &self.body {
            Body::Data { .. } => {}
            Body::Grant { offset, priority } => {
                out.put_u32(*offset);
                out.put_u8(*priority);
            }
            Body::Resend {
                offset,
                length,
                priority,
            } => {
                out.put_u32(*offset);
                out.put_u32(*length);
                out.put_u8(*priority);
            }
            Body::RpcUnknown | Body::Busy | Body::Freeze | Body::NeedAck | Body::Mismatch => {}
            Body::Cutoffs { cutoffs, version } => {
                for c in cutoffs {
                    out.put_u32(*c);
                }
                out.put_u16(*version);
            }
            Body::Ack { acks } => {
                out.put_u16(acks.len() as u16);
                for e in acks.as_slice() {
                    e.write(out);
                }
                for _ in acks.len()..MAX_ACKS {
                    AckEntry::default().write(out);
                }
            }
            Body::RttProbe(info) | Body::RttResps(info) => info.write(out),
            Body::Stream(c) => {
                out.put_u8(c.op as u8);
                out.put_u8(0);
                out.put_u16(c.next);
                out.put_u16(c.limit);
                out.put_u16(0);
            }
        }
    }

    /// The packet's bytes in a new vector.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.wire_len());
        self.emit(&mut v);
        v
    }

    /// Appends only the 56 header bytes of a DATA packet, so that a caller can
    /// append the message bytes from wherever they live without building a
    /// [`Packet`] around them first.
    pub fn emit_data_header(common: &CommonHeader, header: &DataHeader, out: &mut impl BufMut) {
        out.put_slice(&data_header_bytes(common, header));
    }
}

fn emit_common(c: &CommonHeader, ty: PacketType, sequence: u32, out: &mut impl BufMut) {
    out.put_u16(c.sport);
    out.put_u16(c.dport);
    out.put_u32(sequence);
    out.put_slice(&[0, 0, 0]);
    out.put_u8(ty.code());
    out.put_u8(ty.doff());
    out.put_slice(&[0; 7]);
    out.put_u64(c.sender_id);
}

/// The 56 header bytes of a DATA packet (the common header with the
/// message offset as its sequence, then the DATA fields).
fn data_header_bytes(c: &CommonHeader, h: &DataHeader) -> [u8; DATA_HEADER_LEN] {
    let mut b = [0; DATA_HEADER_LEN];
    write_data_header(c, h, &mut b);
    b
}

/// Writes every byte of a DATA packet's header into `b` at fixed offsets
/// (what [`Packet::emit`] writes for DATA, before the message bytes).
pub(crate) fn write_data_header(c: &CommonHeader, h: &DataHeader, b: &mut [u8; DATA_HEADER_LEN]) {
    b[OFF_SPORT..OFF_SPORT + 2].copy_from_slice(&c.sport.to_be_bytes());
    b[OFF_DPORT..OFF_DPORT + 2].copy_from_slice(&c.dport.to_be_bytes());
    b[OFF_SEQUENCE..OFF_SEQUENCE + 4].copy_from_slice(&h.offset.to_be_bytes());
    b[OFF_SEQUENCE + 4..OFF_TYPE].fill(0);
    b[OFF_TYPE] = PacketType::Data.code();
    b[OFF_TYPE + 1] = PacketType::Data.doff();
    b[OFF_TYPE + 2..OFF_SENDER_ID].fill(0);
    b[OFF_SENDER_ID..OFF_SENDER_ID + 8].copy_from_slice(&c.sender_id.to_be_bytes());
    b[OFF_MSG_LEN..OFF_MSG_LEN + 4].copy_from_slice(&h.message_length.to_be_bytes());
    b[OFF_INCOMING..OFF_INCOMING + 4].copy_from_slice(&h.incoming.to_be_bytes());
    b[OFF_ACK..OFF_ACK + 8].copy_from_slice(&h.ack.client_id.to_be_bytes());
    b[OFF_ACK + 8..OFF_ACK + ACK_ENTRY_LEN].copy_from_slice(&h.ack.server_port.to_be_bytes());
    b[OFF_CUTOFF_VERSION..OFF_CUTOFF_VERSION + 2].copy_from_slice(&h.cutoff_version.to_be_bytes());
    b[OFF_RETRANSMIT] = h.retransmit as u8;
    b[OFF_FLAGS] = h.flags;
    b[OFF_STREAM_SEQ..OFF_STREAM_SEQ + 2].copy_from_slice(&h.stream_seq.to_be_bytes());
    b[OFF_DATA_OFFSET..OFF_DATA_OFFSET + 4].copy_from_slice(&h.offset.to_be_bytes());
}

fn check_priority(ty: PacketType, priority: u8) -> Result<u8, WireError> {
    if (priority as usize) < MAX_PRIORITIES {
        Ok(priority)
    } else {
        Err(WireError::BadPriority {
            what: ty.name(),
            priority,
        })
    }
}

// Callers have checked the length against the type's header length.
// (One bounds check a read, and inlined: parsing a DATA header reads a
// dozen fields.)
#[inline]
fn be16(b: &[u8], at: usize) -> u16 {
    let mut a = [0u8; 2];
    a.copy_from_slice(&b[at..at + 2]);
    u16::from_be_bytes(a)
}

#[inline]
fn be32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(a)
}

#[inline]
fn be64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_match_the_wire_document() {
        assert_eq!(OFF_DATA_OFFSET + 4, DATA_HEADER_LEN);
        assert_eq!(PacketType::Grant.header_len(), 33);
        assert_eq!(PacketType::Resend.header_len(), 37);
        assert_eq!(PacketType::Cutoffs.header_len(), 62);
        assert_eq!(PacketType::Ack.header_len(), 80);
        assert_eq!(PacketType::Data.doff(), 0xE0);
        assert_eq!(PacketType::Busy.doff(), 0x50);
    }

    #[test]
    fn data_offset_minus_one_means_use_the_sequence_field() {
        let common = CommonHeader {
            sport: 1,
            dport: 2,
            sender_id: 4,
        };
        let header = DataHeader {
            message_length: 3_000,
            offset: 1_400,
            ..DataHeader::default()
        };
        let mut v = Vec::new();
        Packet::emit_data_header(&common, &header, &mut v);
        v.extend_from_slice(&[9; 100]);
        v[OFF_DATA_OFFSET..DATA_HEADER_LEN].copy_from_slice(&[0xff; 4]);
        let p = Packet::parse(&v).unwrap();
        let Body::Data { header: h, payload } = p.body else {
            panic!()
        };
        assert_eq!((h.offset, payload.len()), (1_400, 100));
    }

    /// HomaModule's upstream (stripped) RESEND has no priority byte: 36
    /// bytes parse, with the top priority; 35 are truncated; the 37-byte
    /// form still reads its priority.
    #[test]
    fn upstream_resend_of_36_bytes_parses() {
        let full = Packet {
            common: CommonHeader {
                sport: 5000,
                dport: 40000,
                sender_id: 0x1235,
            },
            body: Body::Resend {
                offset: 2_848,
                length: 1_424,
                priority: 2,
            },
        }
        .to_vec();
        assert_eq!(full.len(), 37);
        let p = Packet::parse(&full).unwrap();
        assert!(matches!(p.body, Body::Resend { priority: 2, .. }));

        let upstream = &full[..RESEND_UPSTREAM_LEN];
        let p = Packet::parse(upstream).unwrap();
        assert_eq!(
            p.body,
            Body::Resend {
                offset: 2_848,
                length: 1_424,
                priority: RESEND_DEFAULT_PRIORITY,
            }
        );
        assert_eq!(p.common.sender_id, 0x1235);
        // What we send is still the 37-byte form.
        assert_eq!(p.to_vec().len(), 37);

        assert_eq!(
            Packet::parse(&full[..35]),
            Err(WireError::Truncated {
                what: "RESEND",
                needed: 36,
                got: 35,
            })
        );
        assert_eq!(PacketType::Resend.min_len(), 36);
        for t in PacketType::ALL {
            if t != PacketType::Resend {
                assert_eq!(t.min_len(), t.header_len(), "{t}");
            }
        }
    }

    /// The upstream build's DATA header has the same 56 bytes, with
    /// `incoming` and `cutoff_version` reserved (zero) and the offset always
    /// in the segment field.
    #[test]
    fn upstream_data_header_parses() {
        let mut v = vec![0u8; DATA_HEADER_LEN];
        v[0..2].copy_from_slice(&5000u16.to_be_bytes());
        v[2..4].copy_from_slice(&40000u16.to_be_bytes());
        v[4..8].copy_from_slice(&1_424u32.to_be_bytes());
        v[OFF_TYPE] = 0x10;
        v[12] = 0xE0;
        v[20..28].copy_from_slice(&7u64.to_be_bytes());
        v[OFF_MSG_LEN..OFF_MSG_LEN + 4].copy_from_slice(&5_000u32.to_be_bytes());
        v[OFF_DATA_OFFSET..].copy_from_slice(&1_424u32.to_be_bytes());
        v.extend_from_slice(&[1; 1_424]);
        let p = Packet::parse(&v).unwrap();
        let Body::Data { header, payload } = p.body else {
            panic!("not DATA")
        };
        assert_eq!(
            (header.offset, header.incoming, header.cutoff_version),
            (1_424, 0, 0)
        );
        assert_eq!((header.message_length, payload.len()), (5_000, 1_424));
    }

    #[test]
    fn type_codes_round_trip() {
        for t in PacketType::ALL {
            assert_eq!(PacketType::from_code(t.code()), Some(t));
            assert_eq!(PacketType::ALL[t.index()], t);
        }
        assert_eq!(PacketType::from_code(0x19), None);
        assert_eq!(PacketType::from_code(0x0f), None);
    }

    #[test]
    fn peeked_id_and_retransmit_agree_with_a_parse() {
        let common = CommonHeader {
            sport: 1,
            dport: 2,
            sender_id: 0x0123_4567_89ab_cdef,
        };
        for retransmit in [false, true] {
            let header = DataHeader {
                message_length: 3_000,
                retransmit,
                ..DataHeader::default()
            };
            let mut v = Vec::new();
            Packet::emit_data_header(&common, &header, &mut v);
            assert_eq!(
                CommonHeader::peek_id_and_retransmit(&v),
                Some((common.sender_id, retransmit))
            );
            let p = Packet::parse(&v).unwrap();
            let Body::Data { header: h, .. } = p.body else {
                panic!()
            };
            assert_eq!(h.retransmit, retransmit);
        }
        // A GRANT has no retransmit flag, whatever its byte 48 holds.
        let mut v = Vec::new();
        Packet {
            common,
            body: Body::Grant {
                offset: 5,
                priority: 1,
            },
        }
        .emit(&mut v);
        assert_eq!(
            CommonHeader::peek_id_and_retransmit(&v),
            Some((common.sender_id, false))
        );
        assert_eq!(CommonHeader::peek_id_and_retransmit(&v[..10]), None);
    }
}
