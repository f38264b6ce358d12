//! Mechanism tests: endpoints wired together through a zero-latency,
//! fully controlled network, one packet at a time.

use super::*;
use crate::PriorityPlan;
use homa_wire::{Body, CommonHeader, DataHeader, Packet, PacketType};
use std::collections::{BTreeMap, BTreeSet};

fn addr(i: usize) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, i as u8 + 1], 4000))
}

fn payload(len: usize, salt: u8) -> Bytes {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt))
        .collect::<Vec<u8>>()
        .into()
}

/// A sent packet made contiguous (header and payload in `header`), so
/// tests can parse it in place: a [`Transmit`] with the header as `Bytes`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Whole {
    dst: SocketAddr,
    priority: u8,
    packet_type: PacketType,
    header: Bytes,
    payload: Bytes,
}

impl Whole {
    fn len(&self) -> usize {
        self.header.len() + self.payload.len()
    }
}

fn whole(t: Transmit) -> Whole {
    Whole {
        dst: t.dst,
        priority: t.priority,
        packet_type: t.packet_type,
        header: t.to_bytes(),
        payload: Bytes::new(),
    }
}

fn parse(t: &Whole) -> Packet<'_> {
    assert!(t.payload.is_empty(), "call whole() first");
    Packet::parse(&t.header).expect("core emits valid packets")
}

struct Net {
    eps: Vec<Endpoint>,
    now: Nanos,
}

impl Net {
    fn new(n: usize, config: Config) -> Net {
        Net {
            eps: (0..n)
                .map(|i| Endpoint::new(config.clone(), addr(i), i as u64).unwrap())
                .collect(),
            now: 0,
        }
    }

    fn idx(&self, a: SocketAddr) -> usize {
        self.eps.iter().position(|e| e.local_addr() == a).unwrap()
    }

    /// Moves packets until nobody has anything to send; `lose` decides per
    /// packet (sender index, packet) whether the network drops it. Returns
    /// every packet sent.
    fn pump_with(&mut self, lose: impl FnMut(usize, &Whole) -> bool) -> Vec<(usize, Whole)> {
        self.pump_n(usize::MAX, lose)
    }

    /// Like `pump_with`, but moves at most `limit` packets.
    fn pump_n(
        &mut self,
        limit: usize,
        mut lose: impl FnMut(usize, &Whole) -> bool,
    ) -> Vec<(usize, Whole)> {
        let mut sent = Vec::new();
        loop {
            let mut moved = false;
            for i in 0..self.eps.len() {
                while sent.len() < limit {
                    let Some(t) = self.eps[i].poll_transmit(self.now).map(whole) else {
                        break;
                    };
                    moved = true;
                    if !lose(i, &t) {
                        let to = self.idx(t.dst);
                        let src = self.eps[i].local_addr().ip();
                        self.eps[to].handle_packet(self.now, src, &t.header);
                    }
                    sent.push((i, t));
                }
            }
            if !moved || sent.len() >= limit {
                return sent;
            }
        }
    }

    fn pump(&mut self) -> Vec<(usize, Whole)> {
        self.pump_with(|_, _| false)
    }

    /// Advances time by one tick and runs every timer.
    fn tick(&mut self) {
        self.now += self.eps[0].config.tick_ns;
        for e in &mut self.eps {
            e.handle_timeout(self.now);
        }
    }

    fn events(&mut self, i: usize) -> Vec<Event> {
        std::iter::from_fn(|| self.eps[i].poll_event()).collect()
    }

    /// Answers every request at endpoint `i` with `f(request)`.
    fn serve(&mut self, i: usize, f: impl Fn(&Bytes) -> Bytes) -> usize {
        let mut n = 0;
        for e in self.events(i) {
            if let Event::Request { rpc, message } = e {
                self.eps[i]
                    .reply(self.now, rpc, f(&message.into_bytes()))
                    .unwrap();
                n += 1;
            }
        }
        n
    }
}

fn types(sent: &[(usize, Whole)]) -> Vec<PacketType> {
    sent.iter().map(|(_, t)| t.packet_type).collect()
}

fn count(sent: &[(usize, Whole)], ty: PacketType) -> usize {
    sent.iter().filter(|(_, t)| t.packet_type == ty).count()
}

// ---------------------------------------------------------------- RPCs

#[test]
fn rpc_ids_even_on_client_odd_on_server() {
    let mut net = Net::new(2, Config::default());
    let rpc = net.eps[0].send_request(0, addr(1), payload(10, 1)).unwrap();
    assert_eq!(rpc.id % 2, 0);
    let sent = net.pump();
    assert_eq!(parse(&sent[0].1).common.sender_id, rpc.id);
    let ev = net.events(1);
    let Event::Request { rpc: srpc, .. } = &ev[0] else {
        panic!("{ev:?}")
    };
    assert_eq!(srpc.id, rpc.id | 1);
    assert_eq!(srpc.peer, addr(0));
    net.eps[1].reply(0, *srpc, payload(5, 2)).unwrap();
    let sent = net.pump();
    assert_eq!(parse(&sent[0].1).common.sender_id, rpc.id | 1);
}

#[test]
fn tagged_ids_carry_their_bits_both_ways() {
    let mut net = Net::new(2, Config::default());
    let tag = crate::IdTag {
        mask: 0b111_1110,
        bits: 0b010_1100,
    };
    for i in 0..20 {
        let rpc = net.eps[0]
            .send_request_tagged(0, addr(1), payload(10, i), tag)
            .unwrap();
        assert_eq!(rpc.id & 0b111_1111, 0b010_1100, "{rpc}");
        let sent = net.pump();
        assert_eq!(parse(&sent[0].1).common.sender_id, rpc.id);
        let ev = net.events(1);
        let Event::Request { rpc: srpc, .. } = &ev[0] else {
            panic!("{ev:?}")
        };
        net.eps[1].reply(0, *srpc, payload(5, 2)).unwrap();
        // The response carries the id (| 1): a filter on its bits 1..
        // finds the same tag.
        let sent = net.pump();
        assert_eq!(parse(&sent[0].1).common.sender_id >> 1, rpc.id >> 1);
        net.events(0);
    }
    // The default tag: requests and streams alike.
    net.eps[0].set_id_tag(crate::IdTag {
        mask: 0b110,
        bits: 0b100,
    });
    for i in 0..20 {
        let rpc = net.eps[0].send_request(0, addr(1), payload(10, i)).unwrap();
        assert_eq!(rpc.id & 0b111, 0b100, "{rpc}");
    }
    let stream = net.eps[0].open_stream(0, addr(1)).unwrap();
    assert_eq!(stream.id & 0b111, 0b100, "{stream}");
}

#[test]
fn messages_of_every_awkward_size_arrive_intact() {
    let config = Config {
        max_message_size: 16 << 20,
        ..Config::default()
    };
    let p = config.max_payload() as usize;
    for len in [0, 1, p - 1, p, p + 1, 100_000, 1_000_000, 16 << 20] {
        let mut net = Net::new(2, config.clone());
        let req = payload(len, 3);
        let rpc = net.eps[0].send_request(0, addr(1), req.clone()).unwrap();
        // Each round trip needs the grants it triggers to flow back.
        let mut delivered = None;
        for _ in 0..10_000 {
            net.pump();
            for e in net.events(1) {
                let Event::Request { rpc, message } = e else {
                    panic!()
                };
                delivered = Some(message.clone().into_bytes());
                net.eps[1].reply(0, rpc, message.into_bytes()).unwrap();
            }
            if let Some(ev) = net.eps[0].poll_event() {
                assert_eq!(
                    ev,
                    Event::Response {
                        rpc,
                        message: req.clone().into()
                    }
                );
                break;
            }
        }
        assert_eq!(delivered.as_deref(), Some(&req[..]), "len {len}");
        // The server asks for its ack after `need_ack_ticks` and the client
        // answers (or, for a server that stays silent towards a client it
        // has not heard twice from, flushes on its own two ticks later);
        // then nothing is left anywhere.
        for _ in 0..net.eps[1].config().need_ack_ticks + 2 {
            net.tick();
            net.pump();
        }
        for e in &net.eps {
            assert!(e.is_idle(), "len {len}: {e:?}");
            assert_eq!(e.metrics().rx_bytes_buffered, 0);
            assert_eq!(e.metrics().tx_bytes_buffered, 0);
        }
    }
}

