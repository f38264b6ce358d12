//! One host's pFabric: SRPT over its flows, per-packet ACKs, RTO and
//! probe mode, exactly-once delivery.

use super::*;

/// pFabric on one host: the sender side of its outgoing messages and the
/// receiver side of its incoming ones.
#[derive(Debug)]
pub struct PFabricHost {
    pub(super) id: HostId,
    pub(super) hosts: u32,
    pub(super) pk: Packetization,
    pub(super) max_payload: u64,
    pub(super) params: Params,
    pub(super) next_key: u64,
    /// Next message index per destination.
    pub(super) next_index: FxHashMap<HostId, u64>,
    pub(super) flows: FxHashMap<u64, Flow>,
    /// Flows that may send now, by (remaining bytes, key): the first is the
    /// SRPT choice. A set rather than a scan because under SRPT large
    /// messages can wait behind many small ones, so a host may hold
    /// hundreds of active flows at high load; each change costs O(log n).
    pub(super) ready: BTreeSet<(u64, u64)>,
    /// Armed RTO timers by (deadline, key).
    pub(super) timers: BTreeSet<(Time, u64)>,
    /// ACKs, probe replies and probes, sent before any data.
    pub(super) control: VecDeque<SimPacket<PfBody>>,
    pub(super) incoming: FxHashMap<(HostId, u64), Incoming>,
    pub(super) completed: FxHashMap<HostId, Completed>,
    pub(super) delivered: VecDeque<Delivered>,
    pub(super) counters: Counters,
}

impl PFabricHost {
    pub(super) fn new(id: HostId, env: &HostEnv, params: Params) -> Self {
        PFabricHost {
            id,
            hosts: env.hosts,
            pk: env.packetization,
            max_payload: env.packetization.max_payload() as u64,
            params,
            next_key: 0,
            next_index: FxHashMap::default(),
            flows: FxHashMap::default(),
            ready: BTreeSet::new(),
            timers: BTreeSet::new(),
            control: VecDeque::new(),
            incoming: FxHashMap::default(),
            completed: FxHashMap::default(),
            delivered: VecDeque::new(),
            counters: Counters::default(),
        }
    }

    /// Outgoing messages not yet fully acknowledged.
    pub fn active_flows(&self) -> usize {
        self.flows.len()
    }

    /// Incoming messages partially received.
    pub fn incomplete_incoming(&self) -> usize {
        self.incoming.len()
    }

    /// The next data packet in SRPT order, if a flow may send.
    pub(super) fn next_data(&mut self, now: Time) -> Option<SimPacket<PfBody>> {
        let &(_, key) = self.ready.first()?;
        let flow = self
            .flows
            .get_mut(&key)
            .expect("every ready flow is active");
        let retransmit = flow.lost_packets > 0;
        let seq = if retransmit {
            let mut s = flow.resend_cursor;
            while !flow.lost.contains(s) {
                s += 1;
            }
            debug_assert!(s < flow.next_new);
            flow.lost.remove(s);
            flow.lost_packets -= 1;
            flow.resend_cursor = s + 1;
            s
        } else {
            flow.next_new += 1;
            flow.next_new - 1
        };
        flow.in_flight += 1;
        let offset = seq as u64 * self.max_payload;
        let len = (flow.size - offset).min(self.max_payload) as u32;
        let packet = SimPacket {
            meta: PacketMeta {
                src: self.id,
                dst: flow.dst,
                priority: 0,
                rank: flow.rank(),
                wire_bytes: self.pk.data_frame(len),
                payload_bytes: len,
                retransmit,
                flow: flow.hash,
                ecn: false,
            },
            body: PfBody::Data {
                key,
                index: flow.index,
                seq,
                len,
                msg_size: flow.size,
            },
        };
        if flow.timer.is_none() {
            let at = now.saturating_add(self.params.rto);
            set_timer(&mut self.timers, flow, key, Some(at));
        }
        refresh_ready(&mut self.ready, flow, key);
        self.counters.data_packets_sent += 1;
        self.counters.data_bytes_sent += len as u64;
        if retransmit {
            self.counters.retransmitted_packets += 1;
        }
        Some(packet)
    }

    /// Queues a minimum-size, rank-0 answer (an ACK or a probe's reply) to
    /// `src` about its message `key`, ahead of any data.
    fn queue_ack(&mut self, src: HostId, key: u64, body: PfBody) {
        self.control.push_back(control_packet(
            &self.pk,
            self.id,
            src,
            flow_hash(src, key),
            ACK_HEADER_BYTES,
            0,
            body,
        ));
    }

