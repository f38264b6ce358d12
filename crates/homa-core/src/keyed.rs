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

use std::hash::{Hash, Hasher};
use std::net::SocketAddr;

/// Feeds `addr` to `state` as two integers. (`SocketAddr`'s own `Hash`
/// writes five pieces — variant, length, octets, port — and these tables
/// hash an address on every packet.) Hashes only what `==` compares, so
/// equal addresses hash equally.
pub fn hash_addr<H: Hasher>(addr: &SocketAddr, state: &mut H) {
    match addr {
        SocketAddr::V4(a) => {
            state.write_u64(u64::from(u32::from(*a.ip())) << 16 | u64::from(a.port()))
        }
        SocketAddr::V6(a) => {
            state.write_u128(u128::from(*a.ip()));
            state.write_u64(u64::from(a.port()) | 1 << 16);
        }
    }
}

/// An IPv4 address and port in one nonzero integer (address, port, and a
/// bit that no IPv4 key lacks), compared in one instruction; 0 for an IPv6
/// address. The tables use it to remember their last lookup (IPv6 lookups
/// always go through the map).
#[inline]
pub fn quick_key(addr: &SocketAddr) -> u64 {
    match addr {
        SocketAddr::V4(a) => 1 << 48 | u64::from(u32::from(*a.ip())) << 16 | u64::from(a.port()),
        SocketAddr::V6(_) => 0,
    }
}

/// A peer's address as a key of a [`KeyedMap`]: the same address, hashed
/// with [`hash_addr`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddrKey(pub SocketAddr);

impl Hash for AddrKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        hash_addr(&self.0, state);
    }
}

impl From<SocketAddr> for AddrKey {
    fn from(a: SocketAddr) -> Self {
        AddrKey(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn equal_addresses_hash_equally_and_close_ones_apart() {
        let s = foldhash::fast::RandomState::default();
        let h = |a: &str| s.hash_one(AddrKey(a.parse().unwrap()));
        assert_eq!(h("10.0.0.1:4000"), h("10.0.0.1:4000"));
        assert_ne!(h("10.0.0.1:4000"), h("10.0.0.1:4001"));
        assert_ne!(h("10.0.0.1:4000"), h("10.0.0.2:4000"));
        assert_eq!(h("[::1]:9"), h("[::1]:9"));
        assert_ne!(h("[::1]:9"), h("[::2]:9"));
        // An IPv4 address and an IPv6 one with the same low bits differ.
        assert_ne!(h("0.0.0.1:9"), h("[::1]:9"));
    }
}
