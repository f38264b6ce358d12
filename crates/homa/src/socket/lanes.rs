//! Lanes: several UDP sockets on the endpoint's one address
//! (`SO_REUSEPORT`), with a classic BPF program
//! (`SO_ATTACH_REUSEPORT_CBPF`, no privilege needed) that hands each
//! datagram to the socket its RPC id names. A thread waiting for one RPC's
//! response can then sleep on a socket only that RPC's packets reach, and
//! the kernel wakes it directly, with no reader in between.
//!
//! The program reads the low word of the Homa header's `sender_id` (the
//! UDP payload is at the program's offset 0). An odd one comes from a
//! server, for one of this endpoint's client RPCs (the server's packets
//! carry the client's id `| 1`): it goes to lane `(id >> 1) & (lanes -
//! 1)`, the bits the client chose when it made the id. An even one comes
//! from a client, for a server RPC here: its bits were chosen by that
//! client, so it goes to socket 0, the main one, which the endpoint's
//! server threads read. So does a datagram too short to hold the word.
//!
//! Two traps, both on this kernel: a port-0 bind with `SO_REUSEPORT` may
//! be given a port another same-user reuseport socket holds (and join its
//! group), so the port is picked first by a socket without the option; and
//! any same-user process may later join a reuseport group, which is
//! `SO_REUSEPORT`'s contract (a group is not a boundary between a user's
//! own processes).

use super::HomaSocket;
use crate::config::Transport;
use crate::Error;
use homa_wire::OFF_SENDER_ID;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io;
use std::net::SocketAddr;

/// Most lanes an endpoint may have (the program's mask is 6 bits).
pub(crate) const MAX_LANES: usize = 64;

/// Length of a lane kick: a common header's worth, zero but for the id
/// word that steers it ([`lane_kick`]).
pub(crate) const LANE_KICK_LEN: usize = OFF_SENDER_ID + 8;

/// Tries at a port picked without `SO_REUSEPORT` before giving up (another
/// process may take it between the pick and the group's bind).
const PORT_TRIES: usize = 16;

/// The datagram that wakes the thread asleep on lane `lane`: the program
/// steers it by its id word; a reader drops it ([`is_lane_kick`]).
pub(crate) fn lane_kick(lane: usize) -> [u8; LANE_KICK_LEN] {
    let mut b = [0u8; LANE_KICK_LEN];
    b[OFF_SENDER_ID..].copy_from_slice(&((lane as u64) << 1 | 1).to_be_bytes());
    b
}

/// True for a lane kick: [`LANE_KICK_LEN`] bytes, all zero before the id
/// (no Homa packet has ports 0). Its source must be checked as well
/// (`super::is_kick`).
pub(crate) fn is_lane_kick(bytes: &[u8]) -> bool {
    bytes.len() == LANE_KICK_LEN && bytes[..OFF_SENDER_ID].iter().all(|&b| b == 0)
}

/// The lane of an RPC id with `lanes` lanes (a power of two).
pub(crate) fn lane_of(id: u64, lanes: usize) -> usize {
    ((id >> 1) as usize) & (lanes - 1)
}

/// The steering program for `lanes` lanes (a power of two, at most
/// [`MAX_LANES`]).
fn program(lanes: usize) -> [libc::sock_filter; 6] {
    // Opcodes as <linux/filter.h> composes them.
    const BPF_LD_W_ABS: u16 = 0x20; // BPF_LD 0x00 | BPF_W 0x00 | BPF_ABS 0x20
    const BPF_JMP_JSET_K: u16 = 0x45; // BPF_JMP 0x05 | BPF_JSET 0x40 | BPF_K 0
    const BPF_RET_K: u16 = 0x06; // BPF_RET 0x06 | BPF_K 0
    const BPF_ALU_RSH_K: u16 = 0x74; // BPF_ALU 0x04 | BPF_RSH 0x70 | BPF_K 0
    const BPF_ALU_AND_K: u16 = 0x54; // BPF_ALU 0x04 | BPF_AND 0x50 | BPF_K 0
    const BPF_RET_A: u16 = 0x16; // BPF_RET 0x06 | BPF_A 0x10
    let op = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    [
        // (A load past the end ends the program returning 0: socket 0.)
        op(BPF_LD_W_ABS, 0, 0, (OFF_SENDER_ID + 4) as u32),
        // Odd (from a server): on to the lane; even: socket 0.
        op(BPF_JMP_JSET_K, 1, 0, 1),
        op(BPF_RET_K, 0, 0, 0),
        op(BPF_ALU_RSH_K, 0, 0, 1),
        op(BPF_ALU_AND_K, 0, 0, (lanes - 1) as u32),
        op(BPF_RET_A, 0, 0, 0),
    ]
}

