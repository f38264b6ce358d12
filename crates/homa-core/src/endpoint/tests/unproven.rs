//! Server RPCs of clients that have not yet answered anything we sent
//! (`Peer::proven`): no packets for them beyond what is sent today, and
//! bounded state; but a real client's first RPC survives a lost response.

use super::*;
use crate::endpoint::timer::UNPROVEN_ROUNDS;

/// A client's first RPC whose response is lost, and whose RESENDs for it
/// are lost until the server's silent rounds for the unproven client
/// (`UNPROVEN_ROUNDS`) are over, still completes: the server kept the
/// response, and the client's next RESEND gets it. (Found in the runtime's
/// faults test: the server gave the response up and met the later RESENDs
/// with silence, and the client failed its first RPC with `PeerDead`.)
#[test]
fn a_first_rpc_whose_response_and_resends_are_lost_completes() {
    // (A request of several packets proves its client with its second:
    // the server's rounds then send NEED_ACKs, as they did before.)
    for len in [0, 100, 3 * 1400] {
        let config = Config::default();
        let unproven = len <= config.max_payload() as usize;
        let mut net = Net::new(2, config.clone());
        let rpc = net.eps[0]
            .send_request(0, addr(1), payload(len, 3))
            .unwrap();
        net.pump();
        assert_eq!(net.serve(1, |m| m.clone()), 1);
        // The response is lost.
        let sent = net.pump_with(|from, _| from == 1);
        assert!(count(&sent, PacketType::Data) >= 1);
        // So are the client's RESENDs while the server's rounds for an
        // unproven client last (2 silent rounds, about 12 ticks).
        let give_up = config.need_ack_ticks + UNPROVEN_ROUNDS * config.resend_interval;
        let mut outcome = None;
        let mut resends_lost = 0;
        for tick in 1..=(config.dead_peer_ns() / config.tick_ns + 4) as u32 {
            net.tick();
            let sent = net.pump_with(|from, t| {
                let lose = from == 0 && t.packet_type == PacketType::Resend && tick <= give_up;
                resends_lost += lose as u32;
                lose
            });
            // Nothing goes to an unproven client before it asks.
            if unproven && tick <= give_up {
                assert!(sent.iter().all(|(f, _)| *f == 0), "{:?}", types(&sent));
            }
            for e in net.events(0) {
                outcome = Some(e);
            }
            if outcome.is_some() {
                break;
            }
        }
        assert!(
            resends_lost >= 2,
            "the scenario lost {resends_lost} RESENDs"
        );
        match outcome {
            Some(Event::Response { rpc: r, message }) => {
                assert_eq!(r, rpc);
                assert_eq!(message.into_bytes(), payload(len, 3));
            }
            other => panic!("{len} B: the first RPC ended with {other:?}"),
        }
    }
}

/// A client at `10.x.y.z:5000` numbered `i` (distinct for every `i`
/// below 2^24), and the first packet of its one-packet request.
fn spoofed_request(config: &Config, i: u32) -> (SocketAddr, Whole) {
    let [_, a, b, c] = i.to_be_bytes();
    let src = SocketAddr::from(([10, a, b, c], 5000));
    let mut ep = Endpoint::new(config.clone(), src, i as u64).unwrap();
    ep.send_request(0, addr(0), payload(20, 1)).unwrap();
    (src, whole(ep.poll_transmit(0).unwrap()))
}

/// A server at `addr(0)` that answers every request at once with 30
/// bytes; returns every packet it sent.
fn serve_all(server: &mut Endpoint, now: Nanos) -> Vec<Whole> {
    while let Some(e) = server.poll_event() {
        if let Event::Request { rpc, .. } = e {
            server.reply(now, rpc, payload(30, 2)).unwrap();
        }
    }
    std::iter::from_fn(|| server.poll_transmit(now).map(whole)).collect()
}

