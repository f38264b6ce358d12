//! The blocking API and the machinery that drives the protocol core.
//!
//! Who reads the socket: the thread that is waiting for something. A thread
//! blocked in `recv_response` or `recv_request` takes the *reader* role and
//! sleeps on the socket itself (in the receive call, on UDP), so a message
//! for it needs no hand-off between threads (one wake-up per message, as
//! with a bare UDP socket). Other waiting threads park by what they wait
//! for (`parked.rs`) and the reader wakes only the thread an outcome is for.
//! When no application thread waits, a background thread takes the role,
//! so grants, timers and the pacer keep running; a thread that starts
//! waiting kicks it aside. The reader's deadlines a jiffy or more away (the
//! core's ticks, a caller's timeout) are kept by the socket's receive
//! timeout; nearer ones by sleeping in `ppoll` instead; only the pacer's
//! and the fault shim's need the background thread, which then wakes the
//! reader with a zero-length datagram to its own socket.
//! Packets are taken from the core under the endpoint's lock, at most as
//! fast as the pacer allows, and sent after it is released, in the core's
//! order, by one thread at a time.
//!
//! - [`clients`]: the client RPCs, from sending to collecting;
//! - [`reader`]: the receive path, the reader role, waiting;
//! - [`events`]: where the core's events go (waiting threads and tasks);
//! - [`output`]: the send path;
//! - [`stats`]: the runtime's own counters;
//! - [`streams`]: the hooks of streams, blocking and async (`stream.rs`,
//!   `async_stream.rs`);
//! - [`watch`]: the process's thread that wakes background threads when
//!   no application thread waits on their endpoint any more.

mod clients;
mod events;
mod lanes;
mod output;
mod reader;
mod sendq;
mod stats;
mod streams;
mod watch;

use sendq::SendQueue;
pub use stats::RuntimeStats;
use stats::Stats;

use crate::config::Config;
use crate::fault::{Faults, Verdict};
use crate::oneshot;
use crate::parked::{unpark, Handoff, Parked, WaitFor};
use crate::ready::Readiness;
use crate::socket::{GroupSpec, HomaSocket, RecvBufs};
use crate::wake::{sleep, Kick};
use crate::Error;
use bytes::Bytes;
use homa_core::{Event, Message, Metrics, Nanos, Pacer, PacketMeta, RpcId, Transmit};
use lanes::{Lane, LaneState};
use parking_lot::{Condvar, MutexGuard};
use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Longest a reader sleeps before looking at the world again.
const MAX_SLEEP: Duration = Duration::from_millis(10);
/// How long the reader role must have been free before the background
/// thread takes it (an application thread usually comes back sooner).
const BACKGROUND_GRACE: Duration = Duration::from_micros(200);
/// Longest the background thread sleeps while application threads wait
/// (a safety net: `watch.rs` wakes it when none waits any more).
const BACKGROUND_IDLE: Duration = Duration::from_secs(1);
/// Pacer waits shorter than this are spun rather than slept (sleeps are
/// rounded up to the timer slack, ~50 µs).
const SPIN_BELOW: Duration = Duration::from_micros(30);

/// An application reader on UDP sleeps in the receive call itself (one
/// system call per wake-up instead of `ppoll` and a receive) when its next
/// deadline is at least this far away; the background thread kicks it then.
/// Nearer deadlines (the pacer's, a caller's short timeout) are kept by
/// `ppoll`, which costs no thread hand-off.
const BLOCK_IN_RECV_FROM: Duration = Duration::from_micros(200);
/// Receive batches taken in one go before other work gets a turn.
const RECV_ROUNDS: usize = 8;
/// Most time [`Endpoint::shutdown`] spends sending the ACKs the endpoint
/// owes before the socket closes.
const CLOSE_FLUSH_TIME: Duration = Duration::from_millis(100);

/// Packets on their way to the kernel; usually one or none, kept inline
/// (room for one only: a `Transmit` holds its header inline, and a second
/// inline slot made every move of an `Output` a long copy).
type Output = smallvec::SmallVec<[Transmit; 1]>;

thread_local! {
    /// Where this thread's awaited response is left for it (a thread waits
    /// for one RPC at a time; see [`Handoff`]).
    static HANDOFF: Arc<Handoff<Outcome>> = Arc::default();
}

/// A request delivered to a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The RPC, for [`Endpoint::reply`]; `id.peer` is the client.
    pub id: RpcId,
    /// The request message.
    pub message: Bytes,
}

