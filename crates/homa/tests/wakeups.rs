//! How a UDP reader sleeps: in the receive call itself (one system call per
//! wake-up), woken by the socket's receive timeout at its deadline (whole
//! jiffies, set for the core's timers and the caller's timeout), or by
//! another thread with a zero-length datagram to its own socket. Nothing
//! but the endpoint's own kicks may be taken for one.

mod common;

use common::{pattern, wait_for, EchoServer, CALL_TIMEOUT};
use homa::{Config, Endpoint, Error};
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

fn any4() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// A caller's deadline is kept although the reader sleeps in a receive
/// call: its receive timeout wakes it (never after the deadline; the rest
/// is slept in `ppoll`), with no kick from the background thread.
#[test]
fn a_reader_asleep_in_the_receive_call_keeps_the_callers_deadline_itself() {
    let ep = Endpoint::bind(any4(), Config::default()).unwrap();
    let timeout = Duration::from_millis(30);
    for _ in 0..3 {
        let start = Instant::now();
        let r = ep.recv_request(Some(timeout));
        assert!(matches!(r, Err(Error::Timeout)), "{r:?}");
        assert!(start.elapsed() >= timeout, "not before the deadline");
    }
    let s = ep.runtime_stats();
    assert_eq!(s.self_kicks, 0, "nobody had to kick the reader: {s:?}");
    assert!(s.recv_timeouts > 0, "the receive timeout woke it: {s:?}");
    assert_eq!(ep.metrics().malformed_dropped, 0);
}

/// The core's timers run while the reader sleeps in the receive call: an
/// RPC to a server that never answers is probed again and again (RESEND
/// after `resend_ticks`), the reader woken by its receive timeout, not by
/// the background thread.
#[test]
fn the_cores_timers_run_while_the_reader_sleeps_in_the_receive_call() {
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    silent
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let ep = Endpoint::bind(any4(), Config::default()).unwrap();
    let id = ep
        .send_request(silent.local_addr().unwrap(), pattern(1, 100))
        .unwrap();
    let r = ep.recv_response(id, Some(Duration::from_millis(100)));
    assert!(matches!(r, Err(Error::Timeout)), "{r:?}");
    let mut got = 0;
    let mut buf = [0u8; 2048];
    while got < 3 && silent.recv_from(&mut buf).is_ok() {
        got += 1;
    }
    assert!(got >= 3, "the request and then RESENDs: {got} packets");
    let s = ep.runtime_stats();
    assert_eq!(s.self_kicks, 0, "{s:?}");
    assert!(s.recv_timeouts > 0, "{s:?}");
}

/// Shutting down wakes a reader asleep in the receive call with a receive
/// timeout far away (a caller that waits for ever, an RPC outstanding).
#[test]
fn shutdown_wakes_a_reader_asleep_in_the_receive_call() {
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    let ep = Endpoint::bind(any4(), Config::default()).unwrap();
    let id = ep
        .send_request(silent.local_addr().unwrap(), pattern(2, 100))
        .unwrap();
    let waiter = {
        let ep = ep.clone();
        std::thread::spawn(move || ep.recv_response(id, None))
    };
    let idle = {
        let ep = ep.clone();
        std::thread::spawn(move || ep.recv_request(None))
    };
    std::thread::sleep(Duration::from_millis(50));
    ep.shutdown();
    let r = waiter.join().unwrap();
    assert!(matches!(r, Err(Error::Closed)), "{r:?}");
    let r = idle.join().unwrap();
    assert!(matches!(r, Err(Error::Closed)), "{r:?}");
}

/// The background thread sleeps while an application thread waits, and
/// still takes the reader role once none does (the process's watch thread
/// wakes it): a response that comes while nobody waits is taken in.
#[test]
fn the_background_thread_reads_again_once_no_application_thread_waits() {
    let server = EchoServer::bind(any4(), Config::default(), 1);
    let addr = server.endpoint().local_addr();
    let ep = Endpoint::bind(any4(), Config::default()).unwrap();
    let r = ep.recv_request(Some(Duration::from_millis(30)));
    assert!(matches!(r, Err(Error::Timeout)), "{r:?}");
    let reads = ep.runtime_stats().background_reads;
    let req = pattern(3, 100);
    let id = ep.send_request(addr, req.clone()).unwrap();
    assert!(
        wait_for(Duration::from_secs(10), || {
            ep.runtime_stats().background_reads > reads && ep.metrics().responses_delivered >= 1
        }),
        "{:?}",
        ep.runtime_stats()
    );
    assert_eq!(ep.recv_response(id, Some(CALL_TIMEOUT)).unwrap(), req);
    server.stop();
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

/// `polled_waits` counts the waits that polled before sleeping: every
/// call's wait with `poll_us` set and the adaptive check off, none with
/// `poll_us = 0`.
#[test]
fn polled_waits_count_the_waits_that_polled() {
    let server = EchoServer::bind(any4(), Config::default(), 1);
    for (poll_us, polls) in [(0, false), (50, true)] {
        let mut config = Config::default();
        config.poll_us = poll_us;
        config.poll_adaptive = false;
        let ep = Endpoint::bind(any4(), config).unwrap();
        for i in 0..5 {
            let r = ep.call(server.addr, pattern(i, 100), CALL_TIMEOUT);
            assert_eq!(r.unwrap(), pattern(i, 100));
        }
        let s = ep.runtime_stats();
        if polls {
            assert!(s.polled_waits >= 5, "poll_us {poll_us}: {s:?}");
        } else {
            assert_eq!(s.polled_waits, 0, "poll_us {poll_us}: {s:?}");
        }
    }
}
