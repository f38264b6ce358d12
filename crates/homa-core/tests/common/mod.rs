//! A deterministic, in-memory network for driving several `homa_core`
//! endpoints against each other.
//!
//! # Model
//!
//! * `N` endpoints (2..=8) named `127.0.0.1:4000 ..= 127.0.0.N:4000`. Nothing
//!   touches a real socket: the addresses are only names.
//! * Each endpoint has one egress link. Whenever the link is idle the harness
//!   asks the endpoint for a packet (`poll_transmit`); the packet then
//!   occupies the link for its serialization time (Homa bytes plus
//!   [`NetConfig::framing_bytes`] at [`NetConfig::link_bps`]). Unless it is
//!   lost, it is delivered to the endpoint whose address is `Transmit::dst`
//!   at `send time + serialization + latency`, plus a random extra delay if
//!   it was picked for reordering. A duplicated packet is delivered twice,
//!   each copy with its own reordering draw. There is no ingress queueing:
//!   receivers take packets as fast as they arrive.
//! * Everything happens in a discrete-event simulation: a `BinaryHeap`
//!   ordered by `(time, sequence number)`, so ties are broken by insertion
//!   order and a run is a pure function of the seed.
//! * Timers: after anything happens on an endpoint the harness asks
//!   `poll_timeout()` and schedules one timer event at that time. Each
//!   endpoint has a generation counter; a timer event whose generation is no
//!   longer current is stale and ignored.
//! * After anything happens on an endpoint the harness drains `poll_event()`
//!   into the application model and kicks the endpoint's link if it is idle.
//!
//! # Application model
//!
//! Every endpoint runs a server that answers each request at once. The
//! clients listed in [`Workload::clients`] keep [`Workload::outstanding`]
//! RPCs in flight to random servers (never themselves) until each has issued
//! [`Workload::rpcs_per_client`].
//!
//! Message contents are verifiable without storing them. All message bytes
//! are windows into one random *pool*; where a message's window starts is a
//! hash of its name, so two messages share content only by a freak
//! coincidence, and a byte delivered at the wrong offset, from the wrong
//! message or of the wrong length is detected.
//!
//! * A request is named (client address, client's issue number, REQUEST):
//!   the core chooses the RPC id inside `send_request`, after the message has
//!   been built. The server finds the issue number and the request length in
//!   the harness's table of issued RPCs, keyed by (client address, client
//!   id); the server-side `RpcId` is `{ peer: client address, id: client id
//!   | 1 }`.
//! * A response is named (client address, client id, RESPONSE), and its
//!   length is drawn from [`Workload::response_sizes`] with a generator
//!   seeded by a hash of (client address, client id, request length), which
//!   the server computes from the request and the client recomputes when
//!   checking.
//!
//! Exactly-once: the table counts request deliveries and responses per RPC;
//! a second delivery of a request or a second response panics at once.
//!
//! # Trace hash
//!
//! Every delivered packet (time, source, destination, bytes) is folded into
//! a word-wise FNV-1a hash, so a test can check that a seed reproduces the
//! same run and that another seed does not.
//!
//! Every loop is bounded by virtual time and by an event count; a stuck or
//! runaway core fails the test with a message instead of hanging.

// Each test binary uses a different part of the harness.
#![allow(dead_code)]

mod streams;
pub use streams::StreamWorkload;

use bytes::Bytes;
use homa_core::{Config, Endpoint, Event, Metrics, Nanos, RpcError, RpcId};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap};
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// The UDP-style port every endpoint of the simulated network uses.
pub const PORT: u16 = 4000;

/// Ethernet framing per packet: header, CRC, preamble, inter-packet gap.
pub const ETHERNET_FRAMING: u64 = 38;

/// Pool bytes beyond the largest message, so that even the largest message
/// has this many distinct start positions.
const POOL_SLACK: usize = 1 << 20;

/// Consecutive timer firings of one endpoint at one instant after which the
/// harness concludes that `poll_timeout` never moves past `now`.
const MAX_TIMER_SPIN: u32 = 10_000;

/// Address of endpoint `i` (0-based): `127.0.0.(i+1):4000`.
pub fn addr(i: usize) -> SocketAddr {
    assert!(i < 254, "endpoint index {i} out of range");
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, i as u8 + 1)), PORT)
}

// ---------------------------------------------------------------------------
// Hashing
// ---------------------------------------------------------------------------

/// FNV-1a over 64-bit words (rather than bytes, to be fast on megabytes).
///
/// Each step `h = (h ^ w) * PRIME` is a bijection of `h` for a fixed word,
/// so two inputs that differ in exactly one word always hash differently.
/// Deterministic across runs and processes, unlike std's `RandomState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fnv64(u64);

impl Default for Fnv64 {
    fn default() -> Self {
        Fnv64::new()
    }
}

impl Fnv64 {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;

    /// A hash of nothing.
    pub fn new() -> Fnv64 {
        Fnv64(Self::OFFSET_BASIS)
    }

    /// Folds in one word.
    pub fn write_u64(&mut self, word: u64) {
        self.0 = (self.0 ^ word).wrapping_mul(Self::PRIME);
    }

    /// Folds in a byte string (its length first, so that concatenations of
    /// different splits differ).
    pub fn write_bytes(&mut self, bytes: &[u8]) {
        self.write_u64(bytes.len() as u64);
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.write_u64(u64::from_le_bytes(c.try_into().unwrap()));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.write_u64(u64::from_le_bytes(w));
        }
    }

    /// Folds in a socket address.
    pub fn write_addr(&mut self, a: SocketAddr) {
        match a.ip() {
            IpAddr::V4(v4) => self.write_u64(u32::from(v4) as u64),
            IpAddr::V6(v6) => {
                let x = u128::from(v6);
                self.write_u64(x as u64);
                self.write_u64((x >> 64) as u64);
            }
        }
        self.write_u64(a.port() as u64);
    }

    /// The hash so far.
    pub fn finish(&self) -> u64 {
        self.0
    }
}