#[test]
fn api_misuse_is_a_typed_error() {
    let mut e = Endpoint::new(Config::default(), addr(0), 0).unwrap();
    let big = Bytes::from(vec![0; 1_000_001]);
    let err = e.send_request(0, addr(1), big).unwrap_err();
    assert_eq!(
        err,
        Error::MessageTooLong {
            len: 1_000_001,
            max: 1_000_000
        }
    );
    assert!(err.to_string().contains("exceeds the maximum"));
    let err = e
        .send_request(0, "127.0.0.1:0".parse().unwrap(), Bytes::new())
        .unwrap_err();
    assert!(matches!(err, Error::BadAddress(..)));
    let bogus = RpcId {
        peer: addr(1),
        id: 7,
    };
    assert_eq!(
        e.reply(0, bogus, Bytes::new()),
        Err(Error::UnknownRpc(bogus))
    );
    let client = e.send_request(0, addr(1), Bytes::new()).unwrap();
    assert_eq!(
        e.reply(0, client, Bytes::new()),
        Err(Error::NotAwaitingReply(client))
    );
    assert_eq!(e.abort(0, client), Ok(()));
    assert_eq!(e.abort(0, client), Err(Error::UnknownRpc(client)));
    assert!(e.is_idle());
}

// ------------------------------------------------------- unscheduled bytes

#[test]
fn unscheduled_prefix_goes_at_once_the_rest_waits_for_grants() {
    let config = Config::default();
    let p = config.max_payload();
    let unsched = 40_000u32.div_ceil(p) * p;
    let mut e = Endpoint::new(config, addr(0), 0).unwrap();
    e.send_request(0, addr(1), payload(500_000, 0)).unwrap();
    let mut bytes = 0;
    while let Some(t) = e.poll_transmit(0).map(whole) {
        let pkt = parse(&t);
        let Body::Data { header, payload } = pkt.body else {
            panic!()
        };
        assert_eq!(header.incoming, unsched, "incoming announces the prefix");
        assert_eq!(header.message_length, 500_000);
        bytes += payload.len() as u32;
    }
    assert_eq!(bytes, unsched);
}

// ---------------------------------------------------------------- grants

/// Three senders start messages of different lengths to one receiver; the
/// receiver grants shortest-first and gives the shortest the highest
/// scheduled level.
#[test]
fn receiver_grants_in_srpt_order_with_priorities() {
    let config = Config {
        grant_increment: 0,
        ..Config::default()
    };
    let mut net = Net::new(4, config);
    for (i, len) in [(1, 300_000), (2, 100_000), (3, 200_000)] {
        net.eps[i]
            .send_request(0, addr(0), payload(len, 0))
            .unwrap();
    }
    // Deliver the unscheduled packets, interleaved as they would arrive.
    let mut grants: Vec<(SocketAddr, u32, u8)> = Vec::new();
    let sent = net.pump_with(|_, _| false);
    for (from, t) in &sent {
        if *from == 0 {
            if let Body::Grant { offset, priority } = parse(t).body {
                grants.push((t.dst, offset, priority));
            }
        }
    }
    assert!(!grants.is_empty());
    // After everything settled, the last grant each sender got reflects
    // the steady state: 100 KB highest (level 2), 200 KB next, 300 KB lowest.
    let last = |a: SocketAddr| grants.iter().rev().find(|g| g.0 == a).unwrap().2;
    // Messages complete along the way; check the order in which the
    // receiver delivered them instead for the final word.
    let order: Vec<SocketAddr> = net
        .events(0)
        .into_iter()
        .map(|e| match e {
            Event::Request { rpc, .. } => rpc.peer,
            e => panic!("{e:?}"),
        })
        .collect();
    assert_eq!(order, vec![addr(2), addr(3), addr(1)]);
    // The first grants went out while all three were active.
    let first_round: Vec<_> = grants.iter().take(3).collect();
    let prio_of = |a| first_round.iter().find(|g| g.0 == a).map(|g| g.2);
    if let (Some(a), Some(b), Some(c)) = (prio_of(addr(2)), prio_of(addr(3)), prio_of(addr(1))) {
        assert!(a >= b && b >= c, "{first_round:?}");
    }
    assert!(last(addr(1)) <= 3);
}

#[test]
fn overcommitment_is_limited_to_max_overcommit_messages() {
    let config = Config {
        max_overcommit: 3,
        max_incoming: 10_000_000,
        ..Config::default()
    };
    let mut net = Net::new(7, config);
    for i in 1..7 {
        net.eps[i]
            .send_request(0, addr(0), payload(200_000 + i * 1_000, 0))
            .unwrap();
    }
    // Deliver only the unscheduled data; hold back the GRANTs.
    let sent = net.pump_with(|from, _| from == 0);
    let granted: BTreeSet<SocketAddr> = sent
        .iter()
        .filter(|(f, t)| *f == 0 && t.packet_type == PacketType::Grant)
        .map(|(_, t)| t.dst)
        .collect();
    // The three shortest (senders 1, 2, 3) and nobody else.
    assert_eq!(granted, [addr(1), addr(2), addr(3)].into_iter().collect());
}

#[test]
fn only_one_message_per_peer_is_granted() {
    let config = Config {
        grant_increment: 0,
        ..Config::default()
    };
    let mut net = Net::new(2, config);
    net.eps[1]
        .send_request(0, addr(0), payload(150_000, 0))
        .unwrap();
    net.eps[1]
        .send_request(0, addr(0), payload(100_000, 0))
        .unwrap();
    let sent = net.pump_with(|from, _| from == 0);
    let ids: BTreeSet<u64> = sent
        .iter()
        .filter(|(f, t)| *f == 0 && t.packet_type == PacketType::Grant)
        .map(|(_, t)| parse(t).common.sender_id)
        .collect();
    assert_eq!(ids.len(), 1, "grants went to {ids:?}");
}

#[test]
fn fifo_grants_keep_the_oldest_message_moving() {
    // A 1 MB message arrives first; then four other senders keep a backlog
    // of 100 KB messages, always shorter, so SRPT (with one active message)
    // never picks the big one. The network moves fewer packets per round
    // than the backlog grows, so the short messages never run out. With a
    // FIFO share the big message still finishes; without it, it starves.
    let run = |fifo: u32| {
        let config = Config {
            fifo_grant_fraction: fifo,
            max_overcommit: 1,
            ..Config::default()
        };
        let mut net = Net::new(6, config);
        let big = net.eps[1]
            .send_request(0, addr(0), payload(1_000_000, 0))
            .unwrap();
        for _ in 0..300 {
            for i in 2..6 {
                net.eps[i]
                    .send_request(0, addr(0), payload(100_000, 0))
                    .unwrap();
            }
            net.pump_n(250, |_, _| false);
            net.serve(0, |_| Bytes::new());
            if net
                .events(1)
                .iter()
                .any(|e| matches!(e, Event::Response { rpc, .. } if *rpc == big))
            {
                return (true, net.eps[0].metrics().grants_fifo);
            }
        }
        (false, net.eps[0].metrics().grants_fifo)
    };
    let (done, fifo_grants) = run(200);
    assert!(
        done && fifo_grants > 0,
        "done {done}, fifo grants {fifo_grants}"
    );
    let (done, fifo_grants) = run(0);
    assert!(
        !done && fifo_grants == 0,
        "done {done}, fifo grants {fifo_grants}"
    );
}

