//! Golden byte strings for every Homa packet type.
//!
//! Each expected packet is written out by hand, byte by byte, following the
//! offsets of the wire-format document (common header: 28 bytes; DATA header:
//! 56 bytes; all multi-byte fields big-endian). Every field holds a distinct,
//! non-zero value where the format allows it, so a swapped, shifted or
//! wrongly sized field makes the comparison fail.
//!
//! For each packet the test checks that
//! (a) `Packet::parse(bytes)` yields the expected `Packet`,
//! (b) `packet.to_vec()` reproduces `bytes` exactly, and
//! (c) `wire_len()` equals `bytes.len()`,
//! plus the type byte (offset 11), the doff byte (offset 12) and, for DATA,
//! that the sequence field (offset 4) equals the data offset.

use homa_wire::{
    AckEntry, AckList, Body, CommonHeader, DataHeader, Packet, PacketType, RttInfo,
    CUTOFF_UNLIMITED, DATA_FLAG_INCAST, RATIO_UNKNOWN, RESEND_ALL,
};

/// Common header fields used by packets a client sends (even id).
const CLIENT: CommonHeader = CommonHeader {
    sport: 0x8123,
    dport: 0x4567,
    sender_id: 0x0123_4567_89AB_CDEE,
};

/// Common header fields used by packets a server sends (odd id).
const SERVER: CommonHeader = CommonHeader {
    sport: 0x4567,
    dport: 0x8123,
    sender_id: 0x0123_4567_89AB_CDEF,
};

fn acks(entries: &[AckEntry]) -> AckList {
    let list: AckList = entries.iter().collect();
    assert_eq!(list.len(), entries.len());
    list
}

/// Runs checks (a), (b), (c) and the header-byte checks on one golden packet.
fn check(bytes: &[u8], expected: &Packet<'_>) {
    let ty = expected.packet_type();

    // Hand-written layout sanity: type and doff bytes where the document says.
    assert_eq!(bytes[11], ty.code(), "type byte (offset 11) of {ty}");
    let doff = if ty == PacketType::Data { 0xE0 } else { 0x50 };
    assert_eq!(bytes[12], doff, "doff byte (offset 12) of {ty}");
    assert_eq!(ty.doff(), doff, "PacketType::doff of {ty}");
    let sequence = u32::from_be_bytes(bytes[4..8].try_into().unwrap());
    match &expected.body {
        Body::Data { header, .. } => {
            assert_eq!(
                sequence, header.offset,
                "DATA sequence (offset 4) = data offset"
            );
            let off52 = u32::from_be_bytes(bytes[52..56].try_into().unwrap());
            assert_eq!(off52, header.offset, "DATA offset field (offset 52)");
        }
        _ => assert_eq!(sequence, 0, "sequence of {ty} is zero"),
    }

    // (a) parse
    let parsed =
        Packet::parse(bytes).unwrap_or_else(|e| panic!("{ty} golden failed to parse: {e}"));
    assert_eq!(&parsed, expected, "{ty}: parse");
    // (b) emit
    assert_eq!(expected.to_vec(), bytes, "{ty}: to_vec");
    let mut via_emit = Vec::new();
    expected.emit(&mut via_emit);
    assert_eq!(via_emit, bytes, "{ty}: emit");
    // (c) length
    assert_eq!(expected.wire_len(), bytes.len(), "{ty}: wire_len");
    assert_eq!(parsed.wire_len(), bytes.len(), "{ty}: wire_len of parsed");
    if ty != PacketType::Data {
        assert_eq!(ty.header_len(), bytes.len(), "{ty}: header_len");
    }
}

