//! The receive side of [`HomaSocket`]: batched receives (`recvmmsg`, UDP
//! GRO), the single-datagram fast path, and each datagram's ECN mark (from
//! the `IP_RECVTOS` / `IPV6_RECVTCLASS` control message over UDP, from the
//! IP header itself over raw IPv4).

use super::pool::BufPool;
use super::{sys, HomaSocket, Kind};
use crate::cmsg::{self, CmsgBuf};
use std::io;
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::Ordering;

/// Largest datagram a receive buffer holds (a GRO batch or a 64 KiB packet).
const RECV_BUF: usize = 65_536;

/// A datagram at least this long that fills its receive buffer alone is
/// handed on as that buffer (no copy; a new buffer takes its place): a
/// slice keeps its whole buffer alive, so smaller ones are copied, and the
/// memory a kept packet pins stays within 4x the payload the core counts.
const ZERO_COPY_MIN: usize = RECV_BUF / 4;

/// Most receive buffers an endpoint keeps for reuse once the messages that
/// held them are dropped (2 MiB): about what a few 500 KB messages at once
/// have in flight. Beyond it, buffers given back are freed.
const POOL_MAX: usize = 32;

/// One received packet (a GRO batch is cut into its packets).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Datagram {
    /// The sender: its IP address and UDP source port (0 for raw IP, which
    /// has none).
    pub(crate) src: SocketAddr,
    /// Which receive buffer holds it, where it starts and how long it is.
    buf: usize,
    start: usize,
    len: usize,
    /// Its IP header carried ECN CE (known only when the socket reads ECN).
    pub(crate) ce: bool,
    /// Alone in its buffer (not one of a GRO batch's packets).
    alone: bool,
}

/// Receive buffers, reused across calls by whichever thread is reading.
///
/// The `recvmmsg` headers are built once and kept: each points at its own
/// iovec, name and control buffer for good (these vectors are never resized,
/// so their heap memory never moves). Before a call, only what the kernel
/// changes in a header is reset, and only in the headers the previous call
/// may have written ([`RecvBufs::dirty`]); a slot whose buffer was handed
/// over gets a new one and its iovec is pointed at it
/// ([`RecvBufs::prepare`]). With one datagram per call, building a whole
/// batch of headers each time was the receive path's largest cost.
pub(crate) struct RecvBufs {
    /// Each has capacity [`RECV_BUF`] (or 0 once handed over, until the
    /// slot is refilled); the kernel writes into it through a raw pointer,
    /// and its length covers what has been written so far (so only
    /// initialised bytes are ever read).
    bufs: Vec<Vec<u8>>,
    names: Vec<libc::sockaddr_storage>,
    cmsgs: Vec<CmsgBuf>,
    /// `iovs[i]` points at `bufs[i]`'s whole capacity (null and empty while
    /// its buffer is handed over).
    iovs: Vec<libc::iovec>,
    /// `msgs[i]` points at `names[i]`, `iovs[i]` and `cmsgs[i]`.
    msgs: Vec<libc::mmsghdr>,
    /// Headers from here on are as [`RecvBufs::new`] set them up: the
    /// kernel has written none of them since.
    dirty: usize,
    /// Slots whose buffers were handed over ([`RecvBufs::take_datagram`]),
    /// to be refilled before the kernel next writes to them.
    emptied: Vec<usize>,
    /// Datagrams of the last receive.
    got: Vec<Datagram>,
    /// Where buffers handed over with their datagrams come back to, and
    /// their replacements come from.
    pool: BufPool,
    /// The last call that did not block found nothing: the next arrival
    /// is most likely alone (a spinning or polling reader between round
    /// trips), see [`RecvBufs::probe_size`].
    after_empty: bool,
    /// The last receive call that could sleep did sleep (its datagram came
    /// after it started waiting): the next arrival most likely comes alone
    /// too (a sleeping reader between round trips), see
    /// [`RecvBufs::block_size`].
    slept_last: bool,
}

// SAFETY: the raw pointers in `iovs` and `msgs` point only into this
// struct's own heap buffers (the vectors of `bufs`, `names`, `cmsgs` and
// `iovs`, which are never resized, so they do not move when the struct
// does); nothing else holds them, so moving the struct to another thread is
// sound.
unsafe impl Send for RecvBufs {}

/// Size of a receive header's name buffer, as `msg_namelen` must say.
const NAME_LEN: libc::socklen_t = size_of::<libc::sockaddr_storage>() as libc::socklen_t;

