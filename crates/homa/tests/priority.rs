//! Homa priorities on the wire: every packet carries its priority in the IP
//! TOS byte (IPv6 traffic class) as `priority << 5`. A stand-in server —
//! a plain UDP socket that asks the kernel for each datagram's TOS
//! (IP_RECVTOS / IPV6_RECVTCLASS), or as root a raw IPv4 socket for
//! protocol 146 that sees the IP header itself — receives requests from a
//! real endpoint and checks the byte of every packet:
//!
//! * unscheduled DATA at the level the default cutoffs give its message
//!   length (7: ≤200 B, 6: ≤2,800 B, 5: ≤15,000 B, 4: longer);
//! * scheduled DATA at the level the receiver's GRANT names;
//! * control packets (RESEND) at the top level, 7;
//! * after the receiver sends CUTOFFS, unscheduled DATA at the new level.

mod common;

use bytes::Bytes;
use common::is_root;
use homa::{Config, Endpoint, RpcId, Transport};
use homa_wire::{Body, CommonHeader, Packet, PacketType, CUTOFF_UNLIMITED};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// Something that receives Homa packets with their TOS byte and can send
/// Homa packets back to the client.
trait StandIn {
    /// The address the client sends requests to.
    fn addr(&self) -> SocketAddr;
    /// The next Homa packet for `addr()` and its TOS byte, or None after
    /// `timeout`.
    fn recv(&self, timeout: Duration) -> Option<(Vec<u8>, u8)>;
    /// Sends a Homa packet to `to`.
    fn send(&self, packet: &[u8], to: SocketAddr);
}

impl StandIn for common::UdpStandIn {
    fn addr(&self) -> SocketAddr {
        common::UdpStandIn::addr(self)
    }

    fn recv(&self, timeout: Duration) -> Option<(Vec<u8>, u8)> {
        common::UdpStandIn::recv(self, timeout)
    }

    fn send(&self, packet: &[u8], to: SocketAddr) {
        common::UdpStandIn::send(self, packet, to)
    }
}

/// A raw IPv4 socket for protocol 146: it sees the IP header (TOS is byte
/// 1) of every Homa packet to this host; it keeps those for its port.
struct RawStandIn {
    sock: Socket,
    port: u16,
}

impl RawStandIn {
    fn open() -> RawStandIn {
        let sock = Socket::new(
            Domain::IPV4,
            Type::RAW,
            Some(Protocol::from(homa_wire::IPPROTO_HOMA as i32)),
        )
        .unwrap();
        sock.bind(&SockAddr::from(
            "127.0.0.1:0".parse::<SocketAddr>().unwrap(),
        ))
        .unwrap();
        // Raw IP has no port reservation: any port no other test uses.
        RawStandIn {
            sock,
            port: 0x7000 + (std::process::id() % 0x0fff) as u16,
        }
    }
}

impl StandIn for RawStandIn {
    fn addr(&self) -> SocketAddr {
        SocketAddr::new("127.0.0.1".parse().unwrap(), self.port)
    }

    fn recv(&self, timeout: Duration) -> Option<(Vec<u8>, u8)> {
        let end = Instant::now() + timeout;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            self.sock.set_read_timeout(Some(left)).unwrap();
            let mut buf = vec![std::mem::MaybeUninit::<u8>::uninit(); 65_536];
            let n = match self.sock.recv(&mut buf) {
                Ok(n) => n,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return None
                }
                Err(e) => panic!("raw recv: {e}"),
            };
            // SAFETY: recv initialised the first n bytes.
            let bytes: Vec<u8> = buf[..n]
                .iter()
                .map(|b| unsafe { b.assume_init() })
                .collect();
            let ihl = (bytes[0] & 0x0f) as usize * 4;
            let homa = bytes[ihl..].to_vec();
            // Every Homa packet to this host comes here: keep ours.
            if homa.len() >= 4 && u16::from_be_bytes([homa[2], homa[3]]) == self.port {
                return Some((homa, bytes[1]));
            }
        }
    }

    fn send(&self, packet: &[u8], to: SocketAddr) {
        let dst = SockAddr::from(SocketAddr::new(to.ip(), 0));
        self.sock.send_to(packet, &dst).unwrap();
    }
}

/// Receives the DATA packets of client RPC `id` until all `len` bytes came;
/// returns (offset, TOS) of each. Other packets are returned separately.
fn collect_data(
    s: &dyn StandIn,
    id: RpcId,
    upto: u32,
    others: &mut Vec<(PacketType, u64, u8)>,
) -> Vec<(u32, u8)> {
    let mut got = Vec::new();
    let mut bytes = 0u32;
    let end = Instant::now() + Duration::from_secs(5);
    while bytes < upto || (upto == 0 && got.is_empty()) {
        let left = end.saturating_duration_since(Instant::now());
        let (pkt, tos) = s
            .recv(left)
            .unwrap_or_else(|| panic!("{id}: only {bytes} of {upto} bytes arrived"));
        let p = Packet::parse(&pkt).expect("the client sends valid packets");
        match p.body {
            Body::Data { header, payload } if p.common.sender_id == id.id => {
                if !header.retransmit {
                    got.push((header.offset, tos));
                    bytes += payload.len() as u32;
                }
            }
            _ => others.push((p.packet_type(), p.common.sender_id, tos)),
        }
    }
    got
}

fn tos(priority: u8) -> u8 {
    priority << 5
}

