//! Content checks (a response of the right length but wrong bytes is an
//! error; a patterned request with wrong bytes is counted by the server),
//! the server's metrics output and clean stop on SIGTERM, and the loss
//! matrix through the binary.

use bytes::Bytes;
use homa_perf::proto::{make_request, response_ok, wanted_response_size};
use homa_perf::{run_client, ClientOptions, Protocol, Server, ServerOptions, SizeSpec, StopRule};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// A Homa server that answers every second request with the right length
/// but zeros.
#[test]
fn wrong_response_bytes_are_counted_as_errors() {
    let ep = homa::Endpoint::bind(loopback(), homa::Config::loopback()).unwrap();
    let addr = ep.local_addr();
    let srv = ep.clone();
    let worker = std::thread::spawn(move || {
        let mut n = 0u64;
        while let Ok(req) = srv.recv_request(None) {
            let want = wanted_response_size(&req.message);
            let good = homa_perf::proto::make_response(&req.message, want, false);
            let reply = if n % 2 == 1 {
                Bytes::from(vec![0u8; want])
            } else {
                good
            };
            n += 1;
            if srv.reply(req.id, reply).is_err() {
                break;
            }
        }
    });
    let mut c = ClientOptions::new(Protocol::Homa, addr);
    c.sizes = SizeSpec::Fixed(2_000);
    c.response_size = 5_000;
    c.stop = StopRule::Count(40);
    c.warmup = 0;
    let report = run_client(&c).unwrap();
    assert_eq!(report.rpcs, 20, "{report:?}");
    assert_eq!(report.errors, 20, "{report:?}");
    assert_eq!(report.content_errors, 20, "{report:?}");
    assert!(report
        .to_table()
        .contains("20 of the errors: responses with wrong bytes"));
    ep.shutdown();
    worker.join().unwrap();
}

#[test]
fn the_server_checks_patterned_requests() {
    let server = Server::start(&ServerOptions {
        protocol: Protocol::Homa,
        bind: loopback(),
        threads: 1,
        busy_poll: false,
        homa_config: homa::Config::loopback(),
        work_per_request: Duration::ZERO,
    })
    .unwrap();
    let client = homa::Endpoint::bind(loopback(), homa::Config::loopback()).unwrap();
    let t = Duration::from_secs(10);
    let good = make_request(7, 3_000, 100_000);
    let r = client.call(server.local_addr(), good.clone(), t).unwrap();
    assert!(response_ok(7, 100_000, &r));
    assert_eq!(server.bad_requests(), 0);
    let mut bad = good.to_vec();
    bad[50_000] ^= 0x40;
    let r = client
        .call(server.local_addr(), Bytes::from(bad), t)
        .unwrap();
    assert_eq!(r.len(), 3_000);
    assert!(
        !response_ok(7, 100_000, &r),
        "a bad request gets a bad response"
    );
    assert_eq!(server.bad_requests(), 1);
    // Unmarked requests (cluster mode's) are answered without complaint.
    let mut plain = vec![0u8; 1_000];
    plain[..4].copy_from_slice(&10u32.to_le_bytes());
    let r = client
        .call(server.local_addr(), Bytes::from(plain), t)
        .unwrap();
    assert_eq!(r.len(), 10);
    assert_eq!(server.bad_requests(), 1);
    let report = server.homa_report().unwrap();
    assert_eq!(report["bad_requests"], 1);
    assert_eq!(report["metrics"]["requests_delivered"], 3);
    assert!(
        report["runtime_stats"]["packets_received"]
            .as_u64()
            .unwrap()
            >= 3
    );
    client.shutdown();
    server.shutdown();
}

fn homa_perf(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_homa-perf"))
        .args(args)
        .output()
        .expect("run homa-perf")
}