#[test]
fn data_with_payload() {
    #[rustfmt::skip]
    let bytes: &[u8] = &[
        // --- common header ---
        0x81, 0x23,                                     //  0: sport
        0x45, 0x67,                                     //  2: dport
        0x00, 0x01, 0x5F, 0x90,                         //  4: sequence = offset 90_000
        0x00, 0x00, 0x00,                               //  8: ack (unused)
        0x10,                                           // 11: type DATA
        0xE0,                                           // 12: doff (14 words)
        0x00,                                           // 13: flags
        0x00, 0x00,                                     // 14: window
        0x00, 0x00,                                     // 16: checksum
        0x00, 0x00,                                     // 18: urgent
        0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEE, // 20: sender_id
        // --- DATA header ---
        0x00, 0x0F, 0x42, 0x3F,                         // 28: message_length 999_999
        0x00, 0x02, 0x71, 0x00,                         // 32: incoming 160_000
        0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, // 36: ack.client_id
        0x99, 0xAA,                                     // 44: ack.server_port
        0xBE, 0xEF,                                     // 46: cutoff_version
        0x01,                                           // 48: retransmit
        0x01, 0x00, 0x00,                               // 49: pad (byte 49: incast flag)
        0x00, 0x01, 0x5F, 0x90,                         // 52: offset 90_000
        // --- message bytes ---
        b'H', b'o', b'm', b'a', b'!', 0x00, 0xFF,       // 56: payload (7 bytes)
    ];
    let expected = Packet {
        common: CLIENT,
        body: Body::Data {
            header: DataHeader {
                message_length: 999_999,
                incoming: 160_000,
                ack: AckEntry {
                    client_id: 0x1122_3344_5566_7788,
                    server_port: 0x99AA,
                },
                cutoff_version: 0xBEEF,
                retransmit: true,
                flags: DATA_FLAG_INCAST,
                offset: 90_000,
                stream_seq: 0,
            },
            payload: b"Homa!\x00\xff",
        },
    };
    check(bytes, &expected);
    assert_eq!(bytes.len(), 56 + 7);

    // emit_data_header writes exactly the first 56 bytes.
    if let Body::Data { header, .. } = &expected.body {
        let mut hdr = Vec::new();
        Packet::emit_data_header(&expected.common, header, &mut hdr);
        assert_eq!(hdr, &bytes[..56]);
    }
}

#[test]
fn data_last_bytes_of_message_no_retransmit() {
    // A server's response packet whose payload ends exactly at the end of the
    // message; no piggy-backed ack, not a retransmission, no flags.
    #[rustfmt::skip]
    let bytes: &[u8] = &[
        0x45, 0x67,                                     //  0: sport
        0x81, 0x23,                                     //  2: dport
        0x00, 0x00, 0x05, 0x78,                         //  4: sequence = offset 1400
        0x00, 0x00, 0x00,                               //  8: ack (unused)
        0x10,                                           // 11: type DATA
        0xE0,                                           // 12: doff
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,       // 13: flags, window, checksum, urgent
        0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF, // 20: sender_id (server: odd)
        0x00, 0x00, 0x05, 0x7B,                         // 28: message_length 1403
        0x00, 0x00, 0x05, 0x7B,                         // 32: incoming 1403
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // 36: ack.client_id 0 = none
        0x00, 0x00,                                     // 44: ack.server_port
        0x00, 0x03,                                     // 46: cutoff_version 3
        0x00,                                           // 48: retransmit
        0x00, 0x00, 0x00,                               // 49: pad
        0x00, 0x00, 0x05, 0x78,                         // 52: offset 1400
        0xDE, 0xAD, 0x01,                               // 56: payload (3 bytes)
    ];
    let expected = Packet {
        common: SERVER,
        body: Body::Data {
            header: DataHeader {
                message_length: 1403,
                incoming: 1403,
                ack: AckEntry::default(),
                cutoff_version: 3,
                retransmit: false,
                flags: 0,
                offset: 1400,
                stream_seq: 0,
            },
            payload: &[0xDE, 0xAD, 0x01],
        },
    };
    check(bytes, &expected);
}

