//! Streams on the simulated network ([`StreamWorkload`]): each listed pair
//! opens one stream and sends `messages` messages each way (sizes from the
//! workload's request sizes, contents from the pool), then finishes. Every
//! message must arrive exactly once, in order, with the right bytes; every
//! stream must close at both ends and fail at neither.

use super::{addr, Fnv64, Network, RpcId};
use homa_core::StreamEvent;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

/// The streams a run opens.
#[derive(Debug, Clone, Default)]
pub struct StreamWorkload {
    /// (opener, acceptor) endpoint indexes, one stream each.
    pub pairs: Vec<(usize, usize)>,
    /// Messages each way on each stream.
    pub messages: usize,
}

/// The application's view of the streams.
#[derive(Debug, Default)]
pub(super) struct StreamApp {
    ends: BTreeMap<(usize, RpcId), End>,
    /// Stream ends closed cleanly.
    pub(super) closed: usize,
    /// Messages delivered (all streams, both ways).
    pub(super) delivered: u64,
}

#[derive(Debug, Clone, Copy)]
struct End {
    /// The stream's index in `pairs`.
    k: usize,
    /// 0 at the opener, 1 at the acceptor: the direction this end sends.
    dir: u64,
    sent: usize,
    received: usize,
    finished: bool,
    ended: bool,
}

const STREAM: u64 = 0x5354_524d; // "STRM"

impl Network {
    fn stream_key(&self, k: usize, dir: u64, seq: usize) -> u64 {
        let mut h = Fnv64::new();
        h.write_u64(STREAM);
        h.write_u64(k as u64);
        h.write_u64(dir);
        h.write_u64(seq as u64);
        h.finish()
    }

    fn stream_len(&self, key: u64) -> usize {
        let mut rng = ChaCha8Rng::seed_from_u64(super::mix64(key));
        self.cfg.workload.request_sizes.sample(&mut rng)
    }

    /// Opens the workload's streams.
    pub(super) fn start_streams(&mut self) {
        for (k, (a, b)) in self.cfg.streams.pairs.clone().into_iter().enumerate() {
            let id = self.endpoints[a]
                .open_stream(self.now, addr(b))
                .unwrap_or_else(|e| self.fail(format_args!("open_stream {a} → {b}: {e}")));
            let end = End {
                k,
                dir: 0,
                sent: 0,
                received: 0,
                finished: false,
                ended: false,
            };
            self.streams.ends.insert((a, id), end);
            self.stream_pump(a, id);
            self.after(a);
        }
    }

    /// True when every stream closed at both ends.
    pub(super) fn streams_done(&self) -> bool {
        self.streams.closed == 2 * self.cfg.streams.pairs.len()
    }

    /// Sends what the window allows, then the FIN.
    fn stream_pump(&mut self, i: usize, id: RpcId) {
        let mut e = self.streams.ends[&(i, id)];
        while e.sent < self.cfg.streams.messages {
            let key = self.stream_key(e.k, e.dir, e.sent);
            let m = self.content(key, self.stream_len(key));
            match self.endpoints[i].stream_send(self.now, id, m) {
                Ok(()) => e.sent += 1,
                Err(homa_core::Error::Limit(_)) => break,
                Err(err) => self.fail(format_args!("endpoint {i} stream {id}: send: {err}")),
            }
        }
        if e.sent == self.cfg.streams.messages && !e.finished {
            e.finished = true;
            if let Err(err) = self.endpoints[i].stream_finish(self.now, id) {
                self.fail(format_args!("endpoint {i} stream {id}: finish: {err}"));
            }
        }
        self.streams.ends.insert((i, id), e);
    }

    /// A stream event at endpoint `i`.
    pub(super) fn on_stream_event(&mut self, i: usize, ev: StreamEvent) {
        match ev {
            StreamEvent::Opened { stream } => {
                let opener = self
                    .index_of(stream.peer)
                    .unwrap_or_else(|| self.fail(format_args!("stream from {}", stream.peer)));
                let theirs = RpcId {
                    peer: self.addrs[i],
                    id: stream.id & !1,
                };
                let Some(o) = self.streams.ends.get(&(opener, theirs)) else {
                    self.fail(format_args!("endpoint {i}: unknown stream {stream} opened"));
                };
                let end = End { dir: 1, ..*o };
                let end = End {
                    sent: 0,
                    received: 0,
                    finished: false,
                    ended: false,
                    ..end
                };
                if self.streams.ends.insert((i, stream), end).is_some() {
                    self.fail(format_args!("endpoint {i}: stream {stream} opened twice"));
                }
                self.stream_pump(i, stream);
            }
            StreamEvent::Message { stream, message } => {
                let e = self.end(i, stream);
                let key = self.stream_key(e.k, 1 - e.dir, e.received);
                let len = self.stream_len(key);
                if let Err(why) = self.check_content(key, len, &message.into_bytes()) {
                    self.fail(format_args!(
                        "endpoint {i} stream {stream} message {}: {why}",
                        e.received
                    ));
                }
                if e.ended || e.received >= self.cfg.streams.messages {
                    self.fail(format_args!("endpoint {i} stream {stream}: extra message"));
                }
                self.streams
                    .ends
                    .get_mut(&(i, stream))
                    .expect("known")
                    .received += 1;
                self.streams.delivered += 1;
                if let Err(err) = self.endpoints[i].stream_read(self.now, stream) {
                    self.fail(format_args!("endpoint {i} stream {stream}: read: {err}"));
                }
            }
            StreamEvent::End { stream } => {
                let e = self.end(i, stream);
                if e.received != self.cfg.streams.messages || e.ended {
                    self.fail(format_args!(
                        "endpoint {i} stream {stream}: end after {} messages",
                        e.received
                    ));
                }
                self.streams
                    .ends
                    .get_mut(&(i, stream))
                    .expect("known")
                    .ended = true;
            }
            StreamEvent::Writable { stream } => {
                self.end(i, stream);
                self.stream_pump(i, stream);
            }
            StreamEvent::Closed { stream } => {
                let e = self.end(i, stream);
                if !(e.ended && e.finished) {
                    self.fail(format_args!("endpoint {i} stream {stream}: closed early"));
                }
                self.streams.closed += 1;
            }
            StreamEvent::Failed { stream, error } => {
                self.fail(format_args!("endpoint {i} stream {stream} failed: {error}"));
            }
        }
    }

    fn end(&self, i: usize, stream: RpcId) -> End {
        match self.streams.ends.get(&(i, stream)) {
            Some(e) => *e,
            None => self.fail(format_args!(
                "endpoint {i}: event for unknown stream {stream}"
            )),
        }
    }
}
