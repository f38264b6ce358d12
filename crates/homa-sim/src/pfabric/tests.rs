//! Unit tests of the pFabric transport.

use super::*;
use crate::topology::tx_time;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, HashMap};

fn env() -> HostEnv {
    HostEnv {
        hosts: 3,
        host_link_bps: 10_000_000_000,
        rtt: 8_000_000,
        rtt_bytes: 10_000,
        packetization: Packetization::default(),
        max_message: 10_000_000,
        size_sample: Default::default(),
        seed: 1,
    }
}

fn mp() -> u64 {
    Packetization::default().max_payload() as u64
}

fn host(id: HostId) -> PFabricHost {
    PFabric::default().build_host(id, &env()).unwrap()
}

fn counter(h: &PFabricHost, name: &str) -> u64 {
    h.counters()
        .into_iter()
        .find(|&(n, _)| n == name)
        .unwrap_or_else(|| panic!("no counter {name}"))
        .1
}

fn total(hosts: &[PFabricHost], name: &str) -> u64 {
    hosts.iter().map(|h| counter(h, name)).sum()
}

type DropFn = Box<dyn FnMut(Time, &SimPacket<PfBody>) -> bool>;

/// Hosts joined by a wire: each host has a link of `env().host_link_bps`
/// that it feeds one packet at a time; a packet arrives `delay` after
/// its last bit left, unless `drop` says otherwise.
struct Wire {
    hosts: Vec<PFabricHost>,
    now: Time,
    delay: Time,
    free_at: Vec<Time>,
    busy: Vec<bool>,
    flying: BTreeMap<(Time, u64), SimPacket<PfBody>>,
    serial: u64,
    /// Every packet the hosts sent, with its send time.
    log: Vec<(Time, SimPacket<PfBody>)>,
    /// Deliveries per receiving host.
    delivered: Vec<Vec<Delivered>>,
    drop: DropFn,
    dropped: u64,
}

impl Wire {
    fn new(n: u32, proto: &PFabric) -> Self {
        Wire {
            hosts: (0..n)
                .map(|i| proto.build_host(i, &env()).unwrap())
                .collect(),
            now: 0,
            delay: 2_000_000,
            free_at: vec![0; n as usize],
            busy: vec![false; n as usize],
            flying: BTreeMap::new(),
            serial: 0,
            log: Vec::new(),
            delivered: vec![Vec::new(); n as usize],
            drop: Box::new(|_, _| false),
            dropped: 0,
        }
    }

    fn start(&mut self, src: HostId, dst: HostId, size: u64) -> u64 {
        self.busy[src as usize] = true;
        self.hosts[src as usize]
            .start_message(self.now, dst, size)
            .unwrap()
    }

    /// Runs until nothing is left to do (true) or `until` (false).
    fn run(&mut self, until: Time) -> bool {
        let bps = env().host_link_bps;
        loop {
            while let Some(entry) = self.flying.first_entry() {
                if entry.key().0 > self.now {
                    break;
                }
                let p = entry.remove();
                let dst = p.meta.dst as usize;
                self.hosts[dst].receive(self.now, p);
                self.busy[dst] = true;
            }
            for (i, h) in self.hosts.iter_mut().enumerate() {
                if h.next_timeout().is_some_and(|t| t <= self.now) {
                    h.on_timeout(self.now);
                    self.busy[i] = true;
                }
            }
            for (i, h) in self.hosts.iter_mut().enumerate() {
                if self.busy[i] && self.free_at[i] <= self.now {
                    match h.poll_transmit(self.now) {
                        Some(p) => {
                            assert_eq!(p.meta.src, i as HostId);
                            let done = self.now + tx_time(p.meta.wire_bytes, bps);
                            self.free_at[i] = done;
                            self.log.push((self.now, p.clone()));
                            if (self.drop)(self.now, &p) {
                                self.dropped += 1;
                            } else {
                                self.serial += 1;
                                self.flying.insert((done + self.delay, self.serial), p);
                            }
                        }
                        None => self.busy[i] = false,
                    }
                }
                while let Some(d) = h.poll_delivered() {
                    self.delivered[i].push(d);
                }
            }
            let mut next = self.flying.first_key_value().map(|(k, _)| k.0);
            for (i, h) in self.hosts.iter().enumerate() {
                let t = h.next_timeout();
                let link = (self.busy[i]).then_some(self.free_at[i].max(self.now));
                for c in [t, link].into_iter().flatten() {
                    next = Some(next.map_or(c, |n: Time| n.min(c)));
                }
            }
            match next {
                None => return true,
                Some(t) if t > until => return false,
                Some(t) => self.now = t.max(self.now),
            }
        }
    }

