//! The payload the examples send: `size` bytes of a xorshift stream seeded
//! by the RPC's index, so that an echo can be checked byte by byte. Shared
//! by the `echo` and `interop` examples (`#[path]` module).

use bytes::Bytes;

/// `size` bytes of a xorshift stream seeded by the RPC's index.
pub fn pattern(seed: u64, size: usize) -> Bytes {
    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (seed + 1);
    (0..size)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect::<Vec<u8>>()
        .into()
}