impl RecvBufs {
    pub(crate) fn new(batch: usize) -> RecvBufs {
        let n = batch.max(1);
        let mut rb = RecvBufs {
            bufs: (0..n).map(|_| Vec::with_capacity(RECV_BUF)).collect(),
            // SAFETY: all-zero is a valid value for these plain C structs.
            names: vec![unsafe { zeroed() }; n],
            cmsgs: vec![[0u64; 8]; n],
            iovs: Vec::with_capacity(n),
            msgs: Vec::with_capacity(n),
            dirty: 0,
            emptied: Vec::new(),
            got: Vec::new(),
            pool: BufPool::new(RECV_BUF, POOL_MAX),
            after_empty: false,
            slept_last: false,
        };
        let iovs: Vec<libc::iovec> = rb
            .bufs
            .iter_mut()
            .map(|b| {
                let (iov_base, iov_len) = room(b);
                libc::iovec { iov_base, iov_len }
            })
            .collect();
        rb.iovs = iovs;
        let (names, iovs, cmsgs) = (
            rb.names.as_mut_ptr(),
            rb.iovs.as_mut_ptr(),
            rb.cmsgs.as_mut_ptr(),
        );
        for i in 0..n {
            // SAFETY: all-zero is a valid mmsghdr. `i < n`, the length of
            // all three vectors, so each pointer is in bounds; they stay
            // valid as long as `rb` (the vectors are never resized).
            let mut m: libc::mmsghdr = unsafe { zeroed() };
            unsafe {
                m.msg_hdr.msg_name = names.add(i) as *mut libc::c_void;
                m.msg_hdr.msg_iov = iovs.add(i);
                m.msg_hdr.msg_control = cmsgs.add(i) as *mut libc::c_void;
            }
            m.msg_hdr.msg_namelen = NAME_LEN;
            m.msg_hdr.msg_iovlen = 1;
            m.msg_hdr.msg_controllen = size_of::<CmsgBuf>() as _;
            rb.msgs.push(m);
        }
        rb
    }

    /// How many datagrams the first receive call of a round asks for when
    /// it would ask for `batch`: one right after a call that found
    /// nothing (the reader polls between round trips, and the next
    /// datagram most likely comes alone: a one-datagram call, `recvfrom`,
    /// costs ~0.5 µs less per round trip than a batch's `recvmmsg`, which
    /// tries the socket again after the first datagram; eleventh pass of
    /// docs/runtime-profile.md), else `batch` (a reader that found
    /// something last time may be behind: it takes a batch per call).
    pub(crate) fn probe_size(&self, batch: usize) -> usize {
        if self.after_empty {
            1
        } else {
            batch
        }
    }

    /// How many datagrams a receive call that may sleep asks for when it
    /// would ask for `batch`: one after such a call that slept (a
    /// sleeping reader between round trips, whose next datagram most
    /// likely comes alone: a blocking `recvfrom` costs ~2 µs less per
    /// round trip than a blocking `recvmmsg`, which tries the socket again
    /// after the datagram that woke it; thirteenth pass of
    /// docs/runtime-profile.md), else `batch` (a call that found its
    /// datagram already queued may be behind a burst: it takes a batch).
    pub(crate) fn block_size(&self, batch: usize) -> usize {
        if self.slept_last {
            1
        } else {
            batch
        }
    }

    /// Notes whether a receive call that could sleep did (for
    /// [`RecvBufs::block_size`]).
    pub(crate) fn note_slept(&mut self, slept: bool) {
        self.slept_last = slept;
    }

    /// Notes what a receive call brought (`n` datagrams; `blocked`: the
    /// call slept until something came or its timeout), for
    /// [`RecvBufs::probe_size`]: only a call that did not block and found
    /// nothing makes the next one a probe.
    pub(crate) fn note_received(&mut self, n: usize, blocked: bool) {
        self.after_empty = n == 0 && !blocked;
    }

    /// Makes the first `n` headers ready for the kernel: slots whose
    /// buffers were handed over get a buffer from the pool (the one given
    /// back last, likely still in the cache) and their iovecs point at it;
    /// the headers the last call may have written get their name and
    /// control lengths back (the kernel leaves the pointers, and ignores
    /// `msg_flags` and `msg_len` on input). Clears the last receive's
    /// datagrams.
    #[inline]
    fn prepare(&mut self, n: usize) {
        self.got.clear();
        // (Nearly always, with one datagram per call: no slot was emptied
        // and no header written, nothing to do. Out of line, the call cost
        // some 29 instructions on every receive.)
        if self.emptied.is_empty() && self.dirty == 0 {
            return;
        }
        self.prepare_slots(n);
    }

