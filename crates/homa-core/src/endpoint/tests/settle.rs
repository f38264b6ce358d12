//! Bookkeeping left for after the send ([`Endpoint::settle`]): an RPC's
//! silence timer filed as its packet goes out, a new message's size
//! recorded for the cutoffs. Whether a driver settles after every call or
//! never (each slot then settles when the next use needs it), the endpoint
//! sends the same packets, raises the same events, keeps the same counters
//! and asks to be woken at the same times.

use super::*;

/// What a scenario observed: every packet sent (by whom), every event,
/// every deadline the endpoints gave after each call, the final metrics,
/// and how often something was left unsettled after a call.
struct Observed {
    packets: Vec<(usize, Bytes)>,
    events: Vec<String>,
    deadlines: Vec<(usize, Option<Nanos>, Option<Nanos>)>,
    metrics: Vec<Metrics>,
    unsettled: usize,
}

/// Runs a mixed scenario (requests and responses of one packet and of
/// many, lost packets, timers past their deadlines, cutoffs recomputed)
/// with `config`. With `settle_each`, every endpoint settles right after
/// each call into it; without, never.
fn scenario(config: Config, settle_each: bool) -> Observed {
    scenario_with(config, settle_each, false, false)
}

/// [`scenario`]; with `file_timers`, the RPC timer in the timer table's
/// slot is also filed in its set after each call (as `settle` did before
/// an RPC that ends took its timer out of the slot); with `reap_each`,
/// ended RPCs are freed after each call (as the simulator does).
fn scenario_with(
    config: Config,
    settle_each: bool,
    file_timers: bool,
    reap_each: bool,
) -> Observed {
    let mut net = Net::new(3, config);
    let mut o = Observed {
        packets: Vec::new(),
        events: Vec::new(),
        deadlines: Vec::new(),
        metrics: Vec::new(),
        unsettled: 0,
    };
    // After each call into endpoint `i`: settle (or not), then note what
    // it would sleep until.
    let after = |net: &mut Net, o: &mut Observed, i: usize| {
        let e = &mut net.eps[i];
        o.unsettled += e.unsettled() as usize;
        if settle_each {
            e.settle();
            assert!(!e.unsettled());
        }
        if file_timers {
            e.timers.settle();
        }
        if reap_each {
            e.reap(usize::MAX);
        }
        o.deadlines
            .push((i, e.poll_timeout(), e.poll_timeout_strict()));
    };
    let step = |net: &mut Net, o: &mut Observed, lose_every: usize, round: usize| {
        let mut k = 0;
        loop {
            let mut moved = false;
            for i in 0..net.eps.len() {
                loop {
                    let t = net.eps[i].poll_transmit(net.now).map(whole);
                    after(net, o, i);
                    let Some(t) = t else { break };
                    moved = true;
                    k += 1;
                    o.packets.push((i, t.header.clone()));
                    if lose_every > 0 && (k + round) % lose_every == 0 {
                        continue;
                    }
                    let to = net.idx(t.dst);
                    let src = net.eps[i].local_addr().ip();
                    net.eps[to].handle_packet(net.now, src, &t.header);
                    after(net, o, to);
                }
            }
            if !moved {
                break;
            }
        }
        // Replay some old packets: stale duplicates of finished RPCs'
        // requests, looked up in the at-most-once memory.
        if round % 3 == 2 {
            let old: Vec<_> = o.packets.iter().step_by(5).cloned().collect();
            for (from, t) in old {
                let to = 1 - from.min(1);
                let src = net.eps[from].local_addr().ip();
                net.eps[to].handle_packet(net.now, src, &t);
                after(net, o, to);
            }
        }
        for i in 0..net.eps.len() {
            while let Some(e) = net.eps[i].poll_event() {
                o.events.push(format!("{i}: {e:?}"));
                if let Event::Request { rpc, .. } = e {
                    let len = if round % 2 == 0 { 100 } else { 5000 };
                    net.eps[i].reply(net.now, rpc, payload(len, 1)).unwrap();
                    after(net, o, i);
                }
            }
        }
    };
    for round in 0..40 {
        if round < 24 {
            for c in [0, 2] {
                let len = if round % 3 == 0 {
                    100
                } else {
                    100 + 1500 * round
                };
                net.eps[c]
                    .send_request(net.now, addr(1), payload(len, 0))
                    .unwrap();
                after(&mut net, &mut o, c);
            }
        }
        step(&mut net, &mut o, 5, round);
        net.now += net.eps[0].config.tick_ns;
        for i in 0..net.eps.len() {
            net.eps[i].handle_timeout(net.now);
            after(&mut net, &mut o, i);
        }
        step(&mut net, &mut o, 0, round);
    }
    o.metrics = net.eps.iter().map(|e| e.metrics()).collect();
    o
}

