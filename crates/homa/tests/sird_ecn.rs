//! ECN end to end, as root with nftables, inside a network namespace of
//! our own (its loopback; endpoints are opened on a thread that entered
//! it, so all their traffic crosses its nftables output hook):
//!
//! * what goes on the wire: SIRD packets carry ECT(0) and none goes out
//!   Not-ECT; Homa packets carry no ECN codepoint at all (nft counters
//!   matching `ip ecn` / `ip6 ecn`), over UDP v4, UDP v6 and raw IPv4;
//! * CE marks reach the runtime and the core: a rule turns every ECT(0)
//!   packet into CE (what a congested switch does); SIRD echoes still
//!   complete and both ends count CE packets in `ce_received`;
//! * the core's network bucket reacts: a hand-made SIRD sender whose
//!   packets get marked sees the receiver's credit lead (granted − received,
//!   read from the receiver's RPC snapshot once all sent data has arrived)
//!   fall from the full per-sender bucket to one packet, while an unmarked
//!   sender keeps the full bucket.
//!
//! Each test skips with a message when it lacks root, `ip` or `nft`, and
//! deletes its namespace (nftables tables and all) when it ends, failed or
//! not.

mod common;

use common::{assert_bytes, netns_nft_unavailable, pattern, EchoServer, NetNs, CALL_TIMEOUT};
use homa::{Config, Endpoint, RpcId, Transport};
use homa_core::Design;
use homa_wire::{Body, CommonHeader, DataHeader, Packet, DATA_FLAG_SIRD};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// Counts outgoing UDP and protocol-146 packets by ECN codepoint.
const COUNT_RULES: &str = r#"
table inet homa_ecn_count {
    chain out {
        type filter hook output priority 0; policy accept;
        meta l4proto { udp, 146 } ip ecn ect0 counter comment "v4-ect0"
        meta l4proto { udp, 146 } ip ecn not-ect counter comment "v4-not-ect"
        meta l4proto { udp, 146 } ip ecn ce counter comment "v4-ce"
        meta l4proto udp ip6 ecn ect0 counter comment "v6-ect0"
        meta l4proto udp ip6 ecn not-ect counter comment "v6-not-ect"
        meta l4proto udp ip6 ecn ce counter comment "v6-ce"
    }
}
"#;

/// Marks every ECN-capable UDP and protocol-146 packet CE, as a congested
/// switch would (after the counting chain: priority 10).
const MARK_RULES: &str = r#"
table inet homa_ecn_mark {
    chain out {
        type filter hook output priority 10; policy accept;
        meta l4proto { udp, 146 } ip ecn ect0 ip ecn set ce counter comment "v4-marked"
        meta l4proto udp ip6 ecn ect0 ip6 ecn set ce counter comment "v6-marked"
    }
}
"#;

fn skip(name: &str) -> bool {
    if let Some(why) = netns_nft_unavailable() {
        eprintln!("{name}: skipped: {why}");
        return true;
    }
    false
}

fn config(design: Design, transport: Transport) -> Config {
    let mut c = Config::default();
    c.core.design = design;
    c.transport = transport;
    c
}

/// The cases: (name, address to bind, transport).
const CASES: [(&str, &str, Transport); 3] = [
    ("udp v4", "127.0.0.1:0", Transport::Udp),
    ("udp v6", "[::1]:0", Transport::Udp),
    ("raw v4", "127.0.0.1:0", Transport::Raw),
];

/// Echo RPCs of a few sizes (one packet, several packets, beyond UnschT)
/// between a server and a client opened inside `ns`; returns both.
fn echoes_in(ns: &NetNs, config: &Config, addr: &str, name: &str) -> (EchoServer, Endpoint) {
    let any: SocketAddr = addr.parse().unwrap();
    let c = config.clone();
    let (server, client) = ns
        .run_inside(move || {
            (
                EchoServer::bind(any, c.clone(), 2),
                Endpoint::bind(any, c).unwrap(),
            )
        })
        .expect("enter namespace");
    for (i, len) in [1usize, 5_000, 200_000].into_iter().enumerate() {
        let msg = pattern(i as u64, len);
        let r = client
            .call(server.addr, msg.clone(), CALL_TIMEOUT)
            .unwrap_or_else(|e| panic!("{name}: {len} B: {e}"));
        assert_bytes(&msg, &r, &format!("{name}: {len} B"));
    }
    (server, client)
}

