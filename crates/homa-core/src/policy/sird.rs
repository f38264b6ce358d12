//! SIRD's policies (seed 001 §4; notes in docs/protocol-notes.md, "SIRD"):
//! informed overcommitment at the receiver, credit spending with a fair
//! share at the sender.
//!
//! Receiver (Algorithm 1): scheduled credit is handed out one packet at a
//! time, SRPT among the senders that may have more, while the credit
//! outstanding over all senders stays within B and each sender's within
//! `min(senderBkt, netBkt)` — two AIMD loops per sender, fed by the
//! sender's `csn` bit and by ECN marks. Credit can be paced to the
//! downlink's rate. Unscheduled bytes: `min(BDP, size)` for messages up
//! to UnschT, none for larger ones (they announce themselves with an empty
//! DATA packet, the credit request).
//!
//! Sender (Algorithm 2): spends credit SRPT-first, but a fair share of its
//! packets goes round-robin across receivers; it sets `csn` on every DATA
//! packet while the credit it holds over all receivers is at least SThr.

use super::aimd::{Aimd, AimdParams};
use super::{
    DataSignal, GrantContext, GrantDecision, GrantKind, InView, OutView, ReceiverPolicy,
    SenderPolicy,
};
use crate::keyed::{AddrKey, KeyedMap, KeyedSet};
use crate::pacer::Pacer;
use crate::srpt::{Key, PeerSrptQueue};
use crate::{Config, Nanos, RpcId};
use homa_wire::{DATA_FLAG_CSN, DATA_FLAG_SIRD, DATA_HEADER_LEN};
use std::collections::VecDeque;
use std::net::SocketAddr;

/// Credit may run this many packets' wire time ahead of the downlink when
/// paced (a timer that fires a little late does not lose the link).
const CREDIT_AHEAD_PACKETS: u64 = 2;

/// Unscheduled bytes of a `length`-byte message under SIRD's rule.
pub fn sird_unscheduled(config: &Config, length: u32) -> u32 {
    if length <= config.sird.unsched_threshold {
        length.min(config.unsched_bytes)
    } else {
        0
    }
}

/// What the receiver knows of one incoming message.
#[derive(Debug, Clone, Copy)]
struct Msg {
    view: InView,
    key: Key,
    /// Bytes the sender could send before any credit.
    unsched: u32,
}

impl Msg {
    /// Credit given to this message that has not arrived yet.
    fn credit_out(&self) -> u32 {
        self.view
            .granted
            .saturating_sub(self.view.received.max(self.unsched))
    }
}

/// Per-sender state at the receiver.
#[derive(Debug, Clone, Copy)]
struct Sender {
    /// Credit outstanding to this sender (sb_i).
    credit: u64,
    /// senderBkt_i: reacts to `csn`.
    sender_bkt: Aimd,
    /// netBkt_i: reacts to ECN CE.
    net_bkt: Aimd,
    /// Messages of this sender the policy holds.
    messages: u32,
}

impl Sender {
    fn bucket(&self) -> u64 {
        self.sender_bkt.budget().min(self.net_bkt.budget()) as u64
    }
}

/// SIRD's receiver: informed overcommitment.
#[derive(Debug)]
pub struct SirdReceiver {
    config: Config,
    aimd: AimdParams,
    queue: PeerSrptQueue,
    messages: KeyedMap<RpcId, Msg>,
    senders: KeyedMap<AddrKey, Sender>,
    /// Credit outstanding over all senders (b).
    credit: u64,
    pacer: Option<Pacer>,
    wakeup: Option<Nanos>,
}

impl SirdReceiver {
    /// The receiver policy for `config` (whose `sird` section it uses).
    pub fn new(config: &Config) -> SirdReceiver {
        let payload = config.max_payload().max(1);
        let s = &config.sird;
        // Whatever the configuration says, a sender's bucket holds at least
        // one full packet: credit goes out a packet at a time, so a smaller
        // floor (a `sird` section derived for a smaller MTU than the
        // driver's) would stall a sender whose bucket shrank to it.
        let min = s.sender_bucket_min.max(payload);
        let pacer = (s.pace_credit && config.link_mbps > 0).then(|| {
            let p = Pacer::new(config.link_mbps, 0, 0);
            let ahead = CREDIT_AHEAD_PACKETS * p.wire_time(config.mtu as usize);
            Pacer::new(config.link_mbps, ahead, 0)
        });
        SirdReceiver {
            aimd: AimdParams {
                min,
                max: s.sender_bucket_max.max(min),
                step: payload,
                gain_permille: s.dctcp_gain,
            },
            config: config.clone(),
            queue: PeerSrptQueue::default(),
            messages: KeyedMap::default(),
            senders: KeyedMap::default(),
            credit: 0,
            pacer,
            wakeup: None,
        }
    }

