//! ByteDance mode at the endpoint: probes and their answers, capability,
//! hostile answers, the per-peer windows in use.

use super::*;
use homa_wire::{RttInfo, DATA_FLAG_BYTEDANCE};

fn bytedance() -> Config {
    let mut c = Config::default();
    c.bytedance.enabled = true;
    c
}

fn rtt_packets(sent: &[(usize, Whole)]) -> Vec<(usize, Body<'static>)> {
    sent.iter()
        .filter_map(|(i, t)| match parse(t).body {
            Body::RttProbe(info) => Some((*i, Body::RttProbe(info))),
            Body::RttResps(info) => Some((*i, Body::RttResps(info))),
            _ => None,
        })
        .collect()
}

/// One RPC from 0 to 1 with a `len`-byte response, moved to completion
/// with time advancing 10 µs per pump round.
fn rpc(net: &mut Net, req: usize, resp: usize, salt: u8) -> Vec<(usize, Whole)> {
    let id = net.eps[0]
        .send_request(net.now, addr(1), payload(req, salt))
        .unwrap();
    let mut sent = Vec::new();
    for _ in 0..10_000 {
        net.now += 10_000;
        sent.extend(net.pump());
        net.serve(1, |_| payload(resp, salt));
        if net
            .events(0)
            .iter()
            .any(|e| matches!(e, Event::Response { rpc, .. } if *rpc == id))
        {
            return sent;
        }
        net.tick();
    }
    panic!("RPC did not complete");
}

/// The first RPC shows each side that the other runs the mode (DATA flag);
/// the next message that arrives draws a probe at the top priority, at the
/// head of the control queue, answered at once with the nonce echoed, and
/// the prober gets an RTT sample from its own clock.
#[test]
fn a_new_message_from_a_capable_peer_draws_a_probe_answered_with_its_nonce() {
    let mut net = Net::new(2, bytedance());
    let mut sent = rpc(&mut net, 20, 20, 1);
    for (_, t) in &sent {
        if let Body::Data { header, .. } = parse(t).body {
            assert_ne!(header.flags & DATA_FLAG_BYTEDANCE, 0);
        }
    }
    sent.extend(rpc(&mut net, 20, 20, 2));
    let rtt = rtt_packets(&sent);
    assert!(!rtt.is_empty(), "no probes: {:?}", types(&sent));
    for (i, t) in &sent {
        if matches!(t.packet_type, PacketType::RttProbe | PacketType::RttResps) {
            assert_eq!(t.priority, 7, "top (highest unscheduled) level");
            assert_eq!(parse(t).common.sender_id, 0);
            let _ = i;
        }
    }
    // Every answer echoes a probe's nonce.
    let probes: Vec<u64> = rtt
        .iter()
        .filter_map(|(_, b)| match b {
            Body::RttProbe(i) => Some(i.nonce),
            _ => None,
        })
        .collect();
    for (_, b) in &rtt {
        if let Body::RttResps(info) = b {
            assert!(probes.contains(&info.nonce));
            assert_eq!(info.link_mbps, 10_000);
        }
    }
    let m0 = net.eps[0].metrics();
    let m1 = net.eps[1].metrics();
    assert_eq!(m0.rtt_probes_sent + m1.rtt_probes_sent, probes.len() as u64);
    // The client's first probe reached a server that had heard only one
    // packet from it (an unproven peer: it could be a spoofed source), so
    // it was dropped unanswered; every other probe got its answer.
    assert_eq!(m1.rtt_invalid, 1);
    assert_eq!(
        m0.rtt_responses + m1.rtt_responses + m1.rtt_invalid,
        probes.len() as u64
    );
    assert_eq!(m0.rtt_invalid, 0);
    let p = net.eps[0].bytedance_peer(addr(1)).unwrap();
    assert!(p.probe.capable && p.rtt.has_sample());
    assert_eq!(p.link_mbps, 10_000);
    // The same state in the list of every peer's.
    assert_eq!(net.eps[0].bytedance_peers(), vec![(addr(1), p)]);
    // The receiver's unscheduled ratio travelled: all messages were short.
    assert_eq!(net.eps[1].unsched_ratio(), Some(1000));
    assert_eq!(p.unsched_ratio, Some(1000));
    // Within the interval (1 ms) no new probe goes.
    net.now += 1;
    let before = net.eps[0].metrics().rtt_probes_sent;
    let id = net.eps[1]
        .send_request(net.now, addr(0), payload(20, 9))
        .unwrap();
    let _ = id;
    net.pump();
    assert_eq!(net.eps[0].metrics().rtt_probes_sent, before);
}

