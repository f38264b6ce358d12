//! What the three protocols share: their names, the request header that
//! asks for a response size, and socket helpers that wait either by
//! sleeping in the kernel or by spinning.

use std::io::{self, IoSlice, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Response size used when a Homa or UDP request is too short (< 4 bytes)
/// to carry the size it wants.
pub const DEFAULT_RESPONSE_SIZE: usize = 100;

/// Largest UDP datagram homa-perf sends or answers with.
pub const MAX_UDP_MESSAGE: usize = 65_000;

/// Largest TCP message (request or response) the server accepts.
pub const MAX_TCP_MESSAGE: usize = 64 << 20;

/// How often blocked server threads wake up to see whether they must stop.
pub(crate) const STOP_CHECK_INTERVAL: Duration = Duration::from_millis(50);

/// The transport a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Protocol {
    /// This project's Homa runtime over UDP sockets.
    Homa,
    /// TCP with TCP_NODELAY; one connection per outstanding RPC.
    Tcp,
    /// One datagram each way; no loss recovery (a lost datagram is an error).
    Udp,
}

impl Protocol {
    /// Lower-case name, as on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Homa => "homa",
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
        }
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The response size a Homa or UDP request asks for: its first 4 bytes,
/// little-endian, when it has 4; otherwise [`DEFAULT_RESPONSE_SIZE`].
pub fn wanted_response_size(request: &[u8]) -> usize {
    match request.get(..4) {
        Some(h) => u32::from_le_bytes([h[0], h[1], h[2], h[3]]) as usize,
        None => DEFAULT_RESPONSE_SIZE,
    }
}

/// The response size a client should expect for a Homa or UDP request of
/// `request_size` bytes that asked for `response_size`.
pub fn expected_response_size(request_size: usize, response_size: usize) -> usize {
    if request_size >= 4 {
        response_size
    } else {
        DEFAULT_RESPONSE_SIZE
    }
}

/// Bytes of a Homa request that carry its tag (little-endian `u64`), when
/// the request is that long.
pub const TAG: std::ops::Range<usize> = 4..12;

/// Bytes of a Homa request that mark the rest of it as pattern bytes the
/// server can check.
pub const MAGIC: std::ops::Range<usize> = 12..16;

/// The marker in [`MAGIC`].
pub const MAGIC_BYTES: [u8; 4] = *b"hpat";

/// Pattern offsets are below this, so a pattern of `n + MAX_OFFSET` bytes
/// covers any message of `n`.
const MAX_OFFSET: usize = 65_536;

/// The shared pattern, grown on demand (every prefix is stable).
static PATTERN: std::sync::Mutex<Option<bytes::Bytes>> = std::sync::Mutex::new(None);

/// At least `len` bytes of the deterministic pattern every request body and
/// response is cut from: byte `i` is byte `i % 8` (little-endian) of
/// splitmix64(`i / 8`). Cheap to clone (shared), and without a lock once
/// the thread has seen a long enough one: clients and servers cut every
/// request, response and check from it, from many threads at once.
pub fn pattern(len: usize) -> bytes::Bytes {
    thread_local! {
        static SEEN: std::cell::RefCell<Option<bytes::Bytes>> = const { std::cell::RefCell::new(None) };
    }
    SEEN.with(|seen| {
        let mut seen = seen.borrow_mut();
        match seen.as_ref() {
            Some(b) if b.len() >= len => b.clone(),
            _ => {
                let b = shared_pattern(len);
                *seen = Some(b.clone());
                b
            }
        }
    })
}

/// [`pattern`] from the process's copy, grown on demand.
fn shared_pattern(len: usize) -> bytes::Bytes {
    let mut p = PATTERN.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(b) = p.as_ref() {
        if b.len() >= len {
            return b.clone();
        }
    }
    let n = len.max(1 << 20).next_power_of_two().div_ceil(8) * 8;
    let mut v = Vec::with_capacity(n);
    for j in 0..(n / 8) as u64 {
        let mut z = j.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        v.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    let b = bytes::Bytes::from(v);
    *p = Some(b.clone());
    b
}

fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x
}

/// Where in the pattern a tagged request's body starts.
fn body_offset(tag: u64) -> usize {
    (mix(tag) % MAX_OFFSET as u64) as usize
}

/// Where in the pattern the response to a request of `request_len` bytes
/// with `tag` starts: responses of different RPCs differ.
fn response_offset(tag: u64, request_len: usize) -> usize {
    (mix(tag ^ mix(request_len as u64 + 1)) % MAX_OFFSET as u64) as usize
}