/// SIRD puts ECT(0) on every packet it sends; Homa leaves the ECN field
/// at Not-ECT (its packets are what they were before SIRD existed).
#[test]
fn sird_sends_ect0_homa_does_not() {
    if skip("ECT(0) on the wire") {
        return;
    }
    let ns = NetNs::create("ect").expect("create network namespace");
    for (case, addr, transport) in CASES {
        for design in [Design::Sird, Design::Homa] {
            let name = format!("{design:?} {case}");
            // A fresh table per case: counters start at 0.
            let _ = ns.exec("nft", &["delete", "table", "inet", "homa_ecn_count"]);
            ns.nft(COUNT_RULES).expect("install counting rules");
            let (server, client) = echoes_in(&ns, &config(design, transport), addr, &name);
            server.stop();
            drop(client);
            let c = ns
                .nft_counters("inet", "homa_ecn_count")
                .expect("read counters");
            let fam = if addr.starts_with('[') { "v6" } else { "v4" };
            let get = |k: &str| c[&format!("{fam}-{k}")];
            eprintln!("{name}: packets by ECN codepoint {c:?}");
            match design {
                Design::Sird => {
                    assert!(get("ect0") > 0, "{name}: no ECT(0) packet: {c:?}");
                    assert_eq!(get("not-ect"), 0, "{name}: Not-ECT packets: {c:?}");
                }
                Design::Homa => {
                    assert!(get("not-ect") > 0, "{name}: no packet counted: {c:?}");
                    assert_eq!(get("ect0"), 0, "{name}: Homa sent ECT(0): {c:?}");
                }
            }
            assert_eq!(get("ce"), 0, "{name}: nothing marks CE here: {c:?}");
        }
    }
    drop(ns);
}

/// Every ECT(0) packet turned into CE: SIRD echoes still complete, and
/// both ends count the marks they received (the server on requests, the
/// client on responses and grants). Homa under the same rule sends
/// nothing markable and counts nothing.
#[test]
fn ce_marks_reach_both_ends() {
    if skip("CE marks end to end") {
        return;
    }
    let ns = NetNs::create("ce").expect("create network namespace");
    ns.nft(MARK_RULES).expect("install marking rules");
    for (case, addr, transport) in CASES {
        for design in [Design::Sird, Design::Homa] {
            let name = format!("{design:?} {case}");
            let (server, client) = echoes_in(&ns, &config(design, transport), addr, &name);
            let ss = server.endpoint().runtime_stats();
            let cs = client.runtime_stats();
            let sm = server.endpoint().metrics();
            eprintln!(
                "{name}: CE received by server {} of {} packets, by client {} of {}",
                ss.ce_received, ss.packets_received, cs.ce_received, cs.packets_received
            );
            match design {
                Design::Sird => {
                    assert!(ss.ce_received > 0, "{name}: server saw no CE: {ss:?}");
                    assert!(cs.ce_received > 0, "{name}: client saw no CE: {cs:?}");
                    assert!(ss.ce_received <= ss.packets_received);
                }
                Design::Homa => {
                    assert_eq!(ss.ce_received, 0, "{name}");
                    assert_eq!(cs.ce_received, 0, "{name}");
                }
            }
            assert_eq!(sm.requests_delivered, 3, "{name}");
            assert_eq!(client.metrics().rpcs_failed, 0, "{name}");
            server.stop();
        }
    }
    let marked = ns
        .nft_counters("inet", "homa_ecn_mark")
        .expect("read counters");
    assert!(
        marked["v4-marked"] > 0 && marked["v6-marked"] > 0,
        "{marked:?}"
    );
    drop(ns);
}

