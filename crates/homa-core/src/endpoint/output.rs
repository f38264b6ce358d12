//! Packets to send: control packets first, then data in the order the
//! [`crate::policy::SenderPolicy`] chooses.

use super::Endpoint;
use crate::rpc::Phase;
use crate::{Nanos, RpcId};
use bytes::{Bytes, BytesMut};
use homa_wire::{
    AckEntry, CommonHeader, DataHeader, HeaderBuf, PacketType, DATA_FLAG_INCAST, DATA_HEADER_LEN,
};
use std::net::SocketAddr;

/// One packet for the driver to send.
///
/// A DATA packet comes in two parts, the header and the message bytes
/// (a slice of the application's message, not a copy), so that a driver can
/// hand both to the kernel without copying (e.g. two iovecs). The header
/// is held inline ([`HeaderBuf`], at most [`homa_wire::MAX_HEADER_LEN`]
/// bytes): building a packet allocates nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transmit {
    /// Where to: the peer's IP address and Homa port.
    pub dst: SocketAddr,
    /// Network priority 0..=7 (IP TOS `priority << 5`).
    pub priority: u8,
    /// The packet's type.
    pub packet_type: PacketType,
    /// The Homa header; for control packets, the whole packet (bytes,
    /// at most [`homa_wire::MAX_HEADER_LEN`]).
    pub header: HeaderBuf,
    /// Message bytes following the header (DATA only; empty otherwise).
    pub payload: Bytes,
}

impl Transmit {
    /// Bytes of the whole Homa packet.
    pub fn len(&self) -> usize {
        self.header.len() + self.payload.len()
    }

    /// Never true: every packet has a header.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The whole packet in one new buffer (a copy).
    pub fn to_bytes(&self) -> Bytes {
        let mut b = BytesMut::with_capacity(self.len());
        b.extend_from_slice(&self.header);
        b.extend_from_slice(&self.payload);
        b.freeze()
    }
}

impl Endpoint {
    /// The next packet to send, when the driver's link can take one: control
    /// packets first, then data of the message the sender policy picks (for
    /// Homa: fewest bytes left, with a small share for the oldest).
    pub fn poll_transmit(&mut self, now: Nanos) -> Option<Transmit> {
        debug_assert!(self.sweep_filed_if_idle());
        // (Checked in debug builds only.)
        let may = cfg!(debug_assertions) && self.may_transmit();
        let t = self.poll_transmit_inner(now);
        debug_assert!(may || t.is_none(), "may_transmit said no packet");
        t
    }

    /// [`Self::poll_transmit`]'s work.
    #[inline]
    fn poll_transmit_inner(&mut self, now: Nanos) -> Option<Transmit> {
        self.decide_grants(now);
        if let Some(t) = self.sender.pop_control() {
            self.metrics.sent.count(t.packet_type, t.len());
            return Some(t);
        }
        // (No message to choose from: no call through the policy.)
        if !self.sender.has_filed() {
            return None;
        }
        let id = self.sender.policy.next(now)?;
        // (Returned as it comes, counted already: a `Transmit` is large,
        // and looking at it here copied it once more.)
        self.data_packet_of(now, id)
    }

    /// Whether [`Self::poll_transmit`] may find a packet now. When false,
    /// it would find none and change nothing (no control packet is queued,
    /// no grant decision is due, no message is filed with the sender
    /// policy), so a driver may skip the call; when true it may still find
    /// none (e.g. a policy that waits for credit). The runtime asks before
    /// every poll: the poll that ends each batch is then a check of three
    /// fields instead of a call.
    #[inline]
    pub fn may_transmit(&self) -> bool {
        self.grants_due || !self.sender.control_is_empty() || self.sender.has_filed()
    }

    /// [`Self::may_transmit`], for a driver that skips the poll when it
    /// says no; when the only reason for a poll is a grant decision that
    /// would decide nothing (no message needs grants, and the receiver
    /// policy's wake-up time is the one filed), the decision is made here,
    /// at the cost of two checks, and the answer is no: the state is then
    /// the one that poll would leave (it would make that decision, then
    /// find no packet). A one-packet message's DATA asks for a decision,
    /// and a poll made for nothing else cost some 80 instructions per
    /// message.
    #[inline]
    pub fn may_transmit_now(&mut self) -> bool {
        if self.grants_due
            && self.sender.control_is_empty()
            && !self.sender.has_filed()
            && self.receiver.decision_is_idle()
        {
            // (What `decide_due_grants` does when nothing needs grants
            // and the wake-up time is unchanged.)
            self.grants_due = false;
            return false;
        }
        self.may_transmit()
    }