fn same_either_way(config: Config) {
    let a = scenario(config.clone(), true);
    let b = scenario(config, false);
    assert_eq!(a.packets.len(), b.packets.len());
    assert!(a.packets == b.packets, "same packets, in the same order");
    assert_eq!(a.events, b.events);
    assert_eq!(a.deadlines, b.deadlines, "same deadlines after every call");
    assert_eq!(a.metrics, b.metrics, "same counters and gauges");
    // The scenario did what it is for: work was left for later, timers
    // ran, cutoffs were recomputed, RPCs completed.
    assert!(b.unsettled > 100, "work left unsettled: {}", b.unsettled);
    let m = &a.metrics;
    assert!(m[0].responses_delivered > 10 && m[2].responses_delivered > 10);
    assert!(m[0].timeouts + m[1].timeouts + m[2].timeouts > 0);
    assert!(m[1].acks_received > 0 && m[1].acks_forgotten_early > 0);
    assert!(m[1].stale_duplicates > 0);
}

/// A config whose cutoffs are recomputed every few ticks from few sizes.
fn busy_config(design: crate::Design) -> Config {
    Config {
        design,
        cutoff_update_interval_ns: 3 * Config::default().tick_ns,
        cutoff_min_samples: 4,
        // (A small at-most-once memory: acked RPCs forgotten early.)
        max_remembered_acks: 4,
        ..Config::default()
    }
}

#[test]
fn homa_behaves_the_same_whether_settled_after_every_call_or_never() {
    let config = busy_config(crate::Design::Homa);
    same_either_way(config.clone());
    // (The cutoffs did change, from sizes recorded late or not.)
    let a = scenario(config, false);
    assert!(a.metrics[1].cutoff_updates > 0);
}

#[test]
fn sird_behaves_the_same_whether_settled_after_every_call_or_never() {
    same_either_way(busy_config(crate::Design::Sird));
}

/// Ended RPCs freed after every call (as the simulator does): whether
/// the RPC timer in the slot is filed in its set after every call (as
/// `settle` did before) or left there (an RPC that ends then takes it out
/// of the slot, never filed), the endpoints send the same packets, raise
/// the same events, ask to be woken at the same times and keep the same
/// counters and gauges.
#[test]
fn an_rpc_timer_left_in_the_slot_until_its_rpc_ends_changes_nothing() {
    for design in [crate::Design::Homa, crate::Design::Sird] {
        let a = scenario_with(busy_config(design), true, true, true);
        let b = scenario_with(busy_config(design), true, false, true);
        assert_eq!(a.packets.len(), b.packets.len());
        assert!(a.packets == b.packets, "same packets, in the same order");
        assert_eq!(a.events, b.events);
        assert_eq!(a.deadlines, b.deadlines, "same deadlines after every call");
        assert_eq!(a.metrics, b.metrics, "same counters and gauges");
        assert!(a.metrics[0].responses_delivered > 10);
    }
}

