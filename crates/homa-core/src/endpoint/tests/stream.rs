//! RPC streaming: ordering under loss, the window, termination in both
//! orders, failure, and hostile packets.

use super::*;
use crate::stream::{StreamError, StreamEvent};
use homa_wire::{StreamCtl, StreamOp, DATA_FLAG_FIN, DATA_FLAG_STREAM};

fn sevents(net: &mut Net, i: usize) -> Vec<StreamEvent> {
    std::iter::from_fn(|| net.eps[i].poll_stream_event()).collect()
}

/// Opens a stream from endpoint 0 to 1; returns (client id, server id).
fn open(net: &mut Net) -> (RpcId, RpcId) {
    let c = net.eps[0].open_stream(net.now, addr(1)).unwrap();
    net.pump();
    let ev = sevents(net, 1);
    let [StreamEvent::Opened { stream: s }] = ev[..] else {
        panic!("{ev:?}")
    };
    assert_eq!(s.id, c.id | 1);
    (c, s)
}

/// Messages delivered at endpoint `i` (read at once), plus other events.
fn drain(net: &mut Net, i: usize, got: &mut Vec<Bytes>) -> Vec<StreamEvent> {
    let mut other = Vec::new();
    for e in sevents(net, i) {
        match e {
            StreamEvent::Message { stream, message } => {
                got.push(message.into_bytes());
                // (The stream may have closed meanwhile.)
                let _ = net.eps[i].stream_read(net.now, stream);
            }
            e => other.push(e),
        }
    }
    other
}

#[test]
fn messages_arrive_in_order_both_ways_and_the_stream_closes() {
    let mut net = Net::new(2, Config::default());
    let (c, s) = open(&mut net);
    let sizes = [0usize, 10, 5_000, 100_000, 1, 30_000];
    let (mut at_server, mut at_client) = (Vec::new(), Vec::new());
    for (k, &n) in sizes.iter().enumerate() {
        net.eps[0]
            .stream_send(net.now, c, payload(n, k as u8))
            .unwrap();
        net.eps[1]
            .stream_send(net.now, s, payload(n, 100 + k as u8))
            .unwrap();
    }
    net.eps[0].stream_finish(net.now, c).unwrap();
    net.eps[1].stream_finish(net.now, s).unwrap();
    let (mut ev0, mut ev1) = (Vec::new(), Vec::new());
    for _ in 0..50 {
        net.pump();
        ev1.extend(drain(&mut net, 1, &mut at_server));
        ev0.extend(drain(&mut net, 0, &mut at_client));
    }
    let want = |salt: u8| -> Vec<Bytes> {
        sizes
            .iter()
            .enumerate()
            .map(|(k, &n)| payload(n, salt + k as u8))
            .collect()
    };
    assert_eq!(at_server, want(0));
    assert_eq!(at_client, want(100));
    assert!(ev0.contains(&StreamEvent::End { stream: c }), "{ev0:?}");
    assert!(ev0.contains(&StreamEvent::Closed { stream: c }), "{ev0:?}");
    assert!(ev1.contains(&StreamEvent::Closed { stream: s }), "{ev1:?}");
    assert!(net.eps[0].is_idle() && net.eps[1].is_idle());
    assert_eq!(net.eps[1].metrics().stream_messages_delivered, 6);
    // DATA carried the stream flag and sequence numbers; no RPC events.
    assert!(net.events(0).is_empty() && net.events(1).is_empty());
}

#[test]
fn order_and_content_survive_loss_and_lost_acks() {
    let mut net = Net::new(2, Config::default());
    let (c, s) = open(&mut net);
    let n = 12;
    let mut got = Vec::new();
    let mut k = 0x9E37_79B9_7F4A_7C15u64;
    let mut sent = 0;
    let mut rounds = 0;
    let mut closed = false;
    while !closed {
        while sent < n
            && net.eps[0]
                .stream_send(net.now, c, payload(3_000 * sent, sent as u8))
                .is_ok()
        {
            sent += 1;
            if sent == n {
                net.eps[0].stream_finish(net.now, c).unwrap();
                net.eps[1].stream_finish(net.now, s).unwrap();
            }
        }
        // A quarter of all packets lost at random, STREAM ACKs included.
        net.pump_with(|_, _| {
            k ^= k << 13;
            k ^= k >> 7;
            k ^= k << 17;
            k % 4 == 0
        });
        for e in drain(&mut net, 1, &mut got) {
            closed |= matches!(e, StreamEvent::Closed { .. });
        }
        sevents(&mut net, 0);
        net.tick();
        rounds += 1;
        assert!(rounds < 2_000, "stalled with {} of {n}", got.len());
    }
    let want: Vec<Bytes> = (0..n).map(|i| payload(3_000 * i, i as u8)).collect();
    assert_eq!(got, want);
    for _ in 0..10 {
        net.pump();
        net.tick();
    }
    assert!(net.eps[0].is_idle(), "{:?}", net.eps[0]);
}

