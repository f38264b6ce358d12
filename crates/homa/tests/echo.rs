//! Echo RPCs at the sizes where segmentation changes (0, 1, one packet's
//! payload −1/±0/+1, 100 KB, 1 MB) over UDP/IPv4, UDP/IPv6 and (as root)
//! raw IPv4 protocol 146, with the default (MTU 1500) and loopback
//! (MTU 65,000) configurations. Every byte is checked.

mod common;

use common::{assert_bytes, is_root, max_payload, pattern, EchoServer, CALL_TIMEOUT};
use homa::{Config, Endpoint, Transport};
use std::net::SocketAddr;
use std::time::Instant;

fn echo_sizes(name: &str, ip: &str, transport: Transport, mut config: Config) {
    if transport == Transport::Raw && !is_root() {
        eprintln!("{name}: skipped: raw IP (protocol 146) needs root");
        return;
    }
    config.transport = transport;
    let any: SocketAddr = format!("{ip}:0").parse().unwrap();
    let server = EchoServer::bind(any, config.clone(), 2);
    let client = Endpoint::bind(any, config.clone()).unwrap();

    // The payload per packet, as the runtime computes it after setting
    // lower_header_bytes from the socket kind.
    let p = max_payload(&config, any);
    assert_eq!(
        client.config().core.max_payload() as usize,
        p,
        "{name}: runtime's max_payload"
    );
    assert_eq!(server.endpoint().config().core.max_payload() as usize, p);

    let start = Instant::now();
    let sizes = [0, 1, p - 1, p, p + 1, 100_000, 1_000_000];
    for (i, &len) in sizes.iter().enumerate() {
        let msg = pattern(i as u64, len);
        let t = Instant::now();
        let r = client
            .call(server.addr, msg.clone(), CALL_TIMEOUT)
            .unwrap_or_else(|e| panic!("{name}: {len} B: {e}"));
        assert_bytes(&msg, &r, &format!("{name}: {len} B"));
        if t.elapsed().as_millis() > 500 {
            eprintln!("{name}: {len} B took {:?}", t.elapsed());
        }
    }
    // A few back-to-back reuses of one endpoint pair with the sizes
    // interleaved (state from earlier RPCs must not leak into later ones).
    for round in 0..3u64 {
        for (i, &len) in sizes.iter().enumerate().take(5) {
            let msg = pattern(100 + round * 10 + i as u64, len);
            let r = client.call(server.addr, msg.clone(), CALL_TIMEOUT).unwrap();
            assert_bytes(&msg, &r, &format!("{name}: round {round}, {len} B"));
        }
    }
    let m = client.metrics();
    assert_eq!(m.responses_delivered, (sizes.len() + 15) as u64);
    assert_eq!(m.rpcs_failed, 0, "{name}");
    eprintln!(
        "{name}: payload {p} B/packet, {} RPCs in {:?}, {} B retransmitted by the client",
        sizes.len() + 15,
        start.elapsed(),
        m.data_bytes_retransmitted
    );
    server.stop();
}

#[test]
fn echo_udp4_default() {
    echo_sizes(
        "udp4/default",
        "127.0.0.1",
        Transport::Udp,
        Config::default(),
    );
}

#[test]
fn echo_udp4_loopback() {
    echo_sizes(
        "udp4/loopback",
        "127.0.0.1",
        Transport::Udp,
        Config::loopback(),
    );
}

#[test]
fn echo_udp6_default() {
    echo_sizes("udp6/default", "[::1]", Transport::Udp, Config::default());
}

#[test]
fn echo_udp6_loopback() {
    echo_sizes("udp6/loopback", "[::1]", Transport::Udp, Config::loopback());
}

#[test]
fn echo_raw4_default() {
    echo_sizes(
        "raw4/default",
        "127.0.0.1",
        Transport::Raw,
        Config::default(),
    );
}

#[test]
fn echo_raw4_loopback() {
    echo_sizes(
        "raw4/loopback",
        "127.0.0.1",
        Transport::Raw,
        Config::loopback(),
    );
}

/// Without segmentation offload (no GSO/GRO) the same sizes still work:
/// the path where every packet is its own datagram.
#[test]
fn echo_udp4_without_offload() {
    let mut config = Config::default();
    config.segmentation_offload = false;
    echo_sizes("udp4/no-offload", "127.0.0.1", Transport::Udp, config);
}

/// A large request and response collected in the packets they came in:
/// several parts, the same bytes as the joined message.
#[test]
fn messages_collected_in_parts_hold_the_same_bytes() {
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let server = Endpoint::bind(any, Config::default()).unwrap();
    let client = Endpoint::bind(any, Config::default()).unwrap();
    let dest = server.local_addr();
    let req = pattern(11, 200_000);
    let s = server.clone();
    let t = std::thread::spawn(move || {
        let (id, message) = s.recv_request_parts(Some(CALL_TIMEOUT)).unwrap();
        let parts = message.parts().len();
        let bytes = message.into_bytes();
        s.reply(id, bytes.clone()).unwrap();
        (parts, bytes)
    });
    let id = client.send_request(dest, req.clone()).unwrap();
    let response = client.recv_response_parts(id, Some(CALL_TIMEOUT)).unwrap();
    let (server_parts, got) = t.join().unwrap();
    assert_bytes(&req, &got, "request in parts");
    assert!(server_parts > 1, "a 200 KB request came in one part");
    assert!(response.parts().len() > 1);
    assert_eq!(response.len(), req.len());
    assert_bytes(&req, &response.to_vec(), "response in parts");
}