/// The splitmix64 finaliser: spreads every input bit over the whole word.
pub fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Which message of an RPC a content key names.
const REQUEST: u64 = 0x5245_5155; // "REQU"
const RESPONSE: u64 = 0x5245_5350; // "RESP"
const RESPONSE_LEN: u64 = 0x524c_454e; // "RLEN"

fn key(client: SocketAddr, n: u64, which: u64) -> u64 {
    let mut h = Fnv64::new();
    h.write_addr(client);
    h.write_u64(n);
    h.write_u64(which);
    mix64(h.finish())
}

// ---------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------

/// A distribution of message sizes (bytes).
#[derive(Debug, Clone)]
pub enum SizeDist {
    /// Always this size.
    Fixed(usize),
    /// Uniform on `[min, max]`.
    Uniform(usize, usize),
    /// Log-uniform on `[0, max]`, except that `zero_per_mille` of the draws
    /// are exactly 0 and `boundary_per_mille` are picked uniformly from
    /// `boundaries` (sizes around packet and unscheduled boundaries).
    LogUniform {
        /// Largest size.
        max: usize,
        /// Draws (‰) that are exactly zero.
        zero_per_mille: u32,
        /// Draws (‰) taken from `boundaries`.
        boundary_per_mille: u32,
        /// Interesting sizes, each at most `max`.
        boundaries: Vec<usize>,
    },
}

impl SizeDist {
    /// Log-uniform on `[0, max]` with 3% exact zeros and 10% sizes within one
    /// byte of a multiple (1..=3) of the payload per packet, of the
    /// unscheduled limit (rounded up to packets, as the sender does), or of
    /// `max` itself.
    pub fn log_uniform_with_boundaries(max: usize, config: &Config) -> SizeDist {
        let payload = config.max_payload() as usize;
        let unsched = (config.unsched_bytes as usize).div_ceil(payload) * payload;
        let mut centres = vec![payload, 2 * payload, 3 * payload, unsched, max];
        centres.retain(|&c| c > 0);
        let mut boundaries: Vec<usize> = centres
            .iter()
            .flat_map(|&c| [c - 1, c, c + 1])
            .filter(|&s| s <= max)
            .collect();
        boundaries.sort_unstable();
        boundaries.dedup();
        SizeDist::LogUniform {
            max,
            zero_per_mille: 30,
            boundary_per_mille: 100,
            boundaries,
        }
    }

    /// Draws one size.
    pub fn sample(&self, rng: &mut impl Rng) -> usize {
        match self {
            SizeDist::Fixed(n) => *n,
            SizeDist::Uniform(lo, hi) => rng.gen_range(*lo..=*hi),
            SizeDist::LogUniform {
                max,
                zero_per_mille,
                boundary_per_mille,
                boundaries,
            } => {
                let r = rng.gen_range(0..1000u32);
                if r < *zero_per_mille {
                    0
                } else if r < zero_per_mille + boundary_per_mille && !boundaries.is_empty() {
                    boundaries[rng.gen_range(0..boundaries.len())]
                } else {
                    // exp(U · ln(max + 1)) − 1 is log-uniform on [0, max].
                    let x = (rng.gen::<f64>() * ((*max as f64) + 1.0).ln()).exp() - 1.0;
                    (x as usize).min(*max)
                }
            }
        }
    }

    /// The largest size the distribution can produce.
    pub fn max(&self) -> usize {
        match self {
            SizeDist::Fixed(n) => *n,
            SizeDist::Uniform(_, hi) => *hi,
            SizeDist::LogUniform { max, .. } => *max,
        }
    }
}

/// What the applications do.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Endpoints that issue RPCs.
    pub clients: Vec<usize>,
    /// Endpoints RPCs are sent to (a client never picks itself).
    pub servers: Vec<usize>,
    /// RPCs each client issues in total.
    pub rpcs_per_client: usize,
    /// RPCs each client keeps in flight.
    pub outstanding: usize,
    /// Request sizes.
    pub request_sizes: SizeDist,
    /// Response sizes (drawn deterministically per RPC, see the module doc).
    pub response_sizes: SizeDist,
    /// A client issues nothing more after its first failed RPC (for tests
    /// where servers die: the run then ends once the failures are in).
    pub stop_after_failure: bool,
}

impl Workload {
    /// Every endpoint of `n` is a client and a server.
    pub fn all_to_all(
        n: usize,
        rpcs_per_client: usize,
        outstanding: usize,
        sizes: SizeDist,
    ) -> Self {
        Workload {
            clients: (0..n).collect(),
            servers: (0..n).collect(),
            rpcs_per_client,
            outstanding,
            request_sizes: sizes.clone(),
            response_sizes: sizes,
            stop_after_failure: false,
        }
    }
}

/// The network and what runs on it.
#[derive(Debug, Clone)]
pub struct NetConfig {
    /// Number of endpoints, 2..=8.
    pub endpoints: usize,
    /// One-way propagation delay of every link (ns).
    pub latency_ns: u64,
    /// Rate of every egress link (bits/s).
    pub link_bps: u64,
    /// Bytes each packet costs on the link beyond its Homa bytes (lower
    /// headers plus Ethernet framing).
    pub framing_bytes: u64,
    /// Probability that a packet is lost.
    pub loss: f64,
    /// Probability that a packet that is not lost is delivered twice.
    pub duplicate: f64,
    /// Probability that a delivered copy gets an extra delay.
    pub reorder: f64,
    /// Largest extra delay of a reordered copy (ns); drawn uniformly in
    /// `1..=reorder_max_delay_ns`.
    pub reorder_max_delay_ns: u64,
    /// The protocol configuration of every endpoint…
    pub homa: Config,
    /// …but endpoint `i`'s is `per_endpoint[i]` where that is `Some` (a
    /// mixed network, e.g. some peers with ByteDance mode off).
    pub per_endpoint: Vec<Option<Config>>,
    /// The applications.
    pub workload: Workload,
    /// Streams opened beside the RPCs (`streams.rs`).
    pub streams: StreamWorkload,
    /// Cap on simulation events over the whole run.
    pub max_events: u64,
}