/// A spoofed request (its source never says anything again) costs its
/// victim exactly what it cost before: the response's one DATA packet
/// (with our CUTOFFS, which ride along with the answer to a complete
/// request). The response is kept, silently, until the client could no
/// longer be asking for it (`Config::dead_peer_ns` after it went out),
/// then freed and remembered as done: a late copy of the request is not
/// run again.
#[test]
fn a_kept_response_sends_nothing_more_to_its_unproven_client() {
    let config = Config::default();
    let mut server = Endpoint::new(config.clone(), addr(0), 0).unwrap();
    let (victim, request) = spoofed_request(&config, 1);
    server.handle_packet(0, victim.ip(), &request.header);
    let sent = serve_all(&mut server, 0);
    assert_eq!(types_of(&sent), [PacketType::Cutoffs, PacketType::Data]);
    let mut now = 0;
    let end = config.dead_peer_ns() + 4 * config.tick_ns;
    let mut kept_seen = false;
    while now < end {
        now += config.tick_ns;
        server.handle_timeout(now);
        let more = std::iter::from_fn(|| server.poll_transmit(now)).count();
        assert_eq!(more, 0, "a packet to the unproven client at {now} ns");
        let m = server.metrics();
        kept_seen |= m.active_rpcs == 1 && m.unproven_responses_kept == 1;
        if now < config.dead_peer_ns() {
            assert_eq!(m.active_rpcs, 1, "given up at {now} ns, before the client");
        }
        // The kept response has one timer, no rounds (the other: the
        // cutoffs' recomputation).
        assert!(m.timers <= 2, "{} timers at {now} ns", m.timers);
    }
    let m = server.metrics();
    assert!(kept_seen);
    assert_eq!(m.silent_rounds, UNPROVEN_ROUNDS as u64);
    assert_eq!((m.active_rpcs, m.peers, m.need_acks_sent), (0, 0, 0));
    assert_eq!(m.unproven_responses_evicted, 0);
    assert!(server.kept.is_empty());
    server.handle_packet(now, victim.ip(), &request.header);
    assert!(server.poll_event().is_none(), "the request ran twice");
    assert_eq!(server.metrics().stale_duplicates, 1);
}

fn types_of(sent: &[Whole]) -> Vec<PacketType> {
    sent.iter().map(|t| t.packet_type).collect()
}

/// A flood of spoofed one-packet requests whose responses are kept: the
/// RPC table, the peer table, the eviction order and the timers stay
/// within their bounds, every new request is still admitted (the oldest
/// kept response makes room, before any partly received request), and
/// each forged source gets its response (and CUTOFFS), nothing else.
#[test]
fn a_flood_of_spoofed_requests_with_kept_responses_stays_bounded() {
    for (max_rpcs, max_peers) in [(64, 100_000), (100_000, 48)] {
        let config = Config {
            max_rpcs,
            max_peers,
            ..Config::default()
        };
        let mut server = Endpoint::new(config.clone(), addr(0), 0).unwrap();
        let bound = max_rpcs.min(max_peers) as u64;
        let mut to = BTreeMap::<SocketAddr, usize>::new();
        let mut now = 0;
        let total = 2_000;
        // 3 requests per tick: fewer than the tables hold during the
        // silent rounds (about 13 ticks, as before), while the kept ones
        // would fill them long before their time is up.
        for i in 0..total {
            if i % 3 == 0 {
                now += config.tick_ns;
                server.handle_timeout(now);
            }
            let (src, t) = spoofed_request(&config, i);
            server.handle_packet(now, src.ip(), &t.header);
            let mut answer = serve_all(&mut server, now);
            answer.retain(|t| t.packet_type != PacketType::Cutoffs);
            for t in answer {
                assert_eq!(t.packet_type, PacketType::Data, "to {}", t.dst);
                *to.entry(t.dst).or_default() += 1;
            }
            let m = server.metrics();
            assert!(m.active_rpcs <= bound, "{m:#?}");
            assert!(m.peers <= bound, "{m:#?}");
            assert!(server.kept.len() as u64 <= m.active_rpcs);
            assert!(m.timers <= m.active_rpcs + m.dead_rpcs + 4, "{m:#?}");
        }
        let m = server.metrics();
        assert_eq!(m.requests_delivered, total as u64, "{m:#?}");
        assert_eq!(m.refused_rpc_limit + m.refused_peer_limit, 0);
        assert!(m.unproven_responses_kept > 0);
        assert!(m.unproven_responses_evicted > 0);
        assert_eq!(m.rpcs_evicted, 0);
        assert_eq!(to.len(), total as usize);
        assert!(
            to.values().all(|&n| n == 1),
            "a source got more than its response"
        );
        assert!(m.silent_rounds > 0);
        // Everything drains by itself.
        let end = now + config.dead_peer_ns() + 4 * config.tick_ns;
        while now < end {
            now += config.tick_ns;
            server.handle_timeout(now);
            assert_eq!(std::iter::from_fn(|| server.poll_transmit(now)).count(), 0);
        }
        let m = server.metrics();
        assert_eq!((m.active_rpcs, m.peers), (0, 0), "{m:#?}");
        assert!(server.kept.is_empty());
    }
}