#[test]
fn fifo_grants_do_not_pile_up_on_a_silent_sender() {
    // The oldest message's sender goes silent after its unscheduled bytes
    // (busy elsewhere, in a real network). However many FIFO turns come,
    // its granted-but-unreceived bytes stay within one FIFO increment, so
    // they cannot eat the receiver's max_incoming.
    let config = Config {
        fifo_grant_fraction: 500,
        fifo_grant_increment: 20_000,
        // Only the shorter messages are active: the big one gets nothing
        // but FIFO grants.
        max_overcommit: 1,
        ..Config::default()
    };
    let mut net = Net::new(3, config);
    let big = net.eps[1]
        .send_request(0, addr(0), payload(1_000_000, 0))
        .unwrap();
    // Only its unscheduled bytes get through.
    let unsched = net.eps[1].config.unsched_bytes;
    net.pump_n(10_000, |from, t| {
        from == 1 && matches!(parse(t).body, Body::Data { header, .. } if header.offset >= unsched)
    });
    let server_id = RpcId {
        id: big.id ^ 1,
        peer: addr(1),
    };
    let outstanding = |net: &Net| {
        let m = net.eps[0].rpcs[&server_id].phase.msgin().unwrap();
        m.granted - m.received
    };
    let before = outstanding(&net);
    for _ in 0..50 {
        net.eps[2]
            .send_request(0, addr(0), payload(100_000, 0))
            .unwrap();
        // Endpoint 1 is silent: everything it sends is lost.
        net.pump_n(10_000, |from, _| from == 1);
        net.serve(0, |_| Bytes::new());
        net.pump_n(10_000, |from, _| from == 1);
    }
    let after = outstanding(&net);
    let cap = before.max(20_000 + net.eps[0].config.max_payload());
    assert!(after <= cap, "outstanding grew from {before} to {after}");
}

// ---------------------------------------------------------------- priorities

#[test]
fn control_packets_use_the_top_priority_and_unscheduled_data_the_cutoffs() {
    let mut net = Net::new(2, Config::default());
    // The first message teaches the sender the receiver's cutoffs (here
    // the defaults: 7 up to 200 B, 6 to 2,800 B, 5 to 15,000 B, then 4).
    net.eps[0]
        .send_request(0, addr(1), payload(100, 0))
        .unwrap();
    net.pump();
    for len in [100, 5_000, 30_000] {
        net.eps[0]
            .send_request(0, addr(1), payload(len, 0))
            .unwrap();
    }
    let sent = net.pump();
    for (_, t) in &sent {
        match parse(t).body {
            Body::Data { header, .. } => {
                let want = match header.message_length {
                    100 => 7,
                    5_000 => 5,
                    _ => 4,
                };
                assert_eq!(t.priority, want, "{header:?}");
            }
            _ => assert_eq!(t.priority, 7, "{:?}", t.packet_type),
        }
    }
}

/// Before a sender knows a receiver's cutoffs it must not send unscheduled
/// bytes below the receiver's top scheduled level: the receiver does not
/// know the message yet, so those packets would rank below messages it
/// grants and could wait in its downlink queue until a RESEND timeout.
/// (With Linux's default table a 38 KB message went at level 4, the fourth
/// scheduled level of a w5 receiver with one unscheduled level; in the
/// simulator its unscheduled packets waited 3–8 ms.) Messages up to 200 B
/// still go at the top level.
#[test]
fn unscheduled_bytes_to_a_peer_with_unknown_cutoffs_never_go_below_the_top_scheduled_level() {
    let big: Vec<u32> = (0..1000).map(|i| 1_000_000 + i).collect();
    let small: Vec<u32> = (0..1000).map(|i| 100 + (i % 10) * 100).collect();
    for (sizes, sched_levels) in [(&big[..], 7), (&small[..], 1), (&[][..], 4)] {
        let mut net = Net::new(2, Config::default());
        net.eps[1].prime_size_sample(sizes);
        let (plan, _) = net.eps[1].cutoffs();
        assert_eq!(plan.sched_levels, sched_levels);
        for len in [100, 5_000, 38_220, 500_000] {
            net.eps[0]
                .send_request(0, addr(1), payload(len, 0))
                .unwrap();
        }
        let mut data = 0;
        while let Some(t) = net.eps[0].poll_transmit(0).map(whole) {
            if let Body::Data { header, .. } = parse(&t).body {
                assert!(
                    t.priority + 1 >= plan.sched_levels,
                    "{} B message at level {}; levels below {} are scheduled",
                    header.message_length,
                    t.priority,
                    plan.sched_levels
                );
                if header.message_length <= 200 {
                    assert_eq!(t.priority, 7);
                }
                data += 1;
            }
        }
        assert!(data > 4);
    }
}

#[test]
fn cutoffs_are_sent_to_senders_with_an_old_version_and_used() {
    let mut net = Net::new(2, Config::default());
    net.eps[0]
        .send_request(0, addr(1), payload(100, 0))
        .unwrap();
    let sent = net.pump();
    // The first DATA carries version 0; the receiver answers with CUTOFFS.
    assert_eq!(count(&sent, PacketType::Cutoffs), 1);
    let peer = net.eps[0].peers.get(&addr(1)).unwrap();
    assert_eq!(peer.cutoff_version, 1);
    // Next message uses the receiver's version: no more CUTOFFS.
    net.eps[0]
        .send_request(0, addr(1), payload(100, 0))
        .unwrap();
    let sent = net.pump();
    assert_eq!(count(&sent, PacketType::Cutoffs), 0);
}

#[test]
fn receiver_recomputes_cutoffs_from_the_sizes_it_sees() {
    let config = Config {
        cutoff_min_samples: 100,
        cutoff_update_interval_ns: 5_000_000,
        ..Config::default()
    };
    let mut net = Net::new(2, config);
    // A workload of small messages only: nearly all bytes unscheduled,
    // so 7 unscheduled levels and 1 scheduled.
    for i in 0..400 {
        net.eps[0]
            .send_request(0, addr(1), payload(100 + (i % 10) * 100, 0))
            .unwrap();
    }
    net.pump();
    net.serve(1, |_| Bytes::new());
    net.pump();
    for _ in 0..6 {
        net.tick();
        net.pump();
    }
    let (plan, version) = net.eps[1].cutoffs();
    assert_eq!(plan.sched_levels, 1);
    assert_eq!(version, 2);
    assert_eq!(net.eps[1].metrics().cutoff_updates, 1);
    // The sender learns the new version with its next message.
    net.eps[0]
        .send_request(net.now, addr(1), payload(100, 0))
        .unwrap();
    net.pump();
    assert_eq!(net.eps[0].peers.get(&addr(1)).unwrap().cutoff_version, 2);
    assert_eq!(
        net.eps[0].peers.get(&addr(1)).unwrap().cutoffs,
        plan.cutoffs
    );
}

#[test]
fn primed_size_sample_sets_cutoffs_at_once_and_senders_learn_them() {
    let mut net = Net::new(2, Config::default());
    // Small messages only: 7 unscheduled levels, 1 scheduled, without
    // waiting for the periodic update.
    let sizes: Vec<u32> = (0..1000).map(|i| 100 + (i % 10) * 100).collect();
    net.eps[1].prime_size_sample(&sizes);
    let (plan, version) = net.eps[1].cutoffs();
    assert_eq!(plan.sched_levels, 1);
    assert_eq!(version, 2);
    assert_eq!(
        plan,
        PriorityPlan::from_sizes(&sizes, Config::default().unsched_bytes, 8)
    );
    // Priming with the same sample again changes nothing.
    net.eps[1].prime_size_sample(&sizes);
    assert_eq!(net.eps[1].cutoffs().1, 2);
    net.eps[0]
        .send_request(0, addr(1), payload(100, 0))
        .unwrap();
    net.pump();
    assert_eq!(
        net.eps[0].peers.get(&addr(1)).unwrap().cutoffs,
        plan.cutoffs
    );
}

// ---------------------------------------------------------------- sender SRPT

#[test]
fn sender_sends_shortest_remaining_first_and_control_before_data() {
    let config = Config {
        pacer_fifo_fraction: 0,
        ..Config::default()
    };
    let mut e = Endpoint::new(config, addr(0), 0).unwrap();
    e.send_request(0, addr(1), payload(30_000, 0)).unwrap();
    e.send_request(0, addr(2), payload(3_000, 0)).unwrap();
    e.send_request(0, addr(3), payload(10_000, 0)).unwrap();
    // A NEED_ACK from a server makes the client owe an immediate ACK.
    let need_ack = Packet {
        common: CommonHeader {
            sport: 4000,
            dport: 4000,
            sender_id: 99,
        },
        body: Body::NeedAck,
    };
    e.handle_packet(0, addr(4).ip(), &need_ack.to_vec());
    let order: Vec<(SocketAddr, PacketType)> = std::iter::from_fn(|| e.poll_transmit(0).map(whole))
        .map(|t| (t.dst, t.packet_type))
        .collect();
    assert_eq!(order[0], (addr(4), PacketType::Ack));
    let dsts: Vec<SocketAddr> = order[1..].iter().map(|o| o.0).collect();
    let first_of = |a| dsts.iter().position(|d| *d == a).unwrap();
    let last_of = |a| dsts.iter().rposition(|d| *d == a).unwrap();
    assert!(last_of(addr(2)) < first_of(addr(3)));
    assert!(last_of(addr(3)) < first_of(addr(1)));
}

