//! Connected endpoints (`Config::peer`): a client of one server whose
//! socket is connected to it. Every size still arrives intact, blocking
//! and spinning; requests to anyone else are refused; datagrams from
//! anyone else never reach the endpoint; a thread waiting on one is woken
//! by a shutdown (its reader sleeps in `ppoll`, not in the receive call);
//! and settings it cannot honour are refused when it is bound.

mod common;

use common::{assert_bytes, pattern, wait_for, EchoServer, CALL_TIMEOUT};
use homa::{Config, Endpoint, Error, Transport};
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

fn any4() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn connected(mut c: Config, peer: SocketAddr, busy: bool) -> Config {
    c.peer = Some(peer);
    c.busy_poll = busy;
    c
}

/// One packet, several, and more than RTTbytes (grants, GSO batches to
/// the peer without an address), with the reader sleeping and spinning,
/// then two threads sharing the connected endpoint.
#[test]
fn a_connected_client_exchanges_every_size_intact() {
    for busy in [false, true] {
        for config in [Config::default(), Config::loopback()] {
            let mut server_config = config.clone();
            server_config.busy_poll = busy;
            let server = EchoServer::bind(any4(), server_config, 1);
            let client = Endpoint::bind(any4(), connected(config, server.addr, busy)).unwrap();
            assert_eq!(client.config().peer, Some(server.addr));
            let sizes = [0usize, 1, 100, 1_500, 20_000, 200_000, 900_000];
            for (i, &len) in sizes.iter().enumerate() {
                let msg = pattern(i as u64, len);
                let got = client.call(server.addr, msg.clone(), CALL_TIMEOUT).unwrap();
                assert_bytes(&msg, &got, &format!("{len} B, busy {busy}"));
            }
            std::thread::scope(|s| {
                for t in 0..2u64 {
                    let client = &client;
                    let to = server.addr;
                    s.spawn(move || {
                        for k in 0..40u64 {
                            let len = [100, 3_000, 70_000][(k % 3) as usize];
                            let msg = pattern(t * 1_000 + k, len);
                            let got = client.call(to, msg.clone(), CALL_TIMEOUT).unwrap();
                            assert_bytes(&msg, &got, &format!("thread {t}, RPC {k}"));
                        }
                    });
                }
            });
            // Nothing was ever sent to wake a reader sleeping in the
            // receive call: a connected socket's readers sleep in ppoll.
            assert_eq!(client.runtime_stats().self_kicks, 0);
            client.shutdown();
            server.stop();
        }
    }
}

#[test]
fn a_connected_endpoint_refuses_requests_to_anyone_else() {
    let server = EchoServer::bind(any4(), Config::default(), 1);
    let other = UdpSocket::bind(any4()).unwrap();
    let client = Endpoint::bind(any4(), connected(Config::default(), server.addr, false)).unwrap();
    let to_other = other.local_addr().unwrap();
    match client.call(to_other, pattern(1, 100), CALL_TIMEOUT) {
        Err(Error::BadAddress(why)) => assert!(why.contains("Config::peer"), "{why}"),
        r => panic!("a request to {to_other} gave {r:?}"),
    }
    assert!(matches!(
        client.send_request(to_other, pattern(2, 10)),
        Err(Error::BadAddress(_))
    ));
    // Nothing reached the other address, and the peer is still served.
    other
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    assert!(other.recv_from(&mut [0u8; 2048]).is_err());
    let msg = pattern(3, 5_000);
    let got = client.call(server.addr, msg.clone(), CALL_TIMEOUT).unwrap();
    assert_bytes(&msg, &got, "after the refusals");
    client.shutdown();
    server.stop();
}