    /// Checks that exactly `expected` (src, dst, key) were delivered,
    /// each once, and that no state is left behind.
    fn check_all_delivered(&self, expected: &[(HostId, HostId, u64)]) {
        let mut seen: HashMap<(HostId, HostId, u64), u32> = HashMap::new();
        for (dst, ds) in self.delivered.iter().enumerate() {
            for d in ds {
                *seen.entry((d.src, dst as HostId, d.key)).or_default() += 1;
            }
        }
        for e in expected {
            assert_eq!(seen.get(e), Some(&1), "message {e:?} delivered {seen:?}");
        }
        assert_eq!(seen.len(), expected.len(), "unexpected deliveries {seen:?}");
        for h in &self.hosts {
            assert_eq!(h.active_flows(), 0);
            assert_eq!(h.incomplete_incoming(), 0);
            assert!(!h.has_grantable_incoming());
            assert_eq!(h.next_timeout(), None);
        }
    }

    fn data_sent(&self) -> impl Iterator<Item = &SimPacket<PfBody>> {
        self.log
            .iter()
            .map(|(_, p)| p)
            .filter(|p| matches!(p.body, PfBody::Data { .. }))
    }
}

#[test]
fn small_and_large_messages_are_delivered_once() {
    let mut w = Wire::new(2, &PFabric::default());
    let a = w.start(0, 1, 100);
    let b = w.start(0, 1, 100 * mp());
    assert!(w.run(1_000_000_000_000));
    w.check_all_delivered(&[(0, 1, a), (0, 1, b)]);
    assert_eq!(w.data_sent().count(), 101);
    assert_eq!(total(&w.hosts, "retransmitted_packets"), 0);
    assert_eq!(total(&w.hosts, "timeouts"), 0);
    assert_eq!(counter(&w.hosts[1], "acks_sent"), 101);
    assert_eq!(counter(&w.hosts[0], "messages_acked"), 2);
    let bytes: u64 = w.data_sent().map(|p| p.meta.payload_bytes as u64).sum();
    assert_eq!(bytes, 101 * mp() - mp() + 100);
    for p in w.data_sent() {
        let PfBody::Data { len, .. } = p.body else {
            unreachable!()
        };
        assert_eq!(p.meta.payload_bytes, len);
        assert_eq!(p.meta.wire_bytes, Packetization::default().data_frame(len));
        assert_eq!(p.meta.priority, 0);
        assert!(!p.meta.retransmit);
    }
}

#[test]
fn zero_byte_message_sends_one_empty_packet() {
    let mut w = Wire::new(2, &PFabric::default());
    let k = w.start(0, 1, 0);
    assert!(w.run(1_000_000_000_000));
    w.check_all_delivered(&[(0, 1, k)]);
    let data: Vec<_> = w.data_sent().collect();
    assert_eq!(data.len(), 1);
    assert_eq!(data[0].meta.payload_bytes, 0);
    assert_eq!(data[0].meta.rank, 1);
}