    /// [`RecvBufs::prepare`]'s work when a slot was emptied or a header
    /// written.
    #[inline(never)]
    fn prepare_slots(&mut self, n: usize) {
        for i in self.emptied.drain(..) {
            let b = &mut self.bufs[i];
            if b.capacity() == 0 {
                *b = self.pool.get();
            }
            let (iov_base, iov_len) = room(b);
            self.iovs[i] = libc::iovec { iov_base, iov_len };
            // (Re-derived after the write above, so that the pointer the
            // kernel follows is younger than every access through `iovs`.)
            // SAFETY: `i` is a slot index, within `iovs`.
            self.msgs[i].msg_hdr.msg_iov = unsafe { self.iovs.as_mut_ptr().add(i) };
        }
        debug_assert!(n <= self.msgs.len());
        for m in &mut self.msgs[..self.dirty] {
            m.msg_hdr.msg_namelen = NAME_LEN;
            m.msg_hdr.msg_controllen = size_of::<CmsgBuf>() as _;
        }
        self.dirty = 0;
    }

    /// Notes that a receive call with `n` headers returned `r`: the headers
    /// of the datagrams it received were written, and (conservatively) the
    /// one after them, which a datagram that failed halfway may have
    /// touched.
    fn received(&mut self, n: usize, r: isize) {
        let touched = if r < 0 { 1 } else { r as usize + 1 };
        self.dirty = touched.min(n).max(self.dirty);
    }

    /// Datagram `i` of the last receive: its source, bytes and CE mark.
    pub(crate) fn datagram(&self, i: usize) -> (SocketAddr, &[u8], bool) {
        let d = self.got[i];
        (d.src, &self.bufs[d.buf][d.start..d.start + d.len], d.ce)
    }

    /// Datagram `i` as owned bytes without a copy, if it is large
    /// ([`ZERO_COPY_MIN`]) and alone in its buffer: the buffer is handed
    /// over (it comes back to the pool when the message drops the last
    /// slice of it) and one from the pool takes its place. `None` otherwise
    /// (read it with [`RecvBufs::datagram`]). Each datagram is taken at most
    /// once.
    pub(crate) fn take_datagram(&mut self, i: usize) -> Option<(SocketAddr, bytes::Bytes, bool)> {
        let d = self.got[i];
        if !d.alone || d.len < ZERO_COPY_MIN {
            return None;
        }
        // (The slot is refilled from the pool just before the kernel next
        // writes to it, [`RecvBufs::prepare`]: the buffer it gets then is
        // the one given back last, likely still in the cache.)
        let buf = std::mem::take(&mut self.bufs[d.buf]);
        // Until the slot is refilled, the kernel is given no room there
        // (the buffer now belongs to the bytes handed over).
        self.iovs[d.buf] = libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        };
        self.emptied.push(d.buf);
        let b = self.pool.lend(buf, d.start, d.start + d.len);
        Some((d.src, b, d.ce))
    }
}

/// The pointer and room the kernel may write a datagram to: the whole
/// capacity of `buf`, initialised or not.
fn room(buf: &mut Vec<u8>) -> (*mut libc::c_void, usize) {
    (buf.as_mut_ptr() as *mut libc::c_void, buf.capacity())
}

/// Extends `buf`'s length over the `written` bytes the kernel just wrote.
fn written(buf: &mut Vec<u8>, written: usize) {
    let written = written.min(buf.capacity());
    if buf.len() < written {
        // SAFETY: the kernel initialised the first `written` bytes (a
        // receive call returned that length), and `written` is within the
        // capacity; bytes below the old length were initialised before.
        unsafe { buf.set_len(written) };
    }
}

impl HomaSocket {
    /// Receives up to `max` datagrams (at most a batch) without blocking;
    /// returns how many (0 when nothing is waiting). A GRO buffer counts as
    /// the packets it holds.
    pub(crate) fn recv(&self, rb: &mut RecvBufs, max: usize) -> io::Result<usize> {
        self.recv_with(rb, max, libc::MSG_DONTWAIT)
    }

