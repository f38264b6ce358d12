//! Malformed packets: every way `Packet::parse` can refuse a byte string, the
//! error it reports and how that error reads; plus the irregularities it must
//! tolerate (padding after control packets, non-zero unused header bytes).

use homa_wire::{
    AckEntry, AckList, Body, CommonHeader, DataHeader, Packet, PacketType, WireError,
    COMMON_HEADER_LEN, DATA_HEADER_LEN,
};

const COMMON: CommonHeader = CommonHeader {
    sport: 0x8123,
    dport: 0x4567,
    sender_id: 0x0123_4567_89AB_CDEE,
};

/// One valid packet of each type (DATA with a 10-byte payload).
fn sample_packets() -> Vec<Packet<'static>> {
    const PAYLOAD: &[u8] = b"0123456789";
    let mut acks = AckList::new();
    acks.push(AckEntry {
        client_id: 42,
        server_port: 99,
    })
    .unwrap();
    let bodies = [
        Body::Data {
            header: DataHeader {
                message_length: 5000,
                incoming: 4000,
                ack: AckEntry {
                    client_id: 7,
                    server_port: 8,
                },
                cutoff_version: 9,
                retransmit: true,
                flags: 0,
                offset: 2000,
                stream_seq: 0,
            },
            payload: PAYLOAD,
        },
        Body::Grant {
            offset: 12345,
            priority: 3,
        },
        Body::Resend {
            offset: 100,
            length: 200,
            priority: 4,
        },
        Body::RpcUnknown,
        Body::Busy,
        Body::Cutoffs {
            cutoffs: [0x7FFF_FFFF, 0, 0, 0, 1_000_000, 15_000, 2_800, 200],
            version: 2,
        },
        Body::Freeze,
        Body::NeedAck,
        Body::Ack { acks },
        Body::Mismatch,
        Body::RttProbe(homa_wire::RttInfo {
            nonce: 7,
            link_mbps: 25_000,
            unsched_ratio: 400,
        }),
        Body::RttResps(homa_wire::RttInfo {
            nonce: 7,
            link_mbps: 100_000,
            unsched_ratio: homa_wire::RATIO_UNKNOWN,
        }),
        Body::Stream(homa_wire::StreamCtl {
            op: homa_wire::StreamOp::Ack,
            next: 3,
            limit: 11,
        }),
    ];
    bodies
        .into_iter()
        .map(|body| Packet {
            common: COMMON,
            body,
        })
        .collect()
}

fn valid_bytes(ty: PacketType) -> Vec<u8> {
    sample_packets()
        .into_iter()
        .find(|p| p.packet_type() == ty)
        .unwrap()
        .to_vec()
}

/// A DATA packet's bytes with the given offset, message length and payload.
fn data_bytes(offset: u32, message_length: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    Packet::emit_data_header(
        &COMMON,
        &DataHeader {
            message_length,
            offset,
            ..DataHeader::default()
        },
        &mut v,
    );
    v.extend_from_slice(payload);
    v
}

fn err(bytes: &[u8]) -> WireError {
    match Packet::parse(bytes) {
        Ok(p) => panic!("expected an error, parsed {p:?}"),
        Err(e) => e,
    }
}

#[test]
fn truncated_common_header() {
    let full = valid_bytes(PacketType::Grant);
    for got in [0, 1, 4, 11, 12, 20, COMMON_HEADER_LEN - 1] {
        let e = err(&full[..got]);
        assert_eq!(
            e,
            WireError::Truncated {
                what: "unknown",
                needed: COMMON_HEADER_LEN,
                got,
            }
        );
        assert_eq!(e.packet_type(), None);
        assert_eq!(
            e.to_string(),
            format!("truncated unknown packet: need 28 bytes, got {got}")
        );
    }
}

#[test]
fn truncated_body_of_each_type_one_byte_short() {
    for ty in PacketType::ALL {
        let bytes = valid_bytes(ty);
        // (RESEND may lack its priority byte: HomaModule's upstream layout.)
        let needed = ty.min_len();
        let short = &bytes[..needed - 1];
        let e = err(short);
        if needed > COMMON_HEADER_LEN {
            // The type byte is readable, so the error names the type.
            assert_eq!(
                e,
                WireError::Truncated {
                    what: ty.name(),
                    needed,
                    got: needed - 1,
                },
                "{ty}"
            );
            assert_eq!(e.packet_type(), Some(ty));
            let text = e.to_string();
            assert_eq!(
                text,
                format!(
                    "truncated {} packet: need {needed} bytes, got {}",
                    ty,
                    needed - 1
                )
            );
            assert!(text.contains(ty.name()), "{text}");
        } else {
            // Empty-body types: one byte short is a short common header.
            assert_eq!(
                e,
                WireError::Truncated {
                    what: "unknown",
                    needed: COMMON_HEADER_LEN,
                    got: COMMON_HEADER_LEN - 1,
                },
                "{ty}"
            );
        }
        // Exactly the header length parses (DATA: with no payload it is
        // still inside its message).
        assert!(Packet::parse(&bytes[..needed]).is_ok(), "{ty}");
    }
}

