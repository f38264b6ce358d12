//! Hash tables keyed by what peers send (RPC ids, addresses, ports).
//!
//! Every such table hashes with a per-table random key. An unkeyed hash
//! (FxHash, which these tables used before) can be inverted: an attacker
//! who picks RPC ids and ports could make every key land in one bucket and
//! turn each lookup into a scan of the table. None of these tables is
//! iterated, so the random key never changes the core's behaviour, and the
//! simulator stays deterministic.

/// A map whose keys are chosen by peers.
pub type KeyedMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// A set whose members are chosen by peers.
pub type KeyedSet<T> = std::collections::HashSet<T, foldhash::fast::RandomState>;