/// A SIRD sender made by hand over a plain UDP socket: it asks for credit
/// for one long request, then in rounds sends all the credit it holds and
/// waits until the receiver has taken all of it in. The receiver's credit
/// lead after a round lies between its per-sender bucket at the end of the
/// round and that bucket at the round's start (it may have credited part
/// of the round's data before the bucket shrank, depending on how the
/// kernel batched the packets); the bucket itself is a function of the
/// bytes received and their marks only. So: an unmarked sender's lead is
/// the full bucket every round, a marked sender's never grows, and it is
/// one packet from the round after the bucket reached its floor on.
struct HandSender {
    sock: UdpSocket,
    server: SocketAddr,
    id: u64,
    length: u32,
    payload: usize,
    /// Credit received (bytes) and data sent (bytes).
    granted: u32,
    sent: u32,
}

impl HandSender {
    /// A socket inside `ns` whose packets carry `tos` (ECT(0) gets them
    /// marked by [`MARK_RULES`], Not-ECT not).
    fn open(ns: &NetNs, server: SocketAddr, tos: u8, id: u64, length: u32) -> HandSender {
        let sock = ns
            .run_inside(|| UdpSocket::bind("127.0.0.1:0").unwrap())
            .expect("enter namespace");
        let v = tos as libc::c_int;
        // SAFETY: sets an int option on a socket we own.
        let r = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::IPPROTO_IP,
                libc::IP_TOS,
                &v as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(r, 0, "IP_TOS: {}", std::io::Error::last_os_error());
        sock.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        HandSender {
            sock,
            server,
            id,
            length,
            // MTU 1500 − IPv4/UDP 28 − DATA header.
            payload: 1500 - 28 - homa_wire::DATA_HEADER_LEN,
            granted: 0,
            sent: 0,
        }
    }

    fn addr(&self) -> SocketAddr {
        self.sock.local_addr().unwrap()
    }

    /// The server's id for our RPC.
    fn server_rpc(&self) -> RpcId {
        RpcId {
            id: self.id ^ 1,
            peer: self.addr(),
        }
    }

    fn data(&self, offset: u32, payload: &[u8]) -> Vec<u8> {
        Packet {
            common: CommonHeader {
                sport: self.addr().port(),
                dport: self.server.port(),
                sender_id: self.id,
            },
            body: Body::Data {
                header: DataHeader {
                    message_length: self.length,
                    incoming: self.granted,
                    offset,
                    flags: DATA_FLAG_SIRD,
                    ..DataHeader::default()
                },
                payload,
            },
        }
        .to_vec()
    }

    /// The credit request: an empty DATA packet (the message is beyond
    /// UnschT, so nothing goes before credit).
    fn ask(&mut self) {
        self.sock.send_to(&self.data(0, &[]), self.server).unwrap();
    }

    /// Sends every byte of credit not yet used.
    fn send_credit(&mut self) {
        let zeros = vec![0u8; self.payload];
        while self.sent < self.granted {
            let n = (self.granted - self.sent).min(self.payload as u32) as usize;
            let p = self.data(self.sent, &zeros[..n]);
            self.sock.send_to(&p, self.server).unwrap();
            self.sent += n as u32;
        }
    }

    /// Reads GRANTs until the credit reaches `offset` (or `deadline`
    /// passes: a failure, reported by the caller).
    fn credit_until(&mut self, offset: u32, deadline: Instant) -> bool {
        let mut buf = vec![0u8; 2048];
        while self.granted < offset {
            if Instant::now() > deadline {
                return false;
            }
            let Ok(n) = self.sock.recv(&mut buf) else {
                continue;
            };
            if let Ok(p) = Packet::parse(&buf[..n]) {
                if let Body::Grant { offset, .. } = p.body {
                    if p.common.sender_id == self.id ^ 1 {
                        self.granted = self.granted.max(offset);
                    }
                }
            }
        }
        true
    }
}