impl NetConfig {
    /// A clean 10 Gbit/s network with 2 µs links between `n` endpoints that
    /// all talk to each other, `rpcs_per_client` RPCs each, 4 outstanding,
    /// sizes log-uniform up to 100 kB.
    pub fn clean(n: usize, rpcs_per_client: usize) -> NetConfig {
        let homa = Config::default();
        let sizes = SizeDist::log_uniform_with_boundaries(100_000, &homa);
        NetConfig {
            endpoints: n,
            latency_ns: 2_000,
            link_bps: 10_000_000_000,
            framing_bytes: homa.lower_header_bytes as u64 + ETHERNET_FRAMING,
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_max_delay_ns: 0,
            homa,
            per_endpoint: Vec::new(),
            workload: Workload::all_to_all(n, rpcs_per_client, 4, sizes),
            streams: StreamWorkload::default(),
            max_events: 50_000_000,
        }
    }

    /// Upper bound on the time from the moment a peer falls silent to the
    /// moment it is declared dead: the first RESEND after `resend_ticks`
    /// silent ticks, then `timeout_resends` RESENDs `resend_interval` ticks
    /// apart, plus one interval for the final check and two ticks of timer
    /// granularity.
    pub fn dead_peer_bound_ns(&self) -> Nanos {
        dead_peer_bound_ns(&self.homa)
    }
}

/// See [`NetConfig::dead_peer_bound_ns`].
pub fn dead_peer_bound_ns(c: &Config) -> Nanos {
    // The core's bound plus two ticks of timer granularity.
    c.dead_peer_ns() + 2 * c.tick_ns
}

// ---------------------------------------------------------------------------
// Results
// ---------------------------------------------------------------------------

/// A client RPC that ended in `Event::Failed`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedRpc {
    /// Index of the client endpoint.
    pub client: usize,
    /// The client-side RPC.
    pub rpc: RpcId,
    /// Why.
    pub error: RpcError,
    /// When it was issued.
    pub issued_at: Nanos,
    /// When the failure was reported.
    pub failed_at: Nanos,
}

/// What a run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The seed of the run.
    pub seed: u64,
    /// Virtual time at which the last RPC completed or failed.
    pub completed_at: Nanos,
    /// Virtual time at which every endpoint had freed all RPC state.
    pub quiescent_at: Nanos,
    /// Virtual time at the end (remembered acks expired).
    pub end_time: Nanos,
    /// RPCs issued by all clients.
    pub rpcs_issued: u64,
    /// Responses received (each checked byte for byte).
    pub responses: u64,
    /// RPCs that failed.
    pub failures: Vec<FailedRpc>,
    /// Request message bytes issued.
    pub request_bytes: u64,
    /// Response message bytes received.
    pub response_bytes: u64,
    /// Packets endpoints handed to their links.
    pub packets_sent: u64,
    /// Bytes (Homa headers and payload) of those packets.
    pub packet_bytes_sent: u64,
    /// Packets the network dropped at random.
    pub packets_lost: u64,
    /// Packets the network delivered twice.
    pub packets_duplicated: u64,
    /// Packet copies that got an extra (reordering) delay.
    pub packets_reordered: u64,
    /// Packet copies dropped because an end was isolated.
    pub packets_isolated: u64,
    /// Packet copies delivered.
    pub packets_delivered: u64,
    /// Simulation events processed.
    pub events: u64,
    /// Hash of every delivery (time, source, destination, bytes).
    pub trace_hash: u64,
    /// Every endpoint's metrics at the end.
    pub metrics: Vec<Metrics>,
    /// Stream messages delivered (both ways, every stream).
    pub stream_messages: u64,
}

impl Report {
    /// Sum of one metric over all endpoints.
    pub fn total(&self, f: impl Fn(&Metrics) -> u64) -> u64 {
        self.metrics.iter().map(f).sum()
    }

    /// A few lines for `--nocapture` output.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "seed {:#x}: {} RPCs ({} responses, {} failed), {:.1} MB requests, {:.1} MB responses",
            self.seed,
            self.rpcs_issued,
            self.responses,
            self.failures.len(),
            self.request_bytes as f64 / 1e6,
            self.response_bytes as f64 / 1e6
        );
        let _ = writeln!(
            s,
            "  virtual time: done {:.3} ms, quiescent {:.3} ms, end {:.3} ms; {} events",
            self.completed_at as f64 / 1e6,
            self.quiescent_at as f64 / 1e6,
            self.end_time as f64 / 1e6,
            self.events
        );
        let _ = writeln!(
            s,
            "  packets: {} sent ({:.1} MB), {} lost, {} duplicated, {} reordered, {} isolated, {} delivered",
            self.packets_sent,
            self.packet_bytes_sent as f64 / 1e6,
            self.packets_lost,
            self.packets_duplicated,
            self.packets_reordered,
            self.packets_isolated,
            self.packets_delivered
        );
        let _ = writeln!(
            s,
            "  core: {} data bytes retransmitted, {} timeouts, {} RESENDs, {} BUSY replies, {} restarts, \
             {} duplicate data bytes, {} stale duplicates, {} peers dead",
            self.total(|m| m.data_bytes_retransmitted),
            self.total(|m| m.timeouts),
            self.total(|m| m.resends_requested),
            self.total(|m| m.busy_replies),
            self.total(|m| m.restarts),
            self.total(|m| m.duplicate_data_bytes),
            self.total(|m| m.stale_duplicates),
            self.total(|m| m.peers_dead),
        );
        let _ = write!(s, "  trace hash {:#018x}", self.trace_hash);
        s
    }
}

