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
#[derive(Debug, Default)]
pub struct AckMemory {
    set: KeyedSet<RpcId>,
    expiry: VecDeque<(Nanos, RpcId)>,
}

impl AckMemory {
    /// Remembers `rpc` until `now + lifetime`, keeping at most `max`
    /// entries: returns true if that forgot the oldest one early.
    pub fn remember(&mut self, now: Nanos, lifetime: Nanos, max: usize, rpc: RpcId) -> bool {
        if !self.set.insert(rpc) {
            return false;
        }
        self.expiry.push_back((now.saturating_add(lifetime), rpc));
        if self.expiry.len() > max.max(1) {
            if let Some((_, old)) = self.expiry.pop_front() {
                self.set.remove(&old);
            }
            return true;
        }
        false
    }

    /// True if `rpc` was acknowledged recently.
    pub fn contains(&self, rpc: &RpcId) -> bool {
        self.set.contains(rpc)
    }

    /// Forgets entries whose time is up.
    pub fn expire(&mut self, now: Nanos) {
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
        self.expiry.front().map(|&(t, _)| t)
    }

    /// Entries remembered.
    pub fn len(&self) -> usize {
        self.set.len()
    }

    /// True when nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
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
        assert!(!m.remember(200, 100, 1, a));
        assert!(m.remember(201, 100, 1, b));
        assert!(!m.contains(&a) && m.contains(&b));
    }
}
