//! [`HeaderBuf`]: a Homa header (or a whole control packet) held inline,
//! so that building a packet to send allocates nothing.

use crate::packet::{
    write_data_header, CommonHeader, DataHeader, Packet, DATA_HEADER_LEN, MAX_HEADER_LEN,
};
use std::fmt;
use std::ops::Deref;

/// Up to [`MAX_HEADER_LEN`] bytes held inline (no heap allocation): the
/// header of a DATA packet, or a whole control packet. Reads as a `&[u8]`
/// of its length ([`Deref`]).
#[derive(Clone, Copy)]
pub struct HeaderBuf {
    /// Valid bytes at the start of `bytes` (at most [`MAX_HEADER_LEN`]).
    len: u8,
    /// The bytes; those past `len` are zero.
    bytes: [u8; MAX_HEADER_LEN],
}

const _: () = assert!(DATA_HEADER_LEN <= MAX_HEADER_LEN && MAX_HEADER_LEN <= u8::MAX as usize);

impl HeaderBuf {
    /// No bytes.
    pub const fn new() -> HeaderBuf {
        HeaderBuf {
            len: 0,
            bytes: [0; MAX_HEADER_LEN],
        }
    }

    /// The [`crate::DATA_HEADER_LEN`] header bytes of a DATA packet, as
    /// [`Packet::emit_data_header`] writes them.
    pub fn data(common: &CommonHeader, header: &DataHeader) -> HeaderBuf {
        let mut h = HeaderBuf::new();
        let (head, _) = h
            .bytes
            .split_first_chunk_mut::<DATA_HEADER_LEN>()
            .expect("fits");
        write_data_header(common, header, head);
        h.len = DATA_HEADER_LEN as u8;
        h
    }

    /// The bytes of `packet` as [`Packet::emit`] writes them, if they fit:
    /// every packet but a DATA packet that carries message bytes (`None`).
    pub fn packet(packet: &Packet<'_>) -> Option<HeaderBuf> {
        if packet.wire_len() > MAX_HEADER_LEN {
            return None;
        }
        let mut h = HeaderBuf::new();
        let mut out = &mut h.bytes[..];
        packet.emit(&mut out);
        let left = out.len();
        h.len = (MAX_HEADER_LEN - left) as u8;
        Some(h)
    }

    /// A copy of `bytes`, if they fit (at most [`MAX_HEADER_LEN`]).
    pub fn from_slice(bytes: &[u8]) -> Option<HeaderBuf> {
        if bytes.len() > MAX_HEADER_LEN {
            return None;
        }
        let mut h = HeaderBuf::new();
        h.bytes[..bytes.len()].copy_from_slice(bytes);
        h.len = bytes.len() as u8;
        Some(h)
    }

    /// The valid bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

impl Default for HeaderBuf {
    fn default() -> HeaderBuf {
        HeaderBuf::new()
    }
}

impl Deref for HeaderBuf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for HeaderBuf {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl PartialEq for HeaderBuf {
    fn eq(&self, other: &HeaderBuf) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for HeaderBuf {}

impl std::hash::Hash for HeaderBuf {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state);
    }
}

impl fmt::Debug for HeaderBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("HeaderBuf").field(&self.as_slice()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AckEntry, AckList, Body, PacketType, MAX_ACKS};

    #[test]
    fn max_header_len_is_the_longest_header() {
        let longest = PacketType::ALL.iter().map(|t| t.header_len()).max();
        assert_eq!(longest, Some(MAX_HEADER_LEN));
    }

    fn common() -> CommonHeader {
        CommonHeader {
            sport: 4000,
            dport: 40_001,
            sender_id: 0x1234_5678_9abc_def0,
        }
    }

    #[test]
    fn data_header_matches_emit_data_header() {
        let header = DataHeader {
            message_length: 100_000,
            incoming: 60_000,
            ack: AckEntry {
                client_id: 42,
                server_port: 4000,
            },
            cutoff_version: 3,
            retransmit: true,
            flags: 0x11,
            offset: 1_400,
            stream_seq: 9,
        };
        let mut v = Vec::new();
        Packet::emit_data_header(&common(), &header, &mut v);
        let h = HeaderBuf::data(&common(), &header);
        assert_eq!(h.len(), DATA_HEADER_LEN);
        assert_eq!(&h[..], &v[..]);
        assert_eq!(h, HeaderBuf::from_slice(&v).unwrap());
    }

    #[test]
    fn control_packets_fit_and_match_to_vec() {
        let acks: AckList = (0..MAX_ACKS as u64)
            .map(|i| AckEntry {
                client_id: 2 * i + 2,
                server_port: 7,
            })
            .collect::<Vec<_>>()
            .iter()
            .collect();
        for body in [
            Body::Ack { acks },
            Body::Grant {
                offset: 10_000,
                priority: 3,
            },
            Body::Busy,
            Body::Cutoffs {
                cutoffs: [1, 2, 3, 4, 5, 6, 7, 8],
                version: 2,
            },
        ] {
            let p = Packet {
                common: common(),
                body,
            };
            let h = HeaderBuf::packet(&p).unwrap();
            assert_eq!(&h[..], &p.to_vec()[..]);
            assert_eq!(Packet::parse(&h).unwrap(), p);
        }
    }

    #[test]
    fn data_with_payload_does_not_fit() {
        let p = Packet {
            common: common(),
            body: Body::Data {
                header: DataHeader::default(),
                payload: &[1; 100],
            },
        };
        assert!(HeaderBuf::packet(&p).is_none());
        assert!(HeaderBuf::from_slice(&[0; MAX_HEADER_LEN + 1]).is_none());
        assert!(HeaderBuf::default().is_empty());
    }
}