/// A client whose response was kept and that then proves itself (its
/// RESEND) is served, and its RPC is not evicted for room: only unproven
/// clients' responses are. A new client RPC of the server's own makes
/// room the same way when the RPC table is full.
#[test]
fn only_unproven_kept_responses_are_evicted_and_a_resend_gets_the_response() {
    let config = Config {
        max_rpcs: 4,
        ..Config::default()
    };
    let mut net = Net::new(2, config.clone());
    // The real client (endpoint 1) and the server (endpoint 0).
    let rpc = net.eps[1].send_request(0, addr(0), payload(20, 5)).unwrap();
    net.pump();
    assert_eq!(net.serve(0, |m| m.clone()), 1);
    net.pump_with(|from, _| from == 0);
    // Three spoofed requests, answered.
    let mut now = 0;
    for i in 0..3 {
        let (src, t) = spoofed_request(&config, i);
        net.eps[0].handle_packet(now, src.ip(), &t.header);
        serve_all(&mut net.eps[0], now);
    }
    // Past the silent rounds, every response is kept.
    let give_up = config.need_ack_ticks + UNPROVEN_ROUNDS * config.resend_interval;
    for _ in 0..=give_up {
        now += config.tick_ns;
        net.now = now;
        net.eps[0].handle_timeout(now);
    }
    assert_eq!(net.eps[0].kept.len(), 4);
    // The client's RESEND (its timer) proves it and gets the response;
    // its ACKs are lost, so the server keeps the RPC (proven now: NEED_ACK
    // rounds).
    for _ in 0..config.resend_interval {
        net.tick();
        net.pump_with(|from, t| from == 1 && t.packet_type == PacketType::Ack);
    }
    let got = net.events(1);
    assert!(
        matches!(&got[..], [Event::Response { rpc: r, message }] if *r == rpc && *message == payload(20, 5)),
        "{got:?}"
    );
    assert!(net.eps[0].peers.get(&addr(1)).unwrap().proven);
    // The table is full (four server RPCs): a new request evicts the
    // oldest unproven kept response, never the proven client's.
    let (src, t) = spoofed_request(&config, 10);
    let server = &mut net.eps[0];
    server.handle_packet(now, src.ip(), &t.header);
    serve_all(server, now);
    let m = server.metrics();
    assert_eq!(m.active_rpcs, 4);
    assert_eq!((m.unproven_responses_evicted, m.refused_rpc_limit), (1, 0));
    // The server's own new RPCs make room too: the two other unproven
    // ones go; the proven client's RPC is never taken.
    let proven = RpcId {
        peer: addr(1),
        id: rpc.id | 1,
    };
    for k in 0..2 {
        server.send_request(now, addr(1), payload(10, k)).unwrap();
        assert!(server.rpcs.get(&proven).is_some());
    }
    let m = server.metrics();
    assert_eq!(
        (m.unproven_responses_evicted, m.active_rpcs),
        (3, 4),
        "{m:#?}"
    );
    assert!(server.kept.is_empty());
    assert_eq!(
        server.send_request(now, addr(1), payload(10, 9)),
        Err(Error::Limit("max_rpcs"))
    );
}
