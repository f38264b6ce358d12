//! `AsyncEndpoint` outside a tokio runtime: binding and every call work
//! from a plain thread, its futures run on a minimal executor (a `block_on`
//! of a few lines, below), and `call` times out without tokio's timer —
//! nothing panics; async streams too. And the same inside a tokio runtime,
//! for comparison.

mod common;

use bytes::Bytes;
use common::CALL_TIMEOUT;
use homa::{AsyncEndpoint, Config, Error};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

/// The smallest executor: polls on this thread, parks between wake-ups.
fn block_on<F: Future>(f: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

fn any() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// Asserts that no tokio runtime is current on this thread, so the test
/// really is about running without one.
fn assert_no_runtime() {
    assert!(
        tokio::runtime::Handle::try_current().is_err(),
        "this test must run outside any tokio runtime"
    );
}

#[test]
fn bind_and_every_call_work_from_plain_threads() {
    assert_no_runtime();
    let server = AsyncEndpoint::bind(any(), Config::default()).unwrap();
    let addr = server.local_addr();
    let echo = server.clone();
    let served = std::thread::spawn(move || {
        assert_no_runtime();
        let mut n = 0;
        // Ends with Err(Closed) when the endpoint is shut down.
        while let Ok(req) = block_on(echo.recv_request()) {
            echo.reply(req.id, req.message).unwrap();
            n += 1;
        }
        n
    });

    let client = AsyncEndpoint::bind(any(), Config::default()).unwrap();
    assert_eq!(client.local_addr().ip(), addr.ip());
    assert_eq!(client.blocking().local_addr(), client.local_addr());
    for len in [0, 100, 100_000] {
        let msg = common::pattern(len as u64, len);
        let resp = block_on(client.call(addr, msg.clone(), CALL_TIMEOUT)).unwrap();
        common::assert_bytes(&msg, &resp, "call");
    }
    // In the packets it came in: a part per packet, the bytes sent.
    let payload = client.blocking().config().core.max_payload() as usize;
    let msg = common::pattern(9, 3 * payload + 1);
    let parts = block_on(client.call_parts(addr, msg.clone(), CALL_TIMEOUT)).unwrap();
    assert_eq!(parts.parts().len(), 4);
    common::assert_bytes(&msg, &parts.to_vec(), "call_parts");
    let id = client.send_request(addr, msg.clone()).unwrap();
    let parts = block_on(client.recv_response_parts(id)).unwrap();
    common::assert_bytes(&msg, &parts.to_vec(), "recv_response_parts");
    let id = client
        .send_request(addr, Bytes::from_static(b"by id"))
        .unwrap();
    let resp = block_on(client.recv_response(id)).unwrap();
    assert_eq!(resp, Bytes::from_static(b"by id"));
    // Two at once, awaited in the opposite order.
    let a = client.send_request(addr, Bytes::from_static(b"a")).unwrap();
    let b = client.send_request(addr, Bytes::from_static(b"b")).unwrap();
    assert_eq!(block_on(client.recv_response(b)).unwrap(), "b");
    assert_eq!(block_on(client.recv_response(a)).unwrap(), "a");
    // A finished RPC is gone; an unknown one is an error, not a hang.
    assert!(matches!(
        block_on(client.recv_response(a)),
        Err(Error::UnknownRpc(_))
    ));
    assert_eq!(client.metrics().requests_started, 8);

    server.shutdown();
    assert_eq!(served.join().unwrap(), 8);
    assert!(matches!(
        block_on(server.recv_request()),
        Err(Error::Closed)
    ));
    client.shutdown();
    assert!(matches!(
        block_on(client.call(addr, Bytes::new(), CALL_TIMEOUT)),
        Err(Error::Closed)
    ));
}

/// A server that takes requests and never answers: the peer stays alive
/// (it answers RESENDs), so only the timeout can end a call.
fn silent_server() -> AsyncEndpoint {
    AsyncEndpoint::bind(any(), Config::default()).unwrap()
}

#[test]
fn call_times_out_without_a_runtime() {
    assert_no_runtime();
    let server = silent_server();
    let client = AsyncEndpoint::bind(any(), Config::default()).unwrap();
    let wait = Duration::from_millis(300);
    let start = Instant::now();
    let r = block_on(client.call(server.local_addr(), Bytes::from_static(b"?"), wait));
    let took = start.elapsed();
    assert!(matches!(r, Err(Error::Timeout)), "{r:?}");
    assert!(took >= wait, "timed out after {took:?}, before {wait:?}");
    // The RPC was aborted: nothing is left outstanding.
    assert!(matches!(
        client.blocking().recv_any_response(Some(Duration::ZERO)),
        Err(Error::NothingOutstanding)
    ));
    // A pending recv_request is just a future: dropping it is fine, and the
    // request is still delivered to the next one.
    let got = block_on(server.recv_request()).unwrap();
    assert_eq!(got.message, Bytes::from_static(b"?"));
}

#[test]
fn call_times_out_on_a_thread_of_another_executor_while_others_run() {
    // Several calls at once from several plain threads, with different
    // timeouts: each ends by its own deadline.
    let server = silent_server();
    let addr = server.local_addr();
    let threads: Vec<_> = (0..4u64)
        .map(|i| {
            std::thread::spawn(move || {
                assert_no_runtime();
                let client = AsyncEndpoint::bind(any(), Config::default()).unwrap();
                let wait = Duration::from_millis(100 + 100 * i);
                let start = Instant::now();
                let r = block_on(client.call(addr, Bytes::from_static(b"?"), wait));
                (r, start.elapsed(), wait)
            })
        })
        .collect();
    for t in threads {
        let (r, took, wait) = t.join().unwrap();
        assert!(matches!(r, Err(Error::Timeout)), "{r:?}");
        assert!(took >= wait, "{took:?} < {wait:?}");
    }
}

#[test]
fn inside_a_tokio_runtime_the_same_calls_work() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let server = AsyncEndpoint::bind(any(), Config::default()).unwrap();
        let silent = silent_server();
        let addr = server.local_addr();
        let echo = server.clone();
        tokio::spawn(async move {
            while let Ok(req) = echo.recv_request().await {
                echo.reply(req.id, req.message).unwrap();
            }
        });
        let client = AsyncEndpoint::bind(any(), Config::default()).unwrap();
        let resp = client
            .call(addr, Bytes::from_static(b"hi"), CALL_TIMEOUT)
            .await
            .unwrap();
        assert_eq!(resp, "hi");
        let wait = Duration::from_millis(200);
        let start = Instant::now();
        let r = client
            .call(silent.local_addr(), Bytes::from_static(b"?"), wait)
            .await;
        assert!(matches!(r, Err(Error::Timeout)), "{r:?}");
        assert!(start.elapsed() >= wait);
        server.shutdown();
    });
}