#[test]
fn data_zero_length_message() {
    #[rustfmt::skip]
    let bytes: &[u8] = &[
        0x81, 0x23,                                     //  0: sport
        0x45, 0x67,                                     //  2: dport
        0x00, 0x00, 0x00, 0x00,                         //  4: sequence = offset 0
        0x00, 0x00, 0x00,                               //  8: ack (unused)
        0x10,                                           // 11: type DATA
        0xE0,                                           // 12: doff
        0x00,                                           // 13: flags
        0x00, 0x00,                                     // 14: window
        0x00, 0x00,                                     // 16: checksum
        0x00, 0x00,                                     // 18: urgent
        0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEE, // 20: sender_id
        0x00, 0x00, 0x00, 0x00,                         // 28: message_length 0
        0x00, 0x00, 0x00, 0x00,                         // 32: incoming 0
        0xA0, 0xB1, 0xC2, 0xD3, 0xE4, 0xF5, 0x06, 0x18, // 36: ack.client_id
        0x1F, 0x90,                                     // 44: ack.server_port 8080
        0x00, 0x07,                                     // 46: cutoff_version 7
        0x00,                                           // 48: retransmit
        0x00, 0x00, 0x00,                               // 49: pad
        0x00, 0x00, 0x00, 0x00,                         // 52: offset 0
        // no message bytes
    ];
    let expected = Packet {
        common: CLIENT,
        body: Body::Data {
            header: DataHeader {
                message_length: 0,
                incoming: 0,
                ack: AckEntry {
                    client_id: 0xA0B1_C2D3_E4F5_0618,
                    server_port: 8080,
                },
                cutoff_version: 7,
                retransmit: false,
                flags: 0,
                offset: 0,
                stream_seq: 0,
            },
            payload: &[],
        },
    };
    check(bytes, &expected);
    assert_eq!(bytes.len(), 56);
}

#[test]
fn grant() {
    #[rustfmt::skip]
    let bytes: &[u8] = &[
        0x45, 0x67,                                     //  0: sport
        0x81, 0x23,                                     //  2: dport
        0x00, 0x00, 0x00, 0x00,                         //  4: sequence (zero)
        0x00, 0x00, 0x00,                               //  8: ack (unused)
        0x11,                                           // 11: type GRANT
        0x50,                                           // 12: doff (5 words)
        0x00,                                           // 13: flags
        0x00, 0x00,                                     // 14: window
        0x00, 0x00,                                     // 16: checksum
        0x00, 0x00,                                     // 18: urgent
        0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF, // 20: sender_id
        0x00, 0x04, 0x93, 0xE1,                         // 28: offset 300_001
        0x05,                                           // 32: priority 5
    ];
    let expected = Packet {
        common: SERVER,
        body: Body::Grant {
            offset: 300_001,
            priority: 5,
        },
    };
    check(bytes, &expected);
    assert_eq!(bytes.len(), 33);
}

/// ByteDance mode's RTT_PROBE (0x1d) and RTT_RESPS (0x1e): common header
/// (id 0: no RPC), nonce u64, link Mbit/s u32, unscheduled ratio ‰ u16.
#[test]
fn rtt_probe_and_response() {
    for (code, ratio) in [(0x1Du8, 0x0190u16), (0x1E, RATIO_UNKNOWN)] {
        #[rustfmt::skip]
        let mut bytes: Vec<u8> = vec![
            0x81, 0x23,                                     //  0: sport
            0x45, 0x67,                                     //  2: dport
            0x00, 0x00, 0x00, 0x00,                         //  4: sequence (zero)
            0x00, 0x00, 0x00,                               //  8: unused
            code,                                           // 11: type
            0x50,                                           // 12: doff (5 words)
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,       // 13: flags..urgent
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // 20: sender_id 0
            0xFE, 0xDC, 0xBA, 0x98, 0x76, 0x54, 0x32, 0x10, // 28: nonce
            0x00, 0x01, 0x86, 0xA0,                         // 36: link 100,000 Mbit/s
        ];
        bytes.extend_from_slice(&ratio.to_be_bytes()); // 40: ratio
        let info = RttInfo {
            nonce: 0xFEDC_BA98_7654_3210,
            link_mbps: 100_000,
            unsched_ratio: ratio,
        };
        let expected = Packet {
            common: CommonHeader {
                sender_id: 0,
                ..CLIENT
            },
            body: if code == 0x1D {
                Body::RttProbe(info)
            } else {
                Body::RttResps(info)
            },
        };
        check(&bytes, &expected);
        assert_eq!(bytes.len(), 42);
    }
}