#[test]
fn truncated_data_header_every_length() {
    let bytes = valid_bytes(PacketType::Data);
    for got in COMMON_HEADER_LEN..DATA_HEADER_LEN {
        assert_eq!(
            err(&bytes[..got]),
            WireError::Truncated {
                what: "DATA",
                needed: DATA_HEADER_LEN,
                got,
            }
        );
    }
}

#[test]
fn unknown_type_codes() {
    let mut bytes = valid_bytes(PacketType::Ack);
    for code in [0x00u8, 0x0f, 0x19, 0xff] {
        bytes[11] = code;
        let e = err(&bytes);
        assert_eq!(e, WireError::UnknownType(code));
        assert_eq!(e.packet_type(), None);
        assert_eq!(e.to_string(), format!("unknown packet type 0x{code:02x}"));
    }
    // Every code outside 0x10..=0x18 and our 0x1c..=0x1f is unknown, even
    // with a bare common header.
    for code in (0..=255u8).filter(|c| !(0x10..=0x18).contains(c) && !(0x1c..=0x1f).contains(c)) {
        bytes[11] = code;
        assert_eq!(
            err(&bytes[..COMMON_HEADER_LEN]),
            WireError::UnknownType(code)
        );
    }
}

#[test]
fn short_packet_with_unknown_type_reports_truncation() {
    // The length of the common header is checked before the type byte.
    let mut bytes = valid_bytes(PacketType::Busy);
    bytes[11] = 0x19;
    assert!(matches!(
        err(&bytes[..20]),
        WireError::Truncated {
            what: "unknown",
            ..
        }
    ));
}

#[test]
fn grant_and_resend_priority_out_of_range() {
    for (ty, at) in [(PacketType::Grant, 32), (PacketType::Resend, 36)] {
        let mut bytes = valid_bytes(ty);
        assert_eq!(bytes.len(), at + 1, "priority is the last header byte");
        for priority in [8u8, 9, 0x80, 255] {
            bytes[at] = priority;
            let e = err(&bytes);
            assert_eq!(
                e,
                WireError::BadPriority {
                    what: ty.name(),
                    priority,
                }
            );
            assert_eq!(e.packet_type(), Some(ty));
            assert_eq!(
                e.to_string(),
                format!("{ty} priority {priority} is out of range 0..=7")
            );
        }
        for priority in 0..=7u8 {
            bytes[at] = priority;
            assert!(Packet::parse(&bytes).is_ok(), "{ty} priority {priority}");
        }
    }
}

