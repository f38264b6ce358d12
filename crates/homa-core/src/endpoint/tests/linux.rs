//! Interoperation with Linux Homa (HomaModule): packets shaped as Linux
//! sends them, and what Linux needs from us (see docs/linux-interop.md).

use super::*;
use crate::incoming::InMessage;
use crate::rpc::{Wait, PROBE_PAST_END};
use homa_wire::{AckEntry, RESEND_ALL};

const LINUX: &str = "10.146.0.2:5000";
/// Payload bytes per packet for raw IPv4 at MTU 1500: 1500 - 20 - 56.
const SEG: u32 = 1_424;

fn linux() -> SocketAddr {
    LINUX.parse().unwrap()
}

fn raw_config() -> Config {
    Config {
        lower_header_bytes: 20,
        ..Config::default()
    }
}

/// A server endpoint (we are 10.146.0.1:4000).
fn server() -> Endpoint {
    Endpoint::new(raw_config(), "10.146.0.1:4000".parse().unwrap(), 7).unwrap()
}

/// A DATA packet of a Linux client's request `id` (even), as
/// homa_tx_data_pkt_alloc fills it.
fn linux_data(id: u64, length: u32, offset: u32, len: u32, incoming: u32) -> Vec<u8> {
    let p = Packet {
        common: CommonHeader {
            sport: 5000,
            dport: 4000,
            sender_id: id,
        },
        body: Body::Data {
            header: DataHeader {
                message_length: length,
                incoming,
                offset,
                ..DataHeader::default()
            },
            payload: &vec![offset as u8; len as usize],
        },
    };
    p.to_vec()
}

fn control(from_id: u64, body: Body<'static>) -> Vec<u8> {
    Packet {
        common: CommonHeader {
            sport: 5000,
            dport: 4000,
            sender_id: from_id,
        },
        body,
    }
    .to_vec()
}

fn drain(ep: &mut Endpoint, now: Nanos) -> Vec<Whole> {
    std::iter::from_fn(|| ep.poll_transmit(now).map(whole)).collect()
}

/// What Linux's homa_resend_pkt (homa_incoming.c) answers a RESEND with,
/// given the RPC's state there (bytes transmitted, granted, message
/// length): `Some(true)` BUSY, `Some(false)` data, `None` nothing at all.
fn linux_answer(
    offset: u32,
    length: u32,
    server_without_response: bool,
    tx_end: i32,
    granted: i32,
    msg_len: i32,
) -> Option<bool> {
    let (offset, length) = (offset as i32, length as i32);
    if server_without_response {
        return Some(true);
    }
    let mut end = offset.wrapping_add(length);
    if length == -1 {
        end = tx_end;
    }
    if end.min(tx_end) > offset {
        return Some(false);
    }
    // An end past the grant is taken as a lost GRANT: it sends up to there.
    if end > granted && end.min(msg_len) > tx_end {
        return Some(false);
    }
    (offset >= tx_end).then_some(true)
}

/// Bug: our liveness probe was RESEND(0, 0), which a Linux peer that has
/// sent anything leaves unanswered (no data in an empty range, and BUSY only
/// for an offset at or past what it sent), so a live but slow Linux peer
/// could be declared dead. Each probe now picks an offset Linux answers
/// with BUSY and without sending anything.
#[test]
fn probes_are_answered_by_linux_with_busy() {
    // We receive a request and withhold grants: all granted bytes arrived.
    let mut m = InMessage::new(100_000, 40_000, 0);
    m.add(0, Bytes::from(vec![0; 40_000])).unwrap();
    let rpc = Rpc::new(Phase::Receiving { request: m }, 0);
    assert_eq!(rpc.wait(), Some(Wait::Probe));
    let (o, l) = rpc.resend_range(Wait::Probe);
    assert_eq!((o, l), (40_000, 0));
    // Linux's client sent what we granted (40,000), or less.
    assert_eq!(
        linux_answer(o, l, false, 40_000, 40_000, 100_000),
        Some(true)
    );
    assert_eq!(
        linux_answer(o, l, false, 38_576, 40_000, 100_000),
        Some(true)
    );
    // A far offset would have been taken as a grant of everything.
    assert_eq!(
        linux_answer(PROBE_PAST_END, 0, false, 40_000, 40_000, 100_000),
        Some(false)
    );
    // The old probe got nothing.
    assert_eq!(linux_answer(0, 0, false, 40_000, 40_000, 100_000), None);

    // We respond and wait for the Linux client's grants.
    let response = crate::outgoing::OutMessage::new(Bytes::from(vec![0; 100_000]), 40_000, 0, 0, 0);
    let rpc = Rpc::new(Phase::Responding { response }, 0);
    let (o, l) = rpc.resend_range(Wait::Probe);
    assert_eq!((o, l), (PROBE_PAST_END, 0));
    // The client's request (any length) was sent whole and granted whole.
    for req in [1, 1_424, 1_000_000] {
        assert_eq!(linux_answer(o, l, false, req, req, req), Some(true));
        assert_eq!(linux_answer(0, 0, false, req, req, req), None);
    }
    assert!((PROBE_PAST_END as i32) > 0, "Linux reads the offset as int");

    // We wait for the whole response: everything.
    let request = crate::outgoing::OutMessage::new(Bytes::from(vec![0; 10]), 10, 0, 0, 0);
    let rpc = Rpc::new(
        Phase::Client {
            request,
            response: None,
        },
        0,
    );
    assert_eq!(rpc.resend_range(Wait::Response), (0, RESEND_ALL));
    assert_eq!(rpc.resend_range(Wait::Probe), (0, 0));
    // A Linux server with no response yet answers any RESEND with BUSY.
    assert_eq!(linux_answer(0, 0, true, 0, 0, 10), Some(true));
}

