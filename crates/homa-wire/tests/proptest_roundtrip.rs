//! Property tests for parse/emit.
//!
//! 1. Every valid `Packet` round-trips: `parse(to_vec(p)) == p` and
//!    `wire_len() == to_vec(p).len()`.
//! 2. `parse` never panics on arbitrary bytes (fully random, and random
//!    bodies behind a valid common header with type 0x10..=0x18); whenever it
//!    succeeds, re-emitting gives bytes that re-parse to the same packet and
//!    that agree with the input on every byte that carries meaning.
//!
//! The runs are deterministic: a fixed seed and 512 cases per property unless
//! `PROPTEST_RNG_SEED` / `PROPTEST_CASES` are set in the environment.

use homa_wire::{
    AckEntry, AckList, Body, CommonHeader, DataHeader, Packet, PacketType, ACK_ENTRY_LEN,
    COMMON_HEADER_LEN, DATA_HEADER_LEN, MAX_ACKS, MAX_PRIORITIES, RESEND_ALL,
    RESEND_DEFAULT_PRIORITY, RESEND_UPSTREAM_LEN,
};
use proptest::prelude::*;
use proptest::test_runner::RngSeed;

fn from_env<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: from_env("PROPTEST_CASES").unwrap_or(512),
        rng_seed: RngSeed::Fixed(from_env("PROPTEST_RNG_SEED").unwrap_or(0x486F_6D61)),
        // A fixed seed reproduces any failure; don't write regression files.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// A packet that owns its payload, so strategies can produce it.
#[derive(Debug, Clone)]
struct OwnedPacket {
    common: CommonHeader,
    body: OwnedBody,
}

#[derive(Debug, Clone)]
enum OwnedBody {
    Data(DataHeader, Vec<u8>),
    Other(Body<'static>),
}

impl OwnedPacket {
    fn packet(&self) -> Packet<'_> {
        let body = match &self.body {
            OwnedBody::Data(header, payload) => Body::Data {
                header: *header,
                payload,
            },
            OwnedBody::Other(b) => b.clone(),
        };
        Packet {
            common: self.common,
            body,
        }
    }
}

/// u32 values weighted towards the edges, where offset arithmetic breaks.
fn edgy_u32() -> impl Strategy<Value = u32> {
    prop_oneof![
        4 => any::<u32>(),
        1 => 0u32..4,
        1 => (u32::MAX - 3)..=u32::MAX,
        1 => 0x7FFF_FFFCu32..=0x8000_0003,
    ]
}

fn common_header() -> impl Strategy<Value = CommonHeader> {
    (any::<u16>(), any::<u16>(), any::<u64>()).prop_map(|(sport, dport, sender_id)| CommonHeader {
        sport,
        dport,
        sender_id,
    })
}

fn ack_entry() -> impl Strategy<Value = AckEntry> {
    (any::<u64>(), any::<u16>()).prop_map(|(client_id, server_port)| AckEntry {
        client_id,
        server_port,
    })
}

fn data_body() -> impl Strategy<Value = OwnedBody> {
    (
        prop::collection::vec(any::<u8>(), 0..3000),
        edgy_u32(),
        edgy_u32(),
        edgy_u32(),
        ack_entry(),
        any::<u16>(),
        any::<bool>(),
        any::<u8>(),
    )
        .prop_map(
            |(payload, raw_offset, extra, incoming, ack, cutoff_version, retransmit, flags)| {
                let len = payload.len() as u32;
                // offset + len <= message_length <= u32::MAX
                let offset = raw_offset.min(u32::MAX - len);
                let message_length = offset + len + extra.min(u32::MAX - offset - len);
                let header = DataHeader {
                    message_length,
                    incoming,
                    ack,
                    cutoff_version,
                    retransmit,
                    flags,
                    offset,
                    stream_seq: 0,
                };
                OwnedBody::Data(header, payload)
            },
        )
}

