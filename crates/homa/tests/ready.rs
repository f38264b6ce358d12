//! `Endpoint::ready_fd`: the descriptor an event loop polls. It is readable
//! exactly while a request or a client RPC's outcome (response or failure)
//! waits to be collected, and once the endpoint is shut down; it follows
//! every way a message leaves (collected, aborted).

use bytes::Bytes;
use homa::{Config, Endpoint, Error};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(10);

fn any4() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// Polls `fd` for up to `timeout`; true if it became readable.
fn poll_readable(fd: RawFd, timeout: Duration) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one live pollfd.
    let r = unsafe { libc::poll(&mut p, 1, timeout.as_millis() as libc::c_int) };
    assert!(r >= 0, "poll: {}", std::io::Error::last_os_error());
    r == 1 && p.revents & libc::POLLIN != 0
}

fn readable_now(fd: RawFd) -> bool {
    poll_readable(fd, Duration::ZERO)
}

/// Server side: readable when a request arrives (with no thread of ours
/// waiting: the background thread reads the socket), unreadable once it is
/// taken, and a second request keeps it readable until both are taken.
#[test]
fn readable_while_requests_wait() {
    let server = Endpoint::bind(any4(), Config::default()).unwrap();
    let client = Endpoint::bind(any4(), Config::default()).unwrap();
    let fd = server.ready_fd().unwrap().as_raw_fd();
    assert_eq!(server.ready_fd().unwrap().as_raw_fd(), fd, "one descriptor");
    assert!(!readable_now(fd), "nothing has arrived");

    let a = client
        .send_request(server.local_addr(), Bytes::from_static(b"one"))
        .unwrap();
    assert!(poll_readable(fd, WAIT), "a request arrived");
    let b = client
        .send_request(server.local_addr(), Bytes::from_static(b"two"))
        .unwrap();
    // Wait until both are queued (the second may still be on its way).
    let start = Instant::now();
    while server.metrics().requests_delivered < 2 {
        assert!(start.elapsed() < WAIT, "second request never arrived");
        std::thread::sleep(Duration::from_millis(1));
    }
    let r1 = server.recv_request(Some(Duration::ZERO)).unwrap();
    assert!(readable_now(fd), "one request still waits");
    let r2 = server.recv_request(Some(Duration::ZERO)).unwrap();
    assert!(!readable_now(fd), "all requests taken");
    assert!(matches!(
        server.recv_request(Some(Duration::ZERO)),
        Err(Error::Timeout)
    ));
    assert!(!readable_now(fd));
    server.reply(r1.id, r1.message).unwrap();
    server.reply(r2.id, r2.message).unwrap();
    assert_eq!(&client.recv_response(a, Some(WAIT)).unwrap()[..], b"one");
    assert_eq!(&client.recv_response(b, Some(WAIT)).unwrap()[..], b"two");
}

/// Client side: readable when a response is waiting (collected by id or by
/// `recv_any_response`), when an RPC has failed (its failure waits to be
/// collected), and not after an abort took the waiting response away.
#[test]
fn readable_while_responses_wait() {
    let server = Endpoint::bind(any4(), Config::default()).unwrap();
    let client = Endpoint::bind(any4(), Config::default()).unwrap();
    let fd = client.ready_fd().unwrap().as_raw_fd();

    // Answered, collected with recv_any_response.
    let id = client
        .send_request(server.local_addr(), Bytes::from_static(b"ping"))
        .unwrap();
    assert!(!readable_now(fd), "no response yet");
    let req = server.recv_request(Some(WAIT)).unwrap();
    server.reply(req.id, Bytes::from_static(b"pong")).unwrap();
    assert!(poll_readable(fd, WAIT), "response arrived");
    let (got, r) = client.recv_any_response(Some(Duration::ZERO)).unwrap();
    assert_eq!((got, &r.unwrap()[..]), (id, &b"pong"[..]));
    assert!(!readable_now(fd), "response taken");

    // Answered, then aborted before being collected.
    let id = client
        .send_request(server.local_addr(), Bytes::from_static(b"x"))
        .unwrap();
    let req = server.recv_request(Some(WAIT)).unwrap();
    server.reply(req.id, Bytes::new()).unwrap();
    assert!(poll_readable(fd, WAIT));
    client.abort(id).unwrap();
    assert!(!readable_now(fd), "the abort took the response away");

    // A failed RPC: its failure is a message to collect too.
    let silent = UdpSocket::bind(any4()).unwrap();
    let id = client
        .send_request(silent.local_addr().unwrap(), Bytes::from_static(b"?"))
        .unwrap();
    assert!(poll_readable(fd, WAIT), "the RPC failed (peer dead)");
    let (got, r) = client.recv_any_response(Some(Duration::ZERO)).unwrap();
    assert_eq!(got, id);
    assert!(matches!(r, Err(Error::PeerDead)), "{r:?}");
    assert!(!readable_now(fd));
}

/// A descriptor created while a message already waits starts readable; a
/// shutdown makes it readable for good, so an event loop notices.
#[test]
fn created_late_and_after_shutdown() {
    let server = Endpoint::bind(any4(), Config::default()).unwrap();
    let client = Endpoint::bind(any4(), Config::default()).unwrap();
    client
        .send_request(server.local_addr(), Bytes::from_static(b"early"))
        .unwrap();
    let start = Instant::now();
    while server.metrics().requests_delivered < 1 {
        assert!(start.elapsed() < WAIT, "request never arrived");
        std::thread::sleep(Duration::from_millis(1));
    }
    let fd = server.ready_fd().unwrap().as_raw_fd();
    assert!(readable_now(fd), "created with a request waiting");
    server.recv_request(Some(Duration::ZERO)).unwrap();
    assert!(!readable_now(fd));

    let idle = Endpoint::bind(any4(), Config::default()).unwrap();
    let fd = idle.ready_fd().unwrap().as_raw_fd();
    assert!(!readable_now(fd));
    let waiter = idle.clone();
    let t = std::thread::spawn(move || waiter.recv_request(None));
    idle.shutdown();
    assert!(matches!(t.join().unwrap(), Err(Error::Closed)));
    assert!(readable_now(fd), "readable once shut down");
    assert!(matches!(
        idle.recv_request(Some(Duration::ZERO)),
        Err(Error::Closed)
    ));
    assert!(readable_now(fd), "and stays so");
}
