//! SIRD's mechanisms at the endpoint: the UnschT rule, credit requests,
//! `csn`, credit pacing and the design-mismatch error.

use super::*;
use crate::{Design, RpcError};
use homa_wire::{DATA_FLAG_CSN, DATA_FLAG_SIRD};

/// SIRD with the default BDP of 40,000 B: UnschT 40 KB, B 60 KB, SThr
/// 20 KB, per-sender buckets ≤ 40 KB. Credit unpaced unless a test asks.
fn sird() -> Config {
    let mut c = Config {
        design: Design::Sird,
        ..Config::default()
    };
    c.sird.pace_credit = false;
    c
}

fn data_header(t: &Whole) -> Option<DataHeader> {
    match parse(t).body {
        Body::Data { header, .. } => Some(header),
        _ => None,
    }
}

#[test]
fn messages_up_to_unsch_t_go_unscheduled_larger_ones_ask_for_credit_first() {
    let config = sird();
    let p = config.max_payload() as usize;
    let mut net = Net::new(2, config.clone());
    // 30 KB ≤ UnschT: all of it unscheduled, at the high level.
    net.eps[0]
        .send_request(0, addr(1), payload(30_000, 1))
        .unwrap();
    let mut bytes = 0;
    while let Some(t) = net.eps[0].poll_transmit(0).map(whole) {
        let h = data_header(&t).unwrap();
        assert_ne!(h.flags & DATA_FLAG_SIRD, 0);
        assert_eq!(t.priority, 1);
        bytes += t.header.len() - homa_wire::DATA_HEADER_LEN;
    }
    assert_eq!(bytes, 30_000);
    // 100 KB > UnschT: one empty DATA packet (the credit request) and
    // nothing more until credit comes.
    net.eps[0]
        .send_request(0, addr(1), payload(100_000, 2))
        .unwrap();
    let t = whole(net.eps[0].poll_transmit(0).unwrap());
    let h = data_header(&t).unwrap();
    assert_eq!((h.message_length, h.incoming, h.offset), (100_000, 0, 0));
    assert_eq!(t.header.len(), homa_wire::DATA_HEADER_LEN);
    assert!(net.eps[0].poll_transmit(0).is_none());
    // The receiver credits it one packet at a time, at the low level,
    // while its credit stays within B.
    net.eps[1].handle_packet(0, addr(0).ip(), &t.header);
    let mut credit = Vec::new();
    while let Some(t) = net.eps[1].poll_transmit(0).map(whole) {
        if let Body::Grant { offset, priority } = parse(&t).body {
            credit.push((offset, priority));
        }
    }
    assert!(!credit.is_empty());
    for (i, &(offset, priority)) in credit.iter().enumerate() {
        assert_eq!(offset as usize, (i + 1) * p, "one packet of credit each");
        assert_eq!(priority, 0);
    }
    // Per-sender bucket (40 KB) is the tighter cap here.
    assert!(credit.last().unwrap().0 <= config.sird.sender_bucket_max + p as u32);
}

#[test]
fn messages_of_every_awkward_size_arrive_intact_under_sird() {
    for pace in [false, true] {
        let mut config = sird();
        config.sird.pace_credit = pace;
        let mut net = Net::new(2, config.clone());
        let p = config.max_payload() as usize;
        let sizes = [0, 1, p - 1, p, p + 1, 40_000, 40_001, 100_000, 1_000_000];
        let mut ids = Vec::new();
        for (i, &len) in sizes.iter().enumerate() {
            ids.push(
                net.eps[0]
                    .send_request(net.now, addr(1), payload(len, i as u8))
                    .unwrap(),
            );
        }
        let mut done = BTreeMap::new();
        for _ in 0..100_000 {
            net.pump();
            net.serve(1, |m| m.clone());
            net.pump();
            for e in net.events(0) {
                match e {
                    Event::Response { rpc, message } => {
                        done.insert(rpc, message.into_bytes());
                    }
                    other => panic!("unexpected {other:?}"),
                }
            }
            if done.len() == sizes.len() {
                break;
            }
            // Paced credit needs time to pass (1 µs steps).
            net.now += 1_000;
            for e in &mut net.eps {
                if e.poll_timeout().is_some_and(|t| t <= net.now) {
                    e.handle_timeout(net.now);
                }
            }
        }
        for (i, (&len, id)) in sizes.iter().zip(&ids).enumerate() {
            assert_eq!(
                done.get(id),
                Some(&payload(len, i as u8)),
                "{len} B, pace {pace}"
            );
        }
        let m = net.eps[1].metrics();
        assert_eq!(m.timeouts, 0, "pace {pace}: {m:#?}");
        assert_eq!(m.design_mismatches, 0);
    }
}

