//! The operating-system side: a UDP (IPv4/IPv6) or raw IPv4 socket, batched
//! sends with a per-packet TOS byte (`priority << 5`, plus ECT(0) in SIRD
//! mode) and UDP GSO, batched receives with UDP GRO (in [`recv`]).

mod lanes;
mod pool;
mod recv;
mod sys;
mod timeout;

pub(crate) use lanes::{
    is_lane_kick, lane_kick, lane_of, open_group, open_lanes, GroupSpec, MAX_LANES,
};
pub(crate) use recv::RecvBufs;
pub(crate) use timeout::jiffy;

use crate::cmsg::{self, CmsgBuf, UDP_GRO};
use crate::config::Transport;
use crate::Error;
use homa_core::Transmit;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io;
use std::mem::{size_of, zeroed};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};

/// Most segments the kernel accepts in one GSO send.
const MAX_GSO_SEGMENTS: usize = 64;
/// Most payload bytes in one UDP datagram (what a GSO send may carry).
const MAX_UDP_PAYLOAD: usize = 65_507;

/// Largest packet (Homa header and message bytes) [`HomaSocket::send_one`]
/// copies into one buffer on the stack to send with `sendto`: control
/// packets and the data of short messages. (Copying a few hundred bytes
/// costs less than `sendmsg`'s second iovec and control message.)
const SMALL_SEND: usize = 512;

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Udp4,
    Udp6,
    Raw4,
}

/// The receive timeout a UDP socket starts with: the longest a reader
/// stays in a blocking receive when nobody kicks it until the first reader
/// sets its own (`timeout.rs`).
const BLOCKED_RECV_LIMIT: std::time::Duration = std::time::Duration::from_millis(20);

/// True for a kick datagram ([`HomaSocket::kick_self`]): empty, from this
/// endpoint's own port. (A peer could forge one: it would only wake the
/// reader, as any datagram does.)
pub(crate) fn is_kick(src: SocketAddr, bytes: &[u8], local: SocketAddr) -> bool {
    (bytes.is_empty() || is_lane_kick(bytes)) && src.port() == local.port()
}

/// One Homa socket.
#[derive(Debug)]
pub(crate) struct HomaSocket {
    socket: Socket,
    kind: Kind,
    gso: bool,
    gro: bool,
    /// ECN (SIRD): packets go out ECT(0), and received CE marks are read
    /// (`IP_RECVTOS` / `IPV6_RECVTCLASS` over UDP, the IP header over raw).
    ecn: bool,
    /// Raw IPv4: an ICMP error may be queued (`IP_RECVERR`), to be read
    /// with `take_icmp_errors`.
    icmp_pending: std::sync::atomic::AtomicBool,
    /// UDP: the receive timeout in force (`SO_RCVTIMEO`, ns), which the
    /// reader keeps at or before its next coarse deadline (`timeout.rs`).
    recv_timeout_ns: std::sync::atomic::AtomicU64,
    /// The TOS (traffic class) the socket itself carries (`IP_TOS` /
    /// `IPV6_TCLASS`), if set: packets of that TOS go without a control
    /// message, and short ones with `sendto` from one buffer (the cheapest
    /// send there is; see `send_one`). `None`: every packet's TOS goes in
    /// a control message.
    default_tos: Option<u8>,
    /// The peer the socket is connected to (UDP, [`crate::Config::peer`]):
    /// packets to it go without an address, so the kernel uses the route
    /// it keeps instead of looking one up.
    connected: Option<SocketAddr>,
    _raw_port: Option<RawPort>,
}

