//! What a flood of spoofed first DATA packets costs the core, per packet:
//! `cargo run --release -p homa-core --example flood_cost [PACKETS] [PPS]`.
//!
//! Every packet comes from a new address and port with a random RPC id and
//! a message of several packets (so none completes), as `homa-attack
//! flood` sends them; simulated time advances at PPS packets per second
//! and timers run when due. Prints CPU time per packet and what the core
//! sent in answer. A measurement, not a test.

use homa_core::{Config, Endpoint};
use homa_wire::{AckEntry, Body, CommonHeader, DataHeader, Packet};
use rand::{Rng, SeedableRng};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Instant;

/// Packets a driver takes before it asks the core for output.
const BATCH: u64 = 16;

fn arg(i: usize, default: u64) -> u64 {
    match std::env::args().nth(i) {
        None => default,
        Some(s) => s.parse().unwrap_or_else(|_| {
            eprintln!("error: argument {i} ({s:?}) is not a whole number");
            std::process::exit(2)
        }),
    }
}

fn main() {
    let packets = arg(1, 500_000);
    let pps = arg(2, 100_000).max(1);
    let config = Config::default();
    let local = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 4000);
    let mut ep = Endpoint::new(config.clone(), local, 1).expect("default config is valid");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let payload = vec![0x5au8; config.max_payload() as usize];
    let make = |rng: &mut rand_chacha::ChaCha8Rng| {
        let src = IpAddr::V4(Ipv4Addr::new(127, 0, 0, rng.gen_range(2..=254)));
        let len = rng.gen_range(2 * config.max_payload()..=config.max_message_size);
        let common = CommonHeader {
            sport: rng.gen_range(1..=u16::MAX),
            dport: local.port(),
            sender_id: rng.gen_range(1..u64::MAX / 2) * 2,
        };
        let header = DataHeader {
            message_length: len,
            incoming: len.min(config.unsched_bytes),
            ack: AckEntry::default(),
            cutoff_version: 0,
            retransmit: false,
            flags: 0,
            offset: 0,
            stream_seq: 0,
        };
        let body = Body::Data {
            header,
            payload: &payload,
        };
        (src, Packet { common, body }.to_vec())
    };
    let batch: Vec<_> = (0..4096).map(|_| make(&mut rng)).collect();
    let step = 1_000_000_000 / pps;
    let mut now = 0u64;
    let mut sent = 0u64;
    let t0 = Instant::now();
    for i in 0..packets {
        // (Reusing 4,096 packets: by the time one comes round again its
        // RPC is long gone, as for fresh random ids.)
        let (src, bytes) = &batch[(i % 4096) as usize];
        ep.handle_packet(now, *src, bytes);
        now += step;
        if i % BATCH != BATCH - 1 {
            continue;
        }
        // (A driver takes packets in batches, as the runtime's recvmmsg.)
        if ep.poll_timeout().is_some_and(|t| t <= now) {
            ep.handle_timeout(now);
        }
        while ep.poll_transmit(now).is_some() {
            sent += 1;
        }
        while ep.poll_event().is_some() {}
    }
    let cpu = t0.elapsed();
    let m = ep.metrics();
    println!(
        "{packets} spoofed first packets at {pps} pkt/s (simulated): {:.0} ns of CPU per packet, \
         {sent} packets sent in answer; peak state: {} RPCs, {} peers",
        cpu.as_nanos() as f64 / packets as f64,
        m.active_rpcs,
        m.peers
    );
}