/// The tag of a request: its bytes 4..12, or 0 when it is shorter.
pub fn request_tag(request: &[u8]) -> u64 {
    request
        .get(TAG)
        .map_or(0, |t| u64::from_le_bytes(t.try_into().unwrap_or([0; 8])))
}

/// A request of `len` bytes asking for `response_size` bytes, tagged `tag`:
/// the size header, the tag, the marker, then pattern bytes (each part cut
/// short when `len` is).
pub fn make_request(tag: u64, response_size: usize, len: usize) -> bytes::Bytes {
    make_request_in(&mut bytes::BytesMut::new(), tag, response_size, len)
}

/// [`make_request`], made in `arena`: the request is split off its front,
/// and the arena's allocation is used again once every request made in it
/// is gone (`BytesMut::reserve` reclaims it), so that a client does not
/// allocate per request: a `Bytes` made from a `Vec` costs two
/// allocations (the buffer, then the shared header its first slice or
/// clone adds) and two frees per request, on the critical path.
pub fn make_request_in(
    arena: &mut bytes::BytesMut,
    tag: u64,
    response_size: usize,
    len: usize,
) -> bytes::Bytes {
    use bytes::BufMut;
    /// Bytes an arena asks for at least: short requests share it.
    const ARENA_BYTES: usize = 64 << 10;
    if arena.capacity() < len {
        arena.reserve(len.max(ARENA_BYTES));
    }
    let head = [
        &(response_size as u32).to_le_bytes()[..],
        &tag.to_le_bytes()[..],
        &MAGIC_BYTES[..],
    ];
    let mut left = len;
    for part in head {
        let n = part.len().min(left);
        arena.put_slice(&part[..n]);
        left -= n;
    }
    if len > MAGIC.end {
        let off = body_offset(tag);
        arena.put_slice(&pattern(off + len)[off + MAGIC.end..off + len]);
    }
    arena.split().freeze()
}

/// Whether a request's body is the pattern its tag calls for. Requests not
/// marked as patterned (shorter than 16 bytes, or without the marker, e.g.
/// from cluster mode) pass.
pub fn request_ok(request: &[u8]) -> bool {
    if request.len() <= MAGIC.end || request[MAGIC] != MAGIC_BYTES {
        return true;
    }
    let off = body_offset(request_tag(request));
    request[MAGIC.end..] == pattern(off + request.len())[off + MAGIC.end..off + request.len()]
}

/// The first bytes of a request in parts (its size header, tag and
/// marker; fewer when it is shorter), and its length: all that
/// [`wanted_response_size`], [`request_tag`] and [`make_response_to`] read.
pub fn request_head(parts: &[bytes::Bytes]) -> (Vec<u8>, usize) {
    let len = parts.iter().map(|p| p.len()).sum();
    let mut head = Vec::with_capacity(MAGIC.end);
    for p in parts {
        let take = (MAGIC.end - head.len()).min(p.len());
        head.extend_from_slice(&p[..take]);
        if head.len() == MAGIC.end {
            break;
        }
    }
    (head, len)
}

/// [`request_ok`] for a request still in the parts it arrived in: each
/// part is compared with the pattern where it lies, without joining them.
pub fn request_ok_parts(parts: &[bytes::Bytes]) -> bool {
    let (head, len) = request_head(parts);
    if len <= MAGIC.end || head[MAGIC] != MAGIC_BYTES {
        return true;
    }
    let off = body_offset(request_tag(&head));
    let want = pattern(off + len);
    let mut pos = 0;
    for p in parts {
        let (start, end) = (pos.max(MAGIC.end), pos + p.len());
        if start < end && p[start - pos..] != want[off + start..off + end] {
            return false;
        }
        pos = end;
    }
    true
}

/// The response to `request`: `want` pattern bytes at an offset that
/// depends on the request's tag and length (a zero-copy slice). `corrupt`
/// shifts it by one byte, so that the client sees a mismatch.
pub fn make_response(request: &[u8], want: usize, corrupt: bool) -> bytes::Bytes {
    make_response_to(request_tag(request), request.len(), want, corrupt)
}

/// [`make_response`] for a request known by its tag and length.
pub fn make_response_to(tag: u64, request_len: usize, want: usize, corrupt: bool) -> bytes::Bytes {
    let off = response_offset(tag, request_len) + usize::from(corrupt);
    pattern(off + want).slice(off..off + want)
}

