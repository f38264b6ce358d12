//! The UDP port check: the runtime names a peer by the UDP source IP and
//! the Homa header's source port, so a packet whose Homa source port is
//! not its UDP source port (or whose Homa destination port is not ours) is
//! dropped and counted before the protocol sees it.

mod common;

use common::{data_packet, wait_for, EchoServer};
use homa::Config;
use homa_wire::{Body, Packet};
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

#[test]
fn homa_ports_must_match_udp_ports() {
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let server = EchoServer::bind(any, Config::default(), 1);
    let ep = server.endpoint().clone();
    let dest = server.addr;
    let port = dest.port();
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let me = sock.local_addr().unwrap().port();
    let victim = me.wrapping_add(1);
    let s0 = ep.runtime_stats();
    let m0 = ep.metrics();

    // A well-formed one-packet request claiming to come from another port:
    // were it accepted, the server would send its response there.
    sock.send_to(&data_packet(victim, port, 100, 5, 0, b"hello"), dest)
        .unwrap();
    // And one for another Homa port than the one it was sent to.
    sock.send_to(
        &data_packet(me, port.wrapping_add(1), 102, 5, 0, b"hello"),
        dest,
    )
    .unwrap();
    assert!(
        wait_for(Duration::from_secs(5), || {
            ep.runtime_stats().port_mismatch_drops - s0.port_mismatch_drops >= 2
        }),
        "mismatching ports not counted: {:?}",
        ep.runtime_stats()
    );
    let (s1, m1) = (ep.runtime_stats(), ep.metrics());
    assert_eq!(s1.port_mismatch_drops - s0.port_mismatch_drops, 2);
    assert_eq!(s1.packets_received - s0.packets_received, 2);
    assert_eq!(m1.requests_delivered, m0.requests_delivered);
    assert_eq!(m1.active_rpcs, 0, "no RPC state for a dropped packet");
    let mut buf = [0u8; 2048];
    assert!(
        sock.recv_from(&mut buf).is_err(),
        "nothing may come back for dropped packets"
    );

    // The same request with matching ports is served: the echo comes back.
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    sock.send_to(&data_packet(me, port, 104, 5, 0, b"hello"), dest)
        .unwrap();
    loop {
        let (n, from) = sock.recv_from(&mut buf).expect("the response");
        assert_eq!(from, dest);
        let p = Packet::parse(&buf[..n]).unwrap();
        assert_eq!((p.common.sport, p.common.dport), (port, me));
        match p.body {
            Body::Data { header, payload } => {
                assert_eq!(p.common.sender_id, 105);
                assert_eq!(header.message_length, 5);
                assert_eq!(payload, b"hello");
                break;
            }
            // Our DATA carried cutoff version 0: CUTOFFS may come first.
            Body::Cutoffs { .. } => {}
            other => panic!("expected the response DATA, got {other:?}"),
        }
    }
    let s2 = ep.runtime_stats();
    assert_eq!(s2.port_mismatch_drops, s1.port_mismatch_drops);
    assert_eq!(ep.metrics().requests_delivered, m0.requests_delivered + 1);
    server.stop();
}
