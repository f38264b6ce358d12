//! Tests the Wireshark dissector `tools/wireshark/homa.lua` with tshark.
//!
//! Each test builds packets with homa-wire's emitters (or, for Linux-only
//! layouts and malformed packets, by editing emitted bytes), writes them to
//! a pcap file (Ethernet, then raw IPv4/IPv6 protocol 146 or UDP), runs
//! `tshark -X lua_script:tools/wireshark/homa.lua -T fields` over it and
//! checks, frame by frame, that every decoded field equals what was encoded,
//! that fields which do not belong to the packet are absent, that the info
//! column reads as expected, and that exactly the expected expert infos
//! appear. A Lua error, or the dissector's own failure report, fails a test.
//!
//! Without tshark every test prints why it skips and passes (the project
//! must build without Wireshark), unless `HOMA_DISSECTOR_REQUIRE_TSHARK` is
//! set, as `scripts/ci-dissector.sh` does when tshark is installed. The
//! captures stay in `target/tmp/dissector/` for a look in Wireshark.

use homa_wire::{
    AckEntry, AckList, Body, CommonHeader, DataHeader, Packet, PacketType, RttInfo,
    CUTOFF_UNLIMITED, DATA_FLAG_BYTEDANCE, DATA_FLAG_CSN, DATA_FLAG_INCAST, DATA_FLAG_SIRD,
    IPPROTO_HOMA, RATIO_UNKNOWN, RESEND_ALL,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The dissector under test.
const LUA: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tools/wireshark/homa.lua"
);

/// The fields every run extracts, in column order.
const FIELDS: &[&str] = &[
    "homa.sport",
    "homa.dport",
    "homa.type",
    "homa.sender_id",
    "homa.rpc_id",
    "homa.sender_role",
    "homa.data.message_length",
    "homa.data.incoming",
    "homa.ack.client_id",
    "homa.ack.server_port",
    "homa.data.cutoff_version",
    "homa.data.retransmit",
    "homa.data.flags",
    "homa.data.flags.incast",
    "homa.data.flags.sird",
    "homa.data.flags.csn",
    "homa.data.flags.bytedance",
    "homa.data.offset",
    "homa.data.seg_offset",
    "homa.data.length",
    "homa.data.sird_credit_request",
    "homa.grant.offset",
    "homa.grant.priority",
    "homa.resend.offset",
    "homa.resend.length",
    "homa.resend.priority",
    "homa.cutoffs.cutoff",
    "homa.cutoffs.version",
    "homa.ack.num_acks",
    "homa.rtt.nonce",
    "homa.rtt.link_mbps",
    "homa.rtt.unsched_ratio",
    "homa.stream.op",
    "homa.stream.next",
    "homa.stream.limit",
    "homa.gso.format",
    "homa.gso.segments",
    "homa.gso.segment_size",
    "homa.padding",
    INFO,
    EXPERT,
];
const INFO: &str = "_ws.col.Info";
const EXPERT: &str = "_ws.expert.message";
/// Joins repeated occurrences of a field in tshark's output.
const AGG: char = '|';
/// What the dissector reports when its own code fails.
const FAILURE: &str = "Homa dissector failure";

const CLIENT_PORT: u16 = 40_000;
const SERVER_PORT: u16 = 4_000;
/// Ports on which only the UDP heuristic finds Homa.
const ODD_CLIENT_PORT: u16 = 45_678;
const ODD_SERVER_PORT: u16 = 34_567;
/// A client id above 2^53, so a dissector that goes through doubles fails.
const CLIENT_ID: u64 = 0xFEDC_BA98_7654_3210;

// ---------------------------------------------------------------------------
// Expectations
// ---------------------------------------------------------------------------

/// What tshark must report for one frame.
#[derive(Debug, Clone, Default)]
struct Expect {
    /// Field name to value (decimal; repeated occurrences joined by `AGG`).
    fields: BTreeMap<&'static str, String>,
    /// When true, every field of `FIELDS` not in `fields` must be absent.
    strict: bool,
    /// Substrings of the expert messages, one per message; `None` = unchecked.
    experts: Option<Vec<String>>,
    /// A substring the info column must contain (when `fields` has no INFO).
    info_contains: Option<String>,
}

impl Expect {
    fn set(&mut self, field: &'static str, value: impl ToString) {
        self.fields.insert(field, value.to_string());
    }

    fn expert(mut self, msg: &str) -> Expect {
        self.experts.get_or_insert_with(Vec::new).push(msg.into());
        self
    }
}

fn join<T: ToString>(items: impl IntoIterator<Item = T>) -> String {
    items
        .into_iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(&AGG.to_string())
}

