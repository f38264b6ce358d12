//! The RPC table: every RPC of an endpoint, in slots that stay put while
//! the RPC lives.
//!
//! RPCs live in the slots of a vector (freed slots are reused, so it holds
//! no more than the most RPCs ever alive at once), found through a keyed
//! map from [`RpcId`] to slot. An RPC is moved once into its slot and once
//! out, never on a lookup. The slot of the last RPC looked up is
//! remembered, so the many lookups made while handling one packet or
//! sending one (all for the same RPC) cost a comparison of its id instead
//! of a hash lookup each. Every slot keeps its RPC's full id and every
//! lookup, remembered or not, checks it: a stale id, or one whose slot now
//! holds another RPC, finds nothing.
//!
//! An RPC that ends is not freed at once (as Linux's `homa_rpc_end`
//! marks an RPC dead and `homa_rpc_reap` frees it later): [`RpcTable::kill`]
//! makes it *dead*, which every lookup treats as absent (`get`,
//! `contains_key`, `len`, `keys` see only live RPCs), and puts it on a
//! bounded list; [`RpcTable::reap`] frees the oldest dead RPC (its map
//! entry, its slot, its messages) and gives back its filed timer for the
//! caller to cancel. A dead RPC keeps its map entry until reaped, so an id
//! that comes back while it is dead is seen by [`RpcTable::insert`], which
//! frees the dead one first.

use crate::front_map::FrontMap;
use crate::keyed::{quick_key, remembered, NO_KEY};
use crate::rpc::Rpc;
use crate::timers::RpcTimer;
use crate::RpcId;
use std::cell::Cell;
use std::collections::VecDeque;

/// One slot of the table: an RPC (live or dead) and its id, or no RPC
/// (a free slot, its `id` then stale). (Not `Option<(RpcId, Rpc)>`: an RPC
/// is large, and storing one as part of a new tuple built it on the stack
/// and copied it twice; `Option<Rpc>` has the layout of an `Rpc`, so an RPC
/// is moved into its slot with one copy.)
#[derive(Debug)]
struct Slot {
    id: RpcId,
    rpc: Option<Rpc>,
}

/// Every RPC of an endpoint, by id.
#[derive(Debug)]
pub struct RpcTable {
    /// Each id's slot. (Its first few entries are not hashed: see
    /// [`FrontMap`].)
    index: FrontMap<RpcId, u32>,
    /// Each slot's RPC (live or dead) with its id.
    slots: Vec<Slot>,
    /// Free slots.
    free: Vec<u32>,
    /// Dead RPCs not yet reaped, oldest first, with their slots. The
    /// caller bounds it (see `Endpoint::reap`).
    dead: VecDeque<(RpcId, u32)>,
    /// The last lookup: the id, the [`quick_key`] of its peer
    /// ([`NO_KEY`]: nothing remembered; see [`remembered`]) and its slot.
    last: Cell<(u64, u64, u32)>,
}

impl Default for RpcTable {
    fn default() -> RpcTable {
        RpcTable {
            index: FrontMap::default(),
            slots: Vec::new(),
            free: Vec::new(),
            dead: VecDeque::new(),
            last: Cell::new((0, NO_KEY, 0)),
        }
    }
}

impl RpcTable {
    /// The slot of `id`, if present.
    #[inline]
    fn slot_of(&self, id: &RpcId) -> Option<usize> {
        let key = quick_key(&id.peer);
        let (last_id, last_key, slot) = self.last.get();
        if key == last_key && id.id == last_id {
            return Some(slot as usize);
        }
        self.look_up(id, key)
    }

    /// [`RpcTable::slot_of`] through the map (kept out of line, so that
    /// the remembered case inlines to two comparisons).
    #[inline(never)]
    fn look_up(&self, id: &RpcId, key: u64) -> Option<usize> {
        let slot = *self.index.get(id)?;
        self.last.set((id.id, remembered(key), slot));
        Some(slot as usize)
    }

    /// The RPC `id`, if present.
    #[inline]
    pub fn get(&self, id: &RpcId) -> Option<&Rpc> {
        let slot = self.slots.get(self.slot_of(id)?)?;
        match &slot.rpc {
            // The map and the remembered lookup only ever name the slot of
            // the same id (the peer was compared by either); the id check
            // is a cheap second guard. A dead RPC is not there.
            Some(rpc) if slot.id.id == id.id && !rpc.dead => Some(rpc),
            _ => None,
        }
    }

