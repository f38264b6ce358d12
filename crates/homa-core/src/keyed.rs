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

/// An IPv4 address and port in one integer below 2^48 (the address's
/// bytes as they lie, then the port), compared in one instruction;
/// [`V6_KEY`] for an IPv6 address. The tables use it to remember their
/// last lookup, and never remember [`V6_KEY`] (IPv6 lookups always go
/// through the map), so a key equal to the one remembered is the same
/// IPv4 address. (No byte swap and no marker bit: a table looks up a
/// dozen times per packet, and the key was a third of each lookup.)
#[inline]
pub fn quick_key(addr: &SocketAddr) -> u64 {
    match addr {
        SocketAddr::V4(a) => {
            u64::from(u32::from_ne_bytes(a.ip().octets())) << 16 | u64::from(a.port())
        }
        SocketAddr::V6(_) => V6_KEY,
    }
}

/// [`quick_key`] of every IPv6 address: never remembered.
pub const V6_KEY: u64 = u64::MAX;

/// A remembered key that matches no [`quick_key`] (nothing remembered).
pub const NO_KEY: u64 = u64::MAX - 1;

/// What a table remembers for a lookup keyed `key`: [`NO_KEY`] for an
/// IPv6 address, which must match no later lookup.
#[inline]
pub fn remembered(key: u64) -> u64 {
    if key == V6_KEY {
        NO_KEY
    } else {
        key
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

    #[test]
    fn quick_keys_tell_ipv4_addresses_apart_and_are_never_remembered_for_ipv6() {
        let k = |a: &str| quick_key(&a.parse().unwrap());
        let v4 = [
            "0.0.0.0:0",
            "0.0.0.0:1",
            "0.0.0.1:0",
            "1.0.0.0:0",
            "255.255.255.255:65535",
        ];
        for (i, a) in v4.iter().enumerate() {
            assert!(k(a) < 1 << 48, "{a}");
            assert_eq!(remembered(k(a)), k(a));
            for b in &v4[i + 1..] {
                assert_ne!(k(a), k(b), "{a} {b}");
            }
        }
        // Every IPv6 address has the one key, and what a table remembers
        // for it matches no lookup.
        assert_eq!(k("[::1]:9"), V6_KEY);
        assert_eq!(remembered(V6_KEY), NO_KEY);
        assert_ne!(NO_KEY, V6_KEY);
    }
}
