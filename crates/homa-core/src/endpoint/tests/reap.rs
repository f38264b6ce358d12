//! Ended RPCs freed later ([`Endpoint::reap`]): gone at once for the
//! protocol, freed when the driver asks or the bound forces it.

use super::*;

/// Runs a mixed scenario (RPCs with lost packets, duplicates of finished
/// RPCs' packets, timers past their deadlines) and returns every packet
/// sent and every event, in order. With `reap_each`, every endpoint frees
/// its ended RPCs right after each call into it (as if it freed them at
/// once); without, never (the bound alone frees them).
fn scenario(reap_each: bool) -> (Vec<(usize, Bytes)>, Vec<String>, Vec<Metrics>) {
    let mut net = Net::new(3, Config::default());
    let mut trace = Vec::new();
    let mut events = Vec::new();
    let mut sent_packets = Vec::new();
    let mut step = |net: &mut Net, lose_every: usize, round: usize| {
        let mut k = 0;
        loop {
            let mut moved = false;
            for i in 0..net.eps.len() {
                while let Some(t) = net.eps[i].poll_transmit(net.now).map(whole) {
                    moved = true;
                    k += 1;
                    trace.push((i, t.header.clone()));
                    sent_packets.push(t.clone());
                    if lose_every > 0 && (k + round) % lose_every == 0 {
                        continue;
                    }
                    let to = net.idx(t.dst);
                    let src = net.eps[i].local_addr().ip();
                    net.eps[to].handle_packet(net.now, src, &t.header);
                    if reap_each {
                        net.eps[to].reap(usize::MAX);
                    }
                }
            }
            if !moved {
                break;
            }
        }
        for i in 0..net.eps.len() {
            while let Some(e) = net.eps[i].poll_event() {
                events.push(format!("{i}: {e:?}"));
                if let Event::Request { rpc, .. } = e {
                    net.eps[i].reply(net.now, rpc, payload(3000, 1)).unwrap();
                }
            }
        }
        // Replay some old packets: duplicates of finished RPCs' packets.
        if round % 3 == 2 {
            let old: Vec<_> = sent_packets.iter().step_by(7).cloned().collect();
            for t in old {
                let to = net.idx(t.dst);
                let src = net
                    .eps
                    .iter()
                    .position(|e| e.local_addr() != t.dst)
                    .unwrap();
                let src = net.eps[src].local_addr().ip();
                net.eps[to].handle_packet(net.now, src, &t.header);
                if reap_each {
                    net.eps[to].reap(usize::MAX);
                }
            }
        }
    };
    for round in 0..40 {
        if round < 20 {
            for c in [0, 2] {
                net.eps[c]
                    .send_request(net.now, addr(1), payload(100 + 2000 * round, 0))
                    .unwrap();
            }
        }
        step(&mut net, 5, round);
        net.now += net.eps[0].config.tick_ns;
        for e in &mut net.eps {
            e.handle_timeout(net.now);
            if reap_each {
                e.reap(usize::MAX);
            }
        }
        step(&mut net, 0, round);
    }
    let metrics = net.eps.iter().map(|e| e.metrics()).collect();
    (trace, events, metrics)
}

#[test]
fn ended_rpcs_are_gone_for_the_protocol_whether_freed_or_not() {
    let (trace_a, events_a, m_a) = scenario(true);
    let (trace_b, events_b, m_b) = scenario(false);
    assert_eq!(trace_a.len(), trace_b.len());
    assert!(trace_a == trace_b, "same packets, in the same order");
    assert_eq!(events_a, events_b);
    // The counters agree; of the gauges only the dead RPCs and their
    // filed timers differ.
    for (a, b) in m_a.iter().zip(&m_b) {
        assert_eq!(a.dead_rpcs, 0);
        let mut b = b.clone();
        b.dead_rpcs = 0;
        b.timers = a.timers;
        assert_eq!(*a, b);
    }
    assert!(m_a[1].acks_received > 0 && m_a[0].responses_delivered > 0);
    assert!(
        m_b[0].dead_rpcs > 0 && m_b[1].dead_rpcs > 0,
        "some never freed"
    );
    assert!(m_a[1].unknown_rpc_packets + m_a[1].stale_duplicates > 0);
}

