//! SIRD mode over real sockets: echo RPCs at the sizes where SIRD changes
//! what it does (0 and 1 B; one packet's payload −1/±0/+1; the unscheduled
//! threshold UnschT −1/±0/+1, above which a message asks for credit first;
//! several MB, all of it credited) over UDP/IPv4, UDP/IPv6 and (as root)
//! raw IPv4 protocol 146, through the blocking and the tokio APIs. Every
//! byte is checked. And endpoints of different designs that meet fail the
//! RPC with `DesignMismatch`, both ways, both APIs, rather than hang.
//! Without root, a stand-in peer that reads each datagram's TOS / traffic
//! class shows SIRD's packets carry ECT(0) next to their priority bits and
//! Homa's no ECN codepoint (`sird_ecn.rs` checks the same with nftables,
//! raw IP included, and CE marks end to end).

mod common;

use common::{assert_bytes, is_root, max_payload, pattern, EchoServer, UdpStandIn, CALL_TIMEOUT};
use homa::{AsyncEndpoint, Config, Endpoint, Error, Transport};
use homa_core::Design;
use std::net::SocketAddr;
use std::time::Duration;

fn sird_config(transport: Transport) -> Config {
    let mut c = Config::default();
    c.core.design = Design::Sird;
    c.core.max_message_size = 4 << 20;
    c.transport = transport;
    c
}

/// The awkward sizes for `config` at `addr`'s family.
fn sizes(config: &Config, addr: SocketAddr) -> Vec<usize> {
    let p = max_payload(config, addr);
    let t = config.core.sird.unsched_threshold as usize;
    assert!(t > p + 1, "UnschT {t} must be beyond one packet {p}");
    vec![0, 1, p - 1, p, p + 1, t - 1, t, t + 1, 3_000_000]
}

/// True (after a message) when `transport` cannot run here.
fn skip(name: &str, transport: Transport) -> bool {
    if transport == Transport::Raw && !is_root() {
        eprintln!("{name}: skipped: raw IP (protocol 146) needs root or CAP_NET_RAW");
        return true;
    }
    false
}

fn echo_blocking(name: &str, ip: &str, transport: Transport) {
    if skip(name, transport) {
        return;
    }
    let config = sird_config(transport);
    let any: SocketAddr = format!("{ip}:0").parse().unwrap();
    let server = EchoServer::bind(any, config.clone(), 2);
    let client = Endpoint::bind(any, config.clone()).unwrap();
    assert_eq!(client.config().core.design, Design::Sird);
    let sizes = sizes(&config, any);
    for (i, &len) in sizes.iter().enumerate() {
        let msg = pattern(i as u64, len);
        let r = client
            .call(server.addr, msg.clone(), CALL_TIMEOUT)
            .unwrap_or_else(|e| panic!("{name}: {len} B: {e}"));
        assert_bytes(&msg, &r, &format!("{name}: {len} B"));
    }
    let (cm, sm) = (client.metrics(), server.endpoint().metrics());
    assert_eq!(cm.responses_delivered, sizes.len() as u64, "{name}");
    assert_eq!(cm.rpcs_failed, 0, "{name}");
    assert_eq!(cm.design_mismatches + sm.design_mismatches, 0, "{name}");
    // Without congestion on the path nothing is marked.
    assert_eq!(client.runtime_stats().ce_received, 0, "{name}");
    assert_eq!(server.endpoint().runtime_stats().ce_received, 0, "{name}");
    server.stop();
}

#[test]
fn sird_echo_udp_v4() {
    echo_blocking("sird udp v4", "127.0.0.1", Transport::Udp);
}

#[test]
fn sird_echo_udp_v6() {
    echo_blocking("sird udp v6", "[::1]", Transport::Udp);
}

#[test]
fn sird_echo_raw_v4() {
    echo_blocking("sird raw v4", "127.0.0.1", Transport::Raw);
}

/// The same sizes through the tokio API, requests all in flight at once
/// (an async echo server, concurrent client calls).
fn echo_async(name: &'static str, ip: &str, transport: Transport) {
    if skip(name, transport) {
        return;
    }
    let config = sird_config(transport);
    let any: SocketAddr = format!("{ip}:0").parse().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let server = AsyncEndpoint::bind(any, config.clone()).unwrap();
        let client = AsyncEndpoint::bind(any, config.clone()).unwrap();
        let dest = server.local_addr();
        let srv = server.clone();
        let echo = tokio::spawn(async move {
            while let Ok(req) = srv.recv_request().await {
                if srv.reply(req.id, req.message).is_err() {
                    break;
                }
            }
        });
        let sizes = sizes(&config, any);
        let calls: Vec<_> = sizes
            .iter()
            .enumerate()
            .map(|(i, &len)| {
                let c = client.clone();
                tokio::spawn(async move {
                    let msg = pattern(1000 + i as u64, len);
                    let r = c.call(dest, msg.clone(), CALL_TIMEOUT).await;
                    (len, msg, r)
                })
            })
            .collect();
        for call in calls {
            let (len, msg, r) = call.await.unwrap();
            let r = r.unwrap_or_else(|e| panic!("{name}: {len} B: {e}"));
            assert_bytes(&msg, &r, &format!("{name}: {len} B"));
        }
        assert_eq!(client.metrics().rpcs_failed, 0, "{name}");
        server.shutdown();
        client.shutdown();
        let _ = echo.await;
    });
}