    /// [`HomaSocket::recv`], but sleeps until the first datagram comes (or
    /// a kick, [`HomaSocket::kick_self`], or the socket's receive timeout):
    /// what a UDP reader sleeps in ([`HomaSocket::can_block`]).
    pub(crate) fn recv_wait(&self, rb: &mut RecvBufs, max: usize) -> io::Result<usize> {
        self.recv_with(rb, max, libc::MSG_WAITFORONE)
    }

    fn recv_with(&self, rb: &mut RecvBufs, max: usize, flags: libc::c_int) -> io::Result<usize> {
        if max <= 1 {
            let flags = if flags == libc::MSG_WAITFORONE {
                0
            } else {
                flags
            };
            // (A GRO socket's batches come with their segment size in a
            // control message, which `recvfrom` cannot take.)
            if self.gro && self.kind != Kind::Raw4 {
                rb.prepare(1);
                return self.recv_one_msg(rb, flags);
            }
            return self.recv_one(rb, flags);
        }
        let n = rb.bufs.len().min(max.max(1));
        rb.prepare(n);
        // SAFETY: `prepare` made the first n headers ready: each points at
        // its own name, control buffer and iovec, and the iovec at the whole
        // capacity of its slot's buffer, all owned by `rb`, alive and
        // unaliased for the duration of the call.
        let r = unsafe { sys::recvmmsg(self.fd(), rb.msgs.as_mut_ptr(), n as libc::c_uint, flags) };
        rb.received(n, r as isize);
        if r < 0 {
            return self.nothing_received();
        }
        for i in 0..r as usize {
            let len = rb.msgs[i].msg_len as usize;
            self.note_message(rb, i, len);
        }
        Ok(rb.got.len())
    }

    /// Files what the message received in slot `i` holds (`len` bytes
    /// written into the slot's buffer, with the slot's name and control
    /// messages) as its datagram, or as the packets of a GRO batch.
    fn note_message(&self, rb: &mut RecvBufs, i: usize, len: usize) {
        let RecvBufs {
            bufs,
            names,
            msgs,
            got,
            ..
        } = rb;
        let (buf, name, hdr) = (&mut bufs[i], &names[i], &msgs[i].msg_hdr);
        written(buf, len);
        let Some(src) = sockaddr_addr(name) else {
            return;
        };
        let info = cmsg::parse_recv(hdr);
        let Some((start, len, tos)) = self.payload(buf, len, info.tos) else {
            return;
        };
        let ce = self.ecn && tos.is_some_and(cmsg::is_ce);
        let seg = if self.gro { info.gro_segment } else { None };
        match seg {
            Some(seg) if seg > 0 && seg < len => {
                let mut off = 0;
                while off < len {
                    let l = seg.min(len - off);
                    got.push(Datagram {
                        src,
                        buf: i,
                        start: start + off,
                        len: l,
                        ce,
                        alone: false,
                    });
                    off += l;
                }
            }
            _ => got.push(Datagram {
                src,
                buf: i,
                start,
                len,
                ce,
                alone: true,
            }),
        }
    }

    /// Where the Homa packet starts in a received buffer of `len` bytes and
    /// how long it is, and its TOS byte: raw IPv4 sockets deliver the IP
    /// header too (the TOS is its second byte); UDP's TOS, if any, came as
    /// a control message (`cmsg_tos`). `None` for a truncated IP header.
    fn payload(
        &self,
        buf: &[u8],
        len: usize,
        cmsg_tos: Option<u8>,
    ) -> Option<(usize, usize, Option<u8>)> {
        if self.kind != Kind::Raw4 {
            return Some((0, len, cmsg_tos));
        }
        let ihl = buf.first().map(|b| (b & 0x0f) as usize * 4).unwrap_or(0);
        if ihl < 20 || ihl > len {
            return None;
        }
        Some((ihl, len - ihl, Some(buf[1])))
    }