    /// Credit outstanding over all senders (bytes).
    pub fn credit_outstanding(&self) -> u64 {
        self.credit
    }

    /// The bucket of `peer` now (min of its two loops), if it is known.
    pub fn sender_bucket(&self, peer: SocketAddr) -> Option<u64> {
        self.senders.get(&AddrKey(peer)).map(Sender::bucket)
    }

    /// Credit outstanding to `peer`, if it is known.
    pub fn sender_credit(&self, peer: SocketAddr) -> Option<u64> {
        self.senders.get(&AddrKey(peer)).map(|s| s.credit)
    }

    /// IP bytes of a packet carrying `payload` bytes (for pacing).
    fn wire_bytes(&self, payload: u32) -> usize {
        payload as usize + DATA_HEADER_LEN + self.config.lower_header_bytes as usize
    }

    fn sender_mut(&mut self, peer: SocketAddr) -> &mut Sender {
        let p = self.aimd;
        self.senders.entry(AddrKey(peer)).or_insert_with(|| Sender {
            credit: 0,
            sender_bkt: Aimd::new(&p),
            net_bkt: Aimd::new(&p),
            messages: 0,
        })
    }

    /// Replaces `id`'s credit in the totals by `new` (bytes).
    fn account(&mut self, peer: SocketAddr, old: u32, new: u32) {
        self.credit = self.credit + new as u64 - old as u64;
        let s = self.sender_mut(peer);
        s.credit = s.credit + new as u64 - old as u64;
    }
}

impl ReceiverPolicy for SirdReceiver {
    fn unscheduled_allowance(&self, length: u32) -> u32 {
        // Whole packets, as a sender rounds them.
        let payload = self.config.max_payload().max(1);
        let u = sird_unscheduled(&self.config, length);
        u.div_ceil(payload).saturating_mul(payload).min(length)
    }

    fn update(&mut self, _now: Nanos, m: &InView) {
        let old = self.messages.get(&m.id).copied();
        let unsched = old.map_or(m.granted, |o| o.unsched);
        let msg = Msg {
            view: *m,
            key: (m.length - m.received, m.seq),
            unsched,
        };
        let old_credit = old.map_or(0, |o| o.credit_out());
        if old.is_none() {
            self.sender_mut(m.id.peer).messages += 1;
        }
        self.account(m.id.peer, old_credit, msg.credit_out());
        if m.granted >= m.length {
            // Nothing more to credit; its outstanding credit stays counted
            // until it arrives or the message goes.
            self.queue.refile(m.id, old.map(|o| o.key), None);
            self.messages.insert(m.id, Msg { key: (0, 0), ..msg });
            // (Keyed out of the queue: `key` no longer matters.)
            return;
        }
        let old_key = old
            .filter(|o| o.view.granted < o.view.length)
            .map(|o| o.key);
        self.queue.refile(m.id, old_key, Some(msg.key));
        self.messages.insert(m.id, msg);
    }

    fn remove(&mut self, id: RpcId) {
        let Some(old) = self.messages.remove(&id) else {
            return;
        };
        if old.view.granted < old.view.length {
            self.queue.remove(id, old.key);
        }
        self.account(id.peer, old.credit_out(), 0);
        if let Some(s) = self.senders.get_mut(&AddrKey(id.peer)) {
            s.messages -= 1;
            if s.messages == 0 {
                // (A sender's loops live while it has messages here; one
                // that comes back starts at the ceiling again.)
                self.senders.remove(&AddrKey(id.peer));
            }
        }
    }

    fn on_data(&mut self, _now: Nanos, signal: &DataSignal) {
        let p = self.aimd;
        if let Some(s) = self.senders.get_mut(&AddrKey(signal.id.peer)) {
            s.sender_bkt.on_bytes(&p, signal.bytes, signal.csn);
            s.net_bkt.on_bytes(&p, signal.bytes, signal.ce);
        }
    }