/// A probe waits in no queue: queued behind data, it still goes first, and
/// it is small enough to pass a pacer holding a full-size packet.
#[test]
fn probes_bypass_queued_data_and_the_pacer() {
    let mut net = Net::new(2, bytedance());
    rpc(&mut net, 20, 20, 1);
    net.now += 2_000_000;
    // Endpoint 0 has a long message queued to 1 when 1's request arrives.
    net.eps[0]
        .send_request(net.now, addr(1), payload(200_000, 3))
        .unwrap();
    net.eps[1]
        .send_request(net.now, addr(0), payload(20, 4))
        .unwrap();
    let t = whole(net.eps[1].poll_transmit(net.now).unwrap());
    net.eps[0].handle_packet(net.now, addr(1).ip(), &t.header);
    // The pacer holds full-size packets: only small ones may go.
    let small = net.eps[0]
        .poll_transmit_small(net.now, 100)
        .expect("the probe passes the pacer");
    assert_eq!(small.packet_type, PacketType::RttProbe);
}

/// Hostile answers: an RTT_RESPS that matches no outstanding probe (wrong
/// nonce, none sent, a replay) is counted and dropped; a probe from a peer
/// we know nothing of draws no answer; with the mode off, both are dropped.
#[test]
fn unmatched_answers_and_unknown_probers_are_dropped() {
    let mut net = Net::new(2, bytedance());
    rpc(&mut net, 20, 20, 1);
    let stranger: SocketAddr = "10.9.9.9:5000".parse().unwrap();
    let info = RttInfo {
        nonce: 42,
        link_mbps: 1,
        unsched_ratio: 0,
    };
    let packet = |body: Body<'static>, sport: u16| {
        Packet {
            common: CommonHeader {
                sport,
                dport: addr(0).port(),
                sender_id: 0,
            },
            body,
        }
        .to_vec()
    };
    let before = net.eps[0].bytedance_peer(addr(1)).unwrap();
    net.eps[0].handle_packet(
        net.now,
        addr(1).ip(),
        &packet(Body::RttResps(info), addr(1).port()),
    );
    net.eps[0].handle_packet(net.now, stranger.ip(), &packet(Body::RttResps(info), 5000));
    net.eps[0].handle_packet(net.now, stranger.ip(), &packet(Body::RttProbe(info), 5000));
    assert_eq!(net.eps[0].metrics().rtt_invalid, 3);
    assert!(net.eps[0].poll_transmit(net.now).is_none(), "no answer");
    assert_eq!(
        net.eps[0].bytedance_peer(addr(1)).unwrap(),
        before,
        "nothing learnt"
    );
    assert!(
        net.eps[0].bytedance_peer(stranger).is_none(),
        "no state made"
    );

    let mut off = Net::new(2, Config::default());
    rpc(&mut off, 20, 20, 1);
    off.eps[0].handle_packet(
        off.now,
        addr(1).ip(),
        &packet(Body::RttProbe(info), addr(1).port()),
    );
    assert_eq!(off.eps[0].metrics().rtt_invalid, 1);
    assert!(off.eps[0].poll_transmit(off.now).is_none());
}