/// The fields, info text and expert infos of one whole packet, derived from
/// the values it was built from.
fn expect_packet(p: &Packet<'_>) -> (BTreeMap<&'static str, String>, String, Vec<String>) {
    let mut e = Expect::default();
    let id = p.common.sender_id;
    e.set("homa.sport", p.common.sport);
    e.set("homa.dport", p.common.dport);
    e.set("homa.type", p.packet_type().code());
    e.set("homa.sender_id", id);
    e.set("homa.rpc_id", id & !1);
    e.set("homa.sender_role", id & 1);
    let mut experts = Vec::new();
    let name = p.packet_type().name();
    let info = match &p.body {
        Body::Data { header: h, payload } => {
            e.set("homa.data.message_length", h.message_length);
            e.set("homa.data.incoming", h.incoming);
            e.set("homa.ack.client_id", h.ack.client_id);
            e.set("homa.ack.server_port", h.ack.server_port);
            e.set("homa.data.cutoff_version", h.cutoff_version);
            e.set("homa.data.retransmit", h.retransmit as u8);
            e.set("homa.data.flags", h.flags);
            e.set(
                "homa.data.flags.incast",
                (h.flags & DATA_FLAG_INCAST != 0) as u8,
            );
            e.set(
                "homa.data.flags.sird",
                (h.flags & DATA_FLAG_SIRD != 0) as u8,
            );
            e.set("homa.data.flags.csn", (h.flags & DATA_FLAG_CSN != 0) as u8);
            e.set(
                "homa.data.flags.bytedance",
                (h.flags & DATA_FLAG_BYTEDANCE != 0) as u8,
            );
            e.set("homa.data.offset", h.offset);
            e.set("homa.data.length", payload.len());
            let credit_request = h.flags & DATA_FLAG_SIRD != 0
                && h.offset == 0
                && payload.is_empty()
                && h.incoming == 0;
            if h.flags & DATA_FLAG_SIRD != 0 {
                e.set("homa.data.sird_credit_request", credit_request as u8);
            }
            if h.flags != 0 {
                experts.push("DATA flags are a homa-rs extension".to_string());
            }
            let mut marks = Vec::new();
            if h.retransmit {
                marks.push("retransmit".to_string());
            }
            if h.flags & DATA_FLAG_INCAST != 0 {
                marks.push("incast".into());
            }
            if h.flags & DATA_FLAG_SIRD != 0 {
                marks.push("SIRD".into());
            }
            if h.flags & DATA_FLAG_CSN != 0 {
                marks.push("CSN".into());
            }
            if h.flags & DATA_FLAG_BYTEDANCE != 0 {
                marks.push("ByteDance".into());
            }
            if credit_request {
                marks.push("credit request".into());
            }
            if h.ack.client_id != 0 {
                marks.push(format!("ack={}:{}", h.ack.client_id, h.ack.server_port));
            }
            let mut s = format!(
                "DATA id={id} offset={} len={} msg_len={}",
                h.offset,
                payload.len(),
                h.message_length
            );
            if !marks.is_empty() {
                s += &format!(" [{}]", marks.join(", "));
            }
            s
        }
        Body::Grant { offset, priority } => {
            e.set("homa.grant.offset", offset);
            e.set("homa.grant.priority", priority);
            format!("GRANT id={id} offset={offset} prio={priority}")
        }
        Body::Resend {
            offset,
            length,
            priority,
        } => {
            e.set("homa.resend.offset", offset);
            e.set("homa.resend.length", length);
            e.set("homa.resend.priority", priority);
            if *length == 0 {
                experts.push("RESEND length 0: homa-rs liveness probe".into());
            }
            let len = if *length == RESEND_ALL {
                "all".to_string()
            } else {
                length.to_string()
            };
            format!("RESEND id={id} offset={offset} len={len} prio={priority}")
        }
        Body::Cutoffs { cutoffs, version } => {
            e.set("homa.cutoffs.cutoff", join(cutoffs));
            e.set("homa.cutoffs.version", version);
            format!("CUTOFFS id={id} version={version}")
        }
        Body::Ack { acks } => {
            e.set("homa.ack.num_acks", acks.len());
            let mut s = format!("ACK id={id} num_acks={}", acks.len());
            if !acks.is_empty() {
                e.set(
                    "homa.ack.client_id",
                    join(acks.as_slice().iter().map(|a| a.client_id)),
                );
                e.set(
                    "homa.ack.server_port",
                    join(acks.as_slice().iter().map(|a| a.server_port)),
                );
                let list: Vec<String> = acks
                    .as_slice()
                    .iter()
                    .map(|a| format!("{}:{}", a.client_id, a.server_port))
                    .collect();
                s += &format!(" acks={}", list.join(","));
            }
            s
        }
        Body::Mismatch => {
            experts.push("MISMATCH is a homa-rs extension".into());
            format!("{name} id={id}")
        }
        Body::RttProbe(info) | Body::RttResps(info) => {
            e.set("homa.rtt.nonce", info.nonce);
            e.set("homa.rtt.link_mbps", info.link_mbps);
            e.set("homa.rtt.unsched_ratio", info.unsched_ratio);
            experts.push(format!("{name} is a homa-rs extension (ByteDance mode)"));
            let ratio = if info.unsched_ratio == RATIO_UNKNOWN {
                "unknown".to_string()
            } else {
                info.unsched_ratio.to_string()
            };
            format!("{name} id={id} link={}Mbps ratio={ratio}", info.link_mbps)
        }
        Body::Stream(c) => {
            e.set("homa.stream.op", c.op as u8);
            e.set("homa.stream.next", c.next);
            e.set("homa.stream.limit", c.limit);
            experts.push("STREAM is a homa-rs extension (RPC streaming)".into());
            format!(
                "{name} id={id} op={} next={} limit={}",
                c.op as u8, c.next, c.limit
            )
        }
        Body::RpcUnknown | Body::Busy | Body::Freeze | Body::NeedAck => format!("{name} id={id}"),
    };
    (e.fields, info, experts)
}

/// The expectation for a frame carrying exactly `p`.
fn expect_one(p: &Packet<'_>) -> Expect {
    let (fields, info, experts) = expect_packet(p);
    let mut e = Expect {
        fields,
        strict: true,
        experts: Some(experts),
        info_contains: None,
    };
    e.set(INFO, info);
    e
}