    /// Like [`Self::poll_transmit`], but only a packet of fewer than
    /// `max_len` bytes (Homa header included): a control packet, or data of
    /// the message the sender would send next when its next packet is that
    /// small. A driver whose pacer is holding back a full-size packet uses
    /// this to let small packets bypass the pacer, as Homa/Linux does.
    pub fn poll_transmit_small(&mut self, now: Nanos, max_len: usize) -> Option<Transmit> {
        self.decide_grants(now);
        if let Some(t) = self.sender.front_control() {
            return if t.len() < max_len {
                self.poll_transmit(now)
            } else {
                None
            };
        }
        let id = self.sender.policy.peek()?;
        let chunk = self
            .rpcs
            .get(&id)
            .and_then(|rpc| rpc.phase.msgout())
            .and_then(|m| m.next_chunk_len(self.config.max_payload()))?;
        if DATA_HEADER_LEN + (chunk as usize) >= max_len {
            return None;
        }
        self.data_packet_of(now, id)
    }

    /// The next packet of sendable RPC `id`'s outgoing message, counted
    /// in the metrics as sent.
    fn data_packet_of(&mut self, now: Nanos, id: RpcId) -> Option<Transmit> {
        let max_payload = self.config.max_payload();
        let top = self.config.top_priority();
        let bytedance_flag = self.bytedance_data_flag();
        let rpc = self.rpcs.get_mut(&id)?;
        let is_client = matches!(rpc.phase, Phase::Client { .. });
        let incast = rpc.incast && is_client;
        let (stream_flags, stream_seq) = super::stream::data_fields(&rpc.phase);
        let m = rpc.phase.msgout_mut()?;
        let chunk = m.next_chunk(max_payload)?;
        self.sender.policy.on_data_sent();
        let (length, incoming) = (m.length, m.incoming());
        let payload = m
            .data
            .slice(chunk.offset as usize..(chunk.offset + chunk.len) as usize);
        let (ack, cutoff_version, stale) = match self.peers.get_mut(&id.peer) {
            Some(p) => {
                // Only a client's DATA carries acks.
                let pending = if is_client {
                    p.pending_acks.pop_front()
                } else {
                    None
                };
                let ack = pending.map_or_else(AckEntry::default, |client_id| AckEntry {
                    client_id,
                    server_port: id.peer.port(),
                });
                (ack, p.cutoff_version, p.needs_refresh())
            }
            None => (AckEntry::default(), 0, false),
        };
        self.metrics.acks_sent += (ack.client_id != 0) as u64;
        let header = DataHeader {
            message_length: length,
            incoming,
            ack,
            cutoff_version,
            retransmit: chunk.retransmit,
            flags: self.sender.policy.data_flags(self.sender.unspent_credit)
                | if incast { DATA_FLAG_INCAST } else { 0 }
                | bytedance_flag
                | stream_flags,
            offset: chunk.offset,
            stream_seq,
        };
        let common = CommonHeader {
            sport: self.local.port(),
            dport: id.peer.port(),
            sender_id: id.id,
        };
        let header = HeaderBuf::data(&common, &header);
        self.metrics
            .sent
            .count(PacketType::Data, DATA_HEADER_LEN + chunk.len as usize);
        self.metrics.data_bytes_sent += chunk.len as u64;
        if chunk.retransmit {
            self.metrics.data_bytes_retransmitted += chunk.len as u64;
        }
        if ack.client_id != 0 && stale {
            self.refresh_peer(now, id.peer);
            self.after_change(now, id);
        // (Otherwise the RPC at hand is refiled, not looked up again,
        // unless it needs the whole `after_change`: see `refile_sent`.)
        } else if !super::refile_sent(
            &mut self.sender,
            &self.config,
            &mut self.timers,
            now,
            id,
            rpc,
        ) {
            self.after_change(now, id);
        }
        Some(Transmit {
            dst: id.peer,
            priority: chunk.priority.min(top),
            packet_type: PacketType::Data,
            header,
            payload,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Config, Event};

    #[test]
    fn may_transmit_is_false_only_when_a_poll_would_find_nothing() {
        let (a, b) = (
            "127.0.0.1:4000".parse().unwrap(),
            "127.0.0.2:4000".parse().unwrap(),
        );
        let mut client = Endpoint::new(Config::default(), a, 1).unwrap();
        let mut server = Endpoint::new(Config::default(), b, 2).unwrap();
        assert!(!client.may_transmit());
        assert_eq!(client.poll_transmit(0), None);
        // A request: its one packet is due.
        let id = client
            .send_request(0, b, Bytes::from_static(b"hello"))
            .unwrap();
        assert!(client.may_transmit());
        let t = client.poll_transmit(0).expect("the request");
        assert_eq!(t.packet_type, PacketType::Data);
        assert!(!client.may_transmit());
        assert_eq!(client.poll_transmit(0), None);
        // The server: a grant decision is due once the request came, then
        // the reply's packet.
        server.handle_packet(0, a.ip(), &t.to_bytes());
        assert_eq!(server.may_transmit(), server.poll_transmit(0).is_some());
        assert!(!server.may_transmit());
        let Some(Event::Request { rpc, .. }) = server.poll_event() else {
            panic!("no request");
        };
        server.reply(0, rpc, Bytes::from_static(b"hi")).unwrap();
        assert!(server.may_transmit());
        assert!(server.poll_transmit(0).is_some());
        assert!(!server.may_transmit());
        // A control packet queued makes it true again.
        client.abort(0, id).unwrap();
        client.close(0);
        assert_eq!(client.may_transmit(), client.poll_transmit(0).is_some());
    }

    #[test]
    fn every_packet_polled_is_counted_as_sent_once() {
        let (a, b) = (
            "127.0.0.1:4000".parse().unwrap(),
            "127.0.0.2:4000".parse().unwrap(),
        );
        let mut client = Endpoint::new(Config::default(), a, 1).unwrap();
        client
            .send_request(0, b, Bytes::from(vec![7; 5000]))
            .unwrap();
        client
            .send_request(0, b, Bytes::from(vec![8; 100]))
            .unwrap();
        let mut polled = Vec::new();
        // One through the small-packet bypass, the rest as usual.
        polled.extend(client.poll_transmit_small(0, 1000));
        while let Some(t) = client.poll_transmit(0) {
            polled.push(t);
        }
        assert!(polled.len() >= 3);
        let m = client.metrics();
        for ty in [PacketType::Data, PacketType::Grant, PacketType::Ack] {
            let of = polled.iter().filter(|t| t.packet_type == ty);
            assert_eq!(m.sent.packets_of(ty), of.clone().count() as u64, "{ty}");
            assert_eq!(m.sent.bytes_of(ty), of.map(|t| t.len() as u64).sum::<u64>());
        }
        assert_eq!(m.sent.total_packets(), polled.len() as u64);
    }

    /// Runs RPCs of many sizes (grants needed for the large ones) between
    /// two endpoints whose driver skips the poll when `check` says no;
    /// returns everything observable after each drain: packets, events,
    /// deadlines, whether a decision is due, the receiver's state, the
    /// metrics; and how often `may_transmit_now` said no where
    /// `may_transmit` said yes.
    fn drive(design: crate::Design, fast: bool) -> (Vec<String>, usize) {
        let (a, b) = (
            "127.0.0.1:4000".parse().unwrap(),
            "127.0.0.2:4000".parse().unwrap(),
        );
        let config = Config {
            design,
            ..Config::default()
        };
        let mut eps = [
            Endpoint::new(config.clone(), a, 1).unwrap(),
            Endpoint::new(config, b, 2).unwrap(),
        ];
        let mut seen = Vec::new();
        let mut skipped = 0;
        let mut now = 0;
        let sizes = [100, 5000, 100, 300_000, 100, 900_000, 100, 100];
        for (round, &len) in sizes.iter().cycle().take(40).enumerate() {
            eps[0]
                .send_request(now, b, Bytes::from(vec![round as u8; len]))
                .unwrap();
            if round % 3 == 0 {
                // Two at once now and then.
                eps[0]
                    .send_request(now, b, Bytes::from(vec![1; 100]))
                    .unwrap();
            }
            loop {
                let mut moved = false;
                for i in 0..2 {
                    loop {
                        let go = if fast {
                            let slow = eps[i].may_transmit();
                            let go = eps[i].may_transmit_now();
                            skipped += (slow && !go) as usize;
                            go
                        } else {
                            eps[i].may_transmit()
                        };
                        if !go {
                            break;
                        }
                        let Some(t) = eps[i].poll_transmit(now) else {
                            break;
                        };
                        moved = true;
                        seen.push(format!("{i}: {:?}", t.to_bytes()));
                        let src = eps[i].local_addr().ip();
                        eps[1 - i].handle_packet(now, src, &t.to_bytes());
                    }
                    while let Some(e) = eps[i].poll_event() {
                        seen.push(format!("{i}: {e:?}"));
                        if let crate::Event::Request { rpc, .. } = e {
                            eps[i].reply(now, rpc, Bytes::from(vec![2; 100])).unwrap();
                        }
                    }
                    let e = &eps[i];
                    // (Not the policy's `Debug`: it shows hash maps,
                    // whose order differs from one endpoint to another.)
                    seen.push(format!(
                        "{i}: {:?} {:?} {} {} {:?} {:?} {}",
                        e.poll_timeout(),
                        e.poll_timeout_strict(),
                        e.grants_due,
                        e.receiver.policy.has_candidates(),
                        e.receiver.policy.wakeup(),
                        e.receiver.policy_timer,
                        e.receiver.outstanding
                    ));
                }
                now += 1_000;
                if !moved {
                    break;
                }
            }
            for e in eps.iter_mut() {
                if e.poll_timeout().is_some_and(|t| t <= now) {
                    e.handle_timeout(now);
                }
            }
        }
        seen.extend(eps.iter().map(|e| format!("{:?}", e.metrics())));
        (seen, skipped)
    }

    #[test]
    fn may_transmit_now_leaves_the_state_a_poll_for_nothing_would() {
        for design in [crate::Design::Homa, crate::Design::Sird] {
            let (slow, _) = drive(design, false);
            let (fast, skipped) = drive(design, true);
            assert_eq!(slow.len(), fast.len());
            for (x, y) in slow.iter().zip(&fast) {
                assert_eq!(x, y);
            }
            assert!(skipped >= 5, "{design:?}: {skipped}");
            assert!(slow.iter().any(|l| l.contains("Response")));
        }
    }
}
