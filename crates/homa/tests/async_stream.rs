//! Async streams (`AsyncEndpoint::open_stream` / `accept_stream`,
//! `AsyncStream`) over real sockets on tokio: ordered delivery both ways,
//! backpressure (a send that waits while the window is full and proceeds
//! once the peer reads), clean termination in both orders, resets, a dead,
//! refusing or silent peer, cancellation, and many streams on a
//! current-thread runtime making progress together (no wait blocks the
//! executor's only thread).

mod common;

use bytes::Bytes;
use common::{assert_bytes, pattern, CALL_TIMEOUT};
use homa::{AsyncEndpoint, AsyncStream, Config, Error};
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;
use tokio::time::timeout;

fn bind(config: Config) -> AsyncEndpoint {
    AsyncEndpoint::bind("127.0.0.1:0".parse().unwrap(), config).unwrap()
}

fn pair() -> (AsyncEndpoint, AsyncEndpoint) {
    (bind(Config::default()), bind(Config::default()))
}

/// A current-thread runtime: a wait that blocked its thread would stall
/// every other task.
fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Message `i` of a run: mostly small, every 7th spans several packets.
fn msg(tag: u64, i: usize) -> Bytes {
    let len = if i % 7 == 0 {
        20_000 + i % 3_000
    } else {
        i % 300
    };
    pattern(tag * 1_000_000 + i as u64, len)
}

/// Awaits `f`, failing the test if it takes longer than `CALL_TIMEOUT`.
async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    match timeout(CALL_TIMEOUT, f).await {
        Ok(v) => v,
        Err(_) => panic!("{what}: no progress within {CALL_TIMEOUT:?}"),
    }
}

/// Receives `n` messages (checking each) and then the end.
async fn recv_all(s: &AsyncStream, tag: u64, n: usize) {
    for i in 0..n {
        let got = within("recv", s.recv())
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("end after {i}"));
        assert_bytes(&msg(tag, i), &got, &format!("message {i}"));
    }
    assert_eq!(
        within("end", s.recv()).await.unwrap(),
        None,
        "the end after {n}"
    );
}

#[test]
fn many_messages_both_ways_arrive_in_order() {
    rt().block_on(async {
        let (server, client) = pair();
        let addr = server.local_addr();
        const N: usize = 600;
        // The server echoes each message back, then finishes after the
        // client did. (The endpoint outlives the task: dropping its last
        // handle would close it before the last echo is delivered.)
        let srv = server.clone();
        let echo = tokio::spawn(async move {
            let server = srv;
            let s = within("accept", server.accept_stream()).await.unwrap();
            let mut n = 0;
            while let Some(m) = within("echo recv", s.recv()).await.unwrap() {
                within("echo send", s.send(m)).await.unwrap();
                n += 1;
            }
            s.finish().await.unwrap();
            n
        });
        let s = client.open_stream(addr).await.unwrap();
        let send = async {
            for i in 0..N {
                within("send", s.send(msg(1, i))).await.unwrap();
            }
            s.finish().await.unwrap();
        };
        tokio::join!(send, recv_all(&s, 1, N));
        assert_eq!(echo.await.unwrap(), N);
        let m = client.metrics();
        assert_eq!(m.streams_opened, 1);
        assert_eq!(m.streams_failed, 0);
    });
}