    fn schedule(&mut self, now: Nanos, _ctx: &GrantContext, out: &mut Vec<GrantDecision>) {
        self.wakeup = None;
        let payload = self.config.max_payload().max(1);
        // B holds at least one packet for the same reason.
        let b_max = (self.config.sird.bucket as u64).max(payload as u64);
        let low = 0;
        loop {
            if self.credit >= b_max {
                return;
            }
            // SRPT over the senders that may have more (each sender's best
            // message). Senders at their bucket are skipped; there are at
            // most B / sender_bucket_min of them.
            let pick = self.queue.iter_heads().find(|id| {
                let m = &self.messages[id];
                let c = (m.view.length - m.view.granted).min(payload) as u64;
                let s = &self.senders[&AddrKey(id.peer)];
                self.credit + c <= b_max && s.credit + c <= s.bucket()
            });
            let Some(id) = pick else {
                return;
            };
            let m = self.messages[&id];
            let c = (m.view.length - m.view.granted).min(payload);
            let bytes = self.wire_bytes(c);
            if let Some(pacer) = &mut self.pacer {
                if !pacer.may_send(now, bytes) {
                    self.wakeup = Some(pacer.next_send_time(now));
                    return;
                }
                pacer.on_send(now, bytes);
            }
            let mut view = m.view;
            view.granted += c;
            out.push(GrantDecision {
                id,
                offset: view.granted,
                priority: low,
                kind: GrantKind::Scheduled,
            });
            // Our own view moves now (the endpoint confirms it with
            // `update` after applying the grant).
            self.update(now, &view);
        }
    }

    fn has_candidates(&self) -> bool {
        !self.queue.is_empty()
    }

    fn wakeup(&self) -> Option<Nanos> {
        // A pacing deadline is stale once nothing waits for credit (found
        // by the hostile-input property test: the timer kept firing at the
        // same instant after the last message went away).
        self.wakeup.filter(|_| self.has_candidates())
    }
}

/// SIRD's sender: SRPT with a fair share across receivers, and `csn`.
#[derive(Debug)]
pub struct SirdSender {
    fair_share: u64,
    sender_threshold: u64,
    queue: PeerSrptQueue,
    keys: KeyedMap<RpcId, Key>,
    /// Receivers in round-robin order (peers without messages are dropped
    /// when their turn comes), and who is in it.
    rotation: VecDeque<SocketAddr>,
    in_rotation: KeyedSet<AddrKey>,
    packets: u64,
    fair_packets: u64,
}

impl SirdSender {
    /// The sender policy for `config`.
    pub fn new(config: &Config) -> SirdSender {
        SirdSender {
            fair_share: config.sird.fair_share as u64,
            // (u32::MAX is the paper's SThr = ∞: never set.)
            sender_threshold: match config.sird.sender_threshold {
                u32::MAX => u64::MAX,
                t => t as u64,
            },
            queue: PeerSrptQueue::default(),
            keys: KeyedMap::default(),
            rotation: VecDeque::new(),
            in_rotation: KeyedSet::default(),
            packets: 0,
            fair_packets: 0,
        }
    }

    /// The next receiver in the rotation that has a message, moved to the
    /// back. Amortised O(1): each receiver is dropped at most once per
    /// time it was added.
    fn next_in_rotation(&mut self) -> Option<RpcId> {
        while let Some(peer) = self.rotation.pop_front() {
            if let Some(id) = self.queue.best_of(peer) {
                self.rotation.push_back(peer);
                return Some(id);
            }
            self.in_rotation.remove(&AddrKey(peer));
        }
        None
    }
}

impl SenderPolicy for SirdSender {
    fn unscheduled_bytes(
        &self,
        config: &Config,
        _peer: SocketAddr,
        length: u32,
        _incast: bool,
    ) -> u32 {
        let payload = config.max_payload().max(1);
        sird_unscheduled(config, length)
            .div_ceil(payload)
            .saturating_mul(payload)
            .min(length)
    }

    fn update(&mut self, m: &OutView) {
        let key = (m.bytes_left, m.seq);
        let old = self.keys.insert(m.id, key);
        if self.in_rotation.insert(AddrKey(m.id.peer)) {
            self.rotation.push_back(m.id.peer);
        }
        self.queue.refile(m.id, old, Some(key));
    }

    fn remove(&mut self, id: RpcId) {
        if let Some(k) = self.keys.remove(&id) {
            self.queue.remove(id, k);
        }
    }