/// A peer that never sets the flag (Linux Homa, or the mode off) is never
/// probed and is sent Homa's unscheduled bytes; a peer with the mode is
/// sent its measured window.
#[test]
fn peers_without_the_flag_are_never_probed_and_get_homas_window() {
    let mut mixed = Net::new(2, bytedance());
    mixed.eps[1] = Endpoint::new(Config::default(), addr(1), 1).unwrap();
    for k in 0..5 {
        mixed.now += 2_000_000;
        let sent = rpc(&mut mixed, 100_000, 100_000, k);
        assert!(rtt_packets(&sent).is_empty());
        let unsched = sent
            .iter()
            .filter(|(i, t)| *i == 0 && t.packet_type == PacketType::Data)
            .filter_map(|(_, t)| match parse(t).body {
                Body::Data { header, .. } => Some(header.incoming),
                _ => None,
            })
            .min()
            .unwrap();
        assert_eq!(
            unsched,
            crate::incast::unsched_limit(&mixed.eps[0].config, 100_000, false)
        );
    }
    assert_eq!(
        mixed.eps[1]
            .metrics()
            .received
            .packets_of(PacketType::RttProbe),
        0
    );

    // Both with the mode: after a sample, the window is the peer's
    // (rtt_mid at 10 Gbit/s; the pump's RTT is 10 µs per round).
    let mut net = Net::new(2, bytedance());
    for k in 0..3 {
        net.now += 2_000_000;
        rpc(&mut net, 20, 20, k);
    }
    let p = net.eps[0].bytedance_peer(addr(1)).unwrap();
    assert!(p.rtt.has_sample());
    let c = net.eps[0].config.clone();
    let w = p
        .unscheduled_window(&c.bytedance, c.link_mbps, c.max_payload(), true)
        .unwrap();
    net.now += 2_000_000;
    net.eps[0]
        .send_request(net.now, addr(1), payload(500_000, 7))
        .unwrap();
    let t = whole(net.eps[0].poll_transmit(net.now).unwrap());
    let Body::Data { header, .. } = parse(&t).body else {
        panic!("not DATA")
    };
    let payload_len = c.max_payload();
    assert_eq!(
        header.incoming,
        crate::bytedance::window::round_up(w, payload_len)
    );
    assert_ne!(
        header.incoming,
        crate::incast::unsched_limit(&c, 500_000, false)
    );
}

#[test]
fn bytedance_needs_homa() {
    let mut c = bytedance();
    c.design = crate::Design::Sird;
    assert!(c.validate().is_err());
    let mut c = bytedance();
    c.bytedance.rtt_ewma_weight = 1001;
    assert!(c.validate().is_err());
    assert!(bytedance().validate().is_ok());
}

/// The receiver's measured unscheduled ratio decides its priority split in
/// the mode, at the cutoff interval, even before it has enough sizes for
/// Homa's rule (Linux's boundaries are kept); senders learn the new cutoffs
/// as they learn Homa's. With the mode off the same traffic changes
/// nothing (too few sizes).
#[test]
fn the_measured_ratio_drives_the_priority_split() {
    let run = |mut config: Config| {
        config.cutoff_update_interval_ns = 5_000_000;
        let mut net = Net::new(2, config);
        // 70 requests of 200 KB: ~20% of their bytes go unscheduled.
        for batch in 0..7u8 {
            for k in 0..10u8 {
                net.eps[0]
                    .send_request(net.now, addr(1), payload(200_000, batch * 10 + k))
                    .unwrap();
            }
            net.pump();
            net.serve(1, |_| Bytes::new());
            net.pump();
        }
        for _ in 0..6 {
            net.tick();
            net.pump();
        }
        net
    };
    let mut net = run(bytedance());
    let ratio = net.eps[1].unsched_ratio().expect("measured");
    assert!(ratio < 300, "{ratio}");
    let (plan, version) = net.eps[1].cutoffs();
    let want = crate::priority::unsched_levels_from_ratio(ratio, 8, 4, 250);
    assert!(want < 4, "{want}");
    assert_eq!(plan.unsched_levels(8), want);
    assert_eq!(version, 2);
    assert_eq!(net.eps[1].metrics().cutoff_updates, 1);
    // Fewer sizes than `cutoff_min_samples`: Linux's boundaries, as many
    // as the levels hold.
    assert_eq!(
        plan,
        PriorityPlan::from_sorted_sizes_with_levels(&[], 40_000, 8, want)
    );
    // The sender learns them with its next message.
    net.eps[0]
        .send_request(net.now, addr(1), payload(100, 0))
        .unwrap();
    net.pump();
    let p = net.eps[0].peers.get(&addr(1)).unwrap();
    assert_eq!((p.cutoff_version, p.cutoffs), (2, plan.cutoffs));
    // More of the same traffic: no new version (nothing moved enough).
    for k in 0..20u8 {
        net.eps[0]
            .send_request(net.now, addr(1), payload(200_000, k))
            .unwrap();
        net.pump();
        net.serve(1, |_| Bytes::new());
        net.pump();
    }
    for _ in 0..6 {
        net.tick();
        net.pump();
    }
    assert_eq!(net.eps[1].cutoffs().1, 2);

    // Stock Homa: the same traffic leaves the default plan.
    let net = run(Config::default());
    assert_eq!(net.eps[1].cutoffs(), (PriorityPlan::default_for(8), 1));
    assert_eq!(
        net.eps[1].unsched_ratio(),
        None,
        "no meter with the mode off"
    );
}