fn mixed_traffic(w: &mut Wire) -> Vec<(HostId, HostId, u64)> {
    let mut expected = Vec::new();
    let plan: [(HostId, HostId, u64); 11] = [
        (0, 1, 0),
        (0, 1, 1),
        (0, 1, mp()),
        (0, 1, mp() + 1),
        (0, 1, 50_000),
        (0, 1, 300_000),
        (2, 1, 200_000),
        (2, 1, 10),
        (1, 0, 100_000),
        (1, 2, 3_000),
        (2, 0, 64 * mp() + 7),
    ];
    for (src, dst, size) in plan {
        let k = w.start(src, dst, size);
        expected.push((src, dst, k));
    }
    expected
}

#[test]
fn every_fifth_data_packet_dropped() {
    let mut w = Wire::new(3, &PFabric::default());
    let mut n = 0u64;
    w.drop = Box::new(move |_, p| {
        if matches!(p.body, PfBody::Data { .. }) {
            n += 1;
            n % 5 == 0
        } else {
            false
        }
    });
    let expected = mixed_traffic(&mut w);
    assert!(w.run(10_000_000_000_000));
    w.check_all_delivered(&expected);
    assert!(w.dropped > 0);
    assert!(total(&w.hosts, "retransmitted_packets") > 0);
    assert!(total(&w.hosts, "timeouts") > 0);
    let retx = w.data_sent().filter(|p| p.meta.retransmit).count() as u64;
    assert_eq!(retx, total(&w.hosts, "retransmitted_packets"));
}

#[test]
fn random_loss_of_any_packet() {
    for seed in 0..5 {
        let mut w = Wire::new(3, &PFabric::default());
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        w.drop = Box::new(move |_, _| rng.gen_bool(0.15));
        let expected = mixed_traffic(&mut w);
        assert!(w.run(10_000_000_000_000));
        w.check_all_delivered(&expected);
        assert!(total(&w.hosts, "retransmitted_packets") > 0);
        // Lost ACKs make the sender resend packets that had arrived.
        assert!(total(&w.hosts, "duplicate_packets_received") > 0);
    }
}

#[test]
fn blackout_leads_to_probe_mode_then_recovery() {
    let mut w = Wire::new(2, &PFabric::default());
    // Nothing gets through for 300 µs (more than 5 RTOs of 24 µs).
    w.drop = Box::new(|now, _| now < 300_000_000);
    let a = w.start(0, 1, 20 * mp());
    let b = w.start(0, 1, 500);
    assert!(w.run(10_000_000_000_000));
    w.check_all_delivered(&[(0, 1, a), (0, 1, b)]);
    let h = &w.hosts[0];
    assert!(counter(h, "timeouts") >= 5);
    assert!(counter(h, "probes_sent") > 0);
    assert!(counter(&w.hosts[1], "probe_acks_sent") > 0);
    // While probing a flow sends no data: one probe per RTO.
    let rto = 3 * env().rtt;
    let probes: Vec<Time> = w
        .log
        .iter()
        .filter(|(_, p)| matches!(p.body, PfBody::Probe { key } if key == a))
        .map(|&(t, _)| t)
        .collect();
    assert!(!probes.is_empty());
    for pair in probes.windows(2) {
        assert!(pair[1] - pair[0] >= rto);
    }
    let p = w
        .log
        .iter()
        .find(|(_, p)| matches!(p.body, PfBody::Probe { .. }))
        .unwrap();
    assert_eq!(p.1.meta.payload_bytes, 0);
    assert_eq!(
        p.1.meta.wire_bytes,
        Packetization::default().data_frame(PROBE_PAYLOAD_BYTES)
    );
}

fn data_key(p: &SimPacket<PfBody>) -> u64 {
    match p.body {
        PfBody::Data { key, .. } => key,
        ref b => panic!("expected data, got {b:?}"),
    }
}