/// A request as the endpoint keeps it until a caller takes it: its packets
/// are joined into one buffer ([`Queued::into_request`]) by the thread that
/// takes it, outside the endpoint's lock, not by the reader under it (for a
/// 500 KB message that copy held up every other thread).
pub(crate) struct Queued {
    id: RpcId,
    message: Message,
}

impl Queued {
    /// The request as the API hands it out.
    pub(crate) fn into_request(self) -> Request {
        Request {
            id: self.id,
            message: self.message.into_bytes(),
        }
    }
}

impl From<Request> for Queued {
    fn from(r: Request) -> Queued {
        Queued {
            id: r.id,
            message: Message::from_parts(vec![r.message]),
        }
    }
}

/// How a client RPC ended, its response still in packets (joined by the
/// thread that collects it, outside the lock, like [`Queued`]).
pub(crate) type Outcome = Result<Message, Error>;

/// A received packet the fault shim holds back: source, bytes, CE mark.
type HeldPacket = (SocketAddr, Vec<u8>, bool);

/// How the reader waits for input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReadMode {
    /// An application thread: sleeps in the receive call.
    App,
    /// An application thread in busy-poll mode: never sleeps.
    Busy,
    /// The background thread: sleeps in `ppoll`, can be kicked.
    Background,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reader {
    Nobody,
    App,
    Background,
}

struct State {
    core: homa_core::Endpoint,
    pacer: Option<Pacer>,
    held: Option<Transmit>,
    /// Client RPCs, from sending until their outcomes are collected, and
    /// who waits for them (`clients.rs`).
    clients: clients::Clients,
    requests: VecDeque<Queued>,
    async_requests: VecDeque<oneshot::Sender<Queued>>,
    reader: Reader,
    /// When the last reader gave up the role (ns since the endpoint's
    /// epoch, as [`Inner::recent_now`] saw it: no clock read for it).
    reader_free_at: Nanos,
    /// An application reader sleeps in the receive call (UDP): another
    /// thread that needs it awake sends it a kick datagram
    /// ([`HomaSocket::kick_self`]). The reader clears it on waking.
    recv_blocked: bool,
    /// While an application reader sleeps in the receive call with a
    /// deadline the socket's receive timeout cannot keep (the pacer's, the
    /// fault shim's, or no jiffy known): when it must be woken (endpoint
    /// time, ns). The background thread kicks it then; the reader clears it
    /// on waking. Coarser deadlines (the core's ticks, a caller's timeout)
    /// are kept by the receive timeout itself (`socket/timeout.rs`).
    recv_blocked_until: Option<Nanos>,
    /// When the background thread wakes by itself next (endpoint time,
    /// ns), while it sleeps with a deadline: a reader that needs an earlier
    /// kick wakes it to say so.
    bg_wakes_at: Option<Nanos>,
    /// Bumped whenever what a waiter checks may have changed, so spinning
    /// waiters re-check only then.
    generation: u64,
    /// Application threads asleep until there is something for them.
    parked: Parked,
    faults: Option<Faults<Transmit, HeldPacket>>,
    /// Streams' messages and outcomes until their handles take them
    /// (`stream.rs`).
    streams: crate::stream::Streams,
    /// Which lanes calls hold (`lanes.rs`).
    lanes: LaneState,
}

pub(crate) struct Inner {
    sock: HomaSocket,
    /// How `sock` was opened: the lanes' sockets are opened alike.
    group: GroupSpec,
    /// The sockets of lanes 1.. beside `sock` (`Config::lanes`), opened by
    /// the first call that takes a lane (none if that failed).
    lanes: std::sync::OnceLock<Vec<Lane>>,
    /// Which lanes calls hold (`LaneState::taken`, shared).
    lane_taken: Arc<AtomicU64>,
    kick: Kick,
    local: SocketAddr,
    config: Config,
    epoch: Instant,
    /// `epoch` as [`monotonic_ns`] reads it.
    epoch_ns: u64,
    /// The latest [`Inner::now`] (ns since `epoch`).
    last_now: AtomicU64,
    state: parking_lot::Mutex<State>,
    /// Application threads inside `wait_until`.
    waiters: AtomicUsize,
    /// Whether the host's CPUs are all busy (adaptive polling; one view
    /// per process).
    cpu: &'static crate::contention::CpuContention,
    /// The background thread sleeps here, apart from application threads.
    bg_cond: Condvar,
    closed: AtomicBool,
    recv_bufs: Mutex<RecvBufs>,
    /// Packets taken from the core, in the core's order, until one thread
    /// at a time sends them ([`Inner::queue_out`]).
    send_queue: Mutex<SendQueue>,
    background: Mutex<Option<JoinHandle<()>>>,
    stats: Stats,
    /// The descriptor of [`Endpoint::ready_fd`] (see `ready.rs`).
    ready: Readiness,
}