// ---------------------------------------------------------------------------
// The simulation
// ---------------------------------------------------------------------------

#[derive(Debug)]
enum Kind {
    /// A packet copy arrives at `to`.
    Deliver {
        from: usize,
        to: usize,
        packet: Bytes,
    },
    /// The egress link of an endpoint has finished serializing a packet.
    LinkIdle(usize),
    /// An endpoint's timer, valid only if `generation` is still current.
    Timer { ep: usize, generation: u64 },
}

#[derive(Debug)]
struct Scheduled {
    time: Nanos,
    seq: u64,
    kind: Kind,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.time, self.seq) == (other.time, other.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest event.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.time, other.seq).cmp(&(self.time, self.seq))
    }
}

/// What the harness knows about one issued RPC.
#[derive(Debug, Clone)]
struct IssuedRpc {
    client: usize,
    server: usize,
    /// The client's issue number (names the request content).
    n: u64,
    request_len: usize,
    issued_at: Nanos,
    request_deliveries: u32,
    responses: u32,
    failed: bool,
}

#[derive(Debug, Clone, Default)]
struct ClientState {
    issued: usize,
    outstanding: usize,
    stopped: bool,
}

#[derive(Debug, Clone, Default)]
struct Stats {
    packets_sent: u64,
    packet_bytes_sent: u64,
    packets_lost: u64,
    packets_duplicated: u64,
    packets_reordered: u64,
    packets_isolated: u64,
    packets_delivered: u64,
    request_bytes: u64,
    response_bytes: u64,
    responses: u64,
}

/// The simulated network, its endpoints and their applications.
pub struct Network {
    seed: u64,
    cfg: NetConfig,
    now: Nanos,
    endpoints: Vec<Endpoint>,
    addrs: Vec<SocketAddr>,
    queue: BinaryHeap<Scheduled>,
    next_seq: u64,
    link_busy: Vec<bool>,
    /// The pending timer of each endpoint: (time, generation).
    timer: Vec<Option<(Nanos, u64)>>,
    timer_generation: Vec<u64>,
    /// Timer firings of each endpoint at the current instant.
    timer_spin: Vec<(Nanos, u32)>,
    /// From when each endpoint is cut off from the network.
    isolated_from: Vec<Option<Nanos>>,
    net_rng: ChaCha8Rng,
    app_rng: ChaCha8Rng,
    pool: Bytes,
    clients: Vec<ClientState>,
    issued: BTreeMap<(SocketAddr, u64), IssuedRpc>,
    failures: Vec<FailedRpc>,
    stats: Stats,
    trace: Fnv64,
    events: u64,
    /// Virtual-time window whose deliveries are printed (`HOMA_TRACE`).
    print_window: Option<(Nanos, Nanos)>,
    streams: streams::StreamApp,
}

/// Reads `HOMA_TRACE=from_ns..to_ns` (or `from_ns..`): the deliveries in that
/// window of virtual time are printed, for debugging a failing seed.
fn print_window_from_env() -> Option<(Nanos, Nanos)> {
    let v = std::env::var("HOMA_TRACE").ok()?;
    let (a, b) = v.split_once("..")?;
    let from = a.trim().parse().ok()?;
    let to = if b.trim().is_empty() {
        Nanos::MAX
    } else {
        b.trim().parse().ok()?
    };
    Some((from, to))
}

/// One line describing a packet, for traces.
pub fn describe(packet: &[u8]) -> String {
    use homa_wire::{Body, Packet};
    match Packet::parse(packet) {
        Err(e) => format!("unparsable ({e})"),
        Ok(p) => {
            let c = p.common;
            let head = format!(
                "{} {}->{} id {}",
                p.packet_type(),
                c.sport,
                c.dport,
                c.sender_id
            );
            match p.body {
                Body::Data { header: h, payload } => format!(
                    "{head} off {} len {} msg {} incoming {}{}{}",
                    h.offset,
                    payload.len(),
                    h.message_length,
                    h.incoming,
                    if h.retransmit { " RETX" } else { "" },
                    if h.ack.client_id != 0 {
                        format!(" ack {}", h.ack.client_id)
                    } else {
                        String::new()
                    }
                ),
                Body::Grant { offset, priority } => {
                    format!("{head} offset {offset} prio {priority}")
                }
                Body::Resend {
                    offset,
                    length,
                    priority,
                } => {
                    format!("{head} offset {offset} length {length} prio {priority}")
                }
                Body::Ack { acks } => format!("{head} {:?}", acks.as_slice()),
                _ => head,
            }
        }
    }
}

impl Network {
    /// Builds the network; endpoint `i` gets seed `mix64(seed + i)`.
    pub fn new(seed: u64, cfg: NetConfig) -> Network {
        assert!(
            (2..=8).contains(&cfg.endpoints),
            "the harness supports 2..=8 endpoints, not {}",
            cfg.endpoints
        );
        for &i in cfg.workload.clients.iter().chain(&cfg.workload.servers) {
            assert!(
                i < cfg.endpoints,
                "workload names endpoint {i}, which does not exist"
            );
        }
        for &c in &cfg.workload.clients {
            assert!(
                cfg.workload.servers.iter().any(|&s| s != c),
                "client {c} has no server other than itself"
            );
        }
        let n = cfg.endpoints;
        let addrs: Vec<SocketAddr> = (0..n).map(addr).collect();
        let endpoints = addrs
            .iter()
            .enumerate()
            .map(|(i, &a)| {
                let config = match cfg.per_endpoint.get(i) {
                    Some(Some(c)) => c.clone(),
                    _ => cfg.homa.clone(),
                };
                let ep = Endpoint::new(config, a, mix64(seed.wrapping_add(i as u64)))
                    .unwrap_or_else(|e| panic!("Endpoint::new rejected the config: {e}"));
                assert_eq!(
                    ep.local_addr(),
                    a,
                    "local_addr() differs from the address given"
                );
                ep
            })
            .collect();
        let mut pool_rng = ChaCha8Rng::seed_from_u64(mix64(seed ^ 0x706f_6f6c));
        let pool_len = cfg
            .workload
            .request_sizes
            .max()
            .max(cfg.workload.response_sizes.max())
            + POOL_SLACK;
        let mut pool = vec![0u8; pool_len];
        pool_rng.fill_bytes(&mut pool);
        Network {
            seed,
            now: 0,
            endpoints,
            addrs,
            queue: BinaryHeap::new(),
            next_seq: 0,
            link_busy: vec![false; n],
            timer: vec![None; n],
            timer_generation: vec![0; n],
            timer_spin: vec![(0, 0); n],
            isolated_from: vec![None; n],
            net_rng: ChaCha8Rng::seed_from_u64(mix64(seed ^ 0x6e65_7477)),
            app_rng: ChaCha8Rng::seed_from_u64(mix64(seed ^ 0x6170_7073)),
            pool: Bytes::from(pool),
            clients: vec![ClientState::default(); n],
            issued: BTreeMap::new(),
            failures: Vec::new(),
            stats: Stats::default(),
            trace: Fnv64::new(),
            events: 0,
            print_window: print_window_from_env(),
            streams: streams::StreamApp::default(),
            cfg,
        }
    }

