//! The operating-system side: a UDP (IPv4/IPv6) or raw IPv4 socket, batched
//! sends with a per-packet TOS byte (`priority << 5`) and UDP GSO, batched
//! receives with UDP GRO.

use crate::config::Transport;
use crate::Error;
use homa_core::Transmit;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io;
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, RawFd};

/// Largest datagram a receive buffer holds (a GRO batch or a 64 KiB packet).
const RECV_BUF: usize = 65_536;
/// Most segments the kernel accepts in one GSO send.
const MAX_GSO_SEGMENTS: usize = 64;
/// Most payload bytes in one UDP datagram (what a GSO send may carry).
const MAX_UDP_PAYLOAD: usize = 65_507;
// Not (yet) in every libc release.
const UDP_SEGMENT: libc::c_int = 103;
const UDP_GRO: libc::c_int = 104;

/// Homa ports taken by raw-IP endpoints of this process. The kernel keeps
/// no Homa ports, so without this two endpoints could share one and both
/// receive every request. (Other processes cannot be seen.)
static RAW_PORTS: std::sync::Mutex<Vec<SocketAddr>> = std::sync::Mutex::new(Vec::new());

/// Releases a raw-IP port when its socket goes away.
#[derive(Debug)]
struct RawPort(SocketAddr);

impl RawPort {
    fn claim(addr: SocketAddr) -> Option<RawPort> {
        let mut ports = RAW_PORTS.lock().unwrap_or_else(|p| p.into_inner());
        let clash = ports.iter().any(|p| {
            p.port() == addr.port()
                && (p.ip() == addr.ip() || p.ip().is_unspecified() || addr.ip().is_unspecified())
        });
        if clash {
            return None;
        }
        ports.push(addr);
        Some(RawPort(addr))
    }
}

impl Drop for RawPort {
    fn drop(&mut self) {
        let mut ports = RAW_PORTS.lock().unwrap_or_else(|p| p.into_inner());
        ports.retain(|p| *p != self.0);
    }
}

/// Control-message space, 8-byte aligned as `cmsghdr` requires.
type CmsgBuf = [u64; 8];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Udp4,
    Udp6,
    Raw4,
}

/// One Homa socket.
#[derive(Debug)]
pub(crate) struct HomaSocket {
    socket: Socket,
    kind: Kind,
    gso: bool,
    gro: bool,
    _raw_port: Option<RawPort>,
}

/// Receive buffers, reused across calls by whichever thread is reading.
pub(crate) struct RecvBufs {
    bufs: Vec<Vec<u8>>,
    names: Vec<libc::sockaddr_storage>,
    cmsgs: Vec<CmsgBuf>,
    iovs: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
    /// Datagrams of the last receive: (source, buffer, start, length). The
    /// source's port is the UDP source port (0 for raw IP, which has none).
    pub(crate) got: Vec<(SocketAddr, usize, usize, usize)>,
}

// SAFETY: the raw pointers in `iovs` and `msgs` point only into this
// struct's own vectors and are rebuilt before every use; nothing else holds
// them, so moving the struct to another thread is sound.
unsafe impl Send for RecvBufs {}

impl RecvBufs {
    pub(crate) fn new(batch: usize) -> RecvBufs {
        let n = batch.max(1);
        RecvBufs {
            bufs: (0..n).map(|_| vec![0u8; RECV_BUF]).collect(),
            // SAFETY: all-zero is a valid value for these plain C structs.
            names: vec![unsafe { zeroed() }; n],
            cmsgs: vec![[0u64; 8]; n],
            iovs: Vec::with_capacity(n),
            msgs: Vec::with_capacity(n),
            got: Vec::new(),
        }
    }

    /// Bytes of datagram `i` of the last receive.
    pub(crate) fn datagram(&self, i: usize) -> (SocketAddr, &[u8]) {
        let (src, b, start, len) = self.got[i];
        (src, &self.bufs[b][start..start + len])
    }
}

