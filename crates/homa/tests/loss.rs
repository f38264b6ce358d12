//! Loss on the path: (a) the runtime's fault-injection shim drops 5% of the
//! packets both ends send; (b) as root with nftables, a rule inside a
//! network namespace of our own drops about 5% of the UDP packets to and
//! from the server port. Every RPC must complete with the right bytes.

mod common;

use common::{assert_bytes, have_tool, is_root, pattern, EchoServer, NetNs, CALL_TIMEOUT};
use homa::{Config, Endpoint, FaultInjection};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Instant;

/// Client endpoints (one thread each). The core sends at most one RESEND
/// per peer every `resend_interval` ticks, so recovery from many losses
/// is faster when they are spread over several peers.
const CLIENTS: u64 = 10;

/// Sizes roughly log-uniform over 0..=max: mostly small, some large.
fn mixed_sizes(seed: u64, n: usize, max: usize) -> Vec<usize> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|i| match i % 10 {
            0 => 0,
            1 => max, // the largest size is always present
            _ => {
                let e: f64 = rng.gen_range(0.0..(max as f64).ln());
                e.exp() as usize
            }
        })
        .collect()
}

/// Runs `sizes` as RPCs from `clients`, each on its own thread with up to
/// `window` RPCs outstanding (a new one starts as soon as one finishes),
/// checking every response.
fn run_rpcs(clients: Vec<Endpoint>, dest: SocketAddr, sizes: &[usize], window: usize) {
    let n = clients.len();
    let handles: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(c, ep)| {
            let mut todo: Vec<(usize, usize)> = sizes
                .iter()
                .copied()
                .enumerate()
                .filter(|(i, _)| i % n == c)
                .collect();
            todo.reverse();
            std::thread::spawn(move || {
                let mut outstanding = HashMap::new();
                while !todo.is_empty() || !outstanding.is_empty() {
                    while outstanding.len() < window {
                        let Some((i, len)) = todo.pop() else { break };
                        let id = ep.send_request(dest, pattern(i as u64, len)).unwrap();
                        outstanding.insert(id, (i, len));
                    }
                    let (id, r) = ep.recv_any_response(Some(CALL_TIMEOUT)).unwrap();
                    let (i, len) = outstanding.remove(&id).expect("an RPC of ours");
                    let r = r.unwrap_or_else(|e| panic!("rpc {i} ({len} B): {e}"));
                    assert_bytes(&pattern(i as u64, len), &r, &format!("rpc {i} ({len} B)"));
                }
                ep
            })
        })
        .collect();
    for h in handles {
        let ep = h.join().expect("client thread panicked");
        assert_eq!(ep.metrics().rpcs_failed, 0);
    }
}

/// 300 RPCs of 0..200 KB with 5% of the packets of both ends dropped by
/// the runtime's fault injection (seeded, so the drop pattern of each
/// endpoint is reproducible; the interleaving of threads is not).
#[test]
fn fault_injection_5_percent_both_ends() {
    const SEED: u64 = 0x105_5005;
    let faulty = |seed| {
        let mut f = FaultInjection::default();
        f.drop_rate = 0.05;
        f.seed = seed;
        let mut config = Config::default();
        config.fault_injection = Some(f);
        config
    };
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let server = EchoServer::bind(any, faulty(SEED), 4);
    let clients: Vec<Endpoint> = (0..CLIENTS)
        .map(|c| Endpoint::bind(any, faulty(SEED + 1 + c)).unwrap())
        .collect();
    let probes = clients.clone();
    let sizes = mixed_sizes(SEED, 300, 200_000);
    let start = Instant::now();
    run_rpcs(clients, server.addr, &sizes, 6);
    let elapsed = start.elapsed();
    let srv = server.endpoint();
    let (sm, ss) = (srv.metrics(), srv.runtime_stats());
    let injected: u64 = ss.injected_drops
        + probes
            .iter()
            .map(|c| c.runtime_stats().injected_drops)
            .sum::<u64>();
    let client_resends: u64 = probes.iter().map(|c| c.metrics().resends_requested).sum();
    eprintln!(
        "300 RPCs ({} MB each way) under 5% injected loss in {elapsed:?}: {injected} packets \
         dropped, {} + {client_resends} RESENDs (server + clients), {} B retransmitted by \
         the server",
        sizes.iter().sum::<usize>() / 1_000_000,
        sm.resends_requested,
        sm.data_bytes_retransmitted
    );
    assert_eq!(
        sm.requests_delivered, 300,
        "each request delivered exactly once"
    );
    assert!(injected > 100, "the shim dropped only {injected} packets");
    assert!(sm.resends_requested + client_resends > 0);
    server.stop();
}

/// The same over a real lossy path: a network namespace of our own whose
/// nftables output hook drops ~5% of the UDP packets to the server port
/// and ~5% of those from it. Client and server endpoints are opened on a
/// thread that entered the namespace, so all their traffic crosses the
/// namespace's loopback and its rules.
#[test]
fn nftables_5_percent_loss_in_namespace() {
    if !is_root() {
        eprintln!("nftables loss test skipped: needs root (namespaces, nftables)");
        return;
    }
    if !have_tool("nft") {
        eprintln!(
            "nftables loss test skipped: the `nft` binary is missing (apt-get install nftables)"
        );
        return;
    }
    if !have_tool("ip") {
        eprintln!("nftables loss test skipped: the `ip` binary is missing (iproute2)");
        return;
    }
    // Declared first: dropped last, after the endpoints inside it.
    let ns = NetNs::create("loss").expect("create network namespace");
    let (server, clients) = ns
        .run_inside(|| {
            let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
            let server = EchoServer::bind(any, Config::default(), 4);
            let clients: Vec<Endpoint> = (0..CLIENTS)
                .map(|_| Endpoint::bind(any, Config::default()).unwrap())
                .collect();
            (server, clients)
        })
        .expect("enter namespace");
    let port = server.addr.port();
    ns.nft(&format!(
        "table inet homa_loss {{
            chain out {{
                type filter hook output priority 0; policy accept;
                udp dport {port} numgen random mod 100 < 5 counter drop
                udp sport {port} numgen random mod 100 < 5 counter drop
            }}
        }}"
    ))
    .expect("install nftables rules");
    let sizes = mixed_sizes(0x4e46, 200, 200_000);
    let start = Instant::now();
    run_rpcs(clients, server.addr, &sizes, 8);
    let elapsed = start.elapsed();
    let rules = ns
        .exec("nft", &["list", "table", "inet", "homa_loss"])
        .expect("list rules");
    let dropped: Vec<u64> = rules
        .lines()
        .filter_map(|l| {
            let i = l.find("counter packets ")?;
            l[i + 16..].split_whitespace().next()?.parse().ok()
        })
        .collect();
    let sm = server.endpoint().metrics();
    eprintln!(
        "200 RPCs through nftables loss in {elapsed:?}: dropped {dropped:?} packets (to, from \
         the server), server sent {} RESENDs and retransmitted {} B",
        sm.resends_requested, sm.data_bytes_retransmitted
    );
    assert_eq!(dropped.len(), 2, "counters not found in:\n{rules}");
    assert!(
        dropped.iter().all(|&d| d > 0),
        "nftables dropped nothing: {dropped:?}"
    );
    assert_eq!(sm.requests_delivered, 200);
    server.stop();
    drop(ns);
}