#[test]
fn small_packets_can_be_taken_while_a_full_one_waits_for_the_pacer() {
    let mut e = Endpoint::new(Config::default(), addr(0), 0).unwrap();
    e.send_request(0, addr(1), payload(30_000, 0)).unwrap();
    // The driver's pacer holds the long message's first packet...
    let held = e.poll_transmit(0).map(whole).unwrap();
    assert_eq!(held.dst, addr(1));
    // ...so nothing small is waiting yet: the next data packet is full-size.
    assert!(e.poll_transmit_small(0, 1000).is_none());
    // A one-packet message sent meanwhile may bypass the pacer.
    e.send_request(0, addr(2), payload(200, 0)).unwrap();
    let small = e.poll_transmit_small(0, 1000).map(whole).unwrap();
    assert_eq!((small.dst, small.packet_type), (addr(2), PacketType::Data));
    assert!(small.len() < 1000);
    assert!(e.poll_transmit_small(0, 1000).is_none());
    // The long message goes on where it left off.
    let next = e.poll_transmit(0).map(whole).unwrap();
    let Body::Data { header, .. } = parse(&next).body else {
        panic!("not data")
    };
    assert_eq!(header.offset, Config::default().max_payload());
    // A packet at exactly the limit is not small.
    e.send_request(0, addr(3), payload(100, 0)).unwrap();
    let len = 100 + homa_wire::DATA_HEADER_LEN;
    assert!(e.poll_transmit_small(0, len).is_none());
    assert!(e.poll_transmit_small(0, len + 1).is_some());
}

#[test]
fn pacer_fifo_share_serves_the_oldest_message() {
    let mut e = Endpoint::new(Config::default(), addr(0), 0).unwrap();
    e.send_request(0, addr(1), payload(40_000, 0)).unwrap();
    e.send_request(0, addr(2), payload(30_000, 0)).unwrap();
    let dsts: Vec<SocketAddr> = std::iter::from_fn(|| e.poll_transmit(0).map(whole))
        .map(|t| t.dst)
        .collect();
    // 1 packet in 20 goes to the older (longer) message while the shorter
    // one is still sending.
    let p = Config::default().max_payload() as usize;
    let short_packets = 30_000usize.div_ceil(p);
    let during = &dsts[..short_packets + 1];
    assert!(during.contains(&addr(1)), "{during:?}");
    assert_eq!(e.metrics().sender_out_of_order_packets, 1);
}

// ---------------------------------------------------------------- loss

#[test]
fn lost_data_is_asked_for_again_after_resend_ticks() {
    let config = Config::default();
    let mut net = Net::new(2, config.clone());
    let rpc = net.eps[0]
        .send_request(0, addr(1), payload(5_000, 9))
        .unwrap();
    // Lose the second DATA packet.
    let mut n = 0;
    net.pump_with(|_, t| {
        n += (t.packet_type == PacketType::Data) as u32;
        t.packet_type == PacketType::Data && n == 2
    });
    assert!(net.events(1).is_empty());
    let mut resend = None;
    for tick in 1..=config.resend_ticks {
        net.tick();
        let sent = net.pump();
        for (from, t) in &sent {
            // (The client, still without a response, asks too.)
            if let (1, Body::Resend { offset, length, .. }) = (*from, parse(t).body) {
                resend = Some((tick, offset, length));
            }
        }
        if resend.is_some() {
            break;
        }
    }
    let p = config.max_payload();
    assert_eq!(resend, Some((config.resend_ticks, p, p)));
    assert_eq!(net.eps[0].metrics().data_bytes_retransmitted, p as u64);
    let ev = net.events(1);
    assert!(matches!(&ev[0], Event::Request { message, .. } if *message == payload(5_000, 9)));
    let _ = rpc;
}

/// A receiver behind a stall asks again and again for bytes whose copies are
/// only late (here: the server's DATA reach the client 12 ticks after they
/// were sent, longer than the client's `resend_interval`), and each round
/// retransmits the whole range: the response's retransmission budget goes to
/// copies that all arrive in the end. One packet that was really lost is then
/// still missing. The client must get it: before, every RESEND for it was
/// over the budget and answered BUSY, which kept the client waiting while
/// the server counted its NEED_ACK rounds as unanswered, gave the response
/// up, and met the client's next RESENDs with silence; the client failed a
/// live server with `PeerDead` (the flaky `loss.rs` failures on a loaded
/// host). Retransmission stays bounded: at most twice the budget.
#[test]
fn a_response_whose_retransmit_budget_went_to_late_copies_still_completes() {
    let config = Config::default();
    let tick = config.tick_ns;
    let mut net = Net::new(2, config.clone());
    let response = payload(100_000, 2);
    let rpc = net.eps[0]
        .send_request(0, addr(1), payload(100, 1))
        .unwrap();
    net.pump();
    assert_eq!(net.serve(1, |_| response.clone()), 1);
    let p = config.max_payload();
    // Lost whenever sent during the stall (first copy and retransmissions).
    let lost = 60 * p;
    let stall_end = 60 * tick;
    let delay = 12 * tick;
    let mut late: Vec<(Nanos, Whole)> = Vec::new();
    let mut result = None;
    for _ in 0..400 {
        // Deliver the late copies that are due, then move what is sent now.
        let due: Vec<Whole> = {
            let now = net.now;
            let (due, keep) = late.drain(..).partition(|(at, _)| *at <= now);
            late = keep;
            due.into_iter().map(|(_, t)| t).collect()
        };
        for t in due {
            net.eps[0].handle_packet(net.now, addr(1).ip(), &t.header);
        }
        loop {
            let mut moved = false;
            for i in 0..2 {
                while let Some(t) = net.eps[i].poll_transmit(net.now).map(whole) {
                    moved = true;
                    let data_offset = match parse(&t).body {
                        Body::Data { header, .. } => Some(header.offset),
                        _ => None,
                    };
                    let stalled = i == 1 && net.now < stall_end;
                    if stalled && data_offset == Some(lost) {
                        continue;
                    }
                    if stalled && data_offset.is_some() {
                        late.push((net.now + delay, t));
                        continue;
                    }
                    let to = 1 - i;
                    let src = net.eps[i].local_addr().ip();
                    net.eps[to].handle_packet(net.now, src, &t.header);
                }
            }
            if !moved {
                break;
            }
        }
        for e in net.events(0) {
            match e {
                Event::Response { rpc: r, message } if r == rpc => result = Some(message),
                e => panic!("{e:?}"),
            }
        }
        if result.is_some() {
            break;
        }
        net.tick();
    }
    assert_eq!(result.expect("the response never completed"), response);
    // The stall did spend the whole budget on late copies (the lost packet
    // came from beyond it), and the total stays within twice the budget.
    let budget = 100_000 + config.timeout_resends as u64 * p as u64;
    let retransmitted = net.eps[1].metrics().data_bytes_retransmitted;
    assert!(
        budget < retransmitted && retransmitted <= 2 * budget,
        "{retransmitted} B retransmitted"
    );
}