#[test]
fn sender_sends_shortest_message_first() {
    let mut h = host(0);
    let long = h.start_message(0, 1, 100 * mp()).unwrap();
    let short = h.start_message(0, 1, 3 * mp()).unwrap();
    let keys: Vec<u64> = (0..5)
        .map(|_| data_key(&h.poll_transmit(0).unwrap()))
        .collect();
    assert_eq!(keys, [short, short, short, long, long]);

    // A short message that shows up later overtakes the long one.
    let mut h = host(0);
    let long = h.start_message(0, 2, 100 * mp()).unwrap();
    assert_eq!(data_key(&h.poll_transmit(0).unwrap()), long);
    assert_eq!(data_key(&h.poll_transmit(0).unwrap()), long);
    let short = h.start_message(10, 2, 2 * mp()).unwrap();
    assert_eq!(data_key(&h.poll_transmit(10).unwrap()), short);
    assert_eq!(data_key(&h.poll_transmit(10).unwrap()), short);
    assert_eq!(data_key(&h.poll_transmit(10).unwrap()), long);
}

#[test]
fn ranks_shrink_as_a_message_progresses() {
    let mut w = Wire::new(2, &PFabric::default());
    let size = 100 * mp() + 5;
    let k = w.start(0, 1, size);
    assert!(w.run(1_000_000_000_000));
    w.check_all_delivered(&[(0, 1, k)]);
    let ranks: Vec<u64> = w.data_sent().map(|p| p.meta.rank).collect();
    assert_eq!(ranks.len(), 101);
    assert_eq!(ranks[0], size);
    assert!(ranks.windows(2).all(|r| r[1] <= r[0]), "{ranks:?}");
    assert!(*ranks.last().unwrap() < 10 * mp());
    // Remaining unacknowledged bytes: packets sent before the first ACK
    // returns carry the full size, later ones one packet less per ACK.
    let first_ack = w
        .log
        .iter()
        .find(|(_, p)| matches!(p.body, PfBody::Ack { .. }))
        .unwrap()
        .0;
    let before = w
        .log
        .iter()
        .filter(|(t, p)| *t < first_ack + w.delay && matches!(p.body, PfBody::Data { .. }))
        .count();
    assert!(before >= 2);
    assert!(ranks[..before].iter().all(|&r| r == size));
    assert!(ranks[before + 1] < size);
}

#[test]
fn acks_have_rank_zero_and_go_before_data() {
    let mut sender = host(0);
    let mut receiver = host(1);
    let k = sender.start_message(0, 1, 2 * mp()).unwrap();
    let own = receiver.start_message(0, 0, 10 * mp()).unwrap();
    let d = sender.poll_transmit(0).unwrap();
    receiver.receive(100, d);
    let ack = receiver.poll_transmit(100).unwrap();
    assert_eq!(ack.body, PfBody::Ack { key: k, seq: 0 });
    assert_eq!(ack.meta.rank, 0);
    assert_eq!(ack.meta.src, 1);
    assert_eq!(ack.meta.dst, 0);
    assert_eq!(ack.meta.payload_bytes, 0);
    assert_eq!(
        ack.meta.wire_bytes,
        Packetization::default().frame_bytes(ACK_HEADER_BYTES)
    );
    assert_eq!(data_key(&receiver.poll_transmit(100).unwrap()), own);
    assert!(receiver.has_grantable_incoming());

    // Duplicates are acknowledged too, but counted and not delivered.
    let d2 = sender.poll_transmit(0).unwrap();
    receiver.receive(200, d2.clone());
    assert_eq!(
        receiver.poll_delivered(),
        Some(Delivered { src: 0, key: k })
    );
    assert!(!receiver.has_grantable_incoming());
    receiver.receive(300, d2);
    assert_eq!(receiver.poll_delivered(), None);
    assert_eq!(counter(&receiver, "duplicate_packets_received"), 1);
    assert_eq!(counter(&receiver, "acks_sent"), 3);
    for _ in 0..2 {
        let p = receiver.poll_transmit(300).unwrap();
        assert!(matches!(p.body, PfBody::Ack { key, seq: 1 } if key == k));
        assert_eq!(p.meta.rank, 0);
    }
}