/// How the sockets of a group are opened (those of the lanes come later,
/// on the first call that takes one).
#[derive(Debug, Clone, Copy)]
pub(crate) struct GroupSpec {
    /// UDP or raw IP (raw IP gets no lanes: every protocol-146 socket sees
    /// every packet).
    pub(crate) transport: Transport,
    /// Socket buffer sizes (bytes).
    pub(crate) buffer_bytes: usize,
    /// UDP GSO.
    pub(crate) gso: bool,
    /// UDP GRO.
    pub(crate) gro: bool,
    /// ECN marks sent and read.
    pub(crate) ecn: bool,
    /// The Homa priority most packets go at (control packets and short
    /// messages: the highest in use), made the sockets' own TOS so that
    /// those packets need no control message ([`HomaSocket::set_default_priority`]).
    pub(crate) default_priority: Option<u8>,
    /// Sockets in the group: 0 or 1 (no group), or a power of two up to
    /// [`MAX_LANES`] (checked by the configuration).
    pub(crate) lanes: usize,
}

impl GroupSpec {
    /// Whether the endpoint has lanes.
    pub(crate) fn has_lanes(&self) -> bool {
        self.lanes > 1 && self.transport == Transport::Udp
    }

    fn open(&self, at: SocketAddr, reuseport: bool) -> Result<(HomaSocket, SocketAddr), Error> {
        let (mut sock, local) = HomaSocket::open(
            at,
            self.transport,
            self.buffer_bytes,
            self.gso,
            self.gro,
            self.ecn,
            reuseport,
        )?;
        if let Some(p) = self.default_priority {
            sock.set_default_priority(p);
        }
        Ok((sock, local))
    }
}

