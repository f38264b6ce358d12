//! SRPT queues of RPCs: ordered by bytes left (then age), and by age alone
//! for the FIFO share. [`SrptQueue`] serves the sender (messages with
//! packets to send); [`PeerSrptQueue`] the receiver (messages that need
//! grants), which grants at most one message per peer and so must find each
//! peer's best message without walking the others.

use crate::keyed::{AddrKey, KeyedMap};
use crate::RpcId;
use std::collections::BTreeSet;
use std::net::SocketAddr;

/// Where an RPC is filed: (bytes left, creation sequence number).
pub type Key = (u32, u64);

/// RPCs in SRPT order and in age order.
#[derive(Debug, Default)]
pub struct SrptQueue {
    by_size: BTreeSet<(u32, u64, RpcId)>,
    by_age: BTreeSet<(u64, RpcId)>,
}

impl SrptQueue {
    /// Moves `id` from `old` to `new` (either may be absent); returns `new`,
    /// which the caller stores as the RPC's current key.
    pub fn refile(&mut self, id: RpcId, old: Option<Key>, new: Option<Key>) -> Option<Key> {
        if old != new {
            if let Some(k) = old {
                self.remove(id, k);
            }
            if let Some((left, seq)) = new {
                self.by_size.insert((left, seq, id));
                self.by_age.insert((seq, id));
            }
        }
        new
    }

    /// Takes `id`, filed under `key`, out of the queue.
    pub fn remove(&mut self, id: RpcId, (left, seq): Key) {
        self.by_size.remove(&(left, seq, id));
        self.by_age.remove(&(seq, id));
    }

    /// The RPC with the fewest bytes left.
    pub fn shortest(&self) -> Option<RpcId> {
        self.by_size.first().map(|&(_, _, id)| id)
    }

    /// The oldest RPC.
    pub fn oldest(&self) -> Option<RpcId> {
        self.by_age.first().map(|&(_, id)| id)
    }

    /// All RPCs, oldest first.
    pub fn iter_by_age(&self) -> impl Iterator<Item = RpcId> + '_ {
        self.by_age.iter().map(|&(_, id)| id)
    }

    /// All RPCs, fewest bytes left first.
    pub fn iter(&self) -> impl Iterator<Item = RpcId> + '_ {
        self.by_size.iter().map(|&(_, _, id)| id)
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.by_size.is_empty()
    }
}

/// RPCs grouped by peer: each peer's best (fewest bytes left, then oldest)
/// RPC in SRPT order, and all RPCs by age. Walking the first `k` peers costs
/// O(k) however many RPCs each peer has (a peer with 10,000 partly received
/// messages must not make every grant decision walk them).
#[derive(Debug, Default)]
pub struct PeerSrptQueue {
    by_peer: KeyedMap<AddrKey, BTreeSet<(u32, u64, RpcId)>>,
    heads: BTreeSet<(u32, u64, RpcId)>,
    by_age: BTreeSet<(u64, RpcId)>,
}

impl PeerSrptQueue {
    /// Moves `id` from `old` to `new` (either may be absent).
    pub fn refile(&mut self, id: RpcId, old: Option<Key>, new: Option<Key>) {
        if old == new {
            return;
        }
        if let Some(k) = old {
            self.remove(id, k);
        }
        if let Some((left, seq)) = new {
            let entry = (left, seq, id);
            let set = self.by_peer.entry(AddrKey(id.peer)).or_default();
            let head = set.first().copied();
            set.insert(entry);
            if head.is_none_or(|h| entry < h) {
                if let Some(h) = head {
                    self.heads.remove(&h);
                }
                self.heads.insert(entry);
            }
            self.by_age.insert((seq, id));
        }
    }

    /// Takes `id`, filed under `key`, out of the queue.
    pub fn remove(&mut self, id: RpcId, (left, seq): Key) {
        let entry = (left, seq, id);
        self.by_age.remove(&(seq, id));
        let Some(set) = self.by_peer.get_mut(&AddrKey(id.peer)) else {
            return;
        };
        if !set.remove(&entry) {
            return;
        }
        if self.heads.remove(&entry) {
            if let Some(&next) = set.first() {
                self.heads.insert(next);
            }
        }
        if set.is_empty() {
            self.by_peer.remove(&AddrKey(id.peer));
        }
    }

    /// Each peer's best RPC, fewest bytes left first.
    pub fn iter_heads(&self) -> impl Iterator<Item = RpcId> + '_ {
        self.heads.iter().map(|&(_, _, id)| id)
    }

    /// All RPCs, oldest first.
    pub fn iter_by_age(&self) -> impl Iterator<Item = RpcId> + '_ {
        self.by_age.iter().map(|&(_, id)| id)
    }

    /// `peer`'s best RPC, if it has any.
    pub fn best_of(&self, peer: SocketAddr) -> Option<RpcId> {
        self.by_peer
            .get(&AddrKey(peer))
            .and_then(|s| s.first())
            .map(|&(_, _, id)| id)
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.heads.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_queue_yields_each_peers_best_in_srpt_order() {
        let p1: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let p2: SocketAddr = "127.0.0.1:2".parse().unwrap();
        let id = |peer, id| RpcId { peer, id };
        let mut q = PeerSrptQueue::default();
        // p1 has many messages, all shorter than p2's one.
        for i in 0..100u64 {
            q.refile(id(p1, 2 * i + 1), None, Some((100 + i as u32, i)));
        }
        q.refile(id(p2, 1), None, Some((5_000, 200)));
        assert_eq!(
            q.iter_heads().collect::<Vec<_>>(),
            vec![id(p1, 1), id(p2, 1)]
        );
        // p1's best grows past p2's: p1's next best heads it, after p2.
        q.refile(id(p1, 1), Some((100, 0)), Some((9_000, 0)));
        assert_eq!(
            q.iter_heads().collect::<Vec<_>>(),
            vec![id(p1, 3), id(p2, 1)]
        );
        assert_eq!(q.iter_by_age().next(), Some(id(p1, 1)));
        // Removing p2's only message removes the peer.
        q.remove(id(p2, 1), (5_000, 200));
        assert_eq!(q.iter_heads().collect::<Vec<_>>(), vec![id(p1, 3)]);
        for i in 0..100u64 {
            let k = if i == 0 {
                (9_000, 0)
            } else {
                (100 + i as u32, i)
            };
            q.remove(id(p1, 2 * i + 1), k);
        }
        assert!(q.is_empty());
        assert!(q.by_peer.is_empty() && q.by_age.is_empty());
    }

    #[test]
    fn orders_by_size_then_age_and_by_age() {
        let peer = "127.0.0.1:1".parse().unwrap();
        let a = RpcId { peer, id: 2 };
        let b = RpcId { peer, id: 4 };
        let mut q = SrptQueue::default();
        let ka = q.refile(a, None, Some((500, 1)));
        let kb = q.refile(b, None, Some((100, 2)));
        assert_eq!(q.shortest(), Some(b));
        assert_eq!(q.oldest(), Some(a));
        // b grows past a: a is now shortest.
        let kb = q.refile(b, kb, Some((900, 2)));
        assert_eq!(q.iter().collect::<Vec<_>>(), vec![a, b]);
        q.remove(a, ka.unwrap());
        assert_eq!(q.shortest(), Some(b));
        q.refile(b, kb, None);
        assert!(q.is_empty());
    }
}
