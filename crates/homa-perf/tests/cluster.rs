//! Cluster mode on loopback: two nodes under light Poisson load, unloaded
//! probing against a server-only node, and the argument checks.

use clap::Parser;
use homa_perf::cluster::{run_node, unloaded_sizes, ClusterArgs, NodeReport, ResponseSize};
use homa_perf::error::check_cluster_addr;
use homa_perf::{PerfError, Protocol, SizeDist};
use std::net::{SocketAddr, TcpListener, UdpSocket};

/// A loopback address whose port is free for both TCP and UDP right now.
fn free_addr() -> SocketAddr {
    loop {
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = tcp.local_addr().unwrap();
        if UdpSocket::bind(addr).is_ok() {
            return addr;
        }
    }
}

/// Short timings so a loaded run takes under two seconds.
fn quick(me: SocketAddr, peers: &[SocketAddr], protocol: Protocol) -> ClusterArgs {
    let mut a = ClusterArgs::new(me, peers.to_vec(), protocol);
    a.warmup = 0.2;
    a.seconds = 1.0;
    a.drain = 1.0;
    a.linger = 0.3;
    a.ready_timeout = 5.0;
    a.timeout_ms = 2_000;
    a
}

/// Runs every node in its own thread; returns their reports in order.
fn run_all(nodes: Vec<ClusterArgs>) -> Vec<NodeReport> {
    let handles: Vec<_> = nodes
        .into_iter()
        .map(|a| std::thread::spawn(move || run_node(&a)))
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().unwrap().unwrap())
        .collect()
}

fn two_nodes_under_load(protocol: Protocol) {
    let (a, b) = (free_addr(), free_addr());
    let peers = [a, b];
    let nodes: Vec<ClusterArgs> = [a, b]
        .iter()
        .map(|&me| {
            let mut n = quick(me, &peers, protocol);
            n.size = Some(2_000);
            n.gbps = 0.02;
            n
        })
        .collect();
    for r in run_all(nodes) {
        let target = 0.02;
        assert_eq!(r.protocol, protocol.name());
        assert_eq!(r.mode, "loaded");
        assert_eq!(r.workload, "fixed:2000");
        assert_eq!(r.peers.len(), 1, "{r:?}");
        assert_eq!(r.errors, 0, "{}", r.summary());
        assert_eq!(r.unfinished, 0, "{}", r.summary());
        assert_eq!(r.skipped, 0, "{}", r.summary());
        assert_eq!(r.issued, r.completed);
        // 0.02 Gbit/s of 2,000 B requests and responses: 625 RPCs/s.
        assert!((r.offered_rate_rps - 625.0).abs() < 1e-6);
        assert!(r.completed > 300, "{}", r.summary());
        assert_eq!(r.rpcs.len() as u64, r.completed);
        assert!(r.rpcs.iter().all(|&(size, rtt)| size == 2_000 && rtt > 0));
        assert_eq!(r.request_bytes, 2_000 * r.completed);
        assert_eq!(r.response_bytes, 2_000 * r.completed);
        let achieved = r.achieved_gbps();
        assert!(
            achieved > target / 2.0 && achieved < target * 2.0,
            "{}",
            r.summary()
        );
        assert!(r.rtt_quantile_ns(0.5) <= r.rtt_quantile_ns(0.99));
        assert_eq!(r.homa.is_some(), protocol == Protocol::Homa);
        assert!(r.cpu_user_s + r.cpu_sys_s > 0.0);
        // The report survives JSON.
        let back: NodeReport = serde_json::from_str(&r.to_json_string()).unwrap();
        assert_eq!(back.completed, r.completed);
    }
}

#[test]
fn two_homa_nodes_under_load() {
    two_nodes_under_load(Protocol::Homa);
}

#[test]
fn two_tcp_nodes_under_load() {
    two_nodes_under_load(Protocol::Tcp);
}