/// Opens the endpoint's socket on `addr`; with lanes, as the first of its
/// group, with the steering program. Returns it and the bound address.
pub(crate) fn open_group(
    addr: SocketAddr,
    spec: &GroupSpec,
) -> Result<(HomaSocket, SocketAddr), Error> {
    if !spec.has_lanes() {
        return spec.open(addr, false);
    }
    let open = |at: SocketAddr| spec.open(at, true);
    let mut tries = 0;
    let (main, local) = loop {
        tries += 1;
        let at = SocketAddr::new(addr.ip(), free_port(addr)?);
        match open(at) {
            Ok(x) => break x,
            // Taken between the pick and the bind: pick again.
            Err(Error::BadAddress(_)) if addr.port() == 0 && tries < PORT_TRIES => continue,
            Err(e) => return Err(e),
        }
    };
    let prog = program(spec.lanes);
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: `fprog` points at `prog`, both alive for the call; the kernel
    // copies the program.
    let r = unsafe {
        libc::setsockopt(
            main.fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_REUSEPORT_CBPF,
            &fprog as *const libc::sock_fprog as *const libc::c_void,
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(Error::Io(io::Error::last_os_error()));
    }
    Ok((main, local))
}

/// The sockets of lanes 1.. of the group at `local` (in order: the
/// program's index is the order sockets joined).
pub(crate) fn open_lanes(local: SocketAddr, spec: &GroupSpec) -> Result<Vec<HomaSocket>, Error> {
    (1..spec.lanes)
        .map(|_| Ok(spec.open(local, true)?.0))
        .collect()
}

/// A port for the group at `addr`'s address: `addr`'s own, checked free by
/// a bind without `SO_REUSEPORT` (which fails if anyone holds it, reuseport
/// group or not), or for port 0 one the kernel picks that way.
fn free_port(addr: SocketAddr) -> Result<u16, Error> {
    let domain = if addr.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    let probe = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        probe.set_only_v6(true)?;
    }
    probe
        .bind(&SockAddr::from(addr))
        .map_err(|e| super::bind_error(addr, e))?;
    probe
        .local_addr()?
        .as_socket()
        .map(|a| a.port())
        .ok_or_else(|| Error::BadAddress(format!("{addr}: not an IP address")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::time::Duration;

    fn header_with_id(id: u64) -> Vec<u8> {
        let mut b = vec![0u8; 60];
        b[OFF_SENDER_ID..OFF_SENDER_ID + 8].copy_from_slice(&id.to_be_bytes());
        b[0] = 1; // not a kick
        b
    }

    fn spec(lanes: usize) -> GroupSpec {
        GroupSpec {
            transport: Transport::Udp,
            buffer_bytes: 1 << 20,
            gso: false,
            gro: false,
            ecn: false,
            default_priority: None,
            lanes,
        }
    }

    #[test]
    fn datagrams_reach_the_lane_their_id_names() {
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let (main, local) = open_group(any, &spec(4)).unwrap();
        let others = open_lanes(local, &spec(4)).unwrap();
        assert_ne!(local.port(), 0);
        assert_eq!(others.len(), 3);
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        // From servers (odd ids) by lane; from clients (even) all to the
        // main socket.
        for id in 0u64..64 {
            tx.send_to(&header_with_id(id), local).unwrap();
        }
        tx.send_to(&lane_kick(3), local).unwrap();
        tx.send_to(&[], local).unwrap();
        let socks: Vec<&HomaSocket> = std::iter::once(&main).chain(others.iter()).collect();
        let mut rb = super::super::RecvBufs::new(64);
        for (lane, s) in socks.iter().enumerate() {
            std::thread::sleep(Duration::from_millis(20));
            let n = s.recv(&mut rb, 64).unwrap();
            let mut ids = Vec::new();
            for i in 0..n {
                let (_, bytes, _) = rb.datagram(i);
                if bytes.len() == 60 {
                    ids.push(u64::from_be_bytes(
                        bytes[OFF_SENDER_ID..OFF_SENDER_ID + 8].try_into().unwrap(),
                    ));
                } else if is_lane_kick(bytes) {
                    assert_eq!(lane, 3, "a kick for lane 3 reached lane {lane}");
                } else {
                    assert!(bytes.is_empty());
                    assert_eq!(lane, 0, "a short datagram goes to the main socket");
                }
            }
            let (odd, even): (Vec<u64>, Vec<u64>) = ids.iter().partition(|&&id| id & 1 == 1);
            assert_eq!(odd.len(), 8, "lane {lane}: {ids:?}");
            assert!(odd.iter().all(|&id| lane_of(id, 4) == lane), "{ids:?}");
            assert_eq!(
                even.len(),
                if lane == 0 { 32 } else { 0 },
                "lane {lane}: {ids:?}"
            );
        }
    }

    #[test]
    fn a_group_never_joins_a_port_someone_holds() {
        // A same-user reuseport socket on a port: a group asked for that
        // port is refused, and one on port 0 never lands there.
        let other = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).unwrap();
        other.set_reuse_port(true).unwrap();
        other
            .bind(&SockAddr::from(
                "127.0.0.1:0".parse::<SocketAddr>().unwrap(),
            ))
            .unwrap();
        let held = other.local_addr().unwrap().as_socket().unwrap();
        assert!(open_group(held, &spec(2)).is_err());
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        for _ in 0..50 {
            let (_, local) = open_group(any, &spec(2)).unwrap();
            assert_ne!(local.port(), held.port());
        }
    }

    #[test]
    fn kicks_are_recognised_and_packets_are_not() {
        assert!(is_lane_kick(&lane_kick(5)));
        assert!(!is_lane_kick(&header_with_id(10)[..LANE_KICK_LEN]));
        assert!(!is_lane_kick(&[0u8; 10]));
        assert_eq!(lane_of(0b1010, 4), 1);
        assert_eq!(lane_of(0b1011, 4), 1);
        assert_eq!(lane_of(u64::MAX, 64), 63);
    }
}