/// Sends everything endpoint `from` has now; packets `hold` picks are kept
/// back (returned) instead of delivered.
fn drain(net: &mut Net, from: usize, mut hold: impl FnMut(&Whole) -> bool) -> Vec<Whole> {
    let mut held = Vec::new();
    while let Some(t) = net.eps[from].poll_transmit(net.now).map(whole) {
        if hold(&t) {
            held.push(t);
        } else {
            deliver(net, from, &t);
        }
    }
    held
}

fn deliver(net: &mut Net, from: usize, t: &Whole) {
    let to = net.idx(t.dst);
    let src = net.eps[from].local_addr().ip();
    net.eps[to].handle_packet(net.now, src, &t.header);
}

fn is_resps(t: &Whole) -> bool {
    t.packet_type == PacketType::RttResps
}

/// Endpoint 0 starts a 500 KB request to 1 whose RTT sample of 0 (1's
/// probe, answered by 0) is delayed by 1 ms: far above `rtt_high`. Returns
/// the packets sent after that sample arrived, up to quiet, with `lose`
/// dropping some.
fn delayed_sample(net: &mut Net, lose: impl FnMut(usize, &Whole) -> bool) -> Vec<(usize, Whole)> {
    for k in 0..3 {
        net.now += 2_000_000;
        rpc(net, 20, 20, k);
    }
    assert!(net.eps[1].bytedance_peer(addr(0)).unwrap().rtt.has_sample());
    net.now += 2_000_000;
    net.eps[0]
        .send_request(net.now, addr(1), payload(500_000, 9))
        .unwrap();
    // 0's unscheduled bytes; 1 probes 0 at the first and grants.
    assert!(drain(net, 0, |_| false).is_empty());
    assert!(drain(net, 1, |_| false).is_empty());
    // 0's answer goes first (head of its control queue): keep it 1 ms.
    let t = whole(net.eps[0].poll_transmit(net.now).unwrap());
    assert!(is_resps(&t));
    net.now += 1_000_000;
    deliver(net, 0, &t);
    net.pump_with(lose)
}

fn grants_from(sent: &[(usize, Whole)], i: usize) -> usize {
    sent.iter()
        .filter(|(j, t)| *j == i && t.packet_type == PacketType::Grant)
        .count()
}

fn request_arrived(net: &mut Net) -> bool {
    net.events(1)
        .iter()
        .any(|e| matches!(e, Event::Request { message, .. } if message.len() == 500_000))
}

