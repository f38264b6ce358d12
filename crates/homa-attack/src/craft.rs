//! Packet crafting: Homa packets built with `homa-wire`, wrapped in an IPv4
//! and a UDP header of our choosing (any 127.0.0.0/8 source address, any
//! source port) and sent through a raw socket with `IP_HDRINCL`, so that
//! both the UDP source port and the Homa header's `sport` name the peer the
//! attacker pretends to be. Plain (unspoofed) crafted packets can go through
//! an ordinary UDP socket instead.

use crate::{Error, Result};
use homa_wire::{AckEntry, Body, CommonHeader, DataHeader, Packet};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::net::{Ipv4Addr, SocketAddrV4};

/// Bytes of the IPv4 header we write (no options).
pub const IPV4_HEADER_LEN: usize = 20;
/// Bytes of a UDP header.
pub const UDP_HEADER_LEN: usize = 8;
/// IP + UDP bytes in front of every Homa packet on the wire.
pub const LOWER_HEADERS: usize = IPV4_HEADER_LEN + UDP_HEADER_LEN;

/// The protocol parameters the target runs with (`homa::Config::default()`
/// over UDP/IPv4), so that crafted packets are legal for it.
pub fn target_core_config() -> homa::Config {
    let mut c = homa::Config::default();
    c.core.lower_header_bytes = LOWER_HEADERS as u32;
    c
}

/// Message bytes one DATA packet carries at the target's MTU.
pub fn max_payload() -> usize {
    target_core_config().core.max_payload() as usize
}

/// The target's unscheduled bytes (what an honest first DATA announces in
/// `incoming`).
pub fn unsched_bytes() -> u32 {
    target_core_config().core.unsched_bytes
}

/// The target's largest message.
pub fn max_message() -> u32 {
    target_core_config().core.max_message_size
}

/// True when this process may open raw sockets.
pub fn have_raw_privilege() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A raw IPv4 socket that sends whole IP packets we build (`IP_HDRINCL`).
/// Loopback only: every destination must be in 127.0.0.0/8.
#[derive(Debug)]
pub struct RawSender {
    socket: Socket,
    /// Packets sent.
    pub packets: u64,
    /// IP bytes sent (headers included).
    pub bytes: u64,
}