/// The kernel drops a stranger's datagrams; the peer's (junk here) are
/// read and counted.
#[test]
fn a_connected_endpoint_hears_its_peer_alone() {
    let peer = UdpSocket::bind(any4()).unwrap();
    let stranger = UdpSocket::bind(any4()).unwrap();
    let ep = Endpoint::bind(
        any4(),
        connected(Config::default(), peer.local_addr().unwrap(), false),
    )
    .unwrap();
    let at = ep.local_addr();
    for _ in 0..20 {
        stranger.send_to(b"not from the peer", at).unwrap();
    }
    peer.send_to(b"from the peer", at).unwrap();
    assert!(
        wait_for(Duration::from_secs(5), || ep
            .runtime_stats()
            .packets_received
            >= 1),
        "the peer's datagram was never read"
    );
    // Once more after the peer's datagram was read: had the stranger's
    // come through, they would be counted by now (sent before it).
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(ep.runtime_stats().packets_received, 1);
    ep.shutdown();
}

/// A thread waiting for a response that never comes (the peer is a
/// socket that does not answer) returns `Closed` once the endpoint is
/// shut down: the kick reaches a reader asleep in `ppoll`.
#[test]
fn shutdown_wakes_a_thread_waiting_on_a_connected_endpoint() {
    let silent = UdpSocket::bind(any4()).unwrap();
    let ep = Endpoint::bind(
        any4(),
        connected(Config::default(), silent.local_addr().unwrap(), false),
    )
    .unwrap();
    let id = ep
        .send_request(silent.local_addr().unwrap(), pattern(9, 100))
        .unwrap();
    let waiter = {
        let ep = ep.clone();
        std::thread::spawn(move || ep.recv_response(id, None))
    };
    // Let the thread become the reader and go to sleep.
    std::thread::sleep(Duration::from_millis(50));
    ep.shutdown();
    assert!(
        wait_for(Duration::from_secs(10), || waiter.is_finished()),
        "the waiting thread was not woken by the shutdown"
    );
    assert!(matches!(waiter.join().unwrap(), Err(Error::Closed)));
}

#[test]
fn settings_a_connected_endpoint_cannot_honour_are_refused() {
    let peer: SocketAddr = "127.0.0.1:4000".parse().unwrap();
    let mut raw = connected(Config::default(), peer, false);
    raw.transport = Transport::Raw;
    let mut lanes = connected(Config::default(), peer, false);
    lanes.lanes = 4;
    let nowhere = connected(Config::default(), "0.0.0.0:4000".parse().unwrap(), false);
    let no_port = connected(Config::default(), "127.0.0.1:0".parse().unwrap(), false);
    for (what, c) in [
        ("raw IP", raw),
        ("lanes", lanes),
        ("unspecified address", nowhere),
        ("port 0", no_port),
    ] {
        match Endpoint::bind(any4(), c) {
            Err(Error::Config(_)) => {}
            r => panic!("{what}: {:?}", r.map(|e| e.local_addr())),
        }
    }
    let v6 = connected(Config::default(), "[::1]:4000".parse().unwrap(), false);
    assert!(matches!(
        Endpoint::bind(any4(), v6).map(|e| e.local_addr()),
        Err(Error::BadAddress(_))
    ));
}

/// A peer with nothing on its port: the kernel reports each refusal on
/// the connected socket itself (an error on the next receive or send,
/// and the socket readable with an error meanwhile). The call still
/// ends as an unconnected endpoint's does, with `PeerDead`, sleeping or
/// spinning.
#[test]
fn a_connected_endpoint_whose_peer_is_gone_fails_its_call() {
    let gone = UdpSocket::bind(any4()).unwrap();
    let peer = gone.local_addr().unwrap();
    drop(gone);
    for busy in [false, true] {
        let ep = Endpoint::bind(any4(), connected(Config::default(), peer, busy)).unwrap();
        match ep.call(peer, pattern(5, 100), CALL_TIMEOUT) {
            Err(Error::PeerDead) => {}
            r => panic!("busy {busy}: a call to a closed port gave {r:?}"),
        }
        ep.shutdown();
    }
}