/// A first DATA packet of a longer message from a peer that has never shown
/// it hears us (the spoofed source of a flood) buys nothing: no RESEND, no
/// CUTOFFS, no GRANT beyond what was due, however many timer rounds pass;
/// its RPC is dropped after `UNPROVEN_ROUNDS` silent rounds. Before, each
/// such packet drew a RESEND and a CUTOFFS, and a 100k pkt/s flood made the
/// server spend its time writing them to unreachable ports.
#[test]
fn a_first_packet_from_an_unproven_peer_draws_no_resend_or_cutoffs() {
    let config = Config::default();
    let mut net = Net::new(2, config.clone());
    net.eps[0]
        .send_request(0, addr(1), payload(3 * config.max_payload() as usize, 1))
        .unwrap();
    // Only the second packet arrives (as a spoofed one would, at an offset).
    let mut n = 0;
    let sent = net.pump_with(|from, t| {
        n += (from == 0 && t.packet_type == PacketType::Data) as u32;
        from == 0 && (t.packet_type != PacketType::Data || n != 2)
    });
    let from_server = |sent: &[(usize, Whole)]| sent.iter().filter(|(f, _)| *f == 1).count();
    assert_eq!(from_server(&sent), 0, "{:?}", types(&sent));
    assert_eq!(net.eps[1].metrics().partial_requests, 1);
    // Time passes; only the server's timers run (the client stays mute).
    for _ in 0..(config.resend_ticks + 3 * config.resend_interval) {
        net.now += config.tick_ns;
        net.eps[1].handle_timeout(net.now);
        let mut out = 0;
        while net.eps[1].poll_transmit(net.now).is_some() {
            out += 1;
        }
        assert_eq!(out, 0, "server sent to an unproven peer");
    }
    let m = net.eps[1].metrics();
    assert_eq!(m.silent_rounds, 2);
    assert_eq!(m.partial_requests, 0, "the embryo was dropped");
    assert_eq!(m.resends_requested + m.cutoffs_sent + m.fast_resends, 0);
}

/// While the driver is backlogged, new requests from peers that have not
/// shown they hear us are admitted only `backlog_unproven_per_tick` per
/// tick; the rest are dropped before any state exists. A proven peer's new
/// request and packets of known RPCs are not affected.
#[test]
fn backlogged_driver_sheds_new_requests_of_unproven_peers_only() {
    let config = Config {
        backlog_unproven_per_tick: 3,
        ..Config::default()
    };
    let mut net = Net::new(3, config.clone());
    // Endpoint 2 becomes a proven peer of endpoint 1 with one exchange.
    net.eps[2]
        .send_request(0, addr(1), payload(100, 0))
        .unwrap();
    net.pump();
    net.serve(1, |m| m.clone());
    net.pump();
    let long = 3 * config.max_payload() as usize;
    // Ten first packets of new requests from fresh (unproven) ports.
    let mut clients = Vec::new();
    let mut firsts = Vec::new();
    for i in 0..10 {
        let mut ep = Endpoint::new(config.clone(), addr(100 + i), i as u64).unwrap();
        ep.send_request(0, addr(1), payload(long, 1)).unwrap();
        firsts.push((ep.local_addr(), whole(ep.poll_transmit(0).unwrap())));
        clients.push(ep);
    }
    for (from, t) in &firsts {
        net.eps[1].handle_packet_backlogged(net.now, from.ip(), &t.header);
    }
    let m = net.eps[1].metrics();
    assert_eq!(m.shed_unproven_requests, 7);
    assert_eq!(m.partial_requests, 3);
    // The proven peer's new request gets in, backlog or not.
    net.eps[2]
        .send_request(0, addr(1), payload(long, 2))
        .unwrap();
    let t = whole(net.eps[2].poll_transmit(0).unwrap());
    net.eps[1].handle_packet_backlogged(net.now, addr(2).ip(), &t.header);
    assert_eq!(net.eps[1].metrics().partial_requests, 4);
    // A second packet of an admitted RPC is not shed either (the budget
    // of this tick is used up).
    let second = whole(clients[0].poll_transmit(0).unwrap());
    let before = net.eps[1].metrics().shed_unproven_requests;
    net.eps[1].handle_packet_backlogged(net.now, addr(100).ip(), &second.header);
    assert_eq!(net.eps[1].metrics().shed_unproven_requests, before);
    assert!(net.eps[1].metrics().received.packets[0] >= 4);
    // Next tick: three more admissions.
    net.now += config.tick_ns;
    for (from, t) in &firsts[3..] {
        net.eps[1].handle_packet_backlogged(net.now, from.ip(), &t.header);
    }
    assert_eq!(net.eps[1].metrics().partial_requests, 7);
}

/// A real client whose request lost all but one packet is not stuck behind
/// the silent rounds: its own probe for the response proves it, and the
/// server's next round asks for the missing bytes.
#[test]
fn a_client_that_lost_the_rest_of_its_first_request_recovers_by_probing() {
    let config = Config::default();
    let mut net = Net::new(2, config.clone());
    let len = 2 * config.max_payload() as usize;
    let rpc = net.eps[0]
        .send_request(0, addr(1), payload(len, 7))
        .unwrap();
    let mut n = 0;
    net.pump_with(|_, t| {
        n += (t.packet_type == PacketType::Data) as u32;
        t.packet_type == PacketType::Data && n == 2
    });
    let mut response = None;
    for _ in 0..(config.resend_ticks + 4 * config.resend_interval) {
        net.tick();
        net.pump();
        net.serve(1, |m| m.clone());
        net.pump();
        for e in net.events(0) {
            if let Event::Response { rpc: r, message } = e {
                assert_eq!(r, rpc);
                response = Some(message.into_bytes());
            }
        }
        if response.is_some() {
            break;
        }
    }
    assert_eq!(response, Some(payload(len, 7)));
    assert!(net.eps[1].metrics().resends_requested >= 1);
}

/// Granted bytes that do not arrive while the downlink is busy with other
/// data are taken to be queued, not lost: no RESEND for them until the
/// downlink has been quiet for `resend_ticks`. (Before, the lowest-ranked
/// granted message timed out every 5 ms while its packets waited behind the
/// receiver's higher-priority traffic, and the retransmission went at the
/// top level.)
#[test]
fn granted_bytes_missing_while_the_downlink_is_busy_do_not_time_out() {
    // 100 Mbit/s: a 1 ms tick carries 12,500 bytes.
    let config = Config {
        link_mbps: 100,
        ..Config::default()
    };
    let unsched = config.unsched_bytes;
    let mut net = Net::new(3, config.clone());
    // M (from 1): its unscheduled bytes arrive, its granted bytes never do
    // (they stand for packets queued behind B's). B (from 2) is long and
    // keeps the receiver's downlink busy.
    net.eps[1]
        .send_request(0, addr(0), payload(100_000, 1))
        .unwrap();
    net.eps[2]
        .send_request(0, addr(0), payload(1_000_000, 2))
        .unwrap();
    let held = |from: usize, t: &Whole| {
        from == 1 && matches!(parse(t).body, Body::Data { header, .. } if header.offset >= unsched)
    };
    let resends_to_m = |sent: &[(usize, Whole)]| {
        sent.iter()
            .filter(|(from, t)| *from == 0 && t.dst == addr(1))
            .filter(|(_, t)| matches!(parse(t).body, Body::Resend { .. }))
            .count()
    };
    net.pump_n(60, held);
    let m = RpcId {
        peer: addr(1),
        id: net.eps[1].rpcs.keys().next().unwrap().id | 1,
    };
    assert!(net.eps[0].rpcs[&m].phase.msgin().unwrap().outstanding() > 0);
    // Busy: about 15 full packets of B (and their grants) per tick.
    for _ in 0..3 * config.resend_ticks {
        net.tick();
        let sent = net.pump_n(30, held);
        assert_eq!(resends_to_m(&sent), 0);
    }
    // Quiet (B's packets held too): M's missing bytes are asked for after
    // `resend_ticks` silent ticks, as for any loss.
    let mut asked = None;
    for tick in 1..=config.resend_ticks + 1 {
        net.tick();
        let sent = net
            .pump_with(|from, t| held(from, t) || (from == 2 && t.packet_type == PacketType::Data));
        if resends_to_m(&sent) > 0 {
            asked = Some(tick);
            break;
        }
    }
    assert_eq!(asked, Some(config.resend_ticks));
}

#[test]
fn resend_for_a_request_being_served_gets_busy() {
    let mut net = Net::new(2, Config::default());
    net.eps[0].send_request(0, addr(1), payload(10, 0)).unwrap();
    net.pump();
    assert_eq!(net.events(1).len(), 1);
    // The server sits on the request; the client asks for the response.
    let mut busy = 0;
    let mut resends = 0;
    for _ in 0..60 {
        net.tick();
        let sent = net.pump();
        busy += count(&sent, PacketType::Busy);
        resends += count(&sent, PacketType::Resend);
    }
    assert!(resends >= 5);
    assert_eq!(busy, resends);
    // BUSY keeps the peer alive: no failure however long the server takes.
    assert!(net.events(0).is_empty());
    assert_eq!(net.eps[0].metrics().peers_dead, 0);
}