    /// Mutable [`RpcTable::get`].
    #[inline]
    pub fn get_mut(&mut self, id: &RpcId) -> Option<&mut Rpc> {
        let i = self.slot_of(id)?;
        let slot = self.slots.get_mut(i)?;
        match &mut slot.rpc {
            Some(rpc) if slot.id.id == id.id && !rpc.dead => Some(rpc),
            _ => None,
        }
    }

    /// True if `id` is present.
    #[inline]
    pub fn contains_key(&self, id: &RpcId) -> bool {
        self.get(id).is_some()
    }

    /// Adds `rpc` as `id`. If `id` was present, live or dead, `rpc` takes
    /// its place (a dead one leaves the dead list) and this returns the
    /// timer the replaced RPC had filed, for the caller to cancel (see
    /// [`RpcTable::reap`]).
    #[inline]
    pub fn insert(&mut self, id: RpcId, rpc: Rpc) -> Option<Option<RpcTimer>> {
        self.insert_with(id, || rpc)
    }

    /// [`RpcTable::insert`] of the RPC `make` builds, in its slot (no copy
    /// of it: an RPC made first and then passed in was copied twice on its
    /// way, a new request's on the server's path to its reply). (Out of
    /// line: inlined into the packet dispatch, it cost the client's path
    /// there some 8 instructions per packet.)
    #[inline(never)]
    pub fn insert_with(
        &mut self,
        id: RpcId,
        make: impl FnOnce() -> Rpc,
    ) -> Option<Option<RpcTimer>> {
        match self.claim_slot(id) {
            Ok(slot) => {
                self.fill_slot(id, slot, make);
                None
            }
            Err(old) => Some(self.replace(id, old, make())),
        }
    }

    /// Files `id` in the index under a free slot (from the free list, or a
    /// new one) and returns that slot; if `id` was there already, leaves
    /// the table as it was and returns the slot it has. (An insert that
    /// gives back what it displaced, put back in the rare case there was
    /// one: a random id is nearly always new, and a lookup before the
    /// insert hashed and probed twice, about 40 instructions more per
    /// request.)
    #[inline(always)]
    fn claim_slot(&mut self, id: RpcId) -> Result<u32, u32> {
        let pushed = self.free.is_empty();
        let slot = take_slot(&mut self.free, &mut self.slots, id);
        if let Some(old) = self.index.insert(id, slot) {
            // The table as it was: the map's entry, the free slot.
            self.index.insert(id, old);
            if pushed {
                self.slots.pop();
            } else {
                self.free.push(slot);
            }
            return Err(old);
        }
        Ok(slot)
    }

    /// Writes the RPC `make` builds as `id` into `slot`, which
    /// [`RpcTable::claim_slot`] gave (free): where it lies, no copy. (An
    /// assignment would drop the old value between reading `rpc` and
    /// storing it, which kept the compiler from copying it straight into
    /// place.)
    #[inline(always)]
    fn fill_slot(&mut self, id: RpcId, slot: u32, make: impl FnOnce() -> Rpc) {
        let place = &mut self.slots[slot as usize];
        place.id = id;
        match &mut place.rpc {
            free @ None => *free = Some(make()),
            Some(_) => unreachable!("a free slot is empty"),
        }
        self.last
            .set((id.id, remembered(quick_key(&id.peer)), slot));
    }

    /// Adds a new RPC under the first id of `draw` that is neither 0 nor
    /// live, built by `make` in its slot, and returns that id and what
    /// [`RpcTable::insert`] would return: the timer of a dead RPC of that
    /// id, which the new one replaced. The same as drawing ids until
    /// `!contains_key(&id)` and then inserting, with the RPC written where
    /// it lies (no copy of it).
    #[inline]
    pub fn insert_fresh(
        &mut self,
        mut draw: impl FnMut() -> RpcId,
        make: impl FnOnce() -> Rpc,
    ) -> (RpcId, Option<Option<RpcTimer>>) {
        loop {
            let id = draw();
            if id.id == 0 {
                continue;
            }
            // (`HashMap::entry` here as well as in `insert` kept the
            // compiler from inlining it into `insert`, the server's path
            // for every new request, which took 17 instructions more.)
            match self.claim_slot(id) {
                Ok(slot) => {
                    self.fill_slot(id, slot, make);
                    return (id, None);
                }
                // (A map entry always names an occupied slot.)
                Err(old)
                    if self.slots[old as usize]
                        .rpc
                        .as_ref()
                        .is_some_and(|r| !r.dead) =>
                {
                    continue;
                }
                Err(old) => return (id, Some(self.replace(id, old, make()))),
            }
        }
    }