fn control_body() -> impl Strategy<Value = Body<'static>> {
    let priority = 0u8..MAX_PRIORITIES as u8;
    prop_oneof![
        (edgy_u32(), priority.clone())
            .prop_map(|(offset, priority)| Body::Grant { offset, priority }),
        (
            edgy_u32(),
            prop_oneof![3 => edgy_u32(), 1 => Just(RESEND_ALL)],
            priority
        )
            .prop_map(|(offset, length, priority)| Body::Resend {
                offset,
                length,
                priority,
            }),
        Just(Body::RpcUnknown),
        Just(Body::Busy),
        (prop::array::uniform8(edgy_u32()), any::<u16>())
            .prop_map(|(cutoffs, version)| Body::Cutoffs { cutoffs, version }),
        Just(Body::Freeze),
        Just(Body::NeedAck),
        Just(Body::Mismatch),
        (any::<u64>(), any::<u32>(), any::<u16>()).prop_map(|(nonce, link_mbps, unsched_ratio)| {
            Body::RttProbe(homa_wire::RttInfo {
                nonce,
                link_mbps,
                unsched_ratio,
            })
        }),
        (any::<u64>(), any::<u32>(), any::<u16>()).prop_map(|(nonce, link_mbps, unsched_ratio)| {
            Body::RttResps(homa_wire::RttInfo {
                nonce,
                link_mbps,
                unsched_ratio,
            })
        }),
        prop::collection::vec(ack_entry(), 0..=MAX_ACKS).prop_map(|entries| Body::Ack {
            acks: entries.iter().collect::<AckList>(),
        }),
    ]
}

fn any_packet() -> impl Strategy<Value = OwnedPacket> {
    (
        common_header(),
        prop_oneof![
            1 => data_body(),
            3 => control_body().prop_map(OwnedBody::Other),
        ],
    )
        .prop_map(|(common, body)| OwnedPacket { common, body })
}

/// A valid common header for a random type 0x10..=0x18 (with random values in
/// the bytes Linux may set, too), followed by a random body biased towards
/// small bytes so that priorities, ack counts and DATA ranges are often valid.
fn header_then_noise() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![2 => Just(0u8), 2 => 0u8..8, 1 => any::<u8>()];
    (
        prop::array::uniform28(any::<u8>()),
        0x10u8..=0x18,
        any::<bool>(),
        prop::collection::vec(byte, 0..120),
    )
        .prop_map(|(mut header, ty, canonical, tail)| {
            header[11] = ty;
            if canonical {
                // The bytes Linux Homa's own code writes.
                header[8..11].fill(0);
                header[12] = if ty == 0x10 { 0xE0 } else { 0x50 };
                header[13..20].fill(0);
            }
            let mut v = header.to_vec();
            v.extend(tail);
            v
        })
}

/// Whether byte `i` of a packet of type `ty` carries information that
/// `Packet` keeps; all other bytes are written canonically by `emit`.
fn meaningful(ty: PacketType, num_acks: usize, i: usize) -> bool {
    match i {
        0..=3 => true,    // ports
        4..=7 => false,   // sequence: zero, or (DATA) a copy of the offset
        8..=10 => false,  // unused ack bytes
        11 => true,       // type
        12..=19 => false, // doff, flags, window, checksum, urgent
        20..=27 => true,  // sender id
        _ => match ty {
            PacketType::Data => i != 48,
            PacketType::Ack => i < COMMON_HEADER_LEN + 2 + num_acks * ACK_ENTRY_LEN,
            _ => true,
        },
    }
}