/// The probe round for a message whose grants we withhold also repeats our
/// grant (Linux resets an RPC's silence only on DATA, GRANT or BUSY), and
/// the RESEND carries our grant as its offset.
#[test]
fn withheld_grant_probe_sends_resend_at_grant_and_the_grant() {
    let mut config = raw_config();
    // Grant nothing beyond the unscheduled bytes.
    config.max_incoming = 1;
    let mut ep = Endpoint::new(config.clone(), "10.146.0.1:4000".parse().unwrap(), 7).unwrap();
    let src = linux().ip();
    let mut off = 0;
    while off < 40_000 {
        let len = SEG.min(40_000 - off);
        ep.handle_packet(0, src, &linux_data(10, 200_000, off, len, 40_000));
        off += len;
    }
    ep.handle_packet(0, src, &linux_data(10, 200_000, 0, SEG, 40_000)); // proves the peer
    drain(&mut ep, 0);
    let mut probes = vec![];
    for t in 1..=(config.resend_ticks as u64 + 1) {
        let now = t * config.tick_ns;
        ep.handle_timeout(now);
        probes.extend(drain(&mut ep, now));
    }
    let bodies: Vec<Body<'_>> = probes.iter().map(|t| parse(t).body).collect();
    assert!(
        bodies.contains(&Body::Resend {
            offset: 40_000,
            length: 0,
            priority: 7
        }),
        "{bodies:?}"
    );
    assert!(
        bodies
            .iter()
            .any(|b| matches!(b, Body::Grant { offset: 40_000, .. })),
        "{bodies:?}"
    );
}

/// Bug: a Linux sender's packets after its unscheduled limit (40,000, not
/// a multiple of 1,424) straddle our grant offsets, and a straddling packet
/// was dropped as beyond the grant, leaving a gap to RESEND at every grant.
#[test]
fn a_linux_packet_straddling_our_grant_is_taken() {
    let mut ep = server();
    let src = linux().ip();
    let length = 100_000;
    let mut off = 0;
    while off < 40_000 {
        let len = SEG.min(40_000 - off);
        ep.handle_packet(0, src, &linux_data(10, length, off, len, 40_000));
        off += len;
    }
    let grant = drain(&mut ep, 0)
        .iter()
        .find_map(|t| match parse(t).body {
            Body::Grant { offset, .. } => Some(offset),
            _ => None,
        })
        .expect("a grant");
    assert_ne!((grant - 40_000) % SEG, 0, "grant {grant} on Linux's grid");
    // Linux sends every packet that starts below the grant.
    while off < grant {
        let len = SEG.min(length - off);
        ep.handle_packet(1, src, &linux_data(10, length, off, len, 40_000));
        off += len;
    }
    let m = ep.metrics();
    assert_eq!(m.data_beyond_grant, 0);
    assert_eq!(m.data_straddling_grant, 1);
    let id = RpcId {
        peer: linux(),
        id: 11,
    };
    assert!(ep.rpc_snapshot(id).is_some(), "the request is still there");
    // Data wholly beyond the grant is still refused.
    ep.handle_packet(1, src, &linux_data(10, length, off + SEG, SEG, 40_000));
    assert_eq!(ep.metrics().data_beyond_grant, 1);
}

/// HomaModule's upstream build leaves `incoming` zero (it has no grants):
/// read as no claim, its message still arrives.
#[test]
fn a_data_packet_claiming_nothing_gets_the_unscheduled_allowance() {
    let mut ep = server();
    let src = linux().ip();
    let mut off = 0;
    while off < 5_000 {
        let len = SEG.min(5_000 - off);
        ep.handle_packet(0, src, &linux_data(10, 5_000, off, len, 0));
        off += len;
    }
    assert_eq!(ep.metrics().data_beyond_grant, 0);
    assert!(
        matches!(ep.poll_event(), Some(Event::Request { message, .. }) if message.len() == 5_000)
    );
}

