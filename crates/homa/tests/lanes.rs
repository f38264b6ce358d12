//! Calls in lanes of their own (`Config::lanes`) over real sockets: right
//! answers with more threads than lanes (the rest wait as usual), large
//! messages granted through the lane, timeouts, aborts from elsewhere and a
//! shutdown reaching a thread asleep in its lane, and the refusal of a bad
//! lane count.

use bytes::Bytes;
use homa::{Config, Endpoint, Error};
use std::net::SocketAddr;
use std::thread;
use std::time::{Duration, Instant};

fn any() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn lanes(n: usize) -> Config {
    let mut c = Config::loopback();
    c.lanes = n;
    c
}

/// A server on `at` answering each request with its bytes (reversed if
/// `reverse`), on `threads` threads, until the endpoint is shut down.
fn echo_server(
    at: SocketAddr,
    config: Config,
    threads: usize,
    reverse: bool,
) -> (Endpoint, Vec<thread::JoinHandle<()>>) {
    let server = Endpoint::bind(at, config).unwrap();
    let hs = (0..threads)
        .map(|_| {
            let s = server.clone();
            thread::spawn(move || {
                while let Ok(req) = s.recv_request(None) {
                    let mut v = req.message.to_vec();
                    if reverse {
                        v.reverse();
                    }
                    let _ = s.reply(req.id, Bytes::from(v));
                }
            })
        })
        .collect();
    (server, hs)
}

#[test]
fn calls_in_lanes_get_their_own_answers() {
    let (server, hs) = echo_server(any(), Config::loopback(), 2, true);
    let dest = server.local_addr();
    let client = Endpoint::bind(any(), lanes(4)).unwrap();
    // 8 threads, 3 free lanes: most calls in a lane, the others as before.
    let ts: Vec<_> = (0..8)
        .map(|t| {
            let c = client.clone();
            thread::spawn(move || {
                for i in 0..150usize {
                    // Some large enough to need grants.
                    let len = if i % 10 == 0 {
                        1_500_000
                    } else {
                        1 + (t * 131 + i * 7) % 3000
                    };
                    let req: Vec<u8> = (0..len).map(|k| (k * 31 + t + i) as u8).collect();
                    let resp = c
                        .call(dest, Bytes::from(req.clone()), Duration::from_secs(20))
                        .unwrap();
                    let mut want = req;
                    want.reverse();
                    assert!(resp[..] == want[..], "thread {t} call {i}");
                }
            })
        })
        .collect();
    for t in ts {
        t.join().unwrap();
    }
    let s = client.runtime_stats();
    assert_eq!(s.lane_calls + s.lane_calls_refused, 8 * 150, "{s:?}");
    assert!(s.lane_calls > 0 && s.lane_calls_refused > 0, "{s:?}");
    drop(client);
    server.shutdown();
    for h in hs {
        h.join().unwrap();
    }
}

#[test]
fn calls_in_lanes_survive_loss_duplication_and_reordering() {
    // The fault shim on both ends (the client's holds back packets its
    // lanes read, released by whichever thread reads next).
    let faulty = |seed, lanes| {
        let mut c = Config::loopback();
        c.lanes = lanes;
        let mut f = homa::FaultInjection::loss(0.05, seed);
        f.duplicate_rate = 0.05;
        f.reorder_rate = 0.05;
        f.recv_drop_rate = 0.05;
        f.recv_duplicate_rate = 0.05;
        f.recv_reorder_rate = 0.05;
        c.fault_injection = Some(f);
        c
    };
    let (server, hs) = echo_server(any(), faulty(7, 0), 2, false);
    let dest = server.local_addr();
    let client = Endpoint::bind(any(), faulty(11, 4)).unwrap();
    let ts: Vec<_> = (0..4)
        .map(|t| {
            let c = client.clone();
            thread::spawn(move || {
                for i in 0..25usize {
                    let len = [1, 1_000, 60_000, 300_000][(t + i) % 4];
                    let req = Bytes::from(vec![(t * 31 + i) as u8; len]);
                    let resp = c.call(dest, req.clone(), Duration::from_secs(30));
                    assert_eq!(resp.unwrap(), req, "thread {t} call {i}");
                }
            })
        })
        .collect();
    for t in ts {
        t.join().unwrap();
    }
    let s = client.runtime_stats();
    assert!(s.lane_calls > 0, "{s:?}");
    assert!(s.injected_drops > 0 && s.injected_recv_drops > 0, "{s:?}");
    drop(client);
    server.shutdown();
    for h in hs {
        h.join().unwrap();
    }
}