    /// [`RpcTable::insert`] of an id present in `slot`.
    #[cold]
    fn replace(&mut self, id: RpcId, slot: u32, rpc: Rpc) -> Option<RpcTimer> {
        let old = self.slots[slot as usize]
            .rpc
            .as_mut()
            .expect("occupied slot");
        if old.dead {
            self.dead.retain(|&(_, s)| s != slot);
        }
        let timer = old.timer;
        *old = rpc;
        self.last
            .set((id.id, remembered(quick_key(&id.peer)), slot));
        timer
    }

    /// Takes `id` out of the table.
    pub fn remove(&mut self, id: &RpcId) -> Option<Rpc> {
        let slot = self.free_slot(id)?;
        self.slots[slot].rpc.take()
    }

    /// Marks live RPC `id` dead: from now on it is absent to every lookup,
    /// but it keeps its map entry, its slot and its memory until
    /// [`RpcTable::reap`] frees it. Returns false if `id` was not live.
    pub fn kill(&mut self, id: &RpcId) -> bool {
        let Some(slot) = self.slot_of(id) else {
            return false;
        };
        let place = &mut self.slots[slot];
        match &mut place.rpc {
            Some(rpc) if place.id.id == id.id && !rpc.dead => rpc.dead = true,
            _ => return false,
        }
        self.dead.push_back((*id, slot as u32));
        true
    }

    /// Frees the oldest dead RPC: its map entry, its slot and its memory.
    /// Returns its id and the timer it had filed, which the caller cancels
    /// (a timer of a dead RPC that ran meanwhile is no longer filed:
    /// cancelling it then removes nothing); `None` if no RPC is dead.
    pub fn reap(&mut self) -> Option<(RpcId, Option<RpcTimer>)> {
        let (id, slot) = self.dead.pop_front()?;
        self.index.remove(&id);
        self.free.push(slot);
        if self.last.get().2 == slot {
            self.last.set((0, NO_KEY, 0));
        }
        let place = &mut self.slots[slot as usize].rpc;
        let timer = match place {
            Some(rpc) => {
                debug_assert!(rpc.dead);
                rpc.timer
            }
            None => unreachable!("a dead RPC's slot is occupied"),
        };
        // Dropped where it lies (an RPC is large: moving it out costs more
        // than dropping it).
        *place = None;
        Some((id, timer))
    }

    /// Dead RPCs not yet reaped.
    pub fn dead_len(&self) -> usize {
        self.dead.len()
    }

    /// Takes live RPC `id` out of the map and the remembered lookup and
    /// puts its slot on the free list; the caller empties the slot.
    fn free_slot(&mut self, id: &RpcId) -> Option<usize> {
        self.get(id)?;
        let slot = self.index.remove(id)?;
        self.free.push(slot);
        if self.last.get().2 == slot {
            self.last.set((0, NO_KEY, 0));
        }
        Some(slot as usize)
    }

    /// Live RPCs (dead ones not counted).
    pub fn len(&self) -> usize {
        self.index.len() - self.dead.len()
    }

    /// True when there is no live RPC.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The ids of all live RPCs, in no particular order.
    pub fn keys(&self) -> impl Iterator<Item = &RpcId> + '_ {
        self.slots
            .iter()
            .filter(|s| s.rpc.as_ref().is_some_and(|rpc| !rpc.dead))
            .map(|s| &s.id)
    }
}

/// A free slot for a new RPC `id`: one from the free list, or a new one.
#[inline]
fn take_slot(free: &mut Vec<u32>, slots: &mut Vec<Slot>, id: RpcId) -> u32 {
    match free.pop() {
        Some(s) => s,
        None => {
            slots.push(Slot { id, rpc: None });
            u32::try_from(slots.len() - 1).expect("fewer than 2^32 RPCs")
        }
    }
}

impl std::ops::Index<&RpcId> for RpcTable {
    type Output = Rpc;