    /// A data packet arrived: acknowledge it, record it, deliver the
    /// message if it is now complete.
    pub(super) fn on_data(&mut self, src: HostId, key: u64, index: u64, seq: u32, msg_size: u64) {
        self.counters.data_packets_received += 1;
        self.counters.acks_sent += 1;
        self.queue_ack(src, key, PfBody::Ack { key, seq });
        let max_payload = self.pk.max_payload() as u64;
        let len = msg_size
            .saturating_sub(seq as u64 * max_payload)
            .min(max_payload);
        let done = self.completed.entry(src).or_default();
        if done.contains(index) {
            self.counters.duplicate_packets_received += 1;
            self.counters.duplicate_payload_bytes += len;
            return;
        }
        let packets = self.pk.packets(msg_size).min(u32::MAX as u64) as u32;
        if seq >= packets {
            debug_assert!(false, "data packet {seq} of a {packets}-packet message");
            return;
        }
        if packets > 1 {
            let msg = self.incoming.entry((src, key)).or_insert_with(|| Incoming {
                index,
                packets,
                received: 0,
                got: PacketSet::new(packets),
            });
            if !msg.got.insert(seq) {
                self.counters.duplicate_packets_received += 1;
                self.counters.duplicate_payload_bytes += len;
                return;
            }
            msg.received += 1;
            if msg.received < msg.packets {
                return;
            }
            debug_assert_eq!(msg.index, index);
            self.incoming.remove(&(src, key));
        }
        done.insert(index);
        self.counters.messages_delivered += 1;
        self.delivered.push_back(Delivered { src, key });
    }

    /// An ACK for packet `seq` of our message `key` arrived.
    pub(super) fn on_ack(&mut self, now: Time, key: u64, seq: u32) {
        self.counters.acks_received += 1;
        let Some(flow) = self.flows.get_mut(&key) else {
            // The message was already fully acknowledged.
            self.counters.duplicate_acks_received += 1;
            return;
        };
        if seq >= flow.next_new || !flow.acked.insert(seq) {
            self.counters.duplicate_acks_received += 1;
            return;
        }
        flow.acked_packets += 1;
        let offset = seq as u64 * self.max_payload;
        flow.acked_bytes += (flow.size - offset).min(self.max_payload);
        if flow.lost.remove(seq) {
            // The original arrived after its timeout.
            flow.lost_packets -= 1;
        } else {
            flow.in_flight -= 1;
        }
        while flow.first_unacked < flow.packets && flow.acked.contains(flow.first_unacked) {
            flow.first_unacked += 1;
        }
        if flow.acked_packets == flow.packets {
            set_timer(&mut self.timers, flow, key, None);
            if let Some(r) = flow.ready_rank {
                self.ready.remove(&(r, key));
            }
            self.flows.remove(&key);
            self.counters.messages_acked += 1;
            return;
        }
        // Progress: the path works.
        flow.consecutive_timeouts = 0;
        flow.probing = false;
        if flow.cwnd < flow.ssthresh {
            flow.cwnd += 1;
        } else {
            flow.ca_acks += 1;
            if flow.ca_acks >= flow.cwnd {
                flow.ca_acks = 0;
                flow.cwnd += 1;
            }
        }
        flow.cwnd = flow.cwnd.min(self.params.max_cwnd);
        let at = (flow.in_flight > 0).then(|| now.saturating_add(self.params.rto));
        set_timer(&mut self.timers, flow, key, at);
        refresh_ready(&mut self.ready, flow, key);
    }

    /// The receiver answered a probe of our message `key`.
    pub(super) fn on_probe_ack(&mut self, key: u64) {
        let Some(flow) = self.flows.get_mut(&key) else {
            return;
        };
        if !flow.probing {
            return;
        }
        flow.probing = false;
        flow.consecutive_timeouts = 0;
        flow.cwnd = 1;
        flow.ca_acks = 0;
        let at = (flow.in_flight > 0).then_some(flow.timer).flatten();
        set_timer(&mut self.timers, flow, key, at);
        refresh_ready(&mut self.ready, flow, key);
    }