#[test]
fn a_call_in_a_lane_times_out_and_its_lane_is_free_again() {
    // A server that never answers.
    let silent = Endpoint::bind(any(), Config::loopback()).unwrap();
    let client = Endpoint::bind(any(), lanes(2)).unwrap();
    for _ in 0..3 {
        let r = client.call(
            silent.local_addr(),
            Bytes::from_static(b"x"),
            Duration::from_millis(50),
        );
        assert!(matches!(r, Err(Error::Timeout)), "{r:?}");
    }
    // Each call had the one lane: it was freed each time.
    let s = client.runtime_stats();
    assert_eq!((s.lane_calls, s.lane_calls_refused), (3, 0), "{s:?}");
    assert!(silent.recv_request(Some(Duration::from_secs(5))).is_ok());
}

#[test]
fn a_shutdown_wakes_a_thread_asleep_in_its_lane() {
    let silent = Endpoint::bind(any(), Config::loopback()).unwrap();
    let client = Endpoint::bind(any(), lanes(2)).unwrap();
    let c = client.clone();
    let dest = silent.local_addr();
    let t = thread::spawn(move || {
        let began = Instant::now();
        let r = c.call(dest, Bytes::from_static(b"x"), Duration::from_secs(600));
        (r, began.elapsed())
    });
    // The request arrives: the caller is in its lane by then.
    let req = silent.recv_request(Some(Duration::from_secs(10))).unwrap();
    drop(req);
    client.shutdown();
    let (r, _) = t.join().unwrap();
    assert!(matches!(r, Err(Error::Closed)), "{r:?}");
}

#[test]
fn an_abort_from_another_thread_reaches_the_lane() {
    let silent = Endpoint::bind(any(), Config::loopback()).unwrap();
    let client = Endpoint::bind(any(), lanes(2)).unwrap();
    let c = client.clone();
    let dest = silent.local_addr();
    let t = thread::spawn(move || c.call(dest, Bytes::from_static(b"x"), Duration::from_secs(600)));
    let req = silent.recv_request(Some(Duration::from_secs(10))).unwrap();
    // The server learns the client's id: the id of the client's RPC is the
    // server's minus one.
    let id = homa::RpcId {
        id: req.id.id & !1,
        peer: dest,
    };
    client.abort(id).unwrap();
    let r = t.join().unwrap();
    assert!(matches!(r, Err(Error::UnknownRpc(_))), "{r:?}");
}

#[test]
fn calls_in_lanes_over_ipv6() {
    let v6: SocketAddr = "[::1]:0".parse().unwrap();
    let (server, hs) = echo_server(v6, Config::loopback(), 1, false);
    let client = Endpoint::bind(v6, lanes(2)).unwrap();
    for i in 0..20u8 {
        let req = Bytes::from(vec![i; 1 + i as usize * 5_000]);
        let resp = client
            .call(server.local_addr(), req.clone(), Duration::from_secs(10))
            .unwrap();
        assert_eq!(resp, req);
    }
    assert_eq!(client.runtime_stats().lane_calls, 20);
    server.shutdown();
    for h in hs {
        h.join().unwrap();
    }
}

#[test]
fn a_bad_lane_count_is_refused() {
    for n in [3, 65, 100] {
        let e = Endpoint::bind(any(), lanes(n)).unwrap_err();
        assert!(e.to_string().contains("lanes"), "{e}");
    }
    for n in [0, 1, 2, 64] {
        Endpoint::bind(any(), lanes(n)).unwrap();
    }
}