#[test]
fn sird_echo_async_udp_v4() {
    echo_async("sird async udp v4", "127.0.0.1", Transport::Udp);
}

#[test]
fn sird_echo_async_udp_v6() {
    echo_async("sird async udp v6", "[::1]", Transport::Udp);
}

#[test]
fn sird_echo_async_raw_v4() {
    echo_async("sird async raw v4", "127.0.0.1", Transport::Raw);
}

/// A client of one design calling a server of the other, for a short
/// request (unscheduled in both designs) and one beyond UnschT (a SIRD
/// client's credit request; a Homa client's unscheduled prefix).
fn mismatch_blocking(client_design: Design, server_design: Design) {
    let name = format!("{client_design:?} client, {server_design:?} server");
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let mut sc = Config::default();
    sc.core.design = server_design;
    let mut cc = Config::default();
    cc.core.design = client_design;
    let server = EchoServer::bind(any, sc, 1);
    let client = Endpoint::bind(any, cc).unwrap();
    for len in [100, 200_000] {
        match client.call(server.addr, pattern(7, len), CALL_TIMEOUT) {
            Err(Error::DesignMismatch) => {}
            other => panic!("{name}, {len} B: want DesignMismatch, got {other:?}"),
        }
    }
    assert_eq!(server.endpoint().metrics().requests_delivered, 0, "{name}");
    assert!(client.metrics().design_mismatches >= 2, "{name}");
    server.stop();
}

#[test]
fn sird_client_homa_server_fails_with_design_mismatch() {
    mismatch_blocking(Design::Sird, Design::Homa);
}

#[test]
fn homa_client_sird_server_fails_with_design_mismatch() {
    mismatch_blocking(Design::Homa, Design::Sird);
}

#[test]
fn design_mismatch_through_the_async_api() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        for (cd, sd) in [(Design::Sird, Design::Homa), (Design::Homa, Design::Sird)] {
            let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
            let mut sc = Config::default();
            sc.core.design = sd;
            let mut cc = Config::default();
            cc.core.design = cd;
            // The server needs no application: a mismatched request never
            // reaches it.
            let server = AsyncEndpoint::bind(any, sc).unwrap();
            let client = AsyncEndpoint::bind(any, cc).unwrap();
            for len in [1, 100_000] {
                let r = client
                    .call(server.local_addr(), pattern(9, len), CALL_TIMEOUT)
                    .await;
                assert!(
                    matches!(r, Err(Error::DesignMismatch)),
                    "{cd:?} client, {sd:?} server, {len} B: {r:?}"
                );
            }
            server.shutdown();
            client.shutdown();
        }
    });
}

/// The ECN bits of what a client of `design` sends: a short request and
/// the credit request / unscheduled prefix of a long one, to a stand-in
/// server that never answers (so the client also retransmits).
fn ecn_bits_sent(design: Design, ip: &str) -> Vec<u8> {
    let standin = UdpStandIn::bind(ip);
    let any: SocketAddr = format!("{ip}:0").parse().unwrap();
    let mut c = Config::default();
    c.core.design = design;
    let client = Endpoint::bind(any, c).unwrap();
    client.send_request(standin.addr(), pattern(1, 10)).unwrap();
    client
        .send_request(standin.addr(), pattern(2, 100_000))
        .unwrap();
    let mut tos = Vec::new();
    while tos.len() < 20 {
        match standin.recv(Duration::from_secs(5)) {
            Some((_, t)) => tos.push(t),
            None => break,
        }
    }
    assert!(
        tos.len() >= 2,
        "{design:?} {ip}: only {} packets came",
        tos.len()
    );
    eprintln!("{design:?} {ip}: TOS bytes {tos:x?}");
    tos
}

#[test]
fn sird_packets_carry_ect0_homa_packets_none() {
    for ip in ["127.0.0.1", "[::1]"] {
        let sird = ecn_bits_sent(Design::Sird, ip);
        assert!(
            sird.iter().all(|t| t & 0b11 == 0b10),
            "SIRD {ip}: TOS bytes {sird:x?}, want ECT(0) in every one"
        );
        let homa = ecn_bits_sent(Design::Homa, ip);
        assert!(
            homa.iter().all(|t| t & 0b11 == 0),
            "Homa {ip}: TOS bytes {homa:x?}, want no ECN codepoint"
        );
        // The priority bits are Homa's as before: the top level for short
        // unscheduled data and control.
        assert!(homa.iter().any(|t| t >> 5 == 7), "{homa:x?}");
    }
}
