//! The ByteDance mode over real sockets (UDP, loopback): two endpoints with
//! the mode on exchange RPCs, probe each other and answer the probes; a
//! mixed pair (one endpoint on, one off) exchanges RPCs too, and the side
//! with the mode off never receives an RTT_PROBE (nor does the other side
//! send one), as a Linux Homa peer never does.

mod common;

use common::{assert_bytes, pattern, EchoServer, CALL_TIMEOUT};
use homa::{Config, Endpoint, Metrics};
use homa_wire::PacketType;
use std::net::SocketAddr;
use std::time::Duration;

/// The loopback preset, with the mode on or off, as an endpoint binds it
/// (the batch sizes filled in from the offload settings).
fn config(bytedance: bool) -> Config {
    let mut c = Config::loopback();
    if bytedance {
        c = c.with_bytedance();
    }
    c.core = c.effective_core(28).expect("a valid configuration");
    c
}

/// Echo RPCs from `client` to `server`, of sizes below and above one
/// packet and the unscheduled window, each a little more than the probe
/// interval (1 ms) after the one before, so that each arriving message
/// may trigger a probe. Every byte is checked.
fn exchange(client: &Endpoint, server: SocketAddr, what: &str) -> u64 {
    let sizes = [1usize, 5_000, 70_000, 1_000_000];
    let mut n = 0;
    for round in 0..6u64 {
        for (i, &len) in sizes.iter().enumerate() {
            let msg = pattern(round * 10 + i as u64, len);
            let r = client
                .call(server, msg.clone(), CALL_TIMEOUT)
                .unwrap_or_else(|e| panic!("{what}: {len} B: {e}"));
            assert_bytes(&msg, &r, &format!("{what}: {len} B"));
            n += 1;
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    n
}

fn probes_received(m: &Metrics) -> u64 {
    m.received.packets_of(PacketType::RttProbe)
}

#[test]
fn two_endpoints_in_the_mode_probe_and_answer_each_other() {
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let server = EchoServer::bind(any, config(true), 2);
    let client = Endpoint::bind(any, config(true)).unwrap();
    assert!(client.config().core.bytedance.enabled);
    let n = exchange(&client, server.addr, "bytedance pair");
    let (c, s) = (client.metrics(), server.endpoint().metrics());
    assert_eq!(c.responses_delivered, n);
    assert_eq!(c.rpcs_failed, 0);
    // Each side receives messages from the other, so each probes it, and
    // each answers the other's probes; answers come back as RTT samples.
    for (name, m) in [("client", &c), ("server", &s)] {
        assert!(m.rtt_probes_sent > 0, "{name} sent no probe: {m:?}");
        assert!(m.rtt_probes_answered > 0, "{name} answered no probe");
        assert!(m.rtt_responses > 0, "{name} got no RTT sample");
        // Every sample answers one of our probes. (Answers that do not
        // match the one outstanding probe are counted in `rtt_invalid`:
        // a newer probe may have replaced theirs on a busy host.)
        assert!(m.rtt_responses <= m.rtt_probes_sent, "{name}");
        assert_eq!(m.data_beyond_grant, 0, "{name}");
    }
    assert_eq!(probes_received(&s), c.rtt_probes_sent);
    assert_eq!(c.received.packets_of(PacketType::RttResps), c.rtt_responses);
    client.shutdown();
    server.stop();
}

#[test]
fn a_mixed_pair_works_and_the_side_without_the_mode_is_never_probed() {
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    for client_on in [true, false] {
        let what = if client_on {
            "client on, server off"
        } else {
            "client off, server on"
        };
        let server = EchoServer::bind(any, config(!client_on), 2);
        let client = Endpoint::bind(any, config(client_on)).unwrap();
        let n = exchange(&client, server.addr, what);
        let (c, s) = (client.metrics(), server.endpoint().metrics());
        assert_eq!(c.responses_delivered, n, "{what}");
        assert_eq!(c.rpcs_failed + s.rpcs_failed, 0, "{what}");
        let (on, off) = if client_on { (&c, &s) } else { (&s, &c) };
        assert_eq!(probes_received(off), 0, "{what}: the side off was probed");
        assert_eq!(on.rtt_probes_sent, 0, "{what}");
        assert_eq!(off.rtt_probes_sent, 0, "{what}");
        assert_eq!(probes_received(on), 0, "{what}");
        assert_eq!(off.data_beyond_grant + on.data_beyond_grant, 0, "{what}");
        client.shutdown();
        server.stop();
    }
}