    /// The RPC `id`; panics if absent (as a map's index does).
    fn index(&self, id: &RpcId) -> &Rpc {
        self.get(id).expect("no such RPC")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpc::Phase;

    fn id(peer: &str, id: u64) -> RpcId {
        RpcId {
            peer: peer.parse().unwrap(),
            id,
        }
    }

    fn rpc(t: u64) -> Rpc {
        Rpc::new(Phase::InService, t)
    }

    #[test]
    fn insert_with_builds_the_rpc_only_where_insert_would_put_it() {
        let mut t = RpcTable::default();
        let a = id("10.0.0.1:1", 2);
        let b = id("10.0.0.1:1", 4);
        // A new id: built once, in a new slot, remembered for lookups.
        assert!(t.insert_with(a, || rpc(1)).is_none());
        assert!(t.insert_with(b, || rpc(2)).is_none());
        assert_eq!((t.len(), t.slots.len()), (2, 2));
        assert_eq!(t.get(&a).unwrap().last_heard, 1);
        // Over a dead RPC: it takes its place and its timer comes back.
        t.get_mut(&b).unwrap().timer = Some(RpcTimer {
            at: 7,
            lenient: false,
        });
        assert!(t.kill(&b));
        assert_eq!(
            t.insert_with(b, || rpc(3)),
            Some(Some(RpcTimer {
                at: 7,
                lenient: false
            }))
        );
        assert_eq!(t.get(&b).unwrap().last_heard, 3);
        assert_eq!((t.len(), t.slots.len()), (2, 2));
        // A freed slot is reused.
        t.remove(&a);
        let c = id("10.0.0.2:1", 6);
        assert!(t.insert_with(c, || rpc(4)).is_none());
        assert_eq!(t.slots.len(), 2);
        assert_eq!(t[&c].last_heard, 4);
    }

    #[test]
    fn slots_are_reused_and_stale_ids_find_nothing() {
        let mut t = RpcTable::default();
        let a = id("10.0.0.1:1", 2);
        let b = id("10.0.0.1:1", 4);
        assert!(t.insert(a, rpc(1)).is_none());
        assert!(t.insert(b, rpc(2)).is_none());
        assert_eq!(t.get(&a).unwrap().last_heard, 1);
        // Remove `a` right after a lookup made it the remembered one; `c`
        // takes its slot.
        assert_eq!(t.remove(&a).unwrap().last_heard, 1);
        assert!(t.get(&a).is_none());
        let c = id("10.0.0.1:1", 6);
        assert!(t.insert(c, rpc(3)).is_none());
        assert_eq!(t.slots.len(), 2, "the freed slot was reused");
        assert!(t.get(&a).is_none() && t.get_mut(&a).is_none());
        assert!(!t.contains_key(&a));
        assert_eq!(t.get(&c).unwrap().last_heard, 3);
        assert_eq!(t[&c].last_heard, 3);
        // The same id with another peer, or another port, is another RPC.
        assert!(t.get(&id("10.0.0.2:1", 6)).is_none());
        assert!(t.get(&id("10.0.0.1:2", 6)).is_none());
        assert!(t.remove(&id("10.0.0.1:2", 6)).is_none());
        assert_eq!(t.get(&c).unwrap().last_heard, 3);
        // Replacing keeps one entry.
        assert_eq!(t.insert(c, rpc(4)), Some(None));
        assert_eq!(t.get(&c).unwrap().last_heard, 4);
        assert_eq!(t.len(), 2);
        let mut keys: Vec<_> = t.keys().copied().collect();
        keys.sort_unstable();
        assert_eq!(keys, vec![b, c]);
        // IPv6 ids work (through the map alone).
        let v = id("[::1]:9", 8);
        t.insert(v, rpc(5));
        assert_eq!(t.get(&v).unwrap().last_heard, 5);
        assert!(t.get(&id("[::1]:9", 10)).is_none());
        assert!(t.get(&id("[::2]:9", 8)).is_none());
        assert_eq!(t.remove(&v).unwrap().last_heard, 5);
        assert!(t.get(&v).is_none());
        // Killed: gone the same way, though not yet freed.
        assert!(t.kill(&b));
        assert!(!t.kill(&b));
        assert!(t.get(&b).is_none() && t.get(&c).is_some());
    }

    #[test]
    fn dead_rpcs_are_absent_until_reaped_then_freed() {
        let mut t = RpcTable::default();
        let a = id("10.0.0.1:1", 2);
        let b = id("10.0.0.1:1", 4);
        t.insert(a, rpc(1));
        let mut r = rpc(2);
        r.timer = Some(RpcTimer {
            at: 7,
            lenient: false,
        });
        t.insert(b, r);
        assert!(t.get(&b).is_some(), "remembered as the last lookup");
        assert!(t.kill(&b));
        // Absent to every lookup, remembered or not, and to every count.
        assert!(t.get(&b).is_none() && t.get_mut(&b).is_none() && !t.contains_key(&b));
        assert_eq!((t.len(), t.dead_len()), (1, 1));
        assert_eq!(t.keys().copied().collect::<Vec<_>>(), vec![a]);
        assert!(t.remove(&b).is_none(), "a dead RPC is not removed twice");
        assert!(!t.kill(&b));
        // Reaping frees its slot and gives back its timer.
        assert_eq!(
            t.reap(),
            Some((
                b,
                Some(RpcTimer {
                    at: 7,
                    lenient: false
                })
            ))
        );
        assert_eq!(t.reap(), None);
        assert_eq!((t.len(), t.dead_len(), t.index.len()), (1, 0, 1));
        let c = id("10.0.0.1:1", 6);
        t.insert(c, rpc(3));
        assert_eq!(t.slots.len(), 2, "the reaped slot was reused");
        // An id that comes back while dead replaces the dead RPC, which
        // leaves the dead list.
        assert!(t.kill(&a));
        assert!(t.kill(&c));
        assert!(t.is_empty());
        assert_eq!(t.insert(a, rpc(4)), Some(None));
        assert_eq!(t.get(&a).unwrap().last_heard, 4);
        assert_eq!((t.len(), t.dead_len()), (1, 1));
        assert_eq!(t.reap().map(|(i, _)| i), Some(c));
        assert_eq!(t.reap(), None);
        assert_eq!(t.get(&a).unwrap().last_heard, 4);
        assert_eq!(t.index.len(), 1);
    }

    #[test]
    fn insert_fresh_skips_zero_and_live_ids_and_replaces_dead_ones() {
        let mut t = RpcTable::default();
        let (a, b, c) = (
            id("10.0.0.1:1", 2),
            id("10.0.0.1:1", 4),
            id("10.0.0.1:1", 6),
        );
        let mut r = rpc(1);
        r.timer = Some(RpcTimer {
            at: 9,
            lenient: true,
        });
        t.insert(a, r);
        t.insert(b, rpc(2));
        assert!(t.kill(&b));
        // 0 and live `a` are passed over; dead `b` is replaced.
        let mut ids = vec![id("10.0.0.1:1", 0), a, b, c].into_iter();
        let (got, old) = t.insert_fresh(|| ids.next().unwrap(), || rpc(3));
        assert_eq!((got, old), (b, Some(None)));
        assert_eq!(ids.next(), Some(c), "no id drawn after the one taken");
        assert_eq!(t.get(&b).unwrap().last_heard, 3);
        assert_eq!((t.len(), t.dead_len()), (2, 0));
        assert_eq!(
            t.get(&a).unwrap().last_heard,
            1,
            "the live RPC is untouched"
        );
        // A new id takes a new slot, found by every lookup.
        let (got, old) = t.insert_fresh(|| c, || rpc(4));
        assert_eq!((got, old), (c, None));
        assert_eq!(t.get(&c).unwrap().last_heard, 4);
        assert_eq!((t.len(), t.slots.len()), (3, 3));
        // A dead RPC's timer comes back to be cancelled.
        assert!(t.kill(&a));
        let (_, old) = t.insert_fresh(|| a, || rpc(5));
        assert_eq!(
            old,
            Some(Some(RpcTimer {
                at: 9,
                lenient: true
            }))
        );
        assert_eq!(t.get(&a).unwrap().last_heard, 5);
    }

    #[test]
    fn churn_stays_within_the_peak() {
        let mut t = RpcTable::default();
        for i in 0..10_000u64 {
            let x = id("10.0.0.1:1", 2 * i);
            t.insert(x, rpc(i));
            assert_eq!(t.get(&x).unwrap().last_heard, i);
            if i >= 3 {
                let old = id("10.0.0.1:1", 2 * (i - 3));
                assert_eq!(t.remove(&old).unwrap().last_heard, i - 3);
                assert!(t.get(&old).is_none());
            }
        }
        assert_eq!(t.len(), 3);
        assert!(t.slots.len() <= 4);
        assert!(!t.is_empty());
    }
}