#[test]
fn a_sent_packet_leaves_its_timer_in_the_slot_and_every_answer_counts_it() {
    let mut net = Net::new(2, Config::default());
    let id = net.eps[0]
        .send_request(0, addr(1), payload(100, 0))
        .unwrap();
    net.eps[0].settle();
    let before = (net.eps[0].poll_timeout(), net.eps[0].metrics().timers);
    let t = net.eps[0].poll_transmit(0).expect("the request");
    assert_eq!(t.packet_type, PacketType::Data);
    // The request waits for its response: its timer is in the timer
    // table's slot, and the deadline and the gauge show it as filed.
    // Settling leaves it there (it leaves the slot for free if the RPC
    // ends first); filing it changes no answer.
    assert!(net.eps[0].timers.unsettled());
    let unsettled = (net.eps[0].poll_timeout(), net.eps[0].poll_timeout_strict());
    let timers = net.eps[0].metrics().timers;
    assert!(unsettled.1.is_some());
    net.eps[0].settle();
    assert!(net.eps[0].timers.unsettled());
    net.eps[0].timers.settle();
    assert!(!net.eps[0].timers.unsettled());
    assert_eq!(
        unsettled,
        (net.eps[0].poll_timeout(), net.eps[0].poll_timeout_strict())
    );
    assert_eq!(timers, net.eps[0].metrics().timers);
    assert_ne!(before, (net.eps[0].poll_timeout(), timers));
    // Its round comes whether or not it was filed: the timeout still
    // asks the server.
    let _ = net.eps[0].poll_transmit(0);
    assert!(net.eps[0].timers.filed_for(id) == 1);
    let due = net.eps[0].poll_timeout_strict().unwrap();
    net.eps[0].handle_timeout(due);
    let probe = net.eps[0].poll_transmit(due).expect("a probe");
    assert_eq!(probe.packet_type, PacketType::Resend);
}

#[test]
fn the_size_of_a_new_message_waits_for_settle_and_counts_at_once() {
    let mut net = Net::new(2, Config::default());
    net.eps[0]
        .send_request(0, addr(1), payload(100, 0))
        .unwrap();
    let t = net.eps[0].poll_transmit(0).map(whole).unwrap();
    net.eps[1].handle_packet(0, addr(0).ip(), &t.header);
    // The server recorded the request's size: in the slot, counted.
    assert!(net.eps[1].receiver.unsettled());
    net.eps[1].settle();
    assert!(!net.eps[1].unsettled());
}

#[test]
fn a_request_whole_in_its_first_packet_is_handed_over_with_nothing_to_refile() {
    let mut net = Net::new(2, Config::default());
    net.eps[0]
        .send_request(0, addr(1), payload(100, 0))
        .unwrap();
    net.pump();
    let rpc = match net.events(1).pop() {
        Some(Event::Request { rpc, .. }) => rpc,
        e => panic!("expected the request, got {e:?}"),
    };
    let e = &mut net.eps[1];
    assert!(e.rpcs.get(&rpc).unwrap().in_service_unfiled());
    // Re-filing it (what the hand-over skipped) changes nothing.
    let look = |e: &Endpoint| {
        (
            format!("{:?}", e.rpcs.get(&rpc).unwrap()),
            e.metrics(),
            e.poll_timeout(),
            e.poll_timeout_strict(),
            e.sender.unspent_credit,
            e.sender.has_filed(),
            e.has_grantable_incoming(),
        )
    };
    let before = look(e);
    e.after_change(0, rpc);
    assert_eq!(before, look(e));
    // A request that came in several packets was filed (the receiver's
    // eviction order, its policy, waiting): the hand-over re-files it as
    // before, and it ends as unfiled.
    net.eps[0]
        .send_request(0, addr(1), payload(5000, 0))
        .unwrap();
    net.pump();
    let big = match net.events(1).pop() {
        Some(Event::Request { rpc, .. }) => rpc,
        e => panic!("expected the request, got {e:?}"),
    };
    assert!(net.eps[1].rpcs.get(&big).unwrap().in_service_unfiled());
}