/// The `len` bytes the server must send for a request of `request_len`
/// bytes tagged `tag` (a zero-copy slice of the pattern).
pub fn expected_response(tag: u64, request_len: usize, len: usize) -> bytes::Bytes {
    let tag = if request_len >= TAG.end { tag } else { 0 };
    let off = response_offset(tag, request_len);
    pattern(off + len).slice(off..off + len)
}

/// Whether `response` is what the server must send for a request of
/// `request_len` bytes tagged `tag` (0 when shorter than 12 bytes).
pub fn response_ok(tag: u64, request_len: usize, response: &[u8]) -> bool {
    response_ok_parts(tag, request_len, std::slice::from_ref(&response))
}

/// [`response_ok`] for a response still in the packets it came in
/// (`homa::Message::parts`): no copy into one buffer first.
pub fn response_ok_parts<P: AsRef<[u8]>>(tag: u64, request_len: usize, parts: &[P]) -> bool {
    let len = parts.iter().map(|p| p.as_ref().len()).sum();
    let want = expected_response(tag, request_len, len);
    let mut pos = 0;
    for p in parts {
        let p = p.as_ref();
        if p != &want[pos..pos + p.len()] {
            return false;
        }
        pos += p.len();
    }
    true
}

/// When a socket wait must give up: the server is stopping, or the RPC's
/// deadline passed.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Interrupt<'a> {
    /// Set when the server shuts down.
    pub stop: Option<&'a AtomicBool>,
    /// Give up at this time.
    pub deadline: Option<Instant>,
}

impl Interrupt<'_> {
    /// Errs if the wait must end: `Interrupted`-free kinds so callers can
    /// tell a stop (`ConnectionAborted`) from a timeout (`TimedOut`).
    pub fn check(&self) -> io::Result<()> {
        if self.stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "server stopping",
            ));
        }
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "RPC timed out"));
        }
        Ok(())
    }
}

/// True for the errors that only mean "nothing yet": a nonblocking socket
/// with no data, a receive timeout, a signal.
pub(crate) fn is_wait(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// Fills `buf` from a stream that may be nonblocking (then this spins) or
/// Spends `d` of CPU time in a busy loop: a server's own work on a
/// request (`homa-perf server --work-us`). Returns at once for zero.
pub(crate) fn do_work(d: Duration) {
    if d.is_zero() {
        return;
    }
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// have a receive timeout (then this re-checks `intr` after each timeout).
pub(crate) fn read_full<R: Read>(r: &mut R, buf: &mut [u8], intr: &Interrupt) -> io::Result<()> {
    read_full_checked(r, buf, &mut || {
        intr.check()?;
        std::hint::spin_loop();
        Ok(())
    })
}

/// Fills `buf`, calling `check` whenever the stream has nothing yet (a
/// receive timeout or `EAGAIN`); `check` ends the read by erring.
pub(crate) fn read_full_checked<R: Read>(
    r: &mut R,
    buf: &mut [u8],
    check: &mut dyn FnMut() -> io::Result<()>,
) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match r.read(&mut buf[done..]) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "connection closed by the peer",
                ))
            }
            Ok(n) => done += n,
            Err(e) if is_wait(&e) => check()?,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Writes `a` then `b` with as few system calls as the kernel allows
