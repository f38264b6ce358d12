//! How a UDP reader sleeps: in the receive call itself (one system call per
//! wake-up), woken by the background thread at its deadline or by another
//! thread with a zero-length datagram to its own socket. Nothing but the
//! endpoint's own kicks may be taken for one.

mod common;

use common::{pattern, EchoServer, CALL_TIMEOUT};
use homa::{Config, Endpoint, Error};
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

fn any4() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// A caller's deadline is kept although the reader sleeps in a receive
/// call whose own timeout is coarser: the background thread kicks it.
#[test]
fn a_reader_asleep_in_the_receive_call_is_woken_at_its_deadline() {
    let ep = Endpoint::bind(any4(), Config::default()).unwrap();
    for _ in 0..3 {
        let r = ep.recv_request(Some(Duration::from_millis(30)));
        assert!(matches!(r, Err(Error::Timeout)), "{r:?}");
    }
    let s = ep.runtime_stats();
    assert!(
        s.self_kicks > 0,
        "the deadline came as a kick datagram: {s:?}"
    );
    // The kicks are read and dropped, not handed to the core.
    assert_eq!(ep.metrics().malformed_dropped, 0);
}

/// Zero-length datagrams from other sockets are not kicks: the core counts
/// them as malformed, and the endpoint keeps serving.
#[test]
fn empty_datagrams_from_elsewhere_are_dropped_as_malformed() {
    let server = EchoServer::bind(any4(), Config::default(), 1);
    let addr = server.endpoint().local_addr();
    let forger = UdpSocket::bind("127.0.0.1:0").unwrap();
    for _ in 0..20 {
        forger.send_to(&[], addr).unwrap();
    }
    let client = Endpoint::bind(any4(), Config::default()).unwrap();
    let req = pattern(7, 3000);
    let got = client
        .call(addr, req.clone(), CALL_TIMEOUT)
        .expect("the server still answers");
    assert_eq!(got, req);
    let m = server.endpoint().metrics();
    assert_eq!(m.malformed_dropped, 20, "{m:?}");
    server.stop();
}