#[test]
fn workload_load_records_its_sizes() {
    let (a, b) = (free_addr(), free_addr());
    let peers = [a, b];
    let nodes: Vec<ClusterArgs> = [a, b]
        .iter()
        .map(|&me| {
            let mut n = quick(me, &peers, Protocol::Tcp);
            n.workload = Some("w2".into());
            n.max_size = 20_000;
            n.response_size = ResponseSize::Bytes(300);
            n.gbps = 0.01;
            n.tcp_connections = 2;
            n
        })
        .collect();
    for r in run_all(nodes) {
        assert_eq!(r.errors, 0, "{}", r.summary());
        assert!(r.completed > 100, "{}", r.summary());
        assert!(r.rpcs.iter().all(|&(size, _)| size <= 20_000));
        assert!(r.rpcs.iter().any(|&(size, _)| size < 1_000));
        let sent: u64 = r.rpcs.iter().map(|&(size, _)| size).sum();
        assert_eq!(r.request_bytes, sent);
        // Requests under 4 bytes get the default 100 B response.
        let tiny = r.rpcs.iter().filter(|&&(size, _)| size < 4).count() as u64;
        assert_eq!(r.response_bytes, 300 * (r.completed - tiny) + 100 * tiny);
    }
}

fn unloaded_against_a_server(protocol: Protocol) {
    let (a, b) = (free_addr(), free_addr());
    let peers = [a, b];
    let mut server = quick(b, &peers, protocol);
    server.server_only = true;
    server.seconds = 0.5;
    let mut prober = quick(a, &peers, protocol);
    prober.unloaded = true;
    prober.workload = Some("w3".into());
    prober.unloaded_points = 4;
    prober.unloaded_count = 5;
    prober.linger = 0.0;
    let sizes = unloaded_sizes(&SizeDist::by_name("w3").unwrap(), 1_000_000, 4);
    let reports = run_all(vec![prober, server]);
    let (r, s) = (&reports[0], &reports[1]);
    assert_eq!(r.mode, "unloaded");
    assert_eq!(r.errors, 0, "{}", r.summary());
    let probed: Vec<u64> = r.unloaded.iter().map(|p| p.size).collect();
    assert_eq!(probed, sizes);
    for p in &r.unloaded {
        assert_eq!(p.count, 5);
        assert!(0 < p.min_ns && p.min_ns <= p.p50_ns, "{p:?}");
    }
    assert_eq!(r.completed, 5 * sizes.len() as u64);
    assert_eq!(s.mode, "server");
    assert_eq!(s.issued, 0);
    assert!(s.seconds >= 0.5 + 0.2 + 0.3);
}

#[test]
fn homa_unloaded_against_a_server_only_node() {
    unloaded_against_a_server(Protocol::Homa);
}

#[test]
fn tcp_unloaded_fixed_size() {
    let (a, b) = (free_addr(), free_addr());
    let peers = [a, b];
    let mut server = quick(b, &peers, Protocol::Tcp);
    server.server_only = true;
    server.seconds = 0.5;
    let mut prober = quick(a, &peers, Protocol::Tcp);
    prober.unloaded = true;
    prober.size = Some(10_000);
    prober.response_size = ResponseSize::Bytes(50);
    prober.unloaded_count = 7;
    prober.linger = 0.0;
    let reports = run_all(vec![prober, server]);
    let r = &reports[0];
    assert_eq!(r.unloaded.len(), 1, "{r:?}");
    assert_eq!(r.unloaded[0].size, 10_000);
    assert_eq!(r.unloaded[0].count, 7);
    assert!(r.unloaded[0].min_ns <= r.unloaded[0].p50_ns);
    assert_eq!(r.response_bytes, 7 * 50);
}

#[test]
fn unloaded_sizes_span_the_workload() {
    let w = SizeDist::by_name("w3").unwrap();
    let sizes = unloaded_sizes(&w, 1_000_000, 40);
    assert!(sizes.windows(2).all(|p| p[0] < p[1]), "{sizes:?}");
    assert_eq!(sizes.first(), Some(&w.quantile(f64::MIN_POSITIVE)));
    assert_eq!(sizes.last(), Some(&1_000_000));
    assert!(sizes.len() > 10 && sizes.len() <= 42, "{sizes:?}");
    // Uncapped, the largest is the workload's.
    let all = unloaded_sizes(&w, u64::MAX, 40);
    assert_eq!(all.last(), Some(&w.max()));
    assert!(unloaded_sizes(&w, 500, 40).iter().all(|&s| s <= 500));
    // No quantiles: the extremes only.
    assert_eq!(unloaded_sizes(&w, u64::MAX, 0).len(), 2);
}

