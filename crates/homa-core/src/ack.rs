//! At-most-once bookkeeping (Homa/Linux's NEED_ACK/ACK scheme).
//!
//! A server keeps a finished RPC (and its response, for retransmission) until
//! the client acknowledges it: acks ride in the next request DATA to that
//! server, or go in ACK packets of up to five, flushed every tick or sent in
//! answer to NEED_ACK. Once acked, the server remembers the RPC's name for
//! `ack_memory_ns` so a stale duplicate of its request, still in the
//! network, is recognised and dropped instead of being executed again.

use crate::keyed::KeyedSet;
use crate::{Nanos, RpcId};
use std::collections::VecDeque;

/// Recently acknowledged server RPCs. Tens of thousands at high rates, and
/// looked up for every new request: a hash set (with a fixed hasher, so runs
/// stay reproducible; nothing iterates it).
///
/// The RPC remembered last waits in a slot of its own until
/// [`AckMemory::settle`] (or the next [`AckMemory::remember`] or
/// [`AckMemory::expire`]) files it: a server remembers an RPC when its ack
/// comes, usually riding on the client's next request, and filing it (a
/// hash insert, perhaps an eviction) can wait until that request is
/// answered. Every answer counts the slot as if filed, an eviction it
/// would cause included.
#[derive(Debug, Default)]
pub struct AckMemory {
    set: KeyedSet<RpcId>,
    expiry: VecDeque<(Nanos, RpcId)>,
    /// Remembered, not yet filed: its expiry and the bound in force.
    pending: Option<(Nanos, RpcId, usize)>,
    /// Entries forgotten before their time (the bound), filed ones.
    forgotten_early: u64,
}

impl AckMemory {
    /// Remembers `rpc` until `now + lifetime`, keeping at most `max`
    /// entries (the oldest is forgotten early past that, counted in
    /// [`AckMemory::forgotten_early`]). It waits in the slot until
    /// [`AckMemory::settle`]; an RPC there before is filed first.
    #[inline]
    pub fn remember(&mut self, now: Nanos, lifetime: Nanos, max: usize, rpc: RpcId) {
        self.settle();
        self.pending = Some((now.saturating_add(lifetime), rpc, max));
    }

    /// Files the RPC that waits in the slot, if any. Nothing the memory
    /// answers changes.
    #[inline]
    pub fn settle(&mut self) {
        if let Some((at, rpc, max)) = self.pending.take() {
            self.file(at, rpc, max);
        }
    }

    /// True while an RPC waits in the slot for [`AckMemory::settle`].
    pub fn unsettled(&self) -> bool {
        self.pending.is_some()
    }

    /// [`AckMemory::remember`]'s work: `rpc` until `at`, at most `max`.
    fn file(&mut self, at: Nanos, rpc: RpcId, max: usize) {
        if !self.set.insert(rpc) {
            return;
        }
        self.expiry.push_back((at, rpc));
        if self.expiry.len() > max.max(1) {
            if let Some((_, old)) = self.expiry.pop_front() {
                self.set.remove(&old);
            }
            self.forgotten_early += 1;
        }
    }

    /// Whether filing the slot would add an entry, and if so, the entry
    /// it would forget early (the oldest).
    fn slot_effect(&self) -> (bool, Option<RpcId>) {
        match self.pending {
            Some((_, rpc, max)) if !self.set.contains(&rpc) => {
                let evicts = self.expiry.len() + 1 > max.max(1);
                (
                    true,
                    self.expiry.front().map(|&(_, r)| r).filter(|_| evicts),
                )
            }
            _ => (false, None),
        }
    }

    /// True if `rpc` was acknowledged recently.
    pub fn contains(&self, rpc: &RpcId) -> bool {
        match self.pending {
            None => self.set.contains(rpc),
            Some((_, p, _)) if p == *rpc => true,
            Some(_) => self.set.contains(rpc) && self.slot_effect().1 != Some(*rpc),
        }
    }