impl HomaSocket {
    /// Opens and binds a socket. Port 0 picks a client port (the kernel's
    /// ephemeral range for UDP; a random port at or above 0x8000 for raw IP,
    /// where the kernel keeps no Homa ports). With `ecn` every packet goes
    /// out ECN-capable (ECT(0)) and received CE marks are reported.
    /// With `reuseport` (UDP only) the socket may share its address with
    /// others of its group (`SO_REUSEPORT`, see `lanes.rs`).
    pub(crate) fn open(
        addr: SocketAddr,
        transport: Transport,
        buffer_bytes: usize,
        gso: bool,
        gro: bool,
        ecn: bool,
        reuseport: bool,
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
        // Every call passes MSG_DONTWAIT except the one a UDP reader sleeps
        // in (`recv_wait`): a blocking receive, one system call per wake-up
        // where poll-then-receive is two. Its timeout (whole jiffies) is the
        // reader's alarm clock for deadlines a jiffy or more away
        // (`timeout.rs`); nearer ones are kept otherwise. Raw IPv4 readers sleep in
        // ppoll (a kick datagram to ourselves would reach every protocol-146
        // socket on the host, Linux Homa's included).
        if kind == Kind::Raw4 {
            socket.set_nonblocking(true)?;
        } else {
            socket.set_read_timeout(Some(BLOCKED_RECV_LIMIT))?;
        }
        set_buffer_sizes(&socket, buffer_bytes);
        if kind == Kind::Udp6 {
            socket.set_only_v6(true)?;
        }
        if reuseport && kind != Kind::Raw4 {
            socket.set_reuse_port(true)?;
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
            ecn,
            icmp_pending: std::sync::atomic::AtomicBool::new(false),
            recv_timeout_ns: std::sync::atomic::AtomicU64::new(BLOCKED_RECV_LIMIT.as_nanos() as u64),
            default_tos: None,
            connected: None,
            _raw_port: raw_port,
        };
        if kind == Kind::Raw4 {
            // ICMP errors for our packets (a peer's port or Homa gone) are
            // queued for us to read, as Linux Homa's err_handler gets them.
            // Without it an unconnected raw socket never sees them.
            let _ = s.setsockopt_int(libc::IPPROTO_IP, libc::IP_RECVERR, 1);
        }
        if kind != Kind::Raw4 {
            s.gso = gso;
            s.gro = gro && s.setsockopt_int(libc::SOL_UDP, UDP_GRO, 1).is_ok();
        }
        if ecn {
            // (Raw IPv4 sockets receive the IP header, TOS included.)
            match kind {
                Kind::Udp4 => s.setsockopt_int(libc::IPPROTO_IP, libc::IP_RECVTOS, 1)?,
                Kind::Udp6 => s.setsockopt_int(libc::IPPROTO_IPV6, libc::IPV6_RECVTCLASS, 1)?,
                Kind::Raw4 => {}
            }
        }
        Ok((s, local))
    }

    /// Makes the TOS of Homa `priority` the socket's own, so that packets
    /// at that priority need no control message. Left as it was (every
    /// packet's TOS in a control message) if the kernel refuses.
    pub(crate) fn set_default_priority(&mut self, priority: u8) {
        let tos = self.tos(priority);
        let (level, name) = if self.v6() {
            (libc::IPPROTO_IPV6, libc::IPV6_TCLASS)
        } else {
            (libc::IPPROTO_IP, libc::IP_TOS)
        };
        if self
            .setsockopt_int(level, name, libc::c_int::from(tos))
            .is_ok()
        {
            self.default_tos = Some(tos);
        }
    }

    /// Connects a UDP socket to `peer`: the kernel then keeps the route
    /// (a send skips its lookup) and takes datagrams from `peer` alone.
    pub(crate) fn connect(&mut self, peer: SocketAddr) -> Result<(), Error> {
        if self.kind == Kind::Raw4 {
            return Err(Error::Config(format!(
                "peer {peer}: raw IP sockets are not connected"
            )));
        }
        if peer.is_ipv4() != (self.kind == Kind::Udp4) {
            return Err(Error::BadAddress(format!(
                "peer {peer}: the endpoint speaks the other IP version"
            )));
        }
        self.socket
            .connect(&SockAddr::from(peer))
            .map_err(|e| Error::BadAddress(format!("peer {peer}: {e}")))?;
        self.connected = Some(peer);
        Ok(())
    }

