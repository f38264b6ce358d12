//! A keyed map whose first few entries stay out of its hash table.
//!
//! An endpoint with few RPCs (a client that calls and waits, a server
//! answering one at a time: the RPC under way, the one before until it is
//! acked and reaped) holds one to three entries in the RPC table's index,
//! and each RPC cost three hash operations there (an insert, a lookup that
//! misses, a removal; some 250 instructions). [`FrontMap`] keeps up to
//! [`FRONT`] entries in a short list that a lookup scans (a comparison of
//! the RPC id each, the address only when the ids match) before it goes to
//! the hash table, which it skips while the table is empty. A new entry
//! goes to the list when there is room, else to the table; a key is in one
//! place or the other, never both. It behaves as a hash map: the same
//! answers for every sequence of operations (a test below checks it
//! against one). Its one iteration, [`FrontMap::values_mut`], is in no
//! order its users rely on (the runtime's client table, when its endpoint
//! closes), so where an entry lives changes nothing but the cost. (With many entries, as in the simulator, a lookup
//! scans the full list before it hashes: a few comparisons more.)

use crate::keyed::KeyedMap;
use std::collections::hash_map::{Entry, OccupiedEntry};
use std::hash::Hash;

/// Entries kept out of the hash table at most.
pub const FRONT: usize = 4;

/// A map from `K` to `V`: up to [`FRONT`] entries in a list, the rest in
/// a [`KeyedMap`] (see the module's documentation).
#[derive(Debug)]
pub struct FrontMap<K, V> {
    /// Entries kept out of the table (at most [`FRONT`]), in no order.
    front: Vec<(K, V)>,
    /// Every other entry.
    rest: KeyedMap<K, V>,
}

impl<K, V> Default for FrontMap<K, V> {
    fn default() -> Self {
        FrontMap {
            front: Vec::new(),
            rest: KeyedMap::default(),
        }
    }
}

impl<K: Eq + Hash, V> FrontMap<K, V> {
    /// The value of `k`, if present.
    #[inline(always)]
    pub fn get(&self, k: &K) -> Option<&V> {
        for (f, v) in &self.front {
            if f == k {
                return Some(v);
            }
        }
        if self.rest.is_empty() {
            return None;
        }
        self.rest.get(k)
    }

    /// Adds `v` as `k`; returns the value `k` had, if any.
    #[inline]
    pub fn insert(&mut self, k: K, v: V) -> Option<V> {
        if let Some((_, old)) = self.front.iter_mut().find(|(f, _)| *f == k) {
            return Some(std::mem::replace(old, v));
        }
        if self.rest.is_empty() && self.front.len() < FRONT {
            if self.front.capacity() == 0 {
                self.front.reserve_exact(FRONT);
            }
            self.front.push((k, v));
            return None;
        }
        self.insert_rest(k, v)
    }

    /// [`FrontMap::insert`] of a key not in the list, with the table in
    /// use or the list full.
    #[inline(never)]
    fn insert_rest(&mut self, k: K, v: V) -> Option<V> {
        match self.rest.entry(k) {
            Entry::Occupied(mut e) => Some(std::mem::replace(e.get_mut(), v)),
            Entry::Vacant(e) => {
                if self.front.len() < FRONT {
                    let k = e.into_key();
                    self.front.push((k, v));
                } else {
                    e.insert(v);
                }
                None
            }
        }
    }

    /// Takes `k` out; returns its value, if it was present.
    #[inline]
    pub fn remove(&mut self, k: &K) -> Option<V> {
        if let Some(i) = self.front.iter().position(|(f, _)| f == k) {
            return Some(self.front.swap_remove(i).1);
        }
        if self.rest.is_empty() {
            return None;
        }
        self.rest.remove(k)
    }

    /// Mutable [`FrontMap::get`].
    #[inline(always)]
    pub fn get_mut(&mut self, k: &K) -> Option<&mut V> {
        for (f, v) in self.front.iter_mut() {
            if f == k {
                return Some(v);
            }
        }
        if self.rest.is_empty() {
            return None;
        }
        self.rest.get_mut(k)
    }