#[test]
fn ack_with_too_many_entries() {
    let mut bytes = valid_bytes(PacketType::Ack);
    for n in [6u16, 7, 0x100, 0xFFFF] {
        bytes[28..30].copy_from_slice(&n.to_be_bytes());
        let e = err(&bytes);
        assert_eq!(e, WireError::TooManyAcks(n));
        assert_eq!(e.packet_type(), Some(PacketType::Ack));
        assert_eq!(
            e.to_string(),
            format!("ACK packet claims {n} acks; at most 5 fit")
        );
    }
    for n in 0..=5u16 {
        bytes[28..30].copy_from_slice(&n.to_be_bytes());
        match Packet::parse(&bytes).unwrap().body {
            Body::Ack { acks } => assert_eq!(acks.len(), n as usize),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn data_past_end_of_message() {
    // One byte too many.
    let e = err(&data_bytes(100, 109, &[1; 10]));
    assert_eq!(
        e,
        WireError::DataOutOfRange {
            offset: 100,
            end: 110,
            message_length: 109,
        }
    );
    assert_eq!(e.packet_type(), Some(PacketType::Data));
    assert_eq!(
        e.to_string(),
        "DATA bytes 100..110 lie outside a message of 109 bytes"
    );

    // Exactly at the end is fine, also for an empty payload at the end.
    assert!(Packet::parse(&data_bytes(100, 110, &[1; 10])).is_ok());
    assert!(Packet::parse(&data_bytes(110, 110, &[])).is_ok());
    // An empty payload past the end is not.
    assert!(matches!(
        err(&data_bytes(111, 110, &[])),
        WireError::DataOutOfRange { end: 111, .. }
    ));
    // A zero-length message carries no bytes.
    assert!(matches!(
        err(&data_bytes(0, 0, &[0])),
        WireError::DataOutOfRange { end: 1, .. }
    ));
}

#[test]
fn data_offset_near_u32_max_does_not_wrap() {
    // offset + len would wrap to a small number in 32-bit arithmetic.
    let e = err(&data_bytes(0xFFFF_FFF0, 0xFFFF_FFFF, &[0; 32]));
    assert_eq!(
        e,
        WireError::DataOutOfRange {
            offset: 0xFFFF_FFF0,
            end: 0x1_0000_0010,
            message_length: 0xFFFF_FFFF,
        }
    );
    let e = err(&data_bytes(u32::MAX, u32::MAX, &[7]));
    assert_eq!(
        e,
        WireError::DataOutOfRange {
            offset: u32::MAX,
            end: 1 << 32,
            message_length: u32::MAX,
        }
    );
    assert_eq!(
        e.to_string(),
        "DATA bytes 4294967295..4294967296 lie outside a message of 4294967295 bytes"
    );
    // Wrapping to exactly 0 / to below a small message length.
    assert!(matches!(
        err(&data_bytes(u32::MAX - 4, 3, &[0; 5])),
        WireError::DataOutOfRange { .. }
    ));
    // The largest in-range case is accepted.
    assert!(Packet::parse(&data_bytes(u32::MAX - 4, u32::MAX, &[0; 4])).is_ok());
    assert!(Packet::parse(&data_bytes(u32::MAX, u32::MAX, &[])).is_ok());
}

#[test]
fn control_packets_with_trailing_padding_still_parse() {
    for p in sample_packets() {
        let ty = p.packet_type();
        if ty == PacketType::Data {
            continue; // for DATA, trailing bytes are message bytes
        }
        let exact = p.to_vec();
        for pad in [1usize, 3, 18, 100] {
            let mut padded = exact.clone();
            padded.extend_from_slice(&vec![0xCC; pad]);
            let parsed = Packet::parse(&padded)
                .unwrap_or_else(|e| panic!("{ty} with {pad} padding bytes: {e}"));
            assert_eq!(parsed, p, "{ty} + {pad}");
            assert_eq!(parsed.wire_len(), exact.len());
            assert_eq!(
                parsed.to_vec(),
                exact,
                "{ty}: padding is dropped on re-emission"
            );
        }
    }
}

#[test]
fn data_trailing_bytes_are_payload() {
    let bytes = data_bytes(0, 64, &[9; 64]);
    match Packet::parse(&bytes).unwrap().body {
        Body::Data { payload, .. } => assert_eq!(payload, &[9; 64]),
        other => panic!("{other:?}"),
    }
}

#[test]
fn nonzero_unused_header_bytes_are_ignored() {
    // Linux Homa sets TCP-hijacking fields on every packet it sends
    // (flags = 6 at byte 13, checksum at 16, urgent = 0xb97d at 18) and, for
    // TSO DATA segments without hijacking, doff = 0xD0; older versions wrote
    // other doff values for control packets. None of these change meaning.
    for p in sample_packets() {
        let ty = p.packet_type();
        let mut bytes = p.to_vec();
        bytes[8..11].copy_from_slice(&[0xAB, 0xCD, 0xEF]); // ack (unused)
        bytes[12] = if ty == PacketType::Data { 0xD0 } else { 0x40 }; // doff
        bytes[13] = 6; // flags
        bytes[14..16].copy_from_slice(&[0xFF, 0xFF]); // window
        bytes[16..18].copy_from_slice(&[0x12, 0x34]); // checksum
        bytes[18..20].copy_from_slice(&[0xB9, 0x7D]); // urgent
        if ty != PacketType::Data {
            bytes[4..8].copy_from_slice(&[1, 2, 3, 4]); // sequence: DATA only
        }
        let parsed = Packet::parse(&bytes).unwrap_or_else(|e| panic!("{ty}: {e}"));
        assert_eq!(parsed, p, "{ty}");
        assert_eq!(
            parsed.to_vec(),
            p.to_vec(),
            "{ty}: re-emission is canonical"
        );
    }
}

#[test]
fn data_offset_comes_from_byte_52_not_sequence() {
    let mut bytes = data_bytes(1000, 2000, &[1; 10]);
    bytes[4..8].copy_from_slice(&0x0BAD_0BADu32.to_be_bytes());
    match Packet::parse(&bytes).unwrap().body {
        Body::Data { header, .. } => assert_eq!(header.offset, 1000),
        other => panic!("{other:?}"),
    }
}

#[test]
fn every_error_display_is_a_sentence_naming_the_type() {
    let cases = [
        (
            err(&valid_bytes(PacketType::Cutoffs)[..40]),
            "truncated CUTOFFS packet: need 62 bytes, got 40",
        ),
        (
            err(&[0u8; 5]),
            "truncated unknown packet: need 28 bytes, got 5",
        ),
        (
            err(&{
                let mut b = valid_bytes(PacketType::Busy);
                b[11] = 0x42;
                b
            }),
            "unknown packet type 0x42",
        ),
        (
            err(&{
                let mut b = valid_bytes(PacketType::Resend);
                b[36] = 200;
                b
            }),
            "RESEND priority 200 is out of range 0..=7",
        ),
        (
            err(&{
                let mut b = valid_bytes(PacketType::Ack);
                b[29] = 9;
                b
            }),
            "ACK packet claims 9 acks; at most 5 fit",
        ),
        (
            err(&data_bytes(5, 5, b"x")),
            "DATA bytes 5..6 lie outside a message of 5 bytes",
        ),
    ];
    for (e, text) in cases {
        let shown = e.to_string();
        assert_eq!(shown, text);
        assert!(!shown.is_empty() && !shown.ends_with(' '));
        // Each message names the packet type (or says it is unknown).
        let names_type =
            PacketType::ALL.iter().any(|t| shown.contains(t.name())) || shown.contains("unknown");
        assert!(names_type, "{shown}");
        // Debug is available too (for logs).
        assert!(!format!("{e:?}").is_empty());
    }
}