#[test]
fn resend_range() {
    #[rustfmt::skip]
    let bytes: &[u8] = &[
        0x45, 0x67,                                     //  0: sport
        0x81, 0x23,                                     //  2: dport
        0x00, 0x00, 0x00, 0x00,                         //  4: sequence (zero)
        0x00, 0x00, 0x00,                               //  8: ack (unused)
        0x12,                                           // 11: type RESEND
        0x50,                                           // 12: doff
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,       // 13: flags, window, checksum, urgent
        0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF, // 20: sender_id
        0x00, 0x01, 0x11, 0x70,                         // 28: offset 70_000
        0x00, 0x00, 0x0B, 0xB8,                         // 32: length 3000
        0x06,                                           // 36: priority 6
    ];
    let expected = Packet {
        common: SERVER,
        body: Body::Resend {
            offset: 70_000,
            length: 3000,
            priority: 6,
        },
    };
    check(bytes, &expected);
    assert_eq!(bytes.len(), 37);
}

#[test]
fn resend_everything() {
    // Nothing received yet: offset 0, length 0xFFFFFFFF (-1 in Linux).
    #[rustfmt::skip]
    let bytes: &[u8] = &[
        0x81, 0x23,                                     //  0: sport
        0x45, 0x67,                                     //  2: dport
        0x00, 0x00, 0x00, 0x00,                         //  4: sequence
        0x00, 0x00, 0x00,                               //  8: ack (unused)
        0x12,                                           // 11: type RESEND
        0x50,                                           // 12: doff
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,       // 13: flags, window, checksum, urgent
        0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEE, // 20: sender_id
        0x00, 0x00, 0x00, 0x00,                         // 28: offset 0
        0xFF, 0xFF, 0xFF, 0xFF,                         // 32: length RESEND_ALL
        0x07,                                           // 36: priority 7
    ];
    let expected = Packet {
        common: CLIENT,
        body: Body::Resend {
            offset: 0,
            length: RESEND_ALL,
            priority: 7,
        },
    };
    check(bytes, &expected);
}

/// The four packet types whose body is empty.
fn empty_body(code: u8, body: Body<'static>) {
    #[rustfmt::skip]
    let bytes: [u8; 28] = [
        0x45, 0x67,                                     //  0: sport
        0x81, 0x23,                                     //  2: dport
        0x00, 0x00, 0x00, 0x00,                         //  4: sequence
        0x00, 0x00, 0x00,                               //  8: ack (unused)
        code,                                           // 11: type
        0x50,                                           // 12: doff
        0x00,                                           // 13: flags
        0x00, 0x00,                                     // 14: window
        0x00, 0x00,                                     // 16: checksum
        0x00, 0x00,                                     // 18: urgent
        0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF, // 20: sender_id
    ];
    let expected = Packet {
        common: SERVER,
        body,
    };
    check(&bytes, &expected);
}

#[test]
fn rpc_unknown() {
    empty_body(0x13, Body::RpcUnknown);
}

#[test]
fn busy() {
    empty_body(0x14, Body::Busy);
}

#[test]
fn freeze() {
    empty_body(0x16, Body::Freeze);
}

#[test]
fn need_ack() {
    empty_body(0x17, Body::NeedAck);
}

