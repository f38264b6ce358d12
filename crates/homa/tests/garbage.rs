//! Garbage sent to a server's port from a plain UDP socket: random bytes,
//! truncated headers, absurd lengths, packets for RPCs nobody has, packets
//! for another port. Nothing may panic, each kind must land in the right
//! counter (the core's, or the runtime's port check for packets whose Homa
//! ports contradict their UDP ports), and the server must keep serving real
//! RPCs.

mod common;

use bytes::Bytes;
use common::{assert_bytes, control, data_packet, pattern, wait_for, EchoServer, CALL_TIMEOUT};
use homa::{Config, Endpoint, Metrics};
use homa_wire::{AckEntry, AckList, Body, Packet, CUTOFF_UNLIMITED};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Panics on the endpoint's own threads (background reader `homa-*`, echo
/// workers `echo-*`) would otherwise go unnoticed: count them.
static RUNTIME_PANICS: AtomicUsize = AtomicUsize::new(0);

fn watch_for_runtime_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let name = std::thread::current().name().unwrap_or("").to_string();
        if name.starts_with("homa-") || name.starts_with("echo-") {
            RUNTIME_PANICS.fetch_add(1, Ordering::SeqCst);
        }
        default(info);
    }));
}

/// Sends `packets` and waits until `done(metrics)` holds.
fn send_and_wait(
    sock: &UdpSocket,
    dest: SocketAddr,
    server: &Endpoint,
    packets: &[Vec<u8>],
    what: &str,
    done: impl Fn(&Metrics) -> bool,
) {
    for p in packets {
        sock.send_to(p, dest).unwrap();
        // Stay well inside the server's socket buffer.
        std::thread::sleep(Duration::from_micros(20));
    }
    assert!(
        wait_for(Duration::from_secs(5), || done(&server.metrics())),
        "{what}: counters did not move as expected: {:#?}",
        server.metrics()
    );
}