/// A NEED_ACK for an RPC we no longer know draws exactly one ACK naming
/// it (with the acks owed to that server), and a flood of them only a
/// bounded number per tick.
#[test]
fn need_ack_for_an_unknown_rpc_gets_one_ack_within_a_rate() {
    let config = raw_config();
    let mut ep = Endpoint::new(config.clone(), "10.146.0.1:4000".parse().unwrap(), 7).unwrap();
    let src = linux().ip();
    ep.handle_packet(0, src, &control(0x1235, Body::NeedAck));
    let out = drain(&mut ep, 0);
    assert_eq!(out.len(), 1);
    let p = parse(&out[0]);
    assert_eq!(p.common.sender_id, 0x1234);
    assert_eq!(p.common.dport, 5000);
    assert!(matches!(p.body, Body::Ack { acks } if acks.is_empty()));
    assert_eq!(out[0].len(), 80);

    // A flood within one tick: a bounded number of answers.
    for _ in 0..1_000 {
        ep.handle_packet(10, src, &control(0x1235, Body::NeedAck));
    }
    let n = drain(&mut ep, 10).len() as u32;
    assert_eq!(n, config.backlog_unproven_per_tick - 1);
    assert_eq!(ep.metrics().need_ack_replies_limited, 1_000 - n as u64);
    // The next tick answers again.
    ep.handle_packet(config.tick_ns, src, &control(0x1235, Body::NeedAck));
    assert_eq!(drain(&mut ep, config.tick_ns).len(), 1);
    // A NEED_ACK from a server's id space that is not a client's: dropped.
    ep.handle_packet(config.tick_ns, src, &control(0x1234, Body::NeedAck));
    assert!(drain(&mut ep, config.tick_ns).is_empty());
}

/// A known server gets its answer with the acks we owe it in the same
/// packet, and no more packets than NEED_ACKs.
#[test]
fn need_ack_answer_carries_owed_acks() {
    let config = Config::default();
    let mut net = one_finished_rpc_pair(&config, 3);
    // Three acks owed; a NEED_ACK for an RPC long gone.
    let server = net.eps[1].local_addr();
    let need = Packet {
        common: CommonHeader {
            sport: server.port(),
            dport: net.eps[0].local_addr().port(),
            sender_id: 0x777,
        },
        body: Body::NeedAck,
    }
    .to_vec();
    net.eps[0].handle_packet(net.now, server.ip(), &need);
    let out = drain(&mut net.eps[0], net.now);
    assert_eq!(out.len(), 1);
    let p = parse(&out[0]);
    assert_eq!(p.common.sender_id, 0x776);
    let Body::Ack { acks } = p.body else {
        panic!("{p:?}")
    };
    assert_eq!(acks.len(), 3);
}

fn one_finished_rpc_pair(config: &Config, n: usize) -> Net {
    let mut net = Net::new(2, config.clone());
    for i in 0..n {
        net.eps[0]
            .send_request(0, addr(1), payload(10, i as u8))
            .unwrap();
    }
    net.pump();
    net.serve(1, |_| Bytes::new());
    net.pump();
    net
}

/// Bug: an endpoint that went away left its owed acks unsent, and a Linux
/// server asks for them every millisecond for ever. `close` ends every RPC
/// and queues ACKs for the finished ones and the abandoned ones.
#[test]
fn close_sends_owed_and_abandoned_acks() {
    let config = Config::default();
    let mut net = one_finished_rpc_pair(&config, 2);
    // One more RPC in flight: the server has the request, no response yet.
    let pending = net.eps[0]
        .send_request(net.now, addr(1), payload(10, 9))
        .unwrap();
    net.pump();
    net.events(0);
    let mut acked: Vec<u64> = vec![];
    net.eps[0].close(net.now);
    let client = net.eps[0].local_addr().ip();
    for t in drain(&mut net.eps[0], net.now) {
        let p = parse(&t);
        let Body::Ack { acks } = p.body else {
            panic!("only ACKs after close: {p:?}")
        };
        acked.extend(acks.as_slice().iter().map(|a: &AckEntry| a.client_id));
        net.eps[1].handle_packet(net.now, client, &t.header);
    }
    // (One of the first two acks rode on the third request.)
    assert_eq!(acked.len(), 2);
    assert!(acked.contains(&pending.id));
    assert!(net.eps[0].is_idle());
    assert_eq!(net.eps[0].poll_event(), None);
    // The server has freed both RPCs it had answered.
    assert_eq!(net.eps[1].metrics().acks_received, 2);
    assert_eq!(net.eps[1].metrics().active_rpcs, 1);
}

