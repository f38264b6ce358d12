//! The C side of the C API, tested from C: the examples (`examples/c/`) and
//! the C tests (`tests/c/`) are compiled with `cc` against
//! `include/homars.h` and the static library cargo built for this test,
//! then run on loopback: the echo client against the threaded echo server
//! (IPv4 and IPv6) and against the epoll server, the epoll self-test, the
//! error cases, many threads on one endpoint, and the header's struct
//! layout against the library's. Without a C compiler every test says so
//! and passes without running.

mod support;

use homars::{HomarsMetrics, HomarsMsg, HomarsRpc, HOMARS_ADDRSTRLEN};
use std::collections::BTreeMap;
use std::mem::{offset_of, size_of};
use std::process::Command;
use support::{built, run, Server, CRATE_DIR, RUN_TIMEOUT};

/// Runs the echo client (with --quit) against the server `server args`;
/// checks both exit well.
fn echo(server: &str, args: &[&str]) {
    let Some(b) = built() else { return };
    let server = Server::start(&b.bin(server), args);
    let out = run(
        Command::new(b.bin("echo_client")).args([server.addr.as_str(), "--quit"]),
        RUN_TIMEOUT,
    );
    assert!(
        out.stdout.contains("echo_client: 39 calls OK"),
        "client said: {}",
        out.stdout
    );
    let (status, stdout) = server.wait(RUN_TIMEOUT);
    assert!(status.success(), "server exited with {status}: {stdout}");
}

#[test]
fn echo_client_against_threaded_server_ipv4() {
    echo("echo_server", &["127.0.0.1:0", "3"]);
}

#[test]
fn echo_client_against_threaded_server_ipv6() {
    if std::net::UdpSocket::bind("[::1]:0").is_err() {
        eprintln!("skipping: no IPv6 loopback here");
        return;
    }
    echo("echo_server", &["[::1]:0", "2"]);
}

#[test]
fn echo_client_against_epoll_server() {
    echo("epoll_echo", &["server", "127.0.0.1:0"]);
}

#[test]
fn epoll_selftest() {
    let Some(b) = built() else { return };
    let out = run(
        Command::new(b.bin("epoll_echo")).args(["selftest", "300"]),
        RUN_TIMEOUT,
    );
    assert!(
        out.stdout.contains("300 RPCs OK, 0 left in flight"),
        "{}",
        out.stdout
    );
}

/// The C tests print "name: N passed, N failed" and exit 1 on a failure.
fn c_test(name: &str) {
    let Some(b) = built() else { return };
    let out = run(&mut Command::new(b.bin(name)), RUN_TIMEOUT);
    let want = format!("{name}: ");
    let line = out
        .stdout
        .lines()
        .find(|l| l.starts_with(&want))
        .unwrap_or_else(|| panic!("no summary line from {name}: {}", out.stdout));
    assert!(line.ends_with(" 0 failed"), "{line}\n{}", out.stderr);
    eprintln!("{line}");
}

#[test]
fn c_errors() {
    c_test("errors_test");
}

#[test]
fn c_threads() {
    c_test("threads_test");
}

#[test]
fn c_streams() {
    c_test("stream_test");
}

/// The header's structs have the library's sizes and offsets, and the
/// header compiles on its own as strict C99 and as C++.
#[test]
fn header_layout_matches_the_library() {
    let Some(b) = built() else { return };
    let out = run(&mut Command::new(b.bin("layout")), RUN_TIMEOUT);
    let c: BTreeMap<&str, usize> = out
        .stdout
        .lines()
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').expect("name value");
            (k, v.parse().expect("a number"))
        })
        .collect();
    let mut rust: BTreeMap<String, usize> = BTreeMap::new();
    rust.insert("HOMARS_ADDRSTRLEN".into(), HOMARS_ADDRSTRLEN);
    rust.insert("sizeof homars_rpc".into(), size_of::<HomarsRpc>());
    rust.insert("offsetof homars_rpc.id".into(), offset_of!(HomarsRpc, id));
    rust.insert(
        "offsetof homars_rpc.peer".into(),
        offset_of!(HomarsRpc, peer),
    );
    rust.insert("sizeof homars_msg".into(), size_of::<HomarsMsg>());
    rust.insert("offsetof homars_msg.rpc".into(), offset_of!(HomarsMsg, rpc));
    rust.insert(
        "offsetof homars_msg.status".into(),
        offset_of!(HomarsMsg, status),
    );
    rust.insert(
        "offsetof homars_msg.data".into(),
        offset_of!(HomarsMsg, data),
    );
    rust.insert("offsetof homars_msg.len".into(), offset_of!(HomarsMsg, len));
    rust.insert("sizeof homars_metrics".into(), size_of::<HomarsMetrics>());
    macro_rules! metric {
        ($($f:ident)*) => {$(
            rust.insert(
                concat!("offsetof homars_metrics.", stringify!($f)).into(),
                offset_of!(HomarsMetrics, $f),
            );
        )*};
    }
    metric!(requests_started requests_delivered responses_delivered rpcs_failed rpcs_aborted
        peers_dead timeouts resends_requested restarts active_rpcs active_client_rpcs
        data_bytes_sent data_bytes_retransmitted packets_sent packets_received send_drops);
    let c: BTreeMap<String, usize> = c.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    assert_eq!(c, rust, "header (left) and library (right) disagree");

    // The header alone, strictly.
    let header = format!("{CRATE_DIR}/include/homars.h");
    run(
        Command::new(&b.cc).args([
            "-std=c99",
            "-pedantic",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-fsyntax-only",
            &header,
        ]),
        RUN_TIMEOUT,
    );
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    if support::works(&cxx) {
        run(
            Command::new(&cxx).args([
                "-std=c++11",
                "-Wall",
                "-Wextra",
                "-Werror",
                "-fsyntax-only",
                "-x",
                "c++",
                &header,
            ]),
            RUN_TIMEOUT,
        );
    } else {
        eprintln!("no C++ compiler ({cxx}): the header's C++ check is skipped");
    }
}

/// A program whose bind fails says why (through homars_strerror and
/// homars_last_error) and exits 1.
#[test]
fn a_server_that_fails_to_bind_says_why() {
    let Some(b) = built() else { return };
    let out = Command::new(b.bin("echo_server"))
        .arg("not-an-address")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("invalid argument") && err.contains("not-an-address"),
        "{err}"
    );
}