    /// True when a reader may sleep in the receive call itself
    /// ([`HomaSocket::recv_wait`]), woken by [`HomaSocket::kick_self`].
    /// Not a connected socket: it drops the kick, which comes from itself
    /// and not from its peer.
    pub(crate) fn can_block(&self) -> bool {
        self.kind != Kind::Raw4 && self.connected.is_none()
    }

    /// Wakes a reader asleep in [`HomaSocket::recv_wait`]: a zero-length
    /// datagram from this socket to itself (`local`, loopback when bound to
    /// the unspecified address). Whoever reads it next drops it
    /// ([`is_kick`]). Not for raw sockets.
    pub(crate) fn kick_self(&self, local: SocketAddr) {
        self.kick_self_with(local, &[]);
    }

    /// [`HomaSocket::kick_self`] with `payload` (a lane kick, `lanes.rs`).
    pub(crate) fn kick_self_with(&self, local: SocketAddr, payload: &[u8]) {
        let mut to = local;
        if to.ip().is_unspecified() {
            to.set_ip(match to {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        let name = SockAddr::from(to);
        let mut cmsg: CmsgBuf = [0u64; 8];
        // SAFETY: all-zero is a valid msghdr (no data: a zero-length
        // datagram, unless `payload` is set below).
        let mut m: libc::msghdr = unsafe { zeroed() };
        m.msg_name = name.as_ptr() as *mut libc::c_void;
        m.msg_namelen = name.len();
        let mut iov = libc::iovec {
            iov_base: payload.as_ptr() as *mut libc::c_void,
            iov_len: payload.len(),
        };
        if !payload.is_empty() {
            m.msg_iov = &mut iov;
            m.msg_iovlen = 1;
        }
        // (Marked like every other packet of this socket, ECN included.)
        let used = cmsg::fill_send(&mut m, &mut cmsg, self.v6(), self.tos(0), None);
        m.msg_controllen = used as _;
        // SAFETY: the pointers in `m` refer to locals that outlive the call,
        // and the kernel only reads them. (A full socket buffer refuses the
        // kick, but then the reader has data: it is awake.)
        unsafe { libc::sendmsg(self.fd(), &m, libc::MSG_DONTWAIT) };
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

    /// Sends a batch. Runs of packets to the same place at the same priority
    /// and of equal size (the last may be shorter) go as one GSO send.
    /// Returns the packets the kernel did not take (dropped: Homa recovers).
    // (The one-packet case inline, the batch out of line: the batch's
    // frame made every one-packet send pay for saving its registers.)
    #[inline]
    pub(crate) fn send(&self, batch: &[Transmit]) -> usize {
        if let [one] = batch {
            return self.send_one(one);
        }
        self.send_batch(batch)
    }

    /// [`HomaSocket::send`] of several packets (or none).
    #[inline(never)]
    fn send_batch(&self, batch: &[Transmit]) -> usize {
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
            if self.connected != Some(batch[first].dst) {
                m.msg_hdr.msg_name = names[g].as_ptr() as *mut libc::c_void;
                m.msg_hdr.msg_namelen = names[g].len();
            }
            m.msg_hdr.msg_iov = &mut iovs[2 * first];
            m.msg_hdr.msg_iovlen = (2 * count) as _;
            let tos = self.tos(batch[first].priority);
            let gso = (count > 1).then_some(seg as u16);
            let used = cmsg::fill_send(&mut m.msg_hdr, &mut cmsgs[g], self.v6(), tos, gso);
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

    /// Sends one packet, everything on the stack: the common case of a
    /// short RPC, where allocations would show in the latency. A packet at
    /// the socket's own TOS needs no control message, and one of at most
    /// [`SMALL_SEND`] bytes goes with `sendto` from one buffer: on the
    /// 2-CPU VM of docs/runtime-profile.md (eleventh pass) `sendmsg` with
    /// two iovecs and a TOS message cost 0.3–0.5 µs more per 100 B send.
    fn send_one(&self, t: &Transmit) -> usize {
        let name = RawName::new(match self.kind {
            Kind::Raw4 => SocketAddr::new(t.dst.ip(), 0),
            _ => t.dst,
        });
        // (A connected socket's peer takes no address: with one the kernel
        // would look its route up again.)
        let (name_ptr, name_len) = if self.connected == Some(t.dst) {
            (std::ptr::null(), 0)
        } else {
            name.as_ptr_len()
        };
        let tos = self.tos(t.priority);
        let own_tos = self.default_tos == Some(tos);
        let len = t.header.len() + t.payload.len();
        let r = if own_tos && len <= SMALL_SEND {
            let mut buf = [0u8; SMALL_SEND];
            buf[..t.header.len()].copy_from_slice(&t.header);
            buf[t.header.len()..len].copy_from_slice(&t.payload);
            // SAFETY: `buf` holds `len` initialised bytes and the name is a
            // live sockaddr of `name_len` bytes; the kernel only reads both.
            unsafe {
                sys::sendto(
                    self.fd(),
                    buf.as_ptr() as *const libc::c_void,
                    len,
                    libc::MSG_DONTWAIT,
                    name_ptr as *const libc::sockaddr,
                    name_len,
                )
            }
        } else {
            let mut iov = iovecs(t);
            let mut cmsg: CmsgBuf = [0u64; 8];
            // SAFETY: all-zero is a valid msghdr.
            let mut m: libc::msghdr = unsafe { zeroed() };
            m.msg_name = name_ptr as *mut libc::c_void;
            m.msg_namelen = name_len;
            m.msg_iov = iov.as_mut_ptr();
            m.msg_iovlen = 2;
            if !own_tos {
                let used = cmsg::fill_send(&mut m, &mut cmsg, self.v6(), tos, None);
                m.msg_controllen = used as _;
            }
            // SAFETY: the pointers in `m` refer to locals that outlive the
            // sendmsg call, and the kernel only reads them.
            unsafe { libc::sendmsg(self.fd(), &m, libc::MSG_DONTWAIT) }
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

    /// The TOS (or traffic class) byte of a packet at Homa `priority`: the
    /// priority in the precedence bits (`priority << 5`), and in ECN mode
    /// ECT(0) in the ECN bits. (Homa mode leaves the ECN bits 0: its
    /// packets are byte for byte what they were before SIRD.)
    fn tos(&self, priority: u8) -> u8 {
        let ecn = if self.ecn { cmsg::ECN_ECT0 } else { 0 };
        ((priority & 7) << 5) | ecn
    }

    /// True for an IPv6 socket (traffic class instead of TOS).
    fn v6(&self) -> bool {
        self.kind == Kind::Udp6
    }
}

/// A destination as the kernel takes it, on the stack: the bytes
/// `SockAddr::from` writes, without its 128-byte `sockaddr_storage`
/// (zeroed, then filled, on every one-packet send).
enum RawName {
    V4(libc::sockaddr_in),
    V6(libc::sockaddr_in6),
}

impl RawName {
    fn new(addr: SocketAddr) -> RawName {
        match addr {
            SocketAddr::V4(a) => RawName::V4(libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            }),
            SocketAddr::V6(a) => RawName::V6(libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            }),
        }
    }

    /// The address and length for a `msghdr`'s `msg_name`.
    fn as_ptr_len(&self) -> (*const libc::c_void, libc::socklen_t) {
        match self {
            RawName::V4(a) => (
                a as *const libc::sockaddr_in as *const libc::c_void,
                size_of::<libc::sockaddr_in>() as libc::socklen_t,
            ),
            RawName::V6(a) => (
                a as *const libc::sockaddr_in6 as *const libc::c_void,
                size_of::<libc::sockaddr_in6>() as libc::socklen_t,
            ),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_names_are_the_bytes_sockaddr_writes() {
        for a in [
            "127.0.0.1:4000",
            "10.1.2.3:0",
            "[::1]:9",
            "[fe80::1%3]:65535",
        ] {
            let mut addr: SocketAddr = a.parse().unwrap();
            if let SocketAddr::V6(v6) = &mut addr {
                v6.set_flowinfo(0x12345);
            }
            let want = SockAddr::from(addr);
            // (Bound: a temporary would be gone when its bytes are read,
            // which a release build showed as garbage.)
            let name = RawName::new(addr);
            let (ptr, len) = name.as_ptr_len();
            assert_eq!(len, want.len(), "{a}");
            // SAFETY: both point at `len` initialised bytes that live for
            // the comparison.
            let (got, want) = unsafe {
                (
                    std::slice::from_raw_parts(ptr as *const u8, len as usize),
                    std::slice::from_raw_parts(want.as_ptr() as *const u8, len as usize),
                )
            };
            assert_eq!(got, want, "{a}");
        }
    }

    /// Receives one datagram on `rx` (`IP_RECVTOS` set): its bytes and TOS.
    fn recv_with_tos(rx: &Socket) -> (Vec<u8>, Option<u8>) {
        let mut buf = vec![0u8; 70_000];
        let mut cbuf: CmsgBuf = [0u64; 8];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        };
        // SAFETY: all-zero is a valid msghdr; the pointers set below refer
        // to locals that outlive the call, with the lengths given.
        let mut m: libc::msghdr = unsafe { zeroed() };
        m.msg_iov = &mut iov;
        m.msg_iovlen = 1;
        m.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
        m.msg_controllen = size_of::<CmsgBuf>() as _;
        // SAFETY: as above; a blocking receive (the socket has a timeout).
        let r = unsafe { libc::recvmsg(rx.as_raw_fd(), &mut m, 0) };
        assert!(r >= 0, "{}", io::Error::last_os_error());
        buf.truncate(r as usize);
        (buf, cmsg::parse_recv(&m).tos)
    }

    /// Packets at the socket's own TOS go without a control message (short
    /// ones with `sendto` from one buffer, long ones with `sendmsg`), the
    /// others with theirs; each arrives whole, at its priority's TOS.
    #[test]
    fn every_packet_keeps_its_priority_whichever_way_it_is_sent() {
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let (mut tx, _) =
            HomaSocket::open(any, Transport::Udp, 1 << 20, false, false, false, false)
                .expect("open");
        tx.set_default_priority(7);
        assert_eq!(tx.default_tos, Some(7 << 5));
        let rx = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).unwrap();
        rx.bind(&SockAddr::from(any)).unwrap();
        rx.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        rx.set_recv_tos(true).unwrap();
        let to = rx.local_addr().unwrap().as_socket().unwrap();
        let header = homa_wire::HeaderBuf::from_slice(&[0xA5; 60]).unwrap();
        for (priority, len) in [(7u8, 100usize), (7, 3_000), (3, 100), (0, 3_000), (7, 0)] {
            let payload: bytes::Bytes = (0..len).map(|i| (i * 31 + len) as u8).collect();
            let t = Transmit {
                dst: to,
                priority,
                packet_type: homa_wire::PacketType::Data,
                header,
                payload: payload.clone(),
            };
            assert_eq!(tx.send(std::slice::from_ref(&t)), 0, "sent");
            let (got, tos) = recv_with_tos(&rx);
            let mut want = vec![0xA5; 60];
            want.extend_from_slice(&payload);
            assert_eq!(got, want, "priority {priority}, {len} B");
            assert_eq!(tos, Some(priority << 5), "priority {priority}, {len} B");
        }
    }
}