/// Checks a successful parse of `input`: re-emission re-parses to the same
/// packet and agrees with the input on every meaningful byte.
fn check_reemission(input: &[u8], parsed: &Packet<'_>) -> Result<(), TestCaseError> {
    let ty = parsed.packet_type();
    let out = parsed.to_vec();
    prop_assert_eq!(out.len(), parsed.wire_len());
    // (A 36-byte RESEND, HomaModule's upstream layout, comes back with its
    // priority byte: one byte longer.)
    if !(ty == PacketType::Resend && input.len() == RESEND_UPSTREAM_LEN) {
        prop_assert!(out.len() <= input.len());
    }
    if ty == PacketType::Data {
        // DATA owns every byte of the input: trailing bytes are payload.
        prop_assert_eq!(out.len(), input.len());
    } else {
        prop_assert_eq!(out.len(), ty.header_len());
    }

    let reparsed = Packet::parse(&out);
    prop_assert_eq!(reparsed.as_ref(), Ok(parsed));

    let num_acks = match &parsed.body {
        Body::Ack { acks } => acks.len(),
        _ => 0,
    };
    for (i, (&a, &b)) in input.iter().zip(&out).enumerate() {
        if meaningful(ty, num_acks, i) {
            prop_assert_eq!(a, b, "byte {} of {} differs", i, ty);
        }
    }
    // The canonical bytes.
    prop_assert_eq!(out[12], ty.doff());
    prop_assert!(out[8..11].iter().chain(&out[13..20]).all(|&x| x == 0));
    if let Body::Data { header, .. } = &parsed.body {
        prop_assert_eq!(&out[4..8], &header.offset.to_be_bytes()[..]);
        prop_assert_eq!(out[48], header.retransmit as u8);
        prop_assert_eq!(input[48] != 0, header.retransmit);
        // (Pad bytes to Linux, which writes zeros there; our streams'
        // message number.)
        prop_assert_eq!(&out[50..52], &header.stream_seq.to_be_bytes()[..]);
        prop_assert!(out.len() >= DATA_HEADER_LEN);
    } else {
        prop_assert_eq!(&out[4..8], &[0u8; 4][..]);
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn valid_packets_round_trip(p in any_packet()) {
        let packet = p.packet();
        let bytes = packet.to_vec();
        prop_assert_eq!(bytes.len(), packet.wire_len());
        let parsed = Packet::parse(&bytes);
        prop_assert_eq!(parsed.as_ref(), Ok(&packet));
        check_reemission(&bytes, &packet)?;
    }

    #[test]
    fn parse_arbitrary_bytes_never_panics(input in prop::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(p) = Packet::parse(&input) {
            check_reemission(&input, &p)?;
        }
    }

    #[test]
    fn parse_header_then_noise(input in header_then_noise()) {
        match Packet::parse(&input) {
            Ok(p) => check_reemission(&input, &p)?,
            Err(e) => {
                // The type byte is valid, so the error concerns that type.
                let ty = PacketType::from_code(input[11]).unwrap();
                prop_assert_eq!(e.packet_type(), Some(ty));
                prop_assert!(e.to_string().contains(ty.name()));
            }
        }
    }

    #[test]
    fn every_prefix_of_a_valid_packet_parses_or_errors(p in any_packet(), cut in any::<prop::sample::Index>()) {
        let bytes = p.packet().to_vec();
        let n = cut.index(bytes.len() + 1);
        let prefix = &bytes[..n];
        match Packet::parse(prefix) {
            Ok(q) => {
                // Only DATA may lose bytes and still parse (fewer payload
                // bytes), and RESEND its priority byte (the upstream layout).
                let ty = q.packet_type();
                let upstream_resend = ty == PacketType::Resend && n == RESEND_UPSTREAM_LEN;
                prop_assert!(n == bytes.len() || ty == PacketType::Data || upstream_resend);
                if upstream_resend {
                    let default_priority = matches!(q.body, Body::Resend { priority: RESEND_DEFAULT_PRIORITY, .. });
                    prop_assert!(default_priority);
                    prop_assert_eq!(&q.to_vec()[..n], prefix);
                } else {
                    check_reemission(prefix, &q)?;
                }
            }
            Err(_) => prop_assert!(n < p.packet().packet_type().min_len()),
        }
    }
}