#[test]
fn an_ended_rpc_ignores_its_packets_and_timers_until_freed() {
    let mut net = Net::new(2, Config::default());
    let id = net.eps[0].send_request(0, addr(1), payload(10, 0)).unwrap();
    net.pump();
    // (Its timer filed in its set, as when another RPC's timer takes the
    // slot: one still in the slot leaves when its RPC ends, see
    // `an_rpc_that_ends_with_its_timer_in_the_slot_takes_it_out_at_once`.)
    net.eps[0].timers.settle();
    net.serve(1, |_| payload(10, 2));
    let sent = net.pump();
    let response = sent.iter().find(|(from, _)| *from == 1).unwrap().1.clone();
    assert_eq!(net.events(0).len(), 1);
    // The client's RPC ended: gone for every count but not yet freed, its
    // silence check still filed.
    let ep = &net.eps[0];
    let m = ep.metrics();
    assert_eq!(
        (m.active_rpcs, m.active_client_rpcs, m.dead_rpcs),
        (0, 0, 1)
    );
    assert_eq!(ep.reapable(), 1);
    assert!(ep.rpcs.get(&id).is_none() && ep.rpc_snapshot(id).is_none());
    assert_eq!(ep.timers.filed_for(id), 1, "still filed");
    // A duplicate of the response: an unknown RPC, as if freed.
    let unknown = m.unknown_rpc_packets;
    net.eps[0].handle_packet(net.now, addr(1).ip(), &response.header);
    assert!(net.events(0).is_empty());
    let t = net.eps[0].poll_transmit(net.now).map(whole);
    assert!(t.is_none(), "{:?}", t.as_ref().map(parse));
    assert_eq!(net.eps[0].metrics().unknown_rpc_packets, unknown + 1);
    // Its timer comes and does nothing: the client sends only the ACK it
    // owes, when that is due.
    let c = Config::default();
    let mut sent = Vec::new();
    for _ in 0..c.resend_ticks.max(c.need_ack_ticks) + 3 {
        net.tick();
        while let Some(t) = net.eps[0].poll_transmit(net.now).map(whole) {
            sent.push(t);
        }
    }
    assert_eq!(sent.len(), 1);
    assert!(matches!(parse(&sent[0]).body, Body::Ack { acks } if acks.len() == 1));
    assert_eq!(
        net.eps[0].timers.filed_for(id),
        0,
        "the dead RPC's timer ran"
    );
    let filed = net.eps[0].timers.len();
    // Freed: nothing left (cancelling its fired timer removes nothing).
    assert_eq!(net.eps[0].reap(usize::MAX), 1);
    assert_eq!(net.eps[0].reap(usize::MAX), 0);
    let m = net.eps[0].metrics();
    assert_eq!((m.active_rpcs, m.dead_rpcs), (0, 0));
    assert_eq!(m.timers as usize, filed);
    assert_eq!(net.eps[0].rpcs.dead_len(), 0);
}

#[test]
fn reaping_frees_everything_in_order_within_the_budget() {
    let mut net = Net::new(2, Config::default());
    for _ in 0..10 {
        net.eps[0].send_request(0, addr(1), payload(10, 0)).unwrap();
    }
    net.pump();
    // (The last request's timer filed too, not left in the slot.)
    net.eps[0].timers.settle();
    net.serve(1, |_| Bytes::new());
    net.pump();
    assert_eq!(net.events(0).len(), 10);
    let before = net.eps[0].timers.len();
    assert_eq!(net.eps[0].metrics().dead_rpcs, 10);
    assert_eq!(net.eps[0].reap(3), 3);
    assert_eq!(net.eps[0].metrics().dead_rpcs, 7);
    assert_eq!(
        net.eps[0].timers.len(),
        before - 3,
        "their timers cancelled"
    );
    assert_eq!(net.eps[0].reap(usize::MAX), 7);
    let m = net.eps[0].metrics();
    assert_eq!((m.active_rpcs, m.dead_rpcs), (0, 0));
    assert_eq!(m.timers as usize, before - 10, "no RPC timer left");
    // The server's RPCs end when acked; `close` frees what is left.
    net.now += 10 * net.eps[0].config.tick_ns;
    net.eps[0].handle_timeout(net.now);
    net.pump();
    assert_eq!(net.eps[1].metrics().acks_received, 10);
    assert_eq!(net.eps[1].metrics().dead_rpcs, 10);
    net.eps[1].close(net.now);
    assert_eq!(net.eps[1].metrics().dead_rpcs, 0);
}

/// One RPC from endpoint 0 to endpoint 1 with a request of `size` bytes
/// and an empty response, run to its end (the response delivered).
fn one_rpc(net: &mut Net, size: usize) {
    net.eps[0]
        .send_request(net.now, addr(1), payload(size, 0))
        .unwrap();
    net.pump();
    net.serve(1, |_| Bytes::new());
    net.pump();
    assert_eq!(net.events(0).len(), 1);
}

#[test]
fn the_bound_frees_ended_rpcs_when_the_driver_never_does() {
    let mut net = Net::new(2, Config::default());
    let n = MAX_DEAD_RPCS + 20;
    for round in 0..n {
        one_rpc(&mut net, 10);
        let dead = net.eps[0].metrics().dead_rpcs as usize;
        assert_eq!(dead, (round + 1).min(MAX_DEAD_RPCS));
    }
    assert_eq!(net.eps[0].metrics().responses_delivered, n as u64);
    assert_eq!(net.eps[0].metrics().active_rpcs, 0);
}