    /// Forgets entries whose time is up.
    pub fn expire(&mut self, now: Nanos) {
        self.settle();
        while let Some(&(t, rpc)) = self.expiry.front() {
            if t > now {
                break;
            }
            self.expiry.pop_front();
            self.set.remove(&rpc);
        }
    }

    /// When the oldest entry expires.
    pub fn next_expiry(&self) -> Option<Nanos> {
        let front = self.expiry.front().map(|&(t, _)| t);
        let Some((at, _, max)) = self.pending else {
            return front;
        };
        // (The common case without a lookup: filing the slot forgets
        // nothing, so the front stays, and an empty memory gets the slot's;
        // a driver asks this after every batch of packets.)
        if self.expiry.len() < max.max(1) {
            return front.or(Some(at));
        }
        match self.slot_effect() {
            (false, _) => front,
            (true, None) => front.or(Some(at)),
            (true, Some(_)) => self.expiry.get(1).map(|&(t, _)| t).or(Some(at)),
        }
    }

    /// Entries remembered.
    pub fn len(&self) -> usize {
        match self.slot_effect() {
            (true, None) => self.set.len() + 1,
            _ => self.set.len(),
        }
    }

    /// True when nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entries forgotten before their time because the memory was full.
    pub fn forgotten_early(&self) -> u64 {
        self.forgotten_early + self.slot_effect().1.is_some() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_then_forgets() {
        let a = RpcId {
            peer: "127.0.0.1:1".parse().unwrap(),
            id: 3,
        };
        let b = RpcId { id: 5, ..a };
        let mut m = AckMemory::default();
        m.remember(0, 100, 10, a);
        m.remember(50, 100, 10, b);
        m.remember(60, 100, 10, a); // already there: keeps the first expiry
        assert!(m.contains(&a) && m.contains(&b));
        assert_eq!(m.next_expiry(), Some(100));
        m.expire(99);
        assert_eq!(m.len(), 2);
        m.expire(100);
        assert!(!m.contains(&a) && m.contains(&b));
        m.expire(150);
        assert!(m.is_empty());
        assert_eq!(m.next_expiry(), None);
        // Bounded: the oldest goes first.
        m.remember(200, 100, 1, a);
        assert_eq!(m.forgotten_early(), 0);
        m.remember(201, 100, 1, b);
        assert_eq!(m.forgotten_early(), 1);
        assert!(!m.contains(&a) && m.contains(&b));
    }

    #[test]
    fn the_rpc_in_the_slot_counts_as_filed() {
        let a = RpcId {
            peer: "127.0.0.1:1".parse().unwrap(),
            id: 3,
        };
        let (b, c) = (RpcId { id: 5, ..a }, RpcId { id: 7, ..a });
        // Every answer, settled or not, at every step.
        let answers = |m: &AckMemory| {
            (
                [a, b, c].map(|r| m.contains(&r)),
                m.next_expiry(),
                m.len(),
                m.is_empty(),
                m.forgotten_early(),
            )
        };
        let steps: &[(Nanos, RpcId)] = &[(0, a), (10, a), (20, b), (30, c), (40, a), (45, a)];
        let (mut lazy, mut eager) = (AckMemory::default(), AckMemory::default());
        for &(now, rpc) in steps {
            lazy.remember(now, 100, 2, rpc);
            eager.remember(now, 100, 2, rpc);
            eager.settle();
            assert!(lazy.unsettled() && !eager.unsettled());
            assert_eq!(answers(&lazy), answers(&eager), "after {rpc:?} at {now}");
        }
        // (a was forgotten early once, for c, and came back.)
        assert_eq!(lazy.forgotten_early(), 2);
        lazy.expire(130);
        eager.expire(130);
        assert!(!lazy.unsettled());
        assert_eq!(answers(&lazy), answers(&eager));
        lazy.expire(1000);
        assert!(lazy.is_empty() && lazy.next_expiry().is_none());
    }
}
