//! An endpoint that shuts down sends the acks it owes first (Linux Homa
//! servers otherwise ask with a NEED_ACK every millisecond for as long as
//! they run; see docs/linux-interop.md).

mod common;

use common::{pattern, wait_for, EchoServer, CALL_TIMEOUT};
use homa::{Config, Endpoint};
use std::net::SocketAddr;
use std::time::Duration;

/// Neither side's timers would move the ack within the test: the server
/// asks (NEED_ACK) only after 10 s, the client flushes on its own only 2
/// ticks after that. Only the client's shutdown can free the server's RPCs.
fn slow_acks() -> Config {
    let mut c = Config::default();
    c.core.need_ack_ticks = 10_000;
    c.core.ack_memory_ns = 60_000_000_000;
    c
}

#[test]
fn shutdown_sends_the_acks_owed_and_for_abandoned_rpcs() {
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let server = EchoServer::bind(any, slow_acks(), 1);
    let client = Endpoint::bind(any, slow_acks()).unwrap();
    for i in 0..3 {
        let msg = pattern(i, 1_000);
        assert_eq!(
            client.call(server.addr, msg.clone(), CALL_TIMEOUT).unwrap(),
            msg
        );
    }
    // Acks ride on the next request: the last one is still owed, and so is
    // nothing for an RPC abandoned half way (its response never read).
    let abandoned = client
        .send_request(server.addr, pattern(9, 200_000))
        .unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let s = server.endpoint().clone();
    assert!(s.metrics().active_rpcs >= 1, "{:?}", s.metrics());
    client.shutdown();
    assert!(
        wait_for(Duration::from_secs(2), || s.metrics().active_rpcs == 0),
        "server RPCs left after the client shut down: {:?}",
        s.metrics()
    );
    let m = s.metrics();
    assert!(m.acks_received >= 3, "{m:?}");
    assert_eq!(m.need_acks_sent, 0);
    let _ = abandoned;
    server.stop();
}
