//! Who hands which packets to the kernel, and in what order.
//!
//! Packets are taken from the core under the endpoint's lock and sent after
//! it is released, so the kernel's copying holds up nobody. Two threads that
//! sent packets of the same RPC at once reordered them (one thread's
//! `sendmmsg` overtaking the other's), and the receiver took the overtaken
//! ones for lost: with 4 RPCs of 500 KB outstanding, 8.5% of the bytes
//! received were retransmissions. So the packets of one RPC must reach the
//! kernel in the order the core gave them; packets of different RPCs need
//! not, and sending them one thread at a time left the copying of 4 large
//! requests to one CPU of two while TCP's four connections used both.
//!
//! Each batch of packets (what one thread took from the core at once) is
//! summed up as a [`KeyMask`]: one bit of 64 per RPC it carries packets of
//! (the bit chosen by the RPC's id; two RPCs may share a bit, which only
//! makes them wait for each other). A batch whose bits no batch being sent
//! or waiting has is sent at once by the thread that took it, beside any
//! others being sent; any other batch waits in line, and whoever finishes
//! a batch sends the first waiting batch that no longer shares a bit with
//! one being sent or with one before it in line. So a packet is never sent
//! before one of the same RPC that was taken from the core before it, and
//! while anything waits, some thread is sending (see [`SendQueue`]).

use super::Output;
use std::collections::VecDeque;

/// The RPCs a batch of packets carries packets of, one bit per RPC id
/// (its bits 1..=6: ids are random, and a peer's sequential ids still
/// spread over the bits). Zero for an empty batch.
pub(super) type KeyMask = u64;

/// Offset of the sender's RPC id in every Homa packet (the common header).
const SENDER_ID_OFFSET: usize = 20;

/// The [`KeyMask`] of a batch. A header too short to carry an id (never
/// built by the core) takes every bit: such a batch waits for all others.
pub(super) fn key_mask(out: &[homa_core::Transmit]) -> KeyMask {
    let mut mask = 0;
    for t in out {
        let h = t.header.as_slice();
        mask |= match h.get(SENDER_ID_OFFSET..SENDER_ID_OFFSET + 8) {
            Some(b) => {
                let id = u64::from_be_bytes(b.try_into().expect("8 bytes"));
                1 << ((id >> 1) & 63)
            }
            None => u64::MAX,
        };
    }
    mask
}

/// Batches waiting to be sent, and the RPCs of those being sent (kept
/// under its own lock, taken only briefly).
///
/// Invariant: whenever a batch waits, some thread is sending (it holds
/// bits of `sending`) and will look at the line when it finishes.
#[derive(Default)]
pub(super) struct SendQueue {
    /// The bits of the batches threads are sending now (disjoint: a batch
    /// starts only when none of its bits is taken).
    sending: KeyMask,
    /// Batches waiting, in the order they were taken from the core, each
    /// with its bits.
    line: VecDeque<(KeyMask, Output)>,
    /// The union of the waiting batches' bits.
    waiting: KeyMask,
}

impl SendQueue {
    /// A thread took `out` (non-empty, mask `mask`) from the core: true
    /// when it is to send it itself now, from where it is; false when it
    /// had to wait its turn, `out` then moved to the end of the line for
    /// a thread that is sending.
    pub(super) fn enqueue(&mut self, mask: KeyMask, out: &mut Output) -> bool {
        if mask & (self.sending | self.waiting) == 0 {
            self.sending |= mask;
            return true;
        }
        self.waiting |= mask;
        self.line.push_back((mask, std::mem::take(out)));
        false
    }

    /// The calling thread finished sending a batch of mask `mask`: its
    /// next batch, the first waiting one that shares no bit with a batch
    /// being sent or an earlier waiting one (with its mask), or `None`,
    /// which ends the thread's turn.
    pub(super) fn finish(&mut self, mask: KeyMask) -> Option<(KeyMask, Output)> {
        self.sending &= !mask;
        if self.line.is_empty() {
            return None;
        }
        let mut blocked = self.sending;
        let mut pick = None;
        for (i, (m, _)) in self.line.iter().enumerate() {
            if m & blocked == 0 {
                pick = Some(i);
                break;
            }
            blocked |= m;
        }
        let next = self.line.remove(pick?).expect("an index of the line");
        self.sending |= next.0;
        self.waiting = self.line.iter().fold(0, |w, (m, _)| w | m);
        Some(next)
    }

