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
        match (old, new) {
            _ if old == new => {}
            (Some((old_left, seq)), Some((left, new_seq))) if seq == new_seq => {
                // Only the bytes left changed (every packet): the age order
                // stays as it is.
                self.by_size.remove(&(old_left, seq, id));
                self.by_size.insert((left, seq, id));
            }
            _ => {
                if let Some(k) = old {
                    self.remove(id, k);
                }
                if let Some((left, seq)) = new {
                    self.by_size.insert((left, seq, id));
                    self.by_age.insert((seq, id));
                }
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
        if let (Some(o), Some(n)) = (old, new) {
            // Re-keying a filed RPC (every packet: its bytes left shrink):
            // stay in the peer's set, touch the heads only if the peer's
            // best changed and the age order only if the age did.
            if let Some(set) = self.by_peer.get_mut(&AddrKey(id.peer)) {
                let before = set.first().copied();
                if set.remove(&(o.0, o.1, id)) {
                    set.insert((n.0, n.1, id));
                    let after = set.first().copied();
                    if before != after {
                        if let Some(h) = before {
                            self.heads.remove(&h);
                        }
                        if let Some(h) = after {
                            self.heads.insert(h);
                        }
                    }
                    if o.1 != n.1 {
                        self.by_age.remove(&(o.1, id));
                        self.by_age.insert((n.1, id));
                    }
                    return;
                }
            }
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

    proptest::proptest! {
        /// Random filings, re-keyings (same age or a new one) and removals
        /// leave both queues ordered exactly as a sorted model says: the
        /// fast re-keying paths change nothing.
        #[test]
        fn queues_match_a_sorted_model(
            ops in proptest::collection::vec((0u64..24, 0u32..6, 0u8..4, 0u64..5), 1..300),
        ) {
            let peers: Vec<SocketAddr> =
                (1..=4).map(|p| format!("10.0.0.{p}:9").parse().unwrap()).collect();
            let mut pq = PeerSrptQueue::default();
            let mut sq = SrptQueue::default();
            let mut model: std::collections::BTreeMap<RpcId, Key> = Default::default();
            for (n, left, what, age) in ops {
                let id = RpcId { id: n, peer: peers[(n % 4) as usize] };
                let old = model.get(&id).copied();
                let new = match what {
                    0 => None,
                    // Same age, new bytes left (the per-packet case).
                    1 | 2 => Some((left, old.map_or(age, |k| k.1))),
                    _ => Some((left, age)),
                };
                pq.refile(id, old, new);
                sq.refile(id, old, new);
                match new {
                    Some(k) => model.insert(id, k),
                    None => model.remove(&id),
                };
                let mut by_size: Vec<(u32, u64, RpcId)> =
                    model.iter().map(|(&id, &(l, a))| (l, a, id)).collect();
                by_size.sort();
                let mut by_age: Vec<(u64, RpcId)> =
                    model.iter().map(|(&id, &(_, a))| (a, id)).collect();
                by_age.sort();
                let mut heads: Vec<(u32, u64, RpcId)> = Vec::new();
                for e in &by_size {
                    if !heads.iter().any(|h| h.2.peer == e.2.peer) {
                        heads.push(*e);
                    }
                }
                let want_heads: Vec<RpcId> = heads.iter().map(|e| e.2).collect();
                let want_age: Vec<RpcId> = by_age.iter().map(|e| e.1).collect();
                let want_size: Vec<RpcId> = by_size.iter().map(|e| e.2).collect();
                proptest::prop_assert_eq!(pq.iter_heads().collect::<Vec<_>>(), want_heads);
                proptest::prop_assert_eq!(pq.iter_by_age().collect::<Vec<_>>(), want_age.clone());
                proptest::prop_assert_eq!(sq.iter().collect::<Vec<_>>(), want_size);
                proptest::prop_assert_eq!(sq.iter_by_age().collect::<Vec<_>>(), want_age);
                proptest::prop_assert_eq!(pq.is_empty(), model.is_empty());
            }
            proptest::prop_assert_eq!(pq.by_peer.len(), model.keys().map(|i| i.peer).collect::<std::collections::BTreeSet<_>>().len());
        }
    }
}