/// A binary's view of the flags, as an orchestrator would embed them.
#[derive(Debug, Parser)]
struct Wrapper {
    #[command(flatten)]
    args: ClusterArgs,
}

fn parse(args: &[String]) -> Result<ClusterArgs, clap::Error> {
    Wrapper::try_parse_from(std::iter::once("cluster".to_string()).chain(args.iter().cloned()))
        .map(|w| w.args)
}

#[test]
fn to_args_round_trips_through_clap() {
    let me: SocketAddr = "10.0.0.1:4000".parse().unwrap();
    let peers: Vec<SocketAddr> = vec![me, "10.0.0.2:4000".parse().unwrap()];
    let mut a = ClusterArgs::new(me, peers.clone(), Protocol::Homa);
    a.workload = Some("w4".into());
    assert_eq!(parse(&a.to_args()).unwrap(), a);

    let mut b = ClusterArgs::new("[fd00::1]:5000".parse().unwrap(), vec![], Protocol::Tcp);
    b.peers = vec!["[fd00::2]:5000".parse().unwrap()];
    b.size = Some(123);
    b.response_size = ResponseSize::Bytes(7);
    b.gbps = 0.05;
    b.seconds = 2.5;
    b.warmup = 0.0;
    b.unloaded = true;
    b.unloaded_points = 3;
    b.unloaded_count = 9;
    b.client_max = 7;
    b.tcp_connections = 4;
    b.server_threads = 2;
    b.config = Some("/tmp/homa config.toml".into());
    b.out = Some("/tmp/out.json".into());
    b.linger = 0.25;
    b.drain = 1e-3;
    b.ready_timeout = 3.0;
    b.timeout_ms = 99;
    b.seed = u64::MAX;
    assert_eq!(parse(&b.to_args()).unwrap(), b);

    // The defaults of the command line are those of new().
    let cli = parse(&[
        "--me".into(),
        "127.0.0.1:1".into(),
        "--peers".into(),
        "127.0.0.1:1,127.0.0.1:2".into(),
    ])
    .unwrap();
    let new = ClusterArgs::new(
        "127.0.0.1:1".parse().unwrap(),
        vec![
            "127.0.0.1:1".parse().unwrap(),
            "127.0.0.1:2".parse().unwrap(),
        ],
        Protocol::Homa,
    );
    assert_eq!(cli, new);
}

#[test]
fn only_loopback_and_private_addresses() {
    for ok in [
        "127.0.0.1:1",
        "10.1.2.3:1",
        "172.16.0.1:1",
        "172.31.255.255:1",
        "192.168.1.1:1",
        "[::1]:1",
        "[fd00::1]:1",
        "[fc12::1]:1",
    ] {
        check_cluster_addr(ok.parse().unwrap()).unwrap();
    }
    for bad in [
        "8.8.8.8:53",
        "172.32.0.1:1",
        "[2001:db8::1]:1",
        "[fe80::1]:1",
    ] {
        let e = check_cluster_addr(bad.parse().unwrap()).unwrap_err();
        assert!(matches!(e, PerfError::NotPrivate(_)));
        assert!(e.to_string().contains("loopback or private"), "{bad}: {e}");
    }
    let me: SocketAddr = "127.0.0.1:4000".parse().unwrap();
    let mut a = ClusterArgs::new(me, vec![me, "8.8.8.8:4000".parse().unwrap()], Protocol::Tcp);
    a.size = Some(10);
    assert!(matches!(run_node(&a), Err(PerfError::NotPrivate(_))));
}

fn usage_error(a: &ClusterArgs) -> String {
    match run_node(a) {
        Err(PerfError::Usage(m)) => m,
        other => panic!("expected a usage error, got {other:?}"),
    }
}