/// The expectation for a homa-rs UDP GSO send of `packets` (each `size`
/// bytes but the last).
fn expect_concat(packets: &[Packet<'_>], size: usize) -> Expect {
    let mut fields: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
    let mut infos = Vec::new();
    let mut experts = vec!["UDP GSO super-packet".to_string()];
    for p in packets {
        let (f, info, ex) = expect_packet(p);
        for (k, v) in f {
            fields.entry(k).or_default().push(v);
        }
        infos.push(info);
        experts.extend(ex);
    }
    let mut e = Expect {
        fields: fields
            .into_iter()
            .map(|(k, v)| (k, v.join(&AGG.to_string())))
            .collect(),
        strict: true,
        experts: Some(experts),
        info_contains: None,
    };
    e.set("homa.gso.format", 1);
    e.set("homa.gso.segments", packets.len());
    e.set("homa.gso.segment_size", size);
    e.set(
        INFO,
        format!("[GSO {} segs] {}", packets.len(), infos.join(" | ")),
    );
    e
}

// ---------------------------------------------------------------------------
// Packets
// ---------------------------------------------------------------------------

fn client(sport: u16, dport: u16) -> CommonHeader {
    CommonHeader {
        sport,
        dport,
        sender_id: CLIENT_ID,
    }
}

fn server(sport: u16, dport: u16) -> CommonHeader {
    CommonHeader {
        sport,
        dport,
        sender_id: CLIENT_ID | 1,
    }
}

fn acks(entries: &[(u64, u16)]) -> AckList {
    let list: AckList = entries
        .iter()
        .map(|&(client_id, server_port)| AckEntry {
            client_id,
            server_port,
        })
        .collect::<Vec<_>>()
        .iter()
        .collect();
    assert_eq!(list.len(), entries.len());
    list
}

static PAYLOAD: [u8; 4096] = {
    let mut a = [0u8; 4096];
    let mut i = 0;
    while i < a.len() {
        a[i] = (i * 7 + 3) as u8;
        i += 1;
    }
    a
};

/// One packet of every type, and the variants that change how a type is
/// shown (flags, RESEND all and probe, ACK entry counts), between a client
/// on port `c` and a server on port `s`.
fn samples(c: u16, s: u16) -> Vec<Packet<'static>> {
    let data = |common, header, payload| Packet {
        common,
        body: Body::Data { header, payload },
    };
    let ctl = |common, body| Packet { common, body };
    vec![
        data(
            client(c, s),
            DataHeader {
                message_length: 5_000,
                incoming: 3_000,
                ack: AckEntry {
                    client_id: 0x0123_4567_89AB_CDEE,
                    server_port: 4_001,
                },
                cutoff_version: 7,
                retransmit: false,
                flags: 0,
                offset: 1_416,
                stream_seq: 0,
            },
            &PAYLOAD[..100],
        ),
        data(
            server(s, c),
            DataHeader {
                message_length: 10,
                incoming: 10,
                retransmit: true,
                flags: DATA_FLAG_INCAST | DATA_FLAG_BYTEDANCE,
                ..DataHeader::default()
            },
            &PAYLOAD[..10],
        ),
        data(
            client(c, s),
            DataHeader {
                message_length: 100,
                incoming: 100,
                flags: DATA_FLAG_SIRD | DATA_FLAG_CSN,
                offset: 40,
                cutoff_version: 65_535,
                ..DataHeader::default()
            },
            &PAYLOAD[..20],
        ),
        // SIRD's credit request: an empty DATA announcing a long message.
        data(
            client(c, s),
            DataHeader {
                message_length: 2_000_000,
                incoming: 0,
                flags: DATA_FLAG_SIRD,
                ..DataHeader::default()
            },
            &[],
        ),
        // A zero-length message.
        data(client(c, s), DataHeader::default(), &[]),
        ctl(
            server(s, c),
            Body::Grant {
                offset: 20_000,
                priority: 3,
            },
        ),
        ctl(
            server(s, c),
            Body::Resend {
                offset: 1_000,
                length: 2_000,
                priority: 7,
            },
        ),
        ctl(
            client(c, s),
            Body::Resend {
                offset: 0,
                length: RESEND_ALL,
                priority: 0,
            },
        ),
        ctl(
            client(c, s),
            Body::Resend {
                offset: 0,
                length: 0,
                priority: 2,
            },
        ),
        ctl(server(s, c), Body::RpcUnknown),
        ctl(server(s, c), Body::Busy),
        ctl(
            server(s, c),
            Body::Cutoffs {
                cutoffs: [
                    CUTOFF_UNLIMITED,
                    1_000_001,
                    1_000_002,
                    1_000_003,
                    1_000_000,
                    15_000,
                    2_800,
                    200,
                ],
                version: 0x1234,
            },
        ),
        ctl(client(c, s), Body::Freeze),
        ctl(server(s, c), Body::NeedAck),
        ctl(client(c, s), Body::Ack { acks: acks(&[]) }),
        ctl(
            client(c, s),
            Body::Ack {
                acks: acks(&[(CLIENT_ID - 2, s), (42, 4_002)]),
            },
        ),
        ctl(
            client(c, s),
            Body::Ack {
                acks: acks(&[(2, 1), (4, 2), (6, 3), (8, 4), (u64::MAX - 1, 65_535)]),
            },
        ),
        ctl(server(s, c), Body::Mismatch),
        ctl(
            client(c, s),
            Body::RttProbe(RttInfo {
                nonce: CLIENT_ID,
                link_mbps: 25_000,
                unsched_ratio: 375,
            }),
        ),
        ctl(
            server(s, c),
            Body::RttResps(RttInfo {
                nonce: 0x0123_4567_89AB_CDEF,
                link_mbps: 100_000,
                unsched_ratio: RATIO_UNKNOWN,
            }),
        ),
        ctl(
            client(c, s),
            Body::Stream(homa_wire::StreamCtl {
                op: homa_wire::StreamOp::Ack,
                next: 3,
                limit: 11,
            }),
        ),
    ]
}

#[test]
fn samples_cover_every_type() {
    let codes: std::collections::BTreeSet<u8> = samples(1, 2)
        .iter()
        .map(|p| p.packet_type().code())
        .collect();
    let all: std::collections::BTreeSet<u8> = PacketType::ALL.iter().map(|t| t.code()).collect();
    assert_eq!(codes, all);
}

// ---------------------------------------------------------------------------
// Frames and pcap files
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
enum Net {
    V4,
    V6,
}

/// How a Homa packet travels.
#[derive(Debug, Clone, Copy)]
enum Carrier {
    Raw(Net),
    /// UDP with these source and destination ports.
    Udp(Net, u16, u16),
}

/// One pcap record: link-layer bytes, the length on the wire, what to expect.
struct Frame {
    bytes: Vec<u8>,
    orig_len: usize,
    expect: Expect,
}

