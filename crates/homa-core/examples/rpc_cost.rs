//! The core's own cost of one small RPC, without sockets or threads: two
//! endpoints exchange `count` requests and responses of `size` bytes in
//! memory, and the time per RPC (both ends, every packet parsed and built)
//! is printed. `cargo run --release -p homa-core --example rpc_cost -- [count] [size]`
//!
//! This is the floor under the runtime's latency: a 100 B round trip over
//! loopback costs two send and two receive system calls plus this.

use bytes::Bytes;
use homa_core::{Config, Endpoint, Event};
use std::net::SocketAddr;
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let count: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let size: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100);
    let a_addr: SocketAddr = "10.0.0.1:4000".parse().expect("address");
    let b_addr: SocketAddr = "10.0.0.2:4000".parse().expect("address");
    let mut a = Endpoint::new(Config::default(), a_addr, 1).expect("client config");
    let mut b = Endpoint::new(Config::default(), b_addr, 2).expect("server config");
    let request = Bytes::from(vec![7u8; size]);
    let t0 = Instant::now();
    let mut now = 0u64;
    let mut packets = 0u64;
    for _ in 0..count {
        now += 5_000;
        a.send_request(now, b_addr, request.clone()).expect("send");
        while let Some(t) = a.poll_transmit(now) {
            packets += 1;
            b.handle_packet(now, a_addr.ip(), &t.to_bytes());
        }
        while let Some(e) = b.poll_event() {
            if let Event::Request { rpc, message } = e {
                b.reply(now, rpc, message.into_bytes()).expect("reply");
            }
        }
        while let Some(t) = b.poll_transmit(now) {
            packets += 1;
            a.handle_packet(now, b_addr.ip(), &t.to_bytes());
        }
        let mut got = false;
        while let Some(e) = a.poll_event() {
            got |= matches!(e, Event::Response { .. });
        }
        assert!(got, "no response");
        if a.poll_timeout().is_some_and(|t| t <= now) {
            a.handle_timeout(now);
        }
        if b.poll_timeout().is_some_and(|t| t <= now) {
            b.handle_timeout(now);
        }
    }
    let el = t0.elapsed();
    println!(
        "{count} RPCs of {size} B: {:.0} ns per RPC (both ends), {:.2} packets per RPC",
        el.as_nanos() as f64 / count as f64,
        packets as f64 / count as f64
    );
}