#[test]
fn late_duplicate_of_single_packet_message_is_not_redelivered() {
    let mut sender = host(0);
    let mut receiver = host(1);
    let mut keys = Vec::new();
    let mut first = Vec::new();
    for _ in 0..3 {
        keys.push(sender.start_message(0, 1, 10).unwrap());
        first.push(sender.poll_transmit(0).unwrap());
    }
    // Out of order: the watermark waits for message index 0.
    for i in [2, 1, 0, 2, 1] {
        receiver.receive(1, first[i].clone());
    }
    let got: Vec<u64> = std::iter::from_fn(|| receiver.poll_delivered())
        .map(|d| d.key)
        .collect();
    assert_eq!(got, [keys[2], keys[1], keys[0]]);
    assert_eq!(counter(&receiver, "duplicate_packets_received"), 2);
    let done = &receiver.completed[&0];
    assert_eq!(done.below, 3);
    assert!(done.above.is_empty());
}

#[test]
fn window_limits_packets_in_flight() {
    let mut h = host(0);
    let k = h.start_message(0, 1, 100 * mp()).unwrap();
    let mut sent = Vec::new();
    while let Some(p) = h.poll_transmit(0) {
        sent.push(p);
    }
    let bdp = PFabricConfig::bdp_packets(&env());
    assert_eq!(bdp, 9);
    assert_eq!(sent.len(), bdp as usize);
    // Two ACKs open room for two more (the window is already at its
    // one-BDP cap).
    h.receive(
        5,
        control_packet(&h.pk, 1, 0, 0, 32, 0, PfBody::Ack { key: k, seq: 0 }),
    );
    h.receive(
        5,
        control_packet(&h.pk, 1, 0, 0, 32, 0, PfBody::Ack { key: k, seq: 1 }),
    );
    let more = std::iter::from_fn(|| h.poll_transmit(5)).count();
    assert_eq!(more, 2);

    let cfg = PFabricConfig {
        initial_window_packets: Some(3),
        ..PFabricConfig::default()
    };
    let mut h = PFabric::new(cfg).build_host(0, &env()).unwrap();
    let k = h.start_message(0, 1, 100 * mp()).unwrap();
    assert_eq!(std::iter::from_fn(|| h.poll_transmit(0)).count(), 3);
    // Below one BDP the window grows by one per ACK (slow start).
    h.receive(
        5,
        control_packet(&h.pk, 1, 0, 0, 32, 0, PfBody::Ack { key: k, seq: 0 }),
    );
    assert_eq!(std::iter::from_fn(|| h.poll_transmit(5)).count(), 2);
}