    /// Receives one datagram with the cheapest call there is: `recvfrom`
    /// (what a spinning reader does between arrivals), or `recvmsg` when a
    /// UDP socket needs its TOS control message for ECN.
    fn recv_one(&self, rb: &mut RecvBufs, flags: libc::c_int) -> io::Result<usize> {
        rb.prepare(1);
        if self.ecn && self.kind != Kind::Raw4 {
            return self.recv_one_msg(rb, flags);
        }
        // (The source goes to the first kept name buffer, not to a local
        // zeroed for each call, 128 bytes: the kernel writes the family and
        // the address; what lies beyond them is never read.)
        let name = &mut rb.names[0];
        let mut namelen = NAME_LEN;
        let buf = &mut rb.bufs[0];
        let (ptr, room) = room(buf);
        // SAFETY: buf's capacity and name are live, writable and as long as
        // we say.
        let r = unsafe {
            sys::recvfrom(
                self.fd(),
                ptr,
                room,
                flags,
                name as *mut _ as *mut libc::sockaddr,
                &mut namelen,
            )
        };
        if r < 0 {
            return self.nothing_received();
        }
        written(buf, r as usize);
        // (A call that wrote no address, which UDP and raw IP never make,
        // is taken as an unknown family, as the zeroed name was.)
        if (namelen as usize) < size_of::<libc::sa_family_t>() {
            return Ok(0);
        }
        let Some(src) = sockaddr_addr(name) else {
            return Ok(0);
        };
        let Some((start, len, tos)) = self.payload(buf, r as usize, None) else {
            return Ok(0);
        };
        let ce = self.ecn && tos.is_some_and(cmsg::is_ce);
        rb.got.push(Datagram {
            src,
            buf: 0,
            start,
            len,
            ce,
            alone: true,
        });
        Ok(1)
    }

    /// [`HomaSocket::recv_one`] with `recvmsg` (the first of the kept
    /// headers, made ready by the caller), to get the TOS byte.
    fn recv_one_msg(&self, rb: &mut RecvBufs, flags: libc::c_int) -> io::Result<usize> {
        // SAFETY: `prepare` made header 0 ready: it points at name 0,
        // control buffer 0 and iovec 0, and the iovec at buffer 0's whole
        // capacity, all owned by `rb`, writable and as long as they say for
        // the whole call.
        let r = unsafe { sys::recvmsg(self.fd(), &mut rb.msgs[0].msg_hdr, flags) };
        rb.received(1, r);
        if r < 0 {
            return self.nothing_received();
        }
        self.note_message(rb, 0, r as usize);
        Ok(rb.got.len())
    }
}

/// Reads errno after a failed receive: "nothing came" for the expected
/// cases (no data, a signal, or an ICMP error left by an earlier send, which
/// says nothing about this receive), the error otherwise.
impl HomaSocket {
    /// The result of a receive call that failed: `Ok(0)` when nothing was
    /// waiting (or the call reported an error an ICMP message left on the
    /// socket, which [`HomaSocket::take_icmp_errors`] then reads).
    ///
    /// (errno is matched as it is: `io::Error::kind` decodes it through a
    /// table of every error, some 20 instructions on each empty call of a
    /// spinning reader. The kinds taken for "nothing came" were
    /// `WouldBlock` and `Interrupted`, which on Linux are exactly `EAGAIN`,
    /// the same number as `EWOULDBLOCK`, and `EINTR`.)
    #[inline]
    fn nothing_received(&self) -> io::Result<usize> {
        // SAFETY: errno is this thread's own, always readable (what
        // `io::Error::last_os_error` reads).
        let errno = unsafe { *libc::__errno_location() };
        match errno {
            libc::EAGAIN | libc::EINTR => Ok(0),
            libc::ECONNREFUSED | libc::EHOSTUNREACH | libc::ENETUNREACH | libc::ENOPROTOOPT => {
                self.icmp_pending.store(true, Ordering::Release);
                Ok(0)
            }
            _ => Err(io::Error::from_raw_os_error(errno)),
        }
    }

    /// Reads the ICMP destination-unreachable errors queued on a raw IPv4
    /// socket (`IP_RECVERR`), if [`HomaSocket::note_poll_error`] or a
    /// failed receive said there may be some: for each, the address our
    /// packet went to and the start of that packet as the ICMP message
    /// quoted it (its Homa header). Reads at most 64 per call.
    ///
    /// (The check inline, the reading out of line: every receive round of
    /// a spinning reader asks, and on UDP the answer is always none.)
    #[inline]
    pub(crate) fn take_icmp_errors(&self) -> Vec<(IpAddr, Vec<u8>)> {
        if self.kind != Kind::Raw4 || !self.icmp_pending.swap(false, Ordering::AcqRel) {
            return Vec::new();
        }
        self.read_icmp_errors()
    }

