//! Spinning readers (`Config::busy_poll`): a reader that found nothing
//! probes for one datagram (and ends its round with it), one that found
//! something takes a batch per call; every byte still arrives, whatever
//! the sizes and however many threads share the endpoint. And responses
//! taken in the packets they came in (`call_parts`,
//! `recv_any_response_parts`) are the bytes the server sent.

mod common;

use common::{assert_bytes, pattern, EchoServer, CALL_TIMEOUT};
use homa::{Config, Endpoint};
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

fn any4() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn busy(mut c: Config) -> Config {
    c.busy_poll = true;
    c
}

/// Round trips of every size class between spinning ends: one packet,
/// several, and more than RTTbytes (grants), one thread, then two at once
/// (three spinning threads on the 2-CPU machines this runs on: more would
/// starve each other for long enough that the core gives up on a peer).
#[test]
fn spinning_ends_exchange_every_size_intact() {
    for config in [Config::default(), Config::loopback()] {
        let server = EchoServer::bind(any4(), busy(config.clone()), 1);
        let client = Endpoint::bind(any4(), busy(config.clone())).unwrap();
        let sizes = [0usize, 1, 100, 1_500, 20_000, 200_000, 900_000];
        for (i, &len) in sizes.iter().enumerate() {
            let msg = pattern(i as u64, len);
            let got = client.call(server.addr, msg.clone(), CALL_TIMEOUT).unwrap();
            assert_bytes(&msg, &got, &format!("{len} B"));
        }
        std::thread::scope(|s| {
            for t in 0..2u64 {
                let client = &client;
                let to = server.addr;
                s.spawn(move || {
                    for k in 0..50u64 {
                        let len = [100, 3_000, 70_000][(k % 3) as usize];
                        let msg = pattern(t * 1_000 + k, len);
                        let got = client.call(to, msg.clone(), CALL_TIMEOUT).unwrap();
                        assert_bytes(&msg, &got, &format!("thread {t}, RPC {k}"));
                    }
                });
            }
        });
        let s = client.runtime_stats();
        assert!(
            s.packets_received >= s.recv_calls && s.recv_calls > 0,
            "{s:?}"
        );
        server.stop();
    }
}

/// A burst of junk queued before any thread waits is all read and
/// dropped, and a thread that then spins until its deadline (its probes
/// finding nothing) ends on time. (How many calls the burst took depends
/// on when the reader woke; the rule that a probe follows only an empty
/// call is tested beside `RecvBufs::probe_size`.)
#[test]
fn a_burst_of_junk_is_read_whole_by_a_spinning_endpoint() {
    let ep = Endpoint::bind(any4(), busy(Config::default())).unwrap();
    let to = ep.local_addr();
    let junk = UdpSocket::bind(any4()).unwrap();
    // 300 datagrams too short to be Homa packets (their ports are not
    // ours), dropped once read.
    for _ in 0..300 {
        junk.send_to(&[0u8; 10], to).unwrap();
    }
    let r = ep.recv_request(Some(Duration::from_millis(300)));
    assert!(matches!(r, Err(homa::Error::Timeout)), "{r:?}");
    assert!(
        common::wait_for(Duration::from_secs(5), || ep
            .runtime_stats()
            .port_mismatch_drops
            == 300),
        "{:?}",
        ep.runtime_stats()
    );
    let s = ep.runtime_stats();
    assert_eq!(s.packets_received, 300, "{s:?}");
    assert!(s.recv_calls <= 300, "{s:?}");
}

/// `call_parts` hands over the response in the packets it came in: as
/// many parts as packets for a long response, the bytes the server sent;
/// `recv_any_response_parts` likewise.
#[test]
fn responses_in_parts_are_the_bytes_sent() {
    let server = EchoServer::bind(any4(), Config::default(), 1);
    let client = Endpoint::bind(any4(), Config::default()).unwrap();
    let payload = client.config().core.max_payload() as usize;
    let msg = pattern(7, 10 * payload + 5);
    let got = client
        .call_parts(server.addr, msg.clone(), CALL_TIMEOUT)
        .unwrap();
    assert_eq!(got.len(), msg.len());
    assert_eq!(got.parts().len(), 11, "a part per packet, no copy");
    assert_bytes(&msg, &got.to_vec(), "call_parts");
    let ids: Vec<_> = (0..3u64)
        .map(|i| {
            let m = pattern(100 + i, 3 * payload);
            (client.send_request(server.addr, m.clone()).unwrap(), m)
        })
        .collect();
    for _ in 0..ids.len() {
        let (id, r) = client.recv_any_response_parts(Some(CALL_TIMEOUT)).unwrap();
        let want = &ids.iter().find(|(i, _)| *i == id).expect("one of ours").1;
        let got = r.unwrap();
        assert!(got.parts().len() > 1);
        assert_bytes(want, &got.to_vec(), "recv_any_response_parts");
    }
    server.stop();
}