#[test]
fn an_rpc_with_large_messages_is_freed_at_once() {
    // Small RPCs wait to be freed; one whose request and response add up
    // to EAGER_FREE_BYTES or more is freed when it ends, on either side.
    let mut net = Net::new(2, Config::default());
    for (size, dead) in [(10, 1), (EAGER_FREE_BYTES, 1), (10, 2)] {
        one_rpc(&mut net, size);
        assert_eq!(net.eps[0].metrics().dead_rpcs, dead, "request of {size} B");
    }
    assert_eq!(net.eps[0].metrics().active_rpcs, 0);
}

#[test]
fn a_full_table_or_a_returning_id_frees_ended_rpcs_first() {
    // The table's slots (live and dead) stay within max_rpcs.
    let config = Config {
        max_rpcs: 4,
        ..Config::default()
    };
    let mut net = Net::new(2, config.clone());
    for _ in 0..10 {
        net.eps[0]
            .send_request(net.now, addr(1), payload(10, 0))
            .unwrap();
        net.pump();
        net.serve(1, |_| Bytes::new());
        net.pump();
        let ep = &net.eps[0];
        assert!(ep.rpcs.len() + ep.rpcs.dead_len() <= 4);
    }
    assert_eq!(net.eps[0].metrics().responses_delivered, 10);
    // A client that starts again with the same seed sends the same id:
    // the server, its ack memory expired, takes it as a new RPC in place
    // of the dead one (whose timer must not fire for the new one).
    let mut net = Net::new(2, Config::default());
    let id = net.eps[0].send_request(0, addr(1), payload(10, 0)).unwrap();
    net.pump();
    net.serve(1, |_| Bytes::new());
    net.pump();
    // (The response's timer filed in its set, not left in the slot.)
    net.eps[1].timers.settle();
    net.now += 2 * net.eps[0].config.tick_ns;
    net.eps[0].flush_acks(net.now, addr(1), 0);
    net.pump();
    let server_id = RpcId {
        peer: addr(0),
        id: id.id | 1,
    };
    assert_eq!(net.eps[1].metrics().dead_rpcs, 1);
    assert_eq!(net.eps[1].timers.filed_for(server_id), 1);
    net.now += net.eps[1].config.ack_memory_ns + 1;
    net.eps[1].acked.expire(net.now);
    assert_eq!(net.eps[1].metrics().remembered_acks, 0);
    net.eps[0] = Endpoint::new(Config::default(), addr(0), 0).unwrap();
    let again = net.eps[0]
        .send_request(net.now, addr(1), payload(10, 0))
        .unwrap();
    assert_eq!(again, id);
    net.pump();
    let ep = &net.eps[1];
    assert_eq!(ep.metrics().dead_rpcs, 0, "the dead one was freed");
    assert_eq!(ep.metrics().active_rpcs, 1);
    assert!(ep.rpcs.get(&server_id).is_some());
    // The dead one's timer went with it (the new one, in service, waits
    // on nobody and has none).
    assert_eq!(ep.timers.filed_for(server_id), 0);
    assert_eq!(net.serve(1, |_| payload(5, 3)), 1);
    net.pump();
    assert!(matches!(
        net.events(0).as_slice(),
        [Event::Response { rpc, .. }] if *rpc == id
    ));
}

#[test]
fn an_rpc_that_ends_with_its_timer_in_the_slot_takes_it_out_at_once() {
    // One RPC at a time: each request's and each response's silence check
    // is still in the timer table's slot when its RPC ends (the response
    // comes, the ack comes), and leaves it then, never filed in a set.
    let mut net = Net::new(2, Config::default());
    for round in 0..3 {
        let id = net.eps[0]
            .send_request(net.now, addr(1), payload(10, 0))
            .unwrap();
        net.pump();
        assert_eq!(net.eps[0].timers.filed_for(id), 1);
        assert!(net.eps[0].timers.unsettled(), "in the slot");
        net.serve(1, |_| payload(10, 2));
        net.pump();
        assert_eq!(net.events(0).len(), 1);
        // Ended: its timer gone with it, nothing left for `reap` to cancel.
        assert_eq!(net.eps[0].timers.filed_for(id), 0);
        assert!(!net.eps[0].timers.unsettled());
        assert_eq!(net.eps[0].metrics().dead_rpcs, 1);
        let filed = net.eps[0].timers.len();
        assert_eq!(net.eps[0].reap(usize::MAX), 1);
        assert_eq!(net.eps[0].timers.len(), filed);
        // The server's RPC ends with the ack, its timer in the slot too.
        let server_id = RpcId {
            peer: addr(0),
            id: id.id | 1,
        };
        assert_eq!(net.eps[1].timers.filed_for(server_id), 1);
        net.now += 2 * net.eps[0].config.tick_ns;
        net.eps[0].flush_acks(net.now, addr(1), 0);
        net.pump();
        assert_eq!(net.eps[1].metrics().dead_rpcs, 1, "round {round}");
        assert_eq!(net.eps[1].timers.filed_for(server_id), 0);
        let filed = net.eps[1].timers.len();
        assert_eq!(net.eps[1].reap(usize::MAX), 1);
        assert_eq!(net.eps[1].timers.len(), filed);
    }
}