#[test]
fn cutoffs_linux_defaults() {
    // Wire-document defaults: entry 0 unlimited, 1..=3 scheduled-only (0),
    // 4: 1,000,000; 5: 15,000; 6: 2,800; 7: 200.
    #[rustfmt::skip]
    let bytes: &[u8] = &[
        0x45, 0x67,                                     //  0: sport
        0x81, 0x23,                                     //  2: dport
        0x00, 0x00, 0x00, 0x00,                         //  4: sequence
        0x00, 0x00, 0x00,                               //  8: ack (unused)
        0x15,                                           // 11: type CUTOFFS
        0x50,                                           // 12: doff
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,       // 13: flags, window, checksum, urgent
        0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF, // 20: sender_id
        0x7F, 0xFF, 0xFF, 0xFF,                         // 28: unsched_cutoffs[0] = INT_MAX
        0x00, 0x00, 0x00, 0x00,                         // 32: unsched_cutoffs[1] = 0
        0x00, 0x00, 0x00, 0x00,                         // 36: unsched_cutoffs[2] = 0
        0x00, 0x00, 0x00, 0x00,                         // 40: unsched_cutoffs[3] = 0
        0x00, 0x0F, 0x42, 0x40,                         // 44: unsched_cutoffs[4] = 1_000_000
        0x00, 0x00, 0x3A, 0x98,                         // 48: unsched_cutoffs[5] = 15_000
        0x00, 0x00, 0x0A, 0xF0,                         // 52: unsched_cutoffs[6] = 2_800
        0x00, 0x00, 0x00, 0xC8,                         // 56: unsched_cutoffs[7] = 200
        0x00, 0x01,                                     // 60: cutoff_version 1
    ];
    let expected = Packet {
        common: SERVER,
        body: Body::Cutoffs {
            cutoffs: [CUTOFF_UNLIMITED, 0, 0, 0, 1_000_000, 15_000, 2_800, 200],
            version: 1,
        },
    };
    check(bytes, &expected);
    assert_eq!(bytes.len(), 62);
}

#[test]
fn cutoffs_all_entries_distinct() {
    // Every entry different, so a swapped or shifted entry is caught.
    #[rustfmt::skip]
    let bytes: &[u8] = &[
        0x81, 0x23,                                     //  0: sport
        0x45, 0x67,                                     //  2: dport
        0x00, 0x00, 0x00, 0x00,                         //  4: sequence
        0x00, 0x00, 0x00,                               //  8: ack (unused)
        0x15,                                           // 11: type CUTOFFS
        0x50,                                           // 12: doff
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,       // 13: flags, window, checksum, urgent
        0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEE, // 20: sender_id
        0x7F, 0xFF, 0xFF, 0xFF,                         // 28: [0] = INT_MAX
        0x01, 0x02, 0x03, 0x04,                         // 32: [1]
        0x00, 0x98, 0x96, 0x80,                         // 36: [2] = 10_000_000
        0x00, 0x1E, 0x84, 0x80,                         // 40: [3] = 2_000_000
        0x00, 0x0F, 0x42, 0x40,                         // 44: [4] = 1_000_000
        0x00, 0x00, 0x3A, 0x98,                         // 48: [5] = 15_000
        0x00, 0x00, 0x0A, 0xF0,                         // 52: [6] = 2_800
        0x00, 0x00, 0x00, 0xC8,                         // 56: [7] = 200
        0xFE, 0xDC,                                     // 60: cutoff_version
    ];
    let expected = Packet {
        common: CLIENT,
        body: Body::Cutoffs {
            cutoffs: [
                0x7FFF_FFFF,
                0x0102_0304,
                10_000_000,
                2_000_000,
                1_000_000,
                15_000,
                2_800,
                200,
            ],
            version: 0xFEDC,
        },
    };
    check(bytes, &expected);
}