/// A sender holding at least SThr of unspent credit over all receivers sets
/// `csn` on every DATA packet; once it has spent below, it clears it.
#[test]
fn a_sender_holding_sthr_of_credit_sets_csn() {
    let config = sird();
    let mut net = Net::new(3, config.clone());
    for r in [1, 2] {
        net.eps[0]
            .send_request(0, addr(r), payload(200_000, r as u8))
            .unwrap();
    }
    // Deliver the two credit requests; both receivers credit their bucket.
    while let Some(t) = net.eps[0].poll_transmit(0).map(whole) {
        let to = net.idx(t.dst);
        net.eps[to].handle_packet(0, addr(0).ip(), &t.header);
    }
    for r in [1, 2] {
        while let Some(t) = net.eps[r].poll_transmit(0).map(whole) {
            net.eps[0].handle_packet(0, addr(r).ip(), &t.header);
        }
    }
    let held = net.eps[0].sender.unspent_credit;
    assert!(held >= config.sird.sender_threshold as u64 * 2, "{held}");
    let mut flags = Vec::new();
    while let Some(t) = net.eps[0].poll_transmit(0).map(whole) {
        if let Some(h) = data_header(&t) {
            flags.push((
                h.flags & DATA_FLAG_CSN != 0,
                net.eps[0].sender.unspent_credit,
            ));
        }
    }
    assert!(flags[0].0, "first packet with {held} B held must carry csn");
    let last = flags.last().unwrap();
    assert!(!last.0, "csn still set with {} B held", last.1);
    for w in flags.windows(2) {
        // (The flag is decided before the packet's own credit is spent.)
        if !w[1].0 {
            assert!(w[0].1 < config.sird.sender_threshold as u64 + config.max_payload() as u64);
        }
    }
}

/// Credit paced to the downlink goes out no faster than the link drains
/// it: over 100 µs of a 10 Gbit/s link, about 100 µs of packets plus the
/// allowed lead of two.
#[test]
fn paced_credit_follows_the_link_rate() {
    let mut config = sird();
    config.sird.pace_credit = true;
    config.sird.bucket = 10_000_000;
    config.sird.sender_bucket_max = 10_000_000;
    let wire_ns = crate::Pacer::new(config.link_mbps, 0, 0).wire_time(config.mtu as usize);
    let mut net = Net::new(2, config.clone());
    net.eps[0]
        .send_request(0, addr(1), payload(1_000_000, 3))
        .unwrap();
    let t = whole(net.eps[0].poll_transmit(0).unwrap());
    net.eps[1].handle_packet(0, addr(0).ip(), &t.header);
    let mut credits = 0u64;
    let mut now = 0;
    while now <= 100_000 {
        if net.eps[1].poll_timeout().is_some_and(|t| t <= now) {
            net.eps[1].handle_timeout(now);
        }
        while let Some(t) = net.eps[1].poll_transmit(now) {
            credits += (t.packet_type == PacketType::Grant) as u64;
        }
        now += 100;
    }
    let expect = 100_000 / wire_ns;
    assert!(
        credits >= expect && credits <= expect + 3,
        "{credits} credits in 100 µs; the link carries {expect} packets"
    );
}

/// Homa and SIRD endpoints that meet fail the RPC with a clear error, in
/// both directions, and keep no state for it.
#[test]
fn homa_and_sird_endpoints_refuse_each_other_clearly() {
    for (client, server) in [(Design::Homa, Design::Sird), (Design::Sird, Design::Homa)] {
        let c = Config {
            design: client,
            ..Config::default()
        };
        let s = Config {
            design: server,
            ..Config::default()
        };
        let mut net = Net {
            eps: vec![
                Endpoint::new(c, addr(0), 1).unwrap(),
                Endpoint::new(s, addr(1), 2).unwrap(),
            ],
            now: 0,
        };
        let id = net.eps[0]
            .send_request(0, addr(1), payload(5_000, 0))
            .unwrap();
        let sent = net.pump();
        assert!(
            count(&sent, PacketType::Mismatch) >= 1,
            "{:?}",
            types(&sent)
        );
        let ev = net.events(0);
        assert!(
            matches!(
                ev.as_slice(),
                [Event::Failed { rpc, error: RpcError::DesignMismatch }] if *rpc == id
            ),
            "{client:?} client, {server:?} server: {ev:?}"
        );
        assert!(net.events(1).is_empty(), "the server ran nothing");
        assert_eq!(net.eps[1].metrics().active_rpcs, 0);
        assert_eq!(net.eps[0].metrics().active_rpcs, 0);
        assert!(net.eps[1].metrics().design_mismatches >= 1);
    }
}

/// Homa mode is untouched: no SIRD bit on any DATA packet.
#[test]
fn homa_data_never_carries_sird_bits() {
    let mut net = Net::new(2, Config::default());
    net.eps[0]
        .send_request(0, addr(1), payload(200_000, 0))
        .unwrap();
    let sent = net.pump();
    for (_, t) in &sent {
        if let Some(h) = data_header(t) {
            assert_eq!(h.flags & (DATA_FLAG_SIRD | DATA_FLAG_CSN), 0);
        }
    }
}