/// Everything `after_change` may change for `rpc`: the RPC itself, the
/// counters, the timers, the sender's and the receiver's filing.
fn filing_state(e: &Endpoint, rpc: RpcId) -> impl PartialEq + std::fmt::Debug {
    (
        format!("{:?}", e.rpcs.get(&rpc)),
        e.metrics(),
        e.poll_timeout(),
        e.poll_timeout_strict(),
        e.timers.len(),
        e.sender.unspent_credit,
        e.sender.has_filed(),
        e.has_grantable_incoming(),
    )
}

#[test]
fn a_new_request_or_reply_is_filed_as_after_change_would() {
    // `send_request` and `reply` file a new message with the sender alone
    // (`file_new_message`): re-filing the RPC with `after_change` right
    // after changes nothing, for one-packet and longer messages, and for
    // an empty one (which waits for its peer at once, so takes the whole
    // `after_change`).
    let mut net = Net::new(2, Config::default());
    let look = filing_state;
    for len in [0, 100, 5000, 200_000] {
        let id = net.eps[0]
            .send_request(0, addr(1), payload(len, 1))
            .unwrap();
        assert!(net.eps[0].sender.has_filed() || len == 0);
        let before = look(&net.eps[0], id);
        net.eps[0].after_change(0, id);
        assert_eq!(before, look(&net.eps[0], id), "request of {len} bytes");
        net.pump();
        let rpc = match net.events(1).pop() {
            Some(Event::Request { rpc, .. }) => rpc,
            e => panic!("expected the request, got {e:?}"),
        };
        net.eps[1].reply(0, rpc, payload(len, 2)).unwrap();
        let before = look(&net.eps[1], rpc);
        net.eps[1].after_change(0, rpc);
        assert_eq!(before, look(&net.eps[1], rpc), "reply of {len} bytes");
        net.pump();
        assert!(matches!(
            net.events(0).pop(),
            Some(Event::Response { rpc, .. }) if rpc == id
        ));
    }
}

#[test]
fn an_rpc_is_refiled_after_each_data_packet_as_after_change_would() {
    // `data_packet_of` refiles the RPC at hand (`refile_sent`) unless it
    // needs the whole `after_change`: after every DATA packet made, on
    // either side, `after_change` changes nothing more, for messages of
    // one packet, of several, and with scheduled bytes.
    let mut net = Net::new(2, Config::default());
    let look = filing_state;
    let mut checked = 0;
    for len in [1, 100, 5000, 200_000] {
        let id = net.eps[0]
            .send_request(0, addr(1), payload(len, 1))
            .unwrap();
        let mut replied = false;
        loop {
            let mut moved = false;
            for i in 0..2 {
                while let Some(t) = net.eps[i].poll_transmit(net.now).map(whole) {
                    moved = true;
                    let p = parse(&t);
                    if matches!(p.body, Body::Data { .. }) {
                        let rpc = RpcId {
                            peer: t.dst,
                            id: p.common.sender_id,
                        };
                        let before = look(&net.eps[i], rpc);
                        net.eps[i].after_change(net.now, rpc);
                        assert_eq!(before, look(&net.eps[i], rpc), "{len} bytes, side {i}");
                        checked += 1;
                    }
                    let to = net.idx(t.dst);
                    let src = net.eps[i].local_addr().ip();
                    net.eps[to].handle_packet(net.now, src, &t.header);
                }
            }
            if !replied {
                if let Some(Event::Request { rpc, .. }) = net.events(1).pop() {
                    net.eps[1].reply(net.now, rpc, payload(len, 2)).unwrap();
                    replied = true;
                    continue;
                }
            }
            if !moved {
                break;
            }
        }
        assert!(replied);
        assert!(matches!(
            net.events(0).pop(),
            Some(Event::Response { rpc, .. }) if rpc == id
        ));
    }
    assert!(checked > 100);
}