#[test]
fn garbage_is_counted_and_dropped_and_the_server_keeps_serving() {
    watch_for_runtime_panics();
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let server = EchoServer::bind(any, Config::default(), 2);
    let ep = server.endpoint().clone();
    let dest = server.addr;
    let port = dest.port();
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let me = sock.local_addr().unwrap().port();
    let m0 = ep.metrics();
    let mismatches = || ep.runtime_stats().port_mismatch_drops;
    let x0 = mismatches();

    // 1. Random bytes, 0..200 long. Classify each as the runtime and the
    //    parser will, so the expected counts are exact; skip the (rare) ones
    //    that would parse as a packet for our port.
    let mut rng = StdRng::seed_from_u64(0x6a7b_a6e0);
    let (mut want_malformed, mut want_invalid, mut want_mismatch) = (0u64, 0u64, 0u64);
    let mut random = Vec::new();
    while random.len() < 500 {
        let len = rng.gen_range(0..200);
        let mut b = vec![0u8; len];
        rng.fill(&mut b[..]);
        // Half of them get a valid type byte, so that the parser gets past
        // the first check, and half (overlapping) our ports, so that they
        // get past the runtime's port check into the parser.
        if len > 11 && random.len() % 2 == 0 {
            b[11] = rng.gen_range(0x10..=0x18);
        }
        if len >= 4 && random.len() % 4 < 2 {
            b[0..2].copy_from_slice(&me.to_be_bytes());
            b[2..4].copy_from_slice(&port.to_be_bytes());
        }
        let ports_ok = len < 4 || (b[0..2] == me.to_be_bytes() && b[2..4] == port.to_be_bytes());
        if !ports_ok {
            want_mismatch += 1;
        } else {
            match Packet::parse(&b) {
                Err(_) => want_malformed += 1,
                Ok(p) if p.common.dport != port || p.common.sport == 0 => want_invalid += 1,
                Ok(_) => continue,
            }
        }
        random.push(b);
    }
    eprintln!(
        "random: {want_mismatch} with foreign ports, {want_malformed} malformed, {want_invalid} \
         parse but are for another port"
    );
    send_and_wait(&sock, dest, &ep, &random, "random bytes", |m| {
        m.malformed_dropped - m0.malformed_dropped >= want_malformed
            && m.invalid_dropped - m0.invalid_dropped >= want_invalid
    });
    assert!(
        wait_for(Duration::from_secs(5), || mismatches() - x0
            >= want_mismatch),
        "port mismatches: {} of {want_mismatch}",
        mismatches() - x0
    );
    let m1 = ep.metrics();
    assert_eq!(m1.malformed_dropped - m0.malformed_dropped, want_malformed);
    assert_eq!(m1.invalid_dropped - m0.invalid_dropped, want_invalid);
    assert_eq!(mismatches() - x0, want_mismatch);
    assert_eq!(m1.requests_delivered, m0.requests_delivered);

    // 2. Every truncation (1..=55 bytes) of a valid DATA header.
    let full = data_packet(me, port, 2, 100, 0, &[7; 100]);
    let truncated: Vec<Vec<u8>> = (1..homa_wire::DATA_HEADER_LEN)
        .map(|n| full[..n].to_vec())
        .collect();
    send_and_wait(&sock, dest, &ep, &truncated, "truncated headers", |m| {
        m.malformed_dropped - m1.malformed_dropped >= 55
    });
    let m2 = ep.metrics();
    assert_eq!(m2.malformed_dropped - m1.malformed_dropped, 55);

    // 3. Lengths and fields that cannot be right: a request claiming a
    //    2 GB message and one just over max_message_size (invalid); DATA
    //    bytes beyond the claimed length, a GRANT priority of 9 and an ACK
    //    claiming 6 entries (malformed).
    let max = ep.config().core.max_message_size;
    let mut grant9 = control(
        me,
        port,
        4,
        Body::Grant {
            offset: 1,
            priority: 1,
        },
    );
    grant9[homa_wire::COMMON_HEADER_LEN + 4] = 9;
    let mut ack6 = control(
        me,
        port,
        6,
        Body::Ack {
            acks: AckList::new(),
        },
    );
    ack6[homa_wire::COMMON_HEADER_LEN + 1] = 6;
    let absurd = vec![
        data_packet(me, port, 10, CUTOFF_UNLIMITED, 0, &[1; 64]),
        data_packet(me, port, 12, max + 1, 0, &[1; 64]),
        data_packet(me, port, 14, 100, 90, &[1; 64]),
        grant9,
        ack6,
    ];
    send_and_wait(&sock, dest, &ep, &absurd, "absurd lengths", |m| {
        m.invalid_dropped - m2.invalid_dropped >= 2
            && m.malformed_dropped - m2.malformed_dropped >= 3
    });
    let m3 = ep.metrics();
    assert_eq!(m3.invalid_dropped - m2.invalid_dropped, 2);
    assert_eq!(m3.malformed_dropped - m2.malformed_dropped, 3);
    assert_eq!(m3.active_rpcs, 0, "no state for rejected messages");
    assert_eq!(m3.rx_bytes_buffered, 0);

    // 4. Packets for RPCs the server does not have: GRANT, BUSY,
    //    RPC_UNKNOWN and RESEND for unknown ids, response DATA (odd sender
    //    id: a reply to a client RPC the server never made), and CUTOFFS
    //    from a peer it has never heard of.
    let unknown = vec![
        control(
            me,
            port,
            1_000,
            Body::Grant {
                offset: 5_000,
                priority: 2,
            },
        ),
        control(me, port, 1_002, Body::Busy),
        control(me, port, 1_004, Body::RpcUnknown),
        control(
            me,
            port,
            1_006,
            Body::Resend {
                offset: 0,
                length: 100,
                priority: 7,
            },
        ),
        data_packet(me, port, 1_009, 100, 0, &[3; 100]),
        control(
            me,
            port,
            1_010,
            Body::Cutoffs {
                cutoffs: [CUTOFF_UNLIMITED; 8],
                version: 3,
            },
        ),
    ];
    send_and_wait(&sock, dest, &ep, &unknown, "unknown RPCs", |m| {
        m.unknown_rpc_packets - m3.unknown_rpc_packets >= 6
    });
    let m4 = ep.metrics();
    assert_eq!(m4.unknown_rpc_packets - m3.unknown_rpc_packets, 6);
    // The RESEND for an RPC it has never seen is answered with RPC_UNKNOWN.
    let mut buf = [0u8; 2048];
    let (n, from) = sock.recv_from(&mut buf).expect("an RPC_UNKNOWN in reply");
    assert_eq!(from, dest);
    let p = Packet::parse(&buf[..n]).unwrap();
    assert_eq!(p.body, Body::RpcUnknown, "{p:?}");
    assert_eq!(
        p.common.sender_id, 1_007,
        "the server's id for our RPC 1006"
    );
    assert_eq!((p.common.sport, p.common.dport), (port, me));

    // 5. A complete, valid request, but addressed to another port inside
    //    the header (and one with source port 0, and one with a source port
    //    other than the UDP one): dropped by the runtime, never delivered.
    let x4 = mismatches();
    let wrong_port = vec![
        data_packet(me, port.wrapping_add(1), 2_000, 5, 0, b"hello"),
        data_packet(0, port, 2_002, 5, 0, b"hello"),
        data_packet(me.wrapping_add(1), port, 2_002, 5, 0, b"hello"),
    ];
    for p in &wrong_port {
        sock.send_to(p, dest).unwrap();
    }
    assert!(
        wait_for(Duration::from_secs(5), || mismatches() - x4 >= 3),
        "wrong ports: {} of 3 counted",
        mismatches() - x4
    );
    let m5 = ep.metrics();
    assert_eq!(m5.invalid_dropped, m4.invalid_dropped);
    assert_eq!(m5.requests_delivered, m0.requests_delivered);

    // 6. The same request with the right port, made by hand: delivered,
    //    and the echo comes back to our plain socket as a Homa response.
    sock.send_to(&data_packet(me, port, 2_004, 5, 0, b"hello"), dest)
        .unwrap();
    // (Our DATA carried cutoff version 0, so CUTOFFS may come first.)
    let mut others = Vec::new();
    loop {
        let (n, _) = sock.recv_from(&mut buf).expect("a response");
        let p = Packet::parse(&buf[..n]).unwrap();
        match p.body {
            Body::Data { header, payload } => {
                assert_eq!(p.common.sender_id, 2_005);
                assert_eq!(header.message_length, 5);
                assert_eq!(payload, b"hello");
                break;
            }
            Body::Cutoffs { .. } if others.is_empty() => others.push(p.packet_type()),
            other => panic!("expected the response DATA, got {other:?} after {others:?}"),
        }
    }
    // Acknowledge it so the server can forget the RPC.
    let mut acks = AckList::new();
    acks.push(AckEntry {
        client_id: 2_004,
        server_port: port,
    })
    .unwrap();
    sock.send_to(&control(me, port, 0, Body::Ack { acks }), dest)
        .unwrap();
    assert!(
        wait_for(Duration::from_secs(5), || ep.metrics().active_rpcs == 0),
        "the acked RPC was not freed"
    );

    // 7. Real RPCs work while another thread sprays 3,000 packets of
    //    garbage at the port, a third of them with a valid type byte and
    //    the right ports so that they get past the first checks.
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sprayer = {
        let done = done.clone();
        std::thread::spawn(move || {
            let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
            let mine = sock.local_addr().unwrap().port();
            let mut rng = StdRng::seed_from_u64(7);
            for i in 0..3_000 {
                let len = rng.gen_range(0..1_500);
                let mut b = vec![0u8; len];
                rng.fill(&mut b[..]);
                if len >= 56 && i % 3 == 0 {
                    b[11] = rng.gen_range(0x10..=0x18);
                    b[0..2].copy_from_slice(&mine.to_be_bytes());
                    b[2..4].copy_from_slice(&port.to_be_bytes());
                }
                let _ = sock.send_to(&b, dest);
                std::thread::sleep(Duration::from_micros(20));
            }
            done.store(true, Ordering::Release);
        })
    };
    let client = Endpoint::bind(any, Config::default()).unwrap();
    let sizes = [0usize, 1, 100, 1_417, 30_000, 100_000, 500_000];
    let mut calls = 0;
    while calls < sizes.len() || !done.load(Ordering::Acquire) {
        let len = sizes[calls % sizes.len()];
        let msg: Bytes = pattern(calls as u64, len);
        let r = client.call(dest, msg.clone(), CALL_TIMEOUT).unwrap();
        assert_bytes(&msg, &r, &format!("{len} B amid garbage"));
        calls += 1;
    }
    sprayer.join().unwrap();
    let m7 = ep.metrics();
    let x7 = mismatches();
    eprintln!(
        "{calls} RPCs amid 3,000 garbage packets; server totals: malformed {}, invalid {}, \
         unknown-RPC {}, port mismatches {x7}",
        m7.malformed_dropped, m7.invalid_dropped, m7.unknown_rpc_packets
    );
    // (About a third carry the right ports and reach the core.)
    let rejected = |m: &Metrics| m.malformed_dropped + m.invalid_dropped + m.unknown_rpc_packets;
    assert!(rejected(&m7) - rejected(&m5) > 500);
    assert!(x7 - x4 > 1_500);
    assert_eq!(
        m7.requests_delivered - m5.requests_delivered,
        1 + calls as u64
    );
    server.stop();
    assert_eq!(
        RUNTIME_PANICS.load(Ordering::SeqCst),
        0,
        "a runtime thread panicked"
    );
}