#[test]
fn a_send_waits_while_the_window_is_full_and_proceeds_after_the_peer_reads() {
    rt().block_on(async {
        let (server, client) = pair();
        let window = Config::default().core.stream_window as usize;
        let s = client.open_stream(server.local_addr()).await.unwrap();
        // Nobody reads: the sender gets only so far, then waits.
        let mut sent = 0;
        loop {
            match timeout(Duration::from_millis(300), s.send(msg(2, sent))).await {
                Ok(Ok(())) => sent += 1,
                Ok(Err(e)) => panic!("send {sent}: {e}"),
                Err(_) => break, // waiting for room (the message was not sent)
            }
            assert!(sent <= 4 * window, "no backpressure after {sent} messages");
        }
        assert!(sent >= window, "blocked after only {sent} messages");
        assert!(matches!(
            s.try_send(msg(2, sent)),
            Err(Error::Limit("stream send window"))
        ));
        // A send now pending; the peer accepts and reads; it completes.
        let r = within("accept", server.accept_stream()).await.unwrap();
        const MORE: usize = 100;
        let send = async {
            for i in sent..sent + MORE {
                within("send after the peer read", s.send(msg(2, i)))
                    .await
                    .unwrap();
            }
            s.finish().await.unwrap();
        };
        tokio::join!(send, recv_all(&r, 2, sent + MORE));
        r.finish().await.unwrap();
        assert_eq!(within("end", s.recv()).await.unwrap(), None);
    });
}

#[test]
fn a_pending_send_completes_once_the_peer_reads() {
    rt().block_on(async {
        let (server, client) = pair();
        let s = client.open_stream(server.local_addr()).await.unwrap();
        let mut sent = 0;
        while timeout(Duration::from_millis(300), s.send(msg(12, sent)))
            .await
            .is_ok_and(|r| r.is_ok())
        {
            sent += 1;
        }
        let r = within("accept", server.accept_stream()).await.unwrap();
        let pending = s.send(msg(12, sent));
        tokio::pin!(pending);
        // Still full: the send waits.
        assert!(timeout(Duration::from_millis(200), &mut pending)
            .await
            .is_err());
        // The receiver reads everything that was sent; the window opens.
        for i in 0..sent {
            let got = within("recv", r.recv()).await.unwrap().unwrap();
            assert_bytes(&msg(12, i), &got, "queued");
        }
        within("the pending send", &mut pending).await.unwrap();
        let got = within("recv", r.recv()).await.unwrap().unwrap();
        assert_bytes(&msg(12, sent), &got, "the one that waited");
    });
}

#[test]
fn clean_termination_client_first() {
    rt().block_on(async {
        let (server, client) = pair();
        let s = client.open_stream(server.local_addr()).await.unwrap();
        for i in 0..5 {
            s.send(msg(3, i)).await.unwrap();
        }
        s.finish().await.unwrap();
        assert!(s.is_finished());
        assert!(matches!(
            s.send(msg(3, 99)).await,
            Err(Error::StreamFinished)
        ));
        let r = within("accept", server.accept_stream()).await.unwrap();
        recv_all(&r, 3, 5).await;
        for i in 0..10 {
            within("send", r.send(msg(4, i))).await.unwrap();
        }
        r.finish().await.unwrap();
        recv_all(&s, 4, 10).await;
        drop((s, r));
        wait_closed(&client, &server).await;
    });
}

#[test]
fn clean_termination_server_first() {
    rt().block_on(async {
        let (server, client) = pair();
        let s = client.open_stream(server.local_addr()).await.unwrap();
        s.send(msg(5, 0)).await.unwrap();
        let r = within("accept", server.accept_stream()).await.unwrap();
        for i in 0..15 {
            within("send", r.send(msg(6, i))).await.unwrap();
        }
        r.finish().await.unwrap();
        recv_all(&s, 6, 15).await;
        for i in 1..12 {
            within("send", s.send(msg(5, i))).await.unwrap();
        }
        s.finish().await.unwrap();
        recv_all(&r, 5, 12).await;
        drop((s, r));
        wait_closed(&client, &server).await;
    });
}

