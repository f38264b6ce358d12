//! An SRPT queue of RPCs: ordered by bytes left (then age), and by age alone
//! for the FIFO share. Used twice: by the sender for messages with packets to
//! send, by the receiver for messages that need grants.

use crate::RpcId;
use std::collections::BTreeSet;

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

#[cfg(test)]
mod tests {
    use super::*;

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