#[test]
fn server_prints_metrics_periodically_and_on_sigterm() {
    let port = std::net::UdpSocket::bind(loopback())
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let mut server = Command::new(env!("CARGO_BIN_EXE_homa-perf"))
        .args([
            "server",
            "--bind",
            &addr,
            "--print-metrics",
            "--metrics-every",
            "0.2",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    // The first periodic line says the server is up.
    let first: serde_json::Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(first["final"], false);
    assert!(first["metrics"].is_object() && first["runtime_stats"].is_object());
    let o = homa_perf(&[
        "client", "--server", &addr, "--count", "50", "--warmup", "0", "--size", "30000", "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (v["rpcs"].as_u64(), v["content_errors"].as_u64()),
        (Some(50), Some(0))
    );
    // SAFETY: kill sends a signal to the child we spawned.
    assert_eq!(
        unsafe { libc::kill(server.id() as libc::pid_t, libc::SIGTERM) },
        0
    );
    let status = server.wait().unwrap();
    assert!(status.success(), "stopped cleanly: {status:?}");
    let rest: Vec<serde_json::Value> = lines
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    let last = rest.last().expect("a final metrics line");
    assert_eq!(last["final"], true);
    assert_eq!(last["metrics"]["requests_delivered"], 50);
    assert_eq!(last["bad_requests"], 0);
    assert!(last["runtime_stats"]["packets_sent"].as_u64().unwrap() >= 50);
    assert_eq!(last["runtime_stats"]["port_mismatch_drops"], 0);
}

#[test]
fn bad_metrics_and_lossmatrix_options_fail_clearly() {
    let o = homa_perf(&[
        "server",
        "--bind",
        "127.0.0.1:0",
        "--protocol",
        "tcp",
        "--print-metrics",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("need --protocol homa"));
    let o = homa_perf(&["server", "--bind", "127.0.0.1:0", "--metrics-every", "0"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--metrics-every"));
    let o = homa_perf(&["lossmatrix", "--losses", "5,120"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("0..100"));
    let o = homa_perf(&["lossmatrix", "--sizes", "100,abc"]);
    assert!(!o.status.success());
    let o = homa_perf(&["lossmatrix", "--count", "0"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--count"));
}

#[test]
fn a_small_lossmatrix_through_the_binary() {
    let o = homa_perf(&[
        "lossmatrix",
        "--losses",
        "0,10",
        "--sizes",
        "100,20000",
        "--count",
        "10",
        "--concurrency",
        "4",
        "--concurrent-loss",
        "10",
        "--concurrent-size",
        "20000",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("[5/5] 4 concurrent 20 KB RPCs at 10% loss"),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    for c in cells.iter().chain([&v["concurrent"]]) {
        assert_eq!(c["completed"], 10, "{c}");
        assert!(c["p99_us"].as_f64().is_some(), "{c}");
    }
    assert_eq!(v["concurrent"]["outstanding"], 4);
}

/// A UDP server that echoes the sequence number (so the answer is not
/// taken for a late one) but sends zeros: every RPC is a content error.
#[test]
fn udp_responses_are_checked_too() {
    let sock = std::net::UdpSocket::bind(loopback()).unwrap();
    let addr = sock.local_addr().unwrap();
    let worker = std::thread::spawn(move || {
        let mut buf = vec![0u8; 65_536];
        for _ in 0..5 {
            let (n, from) = sock.recv_from(&mut buf).unwrap();
            let want = wanted_response_size(&buf[..n]);
            let mut resp = vec![0u8; want];
            resp[4..12].copy_from_slice(&buf[4..12]);
            sock.send_to(&resp, from).unwrap();
        }
    });
    let mut c = ClientOptions::new(Protocol::Udp, addr);
    c.sizes = SizeSpec::Fixed(500);
    c.response_size = 800;
    c.stop = StopRule::Count(5);
    c.warmup = 0;
    c.timeout = Duration::from_secs(5);
    let m = homa_perf::client::measure(&c);
    worker.join().unwrap();
    let Ok(m) = m else {
        panic!("the run itself must not fail");
    };
    let r = &m.recorder;
    assert_eq!((r.rpcs, r.errors, r.content_errors), (0, 5, 5));
}