#[test]
fn timeout_resends_oldest_unacknowledged_packet() {
    let mut h = host(0);
    let k = h.start_message(1_000, 1, 20 * mp()).unwrap();
    let first: Vec<_> = std::iter::from_fn(|| h.poll_transmit(1_000)).collect();
    assert_eq!(first.len(), 9);
    let rto = 3 * env().rtt;
    assert_eq!(h.next_timeout(), Some(1_000 + rto));
    // Packet 0 is acknowledged: progress rearms the timer.
    h.receive(
        2_000,
        control_packet(&h.pk, 1, 0, 0, 32, 0, PfBody::Ack { key: k, seq: 0 }),
    );
    assert_eq!(h.next_timeout(), Some(2_000 + rto));
    let p = h.poll_transmit(2_000).unwrap();
    assert!(matches!(p.body, PfBody::Data { seq: 9, .. }));
    // A spurious early call does nothing.
    h.on_timeout(2_000 + rto - 1);
    assert_eq!(counter(&h, "timeouts"), 0);
    assert!(h.poll_transmit(2_000 + rto - 1).is_none());
    // A late one resends packet 1 only (window 1).
    let late = 2_000 + rto + 500;
    h.on_timeout(late);
    assert_eq!(counter(&h, "timeouts"), 1);
    let r = h.poll_transmit(late).unwrap();
    assert!(matches!(r.body, PfBody::Data { key, seq: 1, .. } if key == k));
    assert!(r.meta.retransmit);
    assert_eq!(r.meta.rank, 19 * mp());
    assert!(h.poll_transmit(late).is_none());
    assert_eq!(h.next_timeout(), Some(late + rto));
    assert_eq!(counter(&h, "retransmitted_packets"), 1);
    // Its ACK lets two more go (slow start): the next lost ones.
    h.receive(
        late + 10,
        control_packet(&h.pk, 1, 0, 0, 32, 0, PfBody::Ack { key: k, seq: 1 }),
    );
    let seqs: Vec<u32> = std::iter::from_fn(|| h.poll_transmit(late + 10))
        .map(|p| match p.body {
            PfBody::Data { seq, .. } => seq,
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(seqs, [2, 3]);
}

#[test]
fn config_errors() {
    let bad = [
        PFabricConfig {
            rto_rtts: 0.0,
            ..Default::default()
        },
        PFabricConfig {
            rto_rtts: -1.0,
            ..Default::default()
        },
        PFabricConfig {
            rto_rtts: f64::NAN,
            ..Default::default()
        },
        PFabricConfig {
            rto_rtts: f64::INFINITY,
            ..Default::default()
        },
        PFabricConfig {
            initial_window_packets: Some(0),
            ..Default::default()
        },
        PFabricConfig {
            probe_after_timeouts: 0,
            ..Default::default()
        },
        PFabricConfig {
            buffer_bytes: Some(1000),
            ..Default::default()
        },
    ];
    for cfg in bad {
        match PFabric::new(cfg.clone()).build_host(0, &env()) {
            Err(TransportError::Config { protocol, reason }) => {
                assert_eq!(protocol, "pfabric");
                assert!(!reason.is_empty());
            }
            other => panic!("{cfg:?} gave {other:?}"),
        }
    }
    let mut h = host(0);
    assert!(matches!(
        h.start_message(0, 3, 10),
        Err(TransportError::Message { .. })
    ));
}

#[test]
fn config_defaults_and_parsing() {
    let p = PFabric::default();
    assert_eq!(p.name(), "pfabric");
    assert_eq!(p.queue_discipline(), QueueDiscipline::Rank);
    let pk = Packetization::default();
    // 2 × 10 000 bytes = 15 full packets of 1424 bytes.
    assert_eq!(
        p.default_buffer_bytes(&env()),
        Some(15 * pk.max_frame() as u64)
    );
    let cfg: PFabricConfig = serde_json::from_str("{}").unwrap();
    assert_eq!(cfg, PFabricConfig::default());
    let cfg: PFabricConfig =
        serde_json::from_str(r#"{"rto_rtts": 2.5, "buffer_bytes": 50000}"#).unwrap();
    assert_eq!(cfg.rto_rtts, 2.5);
    assert_eq!(PFabric::new(cfg).default_buffer_bytes(&env()), Some(50_000));
    assert!(serde_json::from_str::<PFabricConfig>(r#"{"rto": 2}"#).is_err());
    let names: Vec<&str> = host(0).counters().iter().map(|c| c.0).collect();
    for n in [
        "data_packets_sent",
        "retransmitted_packets",
        "timeouts",
        "acks_sent",
        "duplicate_packets_received",
    ] {
        assert!(names.contains(&n));
    }
}

#[test]
fn many_hosts_many_messages_with_loss() {
    let proto = PFabric::default();
    let mut w = Wire::new(3, &proto);
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut drop_rng = ChaCha8Rng::seed_from_u64(8);
    w.drop = Box::new(move |_, _| drop_rng.gen_bool(0.05));
    let mut expected = Vec::new();
    for _ in 0..300 {
        let src = rng.gen_range(0..3);
        let dst = (src + rng.gen_range(1..3)) % 3;
        let size = match rng.gen_range(0..4) {
            0 => rng.gen_range(0..200),
            1 => rng.gen_range(0..5_000),
            2 => rng.gen_range(0..100_000),
            _ => rng.gen_range(0..1_000_000),
        };
        expected.push((src, dst, w.start(src, dst, size)));
    }
    assert!(w.run(100_000_000_000_000));
    w.check_all_delivered(&expected);
}