    /// [`HomaSocket::take_icmp_errors`]'s reading.
    #[inline(never)]
    fn read_icmp_errors(&self) -> Vec<(IpAddr, Vec<u8>)> {
        let mut out = Vec::new();
        for _ in 0..64 {
            let mut data = [0u8; 128];
            // SAFETY: all-zero is a valid sockaddr_in and msghdr.
            let mut name: libc::sockaddr_in = unsafe { zeroed() };
            let mut control: CmsgBuf = [0u64; 8];
            let mut iov = libc::iovec {
                iov_base: data.as_mut_ptr() as *mut libc::c_void,
                iov_len: data.len(),
            };
            let mut m: libc::msghdr = unsafe { zeroed() };
            m.msg_name = &mut name as *mut _ as *mut libc::c_void;
            m.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
            m.msg_iov = &mut iov;
            m.msg_iovlen = 1;
            m.msg_control = control.as_mut_ptr() as *mut libc::c_void;
            m.msg_controllen = size_of::<CmsgBuf>() as _;
            // SAFETY: every pointer in `m` refers to a live local of the
            // size given, written only by this call.
            let r = unsafe {
                libc::recvmsg(self.fd(), &mut m, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT)
            };
            if r < 0 {
                break;
            }
            if cmsg::icmp_dest_unreachable(&m) {
                let dst = IpAddr::V4(Ipv4Addr::from(u32::from_be(name.sin_addr.s_addr)));
                out.push((dst, data[..(r as usize).min(data.len())].to_vec()));
            }
        }
        out
    }

    /// The socket's poll said `POLLERR`: an error may be queued.
    pub(crate) fn note_poll_error(&self) {
        self.icmp_pending.store(true, Ordering::Release);
    }
}