#[test]
fn request_the_server_never_saw_is_restarted_after_rpc_unknown() {
    let mut net = Net::new(2, Config::default());
    net.eps[0]
        .send_request(0, addr(1), payload(3_000, 5))
        .unwrap();
    // The whole request is lost.
    net.pump_with(|_, t| t.packet_type == PacketType::Data);
    let mut seen = vec![];
    for _ in 0..10 {
        net.tick();
        seen.extend(types(&net.pump()));
        if !net.events(1).is_empty() {
            break;
        }
    }
    // RESEND (client) → RPC_UNKNOWN (server) → DATA again.
    let r = seen.iter().position(|t| *t == PacketType::Resend).unwrap();
    assert_eq!(seen[r + 1], PacketType::RpcUnknown);
    assert!(seen[r + 2..].contains(&PacketType::Data));
    assert_eq!(net.eps[0].metrics().restarts, 1);
}

#[test]
fn every_silent_rpc_asks_for_itself_within_the_per_peer_limit() {
    // Loss recovery does not serialise on one RESEND per peer: each RPC
    // has its own timer. A peer gets at most `timer_packets_per_peer` timer
    // packets per tick; the rest wait for the next tick.
    let config = Config {
        timer_packets_per_peer: 2,
        ..Config::default()
    };
    let mut net = Net::new(2, config.clone());
    let ids: BTreeSet<u64> = (0..3)
        .map(|_| {
            net.eps[0]
                .send_request(0, addr(1), payload(10, 0))
                .unwrap()
                .id
        })
        .collect();
    // Requests arrive; the server never answers.
    net.pump();
    net.events(1);
    let mut per_tick = vec![];
    let mut asked = BTreeSet::new();
    for _ in 0..(config.resend_ticks + 2) {
        net.tick();
        let mut n = 0;
        for (_, t) in net.pump() {
            if t.packet_type == PacketType::Resend {
                asked.insert(parse(&t).common.sender_id);
                n += 1;
            }
        }
        per_tick.push(n);
    }
    assert_eq!(asked, ids, "every RPC asked for its response");
    assert!(per_tick.iter().all(|&n| n <= 2), "{per_tick:?}");
    assert_eq!(per_tick.iter().sum::<usize>(), 3, "{per_tick:?}");
    assert_eq!(net.eps[0].metrics().timer_rounds_deferred, 1);
}

#[test]
fn a_resend_asks_for_every_missing_range() {
    let config = Config::default();
    let p = config.max_payload() as usize;
    let mut net = Net::new(2, config.clone());
    net.eps[0]
        .send_request(0, addr(1), payload(6 * p, 0))
        .unwrap();
    // Packets 1 and 3 are lost.
    let mut n = 0;
    net.pump_with(|from, t| {
        let lost = from == 0 && t.packet_type == PacketType::Data && (n == 1 || n == 3);
        if from == 0 && t.packet_type == PacketType::Data {
            n += 1;
        }
        lost
    });
    let mut ranges = vec![];
    for _ in 0..config.resend_ticks {
        net.tick();
        for (from, t) in net.pump_with(|from, _| from == 1) {
            if from != 1 {
                continue;
            }
            if let Body::Resend { offset, length, .. } = parse(&t).body {
                ranges.push((offset as usize, length as usize));
            }
        }
    }
    assert_eq!(ranges, vec![(p, p), (3 * p, p)]);
}

#[test]
fn dead_server_fails_rpcs_within_the_timeout_bound() {
    let config = Config::default();
    let mut net = Net::new(2, config.clone());
    let a = net.eps[0].send_request(0, addr(1), payload(10, 0)).unwrap();
    let b = net.eps[0]
        .send_request(0, addr(1), payload(100_000, 0))
        .unwrap();
    // Nothing ever reaches the server.
    let bound = config.dead_peer_ns() / config.tick_ns;
    let mut failed = BTreeSet::new();
    let mut ticks = 0;
    while failed.len() < 2 {
        net.tick();
        ticks += 1;
        net.pump_with(|from, _| from == 0);
        for e in net.events(0) {
            match e {
                Event::Failed { rpc, error } => {
                    assert_eq!(error, RpcError::PeerDead);
                    failed.insert(rpc);
                }
                e => panic!("{e:?}"),
            }
        }
        assert!(ticks <= bound, "not failed after {ticks} ticks");
    }
    assert_eq!(failed, [a, b].into_iter().collect());
    assert!(net.eps[0].is_idle());
    // Each RPC gave up on its own.
    assert_eq!(net.eps[0].metrics().peers_dead, 2);
}

#[test]
fn lost_grant_is_repaired_by_the_receivers_resend() {
    let config = Config::default();
    let mut net = Net::new(2, config.clone());
    let req = payload(200_000, 1);
    net.eps[0].send_request(0, addr(1), req.clone()).unwrap();
    // Lose the first GRANT.
    let mut lost = false;
    net.pump_with(|_, t| {
        let drop = !lost && t.packet_type == PacketType::Grant;
        lost |= drop;
        drop
    });
    for _ in 0..40 {
        net.tick();
        net.pump();
        if let Some(Event::Request { message, .. }) = net.eps[1].poll_event() {
            assert_eq!(message, req);
            return;
        }
    }
    panic!("request never completed");
}

// ---------------------------------------------------------------- acks

#[test]
fn server_frees_rpc_after_ack_and_ignores_stale_duplicates() {
    let mut net = Net::new(2, Config::default());
    net.eps[0].send_request(0, addr(1), payload(10, 0)).unwrap();
    let first = net.pump();
    let request_packet = first[0].1.clone();
    net.serve(1, |_| Bytes::from_static(b"ok"));
    net.pump();
    assert_eq!(net.events(0).len(), 1);
    // The server still holds the response until acked.
    assert_eq!(net.eps[1].metrics().active_rpcs, 1);
    net.tick();
    net.tick(); // the ack has waited a whole tick: the client sends it
    net.pump();
    assert_eq!(net.eps[1].metrics().active_rpcs, 0);
    assert_eq!(net.eps[1].metrics().acks_received, 1);
    // A stale duplicate of the request arrives: not executed again.
    net.eps[1].handle_packet(net.now, addr(0).ip(), &request_packet.header);
    assert!(net.events(1).is_empty());
    assert_eq!(net.eps[1].metrics().stale_duplicates, 1);
    assert!(net.eps[1].is_idle());
    // Much later the memory of the ack expires.
    net.now += net.eps[1].config.ack_memory_ns;
    net.eps[1].handle_timeout(net.now);
    assert_eq!(net.eps[1].metrics().remembered_acks, 0);
}

#[test]
fn acks_ride_on_the_next_request_to_the_same_server() {
    let mut net = Net::new(2, Config::default());
    let a = net.eps[0].send_request(0, addr(1), payload(10, 0)).unwrap();
    net.pump();
    net.serve(1, |_| Bytes::new());
    net.pump();
    net.events(0);
    net.eps[0].send_request(0, addr(1), payload(10, 0)).unwrap();
    let sent = net.pump();
    let Body::Data { header, .. } = parse(&sent[0].1).body else {
        panic!()
    };
    assert_eq!(header.ack.client_id, a.id);
    assert_eq!(header.ack.server_port, 4000);
    assert_eq!(net.eps[1].metrics().acks_received, 1);
}

/// Two endpoints after one 10-byte RPC from 0 to 1 has finished: the
/// client owes the server its ack.
fn one_finished_rpc(config: &Config) -> Net {
    let mut net = Net::new(2, config.clone());
    net.eps[0].send_request(0, addr(1), payload(10, 0)).unwrap();
    net.pump();
    net.serve(1, |_| Bytes::new());
    net.pump();
    net
}