    fn next(&mut self, _now: Nanos) -> Option<RpcId> {
        // Of every 1,000 packets, `fair_share` go round-robin, spread evenly.
        let (turn, f) = (self.packets % 1000, self.fair_share);
        let fair = (turn + 1) * f / 1000 > turn * f / 1000;
        let srpt = self.queue.iter_heads().next()?;
        if fair {
            let id = self.next_in_rotation().unwrap_or(srpt);
            if id != srpt {
                self.fair_packets += 1;
            }
            return Some(id);
        }
        Some(srpt)
    }

    fn peek(&self) -> Option<RpcId> {
        self.queue.iter_heads().next()
    }

    fn on_data_sent(&mut self) {
        self.packets += 1;
    }

    fn out_of_order_packets(&self) -> u64 {
        self.fair_packets
    }

    fn data_flags(&self, unspent_credit: u64) -> u8 {
        if unspent_credit >= self.sender_threshold {
            DATA_FLAG_SIRD | DATA_FLAG_CSN
        } else {
            DATA_FLAG_SIRD
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn config() -> Config {
        let mut c = Config {
            design: crate::Design::Sird,
            ..Config::default()
        };
        c.sird.pace_credit = false;
        c
    }

    fn peer(i: u8) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, i], 4000))
    }

    fn view(p: u8, id: u64, length: u32, received: u32, granted: u32, seq: u64) -> InView {
        InView {
            id: RpcId { peer: peer(p), id },
            length,
            received,
            granted,
            seq,
            grant_window: None,
        }
    }

    fn schedule(r: &mut SirdReceiver, now: Nanos) -> Vec<GrantDecision> {
        let ctx = GrantContext {
            outstanding: 0,
            sched_levels: 1,
        };
        let mut out = Vec::new();
        r.schedule(now, &ctx, &mut out);
        out
    }

    /// A `sird` section derived for smaller packets than the driver sends
    /// (bucket floor and B below one packet) still credits a full packet,
    /// so a sender whose bucket shrank to its floor is never stalled.
    #[test]
    fn buckets_hold_at_least_one_packet_whatever_the_config() {
        let mut c = config();
        let p = c.max_payload();
        c.sird.sender_bucket_min = 100;
        c.sird.bucket = 200;
        let mut r = SirdReceiver::new(&c);
        r.update(0, &view(1, 2, 100_000, 0, 0, 1));
        let g = schedule(&mut r, 0);
        assert_eq!(g.len(), 1, "one packet of credit: {g:?}");
        assert_eq!(g[0].offset, p);
        assert!(r.sender_bucket(peer(1)).unwrap() >= p as u64);
        // Marked bytes shrink the bucket to its floor, which is one packet.
        for _ in 0..200 {
            r.on_data(
                0,
                &DataSignal {
                    id: RpcId {
                        peer: peer(1),
                        id: 2,
                    },
                    bytes: p,
                    new_bytes: p,
                    csn: true,
                    ce: true,
                },
            );
        }
        assert_eq!(r.sender_bucket(peer(1)), Some(p as u64));
    }

    /// A pacing deadline goes away with the last message waiting for
    /// credit: the endpoint does not consult a policy without candidates,
    /// so a stale deadline would fire again and again at the same instant.
    #[test]
    fn no_wakeup_once_nothing_waits_for_credit() {
        let mut c = config();
        c.sird.pace_credit = true;
        c.link_mbps = 10_000;
        let mut r = SirdReceiver::new(&c);
        let m = view(1, 2, 1_000_000, 0, 0, 1);
        r.update(0, &m);
        let mut granted = 0;
        for g in schedule(&mut r, 0) {
            granted = g.offset;
        }
        assert!(granted > 0);
        let later = r.wakeup().expect("paced: more credit later");
        assert!(later > 0);
        r.remove(m.id);
        assert_eq!(r.wakeup(), None);
    }

    /// Random arrivals, credit and completions: the credit outstanding
    /// never exceeds B in total nor a sender's bucket (plus nothing: credit
    /// is given only where a whole grant fits).
    #[test]
    fn credit_never_exceeds_b_or_a_senders_bucket() {
        let c = config();
        let b = c.sird.bucket as u64;
        let mut r = SirdReceiver::new(&c);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let mut msgs: Vec<InView> = Vec::new();
        for step in 0..20_000u64 {
            match rng.gen_range(0..10) {
                0 if msgs.len() < 40 => {
                    let m = view(
                        rng.gen_range(1..6),
                        step,
                        rng.gen_range(1..400_000),
                        0,
                        0,
                        step,
                    );
                    r.update(step, &m);
                    msgs.push(m);
                }
                1..=6 if !msgs.is_empty() => {
                    // Some credited bytes of a message arrive.
                    let i = rng.gen_range(0..msgs.len());
                    let m = &mut msgs[i];
                    let add = rng
                        .gen_range(0..=3_000)
                        .min(m.granted.saturating_sub(m.received));
                    m.received += add;
                    let signal = DataSignal {
                        id: m.id,
                        bytes: add,
                        new_bytes: add,
                        csn: rng.gen_bool(0.3),
                        ce: rng.gen_bool(0.1),
                    };
                    r.on_data(step, &signal);
                    if m.received >= m.length {
                        r.remove(m.id);
                        msgs.swap_remove(i);
                    } else {
                        r.update(step, m);
                    }
                }
                _ => {
                    let before: Vec<_> = (1..6).map(|p| r.sender_credit(peer(p))).collect();
                    for g in schedule(&mut r, step) {
                        let m = msgs.iter_mut().find(|m| m.id == g.id).unwrap();
                        assert!(g.offset > m.granted && g.offset <= m.length);
                        m.granted = g.offset;
                        r.update(step, m);
                    }
                    // Scheduling never lifts a sender's credit above its
                    // bucket (a bucket that shrank below what was already
                    // out just gets nothing new).
                    for (p, before) in (1..6).zip(before) {
                        if let (Some(credit), Some(bucket)) =
                            (r.sender_credit(peer(p)), r.sender_bucket(peer(p)))
                        {
                            assert!(
                                credit <= bucket.max(before.unwrap_or(0)),
                                "step {step}: sender {p} has {credit} B of credit, bucket {bucket}"
                            );
                        }
                    }
                }
            }
            let total: u64 = msgs
                .iter()
                .map(|m| m.granted.saturating_sub(m.received) as u64)
                .sum();
            assert_eq!(r.credit_outstanding(), total, "step {step}");
            assert!(total <= b, "step {step}: {total} B credited > B = {b}");
        }
    }

    /// Credit goes to the shortest message among the senders that may have
    /// more, one packet at a time.
    #[test]
    fn credit_goes_srpt_across_senders() {
        let c = config();
        let mut r = SirdReceiver::new(&c);
        r.update(0, &view(1, 2, 500_000, 0, 0, 1));
        r.update(0, &view(2, 4, 100_000, 0, 0, 2));
        r.update(0, &view(3, 6, 300_000, 0, 0, 3));
        let out = schedule(&mut r, 0);
        let p = c.max_payload();
        // Sender 2 (shortest) up to its bucket, then sender 3, until B.
        let to = |i: u64| out.iter().filter(|g| g.id.id == i).count() as u32;
        // (Only whole packets of credit that fit the bucket.)
        assert_eq!(to(4), c.sird.sender_bucket_max / p);
        assert!(to(6) > 0);
        let first_to_6 = out.iter().position(|g| g.id.id == 6).unwrap();
        assert!(out[..first_to_6].iter().all(|g| g.id.id == 4));
        assert!(out.iter().all(|g| g.priority == 0));
        assert!(r.credit_outstanding() <= c.sird.bucket as u64);
    }

    /// A sender that reports congestion (csn) gets a smaller bucket, and the
    /// global budget it frees goes to the other sender: informed
    /// overcommitment.
    #[test]
    fn a_congested_sender_gets_less_credit_and_others_more() {
        let c = config();
        let mut r = SirdReceiver::new(&c);
        let mut a = view(1, 2, 10_000_000, 0, 0, 1);
        let mut b = view(2, 4, 20_000_000, 0, 0, 2);
        r.update(0, &a);
        r.update(0, &b);
        for round in 0..400 {
            for g in schedule(&mut r, round) {
                let m = if g.id == a.id { &mut a } else { &mut b };
                m.granted = g.offset;
                r.update(round, m);
            }
            // Both senders deliver all credit they got; A's packets carry csn.
            for (m, csn) in [(&mut a, true), (&mut b, false)] {
                let add = m.granted - m.received;
                m.received = m.granted;
                r.on_data(
                    round,
                    &DataSignal {
                        id: m.id,
                        bytes: add,
                        new_bytes: add,
                        csn,
                        ce: false,
                    },
                );
                r.update(round, m);
            }
        }
        let (ba, bb) = (
            r.sender_bucket(peer(1)).unwrap(),
            r.sender_bucket(peer(2)).unwrap(),
        );
        assert_eq!(
            ba, c.sird.sender_bucket_min as u64,
            "A's bucket at the floor"
        );
        assert_eq!(
            bb, c.sird.sender_bucket_max as u64,
            "B's bucket at the ceiling"
        );
        // In a round now, B gets its whole bucket, A one packet's worth.
        let out = schedule(&mut r, 1_000);
        let to = |id: RpcId| out.iter().filter(|g| g.id == id).count();
        assert!(to(b.id) > 3 * to(a.id), "{} vs {}", to(b.id), to(a.id));
    }

    /// ECN marks shrink the network bucket the same way.
    #[test]
    fn ecn_marks_shrink_the_network_bucket() {
        let c = config();
        let mut r = SirdReceiver::new(&c);
        let m = view(1, 2, 10_000_000, 0, 0, 1);
        r.update(0, &m);
        for i in 0..2_000 {
            r.on_data(
                i,
                &DataSignal {
                    id: m.id,
                    bytes: 1_400,
                    new_bytes: 1_400,
                    csn: false,
                    ce: true,
                },
            );
        }
        assert_eq!(
            r.sender_bucket(peer(1)),
            Some(c.sird.sender_bucket_min as u64)
        );
    }

    /// Half the sender's packets go round-robin across receivers, the rest
    /// to the shortest message.
    #[test]
    fn sender_shares_half_its_packets_fairly_across_receivers() {
        let c = config();
        let mut s = SirdSender::new(&c);
        let short = RpcId {
            peer: peer(1),
            id: 2,
        };
        let long = RpcId {
            peer: peer(2),
            id: 4,
        };
        s.update(&OutView {
            id: short,
            bytes_left: 10_000,
            seq: 1,
        });
        s.update(&OutView {
            id: long,
            bytes_left: 900_000,
            seq: 2,
        });
        let mut picks = Vec::new();
        for _ in 0..1_000 {
            let id = s.next(0).unwrap();
            s.on_data_sent();
            picks.push(id);
        }
        let to_long = picks.iter().filter(|&&i| i == long).count();
        // Round-robin turns alternate between both receivers: 250 of 1,000.
        assert_eq!(to_long, 250, "{to_long}");
        assert_eq!(s.out_of_order_packets(), 250);
        // No fair share: pure SRPT.
        let mut c0 = c.clone();
        c0.sird.fair_share = 0;
        let mut s = SirdSender::new(&c0);
        s.update(&OutView {
            id: short,
            bytes_left: 10_000,
            seq: 1,
        });
        s.update(&OutView {
            id: long,
            bytes_left: 900_000,
            seq: 2,
        });
        assert!((0..100).all(|_| {
            let id = s.next(0);
            s.on_data_sent();
            id == Some(short)
        }));
    }

    /// csn is set exactly when the credit held reaches SThr; SThr = ∞ never.
    #[test]
    fn csn_is_set_at_the_sender_threshold() {
        let c = config();
        let s = SirdSender::new(&c);
        let t = c.sird.sender_threshold as u64;
        assert_eq!(s.data_flags(t - 1), DATA_FLAG_SIRD);
        assert_eq!(s.data_flags(t), DATA_FLAG_SIRD | DATA_FLAG_CSN);
        let mut c2 = c.clone();
        c2.sird.sender_threshold = u32::MAX;
        let s = SirdSender::new(&c2);
        assert_eq!(s.data_flags(u64::MAX / 2), DATA_FLAG_SIRD);
    }

    #[test]
    fn unsch_t_rule() {
        let c = config();
        let r = SirdReceiver::new(&c);
        let p = c.max_payload();
        assert_eq!(r.unscheduled_allowance(100), 100);
        assert_eq!(r.unscheduled_allowance(40_000), 40_000);
        assert_eq!(r.unscheduled_allowance(40_001), 0);
        let mut c2 = c.clone();
        c2.sird.unsched_threshold = 80_000;
        let r2 = SirdReceiver::new(&c2);
        // Up to UnschT: min(BDP, size), in whole packets.
        assert_eq!(r2.unscheduled_allowance(60_000), 40_000u32.div_ceil(p) * p);
    }
}
