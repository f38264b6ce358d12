//! A response waited for by id goes straight to its waiting thread
//! (`Handoff`, in `parked.rs`): many threads calling through one endpoint
//! each get their own response, and a wait that timed out leaves nothing
//! behind for the thread's next wait.

mod common;

use common::{assert_bytes, pattern, EchoServer, CALL_TIMEOUT};
use homa::{Config, Endpoint, Error};
use std::net::SocketAddr;
use std::time::Duration;

fn any() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// 32 threads, 100 calls each, one endpoint: every response is the echo of
/// the caller's own request.
#[test]
fn threads_calling_through_one_endpoint_each_get_their_own_response() {
    let server = EchoServer::bind(any(), Config::default(), 2);
    let client = Endpoint::bind(any(), Config::default()).unwrap();
    let handles: Vec<_> = (0..32u64)
        .map(|t| {
            let ep = client.clone();
            let dest = server.addr;
            std::thread::spawn(move || {
                for i in 0..100u64 {
                    let tag = t << 32 | i;
                    let len = [0, 1, 100, 3000][(i % 4) as usize];
                    let want = pattern(tag, len);
                    let got = ep.call(dest, want.clone(), CALL_TIMEOUT).unwrap();
                    assert_bytes(&want, &got, &format!("thread {t} call {i}"));
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("caller panicked");
    }
    assert_eq!(client.metrics().responses_delivered, 3200);
}

/// A wait that times out takes its handoff back: the response that comes
/// later is collected by the next wait for that RPC, and the thread's next
/// RPC gets its own response, not the stale one.
#[test]
fn a_response_after_a_timed_out_wait_goes_to_the_next_wait() {
    let server = EchoServer::start_with_delay(
        Endpoint::bind(any(), Config::default()).unwrap(),
        1,
        Duration::from_millis(100),
    );
    let client = Endpoint::bind(any(), Config::default()).unwrap();
    let first = pattern(1, 100);
    let id = client.send_request(server.addr, first.clone()).unwrap();
    let r = client.recv_response(id, Some(Duration::from_millis(1)));
    assert!(matches!(r, Err(Error::Timeout)), "{r:?}");
    // Let the response arrive while nobody waits for it by id.
    std::thread::sleep(Duration::from_millis(300));
    let got = client.recv_response(id, Some(CALL_TIMEOUT)).unwrap();
    assert_bytes(&first, &got, "the late response");
    let second = pattern(2, 100);
    let got = client
        .call(server.addr, second.clone(), CALL_TIMEOUT)
        .unwrap();
    assert_bytes(&second, &got, "the next call");
    // And a wait that times out while the response is on its way, then
    // waits again at once.
    let third = pattern(3, 100);
    let id = client.send_request(server.addr, third.clone()).unwrap();
    let got = loop {
        match client.recv_response(id, Some(Duration::from_millis(7))) {
            Err(Error::Timeout) => continue,
            r => break r.unwrap(),
        }
    };
    assert_bytes(&third, &got, "after timed-out waits");
}