/// The ack a request carries ends the peer's last RPC, and the request
/// makes the peer busy again: the peer is never filed idle in between
/// (the server leaves out that refresh when it changes nothing), and is
/// filed idle at once when the request is refused after the ack.
#[test]
fn a_request_carrying_the_ack_of_the_peers_last_rpc_keeps_it_busy() {
    for refuse in [false, true] {
        let mut net = one_finished_rpc(&Config::default());
        net.events(0);
        // The first ack goes alone: the client is idle at the server, and
        // the server's idle sweep is filed.
        net.tick();
        net.tick();
        net.pump();
        assert_eq!(net.eps[1].metrics().acks_received, 1);
        assert_eq!(net.eps[1].peers.idle_len(), 1);
        // A second RPC, whose ack rides on a third request.
        net.eps[0].send_request(0, addr(1), payload(10, 1)).unwrap();
        net.pump();
        net.serve(1, |_| Bytes::new());
        net.pump();
        assert_eq!(net.events(0).len(), 1);
        assert_eq!(net.eps[1].peers.idle_len(), 0);
        net.now += 1_000;
        if refuse {
            net.eps[1].config.max_server_rpcs_per_peer = 0;
        }
        net.eps[0].send_request(0, addr(1), payload(10, 2)).unwrap();
        net.pump();
        let m = net.eps[1].metrics();
        assert_eq!(m.acks_received, 2);
        if refuse {
            assert_eq!(m.refused_peer_rpc_limit, 1);
            assert_eq!(net.eps[1].peers.idle_len(), 1);
            assert_eq!(net.eps[1].peers.oldest_idle(), Some(net.now));
        } else {
            assert_eq!(m.active_rpcs, 1);
            assert_eq!(net.eps[1].peers.idle_len(), 0);
            assert_eq!(net.eps[1].peers.oldest_idle(), None);
        }
    }
}

#[test]
fn lost_ack_is_recovered_with_need_ack() {
    let config = Config::default();
    let mut net = one_finished_rpc(&config);
    let mut seen = vec![];
    // Lose every ACK the client flushes on its own.
    let mut need_ack_seen = false;
    for _ in 0..(config.need_ack_ticks + config.resend_interval + 2) {
        net.tick();
        let sent = net
            .pump_with(|from, t| from == 0 && t.packet_type == PacketType::Ack && !need_ack_seen);
        for (_, t) in &sent {
            need_ack_seen |= t.packet_type == PacketType::NeedAck;
        }
        seen.extend(types(&sent));
    }
    let n = seen.iter().position(|t| *t == PacketType::NeedAck).unwrap();
    assert_eq!(seen[n + 1], PacketType::Ack);
    assert!(net.eps[1].is_idle());
}

#[test]
fn ack_packets_carry_up_to_five_acks() {
    let mut net = Net::new(2, Config::default());
    for _ in 0..7 {
        net.eps[0].send_request(0, addr(1), payload(10, 0)).unwrap();
    }
    net.pump();
    net.serve(1, |_| Bytes::new());
    let sent = net.pump();
    let acks: Vec<usize> = sent
        .iter()
        .filter_map(|(_, t)| match parse(t).body {
            Body::Ack { acks } => Some(acks.len()),
            _ => None,
        })
        .collect();
    assert_eq!(acks, vec![5]);
    let mut sent = vec![];
    for _ in 0..Config::default().need_ack_ticks + 2 {
        net.tick();
        sent.extend(net.pump());
    }
    // The other two answer the server's NEED_ACKs (each names its RPC in
    // the header and carries whatever else is owed).
    assert!(sent.iter().all(|(from, t)| match parse(t).body {
        Body::Ack { acks } => *from == 0 && acks.len() <= 2,
        Body::NeedAck => *from == 1,
        _ => false,
    }));
    assert!(net.eps[1].is_idle());
    assert_eq!(net.eps[1].metrics().acks_received, 7);
}

/// The client's own ACK flush is not on a tick boundary: clients that
/// finish RPCs at different moments do not flush at the same instant.
#[test]
fn ack_flush_deadlines_follow_the_rpc_not_the_tick() {
    let config = Config::default();
    let mut deadlines = vec![];
    for offset in [config.tick_ns / 3, config.tick_ns / 2] {
        let mut net = Net::new(2, config.clone());
        net.now = offset;
        net.eps[0]
            .send_request(offset, addr(1), payload(10, 0))
            .unwrap();
        net.pump();
        net.serve(1, |_| Bytes::new());
        net.pump();
        assert!(net.eps[0].poll_event().is_some(), "response");
        deadlines.push(net.eps[0].poll_timeout().expect("ack flush pending"));
    }
    assert_ne!(deadlines[0], deadlines[1]);
    assert!(deadlines[0] % config.tick_ns != 0, "{deadlines:?}");
}

/// A client owes acks to a server it no longer talks to: it does not send
/// an ACK packet of its own before the server asks (tick-aligned ACK
/// packets from every client at once raised short-message tails in the
/// simulator); the server's NEED_ACK gets them, and the client's own flush
/// comes only after that would have happened.
#[test]
fn owed_acks_wait_for_need_ack() {
    let config = Config::default();
    let mut net = one_finished_rpc(&config);
    let mut order = vec![];
    for _ in 0..config.need_ack_ticks + 3 {
        net.tick();
        order.extend(types(&net.pump()));
    }
    let need_ack = order.iter().position(|t| *t == PacketType::NeedAck);
    let ack = order.iter().position(|t| *t == PacketType::Ack);
    assert!(
        matches!((need_ack, ack), (Some(n), Some(a)) if n < a),
        "the ACK answers NEED_ACK: {order:?}"
    );
    assert!(net.eps[1].is_idle());
    // With NEED_ACKs lost, the client flushes on its own, later.
    let mut net = one_finished_rpc(&config);
    let mut ticks_to_ack = None;
    for t in 1..=config.need_ack_ticks + 4 {
        net.tick();
        let sent = net.pump_with(|from, t| from == 1 && t.packet_type == PacketType::NeedAck);
        if ticks_to_ack.is_none() && types(&sent).contains(&PacketType::Ack) {
            ticks_to_ack = Some(t);
        }
    }
    let t = ticks_to_ack.expect("the client flushes its acks eventually");
    assert!(t > config.need_ack_ticks, "flushed after {t} ticks");
    assert!(net.eps[1].is_idle());
}

// ---------------------------------------------------------------- incast

#[test]
fn many_outstanding_requests_ask_for_small_unscheduled_responses() {
    let config = Config::default();
    let threshold = config.incast_threshold as usize;
    let mut net = Net::new(2, config.clone());
    for _ in 0..threshold + 2 {
        net.eps[0].send_request(0, addr(1), payload(10, 0)).unwrap();
    }
    assert_eq!(net.eps[0].metrics().incast_requests, 2);
    // Responses of 20 KB: the flagged ones send one packet unscheduled
    // instead of the whole message; hold the client's grants back.
    net.pump();
    net.serve(1, |_| payload(20_000, 0));
    let sent = net.pump_with(|from, _| from == 0);
    let mut per_rpc: BTreeMap<u64, u32> = BTreeMap::new();
    for (from, t) in &sent {
        if *from == 1 {
            if let Body::Data { payload, .. } = parse(t).body {
                *per_rpc.entry(parse(t).common.sender_id).or_default() += payload.len() as u32;
            }
        }
    }
    let full = per_rpc.values().filter(|&&b| b == 20_000).count();
    let limited = per_rpc
        .values()
        .filter(|&&b| b == config.max_payload())
        .count();
    assert_eq!((full, limited), (threshold, 2));
}

// ---------------------------------------------------------------- robustness

#[test]
fn malformed_and_misdirected_packets_are_counted_and_dropped() {
    let mut e = Endpoint::new(Config::default(), addr(0), 0).unwrap();
    e.handle_packet(0, addr(1).ip(), &[1, 2, 3]);
    e.handle_packet(0, addr(1).ip(), &[0; 28]); // type 0
    let wrong_port = Packet {
        common: CommonHeader {
            sport: 1,
            dport: 999,
            sender_id: 2,
        },
        body: Body::Busy,
    };
    e.handle_packet(0, addr(1).ip(), &wrong_port.to_vec());
    let too_long = Packet {
        common: CommonHeader {
            sport: 1,
            dport: 4000,
            sender_id: 2,
        },
        body: Body::Data {
            header: DataHeader {
                message_length: 2_000_000,
                ..DataHeader::default()
            },
            payload: &[],
        },
    };
    e.handle_packet(0, addr(1).ip(), &too_long.to_vec());
    let m = e.metrics();
    assert_eq!(m.malformed_dropped, 2);
    assert_eq!(m.invalid_dropped, 2);
    assert!(e.is_idle());
}