    /// Whether nothing is being sent or waits (for tests and checks).
    #[cfg(test)]
    fn idle(&self) -> bool {
        self.sending == 0 && self.line.is_empty() && self.waiting == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use homa_core::Transmit;
    use homa_wire::{CommonHeader, DataHeader, HeaderBuf, PacketType};

    fn packet(id: u64) -> Transmit {
        let common = CommonHeader {
            sport: 1,
            dport: 2,
            sender_id: id,
        };
        Transmit {
            dst: "127.0.0.1:2".parse().unwrap(),
            priority: 0,
            packet_type: PacketType::Data,
            header: HeaderBuf::data(&common, &DataHeader::default()),
            payload: Bytes::new(),
        }
    }

    /// A batch of one packet of each id.
    fn batch(ids: &[u64]) -> (KeyMask, Output) {
        let out: Output = ids.iter().map(|&id| packet(id)).collect();
        (key_mask(&out), out)
    }

    #[test]
    fn a_batch_is_keyed_by_the_ids_of_its_packets() {
        // Bits 1..=6 of the id choose the bit; the low bit (client or
        // server) does not.
        assert_eq!(batch(&[2]).0, 1 << 1);
        assert_eq!(batch(&[3]).0, 1 << 1);
        assert_eq!(batch(&[2, 4, 4]).0, (1 << 1) | (1 << 2));
        assert_eq!(batch(&[128]).0, 1);
        assert_eq!(batch(&[]).0, 0);
    }

    #[test]
    fn batches_of_different_rpcs_are_sent_side_by_side() {
        let mut q = SendQueue::default();
        let (a, mut oa) = batch(&[2]);
        let (b, mut ob) = batch(&[4]);
        assert!(q.enqueue(a, &mut oa));
        assert!(q.enqueue(b, &mut ob));
        assert_eq!((oa.len(), ob.len()), (1, 1));
        assert_eq!(q.finish(a), None);
        assert_eq!(q.finish(b), None);
        assert!(q.idle());
    }

    #[test]
    fn a_later_batch_of_the_same_rpc_waits_for_the_earlier_one() {
        let mut q = SendQueue::default();
        let (a, mut oa) = batch(&[2]);
        let (a2, mut oa2) = batch(&[2]);
        assert!(q.enqueue(a, &mut oa));
        assert!(!q.enqueue(a2, &mut oa2));
        assert!(oa2.is_empty());
        // The first sender sends it when done, then its turn ends.
        let (m, o) = q.finish(a).expect("the waiting batch");
        assert_eq!((m, o.len()), (a2, 1));
        assert_eq!(q.finish(m), None);
        assert!(q.idle());
    }

    #[test]
    fn a_batch_waits_behind_an_earlier_waiting_batch_it_shares_an_rpc_with() {
        let mut q = SendQueue::default();
        let (a, mut oa) = batch(&[2]); // being sent
        let (ab, mut oab) = batch(&[2, 4]); // waits for a
        let (b, mut ob) = batch(&[4]); // must not overtake ab's packet of 4
        let (c, mut oc) = batch(&[6]); // free: sent at once
        assert!(q.enqueue(a, &mut oa));
        assert!(!q.enqueue(ab, &mut oab));
        assert!(!q.enqueue(b, &mut ob));
        assert!(q.enqueue(c, &mut oc));
        // c's sender finishing must not take b ahead of ab.
        assert_eq!(q.finish(c), None);
        let (m, _) = q.finish(a).expect("ab");
        assert_eq!(m, ab);
        let (m, _) = q.finish(ab).expect("b");
        assert_eq!(m, b);
        assert_eq!(q.finish(b), None);
        assert!(q.idle());
    }

    #[test]
    fn whenever_a_batch_waits_somebody_sends() {
        // A random schedule of threads taking batches and finishing them:
        // the line never waits with nobody sending, and every batch of an
        // RPC is sent after the ones taken before it.
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _ in 0..200 {
            let mut q = SendQueue::default();
            // What each sending "thread" is sending: (mask, batch number).
            let mut active: Vec<(KeyMask, usize)> = Vec::new();
            let mut taken = 0usize;
            let mut sent_order: Vec<usize> = Vec::new();
            let mut masks: Vec<KeyMask> = Vec::new();
            let mut waiting_no: VecDeque<usize> = VecDeque::new();
            for _ in 0..60 {
                if rng.gen_bool(0.5) || active.is_empty() {
                    let ids: Vec<u64> = (0..rng.gen_range(1..3))
                        .map(|_| rng.gen_range(0..6u64) * 2)
                        .collect();
                    let (m, mut o) = batch(&ids);
                    masks.push(m);
                    if q.enqueue(m, &mut o) {
                        active.push((m, taken));
                    } else {
                        waiting_no.push_back(taken);
                    }
                    taken += 1;
                } else {
                    let i = rng.gen_range(0..active.len());
                    let (m, n) = active.swap_remove(i);
                    sent_order.push(n);
                    if let Some((m2, _)) = q.finish(m) {
                        let pos = waiting_no
                            .iter()
                            .position(|&w| masks[w] == m2)
                            .expect("a waiting batch");
                        let n2 = waiting_no.remove(pos).unwrap();
                        active.push((m2, n2));
                    }
                }
                assert!(q.line.is_empty() || !active.is_empty());
            }
            while let Some((m, n)) = active.pop() {
                sent_order.push(n);
                if let Some((m2, _)) = q.finish(m) {
                    let pos = waiting_no.iter().position(|&w| masks[w] == m2).unwrap();
                    let n2 = waiting_no.remove(pos).unwrap();
                    active.push((m2, n2));
                }
            }
            assert!(q.idle());
            assert_eq!(sent_order.len(), taken);
            // Batches sharing a bit finished in the order they were taken.
            for (i, &x) in sent_order.iter().enumerate() {
                for &y in &sent_order[i + 1..] {
                    if masks[x] & masks[y] != 0 {
                        assert!(x < y, "batch {y} overtook {x}");
                    }
                }
            }
        }
    }
}