#[test]
fn bad_arguments_are_refused() {
    let me: SocketAddr = "127.0.0.1:4000".parse().unwrap();
    let other: SocketAddr = "127.0.0.1:4001".parse().unwrap();
    let mut a = ClusterArgs::new(me, vec![me, other], Protocol::Udp);
    a.size = Some(100);
    assert!(usage_error(&a).contains("udp"));

    let mut a = ClusterArgs::new(me, vec![me], Protocol::Homa);
    a.size = Some(100);
    assert!(usage_error(&a).contains("no node other than"));

    let a = ClusterArgs::new(me, vec![other], Protocol::Tcp);
    assert!(usage_error(&a).contains("--workload"));

    let mut a = ClusterArgs::new(me, vec![other], Protocol::Tcp);
    a.size = Some(100);
    for gbps in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        a.gbps = gbps;
        assert!(usage_error(&a).contains("--gbps"));
    }

    let mut a = ClusterArgs::new(me, vec![other], Protocol::Homa);
    a.workload = Some("w4".into());
    a.max_size = 2_000_000;
    assert!(usage_error(&a).contains("max_message_size"));

    // clap itself rejects both a workload and a size.
    assert!(parse(&[
        "--me=127.0.0.1:1".into(),
        "--peers=127.0.0.1:2".into(),
        "--size=5".into(),
        "--workload=w1".into(),
    ])
    .is_err());
}

#[test]
fn unreachable_peer_is_named() {
    let me = free_addr();
    let dead = free_addr();
    for protocol in [Protocol::Tcp, Protocol::Homa] {
        let mut a = quick(me, &[me, dead], protocol);
        a.size = Some(100);
        a.ready_timeout = 0.5;
        let e = run_node(&a).unwrap_err().to_string();
        assert!(e.contains(&dead.to_string()), "{protocol}: {e}");
    }
}

/// Two Homa nodes in ByteDance mode: each report carries what its endpoint
/// detected about the other (RTTs, rates, BDP); stock Homa's carries none.
#[test]
fn bytedance_nodes_record_their_peers() {
    let dir = std::env::temp_dir().join(format!("homa-perf-bd-peers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("bd.toml");
    // A 1 Gbit/s link: known rates on both sides.
    std::fs::write(
        &config,
        "[core]\nlink_mbps = 1000\n[core.bytedance]\nenabled = true\n",
    )
    .unwrap();
    let (a, b) = (free_addr(), free_addr());
    let peers = [a, b];
    let nodes: Vec<ClusterArgs> = [a, b]
        .iter()
        .map(|&me| {
            let mut n = quick(me, &peers, Protocol::Homa);
            n.size = Some(20_000);
            n.gbps = 0.05;
            n.config = Some(config.clone());
            n
        })
        .collect();
    let reports = run_all(nodes);
    for (r, other) in reports.iter().zip([b, a]) {
        assert_eq!(r.errors, 0, "{}", r.summary());
        let p = r
            .bytedance_peers
            .iter()
            .find(|p| p.peer == other.to_string())
            .unwrap_or_else(|| panic!("no record of {other}: {:?}", r.bytedance_peers));
        assert!(p.samples > 0, "{p:?}");
        assert!(0 < p.rtt_min_ns && p.rtt_min_ns <= p.rtt_recent_ns.max(p.rtt_min_ns));
        assert_eq!(
            (p.local_mbps, p.peer_link_mbps, p.path_mbps),
            (1000, 1000, 1000)
        );
        let bdp = p.detected_bdp.unwrap();
        assert!(
            (bdp - p.rtt_min_ns as f64 * 1000.0 / 8000.0).abs() < 1e-6,
            "{p:?}"
        );
        assert!(
            p.unsched_window.is_some() && p.grant_window.is_some(),
            "{p:?}"
        );
        // The records survive the report's JSON.
        let back: NodeReport = serde_json::from_str(&serde_json::to_string(r).unwrap()).unwrap();
        assert_eq!(back.bytedance_peers, r.bytedance_peers);
    }
    // Stock Homa records nothing, and reports without the field still parse.
    let (c, d) = (free_addr(), free_addr());
    let mut stock = quick(c, &[c, d], Protocol::Homa);
    stock.size = Some(2_000);
    stock.gbps = 0.01;
    let mut server = quick(d, &[c, d], Protocol::Homa);
    server.server_only = true;
    let reports = run_all(vec![stock, server]);
    assert!(reports.iter().all(|r| r.bytedance_peers.is_empty()));
    let mut v = serde_json::to_value(&reports[0]).unwrap();
    assert!(v.get("bytedance_peers").is_none());
    v.as_object_mut().unwrap().remove("bytedance_peers");
    let old: NodeReport = serde_json::from_value(v).unwrap();
    assert!(old.bytedance_peers.is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}