/// Shuts the endpoint down when the last user handle goes away (the
/// background thread holds only `Inner`).
struct Owner(Arc<Inner>);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.shutdown();
    }
}

/// A Homa endpoint: one socket, any number of client and server RPCs.
///
/// Cheap to clone; every clone is the same endpoint, usable from any thread.
///
/// ```no_run
/// use bytes::Bytes;
/// use std::time::Duration;
///
/// let server = homa::Endpoint::bind("127.0.0.1:4000".parse()?, homa::Config::default())?;
/// std::thread::spawn(move || loop {
///     let Ok(req) = server.recv_request(None) else { break };
///     server.reply(req.id, req.message).unwrap(); // echo
/// });
/// let client = homa::Endpoint::bind("127.0.0.1:0".parse()?, homa::Config::default())?;
/// let resp = client.call("127.0.0.1:4000".parse()?, Bytes::from_static(b"hi"), Duration::from_secs(1))?;
/// assert_eq!(&resp[..], b"hi");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Endpoint {
    inner: Arc<Inner>,
    _owner: Arc<Owner>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("local", &self.inner.local)
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// Opens an endpoint on `addr`. Port 0 picks a client port. The IP
    /// family of `addr` is the family of every peer.
    pub fn bind(addr: SocketAddr, config: Config) -> Result<Endpoint, Error> {
        config.check()?;
        let group = GroupSpec {
            transport: config.transport,
            buffer_bytes: config.socket_buffer_bytes,
            gso: config.segmentation_offload,
            // GRO holds packets back in the kernel for a moment; with busy
            // polling that costs more than it saves.
            gro: config.receive_offload && !config.busy_poll,
            // SIRD's receiver reacts to ECN marks; Homa does not use them
            // (and its packets stay as they were).
            ecn: config.core.design == homa_core::Design::Sird,
            lanes: config.lanes,
        };
        let (sock, local) = crate::socket::open_group(addr, &group)?;
        let lane_count = if group.has_lanes() { config.lanes } else { 0 };
        let mut config = config;
        // (Also fills in the ByteDance mode's GSO/GRO batch sizes from the
        // offload settings, and refuses the mode without a link rate.)
        config.core = config.effective_core(sock.lower_header_bytes())?;
        let seed = rand::random::<u64>();
        let mut core = homa_core::Endpoint::new(config.core.clone(), local, seed)
            .map_err(|e| Error::Config(e.to_string()))?;
        let lane_taken = Arc::new(AtomicU64::new(0));
        let lane_state = LaneState::new(lane_count, lane_taken.clone());
        // Ids of RPCs not in a lane of their own are in lane 0.
        core.set_id_tag(lane_state.tag(0));
        let pacer = (config.core.link_mbps > 0).then(|| {
            Pacer::new(
                config.core.link_mbps,
                config.max_nic_queue_ns,
                config.pacer_bypass_bytes,
            )
        });
        if let Some(f) = &config.fault_injection {
            f.validate()?;
        }
        let faults = config.fault_injection.as_ref().map(Faults::new);
        let inner = Arc::new(Inner {
            kick: Kick::new()?,
            recv_bufs: Mutex::new(RecvBufs::new(config.recv_batch)),
            group,
            lanes: std::sync::OnceLock::new(),
            lane_taken,
            send_queue: Mutex::new(SendQueue::default()),
            sock,
            local,
            epoch: Instant::now(),
            epoch_ns: monotonic_ns(),
            last_now: AtomicU64::new(0),
            state: parking_lot::Mutex::new(State {
                core,
                pacer,
                held: None,
                clients: clients::Clients::default(),
                requests: VecDeque::new(),
                async_requests: VecDeque::new(),
                reader: Reader::Nobody,
                reader_free_at: 0,
                recv_blocked: false,
                recv_blocked_until: None,
                bg_wakes_at: None,
                generation: 0,
                parked: Parked::default(),
                faults,
                streams: crate::stream::Streams::default(),
                lanes: lane_state,
            }),
            stats: Stats::default(),
            config,
            waiters: AtomicUsize::new(0),
            cpu: crate::contention::CpuContention::shared(),
            bg_cond: Condvar::new(),
            closed: AtomicBool::new(false),
            background: Mutex::new(None),
            ready: Readiness::new(),
        });
        let bg = inner.clone();
        let handle = std::thread::Builder::new()
            .name(format!("homa-{}", local.port()))
            .spawn(move || bg.background())?;
        *inner.background.lock().unwrap_or_else(|p| p.into_inner()) = Some(handle);
        watch::watch(&inner);
        Ok(Endpoint {
            _owner: Arc::new(Owner(inner.clone())),
            inner,
        })
    }

    /// The bound address and port.
    pub fn local_addr(&self) -> SocketAddr {
        self.inner.local
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// Sends `request` to `dest` and waits up to `timeout` for the response.
    /// On timeout the RPC is aborted. With [`Config::lanes`] the thread
    /// waits in a lane of its own while one is free (`RuntimeStats::
    /// lane_calls`), else as [`Endpoint::recv_response`] does.
    pub fn call(
        &self,
        dest: SocketAddr,
        request: Bytes,
        timeout: Duration,
    ) -> Result<Bytes, Error> {
        if self.inner.group.has_lanes() {
            if let Some(r) = self.inner.call_in_lane(dest, &request, timeout) {
                return r.map(Message::into_bytes);
            }
        }
        let id = self.send_request(dest, request)?;
        match self.recv_response(id, Some(timeout)) {
            Err(Error::Timeout) => {
                let _ = self.abort(id);
                Err(Error::Timeout)
            }
            r => r,
        }
    }

    /// Starts an RPC; collect its response with [`Endpoint::recv_response`]
    /// or [`Endpoint::recv_any_response`].
    pub fn send_request(&self, dest: SocketAddr, request: Bytes) -> Result<RpcId, Error> {
        let mut out = Output::new();
        let (id, st, send) = self.inner.start_request(dest, request, &mut out)?;
        drop(st);
        self.inner.send_queued(send, &out);
        Ok(id)
    }

    /// Waits for the response of `id` (at most `timeout`, or for ever).
    pub fn recv_response(&self, id: RpcId, timeout: Option<Duration>) -> Result<Bytes, Error> {
        self.recv_response_parts(id, timeout)
            .map(Message::into_bytes)
    }

    /// Waits for whichever outstanding RPC finishes first; returns its id
    /// and its outcome.
    pub fn recv_any_response(
        &self,
        timeout: Option<Duration>,
    ) -> Result<(RpcId, Result<Bytes, Error>), Error> {
        let clock = Instant::now();
        let deadline = timeout.map(|t| clock + t);
        let (id, outcome) = self.inner.wait_until_with(
            WaitFor::AnyResponse,
            deadline,
            Some(clock),
            None,
            |st| st.clients.take_any(),
        )?;
        Ok((id, outcome.map(Message::into_bytes)))
    }

    /// Like [`Endpoint::recv_request`], but the request stays in the
    /// packets it came in ([`Message::parts`], or [`Message::reader`] as a
    /// `bytes::Buf`): no copy into one buffer, which for large messages is
    /// a copy of every byte (what Linux Homa's buffer pool saves too).
    pub fn recv_request_parts(&self, timeout: Option<Duration>) -> Result<(RpcId, Message), Error> {
        let clock = Instant::now();
        let deadline = timeout.map(|t| clock + t);
        self.inner
            .wait_until_with(WaitFor::Request, deadline, Some(clock), None, |st| {
                st.requests.pop_front().map(Ok)
            })
            .map(|q| (q.id, q.message))
    }

    /// Like [`Endpoint::recv_response`], but the response stays in the
    /// packets it came in (see [`Endpoint::recv_request_parts`]).
    pub fn recv_response_parts(
        &self,
        id: RpcId,
        timeout: Option<Duration>,
    ) -> Result<Message, Error> {
        let clock = Instant::now();
        let deadline = timeout.map(|t| clock + t);
        self.inner.wait_response(id, deadline, clock)
    }

    /// Waits for the next request (at most `timeout`, or for ever).
    pub fn recv_request(&self, timeout: Option<Duration>) -> Result<Request, Error> {
        self.recv_request_parts(timeout)
            .map(|(id, message)| Queued { id, message }.into_request())
    }

    /// Sends the response to a request.
    pub fn reply(&self, id: RpcId, response: Bytes) -> Result<(), Error> {
        self.inner.check_open()?;
        let inner = &self.inner;
        let mut st = inner.lock();
        // Again under the lock: a shutdown in between ended the RPC, and the
        // caller should hear `Closed`, not that the RPC is unknown.
        inner.check_open()?;
        let now = inner.now();
        st.core.reply(now, id, response)?;
        let mut out = Output::new();
        inner.take_output(&mut st, now, &mut out);
        inner.wake_reader_for_pacer(&st);
        let send = inner.queue_out(&mut out);
        drop(st);
        inner.send_queued(send, &out);
        Ok(())
    }

    /// Gives back a request taken with [`Endpoint::recv_request`] (or
    /// [`crate::AsyncEndpoint::recv_request`]) that will not be handled
    /// after all: the next receiver, blocking or async, gets it before any
    /// request that came later. For a caller that was cancelled just as the
    /// request arrived (the async API and the Python bindings use it). The
    /// RPC itself is untouched: it still awaits its reply.
    pub fn requeue_request(&self, request: Request) {
        self.inner.requeue_request(request.into());
    }

    /// A snapshot of an RPC's protocol state (see
    /// [`homa_core::Endpoint::rpc_snapshot`]; it displays as one line), for
    /// diagnostics.
    pub fn rpc_snapshot(&self, id: RpcId) -> Option<homa_core::RpcSnapshot> {
        self.inner.lock().core.rpc_snapshot(id)
    }

    /// Abandons an RPC: a client RPC is forgotten (its response, if it comes,
    /// is dropped); a server RPC is dropped without a reply.
    pub fn abort(&self, id: RpcId) -> Result<(), Error> {
        let (r, was_done) = self.inner.abort_rpc(id);
        match r {
            Ok(()) => Ok(()),
            Err(_) if was_done => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// The protocol's counters and gauges.
    pub fn metrics(&self) -> Metrics {
        self.inner.lock().core.metrics()
    }

    /// What the ByteDance mode knows of `peer` (its RTTs, link rate,
    /// windows), if the mode is on and the peer is known; for experiments
    /// that compare the detected bandwidth-delay product with the true one.
    pub fn bytedance_peer(&self, peer: SocketAddr) -> Option<homa_core::bytedance::PeerState> {
        self.inner.lock().core.bytedance_peer(peer)
    }

    /// What the ByteDance mode knows of every peer the endpoint keeps
    /// state for, in address order (see [`Endpoint::bytedance_peer`]).
    pub fn bytedance_peers(&self) -> Vec<(SocketAddr, homa_core::bytedance::PeerState)> {
        self.inner.lock().core.bytedance_peers()
    }

    /// The runtime's own counters.
    pub fn runtime_stats(&self) -> RuntimeStats {
        self.inner.stats.snapshot()
    }

    /// A descriptor for `epoll`/`poll`/`select`, readable while a message
    /// waits to be collected (a request for [`Endpoint::recv_request`], or
    /// the outcome of a client RPC for [`Endpoint::recv_response`] /
    /// [`Endpoint::recv_any_response`]) and once the endpoint is shut down.
    /// Level-triggered; it may be readable for a moment after another
    /// thread has started to take the last message, so collect with a zero
    /// timeout and expect [`Error::Timeout`] now and then.
    ///
    /// Created on the first call (until then it costs nothing). The
    /// endpoint owns it: it stays open until the last clone is dropped;
    /// only poll it, never read, write or close it.
    pub fn ready_fd(&self) -> Result<BorrowedFd<'_>, Error> {
        let st = self.inner.lock();
        Ok(self.inner.ready.fd(self.inner.has_ready(&st))?)
    }

    /// Closes the endpoint: waiting calls return [`Error::Closed`], the
    /// background thread stops, and RPCs in progress are abandoned. Before
    /// the socket closes, the ACKs this endpoint owes its servers go out
    /// (finished RPCs, and abandoned ones, which servers may then free; see
    /// [`homa_core::Endpoint::close`]), for at most 100 ms: otherwise a Linux
    /// server would ask for them with a NEED_ACK every millisecond for as
    /// long as it runs. Packets already due (one the pacer held back, the
    /// rest of a reply's unscheduled bytes) go out first. Streams end at
    /// once: what the peer has not acknowledged yet, an end after
    /// [`Stream::finish`](crate::Stream::finish) included, may be lost;
    /// wait for [`Stream::wait_closed`](crate::Stream::wait_closed) first.
    /// The same happens when the last handle is dropped.
    pub fn shutdown(&self) {
        self.inner.shutdown();
    }

    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn inner(&self) -> &Arc<Inner> {
        &self.inner
    }
}

impl Inner {
    /// The time (ns since the endpoint's epoch): one clock read, which
    /// [`Inner::recent_now`] then reuses.
    fn now(&self) -> Nanos {
        let now = monotonic_ns().saturating_sub(self.epoch_ns);
        self.last_now.store(now, Ordering::Relaxed);
        now
    }

    /// The time of the latest [`Inner::now`] of any thread, without reading
    /// the clock (a read costs ~50 ns in a VM, and a round trip made about
    /// six per side): for bookkeeping that a few microseconds do not
    /// change, such as when the reader role became free.
    fn recent_now(&self) -> Nanos {
        self.last_now.load(Ordering::Relaxed)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock()
    }

    /// Starts an RPC: returns its id, the lock (still held) and what
    /// [`Inner::queue_out`] said of `out`, the output taken (whether the
    /// caller is to send it once it releases the lock, with
    /// [`Inner::send_queued`]).
    /// Refuses a peer of the other IP family.
    fn check_family(&self, dest: SocketAddr) -> Result<(), Error> {
        if dest.is_ipv4() != self.local.is_ipv4() {
            return Err(Error::BadAddress(format!(
                "{dest}: this endpoint ({}) speaks the other IP version",
                self.local
            )));
        }
        Ok(())
    }

    /// Ends an RPC for [`Endpoint::abort`]: the core's answer, and whether
    /// its outcome had come already.
    fn abort_rpc(&self, id: RpcId) -> (Result<(), homa_core::Error>, bool) {
        let mut st = self.lock();
        st.generation += 1;
        let was_done = st.clients.remove(id);
        self.sync_ready(&st);
        st.parked.rpc_gone(id);
        st.lanes.note_finished(id);
        let kicks = st.lanes.take_kicks();
        let woken = st.parked.take_woken();
        let r = st.core.abort(self.now(), id);
        drop(st);
        unpark(woken);
        self.kick_lanes(kicks);
        (r, was_done)
    }

    fn start_request(
        &self,
        dest: SocketAddr,
        request: Bytes,
        out: &mut Output,
    ) -> Result<(RpcId, MutexGuard<'_, State>, Option<sendq::KeyMask>), Error> {
        self.check_open()?;
        self.check_family(dest)?;
        let mut st = self.lock();
        // Again under the lock: a shutdown that came in between has ended
        // the core's RPCs (it sets `closed` before it takes the lock).
        self.check_open()?;
        let now = self.now();
        let id = st.core.send_request(now, dest, request)?;
        st.clients.start(id);
        self.take_output(&mut st, now, out);
        self.wake_reader_for_pacer(&st);
        let send = self.queue_out(out);
        Ok((id, st, send))
    }

    /// Waits for the outcome of `id`; it comes through this thread's
    /// [`Handoff`] when it arrives while the thread waits. `clock`: the
    /// caller's reading of the clock, just taken (see
    /// [`Inner::wait_until_with`]).
    fn wait_response(
        &self,
        id: RpcId,
        deadline: Option<Instant>,
        clock: Instant,
    ) -> Result<Message, Error> {
        HANDOFF.with(|h| {
            // Each check also claims the RPC and enters the handoff (a
            // second thread waiting for the same RPC goes without).
            let check = |st: &mut State| st.clients.collect(id, h);
            let unclaim = |st: &mut State| st.clients.unclaim(id, h);
            self.wait_until_with(
                WaitFor::Response(id),
                deadline,
                Some(clock),
                Some((h, &unclaim)),
                check,
            )
        })
    }

    /// Whether the readiness descriptor should be readable: a message waits
    /// or the endpoint is closed.
    fn has_ready(&self, st: &State) -> bool {
        self.closed.load(Ordering::Acquire) || !st.requests.is_empty() || st.clients.has_done()
    }

    /// Brings the readiness descriptor up to date after `st` changed (a
    /// no-op until [`Endpoint::ready_fd`] created it).
    fn sync_ready(&self, st: &State) {
        self.ready.set(self.has_ready(st));
    }

    pub(crate) fn check_open(&self) -> Result<(), Error> {
        if self.closed.load(Ordering::Acquire) {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }

    fn shutdown(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        self.kick.kick();
        if self.sock.can_block() {
            self.kick_self();
        }
        let woken = {
            let mut st = self.lock();
            st.clients.drop_tasks();
            st.async_requests.clear();
            self.sync_ready(&st);
            st.parked.wake_all();
            (st.parked.take_woken(), st.lanes.all_taken())
        };
        let (woken, lanes) = woken;
        unpark(woken);
        self.kick_lanes(lanes);
        self.bg_cond.notify_all();
        let handle = self
            .background
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(h) = handle {
            if h.thread().id() != std::thread::current().id() {
                let _ = h.join();
            }
        }
        self.flush_on_close();
    }

    /// Sends what the core had already decided to send (a packet the pacer
    /// held back, whatever is ready now: the end of a stream the
    /// application finished, the rest of a reply's unscheduled bytes), then
    /// ends the core's RPCs and sends the ACK packets that produces; not
    /// through the pacer or the fault shim, within [`CLOSE_FLUSH_TIME`].
    /// (Closing right after `finish` lost the stream's end: the peer's
    /// reader waited for it forever, an idle stream having no keepalive.)
    fn flush_on_close(&self) {
        let start = Instant::now();
        let mut out = Vec::new();
        {
            let mut st = self.lock();
            let now = self.now();
            out.extend(st.held.take());
            while let Some(t) = st.core.poll_transmit(now) {
                out.push(t);
            }
            st.core.close(now);
            while let Some(t) = st.core.poll_transmit(now) {
                out.push(t);
            }
        }
        let mut sent = 0;
        for chunk in out.chunks(64) {
            if start.elapsed() >= CLOSE_FLUSH_TIME {
                break;
            }
            let dropped = self.sock.send(chunk);
            sent += chunk.len() - dropped;
            let s = &self.stats;
            s.packets_sent
                .fetch_add((chunk.len() - dropped) as u64, Ordering::Relaxed);
            s.send_drops.fetch_add(dropped as u64, Ordering::Relaxed);
            s.send_calls.fetch_add(1, Ordering::Relaxed);
        }
        if sent < out.len() {
            tracing::debug!(sent, owed = out.len(), "not every packet went out on close");
        }
    }

    /// Called by a thread that is not the reader after it left output to
    /// the pacer: the reader may be asleep with a deadline computed before
    /// that packet was held (up to [`MAX_SLEEP`]), and only it sends held
    /// packets. Kicked, it recomputes its deadline. (A blocking caller is
    /// about to become the reader itself; async callers and other threads
    /// are not, and without this a 100 KB async call took 4.7 ms instead of
    /// 0.7 ms.)
    fn wake_reader_for_pacer(&self, st: &State) {
        if st.held.is_none() {
            return;
        }
        self.stats.pacer_kicks.fetch_add(1, Ordering::Relaxed);
        self.kick_reader(st);
    }

    /// Makes the reader look at the state again: the background thread if
    /// nobody reads, else wherever the reader sleeps.
    fn kick_reader(&self, st: &State) {
        match st.reader {
            Reader::Nobody => {
                self.bg_cond.notify_one();
            }
            Reader::App if st.recv_blocked => self.kick_self(),
            Reader::App | Reader::Background => self.kick.kick(),
        }
    }

    /// Wakes a reader asleep in the receive call.
    fn kick_self(&self) {
        self.stats.self_kicks.fetch_add(1, Ordering::Relaxed);
        self.sock.kick_self(self.local);
    }
}

/// The monotonic clock (`CLOCK_MONOTONIC`, the clock of [`Instant`]), in
/// ns: read directly, it costs a fifth of the instructions of
/// `Instant::elapsed` (which subtracts two `timespec`s with overflow
/// checks, then multiplies in 128 bits), and [`Inner::now`] reads it a few
/// times per RPC.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the call only writes it.
    // (It cannot fail for this clock; `ts` would stay 0 if it did.)
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// What a held-back received packet goes to the core with when its time
/// comes: its own CE mark, and not backlogged (the backlog it met is gone).
fn late(ce: bool) -> PacketMeta {
    PacketMeta {
        ce,
        backlogged: false,
    }
}
