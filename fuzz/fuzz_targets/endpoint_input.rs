//! Feed an endpoint arbitrary packets, time steps and replies. It must never
//! panic, never emit a packet that does not parse, and its buffered bytes
//! must stay within the configured limit.
//!
//! Input format: a first byte choosing the design (even: Homa, odd: SIRD),
//! then records `[op, len, bytes…]`; `op % 4` is 0/1 = deliver `bytes` as
//! a packet from one of two peers (bit 4 of `op`: marked ECN CE; bit 5:
//! the driver is backlogged), 2 = advance time by `len` ticks and run the
//! timer, 3 = start a request of `len × 97` bytes.

#![no_main]

use bytes::Bytes;
use homa_core::endpoint::PacketMeta;
use homa_core::{Config, Design, Endpoint, Event};
use homa_wire::Packet;
use libfuzzer_sys::fuzz_target;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

fuzz_target!(|data: &[u8]| {
    let Some((&design, data)) = data.split_first() else {
        return;
    };
    let mut config = Config::default();
    config.rx_buffer_limit = 4 << 20;
    config.design = if design % 2 == 0 {
        Design::Homa
    } else {
        Design::Sird
    };
    let limit = config.rx_buffer_limit;
    let tick = config.tick_ns;
    let local = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)), 4000);
    let peers = [
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)),
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3)),
    ];
    let mut ep = Endpoint::new(config, local, 7).unwrap();
    let mut now = 0u64;
    let mut rest = data;
    while rest.len() >= 2 {
        let (op, len) = (rest[0], rest[1] as usize);
        rest = &rest[2..];
        match op % 4 {
            0 | 1 => {
                let n = len.min(rest.len());
                let meta = PacketMeta {
                    ce: op & 0x10 != 0,
                    backlogged: op & 0x20 != 0,
                };
                ep.handle_packet_meta(now, peers[(op % 2) as usize], &rest[..n], meta);
                rest = &rest[n..];
            }
            2 => {
                now += tick * (len as u64 + 1);
                ep.handle_timeout(now);
            }
            _ => {
                let dest = SocketAddr::new(peers[0], 4000);
                let _ = ep.send_request(now, dest, Bytes::from(vec![0u8; len * 97]));
            }
        }
        while let Some(ev) = ep.poll_event() {
            if let Event::Request { rpc, .. } = ev {
                ep.reply(now, rpc, Bytes::from_static(b"ok")).unwrap();
            }
        }
        let mut emitted = 0;
        while let Some(t) = ep.poll_transmit(now) {
            Packet::parse(&t.to_bytes()).expect("the core emits valid packets");
            emitted += 1;
            assert!(emitted < 100_000, "runaway output");
        }
        assert!(ep.metrics().rx_bytes_buffered <= limit);
    }
});