/// An ICMP destination-unreachable quoting one of our packets ends that
/// RPC at once and the peer's other RPCs at their next timer round (Linux
/// closes a port: `homa_err_handler_v4` does the same on its side); one
/// that names no RPC of ours changes nothing.
#[test]
fn icmp_unreachable_naming_our_rpc_ends_the_peers_rpcs() {
    let config = raw_config();
    let mut ep = Endpoint::new(config.clone(), "10.146.0.1:4000".parse().unwrap(), 7).unwrap();
    let a = ep.send_request(0, linux(), payload(100, 1)).unwrap();
    let b = ep.send_request(0, linux(), payload(100, 2)).unwrap();
    let sent = drain(&mut ep, 0);
    let quoted = |id: u64| {
        sent.iter()
            .find(|t| parse(t).common.sender_id == id)
            .map(|t| t.header[..28].to_vec())
            .unwrap()
    };
    // Forged: right ports, wrong id; and a quote too short to name an RPC.
    let mut forged = quoted(a.id);
    forged[27] ^= 0x40;
    assert!(!ep.handle_unreachable(1, linux().ip(), &forged));
    assert!(!ep.handle_unreachable(1, linux().ip(), &forged[..20]));
    assert_eq!(ep.metrics().unreachable_ignored, 2);
    assert_eq!(ep.poll_event(), None);

    assert!(ep.handle_unreachable(2, linux().ip(), &quoted(a.id)));
    assert_eq!(
        ep.poll_event(),
        Some(Event::Failed {
            rpc: a,
            error: RpcError::PeerDead
        })
    );
    // The other RPC gives up at its first round, not after
    // `timeout_resends` of them.
    let mut now = 0;
    while ep.poll_event().is_none() {
        now += config.tick_ns;
        assert!(
            now <= (config.resend_ticks as u64 + 1) * config.tick_ns,
            "b still alive"
        );
        ep.handle_timeout(now);
    }
    assert_eq!(ep.metrics().unreachable_rpcs, 1);
    let _ = b;
}

/// A packet from the peer after the ICMP (it is back) lifts the mark: its
/// RPCs count rounds as usual again.
#[test]
fn a_peer_heard_after_an_icmp_is_reachable_again() {
    let config = raw_config();
    let mut ep = Endpoint::new(config.clone(), "10.146.0.1:4000".parse().unwrap(), 7).unwrap();
    let a = ep.send_request(0, linux(), payload(100, 1)).unwrap();
    let b = ep.send_request(0, linux(), payload(100, 2)).unwrap();
    let sent = drain(&mut ep, 0);
    let quoted = sent
        .iter()
        .find(|t| parse(t).common.sender_id == a.id)
        .map(|t| t.header[..28].to_vec())
        .unwrap();
    assert!(ep.handle_unreachable(1, linux().ip(), &quoted));
    assert!(matches!(ep.poll_event(), Some(Event::Failed { rpc, .. }) if rpc == a));
    // BUSY for b: the peer is alive.
    ep.handle_packet(2, linux().ip(), &control(b.id | 1, Body::Busy));
    for t in 1..=(config.resend_ticks as u64 + 2 * config.resend_interval as u64) {
        ep.handle_timeout(t * config.tick_ns);
        drain(&mut ep, t * config.tick_ns);
    }
    assert_eq!(ep.poll_event(), None, "b must still be alive");
}

/// The "RESEND(all) 1.3 ms after the first request" seen against the
/// emulated guest: the first RESEND of a request comes `resend_ticks` (5
/// ms, Linux's default) after the request was handed to the driver, never
/// sooner; on the wire it looked sooner because the kernel held the
/// request while it resolved the guest's address (ARP), not because of
/// this timer (docs/linux-interop.md).
#[test]
fn first_resend_of_a_request_waits_resend_ticks() {
    let config = raw_config();
    let mut ep = Endpoint::new(config.clone(), "10.146.0.1:4000".parse().unwrap(), 7).unwrap();
    // Not on a tick boundary: the deadline is rounded up to one.
    let start = 300_000;
    let rpc = ep.send_request(start, linux(), payload(1, 1)).unwrap();
    assert_eq!(drain(&mut ep, start).len(), 1);
    let mut now = start;
    let first = loop {
        now += 100_000;
        ep.handle_timeout(now);
        let out = drain(&mut ep, now);
        if let Some(t) = out.first() {
            assert_eq!(
                parse(t).body,
                Body::Resend {
                    offset: 0,
                    length: RESEND_ALL,
                    priority: 7
                }
            );
            assert_eq!(parse(t).common.sender_id, rpc.id);
            break now;
        }
    };
    let tick = config.tick_ns;
    assert!(
        first - start >= config.resend_ticks as u64 * tick,
        "{}",
        first - start
    );
    assert!(
        first - start <= (config.resend_ticks as u64 + 1) * tick,
        "{}",
        first - start
    );
}