/// The source of a datagram: its IP address and (for UDP) its port; raw
/// IPv4 sockets report port 0.
fn sockaddr_addr(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match ss.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let sin = unsafe { &*(ss as *const _ as *const libc::sockaddr_in) };
            let ip = IpAddr::V4(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)));
            Some(SocketAddr::new(ip, u16::from_be(sin.sin_port)))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let sin6 = unsafe { &*(ss as *const _ as *const libc::sockaddr_in6) };
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            let v4 = ip.to_ipv4_mapped();
            let ip = v4.map(IpAddr::V4).unwrap_or(IpAddr::V6(ip));
            Some(SocketAddr::new(ip, u16::from_be(sin6.sin6_port)))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Transport;
    use std::os::fd::AsRawFd;

    /// Large datagrams are handed over without a copy (and a fresh buffer
    /// takes their place); small ones are only lent; every byte is right
    /// whichever way, also in the buffer that replaced a taken one.
    #[test]
    fn large_datagrams_are_taken_small_ones_lent() {
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let (sock, local) =
            HomaSocket::open(any, Transport::Udp, 1 << 20, false, false, false, false)
                .expect("open");
        let tx = std::net::UdpSocket::bind(any).unwrap();
        let big: Vec<u8> = (0..40_000u32).map(|i| (i * 7) as u8).collect();
        let mut rb = RecvBufs::new(4);
        let mut first_buf = None;
        for round in 0..3u8 {
            tx.send_to(&big, local).unwrap();
            tx.send_to(&[round; 100], local).unwrap();
            let mut got = 0;
            while got < 2 {
                let n = sock.recv(&mut rb, 4).unwrap();
                for i in 0..n {
                    let (_, bytes, _) = rb.datagram(i);
                    if bytes.len() == big.len() {
                        assert_eq!(bytes, &big[..], "round {round}: lent view");
                        let (src, owned, _) = rb.take_datagram(i).expect("large: taken");
                        assert_eq!(src.port(), tx.local_addr().unwrap().port());
                        assert_eq!(&owned[..], &big[..], "round {round}: taken bytes");
                        // The buffer given back (the bytes are dropped
                        // below) is the one the next receive writes to.
                        let at = *first_buf.get_or_insert(owned.as_ptr());
                        assert_eq!(owned.as_ptr(), at, "round {round}: reused");
                    } else {
                        assert_eq!(bytes, &[round; 100][..], "round {round}");
                        assert!(rb.take_datagram(i).is_none(), "small: copied, not taken");
                    }
                }
                got += n;
            }
        }
        // (A slot whose buffer was taken is refilled by the next receive.)
        assert!(rb
            .bufs
            .iter()
            .all(|b| b.capacity() >= RECV_BUF || b.capacity() == 0));
        // Each taken buffer came back when its bytes were dropped, and was
        // reused for the next round: one is kept now.
        assert_eq!(rb.pool.len(), 1);
    }

    /// A UDP socket bound to `any` whose datagrams carry the CE mark, and
    /// its port.
    fn ce_sender(any: SocketAddr) -> (socket2::Socket, u16) {
        let tx = socket2::Socket::new(
            socket2::Domain::IPV4,
            socket2::Type::DGRAM,
            Some(socket2::Protocol::UDP),
        )
        .unwrap();
        tx.bind(&any.into()).unwrap();
        tx.set_tos(cmsg::ECN_CE as u32).unwrap();
        let port = tx.local_addr().unwrap().as_socket().unwrap().port();
        (tx, port)
    }

    /// One datagram at a time with its TOS byte (`recvmsg` through the
    /// first kept header): each call gets its own source and CE mark, and
    /// nothing left from the call before.
    #[test]
    fn one_at_a_time_reads_each_mark_afresh() {
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let (sock, local) =
            HomaSocket::open(any, Transport::Udp, 1 << 20, false, false, true, false)
                .expect("open");
        let (ce_tx, ce_port) = ce_sender(any);
        let plain = std::net::UdpSocket::bind(any).unwrap();
        let plain_port = plain.local_addr().unwrap().port();
        let mut rb = RecvBufs::new(4);
        for k in 0..6u8 {
            if k % 2 == 0 {
                ce_tx.send_to(&[k; 30], &local.into()).unwrap();
            } else {
                plain.send_to(&[k; 40], local).unwrap();
            }
            let mut n = 0;
            for _ in 0..1000 {
                n = sock.recv(&mut rb, 1).unwrap();
                if n > 0 {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            assert_eq!(n, 1);
            let (src, bytes, ce) = rb.datagram(0);
            if k % 2 == 0 {
                assert_eq!((src.port(), bytes, ce), (ce_port, &[k; 30][..], true));
            } else {
                assert_eq!((src.port(), bytes, ce), (plain_port, &[k; 40][..], false));
            }
        }
    }

    /// The kept receive headers are made ready again after every call:
    /// a header the kernel wrote for a lone datagram (its control length
    /// cut down to one TOS message) still takes a GRO batch's two control
    /// messages next time, and a fuller batch after a lone datagram gets
    /// every source and every byte right.
    ///
    /// The same, a datagram per call (`recvmsg`, which takes a GRO batch's
    /// segment size as the batch call does: a sleeping reader's call).
    #[test]
    fn kept_headers_take_every_call_whole() {
        kept_headers_take_every_call_whole_asking_for(8);
        kept_headers_take_every_call_whole_asking_for(1);
    }

    /// Sets UDP_SEGMENT (GSO segment size, bytes; 0: off) on `fd`.
    fn set_udp_segment(fd: std::os::fd::RawFd, seg: libc::c_int) {
        // SAFETY: a live socket and a c_int option on the stack.
        let r = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_UDP,
                cmsg::UDP_SEGMENT,
                &seg as *const libc::c_int as *const libc::c_void,
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(r, 0, "UDP_SEGMENT");
    }

    /// A GRO socket that does not read ECN, asked for one datagram (a
    /// sleeping reader's call): a GSO send of three packets, read as one
    /// GRO buffer, still comes out as the three packets.
    #[test]
    fn one_datagram_calls_cut_a_gro_batch() {
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let (sock, local) =
            HomaSocket::open(any, Transport::Udp, 1 << 20, false, true, false, false)
                .expect("open");
        assert!(sock.gro && !sock.ecn, "UDP GRO on loopback, no ECN");
        let tx = std::net::UdpSocket::bind(any).unwrap();
        set_udp_segment(tx.as_raw_fd(), 208);
        let gso: Vec<u8> = (0..3).flat_map(|k| [k + 1; 208]).collect();
        tx.send_to(&gso, local).unwrap();
        let mut rb = RecvBufs::new(8);
        let mut got = Vec::new();
        for _ in 0..1000 {
            let n = sock.recv(&mut rb, 1).unwrap();
            for i in 0..n {
                got.push(rb.datagram(i).1.to_vec());
            }
            if got.len() >= 3 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let want: Vec<Vec<u8>> = (0..3).map(|k| vec![k + 1; 208]).collect();
        assert_eq!(got, want);
    }

    fn kept_headers_take_every_call_whole_asking_for(max: usize) {
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let (sock, local) =
            HomaSocket::open(any, Transport::Udp, 1 << 20, false, true, true, false).expect("open");
        assert!(sock.gro, "UDP GRO on loopback");
        let (ce_tx, ce_port) = ce_sender(any);
        let plain = std::net::UdpSocket::bind(any).unwrap();
        let mut rb = RecvBufs::new(8);
        let mut take = |want: usize| {
            let mut out = Vec::new();
            for _ in 0..1000 {
                let n = sock.recv(&mut rb, max).unwrap();
                for i in 0..n {
                    let (src, bytes, ce) = rb.datagram(i);
                    out.push((src.port(), bytes.to_vec(), ce));
                }
                if out.len() >= want {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            out
        };
        for round in 0..3u8 {
            // A lone datagram, marked CE: header 0 gets one TOS message.
            ce_tx.send_to(&[round; 10], &local.into()).unwrap();
            assert_eq!(take(1), vec![(ce_port, vec![round; 10], true)]);
            // A GSO send of three packets, marked CE, read as one GRO
            // buffer in header 0: two control messages (the segment size,
            // then the TOS byte, which a control length left as the last
            // call cut it would lose).
            let gso: Vec<u8> = (0..3).flat_map(|k| [k + 1; 208]).collect();
            set_udp_segment(ce_tx.as_raw_fd(), 208);
            ce_tx.send_to(&gso, &local.into()).unwrap();
            let got = take(3);
            let lens: Vec<usize> = got.iter().map(|g| g.1.len()).collect();
            assert_eq!(lens, vec![208; 3], "round {round}: cut at the GRO size");
            for (k, g) in got.iter().enumerate() {
                assert!(g.1.iter().all(|&b| b == k as u8 + 1), "round {round}");
                assert!(g.2, "round {round}: the TOS control message came too");
            }
            set_udp_segment(ce_tx.as_raw_fd(), 0);
            // Several datagrams from two senders in one call.
            for k in 0..5u8 {
                if k % 2 == 0 {
                    plain.send_to(&[k; 50], local).unwrap();
                } else {
                    ce_tx.send_to(&[k; 60], &local.into()).unwrap();
                }
            }
            let got = take(5);
            assert_eq!(got.len(), 5);
            for (k, (port, bytes, ce)) in got.into_iter().enumerate() {
                let k = k as u8;
                if k % 2 == 0 {
                    let want = plain.local_addr().unwrap().port();
                    assert_eq!((port, bytes, ce), (want, vec![k; 50], false));
                } else {
                    assert_eq!((port, bytes, ce), (ce_port, vec![k; 60], true));
                }
            }
        }
    }

    /// A reader probes for one datagram only after a call that did not
    /// block and found nothing; after one that found something (a probe
    /// included) it asks for a batch, so a burst is read a batch per call.
    /// The socket hands a probe exactly one of what is queued.
    #[test]
    fn a_probe_follows_only_an_empty_call_and_takes_one_datagram() {
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let (sock, local) =
            HomaSocket::open(any, Transport::Udp, 1 << 20, false, false, false, false)
                .expect("open");
        let tx = std::net::UdpSocket::bind(any).unwrap();
        let mut rb = RecvBufs::new(8);
        assert_eq!(rb.probe_size(8), 8, "a fresh reader takes a batch");
        let max = rb.probe_size(8);
        let n = sock.recv(&mut rb, max).unwrap();
        assert_eq!(n, 0);
        rb.note_received(n, false);
        assert_eq!(rb.probe_size(8), 1, "after an empty call: a probe");
        for k in 0..3u8 {
            tx.send_to(&[k; 50], local).unwrap();
        }
        let mut got = 0;
        for _ in 0..1000 {
            let max = rb.probe_size(8);
            got = sock.recv(&mut rb, max).unwrap();
            if got > 0 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(got, 1, "a probe takes one datagram");
        rb.note_received(got, false);
        assert_eq!(rb.probe_size(8), 8, "after a probe that found one: a batch");
        let max = rb.probe_size(8);
        assert_eq!(sock.recv(&mut rb, max).unwrap(), 2);
        // A blocking call that came back empty (its timeout) says nothing
        // about what polling would find.
        rb.note_received(0, true);
        assert_eq!(rb.probe_size(8), 8);
        // A call that may sleep asks for one only after one that slept.
        assert_eq!(rb.block_size(8), 8, "a fresh reader takes a batch");
        rb.note_slept(true);
        assert_eq!(rb.block_size(8), 1, "after a sleep: one");
        rb.note_slept(false);
        assert_eq!(
            rb.block_size(8),
            8,
            "after a call that found data queued: a batch"
        );
    }
}