    /// The entry of `k` if it is there, to change or take out without
    /// looking it up again.
    #[inline(always)]
    pub fn occupied(&mut self, k: K) -> Option<Occupied<'_, K, V>> {
        if let Some(i) = self.front.iter().position(|(f, _)| *f == k) {
            return Some(Occupied::Front(&mut self.front, i));
        }
        if self.rest.is_empty() {
            return None;
        }
        match self.rest.entry(k) {
            Entry::Occupied(e) => Some(Occupied::Rest(e)),
            Entry::Vacant(_) => None,
        }
    }

    /// Every value, in no particular order.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> + '_ {
        self.front
            .iter_mut()
            .map(|(_, v)| v)
            .chain(self.rest.values_mut())
    }

    /// Entries.
    pub fn len(&self) -> usize {
        self.front.len() + self.rest.len()
    }

    /// True when there is no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An entry of a [`FrontMap`] that is there ([`FrontMap::occupied`]).
#[derive(Debug)]
pub enum Occupied<'a, K, V> {
    /// Entry `.1` of the list.
    Front(&'a mut Vec<(K, V)>, usize),
    /// An entry of the table.
    Rest(OccupiedEntry<'a, K, V>),
}

impl<K, V> Occupied<'_, K, V> {
    /// The entry's value.
    pub fn get_mut(&mut self) -> &mut V {
        match self {
            Occupied::Front(list, i) => &mut list[*i].1,
            Occupied::Rest(e) => e.get_mut(),
        }
    }

    /// Takes the entry out; returns its value.
    pub fn remove(self) -> V {
        match self {
            Occupied::Front(list, i) => list.swap_remove(i).1,
            Occupied::Rest(e) => e.remove(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A small deterministic generator.
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
    /// on few to many keys (entries in the list, in the table, and moving
    /// between them as the list fills and empties).
    #[test]
    fn behaves_as_a_hash_map() {
        for (seed, keys) in [(1u64, 2u64), (2, 4), (3, 5), (4, 9), (5, 64)] {
            let mut r = Lcg(seed);
            let mut m = FrontMap::<u64, u64>::default();
            let mut h = HashMap::<u64, u64>::new();
            for step in 0..20_000u64 {
                let k = r.next(keys);
                match r.next(8) {
                    0 | 1 => assert_eq!(m.insert(k, step), h.insert(k, step)),
                    2 | 3 => assert_eq!(m.remove(&k), h.remove(&k)),
                    4 => {
                        // Change in place, through either way in.
                        if let Some(v) = m.get_mut(&k) {
                            *v += 1;
                        }
                        if let Some(v) = h.get_mut(&k) {
                            *v += 1;
                        }
                    }
                    5 => match (m.occupied(k), h.remove(&k)) {
                        (Some(e), Some(hv)) => assert_eq!(e.remove(), hv),
                        (None, None) => {}
                        (a, b) => panic!("occupied {a:?} against {b:?}"),
                    },
                    6 => {
                        if let Some(mut e) = m.occupied(k) {
                            *e.get_mut() += 2;
                        }
                        if let Some(v) = h.get_mut(&k) {
                            *v += 2;
                        }
                    }
                    _ => assert_eq!(m.get(&k), h.get(&k)),
                }
                if step % 1_000 == 0 {
                    let mut a: Vec<u64> = m.values_mut().map(|v| *v).collect();
                    let mut b: Vec<u64> = h.values().copied().collect();
                    a.sort_unstable();
                    b.sort_unstable();
                    assert_eq!(a, b);
                }
                assert_eq!(m.len(), h.len());
                assert_eq!(m.is_empty(), h.is_empty());
                assert!(m.front.len() <= FRONT);
                // A key is in one place only.
                for (f, _) in &m.front {
                    assert!(!m.rest.contains_key(f));
                }
            }
            for k in 0..keys {
                assert_eq!(m.get(&k), h.get(&k));
            }
        }
    }

    /// A few entries at a time never reach the table.
    #[test]
    fn few_entries_never_reach_the_table() {
        let mut m = FrontMap::<u64, u64>::default();
        for k in 0..1_000u64 {
            assert_eq!(m.insert(k, k), None);
            assert_eq!(m.get(&k), Some(&k));
            if k >= 2 {
                assert_eq!(m.remove(&(k - 2)), Some(k - 2));
            }
            assert!(m.len() <= 2);
        }
        assert_eq!(m.rest.capacity(), 0);
    }
}