#[test]
fn rx_buffer_limit_bounds_memory() {
    // Memory is charged for bytes received (plus a fixed charge per
    // message), not for the length a first packet claims.
    let config = Config {
        rx_buffer_limit: 3 * (512 + 1_000),
        ..Config::default()
    };
    let mut e = Endpoint::new(config, addr(0), 0).unwrap();
    for id in 0..10u64 {
        let p = Packet {
            common: CommonHeader {
                sport: 1,
                dport: 4000,
                sender_id: id * 2 + 2,
            },
            body: Body::Data {
                header: DataHeader {
                    message_length: 1_000_000,
                    incoming: 1_000_000,
                    ..DataHeader::default()
                },
                payload: &[1; 1_000],
            },
        };
        e.handle_packet(0, addr(1).ip(), &p.to_vec());
    }
    let m = e.metrics();
    assert_eq!(m.active_rpcs, 3);
    assert_eq!(m.rx_buffer_drops, 7);
    assert!(m.rx_bytes_buffered <= 3 * (512 + 1_000));
    // A tick later the stalest partly received request makes room.
    let p = Packet {
        common: CommonHeader {
            sport: 2,
            dport: 4000,
            sender_id: 100,
        },
        body: Body::Data {
            header: DataHeader {
                message_length: 2_000,
                incoming: 2_000,
                ..DataHeader::default()
            },
            payload: &[1; 1_000],
        },
    };
    let tick = e.config().tick_ns;
    e.handle_packet(tick, addr(1).ip(), &p.to_vec());
    assert_eq!(e.metrics().rpcs_evicted, 1);
    assert_eq!(e.metrics().active_rpcs, 3);
}

#[test]
fn eviction_spares_a_request_that_made_progress() {
    // Three partly received requests fill the receive memory at time 0.
    // The first (smallest id, so first in the eviction order as filed)
    // then gets another packet; a tick later a new request needs room, and
    // the victim must be a request that stayed silent, not the first.
    let config = Config {
        rx_buffer_limit: 3 * (512 + 1_000) + 1_000,
        ..Config::default()
    };
    let mut e = Endpoint::new(config, addr(0), 0).unwrap();
    let data = |sport: u16, sender_id: u64, offset: u32| Packet {
        common: CommonHeader {
            sport,
            dport: 4000,
            sender_id,
        },
        body: Body::Data {
            header: DataHeader {
                message_length: 1_000_000,
                incoming: 1_000_000,
                offset,
                ..DataHeader::default()
            },
            payload: &[1; 1_000],
        },
    };
    for id in 0..3u64 {
        e.handle_packet(0, addr(1).ip(), &data(1, id * 2 + 2, 0).to_vec());
    }
    assert_eq!(e.metrics().active_rpcs, 3);
    let tick = e.config().tick_ns;
    e.handle_packet(tick / 2, addr(1).ip(), &data(1, 2, 1_000).to_vec());
    let first = RpcId {
        peer: SocketAddr::new(addr(1).ip(), 1),
        id: 3,
    };
    assert!(e.rpc_snapshot(first).is_some());
    e.handle_packet(tick, addr(1).ip(), &data(2, 100, 0).to_vec());
    assert_eq!(e.metrics().rpcs_evicted, 1);
    assert!(
        e.rpc_snapshot(first).is_some(),
        "the request heard from most recently was evicted"
    );
}

#[test]
fn resend_never_grants_and_a_repeated_grant_repairs_a_lost_one() {
    // A RESEND for bytes the sender was never allowed to send obtains
    // nothing (else anyone could make a sender transmit a whole message);
    // the sender answers BUSY. A GRANT allows them.
    let mut net = Net::new(2, Config::default());
    net.eps[0]
        .send_request(0, addr(1), payload(100_000, 0))
        .unwrap();
    let sent = net.pump_with(|_, _| true); // everything lost
    let sent_bytes: u32 = sent
        .iter()
        .filter_map(|(_, t)| match parse(t).body {
            Body::Data { payload, .. } => Some(payload.len() as u32),
            _ => None,
        })
        .sum();
    let id = net.eps[0].rpcs.keys().next().unwrap().id;
    let packet = |body| {
        Packet {
            common: CommonHeader {
                sport: 4000,
                dport: 4000,
                sender_id: id | 1,
            },
            body,
        }
        .to_vec()
    };
    let resend = packet(Body::Resend {
        offset: sent_bytes,
        length: 20_000,
        priority: 7,
    });
    net.eps[0].handle_packet(0, addr(1).ip(), &resend);
    let out: Vec<PacketType> = std::iter::from_fn(|| net.eps[0].poll_transmit(0))
        .map(|t| t.packet_type)
        .collect();
    assert_eq!(out, vec![PacketType::Busy]);
    let grant = packet(Body::Grant {
        offset: sent_bytes + 20_000,
        priority: 3,
    });
    net.eps[0].handle_packet(0, addr(1).ip(), &grant);
    let mut data = 0;
    while let Some(t) = net.eps[0].poll_transmit(0).map(whole) {
        if let Body::Data { header, payload } = parse(&t).body {
            assert!(header.offset >= sent_bytes);
            data += payload.len() as u32;
        }
    }
    assert_eq!(data, 20_000);
}

#[test]
fn idle_peers_are_forgotten() {
    let config = Config {
        peer_idle_ns: 1_000_000_000,
        ..Config::default()
    };
    let mut net = Net::new(2, config);
    net.eps[0].send_request(0, addr(1), payload(10, 0)).unwrap();
    net.pump();
    net.serve(1, |_| Bytes::new());
    net.pump();
    net.tick();
    net.tick();
    net.pump();
    for e in &mut net.eps {
        assert!(e.is_idle());
        assert_eq!(e.metrics().peers, 1);
        // An idle endpoint still asks for a timer to forget its peers.
        let mut t = e.poll_timeout().expect("a sweep is pending");
        for _ in 0..10 {
            e.handle_timeout(t);
            match e.poll_timeout() {
                Some(next) => t = next,
                None => break,
            }
        }
        assert_eq!(e.metrics().peers, 0);
        assert_eq!(e.poll_timeout(), None);
    }
}

/// A timer that runs late (a driver descheduled for tens of
/// milliseconds on a loaded host) must not shorten the patience that
/// follows: the rounds after it stay `resend_interval` ticks apart. Before,
/// the next round was due `unanswered × resend_interval` ticks after the
/// RPC last heard from its peer, so after a stall of 60 ticks every later
/// round came one tick after the last until the schedule caught up: a
/// client gave up on a live server after 20 rounds in about 25 ms
/// instead of 100 (seen in `faults.rs` under load: rounds 2 ms apart).
#[test]
fn rounds_after_a_late_timer_keep_their_interval() {
    let config = Config {
        timeout_resends: 20,
        ..Config::default()
    };
    let tick = config.tick_ns;
    let interval = config.resend_interval as u64;
    let mut net = Net::new(2, config.clone());
    let rpc = net.eps[0]
        .send_request(0, addr(1), payload(100, 1))
        .unwrap();
    // The request and everything after it are lost.
    net.pump_with(|_, _| true);
    // The client's driver sleeps through its first rounds: its timers run
    // next 60 ticks later, then every tick.
    net.now = 60 * tick;
    let mut rounds = Vec::new();
    let mut failed_at = None;
    for _ in 0..400 {
        net.eps[0].handle_timeout(net.now);
        for (_, t) in net.pump_with(|_, _| true) {
            if matches!(parse(&t).body, Body::Resend { .. }) {
                rounds.push(net.now / tick);
            }
        }
        if net
            .events(0)
            .iter()
            .any(|e| matches!(e, Event::Failed { rpc: r, error: RpcError::PeerDead } if *r == rpc))
        {
            failed_at = Some(net.now / tick);
            break;
        }
        net.now += tick;
    }
    for w in rounds.windows(2) {
        assert!(
            w[1] - w[0] >= interval,
            "rounds at ticks {rounds:?}: {} and {} too close",
            w[0],
            w[1]
        );
    }
    // Still all `timeout_resends` rounds, and the RPC fails only after
    // them, `timeout_resends` intervals after the stall.
    assert_eq!(rounds.len() as u32, config.timeout_resends);
    let failed_at = failed_at.expect("the RPC fails in the end");
    assert!(
        failed_at >= 60 + config.timeout_resends as u64 * interval,
        "failed at tick {failed_at}"
    );
}

mod bytedance;
mod linux;
mod reap;
mod settle;
mod sird;
mod stream;
mod unproven;
