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
//! - [`api`]: the blocking API of [`Endpoint`];
//! - [`clients`]: the client RPCs, from sending to collecting;
//! - [`reader`]: the receive path, the reader role, waiting;
//! - [`events`]: where the core's events go (waiting threads and tasks);
//! - [`output`]: the send path;
//! - [`stats`]: the runtime's own counters;
//! - [`streams`]: the hooks of streams, blocking and async (`stream.rs`,
//!   `async_stream.rs`);
//! - [`watch`]: the process's thread that wakes background threads when
//!   no application thread waits on their endpoint any more.

mod api;
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
    /// (This lock and `send_queue`'s are `parking_lot`'s: they are taken
    /// on every receive call and twice per send, and the standard one's
    /// poisoning, which they ignored anyway, cost some 14 instructions
    /// each time.)
    recv_bufs: parking_lot::Mutex<RecvBufs>,
    /// Packets taken from the core, in the core's order, until one thread
    /// at a time sends them ([`Inner::queue_out`]).
    send_queue: parking_lot::Mutex<SendQueue>,
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

    /// Refuses a request to `dest` that could not be answered: another IP
    /// version, or (a connected endpoint) anyone but its peer.
    fn check_dest(&self, dest: SocketAddr) -> Result<(), Error> {
        if dest.is_ipv4() != self.local.is_ipv4() {
            return Err(Error::BadAddress(format!(
                "{dest}: this endpoint ({}) speaks the other IP version",
                self.local
            )));
        }
        if let Some(peer) = self.config.peer.filter(|&p| p != dest) {
            return Err(Error::BadAddress(format!(
                "{dest}: this endpoint ({}) talks to {peer} only (Config::peer)",
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

    /// Starts an RPC: returns its id, the lock (still held) and what
    /// [`Inner::queue_out`] said of `out`, the output taken (whether the
    /// caller is to send it once it releases the lock, with
    /// [`Inner::send_queued`]).
    fn start_request(
        &self,
        dest: SocketAddr,
        request: Bytes,
        out: &mut Output,
    ) -> Result<(RpcId, MutexGuard<'_, State>, Option<sendq::KeyMask>), Error> {
        self.check_open()?;
        self.check_dest(dest)?;
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