#[test]
fn the_window_bounds_what_an_unread_receiver_gets() {
    let config = Config {
        stream_window: 3,
        ..Config::default()
    };
    let mut net = Net::new(2, config);
    let (c, s) = open(&mut net);
    for i in 0..3 {
        net.eps[0].stream_send(net.now, c, payload(100, i)).unwrap();
    }
    // The send queue is full too.
    assert_eq!(
        net.eps[0].stream_send(net.now, c, payload(1, 9)),
        Err(Error::Limit("stream send window"))
    );
    net.pump();
    let ev = sevents(&mut net, 1);
    assert_eq!(ev.len(), 3);
    // Room again: 3 more, which the receiver does not take while unread.
    assert!(sevents(&mut net, 0).contains(&StreamEvent::Writable { stream: c }));
    for i in 3..6 {
        net.eps[0].stream_send(net.now, c, payload(100, i)).unwrap();
    }
    for _ in 0..5 {
        net.pump();
        net.tick();
    }
    assert!(sevents(&mut net, 1).is_empty());
    // Reading moves the window: the rest flows, in order.
    for _ in 0..3 {
        net.eps[1].stream_read(net.now, s).unwrap();
    }
    net.pump();
    let got: Vec<Bytes> = sevents(&mut net, 1)
        .into_iter()
        .filter_map(|e| match e {
            StreamEvent::Message { message, .. } => Some(message.into_bytes()),
            _ => None,
        })
        .collect();
    assert_eq!(got, (3..6).map(|i| payload(100, i)).collect::<Vec<_>>());
}

#[test]
fn termination_in_either_order_and_the_lost_last_ack() {
    for server_first in [false, true] {
        let mut net = Net::new(2, Config::default());
        let (c, s) = open(&mut net);
        let (first, second) = if server_first {
            ((1, s), (0, c))
        } else {
            ((0, c), (1, s))
        };
        net.eps[first.0].stream_finish(net.now, first.1).unwrap();
        net.pump();
        assert_eq!(
            sevents(&mut net, second.0),
            vec![StreamEvent::End { stream: second.1 }]
        );
        // The other side can still send after the peer's end.
        net.eps[second.0]
            .stream_send(net.now, second.1, payload(10, 1))
            .unwrap();
        net.pump();
        assert!(matches!(
            &sevents(&mut net, first.0)[..],
            [StreamEvent::Message { .. }]
        ));
        net.eps[second.0].stream_finish(net.now, second.1).unwrap();
        // The last STREAM ACK (for the second FIN) is lost.
        let sent = net
            .pump_with(|from, t| from == first.0 && parse(t).packet_type() == PacketType::Stream);
        assert!(!sent.is_empty());
        let ev = sevents(&mut net, first.0);
        assert!(
            ev.contains(&StreamEvent::Closed { stream: first.1 }),
            "{ev:?}"
        );
        // The second side asks (NEED_ACK), hears RPC_UNKNOWN, and closes.
        for _ in 0..20 {
            net.tick();
            net.pump();
        }
        let ev = sevents(&mut net, second.0);
        assert_eq!(ev, vec![StreamEvent::Closed { stream: second.1 }]);
        assert!(net.eps[0].is_idle() && net.eps[1].is_idle());
    }
}

