//! A keyed map with one entry kept out of its hash table.
//!
//! A thread that calls and waits has one RPC outstanding at a time: its
//! entry is inserted, looked up and removed once each per RPC, three hash
//! operations (some 250 instructions per RPC on the client) for a table
//! that holds one entry. [`FrontMap`] keeps an entry in a slot of its own
//! (the *front*) whenever the slot is free when it is inserted, and every
//! operation compares the key with the front's before it goes to the hash
//! table, which it skips when the table is empty. With one entry at a time
//! no key is ever hashed; with more, the rest live in the table as before
//! (a key is in one place or the other, never both). It behaves as a hash
//! map: the same answers for every sequence of operations (a test below
//! checks it against one). Nothing iterates it in an order that matters.

use homa_core::keyed::KeyedMap;
use std::collections::hash_map::{Entry, OccupiedEntry};
use std::hash::Hash;

/// A map from `K` to `V`: one entry in a slot of its own, the rest in a
/// [`KeyedMap`] (see the module's documentation).
pub(super) struct FrontMap<K, V> {
    /// The entry kept out of the table, if any.
    front: Option<(K, V)>,
    /// Every other entry.
    rest: KeyedMap<K, V>,
}

impl<K, V> Default for FrontMap<K, V> {
    fn default() -> Self {
        FrontMap {
            front: None,
            rest: KeyedMap::default(),
        }
    }
}

/// An entry of a [`FrontMap`] that is there ([`FrontMap::occupied`]).
pub(super) enum Occupied<'a, K, V> {
    /// The front slot (holding the entry).
    Front(&'a mut Option<(K, V)>),
    /// An entry of the table.
    Rest(OccupiedEntry<'a, K, V>),
}

impl<K, V> Occupied<'_, K, V> {
    /// The entry's value.
    pub(super) fn get_mut(&mut self) -> &mut V {
        match self {
            Occupied::Front(Some((_, v))) => v,
            Occupied::Front(None) => unreachable!("an occupied front"),
            Occupied::Rest(e) => e.get_mut(),
        }
    }

    /// Takes the entry out; returns its value.
    pub(super) fn remove(self) -> V {
        match self {
            Occupied::Front(f) => f.take().expect("an occupied front").1,
            Occupied::Rest(e) => e.remove(),
        }
    }
}

impl<K: Eq + Hash + Copy, V> FrontMap<K, V> {
    /// True if the front slot holds `k`.
    #[inline]
    fn at_front(&self, k: &K) -> bool {
        matches!(&self.front, Some((f, _)) if f == k)
    }

    /// Adds `v` as `k`; returns the value `k` had, if any.
    #[inline]
    pub(super) fn insert(&mut self, k: K, v: V) -> Option<V> {
        // (The usual case, the map empty, inline: the entry is written in
        // place. Through the general case it was copied twice on its way.)
        if self.rest.is_empty() {
            if let front @ None = &mut self.front {
                *front = Some((k, v));
                return None;
            }
        }
        self.insert_slow(k, v)
    }

    /// [`FrontMap::insert`] into a map that holds something.
    #[inline(never)]
    fn insert_slow(&mut self, k: K, v: V) -> Option<V> {
        match &mut self.front {
            Some((f, old)) if *f == k => Some(std::mem::replace(old, v)),
            Some(_) => self.rest.insert(k, v),
            front @ None => {
                let old = self.rest.remove(&k);
                *front = Some((k, v));
                old
            }
        }
    }

    /// The value of `k`, if present.
    #[inline]
    pub(super) fn get(&self, k: &K) -> Option<&V> {
        match &self.front {
            Some((f, v)) if f == k => Some(v),
            _ if self.rest.is_empty() => None,
            _ => self.rest.get(k),
        }
    }

    /// Mutable [`FrontMap::get`].
    #[inline]
    pub(super) fn get_mut(&mut self, k: &K) -> Option<&mut V> {
        match &mut self.front {
            Some((f, v)) if f == k => Some(v),
            _ if self.rest.is_empty() => None,
            _ => self.rest.get_mut(k),
        }
    }