#[test]
fn async_streams_run_on_plain_threads() {
    assert_no_runtime();
    let server = AsyncEndpoint::bind(any(), Config::default()).unwrap();
    let client = AsyncEndpoint::bind(any(), Config::default()).unwrap();
    let addr = server.local_addr();
    let srv = server.clone();
    // An echo on its own thread, with the minimal executor.
    let echo = std::thread::spawn(move || {
        assert_no_runtime();
        block_on(async {
            let s = srv.accept_stream().await?;
            let mut n = 0;
            while let Some(m) = s.recv().await? {
                s.send(m).await?;
                n += 1;
            }
            s.finish().await?;
            Ok::<_, Error>(n)
        })
    });
    let s = block_on(client.open_stream(addr)).unwrap();
    // More than the window: sends wait for the echo to read (and the echo's
    // sends for this thread to read), so send and receive alternate.
    const N: usize = 50;
    for i in 0..N {
        let m = Bytes::from(vec![i as u8; 100 + i]);
        block_on(s.send(m.clone())).unwrap();
        assert_eq!(block_on(s.recv()).unwrap(), Some(m));
    }
    block_on(s.finish()).unwrap();
    assert_eq!(block_on(s.recv()).unwrap(), None);
    assert_eq!(echo.join().unwrap().unwrap(), N);
}

/// A wait for a response that its caller gave up on (its future polled,
/// then dropped later, as a cancelled task's is) does not lose the
/// response: dropped with the response already in its channel, it gives it
/// back and the next wait gets it; and a newer wait registered meanwhile
/// gets the response itself, not the older one about to be dropped.
#[test]
fn a_cancelled_wait_does_not_lose_the_response() {
    let server = AsyncEndpoint::bind(any(), Config::default()).unwrap();
    let client = AsyncEndpoint::bind(any(), Config::default()).unwrap();
    let mut cx = Context::from_waker(Waker::noop());
    for round in 0..2u64 {
        let id = client
            .send_request(server.local_addr(), Bytes::from_static(b"q"))
            .unwrap();
        let req = block_on(server.recv_request()).unwrap();
        // Registered (polled once), then never polled again.
        let mut stale = Box::pin(client.recv_response(id));
        assert!(stale.as_mut().poll(&mut cx).is_pending());
        let newer = (round == 1).then(|| {
            let mut f = Box::pin(client.recv_response(id));
            assert!(f.as_mut().poll(&mut cx).is_pending());
            f
        });
        server.reply(req.id, Bytes::from_static(b"late")).unwrap();
        // The client has taken the response in: it sits in a channel.
        let deadline = Instant::now() + CALL_TIMEOUT;
        while client.metrics().responses_delivered < round + 1 {
            assert!(Instant::now() < deadline, "round {round}: no response");
            std::thread::sleep(Duration::from_millis(1));
        }
        match newer {
            None => {
                drop(stale);
                assert_eq!(block_on(client.recv_response(id)).unwrap(), "late");
            }
            Some(f) => {
                assert_eq!(block_on(f).unwrap(), "late", "the newer wait");
                drop(stale);
            }
        }
    }
}