#[test]
fn a_dead_peer_fails_the_stream_and_an_abort_resets_it() {
    let config = Config::default();
    let mut net = Net::new(2, config.clone());
    let (c, s) = open(&mut net);
    net.eps[0]
        .stream_send(net.now, c, payload(50_000, 1))
        .unwrap();
    // The server is gone.
    let bound = config.dead_peer_ns() / config.tick_ns + 2;
    let mut ev = Vec::new();
    for _ in 0..bound {
        net.tick();
        net.pump_with(|_, _| true);
        ev.extend(sevents(&mut net, 0));
        if !ev.is_empty() {
            break;
        }
    }
    assert_eq!(
        ev,
        vec![StreamEvent::Failed {
            stream: c,
            error: StreamError::PeerDead
        }]
    );
    let _ = s;

    // Abort: the peer's stream fails with Reset.
    let mut net = Net::new(2, config.clone());
    let (c, s) = open(&mut net);
    net.eps[1].stream_abort(net.now, s).unwrap();
    net.pump();
    assert_eq!(
        sevents(&mut net, 0),
        vec![StreamEvent::Failed {
            stream: c,
            error: StreamError::Reset
        }]
    );
    assert_eq!(
        net.eps[0].stream_send(net.now, c, payload(1, 0)),
        Err(Error::UnknownRpc(c))
    );

    // A peer that never answers OPEN (e.g. Linux Homa, which drops STREAM
    // packets): the open times out and no DATA was ever sent.
    let mut net = Net::new(2, config.clone());
    let c = net.eps[0].open_stream(0, addr(1)).unwrap();
    net.eps[0].stream_send(0, c, payload(10, 0)).unwrap();
    let mut sent = Vec::new();
    let mut ev = Vec::new();
    for _ in 0..bound {
        net.tick();
        sent.extend(net.pump_with(|_, _| true));
        ev.extend(sevents(&mut net, 0));
    }
    assert_eq!(
        ev,
        vec![StreamEvent::Failed {
            stream: c,
            error: StreamError::OpenTimeout
        }]
    );
    assert!(sent
        .iter()
        .all(|(_, t)| t.packet_type == PacketType::Stream));

    // Streams disabled at the server: refused.
    let mut off = config.clone();
    off.stream_window = 0;
    let mut net = Net::new(2, config);
    net.eps[1] = Endpoint::new(off, addr(1), 9).unwrap();
    let c = net.eps[0].open_stream(0, addr(1)).unwrap();
    net.pump();
    net.tick();
    net.pump();
    // RESET for an opening stream reads as a refusal.
    let ev = sevents(&mut net, 0);
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert!(matches!(
        ev[0],
        StreamEvent::Failed { stream, error: StreamError::Refused } if stream == c
    ));
    assert_eq!(net.eps[1].metrics().streams_refused, 1);
}

fn inject(net: &mut Net, to: usize, sender_id: u64, body: Body<'_>) {
    let p = Packet {
        common: CommonHeader {
            sport: 4000,
            dport: 4000,
            sender_id,
        },
        body,
    };
    let src = net.eps[1 - to].local_addr().ip();
    net.eps[to].handle_packet(net.now, src, &p.to_vec());
}

fn data(seq: u16, flags: u8, len: u32, payload: &[u8]) -> Body<'_> {
    Body::Data {
        header: DataHeader {
            message_length: len,
            incoming: len,
            flags: DATA_FLAG_STREAM | flags,
            stream_seq: seq,
            ..DataHeader::default()
        },
        payload,
    }
}

#[test]
fn hostile_stream_packets_are_counted_and_dropped() {
    let mut net = Net::new(2, Config::default());
    let (c, s) = open(&mut net);
    let server = &mut net;
    let cid = c.id; // what the client writes in its headers
                    // Stream DATA for a stream that does not exist.
    inject(server, 1, cid + 2, data(0, 0, 3, b"abc"));
    assert_eq!(server.eps[1].metrics().unknown_rpc_packets, 1);
    // A sequence number ahead of the one expected.
    inject(server, 1, cid, data(5, 0, 3, b"abc"));
    // A FIN with bytes.
    inject(server, 1, cid, data(0, DATA_FLAG_FIN, 3, b"abc"));
    // An ACK for messages never sent.
    let ack = StreamCtl {
        op: StreamOp::Ack,
        next: 3,
        limit: 10,
    };
    inject(server, 1, cid, Body::Stream(ack));
    // An OPEN from the server side of an id.
    inject(server, 1, cid + 1, Body::Stream(StreamCtl::default()));
    assert_eq!(server.eps[1].metrics().stream_invalid, 4);
    assert!(sevents(server, 1).is_empty());
    // A message beyond the window (8) is dropped; the right one is taken.
    inject(server, 1, cid, data(0, 0, 3, b"abc"));
    let ev = sevents(server, 1);
    assert!(matches!(&ev[..], [StreamEvent::Message { stream, .. }] if *stream == s));
    // Its late copy is stale.
    inject(server, 1, cid, data(0, 0, 3, b"abc"));
    assert_eq!(server.eps[1].metrics().stream_stale, 1);
    // Fill the window without reading: the next one is refused.
    for k in 1..8u16 {
        inject(server, 1, cid, data(k, 0, 1, b"x"));
    }
    inject(server, 1, cid, data(8, 0, 1, b"x"));
    assert_eq!(server.eps[1].metrics().stream_window_drops, 1);
    assert_eq!(sevents(server, 1).len(), 7);
}
