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