    /// The entry of `k`, if present, to change or take out.
    #[inline]
    pub(super) fn occupied(&mut self, k: K) -> Option<Occupied<'_, K, V>> {
        if self.at_front(&k) {
            return Some(Occupied::Front(&mut self.front));
        }
        if self.rest.is_empty() {
            return None;
        }
        match self.rest.entry(k) {
            Entry::Occupied(e) => Some(Occupied::Rest(e)),
            Entry::Vacant(_) => None,
        }
    }

    /// Takes `k` out; returns its value, if it was present.
    #[inline]
    pub(super) fn remove(&mut self, k: &K) -> Option<V> {
        if self.at_front(k) {
            return self.front.take().map(|(_, v)| v);
        }
        if self.rest.is_empty() {
            return None;
        }
        self.rest.remove(k)
    }

    /// Entries.
    pub(super) fn len(&self) -> usize {
        self.front.is_some() as usize + self.rest.len()
    }

    /// Every value, in no particular order.
    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut V> + '_ {
        self.front
            .iter_mut()
            .map(|(_, v)| v)
            .chain(self.rest.values_mut())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A small deterministic generator (no dependency for one test).
    struct Lcg(u64);

    impl Lcg {
        fn next(&mut self, n: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) % n
        }
    }

    /// Every operation gives what a hash map gives, over random sequences
    /// of operations on few keys (so that keys meet in the front slot and
    /// in the table), with one to many entries at once.
    #[test]
    fn behaves_as_a_hash_map() {
        for (seed, keys) in [(1u64, 2u64), (2, 3), (3, 8), (4, 40)] {
            let mut r = Lcg(seed);
            let mut m = FrontMap::<u64, u64>::default();
            let mut h = HashMap::<u64, u64>::new();
            for step in 0..20_000u64 {
                let k = r.next(keys);
                match r.next(7) {
                    0 | 1 => assert_eq!(m.insert(k, step), h.insert(k, step)),
                    2 => assert_eq!(m.remove(&k), h.remove(&k)),
                    3 => assert_eq!(m.get(&k), h.get(&k)),
                    4 => {
                        if let Some(v) = m.get_mut(&k) {
                            *v += 1;
                        }
                        if let Some(v) = h.get_mut(&k) {
                            *v += 1;
                        }
                    }
                    5 => {
                        let want = h.get(&k).copied();
                        match m.occupied(k) {
                            None => assert_eq!(want, None),
                            Some(mut e) => {
                                assert_eq!(Some(*e.get_mut()), want);
                                if step % 2 == 0 {
                                    assert_eq!(Some(e.remove()), h.remove(&k));
                                } else {
                                    *e.get_mut() += 3;
                                    *h.get_mut(&k).unwrap() += 3;
                                }
                            }
                        }
                    }
                    _ => {
                        for v in m.values_mut() {
                            *v ^= 1;
                        }
                        for v in h.values_mut() {
                            *v ^= 1;
                        }
                    }
                }
                assert_eq!(m.len(), h.len());
                // A key is in one place only.
                if let Some((f, _)) = &m.front {
                    assert!(!m.rest.contains_key(f));
                }
            }
            let mut all: Vec<u64> = m.values_mut().map(|v| *v).collect();
            let mut want: Vec<u64> = h.values().copied().collect();
            all.sort_unstable();
            want.sort_unstable();
            assert_eq!(all, want);
        }
    }

    /// One entry at a time (a thread that calls and waits) stays in the
    /// front slot: the table is never used.
    #[test]
    fn one_entry_at_a_time_never_reaches_the_table() {
        let mut m = FrontMap::<u64, u64>::default();
        for k in 0..1_000 {
            assert_eq!(m.insert(k, k), None);
            assert_eq!(m.get(&k), Some(&k));
            *m.get_mut(&k).unwrap() += 1;
            assert_eq!(m.occupied(k).unwrap().remove(), k + 1);
            assert_eq!(m.len(), 0);
            assert_eq!(m.rest.capacity(), 0);
        }
    }
}