fn checksum(chunks: &[&[u8]]) -> u16 {
    let mut sum: u32 = 0;
    for chunk in chunks {
        for pair in chunk.chunks(2) {
            let word = (pair[0] as u32) << 8 | *pair.get(1).unwrap_or(&0) as u32;
            sum += word;
        }
    }
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

const V4_CLIENT: [u8; 4] = [10, 146, 0, 1];
const V4_SERVER: [u8; 4] = [10, 146, 0, 2];
const V6_CLIENT: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const V6_SERVER: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

/// Ethernet + IP (+ UDP) around `homa`, from the client's address to the
/// server's, or back when the packet's sender id is odd (a server's).
fn frame_bytes(carrier: Carrier, homa: &[u8]) -> Vec<u8> {
    let from_server = homa.len() >= 28 && homa[27] & 1 == 1;
    let (mut v4_src, mut v4_dst, mut v6_src, mut v6_dst) =
        (V4_CLIENT, V4_SERVER, V6_CLIENT, V6_SERVER);
    if from_server {
        std::mem::swap(&mut v4_src, &mut v4_dst);
        std::mem::swap(&mut v6_src, &mut v6_dst);
    }
    let (net, proto, l4) = match carrier {
        Carrier::Raw(net) => (net, IPPROTO_HOMA, homa.to_vec()),
        Carrier::Udp(net, sport, dport) => {
            let len = (8 + homa.len()) as u16;
            let mut udp = Vec::new();
            udp.extend_from_slice(&sport.to_be_bytes());
            udp.extend_from_slice(&dport.to_be_bytes());
            udp.extend_from_slice(&len.to_be_bytes());
            udp.extend_from_slice(&[0, 0]);
            udp.extend_from_slice(homa);
            let pseudo: Vec<u8> = match net {
                Net::V4 => [&v4_src[..], &v4_dst, &[0, 17], &len.to_be_bytes()].concat(),
                Net::V6 => [
                    &v6_src[..],
                    &v6_dst,
                    &(len as u32).to_be_bytes(),
                    &[0, 0, 0, 17],
                ]
                .concat(),
            };
            let mut sum = checksum(&[&pseudo, &udp]);
            if sum == 0 {
                sum = 0xFFFF;
            }
            udp[6..8].copy_from_slice(&sum.to_be_bytes());
            (net, 17, udp)
        }
    };
    let mut out = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
    match net {
        Net::V4 => {
            out.extend_from_slice(&[0x08, 0x00]);
            let total = (20 + l4.len()) as u16;
            let mut ip = vec![0x45, 0xE0];
            ip.extend_from_slice(&total.to_be_bytes());
            ip.extend_from_slice(&[0, 1, 0x40, 0, 64, proto, 0, 0]);
            ip.extend_from_slice(&v4_src);
            ip.extend_from_slice(&v4_dst);
            let sum = checksum(&[&ip]);
            ip[10..12].copy_from_slice(&sum.to_be_bytes());
            out.extend_from_slice(&ip);
        }
        Net::V6 => {
            out.extend_from_slice(&[0x86, 0xDD]);
            out.extend_from_slice(&[0x6E, 0, 0, 0]);
            out.extend_from_slice(&(l4.len() as u16).to_be_bytes());
            out.extend_from_slice(&[proto, 64]);
            out.extend_from_slice(&v6_src);
            out.extend_from_slice(&v6_dst);
        }
    }
    out.extend_from_slice(&l4);
    out
}

fn frame(carrier: Carrier, homa: &[u8], expect: Expect) -> Frame {
    let bytes = frame_bytes(carrier, homa);
    Frame {
        orig_len: bytes.len(),
        bytes,
        expect,
    }
}

/// A pcap file (microsecond timestamps, Ethernet link type).
fn write_pcap(path: &Path, frames: &[Frame]) {
    let mut out = Vec::new();
    out.extend_from_slice(&0xA1B2_C3D4u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&0i32.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&262_144u32.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes()); // LINKTYPE_ETHERNET
    for (i, f) in frames.iter().enumerate() {
        out.extend_from_slice(&(1_700_000_000 + i as u32).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&(f.bytes.len() as u32).to_le_bytes());
        out.extend_from_slice(&(f.orig_len as u32).to_le_bytes());
        out.extend_from_slice(&f.bytes);
    }
    std::fs::write(path, out).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

fn capture_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dissector");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

// ---------------------------------------------------------------------------
// tshark
// ---------------------------------------------------------------------------

/// True when tshark runs; otherwise says why the test skips (or fails, when
/// HOMA_DISSECTOR_REQUIRE_TSHARK is set).
fn have_tshark(test: &str) -> bool {
    let ok = Command::new("tshark")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        if std::env::var_os("HOMA_DISSECTOR_REQUIRE_TSHARK").is_some() {
            panic!("{test}: tshark is required (HOMA_DISSECTOR_REQUIRE_TSHARK) but does not run");
        }
        eprintln!(
            "SKIP {test}: tshark not found; install it (apt-get install tshark) to test \
             tools/wireshark/homa.lua"
        );
    }
    ok
}

/// tshark with the dissector loaded and a private configuration directory
/// (so no installed copy of the plugin or personal preference interferes).
fn tshark_cmd(file: &Path, prefs: &[&str]) -> Command {
    let home = capture_dir().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let mut cmd = Command::new("tshark");
    cmd.env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env_remove("WIRESHARK_CONFIG_DIR")
        .arg("-n")
        .arg("-X")
        .arg(format!("lua_script:{LUA}"))
        .arg("-r")
        .arg(file);
    for p in prefs {
        cmd.arg("-o").arg(p);
    }
    cmd
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run tshark");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "tshark failed ({}): {stderr}",
        out.status
    );
    // tshark reports a script that fails to load, or a Lua error outside
    // a dissection, on stderr.
    assert!(
        !stderr.contains("Lua") && !stderr.contains("lua"),
        "tshark reported a Lua problem: {stderr}"
    );
    String::from_utf8(out.stdout).expect("tshark output is UTF-8")
}

/// The FIELDS of every frame of `file`, as tshark decodes them.
fn decode(file: &Path, prefs: &[&str]) -> Vec<BTreeMap<&'static str, String>> {
    let mut cmd = tshark_cmd(file, prefs);
    cmd.args(["-T", "fields", "-E", "header=n", "-E", "quote=n"])
        .args(["-E", "separator=/t", "-E", "occurrence=a"])
        .arg("-E")
        .arg(format!("aggregator={AGG}"));
    for f in FIELDS {
        cmd.arg("-e").arg(f);
    }
    let text = run(&mut cmd);
    text.lines()
        .map(|line| {
            let cols: Vec<&str> = line.split('\t').collect();
            assert_eq!(cols.len(), FIELDS.len(), "tshark line: {line:?}");
            FIELDS
                .iter()
                .zip(cols)
                .map(|(&f, v)| (f, normalize(f, v)))
                .collect()
        })
        .collect()
}

/// Numbers in decimal and booleans as 0/1, whatever the tshark version
/// prints (hex fields come as "0x10", booleans as "1" or "True").
fn normalize(field: &str, value: &str) -> String {
    if field == INFO || field == EXPERT {
        return value.to_string();
    }
    value
        .split(AGG)
        .map(|v| {
            if let Some(hex) = v.strip_prefix("0x") {
                u64::from_str_radix(hex, 16)
                    .map(|n| n.to_string())
                    .unwrap_or_else(|_| v.to_string())
            } else if v == "True" {
                "1".into()
            } else if v == "False" {
                "0".into()
            } else {
                v.replace(':', "")
            }
        })
        .collect::<Vec<_>>()
        .join(&AGG.to_string())
}

/// The verbose tree tshark prints (`-V`), checked for Lua errors.
fn verbose(file: &Path, prefs: &[&str]) -> String {
    let mut cmd = tshark_cmd(file, prefs);
    cmd.arg("-V");
    let text = run(&mut cmd);
    for bad in ["Lua Error", FAILURE, "Malformed Packet"] {
        assert!(
            !text.contains(bad),
            "{}: tshark -V shows {bad:?}:\n{text}",
            file.display()
        );
    }
    text
}

