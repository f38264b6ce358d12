//! Parse arbitrary bytes as a Homa packet. `Packet::parse` must never panic;
//! whatever it accepts must survive emit -> parse unchanged, and the emitted
//! length must be what `wire_len` promised (never longer than the input, but
//! for the upstream 36-byte RESEND, which gains its priority byte).

#![no_main]

use homa_wire::{Body, Packet, PacketType, RESEND_UPSTREAM_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(packet) = Packet::parse(data) else {
        return;
    };
    let bytes = packet.to_vec();
    assert_eq!(bytes.len(), packet.wire_len());
    // A 36-byte RESEND (HomaModule's upstream layout) comes back with its
    // priority byte: one byte longer. Anything else never grows.
    if packet.packet_type() == PacketType::Resend && data.len() == RESEND_UPSTREAM_LEN {
        assert_eq!(bytes.len(), data.len() + 1);
    } else {
        assert!(bytes.len() <= data.len());
    }
    if let Body::Data { .. } = packet.body {
        // For DATA every input byte after the header is message data.
        assert_eq!(bytes.len(), data.len());
    }
    let reparsed = Packet::parse(&bytes).expect("emitted packet must parse");
    assert_eq!(reparsed, packet);
    // Emission is canonical: doing it again changes nothing.
    assert_eq!(reparsed.to_vec(), bytes);
});
