//! The sending side of an endpoint: the queue of control packets, the
//! memory held in outgoing messages, and the [`SenderPolicy`] that orders
//! data packets.

use super::Transmit;
use crate::metrics::Metrics;
use crate::policy::{OutView, SenderPolicy};
use crate::rpc::Rpc;
use crate::RpcId;
use bytes::Bytes;
use homa_wire::{Body, CommonHeader, HeaderBuf, Packet};
use std::collections::VecDeque;
use tracing::debug;

/// Control packets queued beyond this are dropped (and counted): a driver
/// that never polls must not make the core grow.
const MAX_CONTROL_QUEUE: usize = 65_536;

/// Sender state of one endpoint.
#[derive(Debug)]
pub(super) struct Sender {
    /// Orders data packets and sizes unscheduled prefixes.
    pub policy: Box<dyn SenderPolicy>,
    control: VecDeque<Transmit>,
    /// Bytes held in outgoing messages.
    pub buffered: u64,
    /// Scheduled credit held over all outgoing messages (granted, not
    /// sent): SIRD's Σ c_r.
    pub unspent_credit: u64,
    /// Messages filed with the policy (RPCs whose `sendable` is set): when
    /// none is, the policy has nothing to choose from, and
    /// [`Sender::has_filed`] says so without a call through it.
    filed: usize,
}

impl Sender {
    pub fn new(policy: Box<dyn SenderPolicy>) -> Sender {
        Sender {
            policy,
            control: VecDeque::new(),
            buffered: 0,
            unspent_credit: 0,
            filed: 0,
        }
    }

    /// Files the RPC's outgoing message with the policy if it has something
    /// to send now.
    pub fn refile(&mut self, id: RpcId, rpc: &mut Rpc) {
        let credit = rpc.phase.msgout().map_or(0, |m| m.unspent_credit());
        self.unspent_credit = self.unspent_credit + credit as u64 - rpc.credit as u64;
        rpc.credit = credit;
        match rpc.phase.msgout().filter(|m| m.has_sendable()) {
            Some(m) => {
                let key = (m.bytes_left(), m.seq);
                if rpc.sendable != Some(key) {
                    self.filed += rpc.sendable.is_none() as usize;
                    self.policy.update(&OutView {
                        id,
                        bytes_left: key.0,
                        seq: key.1,
                    });
                    rpc.sendable = Some(key);
                }
            }
            None => {
                if rpc.sendable.take().is_some() {
                    self.filed -= 1;
                    self.policy.remove(id);
                }
            }
        }
    }

    /// Takes the RPC out of the policy and releases its message's memory.
    pub fn forget(&mut self, id: RpcId, rpc: &mut Rpc) {
        self.unspent_credit -= std::mem::take(&mut rpc.credit) as u64;
        if rpc.sendable.take().is_some() {
            self.filed -= 1;
            self.policy.remove(id);
        }
        if let Some(m) = rpc.phase.msgout() {
            self.buffered -= m.length as u64;
        }
    }

    /// Queues a control packet for RPC `id` (sent to its peer, with its id
    /// in the header).
    pub fn queue_control(
        &mut self,
        sport: u16,
        id: RpcId,
        body: Body<'static>,
        priority: u8,
        metrics: &mut Metrics,
    ) {
        if self.control.len() >= MAX_CONTROL_QUEUE {
            metrics.control_queue_drops += 1;
            debug!("control queue full; dropping {}", body.packet_type());
            return;
        }
        let packet = Packet {
            common: CommonHeader {
                sport,
                dport: id.peer.port(),
                sender_id: id.id,
            },
            body,
        };
        // A control packet always fits (only DATA carries more bytes, and
        // DATA is never queued here).
        let Some(header) = HeaderBuf::packet(&packet) else {
            debug_assert!(false, "{} does not fit a HeaderBuf", packet.packet_type());
            return;
        };
        self.control.push_back(Transmit {
            dst: id.peer,
            priority,
            packet_type: packet.packet_type(),
            header,
            payload: Bytes::new(),
        });
    }

    /// Like [`Sender::queue_control`], but at the head of the queue, for a
    /// packet whose delay would be measured (RTT probes and answers).
    pub fn queue_control_front(
        &mut self,
        sport: u16,
        id: RpcId,
        body: Body<'static>,
        priority: u8,
        metrics: &mut Metrics,
    ) {
        let before = self.control.len();
        self.queue_control(sport, id, body, priority, metrics);
        if self.control.len() > before {
            let t = self.control.pop_back().expect("just queued");
            self.control.push_front(t);
        }
    }

    pub fn pop_control(&mut self) -> Option<Transmit> {
        self.control.pop_front()
    }

    pub fn front_control(&self) -> Option<&Transmit> {
        self.control.front()
    }

    #[inline]
    pub fn control_is_empty(&self) -> bool {
        self.control.is_empty()
    }

    /// Whether any message is filed with the policy. When not, the policy
    /// holds none and would choose none ([`SenderPolicy::next`] is not
    /// called then).
    #[inline]
    pub fn has_filed(&self) -> bool {
        debug_assert!(self.filed > 0 || self.policy.peek().is_none());
        self.filed > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outgoing::OutMessage;
    use crate::policy::homa::HomaSender;
    use crate::rpc::Phase;
    use crate::Config;

    fn client_rpc(len: usize) -> Rpc {
        let request = OutMessage::new(Bytes::from(vec![1; len]), len as u32, 0, 1, 0);
        Rpc::new(
            Phase::Client {
                request,
                response: None,
            },
            0,
        )
    }

    #[test]
    fn has_filed_follows_the_messages_filed_with_the_policy() {
        let mut s = Sender::new(Box::new(HomaSender::new(&Config::default())));
        s.buffered = 3100;
        let peer = "127.0.0.1:9".parse().unwrap();
        let (a, b) = (RpcId { id: 2, peer }, RpcId { id: 4, peer });
        let (mut ra, mut rb) = (client_rpc(3000), client_rpc(100));
        assert!(!s.has_filed());
        s.refile(a, &mut ra);
        s.refile(b, &mut rb);
        // Refiled under a new key: still one entry each.
        ra.phase.msgout_mut().unwrap().next_chunk(1400);
        s.refile(a, &mut ra);
        assert_eq!(s.filed, 2);
        assert!(s.has_filed());
        // One sends everything (refiled: out of the policy), the other is
        // forgotten: nothing left to choose from.
        while rb.phase.msgout_mut().unwrap().next_chunk(1400).is_some() {}
        s.refile(b, &mut rb);
        assert!(s.has_filed());
        s.forget(a, &mut ra);
        assert!(!s.has_filed());
        assert_eq!(s.policy.next(0), None);
        // Refiling an RPC with nothing to send changes nothing.
        s.refile(b, &mut rb);
        assert!(!s.has_filed());
    }
}