/// `no_grants_above_high`: a sample far above `rtt_high` pauses grants to
/// that peer (its message is held, the rest of its granted bytes still
/// arrive); the paused peer keeps being probed from the pause timer, and
/// the first sample below `rtt_high` resumes the grants. Off, the same
/// sample changes no grant.
#[test]
fn grants_pause_above_rtt_high_and_resume_at_a_low_sample() {
    let mut config = bytedance();
    config.bytedance.no_grants_above_high = true;
    let mut net = Net::new(2, config);
    let sent = delayed_sample(&mut net, |_, _| false);
    // The rest of what 1 had granted still arrives.
    assert!(sent
        .iter()
        .any(|(i, t)| *i == 0 && t.packet_type == PacketType::Data));
    assert_eq!(net.eps[1].bytedance.held.len(), 1, "the message is held");
    let p = net.eps[1].bytedance_peer(addr(0)).unwrap();
    let c = net.eps[1].config.clone();
    let t = p
        .thresholds(&c.bytedance, c.link_mbps, c.max_payload())
        .unwrap();
    assert!(p.rtt.recent_ns > t.high_ns && p.rtt.last_ns > t.high_ns);
    assert_eq!(grants_from(&sent, 1), 0, "{:?}", types(&sent));
    assert!(!request_arrived(&mut net), "the message waits");
    assert_eq!(net.eps[1].metrics().bytedance_grant_pauses, 1);
    assert!(p.pause_timer.is_some());
    // The pause timer probes the peer (no new message from it would); its
    // answer, at once, is a sample below rtt_high: grants resume.
    let probes = net.eps[1].metrics().rtt_probes_sent;
    net.tick();
    let sent = net.pump();
    assert_eq!(net.eps[1].metrics().rtt_probes_sent, probes + 1);
    assert!(grants_from(&sent, 1) > 0);
    assert!(request_arrived(&mut net));
    let m = net.eps[1].metrics();
    assert_eq!(
        (m.bytedance_grant_pauses, m.bytedance_stale_resumes),
        (1, 0)
    );
    assert_eq!(
        net.eps[1].bytedance_peer(addr(0)).unwrap().pause_timer,
        None
    );
    assert!(net.eps[1].bytedance.held.is_empty(), "nothing left held");

    // The option off: the same high sample withholds nothing.
    let mut net = Net::new(2, bytedance());
    let sent = delayed_sample(&mut net, |_, _| false);
    assert!(grants_from(&sent, 1) > 0);
    assert!(request_arrived(&mut net));
    assert_eq!(net.eps[1].metrics().bytedance_grant_pauses, 0);
}

/// The stale-sample escape: every answer to the paused peer's probes is
/// lost, so no newer sample comes; `grant_pause_stale_ns` after the high
/// sample the pause ends on its own and the message completes.
#[test]
fn a_pause_ends_when_its_sample_goes_stale() {
    let mut config = bytedance();
    config.bytedance.no_grants_above_high = true;
    let stale = config.bytedance.grant_pause_stale_ns;
    let mut net = Net::new(2, config);
    let lose_answers = |i: usize, t: &Whole| i == 0 && is_resps(t);
    delayed_sample(&mut net, lose_answers);
    let sampled_at = net.now;
    let probes = net.eps[1].metrics().rtt_probes_sent;
    let mut done_at = None;
    for _ in 0..20 {
        net.tick();
        net.pump_with(lose_answers);
        if request_arrived(&mut net) {
            done_at = Some(net.now);
            break;
        }
    }
    let done_at = done_at.expect("the message completed");
    assert!(done_at >= sampled_at + stale, "not before the bound");
    assert!(done_at <= sampled_at + stale + net.eps[1].config.tick_ns);
    let m = net.eps[1].metrics();
    assert_eq!(
        (m.bytedance_grant_pauses, m.bytedance_stale_resumes),
        (1, 1)
    );
    assert!(net.eps[1].bytedance.held.is_empty());
    // It kept probing while paused (about one probe per tick: the
    // congested interval is shorter than a tick here).
    assert!(
        m.rtt_probes_sent >= probes + 3,
        "{}",
        m.rtt_probes_sent - probes
    );
}

/// The new settings are checked.
#[test]
fn pause_window_and_hysteresis_settings_are_validated() {
    let mut config = bytedance();
    config.bytedance.no_grants_above_high = true;
    config.bytedance.rtt_min_window_ns = 0;
    assert!(
        config.validate().is_err(),
        "the window must be at least 1 ns"
    );
    config.bytedance.rtt_min_window_ns = 1;
    config.bytedance.grant_pause_stale_ns = 0;
    assert!(config.validate().is_err());
    config.bytedance.grant_pause_stale_ns = 1_000_000;
    config.bytedance.split_hysteresis = 1_001;
    assert!(config.validate().is_err());
    config.bytedance.split_hysteresis = 0;
    assert!(config.validate().is_ok());
}