    /// The RTO of message `key` expired (its timer entry is already gone).
    pub(super) fn flow_timeout(&mut self, now: Time, key: u64) {
        let Some(flow) = self.flows.get_mut(&key) else {
            return;
        };
        flow.timer = None;
        if !flow.probing {
            if flow.in_flight == 0 {
                // Nothing of this flow is in the network (it is waiting for
                // the NIC); the next send rearms the timer.
                return;
            }
            flow.ssthresh = (flow.cwnd / 2).max(2);
            flow.cwnd = 1;
            flow.ca_acks = 0;
            for s in flow.first_unacked..flow.next_new {
                if !flow.acked.contains(s) {
                    flow.lost.insert(s);
                }
            }
            flow.lost_packets += flow.in_flight;
            flow.in_flight = 0;
            flow.resend_cursor = flow.first_unacked;
        }
        self.counters.timeouts += 1;
        flow.consecutive_timeouts += 1;
        if flow.consecutive_timeouts >= self.params.probe_after {
            flow.probing = true;
            self.counters.probes_sent += 1;
            self.control.push_back(SimPacket {
                meta: PacketMeta {
                    src: self.id,
                    dst: flow.dst,
                    priority: 0,
                    rank: flow.rank(),
                    wire_bytes: self.pk.data_frame(PROBE_PAYLOAD_BYTES),
                    payload_bytes: 0,
                    retransmit: false,
                    flow: flow.hash,
                    ecn: false,
                },
                body: PfBody::Probe { key },
            });
            let at = now.saturating_add(self.params.rto);
            set_timer(&mut self.timers, flow, key, Some(at));
        }
        refresh_ready(&mut self.ready, flow, key);
    }
}

impl Transport for PFabricHost {
    type Body = PfBody;

    fn start_message(&mut self, now: Time, dst: HostId, size: u64) -> Result<u64, TransportError> {
        let _ = now;
        if dst >= self.hosts {
            return Err(TransportError::Message {
                size,
                reason: format!("destination {dst} does not exist ({} hosts)", self.hosts),
            });
        }
        let packets = self.pk.packets(size);
        if packets > u32::MAX as u64 {
            return Err(TransportError::Message {
                size,
                reason: format!("{packets} packets is more than pFabric numbers"),
            });
        }
        let packets = packets as u32;
        let key = self.next_key;
        self.next_key += 1;
        let next = self.next_index.entry(dst).or_insert(0);
        let index = *next;
        *next += 1;
        let mut flow = Flow {
            dst,
            index,
            size,
            packets,
            hash: flow_hash(self.id, key),
            next_new: 0,
            first_unacked: 0,
            resend_cursor: 0,
            acked: PacketSet::new(packets),
            lost: PacketSet::new(packets),
            acked_packets: 0,
            acked_bytes: 0,
            in_flight: 0,
            lost_packets: 0,
            cwnd: self.params.initial_cwnd,
            ssthresh: self.params.max_cwnd,
            ca_acks: 0,
            consecutive_timeouts: 0,
            probing: false,
            timer: None,
            ready_rank: None,
        };
        refresh_ready(&mut self.ready, &mut flow, key);
        self.flows.insert(key, flow);
        self.counters.messages_started += 1;
        Ok(key)
    }

    fn receive(&mut self, now: Time, packet: SimPacket<PfBody>) {
        let src = packet.meta.src;
        match packet.body {
            PfBody::Data {
                key,
                index,
                seq,
                msg_size,
                ..
            } => self.on_data(src, key, index, seq, msg_size),
            PfBody::Ack { key, seq } => self.on_ack(now, key, seq),
            PfBody::Probe { key } => {
                self.counters.probe_acks_sent += 1;
                self.queue_ack(src, key, PfBody::ProbeAck { key });
            }
            PfBody::ProbeAck { key } => self.on_probe_ack(key),
        }
    }

    fn poll_transmit(&mut self, now: Time) -> Option<SimPacket<PfBody>> {
        if let Some(p) = self.control.pop_front() {
            return Some(p);
        }
        self.next_data(now)
    }

    fn next_timeout(&self) -> Option<Time> {
        self.timers.first().map(|&(t, _)| t)
    }

    fn on_timeout(&mut self, now: Time) {
        while let Some(&(t, key)) = self.timers.first() {
            if t > now {
                break;
            }
            self.timers.pop_first();
            self.flow_timeout(now, key);
        }
    }

    fn poll_delivered(&mut self) -> Option<Delivered> {
        self.delivered.pop_front()
    }

    fn duplicate_payload_bytes(&self) -> u64 {
        self.counters.duplicate_payload_bytes
    }

    fn has_grantable_incoming(&self) -> bool {
        !self.incoming.is_empty()
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = &self.counters;
        vec![
            ("messages_started", c.messages_started),
            ("messages_acked", c.messages_acked),
            ("messages_delivered", c.messages_delivered),
            ("data_packets_sent", c.data_packets_sent),
            ("data_bytes_sent", c.data_bytes_sent),
            ("retransmitted_packets", c.retransmitted_packets),
            ("timeouts", c.timeouts),
            ("probes_sent", c.probes_sent),
            ("acks_sent", c.acks_sent),
            ("probe_acks_sent", c.probe_acks_sent),
            ("acks_received", c.acks_received),
            ("duplicate_acks_received", c.duplicate_acks_received),
            ("data_packets_received", c.data_packets_received),
            ("duplicate_packets_received", c.duplicate_packets_received),
        ]
    }
}
