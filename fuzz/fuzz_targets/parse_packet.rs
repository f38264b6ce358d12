//! Parse arbitrary bytes as a Homa packet. `Packet::parse` must never panic;
//! whatever it accepts must survive emit -> parse unchanged, and the emitted
//! length must be what `wire_len` promised.

#![no_main]

use homa_wire::{Body, Packet};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(packet) = Packet::parse(data) else {
        return;
    };
    let bytes = packet.to_vec();
    assert_eq!(bytes.len(), packet.wire_len());
    assert!(bytes.len() <= data.len());
    if let Body::Data { .. } = packet.body {
        // For DATA every input byte after the header is message data.
        assert_eq!(bytes.len(), data.len());
    }
    let reparsed = Packet::parse(&bytes).expect("emitted packet must parse");
    assert_eq!(reparsed, packet);
    // Emission is canonical: doing it again changes nothing.
    assert_eq!(reparsed.to_vec(), bytes);
});