impl HomaSocket {
    /// Opens and binds a socket. Port 0 picks a client port (the kernel's
    /// ephemeral range for UDP; a random port at or above 0x8000 for raw IP,
    /// where the kernel keeps no Homa ports).
    pub(crate) fn open(
        addr: SocketAddr,
        transport: Transport,
        buffer_bytes: usize,
        gso: bool,
        gro: bool,
    ) -> Result<(HomaSocket, SocketAddr), Error> {
        if addr.ip().is_multicast() {
            return Err(Error::BadAddress(format!(
                "{addr}: multicast is not supported"
            )));
        }
        let kind = match (transport, addr) {
            (Transport::Udp, SocketAddr::V4(_)) => Kind::Udp4,
            (Transport::Udp, SocketAddr::V6(_)) => Kind::Udp6,
            (Transport::Raw, SocketAddr::V4(_)) => Kind::Raw4,
            (Transport::Raw, SocketAddr::V6(_)) => {
                return Err(Error::BadAddress(format!(
                    "{addr}: raw IP mode supports IPv4 only"
                )))
            }
        };
        let socket = match kind {
            Kind::Udp4 => Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)),
            Kind::Udp6 => Socket::new(Domain::IPV6, Type::DGRAM, Some(Protocol::UDP)),
            Kind::Raw4 => Socket::new(
                Domain::IPV4,
                Type::RAW,
                Some(Protocol::from(homa_wire::IPPROTO_HOMA as i32)),
            ),
        }
        .map_err(|e| match e.kind() {
            io::ErrorKind::PermissionDenied => Error::PermissionDenied(
                "raw IP (protocol 146) needs root or CAP_NET_RAW; use the UDP transport".into(),
            ),
            _ => Error::Io(e),
        })?;
        // Readers sleep in ppoll, whose timeout is precise (a blocking
        // receive's timeout is rounded to jiffies and would make timers late).
        socket.set_nonblocking(true)?;
        set_buffer_sizes(&socket, buffer_bytes);
        if kind == Kind::Udp6 {
            socket.set_only_v6(true)?;
        }
        let mut raw_port = None;
        let local = match kind {
            Kind::Raw4 => {
                socket
                    .bind(&SockAddr::from(SocketAddr::new(addr.ip(), 0)))
                    .map_err(|e| bind_error(addr, e))?;
                let claim = if addr.port() == 0 {
                    (0..1000).find_map(|_| {
                        let port = 0x8000 + rand::random::<u16>() % 0x8000;
                        RawPort::claim(SocketAddr::new(addr.ip(), port))
                    })
                } else {
                    RawPort::claim(addr)
                };
                let claim = claim
                    .ok_or_else(|| Error::BadAddress(format!("{addr}: address already in use")))?;
                let local = claim.0;
                raw_port = Some(claim);
                local
            }
            _ => {
                socket
                    .bind(&SockAddr::from(addr))
                    .map_err(|e| bind_error(addr, e))?;
                socket
                    .local_addr()?
                    .as_socket()
                    .ok_or_else(|| Error::BadAddress(format!("{addr}: not an IP address")))?
            }
        };
        let mut s = HomaSocket {
            socket,
            kind,
            gso: false,
            gro: false,
            _raw_port: raw_port,
        };
        if kind != Kind::Raw4 {
            s.gso = gso;
            s.gro = gro && s.setsockopt_int(libc::SOL_UDP, UDP_GRO, 1).is_ok();
        }
        Ok((s, local))
    }

    /// True when packets come with UDP ports (which must then match the
    /// ports in their Homa headers).
    pub(crate) fn has_udp_ports(&self) -> bool {
        self.kind != Kind::Raw4
    }

    /// Bytes of headers below Homa in each packet.
    pub(crate) fn lower_header_bytes(&self) -> u32 {
        match self.kind {
            Kind::Udp4 => 28,
            Kind::Udp6 => 48,
            Kind::Raw4 => 20,
        }
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }

    fn setsockopt_int(
        &self,
        level: libc::c_int,
        name: libc::c_int,
        v: libc::c_int,
    ) -> io::Result<()> {
        // SAFETY: the fd is a live socket owned by self; the option value is
        // a c_int on the stack whose size we pass.
        let r = unsafe {
            libc::setsockopt(
                self.fd(),
                level,
                name,
                &v as *const libc::c_int as *const libc::c_void,
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Receives up to `max` datagrams (at most a batch) without blocking;
    /// returns how many (0 when nothing is waiting). A GRO buffer counts as
    /// the packets it holds.
    pub(crate) fn recv(&self, rb: &mut RecvBufs, max: usize) -> io::Result<usize> {
        if max <= 1 && !self.gro {
            return self.recv_one(rb);
        }
        let n = rb.bufs.len().min(max.max(1));
        let RecvBufs {
            bufs,
            names,
            cmsgs,
            iovs,
            msgs,
            got,
        } = rb;
        got.clear();
        iovs.clear();
        iovs.extend(bufs.iter_mut().take(n).map(|b| libc::iovec {
            iov_base: b.as_mut_ptr() as *mut libc::c_void,
            iov_len: b.len(),
        }));
        msgs.clear();
        for i in 0..n {
            // SAFETY: all-zero is a valid mmsghdr; the pointers set below
            // refer to vectors of `rb` that outlive the recvmmsg call.
            let mut m: libc::mmsghdr = unsafe { zeroed() };
            m.msg_hdr.msg_name = &mut names[i] as *mut _ as *mut libc::c_void;
            m.msg_hdr.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            m.msg_hdr.msg_iov = &mut iovs[i];
            m.msg_hdr.msg_iovlen = 1;
            m.msg_hdr.msg_control = cmsgs[i].as_mut_ptr() as *mut libc::c_void;
            m.msg_hdr.msg_controllen = size_of::<CmsgBuf>() as _;
            msgs.push(m);
        }
        // SAFETY: msgs holds n initialised headers whose buffers stay alive
        // and unaliased for the duration of the call.
        let r = unsafe {
            libc::recvmmsg(
                self.fd(),
                msgs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            return nothing_received();
        }
        for (i, m) in msgs.iter().enumerate().take(r as usize) {
            let len = m.msg_len as usize;
            let Some(src) = sockaddr_addr(&names[i]) else {
                continue;
            };
            let buf = &bufs[i];
            let (start, len) = if self.kind == Kind::Raw4 {
                // Raw IPv4 sockets deliver the IP header too.
                let ihl = buf.first().map(|b| (b & 0x0f) as usize * 4).unwrap_or(0);
                if ihl < 20 || ihl > len {
                    continue;
                }
                (ihl, len - ihl)
            } else {
                (0, len)
            };
            let seg = if self.gro {
                gro_segment_size(&m.msg_hdr)
            } else {
                None
            };
            match seg {
                Some(seg) if seg > 0 && seg < len => {
                    let mut off = 0;
                    while off < len {
                        let l = seg.min(len - off);
                        got.push((src, i, start + off, l));
                        off += l;
                    }
                }
                _ => got.push((src, i, start, len)),
            }
        }
        Ok(got.len())
    }

    /// Receives one datagram with the cheapest call there is (`recvfrom`):
    /// what a spinning reader does between arrivals.
    fn recv_one(&self, rb: &mut RecvBufs) -> io::Result<usize> {
        rb.got.clear();
        // SAFETY: all-zero is a valid sockaddr_storage.
        let mut name: libc::sockaddr_storage = unsafe { zeroed() };
        let mut namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        let buf = &mut rb.bufs[0];
        // SAFETY: buf and name are live, writable and as long as we say.
        let r = unsafe {
            libc::recvfrom(
                self.fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                libc::MSG_DONTWAIT,
                &mut name as *mut _ as *mut libc::sockaddr,
                &mut namelen,
            )
        };
        if r < 0 {
            return nothing_received();
        }
        let len = r as usize;
        let Some(src) = sockaddr_addr(&name) else {
            return Ok(0);
        };
        let start = if self.kind == Kind::Raw4 {
            let ihl = buf.first().map(|b| (b & 0x0f) as usize * 4).unwrap_or(0);
            if ihl < 20 || ihl > len {
                return Ok(0);
            }
            ihl
        } else {
            0
        };
        rb.got.push((src, 0, start, len - start));
        Ok(1)
    }

    /// Sends a batch. Runs of packets to the same place at the same priority
    /// and of equal size (the last may be shorter) go as one GSO send.
    /// Returns the packets the kernel did not take (dropped: Homa recovers).
    pub(crate) fn send(&self, batch: &[Transmit]) -> usize {
        if let [one] = batch {
            return self.send_one(one);
        }
        // Group into messages.
        let mut groups: Vec<(usize, usize, usize)> = Vec::new(); // (first, count, segment)
        let mut i = 0;
        while i < batch.len() {
            let first = &batch[i];
            let seg = first.len();
            let mut j = i + 1;
            if self.gso {
                let mut total = seg;
                while j < batch.len()
                    && j - i < MAX_GSO_SEGMENTS
                    && batch[j].dst == first.dst
                    && batch[j].priority == first.priority
                    && batch[j].len() <= seg
                    && total + batch[j].len() <= MAX_UDP_PAYLOAD
                {
                    total += batch[j].len();
                    let shorter = batch[j].len() < seg;
                    j += 1;
                    if shorter {
                        break;
                    }
                }
            }
            groups.push((i, j - i, seg));
            i = j;
        }
        let mut names: Vec<SockAddr> = groups
            .iter()
            .map(|&(first, _, _)| self.dest_name(batch[first].dst))
            .collect();
        // Two iovecs a packet: header and message bytes, sent without copying.
        let mut iovs: Vec<libc::iovec> = batch.iter().flat_map(iovecs).collect();
        let mut cmsgs: Vec<CmsgBuf> = vec![[0u64; 8]; groups.len()];
        let mut msgs: Vec<libc::mmsghdr> = Vec::with_capacity(groups.len());
        for (g, &(first, count, seg)) in groups.iter().enumerate() {
            // SAFETY: all-zero is a valid mmsghdr; every pointer set below
            // refers to a vector that outlives the sendmmsg call, and the
            // kernel only reads through the iovecs.
            let mut m: libc::mmsghdr = unsafe { zeroed() };
            m.msg_hdr.msg_name = names[g].as_ptr() as *mut libc::c_void;
            m.msg_hdr.msg_namelen = names[g].len();
            m.msg_hdr.msg_iov = &mut iovs[2 * first];
            m.msg_hdr.msg_iovlen = (2 * count) as _;
            let tos = (batch[first].priority as libc::c_int) << 5;
            let gso = (count > 1).then_some(seg as u16);
            // SAFETY: the control buffer is 64 bytes, enough for an int
            // option and a u16 option, and properly aligned.
            let used = unsafe { self.fill_cmsgs(&mut m.msg_hdr, &mut cmsgs[g], tos, gso) };
            m.msg_hdr.msg_controllen = used as _;
            msgs.push(m);
        }
        let _ = &mut names;
        let mut sent_msgs = 0;
        let mut unsent = 0;
        while sent_msgs < msgs.len() {
            // SAFETY: msgs[sent_msgs..] are initialised headers whose
            // buffers stay alive for the call.
            let r = unsafe {
                libc::sendmmsg(
                    self.fd(),
                    msgs.as_mut_ptr().add(sent_msgs),
                    (msgs.len() - sent_msgs) as libc::c_uint,
                    libc::MSG_DONTWAIT,
                )
            };
            if r > 0 {
                sent_msgs += r as usize;
                continue;
            }
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            // The message at the head failed: skip it (Homa will recover
            // the packets) and go on with the rest.
            if e.kind() != io::ErrorKind::WouldBlock {
                tracing::debug!(error = %e, "send failed");
            }
            unsent += groups[sent_msgs].1;
            sent_msgs += 1;
        }
        unsent
    }

    /// The kernel's destination for a packet to `dst` (raw sockets take no
    /// port: the Homa port is in the Homa header).
    fn dest_name(&self, dst: SocketAddr) -> SockAddr {
        match self.kind {
            Kind::Raw4 => SockAddr::from(SocketAddr::new(dst.ip(), 0)),
            _ => SockAddr::from(dst),
        }
    }

    /// Sends one packet with `sendmsg`, everything on the stack: the common
    /// case of a short RPC, where allocations would show in the latency.
    fn send_one(&self, t: &Transmit) -> usize {
        let name = self.dest_name(t.dst);
        let mut iov = iovecs(t);
        let mut cmsg: CmsgBuf = [0u64; 8];
        // SAFETY: all-zero is a valid msghdr; its pointers refer to locals
        // that outlive the sendmsg call, and the kernel only reads them.
        let r = unsafe {
            let mut m: libc::msghdr = zeroed();
            m.msg_name = name.as_ptr() as *mut libc::c_void;
            m.msg_namelen = name.len();
            m.msg_iov = iov.as_mut_ptr();
            m.msg_iovlen = 2;
            let tos = (t.priority as libc::c_int) << 5;
            let used = self.fill_cmsgs(&mut m, &mut cmsg, tos, None);
            m.msg_controllen = used as _;
            libc::sendmsg(self.fd(), &m, libc::MSG_DONTWAIT)
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::WouldBlock {
                tracing::debug!(error = %e, "send failed");
            }
            1
        } else {
            0
        }
    }

    /// Writes the TOS (or traffic class) and, for GSO, the segment size.
    ///
    /// # Safety
    /// `hdr.msg_control` must be unset; `buf` must outlive the send.
    unsafe fn fill_cmsgs(
        &self,
        hdr: &mut libc::msghdr,
        buf: &mut CmsgBuf,
        tos: libc::c_int,
        gso: Option<u16>,
    ) -> usize {
        hdr.msg_control = buf.as_mut_ptr() as *mut libc::c_void;
        hdr.msg_controllen = size_of::<CmsgBuf>() as _;
        let (level, name) = match self.kind {
            Kind::Udp6 => (libc::IPPROTO_IPV6, libc::IPV6_TCLASS),
            _ => (libc::IPPROTO_IP, libc::IP_TOS),
        };
        let mut used = 0;
        // SAFETY (for the block): CMSG_* walk the buffer set above, which is
        // large enough for both messages.
        let c = libc::CMSG_FIRSTHDR(hdr);
        (*c).cmsg_level = level;
        (*c).cmsg_type = name;
        (*c).cmsg_len = libc::CMSG_LEN(size_of::<libc::c_int>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut libc::c_int, tos);
        used += libc::CMSG_SPACE(size_of::<libc::c_int>() as u32) as usize;
        if let Some(seg) = gso {
            let c2 = libc::CMSG_NXTHDR(hdr, c);
            (*c2).cmsg_level = libc::SOL_UDP;
            (*c2).cmsg_type = UDP_SEGMENT;
            (*c2).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(c2) as *mut u16, seg);
            used += libc::CMSG_SPACE(size_of::<u16>() as u32) as usize;
        }
        used
    }
}

/// Asks for `bytes` of socket buffer each way. With CAP_NET_ADMIN the
/// `*FORCE` options go past the system maximum (`net.core.rmem_max`), which
/// keeps a burst of thousands of requests from overflowing the socket;
/// otherwise the kernel caps the request at that maximum.
fn set_buffer_sizes(socket: &Socket, bytes: usize) {
    let v = bytes.min(i32::MAX as usize) as libc::c_int;
    for (force, plain) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        let set = |name| {
            // SAFETY: a live socket fd and a c_int option value on the stack.
            unsafe {
                libc::setsockopt(
                    socket.as_raw_fd(),
                    libc::SOL_SOCKET,
                    name,
                    &v as *const libc::c_int as *const libc::c_void,
                    size_of::<libc::c_int>() as libc::socklen_t,
                )
            }
        };
        if set(force) != 0 {
            set(plain);
        }
    }
}

fn bind_error(addr: SocketAddr, e: io::Error) -> Error {
    match e.kind() {
        io::ErrorKind::AddrInUse => Error::BadAddress(format!("{addr}: address already in use")),
        io::ErrorKind::AddrNotAvailable => {
            Error::BadAddress(format!("{addr}: not an address of this host"))
        }
        io::ErrorKind::PermissionDenied => {
            Error::PermissionDenied(format!("{addr}: binding needs privileges"))
        }
        _ => Error::Io(e),
    }
}

/// A packet as two iovecs, header and message bytes, so it is sent without
/// being copied together first.
fn iovecs(t: &Transmit) -> [libc::iovec; 2] {
    [
        libc::iovec {
            iov_base: t.header.as_ptr() as *mut libc::c_void,
            iov_len: t.header.len(),
        },
        libc::iovec {
            iov_base: t.payload.as_ptr() as *mut libc::c_void,
            iov_len: t.payload.len(),
        },
    ]
}

/// Reads errno after a failed receive: "nothing came" for the expected
/// cases (no data, a signal, or an ICMP error left by an earlier send, which
/// says nothing about this receive), the error otherwise.
fn nothing_received() -> io::Result<usize> {
    let e = io::Error::last_os_error();
    match e.kind() {
        io::ErrorKind::WouldBlock
        | io::ErrorKind::Interrupted
        | io::ErrorKind::ConnectionRefused => Ok(0),
        _ => Err(e),
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

fn gro_segment_size(hdr: &libc::msghdr) -> Option<usize> {
    // SAFETY: the kernel filled msg_control/msg_controllen; CMSG_* stay
    // within them.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(hdr);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_UDP && (*c).cmsg_type == UDP_GRO {
                let v = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::c_int);
                return Some(v as usize);
            }
            c = libc::CMSG_NXTHDR(hdr, c);
        }
    }
    None
}