/// Writes `frames` to `name`, decodes them and checks every expectation.
fn check_file(name: &str, frames: &[Frame], prefs: &[&str]) -> PathBuf {
    let path = capture_dir().join(name);
    write_pcap(&path, frames);
    let decoded = decode(&path, prefs);
    assert_eq!(decoded.len(), frames.len(), "{name}: frames decoded");
    for (i, (frame, got)) in frames.iter().zip(&decoded).enumerate() {
        check_frame(&format!("{name} frame {}", i + 1), &frame.expect, got);
    }
    verbose(&path, prefs);
    path
}

fn check_frame(what: &str, want: &Expect, got: &BTreeMap<&'static str, String>) {
    let experts: Vec<&str> = match got[EXPERT].as_str() {
        "" => Vec::new(),
        s => s.split(AGG).collect(),
    };
    assert!(
        !experts.iter().any(|m| m.contains(FAILURE)),
        "{what}: {experts:?}"
    );
    for (field, value) in &want.fields {
        assert_eq!(
            &got[field], value,
            "{what}: field {field}\nall fields: {got:#?}"
        );
    }
    if want.strict {
        for field in FIELDS {
            // (The info column is some other protocol's when not listed.)
            if *field != EXPERT && *field != INFO && !want.fields.contains_key(field) {
                assert_eq!(
                    got[field], "",
                    "{what}: field {field} should be absent\nall fields: {got:#?}"
                );
            }
        }
    }
    if let Some(s) = &want.info_contains {
        assert!(
            got[INFO].contains(s.as_str()),
            "{what}: info {:?} lacks {s:?}",
            got[INFO]
        );
    }
    if let Some(wanted) = &want.experts {
        let mut left = experts.clone();
        for w in wanted {
            let at = left.iter().position(|m| m.contains(w.as_str()));
            match at {
                Some(at) => {
                    left.remove(at);
                }
                None => panic!("{what}: no expert info containing {w:?} in {experts:?}"),
            }
        }
        assert!(left.is_empty(), "{what}: unexpected expert info {left:?}");
    }
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

fn every_type(name: &str, carrier: impl Fn(&Packet<'_>) -> Carrier, c: u16, s: u16) {
    if !have_tshark(name) {
        return;
    }
    let frames: Vec<Frame> = samples(c, s)
        .iter()
        .map(|p| frame(carrier(p), &p.to_vec(), expect_one(p)))
        .collect();
    check_file(name, &frames, &[]);
}

fn udp(net: Net) -> impl Fn(&Packet<'_>) -> Carrier {
    move |p| Carrier::Udp(net, p.common.sport, p.common.dport)
}

#[test]
fn raw_ipv4_every_type() {
    every_type(
        "raw-ipv4.pcap",
        |_| Carrier::Raw(Net::V4),
        CLIENT_PORT,
        SERVER_PORT,
    );
}

#[test]
fn raw_ipv6_every_type() {
    every_type(
        "raw-ipv6.pcap",
        |_| Carrier::Raw(Net::V6),
        CLIENT_PORT,
        SERVER_PORT,
    );
}

#[test]
fn udp_ipv4_every_type() {
    every_type("udp-ipv4.pcap", udp(Net::V4), CLIENT_PORT, SERVER_PORT);
}

#[test]
fn udp_ipv6_every_type() {
    every_type("udp-ipv6.pcap", udp(Net::V6), CLIENT_PORT, SERVER_PORT);
}

/// Homa on ports outside the preference is found by the heuristic (which
/// the preference can turn off); the port preference decodes it without.
#[test]
fn udp_heuristic_and_port_preference() {
    let name = "udp-other-ports.pcap";
    if !have_tshark(name) {
        return;
    }
    let homa: Vec<Frame> = samples(ODD_CLIENT_PORT, ODD_SERVER_PORT)
        .iter()
        .map(|p| frame(udp(Net::V4)(p), &p.to_vec(), expect_one(p)))
        .collect();
    // A datagram whose "Homa ports" are not its UDP ports is not Homa.
    let p = &samples(ODD_CLIENT_PORT, ODD_SERVER_PORT)[5];
    let not_homa = frame(
        Carrier::Udp(Net::V4, 50_001, 50_002),
        &p.to_vec(),
        Expect {
            strict: true,
            experts: Some(Vec::new()),
            ..Expect::default()
        },
    );
    let mut frames = homa;
    frames.push(not_homa);
    let path = check_file(name, &frames, &[]);

    let off = decode(&path, &["homa.udp_heuristic:FALSE"]);
    assert!(
        off.iter().all(|f| f["homa.type"].is_empty()),
        "heuristic off: {off:#?}"
    );
    let by_port = decode(
        &path,
        &[
            "homa.udp_heuristic:FALSE",
            &format!("homa.udp_ports:{ODD_SERVER_PORT}"),
        ],
    );
    for (i, (f, got)) in frames.iter().zip(&by_port).enumerate() {
        check_frame(&format!("{name} by port, frame {}", i + 1), &f.expect, got);
    }
}

/// homa-rs's UDP GSO sends (whole packets back to back) and Linux's TSO
/// super-packets without TCP hijacking (one header, then segments with
/// 4-byte offset headers) are shown as their segments.
#[test]
fn gso_super_packets() {
    let name = "gso.pcap";
    if !have_tshark(name) {
        return;
    }
    let mut frames = Vec::new();

    // homa-rs: one message's DATA packets, 1,200 data bytes each.
    let msg: Vec<Packet<'static>> = (0..3)
        .map(|k| {
            let off = k * 1_200;
            Packet {
                common: client(CLIENT_PORT, SERVER_PORT),
                body: Body::Data {
                    header: DataHeader {
                        message_length: 3_000,
                        incoming: 3_000,
                        offset: off as u32,
                        ..DataHeader::default()
                    },
                    payload: &PAYLOAD[off..(off + 1_200).min(3_000)],
                },
            }
        })
        .collect();
    let bytes: Vec<u8> = msg.iter().flat_map(|p| p.to_vec()).collect();
    for net in [Net::V4, Net::V6] {
        frames.push(frame(
            Carrier::Udp(net, CLIENT_PORT, SERVER_PORT),
            &bytes,
            expect_concat(&msg, 56 + 1_200),
        ));
    }
    // homa-rs: GRANTs for four RPCs to one peer, at one priority.
    let grants: Vec<Packet<'static>> = (0..4u64)
        .map(|k| Packet {
            common: server(SERVER_PORT, CLIENT_PORT).with_id((CLIENT_ID + 2 * k) | 1),
            body: Body::Grant {
                offset: 10_000 * (k as u32 + 1),
                priority: k as u8,
            },
        })
        .collect();
    let bytes: Vec<u8> = grants.iter().flat_map(|p| p.to_vec()).collect();
    frames.push(frame(
        Carrier::Udp(Net::V4, SERVER_PORT, CLIENT_PORT),
        &bytes,
        expect_concat(&grants, 33),
    ));

    // Linux TSO at MTU 1500: 1,424 data bytes a segment over IPv4 (1,404
    // over IPv6), the last segment shorter.
    for (net, seg) in [(Net::V4, 1_424), (Net::V6, 1_404)] {
        let (bytes, expect) = linux_tso(10_000, 2_000, &[seg, seg, 500]);
        frames.push(frame(Carrier::Raw(net), &bytes, expect));
    }
    // A segment size that is not the MTU's: found by search, because the
    // packet cannot be one plain DATA (its bytes overrun the message).
    let (bytes, expect) = linux_tso(2_400, 0, &[1_000, 1_000, 400]);
    frames.push(frame(Carrier::Raw(Net::V4), &bytes, expect));

    // Big plain DATA packets (a 64 KB MTU, no GSO) stay one packet, even
    // when the message holds its own offsets (big-endian u32 at every
    // 4th byte), which look like Linux's segment offset headers.
    let counters: Vec<u8> = (8_000u32..12_000)
        .step_by(4)
        .flat_map(|o| o.to_be_bytes())
        .collect();
    for payload in [&PAYLOAD[..4_000], &counters[..]] {
        let big = Packet {
            common: client(CLIENT_PORT, SERVER_PORT),
            body: Body::Data {
                header: DataHeader {
                    message_length: 100_000,
                    incoming: 50_000,
                    offset: 8_000,
                    ..DataHeader::default()
                },
                payload,
            },
        };
        frames.push(frame(
            Carrier::Raw(Net::V4),
            &big.to_vec(),
            expect_one(&big),
        ));
    }
    let path = check_file(name, &frames, &[]);

    // With splitting off, the Linux super-packet whose data overruns its
    // message is one DATA packet, flagged.
    let off = decode(&path, &["homa.split_gso:FALSE"]);
    assert_eq!(off[5]["homa.gso.segments"], "");
    assert_eq!(off[5]["homa.data.length"], (2_464 - 56).to_string());
    assert!(
        off[5][EXPERT].contains("Data beyond the end of the message")
            || off[5][EXPERT].contains("of a 2400-byte message"),
        "{:?}",
        off[5][EXPERT]
    );
}

trait WithId {
    fn with_id(self, id: u64) -> Self;
}

impl WithId for CommonHeader {
    fn with_id(mut self, id: u64) -> CommonHeader {
        self.sender_id = id;
        self
    }
}

/// A Linux TSO super-packet (no TCP hijacking) of one message from the
/// client: a DATA header, the first segment's data, then for each further
/// segment a 4-byte offset and its data. Returns the bytes and what tshark
/// must show.
fn linux_tso(message_length: u32, first: u32, segs: &[usize]) -> (Vec<u8>, Expect) {
    let header = DataHeader {
        message_length,
        incoming: message_length,
        cutoff_version: 1,
        offset: first,
        ..DataHeader::default()
    };
    let common = client(CLIENT_PORT, SERVER_PORT);
    let mut bytes = Vec::new();
    Packet::emit_data_header(&common, &header, &mut bytes);
    bytes[12] = 0xD0; // Linux: TSO replicates 13 words (52 bytes)
    let mut offsets = Vec::new();
    let mut off = first as usize;
    for (k, &n) in segs.iter().enumerate() {
        if k > 0 {
            bytes.extend_from_slice(&(off as u32).to_be_bytes());
        }
        bytes.extend_from_slice(&PAYLOAD[off % 1_000..off % 1_000 + n]);
        offsets.push(off);
        off += n;
    }
    // The first segment as a packet of its own gives the header's fields.
    let first_packet = Packet {
        common,
        body: Body::Data {
            header,
            payload: &PAYLOAD[..segs[0]],
        },
    };
    let (mut fields, info, experts) = expect_packet(&first_packet);
    fields.insert("homa.data.offset", join(&offsets));
    fields.insert("homa.data.length", join(segs));
    let infos: Vec<String> = std::iter::once(info)
        .chain(offsets.iter().zip(segs).skip(1).map(|(o, n)| {
            format!("DATA id={CLIENT_ID} offset={o} len={n} msg_len={message_length}")
        }))
        .collect();
    let mut e = Expect {
        fields,
        strict: true,
        experts: Some(experts),
        info_contains: None,
    }
    .expert("Linux TSO super-packet");
    e.set("homa.gso.format", 2);
    e.set("homa.gso.segments", segs.len());
    e.set("homa.gso.segment_size", segs[0] + 4);
    e.set(
        INFO,
        format!("[GSO {} segs] {}", segs.len(), infos.join(" | ")),
    );
    (bytes, e)
}

/// Layouts only Linux sends: the DATA offset in the sequence field, the
/// 36-byte RESEND of the upstream build, TCP-hijacking marks, padding.
#[test]
fn linux_layouts() {
    let name = "linux-layouts.pcap";
    if !have_tshark(name) {
        return;
    }
    let samples = samples(CLIENT_PORT, SERVER_PORT);
    let raw = Carrier::Raw(Net::V4);
    let mut frames = Vec::new();

    // DATA offset -1: the offset is in the sequence field.
    let p = &samples[0];
    let mut bytes = p.to_vec();
    bytes[52..56].copy_from_slice(&[0xFF; 4]);
    let mut e = expect_one(p);
    e.set("homa.data.seg_offset", -1);
    frames.push(frame(raw, &bytes, e));

    // The 36-byte RESEND: no priority byte.
    let mut bytes = samples[6].to_vec();
    bytes.truncate(36);
    let mut e = expect_one(&samples[6]).expert("36-byte RESEND: the upstream Linux layout");
    e.fields.remove("homa.resend.priority");
    e.set(
        INFO,
        format!("RESEND id={} offset=1000 len=2000", CLIENT_ID | 1),
    );
    frames.push(frame(raw, &bytes, e));

    // The TCP-hijacking marks Linux writes on every packet (flags 6, a
    // checksum, urgent 0xb97d) draw no comment; other values do.
    let p = &samples[5];
    let mut bytes = p.to_vec();
    bytes[13] = 6;
    bytes[16..18].copy_from_slice(&[0x15, 0x4E]);
    bytes[18..20].copy_from_slice(&[0xB9, 0x7D]);
    frames.push(frame(raw, &bytes, expect_one(p)));
    for (at, value) in [(13, 2), (15, 1), (9, 1)] {
        let mut odd = bytes.clone();
        odd[at] = value;
        let e = expect_one(p).expert("Unused TCP-like fields (bytes 8-10, 13-19) are not zero");
        frames.push(frame(raw, &odd, e));
    }

    // A control packet with padding after its body.
    let mut bytes = p.to_vec();
    bytes.extend_from_slice(&[0xCC; 4]);
    let mut e = expect_one(p).expert("4 bytes after the 33-byte packet");
    e.set("homa.padding", "cccccccc");
    frames.push(frame(raw, &bytes, e));

    // Linux's DATA doff (13 words) draws no comment.
    let mut bytes = samples[1].to_vec();
    bytes[12] = 0xD0;
    frames.push(frame(raw, &bytes, expect_one(&samples[1])));

    check_file(name, &frames, &[]);
}

/// Malformed packets get expert info and as many fields as their bytes hold.
#[test]
fn malformed_and_truncated() {
    let name = "malformed.pcap";
    if !have_tshark(name) {
        return;
    }
    let samples = samples(CLIENT_PORT, SERVER_PORT);
    let raw = Carrier::Raw(Net::V4);
    let loose = |info: &str| Expect {
        info_contains: Some(info.into()),
        ..Expect::default()
    };
    let mut frames = Vec::new();

    // Every type cut one byte short of its header, and in the middle.
    for p in &samples {
        let bytes = p.to_vec();
        let ty = p.packet_type();
        for cut in [ty.header_len() - 1, 29, 28, 27, 12, 3] {
            if cut >= ty.header_len() || (ty == PacketType::Resend && cut == 36) {
                continue;
            }
            let mut e = loose("[truncated]").expert("Truncated");
            if ty == PacketType::Data && cut > 49 && bytes[49] != 0 {
                e = e.expert("DATA flags are a homa-rs extension");
            }
            if cut >= 12 {
                e.set("homa.type", ty.code());
            }
            if cut >= 28 {
                e.set("homa.sender_id", CLIENT_ID | (p.common.sender_id & 1));
                if matches!(ty, PacketType::RttProbe | PacketType::RttResps) {
                    e = e.expert("is a homa-rs extension (ByteDance mode)");
                }
                if ty == PacketType::Stream {
                    e = e.expert("STREAM is a homa-rs extension (RPC streaming)");
                }
            }
            frames.push(frame(raw, &bytes[..cut], e));
        }
    }
    // An IP packet with no Homa bytes at all: Wireshark does not call the
    // dissector for an empty payload, and nothing may fail.
    frames.push(frame(
        raw,
        &[],
        Expect {
            strict: true,
            experts: Some(Vec::new()),
            ..Expect::default()
        },
    ));

    // An unknown type with a body.
    let mut bytes = samples[10].to_vec();
    bytes[11] = 0x20;
    bytes.extend_from_slice(&[1; 10]);
    let mut e = loose(&format!("UNKNOWN(0x20) id={}", CLIENT_ID | 1))
        .expert("Unknown Homa packet type 0x20");
    e.set("homa.type", 0x20);
    frames.push(frame(raw, &bytes, e));

    // An ACK claiming 6 entries.
    let mut bytes = samples[16].to_vec();
    bytes[28..30].copy_from_slice(&6u16.to_be_bytes());
    let mut e = loose("num_acks=6").expert("6 acks claimed");
    e.set("homa.ack.num_acks", 6);
    e.set("homa.ack.client_id", join([2, 4, 6, 8, u64::MAX - 1]));
    frames.push(frame(raw, &bytes, e));

    // A GRANT and a RESEND with priority 9.
    for (i, at) in [(5, 32), (6, 36)] {
        let mut bytes = samples[i].to_vec();
        bytes[at] = 9;
        frames.push(frame(
            raw,
            &bytes,
            loose("prio=9").expert("Priority 9: the wire format has levels 0..7"),
        ));
    }

    // DATA beyond the end of its message.
    let mut bytes = samples[2].to_vec(); // offset 40, 20 bytes, message 100
    bytes[52..56].copy_from_slice(&90u32.to_be_bytes());
    bytes[4..8].copy_from_slice(&90u32.to_be_bytes());
    let e = loose("offset=90 len=20 msg_len=100")
        .expert("Bytes 90..110 of a 100-byte message")
        .expert("DATA flags are a homa-rs extension");
    frames.push(frame(raw, &bytes, e));

    // Reserved flag bits, pad bytes, a doff of the wrong size, a nonzero
    // sequence in a control packet.
    let mut bytes = samples[0].to_vec();
    bytes[49] = 0x81;
    bytes[50] = 1;
    bytes[12] = 0x70;
    let mut e = loose("[incast, ack=")
        .expert("Unknown DATA flag bits 0x80")
        .expert("Pad bytes 50-51 are not zero")
        .expert("doff 0x70; expected 0xe0 for DATA")
        .expert("DATA flags are a homa-rs extension");
    e.set("homa.data.flags", 0x81);
    frames.push(frame(raw, &bytes, e));
    let mut bytes = samples[9].to_vec();
    bytes[4] = 1;
    frames.push(frame(
        raw,
        &bytes,
        loose("RPC_UNKNOWN").expert("Sequence is not zero"),
    ));

    // DATA whose sequence field disagrees with its offset field.
    let mut bytes = samples[0].to_vec();
    bytes[4..8].copy_from_slice(&0u32.to_be_bytes());
    frames.push(frame(
        raw,
        &bytes,
        loose("offset=1416").expert("Sequence 0, offset 1416"),
    ));

    // Homa ports that are not the UDP ports.
    let p = &samples[5];
    frames.push(frame(
        Carrier::Udp(Net::V4, SERVER_PORT, CLIENT_PORT + 1),
        &p.to_vec(),
        loose("GRANT").expert("Homa ports 4000 -> 40000, UDP ports 4000 -> 40001"),
    ));

    // A frame the capture cut short (snapshot length) in the DATA header.
    let big = frame(raw, &samples[0].to_vec(), Expect::default());
    let keep = 14 + 20 + 40;
    let mut e = loose("[truncated]").expert("need 56 bytes, got 40 (capture snapshot cut it)");
    e.set("homa.data.message_length", 5_000);
    frames.push(Frame {
        orig_len: big.bytes.len(),
        bytes: big.bytes[..keep].to_vec(),
        expect: e,
    });

    check_file(name, &frames, &[]);
}

/// Random bytes, with a valid type byte more often than not: the dissector
/// must never fail, whatever it is given.
#[test]
fn garbage_never_breaks_the_dissector() {
    let name = "garbage.pcap";
    if !have_tshark(name) {
        return;
    }
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut frames = Vec::new();
    for i in 0..300 {
        let len = (next() % 200) as usize;
        let mut bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if len > 12 && i % 4 != 0 {
            let types = PacketType::ALL;
            bytes[11] = types[(next() % types.len() as u64) as usize].code();
        }
        if len > 30 && i % 3 == 0 {
            bytes[28] = 0; // ACK counts and lengths that are small
        }
        let carrier = match i % 3 {
            0 => Carrier::Raw(Net::V4),
            1 => Carrier::Raw(Net::V6),
            _ => Carrier::Udp(Net::V4, SERVER_PORT, CLIENT_PORT),
        };
        frames.push(frame(carrier, &bytes, Expect::default()));
    }
    // Also glued copies of valid packets with a broken one in the middle,
    // so the GSO search runs over near misses.
    let s = samples(CLIENT_PORT, SERVER_PORT);
    let mut glued = s[0].to_vec();
    glued.extend_from_slice(&s[0].to_vec()[..30]);
    glued.extend_from_slice(&s[0].to_vec());
    frames.push(frame(
        Carrier::Udp(Net::V4, CLIENT_PORT, SERVER_PORT),
        &glued,
        Expect::default(),
    ));
    check_file(name, &frames, &[]);
}

// ---------------------------------------------------------------------------
// Real captures
// ---------------------------------------------------------------------------

/// Where the real captures are (see docs/wireshark.md for how they were made).
const TESTDATA: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tools/wireshark/testdata"
);

/// The Homa bytes of every frame of an Ethernet pcap file (IPv4 only, as
/// the captures are): the IP payload for protocol 146, the UDP payload for
/// UDP.
fn homa_payloads(path: &Path) -> Vec<Vec<u8>> {
    let data = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    assert!(data.len() >= 24, "{}: no pcap header", path.display());
    let le = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    assert!(
        [0xA1B2_C3D4, 0xA1B2_3C4D].contains(&le(&data[0..4])),
        "{}: not a little-endian pcap file",
        path.display()
    );
    assert_eq!(le(&data[20..24]), 1, "{}: not Ethernet", path.display());
    let mut at = 24;
    let mut out = Vec::new();
    while at + 16 <= data.len() {
        let incl = le(&data[at + 8..at + 12]) as usize;
        let frame = &data[at + 16..at + 16 + incl];
        at += 16 + incl;
        assert_eq!(&frame[12..14], &[0x08, 0x00], "an IPv4 frame");
        let ip = &frame[14..];
        let ihl = (ip[0] & 0x0F) as usize * 4;
        let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
        let l4 = &ip[ihl..total];
        out.push(match ip[9] {
            IPPROTO_HOMA => l4.to_vec(),
            17 => l4[8..].to_vec(),
            p => panic!("IP protocol {p}"),
        });
    }
    out
}

/// Real Linux Homa packets (HomaModule in the qemu kit of
/// ../shared/linux-homa, echoing requests from this repo's raw-IPv4
/// client): every frame must decode to what homa-wire parses from it.
#[test]
fn real_linux_capture() {
    let name = "linux-homa-echo.pcap";
    if !have_tshark(name) {
        return;
    }
    let path = Path::new(TESTDATA).join(name);
    let decoded = decode(&path, &[]);
    let payloads = homa_payloads(&path);
    assert_eq!(decoded.len(), payloads.len());
    let mut types = std::collections::BTreeSet::new();
    let mut minus_one = 0;
    for (i, (bytes, got)) in payloads.iter().zip(&decoded).enumerate() {
        let p = Packet::parse(bytes).unwrap_or_else(|e| panic!("frame {}: {e}", i + 1));
        types.insert(p.packet_type());
        let mut want = expect_one(&p);
        if p.packet_type() == PacketType::Data && bytes[52..56] == [0xFF; 4] {
            // Linux sends a one-packet message with its offset only in the
            // sequence field.
            want.set("homa.data.seg_offset", -1);
            minus_one += 1;
        }
        check_frame(&format!("{name} frame {}", i + 1), &want, got);
    }
    // What Linux and our client exchanged in this capture.
    for t in [
        PacketType::Data,
        PacketType::Grant,
        PacketType::Resend,
        PacketType::RpcUnknown,
        PacketType::Busy,
        PacketType::Cutoffs,
        PacketType::Ack,
    ] {
        assert!(types.contains(&t), "{name} has no {t}");
    }
    assert!(minus_one > 0, "{name}: no DATA with offset -1");
    verbose(&path, &[]);
}

/// Real homa-rs traffic over UDP on loopback, where UDP GSO sends reach the
/// capture unsegmented: each super-packet must split into packets that
/// homa-wire parses, and decode to what they hold.
#[test]
fn real_udp_gso_capture() {
    let name = "homa-rs-udp-gso.pcap";
    if !have_tshark(name) {
        return;
    }
    let path = Path::new(TESTDATA).join(name);
    let decoded = decode(&path, &[]);
    let payloads = homa_payloads(&path);
    assert_eq!(decoded.len(), payloads.len());
    let mut super_packets = 0;
    for (i, (bytes, got)) in payloads.iter().zip(&decoded).enumerate() {
        let what = format!("{name} frame {}", i + 1);
        let want = match got["homa.gso.segment_size"].as_str() {
            "" => expect_one(&Packet::parse(bytes).unwrap_or_else(|e| panic!("{what}: {e}"))),
            size => {
                super_packets += 1;
                let size: usize = size.parse().unwrap();
                let packets: Vec<Packet<'_>> = bytes
                    .chunks(size)
                    .map(|c| Packet::parse(c).unwrap_or_else(|e| panic!("{what}: segment: {e}")))
                    .collect();
                assert!(packets.len() > 1, "{what}");
                for p in &packets {
                    assert_eq!(p.common.sport, packets[0].common.sport, "{what}");
                    assert_eq!(p.common.dport, packets[0].common.dport, "{what}");
                }
                expect_concat(&packets, size)
            }
        };
        check_frame(&what, &want, got);
    }
    assert!(super_packets >= 3, "{name}: {super_packets} super-packets");
    verbose(&path, &[]);
}