fn check_priorities(name: &str, s: &dyn StandIn, client: &Endpoint) {
    let dest = s.addr();
    let me = client.local_addr();
    let p = client.config().core.max_payload();
    let mut others = Vec::new();

    // Unscheduled messages to a receiver whose cutoffs are not known yet:
    // up to 200 B at the top level, everything else one below it
    // (homa_core::peer::unknown_peer_cutoffs).
    for (len, prio) in [
        (0usize, 7u8),
        (100, 7),
        (200, 7),
        (201, 6),
        (1_000, 6),
        (2_800, 6),
        (10_000, 6),
        (15_001, 6),
    ] {
        let id = client
            .send_request(dest, Bytes::from(vec![0x5a; len]))
            .unwrap();
        let data = collect_data(s, id, len as u32, &mut others);
        assert!(!data.is_empty());
        for (offset, t) in data {
            assert_eq!(
                t,
                tos(prio),
                "{name}: {len} B request, packet at offset {offset}: TOS {t:#04x}, want {:#04x} (priority {prio})",
                tos(prio)
            );
        }
        client.abort(id).unwrap();
    }

    // A scheduled message: the unscheduled prefix at level 6 (cutoffs
    // still unknown), then what the GRANT says.
    let len = 100_000u32;
    let unsched = 40_000u32.div_ceil(p) * p;
    let id = client
        .send_request(dest, Bytes::from(vec![0xa5; len as usize]))
        .unwrap();
    let first = collect_data(s, id, unsched, &mut others);
    assert!(first.iter().all(|&(o, _)| o < unsched));
    for &(offset, t) in &first {
        assert_eq!(
            t,
            tos(6),
            "{name}: unscheduled packet at {offset}: TOS {t:#04x}"
        );
    }
    let grant = Packet {
        common: CommonHeader {
            sport: dest.port(),
            dport: me.port(),
            sender_id: id.id | 1,
        },
        body: Body::Grant {
            offset: len,
            priority: 2,
        },
    }
    .to_vec();
    s.send(&grant, me);
    let rest = collect_data(s, id, len - unsched, &mut others);
    for &(offset, t) in &rest {
        assert!(offset >= unsched);
        assert_eq!(
            t,
            tos(2),
            "{name}: granted packet at {offset}: TOS {t:#04x}, want 0x40"
        );
    }
    // Nobody answers: after resend_ticks the client asks with a RESEND,
    // a control packet, at the top level.
    let end = Instant::now() + Duration::from_secs(5);
    while !others
        .iter()
        .any(|&(ty, sid, _)| ty == PacketType::Resend && sid == id.id)
    {
        let left = end.saturating_duration_since(Instant::now());
        let (pkt, t) = s.recv(left).expect("a RESEND from the client");
        let p = Packet::parse(&pkt).unwrap();
        others.push((p.packet_type(), p.common.sender_id, t));
    }
    for &(ty, _, t) in &others {
        if ty != PacketType::Data {
            assert_eq!(t, tos(7), "{name}: {ty:?} packet: TOS {t:#04x}, want 0xe0");
        }
    }
    client.abort(id).unwrap();

    // New cutoffs from the receiver: every unscheduled message at level 3.
    let mut cutoffs = [0u32; 8];
    cutoffs[0] = CUTOFF_UNLIMITED;
    cutoffs[3] = CUTOFF_UNLIMITED;
    let packet = Packet {
        common: CommonHeader {
            sport: dest.port(),
            dport: me.port(),
            sender_id: 1,
        },
        body: Body::Cutoffs {
            cutoffs,
            version: 2,
        },
    }
    .to_vec();
    s.send(&packet, me);
    // Wait until the client has taken them: a request's DATA then carries
    // cutoff version 2 (retry a few times; the CUTOFFS may still be queued).
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        let id = client
            .send_request(dest, Bytes::from_static(&[1; 100]))
            .unwrap();
        let mut version = 0;
        let mut t = 0;
        let dl = Instant::now() + Duration::from_secs(5);
        while version == 0 {
            let left = dl.saturating_duration_since(Instant::now());
            let (pkt, tb) = s.recv(left).expect("request DATA");
            if let Ok(Packet {
                common,
                body: Body::Data { header, .. },
            }) = Packet::parse(&pkt)
            {
                if common.sender_id == id.id {
                    version = header.cutoff_version.max(1);
                    if header.cutoff_version == 2 {
                        t = tb;
                    }
                }
            }
        }
        client.abort(id).unwrap();
        if t != 0 {
            assert_eq!(
                t,
                tos(3),
                "{name}: 100 B after CUTOFFS: TOS {t:#04x}, want 0x60"
            );
            break;
        }
        assert!(
            Instant::now() < end,
            "{name}: the client never used the new cutoffs"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    eprintln!(
        "{name}: TOS right on every packet: unscheduled 7/6/5/4 by length, granted 2, \
         control 7, 3 after CUTOFFS"
    );
}

#[test]
fn tos_per_packet_udp4() {
    let s = common::UdpStandIn::bind("127.0.0.1");
    let client = Endpoint::bind("127.0.0.1:0".parse().unwrap(), Config::default()).unwrap();
    check_priorities("udp4", &s, &client);
}

#[test]
fn tos_per_packet_udp6() {
    let s = common::UdpStandIn::bind("[::1]");
    let client = Endpoint::bind("[::1]:0".parse().unwrap(), Config::default()).unwrap();
    check_priorities("udp6", &s, &client);
}

#[test]
fn tos_per_packet_raw4() {
    if !is_root() {
        eprintln!("raw4 TOS test skipped: raw IP (protocol 146) needs root");
        return;
    }
    let s = RawStandIn::open();
    let mut config = Config::default();
    config.transport = Transport::Raw;
    let client = Endpoint::bind("127.0.0.1:0".parse().unwrap(), config).unwrap();
    assert!(matches!(client.local_addr().ip(), IpAddr::V4(_)));
    check_priorities("raw4", &s, &client);
}