#[test]
fn cutoffs_as_linux_sends_them_by_default() {
    // Linux's homa_init fills only entries 4..=7 and leaves 0..=3 zero; it
    // copies that array verbatim into CUTOFFS (the receiver forces entry 0
    // to INT_MAX itself). Initial cutoff_version is 1.
    #[rustfmt::skip]
    let bytes: &[u8] = &[
        0x45, 0x67,                                     //  0: sport
        0x81, 0x23,                                     //  2: dport
        0x00, 0x00, 0x00, 0x00,                         //  4: sequence
        0x00, 0x00, 0x00,                               //  8: ack (unused)
        0x15,                                           // 11: type CUTOFFS
        0x50,                                           // 12: doff
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,       // 13: flags, window, checksum, urgent
        0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF, // 20: sender_id
        0x00, 0x00, 0x00, 0x00,                         // 28: [0]
        0x00, 0x00, 0x00, 0x00,                         // 32: [1]
        0x00, 0x00, 0x00, 0x00,                         // 36: [2]
        0x00, 0x00, 0x00, 0x00,                         // 40: [3]
        0x00, 0x0F, 0x42, 0x40,                         // 44: [4] = 1_000_000
        0x00, 0x00, 0x3A, 0x98,                         // 48: [5] = 15_000
        0x00, 0x00, 0x0A, 0xF0,                         // 52: [6] = 2_800
        0x00, 0x00, 0x00, 0xC8,                         // 56: [7] = 200
        0x00, 0x01,                                     // 60: cutoff_version 1
    ];
    let expected = Packet {
        common: SERVER,
        body: Body::Cutoffs {
            cutoffs: [0, 0, 0, 0, 1_000_000, 15_000, 2_800, 200],
            version: 1,
        },
    };
    check(bytes, &expected);
}

#[test]
fn ack_with_no_entries() {
    #[rustfmt::skip]
    let bytes: &[u8] = &[
        0x81, 0x23,                                     //  0: sport
        0x45, 0x67,                                     //  2: dport
        0x00, 0x00, 0x00, 0x00,                         //  4: sequence
        0x00, 0x00, 0x00,                               //  8: ack (unused)
        0x18,                                           // 11: type ACK
        0x50,                                           // 12: doff
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,       // 13: flags, window, checksum, urgent
        0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEE, // 20: sender_id
        0x00, 0x00,                                     // 28: num_acks 0
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0,                   // 30: acks[0] (unused)
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0,                   // 40: acks[1] (unused)
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0,                   // 50: acks[2] (unused)
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0,                   // 60: acks[3] (unused)
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0,                   // 70: acks[4] (unused)
    ];
    let expected = Packet {
        common: CLIENT,
        body: Body::Ack {
            acks: AckList::new(),
        },
    };
    check(bytes, &expected);
    assert_eq!(bytes.len(), 80);
}

#[test]
fn ack_with_one_entry() {
    #[rustfmt::skip]
    let bytes: &[u8] = &[
        0x81, 0x23,                                     //  0: sport
        0x45, 0x67,                                     //  2: dport
        0x00, 0x00, 0x00, 0x00,                         //  4: sequence
        0x00, 0x00, 0x00,                               //  8: ack (unused)
        0x18,                                           // 11: type ACK
        0x50,                                           // 12: doff
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,       // 13: flags, window, checksum, urgent
        0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEE, // 20: sender_id
        0x00, 0x01,                                     // 28: num_acks 1
        0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, // 30: acks[0].client_id
        0x0F, 0xA1,                                     // 38: acks[0].server_port 4001
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0,                   // 40: acks[1] (unused)
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0,                   // 50: acks[2] (unused)
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0,                   // 60: acks[3] (unused)
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0,                   // 70: acks[4] (unused)
    ];
    let expected = Packet {
        common: CLIENT,
        body: Body::Ack {
            acks: acks(&[AckEntry {
                client_id: 0x1020_3040_5060_7080,
                server_port: 4001,
            }]),
        },
    };
    check(bytes, &expected);
}