    /// The current virtual time.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Endpoint `i`.
    pub fn endpoint(&self, i: usize) -> &Endpoint {
        &self.endpoints[i]
    }

    /// The configuration.
    pub fn config(&self) -> &NetConfig {
        &self.cfg
    }

    /// Cuts endpoint `i` off from time `at` on: every packet copy from or to
    /// it that would arrive at or after `at` is dropped. The endpoint itself
    /// keeps running (its timers fire, its link drains).
    pub fn isolate(&mut self, i: usize, at: Nanos) {
        self.isolated_from[i] = Some(at);
    }

    fn fail(&self, what: impl std::fmt::Display) -> ! {
        panic!(
            "[seed {:#x}, t = {} ns = {:.3} ms, {} events] {what}",
            self.seed,
            self.now,
            self.now as f64 / 1e6,
            self.events
        )
    }

    fn schedule(&mut self, time: Nanos, kind: Kind) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.queue.push(Scheduled { time, seq, kind });
    }

    fn index_of(&self, a: SocketAddr) -> Option<usize> {
        self.addrs.iter().position(|&x| x == a)
    }

    fn is_isolated(&self, i: usize) -> bool {
        self.isolated_from[i].is_some_and(|t| self.now >= t)
    }

    // --- link ------------------------------------------------------------

    /// Nanoseconds a packet of `len` Homa bytes occupies the link.
    fn serialization_ns(&self, len: usize) -> Nanos {
        let bits = (len as u128 + self.cfg.framing_bytes as u128) * 8;
        (bits * 1_000_000_000).div_ceil(self.cfg.link_bps as u128) as Nanos
    }

    /// If endpoint `i`'s link is idle, asks it for a packet and sends it.
    fn kick(&mut self, i: usize) {
        if self.link_busy[i] {
            return;
        }
        let Some(tx) = self.endpoints[i].poll_transmit(self.now) else {
            return;
        };
        let Some(to) = self.index_of(tx.dst) else {
            self.fail(format_args!(
                "endpoint {i} sent a {:?} packet to {}, which is not on the network",
                tx.packet_type, tx.dst
            ));
        };
        // The core must emit what it says it emits.
        match homa_wire::Packet::parse(&tx.to_bytes()) {
            Ok(p) if p.packet_type() == tx.packet_type => {}
            Ok(p) => self.fail(format_args!(
                "endpoint {i} labelled a {:?} packet as {:?}",
                p.packet_type(),
                tx.packet_type
            )),
            Err(e) => self.fail(format_args!(
                "endpoint {i} emitted a {:?} packet that does not parse: {e}",
                tx.packet_type
            )),
        }
        let max_len = (self.cfg.homa.mtu - self.cfg.homa.lower_header_bytes) as usize;
        if tx.len() > max_len {
            self.fail(format_args!(
                "endpoint {i} emitted a {}-byte packet; the MTU allows {max_len}",
                tx.len()
            ));
        }
        if tx.priority >= self.cfg.homa.num_priorities {
            self.fail(format_args!(
                "endpoint {i} used priority {} of {}",
                tx.priority, self.cfg.homa.num_priorities
            ));
        }
        self.stats.packets_sent += 1;
        self.stats.packet_bytes_sent += tx.len() as u64;
        let ser = self.serialization_ns(tx.len());
        self.link_busy[i] = true;
        self.schedule(self.now + ser, Kind::LinkIdle(i));

        if self.net_rng.gen_bool(self.cfg.loss) {
            self.stats.packets_lost += 1;
            return;
        }
        let copies = if self.net_rng.gen_bool(self.cfg.duplicate) {
            self.stats.packets_duplicated += 1;
            2
        } else {
            1
        };
        for _ in 0..copies {
            let mut at = self.now + ser + self.cfg.latency_ns;
            if self.cfg.reorder_max_delay_ns > 0 && self.net_rng.gen_bool(self.cfg.reorder) {
                self.stats.packets_reordered += 1;
                at += self.net_rng.gen_range(1..=self.cfg.reorder_max_delay_ns);
            }
            self.schedule(
                at,
                Kind::Deliver {
                    from: i,
                    to,
                    packet: tx.to_bytes(),
                },
            );
        }
    }

    // --- timers ----------------------------------------------------------

    /// Makes the pending timer event of endpoint `i` match `poll_timeout()`.
    fn rearm_timer(&mut self, i: usize) {
        match self.endpoints[i].poll_timeout() {
            None => self.timer[i] = None,
            Some(t) => {
                let t = t.max(self.now);
                if self.timer[i].map(|(at, _)| at) != Some(t) {
                    self.timer_generation[i] += 1;
                    let generation = self.timer_generation[i];
                    self.timer[i] = Some((t, generation));
                    self.schedule(t, Kind::Timer { ep: i, generation });
                }
            }
        }
    }

    /// Bookkeeping after anything happened on endpoint `i`: application
    /// events, the link, the timer.
    fn after(&mut self, i: usize) {
        let mut drained = 0u64;
        while let Some(ev) = self.endpoints[i].poll_event() {
            drained += 1;
            if drained > 1_000_000 {
                self.fail(format_args!(
                    "endpoint {i} produced over a million events at once"
                ));
            }
            self.on_event(i, ev);
        }
        while let Some(ev) = self.endpoints[i].poll_stream_event() {
            self.on_stream_event(i, ev);
        }
        self.kick(i);
        self.rearm_timer(i);
    }

    // --- applications ----------------------------------------------------

    fn content(&self, key: u64, len: usize) -> Bytes {
        assert!(
            len <= self.pool.len(),
            "message of {len} bytes exceeds the pool"
        );
        let off = (key % (self.pool.len() - len + 1) as u64) as usize;
        self.pool.slice(off..off + len)
    }

    /// Compares `got` with the content named `key` of `len` bytes.
    fn check_content(&self, key: u64, len: usize, got: &[u8]) -> Result<(), String> {
        if got.len() != len {
            return Err(format!("{} bytes instead of {len}", got.len()));
        }
        let want = self.content(key, len);
        if got != &want[..] {
            let at = got
                .iter()
                .zip(want.iter())
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            let bad = got.iter().zip(want.iter()).filter(|(a, b)| a != b).count();
            return Err(format!(
                "{bad} of {len} bytes wrong, the first at offset {at} (got {:#04x}, want {:#04x})",
                got[at], want[at]
            ));
        }
        Ok(())
    }

    fn response_len(&self, client: SocketAddr, client_id: u64, request_len: usize) -> usize {
        let mut h = Fnv64::new();
        h.write_addr(client);
        h.write_u64(client_id);
        h.write_u64(request_len as u64);
        h.write_u64(RESPONSE_LEN);
        let mut rng = ChaCha8Rng::seed_from_u64(mix64(h.finish()));
        self.cfg.workload.response_sizes.sample(&mut rng)
    }

    /// Client `c` issues its next RPC.
    fn issue(&mut self, c: usize) {
        let w = &self.cfg.workload;
        let candidates: Vec<usize> = w.servers.iter().copied().filter(|&s| s != c).collect();
        let server = candidates[self.app_rng.gen_range(0..candidates.len())];
        let len = w.request_sizes.sample(&mut self.app_rng);
        let n = self.clients[c].issued as u64;
        let message = self.content(key(self.addrs[c], n, REQUEST), len);
        let dest = self.addrs[server];
        let rpc = match self.endpoints[c].send_request(self.now, dest, message) {
            Ok(rpc) => rpc,
            Err(e) => self.fail(format_args!(
                "endpoint {c}: send_request of {len} bytes to {dest} failed: {e}"
            )),
        };
        if rpc.peer != dest || rpc.id & 1 != 0 {
            self.fail(format_args!(
                "endpoint {c}: send_request to {dest} returned {rpc:?} (want peer {dest}, even id)"
            ));
        }
        let record = IssuedRpc {
            client: c,
            server,
            n,
            request_len: len,
            issued_at: self.now,
            request_deliveries: 0,
            responses: 0,
            failed: false,
        };
        if self
            .issued
            .insert((self.addrs[c], rpc.id), record)
            .is_some()
        {
            self.fail(format_args!(
                "endpoint {c} reused client id {} for a new RPC",
                rpc.id
            ));
        }
        self.clients[c].issued += 1;
        self.clients[c].outstanding += 1;
        self.stats.request_bytes += len as u64;
    }

    /// Client `c` tops up its outstanding RPCs.
    fn refill(&mut self, c: usize) {
        let (total, k) = (
            self.cfg.workload.rpcs_per_client,
            self.cfg.workload.outstanding,
        );
        while !self.clients[c].stopped
            && self.clients[c].outstanding < k
            && self.clients[c].issued < total
        {
            self.issue(c);
        }
    }

    fn on_event(&mut self, i: usize, ev: Event) {
        match ev {
            Event::Request { rpc, message } => self.on_request(i, rpc, message.into_bytes()),
            Event::Response { rpc, message } => self.on_response(i, rpc, message.into_bytes()),
            Event::Failed { rpc, error } => self.on_failed(i, rpc, error),
        }
    }

    fn on_request(&mut self, i: usize, rpc: RpcId, message: Bytes) {
        if rpc.id & 1 != 1 {
            self.fail(format_args!(
                "endpoint {i}: Request event with even (client) id: {rpc:?}"
            ));
        }
        let client_id = rpc.id & !1;
        let name = (rpc.peer, client_id);
        let Some(rec) = self.issued.get_mut(&name) else {
            self.fail(format_args!(
                "endpoint {i} delivered a request for {rpc:?}, which no client issued"
            ));
        };
        rec.request_deliveries += 1;
        let rec = rec.clone();
        if rec.request_deliveries > 1 {
            self.fail(format_args!(
                "exactly-once violated: endpoint {i} delivered the request of client {} id {} \
                 (issued at {} ns) a second time",
                rpc.peer, client_id, rec.issued_at
            ));
        }
        if rec.server != i {
            self.fail(format_args!(
                "endpoint {i} delivered a request sent to endpoint {}",
                rec.server
            ));
        }
        if let Err(e) = self.check_content(key(rpc.peer, rec.n, REQUEST), rec.request_len, &message)
        {
            self.fail(format_args!(
                "endpoint {i}: request of {rpc:?} is corrupt: {e}"
            ));
        }
        let len = self.response_len(rpc.peer, client_id, message.len());
        let response = self.content(key(rpc.peer, client_id, RESPONSE), len);
        if let Err(e) = self.endpoints[i].reply(self.now, rpc, response) {
            self.fail(format_args!("endpoint {i}: reply to {rpc:?} failed: {e}"));
        }
    }

    fn on_response(&mut self, i: usize, rpc: RpcId, message: Bytes) {
        let me = self.addrs[i];
        let Some(rec) = self.issued.get_mut(&(me, rpc.id)) else {
            self.fail(format_args!(
                "endpoint {i}: Response for {rpc:?}, which it never issued"
            ));
        };
        rec.responses += 1;
        let rec = rec.clone();
        if rec.responses > 1 || rec.failed {
            self.fail(format_args!(
                "endpoint {i}: second outcome for {rpc:?} (responses {}, failed {})",
                rec.responses, rec.failed
            ));
        }
        if rpc.peer != self.addrs[rec.server] {
            self.fail(format_args!(
                "endpoint {i}: Response for {rpc:?} names the wrong server (sent to {})",
                self.addrs[rec.server]
            ));
        }
        if rec.request_deliveries != 1 {
            self.fail(format_args!(
                "endpoint {i}: Response for {rpc:?} but its request was delivered {} times",
                rec.request_deliveries
            ));
        }
        let len = self.response_len(me, rpc.id, rec.request_len);
        if let Err(e) = self.check_content(key(me, rpc.id, RESPONSE), len, &message) {
            self.fail(format_args!(
                "endpoint {i}: response of {rpc:?} is corrupt: {e}"
            ));
        }
        self.stats.responses += 1;
        self.stats.response_bytes += len as u64;
        self.clients[i].outstanding -= 1;
        self.refill(i);
    }

    fn on_failed(&mut self, i: usize, rpc: RpcId, error: RpcError) {
        let me = self.addrs[i];
        let Some(rec) = self.issued.get_mut(&(me, rpc.id)) else {
            self.fail(format_args!(
                "endpoint {i}: Failed for {rpc:?}, which it never issued"
            ));
        };
        let first = rec.responses == 0 && !rec.failed;
        rec.failed = true;
        let rec = rec.clone();
        if !first {
            self.fail(format_args!(
                "endpoint {i}: second outcome for {rpc:?} (Failed {error:?} after responses {})",
                rec.responses
            ));
        }
        self.failures.push(FailedRpc {
            client: i,
            rpc,
            error,
            issued_at: rec.issued_at,
            failed_at: self.now,
        });
        self.clients[i].outstanding -= 1;
        if self.cfg.workload.stop_after_failure {
            self.clients[i].stopped = true;
        }
        self.refill(i);
    }

    // --- the event loop --------------------------------------------------

    /// Processes the earliest event. Returns false if there is none.
    fn step(&mut self, limit: Nanos, phase: &str) -> bool {
        let Some(ev) = self.queue.pop() else {
            return false;
        };
        if ev.time > limit {
            self.queue.push(ev);
            self.fail(format_args!(
                "{phase}: virtual time limit of {limit} ns ({:.3} ms) reached\n{}",
                limit as f64 / 1e6,
                self.state_dump()
            ));
        }
        debug_assert!(ev.time >= self.now, "time went backwards");
        self.now = ev.time;
        self.events += 1;
        if self.events > self.cfg.max_events {
            self.fail(format_args!(
                "{phase}: event limit of {} reached\n{}",
                self.cfg.max_events,
                self.state_dump()
            ));
        }
        match ev.kind {
            Kind::Deliver { from, to, packet } => {
                if self.is_isolated(from) || self.is_isolated(to) {
                    self.stats.packets_isolated += 1;
                    return true;
                }
                self.stats.packets_delivered += 1;
                self.trace.write_u64(self.now);
                self.trace.write_u64(((from as u64) << 8) | to as u64);
                self.trace.write_bytes(&packet);
                if self
                    .print_window
                    .is_some_and(|(a, b)| (a..=b).contains(&self.now))
                {
                    println!("{:>12} {from}->{to} {}", self.now, describe(&packet));
                }
                let src = self.addrs[from].ip();
                self.endpoints[to].handle_packet(self.now, src, &packet);
                self.after(to);
            }
            Kind::LinkIdle(i) => {
                self.link_busy[i] = false;
                self.after(i);
            }
            Kind::Timer { ep, generation } => {
                if self.timer[ep].map(|(_, g)| g) != Some(generation) {
                    return true; // stale
                }
                if self
                    .print_window
                    .is_some_and(|(a, b)| (a..=b).contains(&self.now))
                {
                    println!("{:>12} timer {ep}", self.now);
                }
                self.timer[ep] = None;
                let spin = &mut self.timer_spin[ep];
                if spin.0 == self.now {
                    spin.1 += 1;
                    if spin.1 > MAX_TIMER_SPIN {
                        self.fail(format_args!(
                            "endpoint {ep}: poll_timeout() keeps returning a time <= now \
                             ({MAX_TIMER_SPIN} timer firings at one instant)"
                        ));
                    }
                } else {
                    *spin = (self.now, 1);
                }
                self.endpoints[ep].handle_timeout(self.now);
                self.after(ep);
            }
        }
        true
    }

    /// Runs events while `cond` holds. Fails if the queue runs dry first or
    /// an event lies beyond `limit`.
    fn run_while(&mut self, limit: Nanos, phase: &str, cond: impl Fn(&Network) -> bool) {
        while cond(self) {
            if !self.step(limit, phase) {
                self.fail(format_args!(
                    "{phase}: nothing left to simulate (no packet in flight, no timer) but the \
                     phase is not finished\n{}",
                    self.state_dump()
                ));
            }
        }
    }

    /// Runs every event up to and including time `t`, then sets the clock
    /// to `t`.
    pub fn run_until_time(&mut self, t: Nanos) {
        while self.queue.peek().is_some_and(|e| e.time <= t) {
            self.step(t, "run_until_time");
        }
        self.now = self.now.max(t);
    }

    fn workload_done(&self) -> bool {
        let total = self.cfg.workload.rpcs_per_client;
        self.streams_done()
            && self.cfg.workload.clients.iter().all(|&c| {
                let s = &self.clients[c];
                s.outstanding == 0 && (s.stopped || s.issued >= total)
            })
    }

    /// True if endpoint `i` holds no RPC state.
    pub fn is_quiescent(&self, i: usize) -> bool {
        let ep = &self.endpoints[i];
        if !ep.is_idle() {
            return false;
        }
        let m = ep.metrics();
        m.active_rpcs == 0 && m.rx_bytes_buffered == 0 && m.tx_bytes_buffered == 0
    }

    fn all_quiescent(&self) -> bool {
        (0..self.endpoints.len()).all(|i| self.is_quiescent(i))
    }

    /// The state of every endpoint and client, for failure messages.
    pub fn state_dump(&self) -> String {
        let mut s = String::new();
        for (i, ep) in self.endpoints.iter().enumerate() {
            let m = ep.metrics();
            let c = &self.clients[i];
            let _ = writeln!(
                s,
                "  endpoint {i} ({}): idle {}, active_rpcs {} (client {}), rx_buffered {}, \
                 tx_buffered {}, peers {}, remembered_acks {}, timeouts {}, resends {}, \
                 retransmitted {}, poll_timeout {:?}, link busy {}; app: issued {}, outstanding {}",
                self.addrs[i],
                ep.is_idle(),
                m.active_rpcs,
                m.active_client_rpcs,
                m.rx_bytes_buffered,
                m.tx_bytes_buffered,
                m.peers,
                m.remembered_acks,
                m.timeouts,
                m.resends_requested,
                m.data_bytes_retransmitted,
                ep.poll_timeout(),
                self.link_busy[i],
                c.issued,
                c.outstanding,
            );
        }
        let waiting: Vec<String> = self
            .issued
            .iter()
            .filter(|(_, r)| r.responses == 0 && !r.failed)
            .take(10)
            .map(|((a, id), r)| {
                format!(
                    "{a} id {id} -> endpoint {} ({} B request, issued {} ns, delivered {}x)",
                    r.server, r.request_len, r.issued_at, r.request_deliveries
                )
            })
            .collect();
        if !waiting.is_empty() {
            let _ = writeln!(s, "  unfinished RPCs (first 10): {}", waiting.join("; "));
        }
        s
    }

    /// Runs the workload to the end (bounded by `limit_ns` of virtual time),
    /// then keeps the network running until every endpoint has freed all
    /// RPC state (bounded by `2 × ack_memory_ns + 4 × dead_peer_bound`),
    /// then for `ack_memory_ns` more so that remembered acks expire. Checks
    /// on the way, and panics on, any violation: corrupt bytes, a request
    /// delivered twice, a second outcome for an RPC, state left behind.
    pub fn run_until_done(&mut self, limit_ns: Nanos) -> Report {
        let clients = self.cfg.workload.clients.clone();
        for &c in &clients {
            self.refill(c);
            self.after(c);
        }
        self.start_streams();

        // Phase 1: the workload.
        self.run_while(limit_ns, "workload", |net| !net.workload_done());
        let completed_at = self.now;

        // Phase 2: every endpoint frees its RPCs (acks, NEED_ACKs, dead peers).
        let homa = &self.cfg.homa;
        let drain_limit = self.now + 2 * homa.ack_memory_ns + 4 * dead_peer_bound_ns(homa);
        self.run_while(drain_limit, "drain", |net| !net.all_quiescent());
        let quiescent_at = self.now;

        // Phase 3: remembered acks expire.
        let target = self.now + self.cfg.homa.ack_memory_ns + 2 * self.cfg.homa.tick_ns;
        self.run_until_time(target);
        for i in 0..self.endpoints.len() {
            let m = self.endpoints[i].metrics();
            if !self.is_quiescent(i) || m.remembered_acks != 0 {
                self.fail(format_args!(
                    "endpoint {i} still holds state {} ns after it was quiescent \
                     (remembered_acks {}, ack_memory_ns {})\n{}",
                    self.now - quiescent_at,
                    m.remembered_acks,
                    self.cfg.homa.ack_memory_ns,
                    self.state_dump()
                ));
            }
        }

        // Every issued RPC has exactly one outcome; a successful one had its
        // request delivered exactly once.
        for ((a, id), r) in &self.issued {
            let outcomes = r.responses + r.failed as u32;
            if outcomes != 1 {
                self.fail(format_args!(
                    "RPC {a} id {id} ended with {outcomes} outcomes"
                ));
            }
            if r.responses == 1 && r.request_deliveries != 1 {
                self.fail(format_args!(
                    "RPC {a} id {id} completed but its request was delivered {} times",
                    r.request_deliveries
                ));
            }
            if r.request_deliveries > 1 {
                self.fail(format_args!(
                    "RPC {a} id {id}: request delivered {} times",
                    r.request_deliveries
                ));
            }
        }

        Report {
            seed: self.seed,
            completed_at,
            quiescent_at,
            end_time: self.now,
            rpcs_issued: self.issued.len() as u64,
            responses: self.stats.responses,
            failures: self.failures.clone(),
            request_bytes: self.stats.request_bytes,
            response_bytes: self.stats.response_bytes,
            packets_sent: self.stats.packets_sent,
            packet_bytes_sent: self.stats.packet_bytes_sent,
            packets_lost: self.stats.packets_lost,
            packets_duplicated: self.stats.packets_duplicated,
            packets_reordered: self.stats.packets_reordered,
            packets_isolated: self.stats.packets_isolated,
            packets_delivered: self.stats.packets_delivered,
            events: self.events,
            trace_hash: self.trace.finish(),
            stream_messages: self.streams.delivered,
            metrics: self.endpoints.iter().map(|e| e.metrics()).collect(),
        }
    }
}