/// The server's view of our request once it has received `sent` bytes:
/// (received, granted). Waits for it (failure guard: `deadline`).
fn receiver_view(server: &Endpoint, rpc: RpcId, sent: u32, deadline: Instant) -> (u32, u32) {
    loop {
        if let Some(m) = server.rpc_snapshot(rpc).and_then(|s| s.incoming) {
            if m.done >= sent {
                return (m.done, m.granted);
            }
        }
        assert!(
            Instant::now() < deadline,
            "the receiver never took in {sent} B of {rpc:?}: {:?}\n{:?}\n{:#?}",
            server.rpc_snapshot(rpc),
            server.runtime_stats(),
            server.metrics()
        );
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Runs `sender`'s request in rounds until it is all sent or the credit
/// lead drops to `stop_at`; returns the lead (granted − received at the
/// receiver, bytes) after each round.
fn leads(server: &Endpoint, s: &mut HandSender, stop_at: u32) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let rpc = s.server_rpc();
    s.ask();
    let (_, g) = receiver_view(server, rpc, 0, deadline);
    assert!(s.credit_until(g, deadline), "no credit for the request");
    let mut leads = Vec::new();
    while s.sent < s.length {
        s.send_credit();
        let (received, granted) = receiver_view(server, rpc, s.sent, deadline);
        assert_eq!(received, s.sent);
        let lead = granted - received;
        leads.push(lead);
        if granted >= s.length {
            // The rest of the message is credited: finish it.
            assert!(s.credit_until(s.length, deadline));
            s.send_credit();
            break;
        }
        if lead <= stop_at {
            break;
        }
        assert!(
            s.credit_until(granted, deadline),
            "GRANTs up to {granted} never came (have {})",
            s.granted
        );
    }
    leads
}

#[test]
fn ce_marks_shrink_the_senders_network_bucket() {
    if skip("network bucket reacts to CE") {
        return;
    }
    let ns = NetNs::create("netbkt").expect("create network namespace");
    ns.nft(MARK_RULES).expect("install marking rules");
    let mut c = config(Design::Sird, Transport::Udp);
    // Credit as fast as data arrives (pacing would hold some back and make
    // the lead depend on time).
    c.core.sird.pace_credit = false;
    let bucket_max = c.core.sird.sender_bucket_max;
    let cc = c.clone();
    // Nobody takes requests off this server: a request completes and stays.
    let server = ns
        .run_inside(move || Endpoint::bind("127.0.0.1:0".parse().unwrap(), cc).unwrap())
        .expect("enter namespace");
    let p = 1500 - 28 - homa_wire::DATA_HEADER_LEN as u32;
    let full = bucket_max / p * p;

    // Not-ECT: never marked, so the bucket stays full throughout.
    let mut plain = HandSender::open(&ns, server.local_addr(), 0x00, 2, 600_000);
    let plain_leads = leads(&server, &mut plain, 0);
    let ce_after_plain = server.runtime_stats().ce_received;
    eprintln!("unmarked sender: credit lead after each round {plain_leads:?}");
    assert_eq!(ce_after_plain, 0);
    let (last, rest) = plain_leads.split_last().unwrap();
    assert!(rest.len() >= 10);
    assert!(
        rest.iter().all(|&l| l == full),
        "an unmarked sender's lead left the full bucket ({full} B): {plain_leads:?}"
    );
    assert!(*last <= full);

    // ECT(0), marked CE by the rule: the lead falls to one packet.
    let mut marked = HandSender::open(&ns, server.local_addr(), 0x02, 4, 1_000_000);
    let marked_leads = leads(&server, &mut marked, p);
    let s = server.runtime_stats();
    eprintln!(
        "marked sender: credit lead after each round {marked_leads:?}; server counted {} CE \
         packets, sender sent {} B",
        s.ce_received, marked.sent
    );
    assert_eq!(marked_leads[0], full, "starts with the full bucket");
    assert_eq!(
        *marked_leads.last().unwrap(),
        p,
        "the network bucket never shrank to one packet: {marked_leads:?}"
    );
    assert!(
        marked.sent < marked.length,
        "shrank only at the end of the message"
    );
    assert!(marked_leads.windows(2).all(|w| w[1] <= w[0]));
    // Every DATA packet of the marked sender came marked (the credit
    // request included).
    let data_packets = (marked.sent as u64).div_ceil(p as u64) + 1;
    assert_eq!(s.ce_received, data_packets);
    drop(server);
    drop(ns);
}