#[test]
fn ack_with_five_entries() {
    #[rustfmt::skip]
    let bytes: &[u8] = &[
        0x81, 0x23,                                     //  0: sport
        0x45, 0x67,                                     //  2: dport
        0x00, 0x00, 0x00, 0x00,                         //  4: sequence
        0x00, 0x00, 0x00,                               //  8: ack (unused)
        0x18,                                           // 11: type ACK
        0x50,                                           // 12: doff
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,       // 13: flags, window, checksum, urgent
        0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEE, // 20: sender_id
        0x00, 0x05,                                     // 28: num_acks 5
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, // 30: acks[0].client_id
        0x0F, 0xA1,                                     // 38: acks[0].server_port
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x04, // 40: acks[1].client_id
        0x0F, 0xA2,                                     // 48: acks[1].server_port
        0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x06, // 50: acks[2].client_id
        0x0F, 0xA3,                                     // 58: acks[2].server_port
        0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x08, // 60: acks[3].client_id
        0x0F, 0xA4,                                     // 68: acks[3].server_port
        0xFF, 0xEE, 0xDD, 0xCC, 0xBB, 0xAA, 0x99, 0x8A, // 70: acks[4].client_id
        0xFF, 0xFF,                                     // 78: acks[4].server_port
    ];
    let entries = [
        AckEntry {
            client_id: 2,
            server_port: 4001,
        },
        AckEntry {
            client_id: 0x104,
            server_port: 4002,
        },
        AckEntry {
            client_id: 0x0003_0006,
            server_port: 4003,
        },
        AckEntry {
            client_id: 0x0004_0000_0008,
            server_port: 4004,
        },
        AckEntry {
            client_id: 0xFFEE_DDCC_BBAA_998A,
            server_port: 0xFFFF,
        },
    ];
    let expected = Packet {
        common: CLIENT,
        body: Body::Ack {
            acks: acks(&entries),
        },
    };
    check(bytes, &expected);
    if let Body::Ack { acks } = Packet::parse(bytes).unwrap().body {
        assert!(acks.is_full());
        assert_eq!(acks.as_slice(), &entries);
    }
}

#[test]
fn ack_ignores_bytes_in_unused_entries() {
    // num_acks = 2; slots 2..5 hold junk that must be neither reported nor
    // kept (re-emission writes zeros there).
    let mut bytes = Packet {
        common: CLIENT,
        body: Body::Ack {
            acks: acks(&[
                AckEntry {
                    client_id: 6,
                    server_port: 1,
                },
                AckEntry {
                    client_id: 8,
                    server_port: 2,
                },
            ]),
        },
    }
    .to_vec();
    let clean = bytes.clone();
    for b in &mut bytes[50..80] {
        *b = 0xA5;
    }
    let parsed = Packet::parse(&bytes).unwrap();
    assert_eq!(parsed.to_vec(), clean);
}

#[test]
fn sender_id_and_ports_are_not_swapped() {
    // Byte-level spot checks independent of the literal arrays above.
    let p = Packet {
        common: CommonHeader {
            sport: 0x0102,
            dport: 0x0304,
            sender_id: 0x0506_0708_090A_0B0C,
        },
        body: Body::Busy,
    };
    let b = p.to_vec();
    assert_eq!(&b[0..2], &[0x01, 0x02]);
    assert_eq!(&b[2..4], &[0x03, 0x04]);
    assert_eq!(&b[20..28], &[5, 6, 7, 8, 9, 10, 11, 12]);
    assert!(b[4..11].iter().all(|&x| x == 0));
    assert!(b[13..20].iter().all(|&x| x == 0));
}

#[test]
fn every_type_code_and_header_length() {
    let table = [
        (PacketType::Data, 0x10, 56),
        (PacketType::Grant, 0x11, 33),
        (PacketType::Resend, 0x12, 37),
        (PacketType::RpcUnknown, 0x13, 28),
        (PacketType::Busy, 0x14, 28),
        (PacketType::Cutoffs, 0x15, 62),
        (PacketType::Freeze, 0x16, 28),
        (PacketType::NeedAck, 0x17, 28),
        (PacketType::Ack, 0x18, 80),
        (PacketType::RttProbe, 0x1d, 42),
        (PacketType::RttResps, 0x1e, 42),
    ];
    for (ty, code, len) in table {
        assert_eq!(ty.code(), code, "{ty}");
        assert_eq!(ty.header_len(), len, "{ty}");
        assert_eq!(PacketType::from_code(code), Some(ty));
    }
}