/// (vectored writes), on a blocking or nonblocking stream.
pub(crate) fn write_two<W: Write>(
    w: &mut W,
    a: &[u8],
    b: &[u8],
    intr: &Interrupt,
) -> io::Result<()> {
    let (mut ia, mut ib) = (0, 0);
    while ia < a.len() || ib < b.len() {
        let slices = [IoSlice::new(&a[ia..]), IoSlice::new(&b[ib..])];
        match w.write_vectored(&slices) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "connection closed while writing",
                ))
            }
            Ok(mut n) => {
                let from_a = n.min(a.len() - ia);
                ia += from_a;
                n -= from_a;
                ib += n;
            }
            Err(e) if is_wait(&e) => {
                intr.check()?;
                std::hint::spin_loop();
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip() {
        let mut req = 12_345u32.to_le_bytes().to_vec();
        req.extend_from_slice(&[0; 10]);
        assert_eq!(wanted_response_size(&req), 12_345);
        assert_eq!(wanted_response_size(&req[..3]), DEFAULT_RESPONSE_SIZE);
        assert_eq!(expected_response_size(3, 7), DEFAULT_RESPONSE_SIZE);
        assert_eq!(expected_response_size(4, 7), 7);
    }

    #[test]
    fn requests_in_parts_check_out_as_joined_ones() {
        for len in [0, 3, 12, 15, 16, 17, 100, 70_000] {
            let req = make_request(7, 300, len);
            for cut in [1, 5, 13, 16, 40, 65_000] {
                let parts: Vec<bytes::Bytes> = (0..len)
                    .step_by(cut)
                    .map(|i| req.slice(i..(i + cut).min(len)))
                    .collect();
                assert!(request_ok_parts(&parts), "{len} cut {cut}");
                let (head, n) = request_head(&parts);
                assert_eq!(n, len);
                assert_eq!(head[..], req[..len.min(MAGIC.end)]);
                assert_eq!(
                    make_response_to(request_tag(&head), n, 300, false),
                    make_response(&req, 300, false)
                );
                if len > MAGIC.end + 1 {
                    let mut bad = req.to_vec();
                    bad[len - 1] ^= 1;
                    let bad = bytes::Bytes::from(bad);
                    let parts: Vec<bytes::Bytes> = (0..len)
                        .step_by(cut)
                        .map(|i| bad.slice(i..(i + cut).min(len)))
                        .collect();
                    assert!(!request_ok_parts(&parts), "{len} cut {cut}");
                }
            }
        }
    }

    /// Requests made in one arena are each what `make_request` makes, and
    /// the arena's allocation serves again once they are gone.
    #[test]
    fn an_arena_makes_the_same_requests_and_reuses_its_allocation() {
        let mut arena = bytes::BytesMut::new();
        let lens = [0, 3, 12, 16, 17, 100, 1_500, 70_000, 100];
        let made: Vec<_> = lens
            .iter()
            .enumerate()
            .map(|(i, &len)| make_request_in(&mut arena, i as u64, 300, len))
            .collect();
        for (i, (&len, req)) in lens.iter().zip(&made).enumerate() {
            assert_eq!(req, &make_request(i as u64, 300, len), "{len}");
            assert!(request_ok(req));
        }
        drop(made);
        // A fresh arena: its first request starts the allocation; once the
        // requests are gone, the one that no longer fits starts it again.
        let mut arena = bytes::BytesMut::new();
        let start = make_request_in(&mut arena, 1, 300, 100).as_ptr();
        let at: Vec<_> = (0..3)
            .map(|k| make_request_in(&mut arena, 2 + k, 300, 30_000).as_ptr())
            .collect();
        assert_eq!(at[1], at[0].wrapping_add(30_000));
        assert_eq!(at[2], start, "the arena allocated again");
    }

    #[test]
    fn patterned_requests_and_responses_check_out() {
        for len in [0, 3, 4, 11, 12, 15, 16, 17, 100, 70_000] {
            let req = make_request(42, 500, len);
            assert_eq!(req.len(), len);
            assert!(request_ok(&req), "{len}");
            let want = wanted_response_size(&req);
            let resp = make_response(&req, want, false);
            assert_eq!(resp.len(), want);
            assert!(response_ok(42, len, &resp), "{len}");
            assert!(!response_ok(
                43,
                len.max(12),
                &make_response(&make_request(42, 500, len.max(12)), 500, false)
            ));
            assert!(
                !response_ok(42, len, &make_response(&req, want, true)),
                "{len}"
            );
            if len > 16 {
                let mut bad = req.to_vec();
                bad[len - 1] ^= 1;
                assert!(!request_ok(&bad));
            }
        }
        // Unmarked requests (cluster mode's) are not checked.
        assert!(request_ok(&[7u8; 100]));
        // The pattern grows without changing what it was.
        let small = pattern(10);
        let big = pattern(3 << 20);
        assert_eq!(small[..1 << 20], big[..1 << 20]);
    }

    #[test]
    fn write_two_handles_short_writes() {
        /// A writer that takes at most 3 bytes per call.
        struct Trickle(Vec<u8>);
        impl Write for Trickle {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                let n = buf.len().min(3);
                self.0.extend_from_slice(&buf[..n]);
                Ok(n)
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut w = Trickle(Vec::new());
        write_two(&mut w, b"hello", b" world!", &Interrupt::default()).unwrap();
        assert_eq!(w.0, b"hello world!");
    }
}
