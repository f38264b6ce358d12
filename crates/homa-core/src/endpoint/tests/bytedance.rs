//! ByteDance mode at the endpoint: probes and their answers, capability,
//! hostile answers, the per-peer windows in use.

use super::*;
use homa_wire::{RttInfo, DATA_FLAG_BYTEDANCE};

fn bytedance() -> Config {
    let mut c = Config::default();
    c.bytedance.enabled = true;
    c
}

fn rtt_packets(sent: &[(usize, Transmit)]) -> Vec<(usize, Body<'static>)> {
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
fn rpc(net: &mut Net, req: usize, resp: usize, salt: u8) -> Vec<(usize, Transmit)> {
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