impl RawSender {
    /// Opens the socket; [`Error::NeedsRoot`] without the privilege.
    pub fn new() -> Result<RawSender> {
        let socket = Socket::new(
            Domain::IPV4,
            Type::RAW,
            Some(Protocol::from(libc::IPPROTO_RAW)),
        )
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::PermissionDenied => Error::NeedsRoot,
            _ => Error::Io(e),
        })?;
        socket.set_header_included_v4(true)?;
        // Large enough that a burst at the flood rates used here is not
        // refused by the kernel.
        let _ = socket.set_send_buffer_size(4 << 20);
        Ok(RawSender {
            socket,
            packets: 0,
            bytes: 0,
        })
    }

    /// Sends one Homa packet as the UDP payload of an IPv4 packet from `src`
    /// to `dst`. The Homa header's ports should match (the packet builders below take them).
    pub fn send_udp(&mut self, src: SocketAddrV4, dst: SocketAddrV4, homa: &[u8]) -> Result<()> {
        check_loopback(*dst.ip())?;
        check_loopback(*src.ip())?;
        let packet = ipv4_udp(src, dst, homa);
        let to = SockAddr::from(SocketAddrV4::new(*dst.ip(), 0));
        match self.socket.send_to(&packet, &to) {
            Ok(_) => {
                self.packets += 1;
                self.bytes += packet.len() as u64;
                Ok(())
            }
            // A full socket buffer drops the packet, as a switch would.
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

fn check_loopback(ip: Ipv4Addr) -> Result<()> {
    if ip.is_loopback() {
        Ok(())
    } else {
        Err(Error::Usage(format!(
            "{ip} is not a loopback address; this tool only sends to and from 127.0.0.0/8"
        )))
    }
}

/// An IPv4 header, a UDP header (with checksum) and `payload`.
pub fn ipv4_udp(src: SocketAddrV4, dst: SocketAddrV4, payload: &[u8]) -> Vec<u8> {
    let udp_len = UDP_HEADER_LEN + payload.len();
    let total = IPV4_HEADER_LEN + udp_len;
    let mut p = Vec::with_capacity(total);
    p.push(0x45); // version 4, 5 words
    p.push(0); // TOS
    p.extend_from_slice(&(total as u16).to_be_bytes());
    p.extend_from_slice(&rand::random::<u16>().to_be_bytes()); // identification
    p.extend_from_slice(&[0x40, 0]); // don't fragment
    p.push(64); // TTL
    p.push(libc::IPPROTO_UDP as u8);
    p.extend_from_slice(&[0, 0]); // checksum, below
    p.extend_from_slice(&src.ip().octets());
    p.extend_from_slice(&dst.ip().octets());
    let ip_sum = checksum(&[&p[..IPV4_HEADER_LEN]]);
    p[10..12].copy_from_slice(&ip_sum.to_be_bytes());

    let mut udp = [0u8; UDP_HEADER_LEN];
    udp[0..2].copy_from_slice(&src.port().to_be_bytes());
    udp[2..4].copy_from_slice(&dst.port().to_be_bytes());
    udp[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    let mut pseudo = [0u8; 12];
    pseudo[0..4].copy_from_slice(&src.ip().octets());
    pseudo[4..8].copy_from_slice(&dst.ip().octets());
    pseudo[9] = libc::IPPROTO_UDP as u8;
    pseudo[10..12].copy_from_slice(&(udp_len as u16).to_be_bytes());
    let mut sum = checksum(&[&pseudo, &udp, payload]);
    if sum == 0 {
        sum = 0xffff; // zero means "no checksum" in UDP
    }
    udp[6..8].copy_from_slice(&sum.to_be_bytes());
    p.extend_from_slice(&udp);
    p.extend_from_slice(payload);
    p
}

/// The Internet checksum (RFC 1071) of the concatenation of `parts`.
pub fn checksum(parts: &[&[u8]]) -> u16 {
    let mut sum: u64 = 0;
    let mut odd: Option<u8> = None;
    for part in parts {
        for &b in part.iter() {
            match odd.take() {
                Some(hi) => sum += u64::from(u16::from_be_bytes([hi, b])),
                None => odd = Some(b),
            }
        }
    }
    if let Some(hi) = odd {
        sum += u64::from(u16::from_be_bytes([hi, 0]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// A DATA packet's bytes.
#[allow(clippy::too_many_arguments)]
pub fn data_packet(
    sport: u16,
    dport: u16,
    sender_id: u64,
    message_length: u32,
    incoming: u32,
    offset: u32,
    payload: &[u8],
    ack: AckEntry,
) -> Vec<u8> {
    Packet {
        common: CommonHeader {
            sport,
            dport,
            sender_id,
        },
        body: Body::Data {
            header: DataHeader {
                message_length,
                incoming,
                ack,
                offset,
                ..DataHeader::default()
            },
            payload,
        },
    }
    .to_vec()
}

/// Any non-DATA packet's bytes.
pub fn control_packet(sport: u16, dport: u16, sender_id: u64, body: Body<'_>) -> Vec<u8> {
    Packet {
        common: CommonHeader {
            sport,
            dport,
            sender_id,
        },
        body,
    }
    .to_vec()
}

/// The DATA packets of a whole message as an honest sender sends its
/// unscheduled part and, ignoring grants, the rest: `incoming` is the
/// honest unscheduled limit.
pub fn message_packets(sport: u16, dport: u16, sender_id: u64, message: &[u8]) -> Vec<Vec<u8>> {
    let len = message.len() as u32;
    let incoming = len.min(unsched_bytes());
    let step = max_payload();
    let mut out = Vec::new();
    let mut offset = 0usize;
    loop {
        let end = (offset + step).min(message.len());
        out.push(data_packet(
            sport,
            dport,
            sender_id,
            len,
            incoming,
            offset as u32,
            &message[offset..end],
            AckEntry::default(),
        ));
        offset = end;
        if offset >= message.len() {
            return out;
        }
    }
}

/// Sends packets at a steady rate: call [`RateLimiter::wait_turn`] before
/// each packet.
#[derive(Debug)]
pub struct RateLimiter {
    start: std::time::Instant,
    rate: f64,
    issued: u64,
}

impl RateLimiter {
    /// `rate` packets per second from now.
    pub fn new(rate: f64) -> RateLimiter {
        RateLimiter {
            start: std::time::Instant::now(),
            rate,
            issued: 0,
        }
    }

    /// Sleeps until the next packet is due.
    pub fn wait_turn(&mut self) {
        let due = std::time::Duration::from_secs_f64(self.issued as f64 / self.rate);
        let elapsed = self.start.elapsed();
        if due > elapsed {
            std::thread::sleep(due - elapsed);
        }
        self.issued += 1;
    }
}

/// A first DATA packet from a random peer: a random 127.0.0.x source
/// address (x in 2..=254), a random source port and even RPC id, a legal
/// message length in `lengths`, the first packet's worth of bytes. With
/// `lie`, `incoming` claims the whole message (no grants needed); otherwise
/// it is the honest unscheduled limit.
pub fn spoofed_first_data(
    rng: &mut impl rand::Rng,
    dport: u16,
    lengths: std::ops::RangeInclusive<u32>,
    lie: bool,
) -> (SocketAddrV4, Vec<u8>) {
    let src = SocketAddrV4::new(
        Ipv4Addr::new(127, 0, 0, rng.gen_range(2..=254)),
        rng.gen_range(1..=u16::MAX),
    );
    let id = rng.gen_range(1..u64::MAX / 2) * 2;
    let len = rng.gen_range(lengths);
    let incoming = if lie { len } else { len.min(unsched_bytes()) };
    let payload_len = (len as usize).min(max_payload());
    let payload = vec![0x5a; payload_len];
    let bytes = data_packet(
        src.port(),
        dport,
        id,
        len,
        incoming,
        0,
        &payload,
        AckEntry::default(),
    );
    (src, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_matches_rfc1071_example() {
        // RFC 1071 section 3: the one's-complement sum of these words is ddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(checksum(&[&data]), !0xddf2);
        // Split across parts at an odd boundary gives the same.
        assert_eq!(checksum(&[&data[..3], &data[3..]]), !0xddf2);
    }

    #[test]
    fn ipv4_udp_headers_verify() {
        let src = SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 9), 40_000);
        let dst = SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 1), 4_000);
        let p = ipv4_udp(src, dst, b"hello");
        assert_eq!(p.len(), 20 + 8 + 5);
        // A correct header sums to zero (checksum field included).
        assert_eq!(checksum(&[&p[..20]]), 0);
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&p[12..20]);
        pseudo.extend_from_slice(&[0, 17, 0, 13]);
        assert_eq!(checksum(&[&pseudo, &p[20..]]), 0);
        assert_eq!(u16::from_be_bytes([p[20], p[21]]), 40_000);
    }

    #[test]
    fn message_packets_cover_the_message() {
        let msg = vec![7u8; 3 * max_payload() + 10];
        let pkts = message_packets(1, 2, 4, &msg);
        assert_eq!(pkts.len(), 4);
        let mut got = 0;
        for p in &pkts {
            let parsed = Packet::parse(p).unwrap();
            let Body::Data { header, payload } = parsed.body else {
                panic!("not DATA")
            };
            assert_eq!(header.offset as usize, got);
            got += payload.len();
        }
        assert_eq!(got, msg.len());
    }

    #[test]
    fn spoofed_first_data_is_legal_and_lies_only_when_asked() {
        let mut rng = rand::thread_rng();
        for lie in [false, true] {
            for _ in 0..100 {
                let (src, bytes) = spoofed_first_data(&mut rng, 4000, 5_000..=900_000, lie);
                assert!(src.ip().is_loopback() && src.port() != 0);
                let p = Packet::parse(&bytes).unwrap();
                assert_eq!((p.common.sport, p.common.dport), (src.port(), 4000));
                assert_eq!(p.common.sender_id & 1, 0);
                let Body::Data { header, payload } = p.body else {
                    panic!("not DATA")
                };
                assert!((5_000..=900_000).contains(&header.message_length));
                assert_eq!(payload.len(), max_payload());
                let honest = header.message_length.min(unsched_bytes());
                let want = if lie { header.message_length } else { honest };
                assert_eq!(header.incoming, want);
            }
        }
    }
}