/// Both sides' core states end as closed (not failed).
async fn wait_closed(a: &AsyncEndpoint, b: &AsyncEndpoint) {
    for _ in 0..2_000 {
        let (ma, mb) = (a.metrics(), b.metrics());
        if ma.streams_closed == 1 && mb.streams_closed == 1 {
            assert_eq!(ma.streams_failed + mb.streams_failed, 0);
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "streams not closed: {} and {}",
        a.metrics().streams_closed,
        b.metrics().streams_closed
    );
}

#[test]
fn dropping_an_unfinished_stream_resets_the_peer() {
    rt().block_on(async {
        let (server, client) = pair();
        let s = client.open_stream(server.local_addr()).await.unwrap();
        s.send(msg(7, 0)).await.unwrap();
        let r = within("accept", server.accept_stream()).await.unwrap();
        let first = within("recv", r.recv()).await.unwrap().unwrap();
        assert_bytes(&msg(7, 0), &first, "first");
        // The peer waits in recv while the stream is dropped.
        let waiting = tokio::spawn(async move {
            let got = within("reset", r.recv()).await;
            (got, r)
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(s);
        let (got, r) = waiting.await.unwrap();
        assert!(matches!(got, Err(Error::StreamReset)), "{got:?}");
        assert!(matches!(r.send(msg(7, 1)).await, Err(Error::StreamReset)));
    });
}

#[test]
fn abort_fails_local_waiters_and_resets_the_peer() {
    rt().block_on(async {
        let (server, client) = pair();
        let s = std::sync::Arc::new(client.open_stream(server.local_addr()).await.unwrap());
        s.send(msg(13, 0)).await.unwrap();
        let r = within("accept", server.accept_stream()).await.unwrap();
        // A task of ours waits for a message that will not come.
        let s2 = s.clone();
        let local = tokio::spawn(async move { within("local", s2.recv()).await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        s.abort();
        assert!(matches!(local.await.unwrap(), Err(Error::StreamReset)));
        assert!(matches!(s.send(msg(13, 1)).await, Err(Error::StreamReset)));
        let first = within("recv", r.recv()).await.unwrap().unwrap();
        assert_bytes(&msg(13, 0), &first, "first");
        assert!(matches!(
            within("peer", r.recv()).await,
            Err(Error::StreamReset)
        ));
    });
}

#[test]
fn a_peer_that_shuts_down_fails_the_stream() {
    rt().block_on(async {
        let (server, client) = pair();
        let s = client.open_stream(server.local_addr()).await.unwrap();
        s.send(msg(8, 0)).await.unwrap();
        let r = within("accept", server.accept_stream()).await.unwrap();
        within("recv", r.recv()).await.unwrap().unwrap();
        server.shutdown();
        assert!(matches!(r.recv().await, Err(Error::Closed)));
        // The client learns it at the latest when it has something
        // outstanding.
        let _ = s.send(msg(8, 1)).await;
        match within("dead peer", s.recv()).await {
            Err(Error::PeerDead | Error::StreamReset) => {}
            other => panic!("want PeerDead or StreamReset, got {other:?}"),
        }
    });
}

#[test]
fn a_peer_without_streams_refuses() {
    rt().block_on(async {
        let mut config = Config::default();
        config.core.stream_window = 0;
        let server = bind(config);
        let client = bind(Config::default());
        let s = client.open_stream(server.local_addr()).await.unwrap();
        let _ = s.send(msg(9, 0)).await;
        assert!(matches!(
            within("refusal", s.recv()).await,
            Err(Error::StreamRefused)
        ));
        assert!(matches!(s.send(msg(9, 1)).await, Err(Error::StreamRefused)));
    });
}

#[test]
fn a_silent_peer_times_the_opening_out() {
    rt().block_on(async {
        // A socket that never answers (as Linux Homa drops STREAM packets).
        let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr: SocketAddr = silent.local_addr().unwrap();
        let client = bind(Config::default());
        let s = client.open_stream(addr).await.unwrap();
        s.send(msg(10, 0)).await.unwrap();
        match within("open timeout", s.recv()).await {
            Err(Error::StreamOpenTimeout | Error::PeerDead) => {}
            other => panic!("want StreamOpenTimeout, got {other:?}"),
        }
    });
}

#[test]
fn cancelled_recv_and_accept_lose_nothing() {
    rt().block_on(async {
        let (server, client) = pair();
        // An accept given up on; the stream then goes to the next one.
        assert!(timeout(Duration::from_millis(50), server.accept_stream())
            .await
            .is_err());
        let s = client.open_stream(server.local_addr()).await.unwrap();
        s.send(msg(14, 0)).await.unwrap();
        let r = within("accept", server.accept_stream()).await.unwrap();
        // A recv given up on; the message still comes to the next one.
        assert_bytes(&msg(14, 0), &r.recv().await.unwrap().unwrap(), "first");
        assert!(timeout(Duration::from_millis(50), r.recv()).await.is_err());
        s.send(msg(14, 1)).await.unwrap();
        let got = within("recv", r.recv()).await.unwrap().unwrap();
        assert_bytes(&msg(14, 1), &got, "after a cancelled recv");
    });
}

#[test]
fn shutdown_wakes_a_pending_accept_and_recv() {
    rt().block_on(async {
        let (server, client) = pair();
        let s = client.open_stream(server.local_addr()).await.unwrap();
        s.send(msg(15, 0)).await.unwrap();
        let r = within("accept", server.accept_stream()).await.unwrap();
        r.recv().await.unwrap().unwrap();
        let srv = server.clone();
        let accept = tokio::spawn(async move { srv.accept_stream().await.map(|_| ()) });
        let recv = tokio::spawn(async move { r.recv().await.map(|_| ()) });
        tokio::time::sleep(Duration::from_millis(50)).await;
        server.shutdown();
        assert!(matches!(
            within("accept", accept).await.unwrap(),
            Err(Error::Closed)
        ));
        assert!(matches!(
            within("recv", recv).await.unwrap(),
            Err(Error::Closed)
        ));
    });
}

/// 64 streams at once on one thread, each echoing 40 messages, while one
/// more stream waits for a message that comes only after all of them are
/// done: every wait is a task's, none holds the executor's only thread.
#[test]
fn many_streams_on_a_current_thread_runtime_progress_together() {
    rt().block_on(async {
        let (server, client) = pair();
        let addr = server.local_addr();
        const STREAMS: usize = 64;
        const MSGS: usize = 40;
        let srv = server.clone();
        let acceptor = tokio::spawn(async move {
            let mut echoes = Vec::new();
            for _ in 0..=STREAMS {
                let s = within("accept", srv.accept_stream()).await.unwrap();
                echoes.push(tokio::spawn(async move {
                    while let Some(m) = within("echo recv", s.recv()).await.unwrap() {
                        within("echo send", s.send(m)).await.unwrap();
                    }
                    s.finish().await.unwrap();
                }));
            }
            for e in echoes {
                e.await.unwrap();
            }
        });
        // The waiting stream: its echo comes after the others finished.
        let slow = std::sync::Arc::new(client.open_stream(addr).await.unwrap());
        let waiter = slow.clone();
        let slow_recv = tokio::spawn(async move { within("slow", waiter.recv()).await });
        let mut tasks = Vec::new();
        for t in 0..STREAMS as u64 {
            let s = client.open_stream(addr).await.unwrap();
            tasks.push(tokio::spawn(async move {
                let send = async {
                    for i in 0..MSGS {
                        within("send", s.send(msg(100 + t, i))).await.unwrap();
                    }
                    s.finish().await.unwrap();
                };
                tokio::join!(send, recv_all(&s, 100 + t, MSGS));
            }));
        }
        for t in tasks {
            within("stream task", t).await.unwrap();
        }
        assert!(!slow_recv.is_finished(), "nothing was sent on it yet");
        slow.send(msg(99, 1)).await.unwrap();
        slow.finish().await.unwrap();
        let got = within("slow task", slow_recv).await.unwrap().unwrap();
        assert_bytes(&msg(99, 1), &got.unwrap(), "the slow stream's echo");
        assert_eq!(within("slow end", slow.recv()).await.unwrap(), None);
        within("echo tasks", acceptor).await.unwrap();
        assert_eq!(client.metrics().streams_failed, 0);
    });
}
