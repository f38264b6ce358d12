//! Cluster mode over TCP: K connections to each peer, each with a writer
//! thread fed by a channel and a reader thread that matches responses to
//! requests in order. Several RPCs may be in flight on one connection, so a
//! long response delays the short ones behind it, as in real TCP use.
//!
//! Framing is the one of [`crate::tcp`]: a request is `u32 length, u32
//! wanted response size` (little-endian) and the payload; a response is
//! `u32 length` and the payload.

use super::load::{Issuer, Pending, Tally};
use super::plan::Plan;
use super::unloaded::Prober;
use super::{lock, ResponseSize};
use crate::error::PerfError;
use crate::proto::{read_full, read_full_checked, write_two, Interrupt, MAX_TCP_MESSAGE};
use std::collections::VecDeque;
use std::io;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Socket timeout of blocked reads and writes, after which the threads
/// look at the stop flag and the RPC timeout.
const IO_POLL: Duration = Duration::from_millis(20);

/// How often the readiness check retries a refused connection.
const CONNECT_RETRY: Duration = Duration::from_millis(50);

/// Per-attempt limit of a connection attempt.
const CONNECT_ATTEMPT: Duration = Duration::from_millis(200);

/// Payload bytes read per call when skipping a response.
const READ_CHUNK: usize = 64 << 10;

/// Connects to `peer`, retrying until `deadline`; errs naming the peer.
fn connect(
    peer: SocketAddr,
    deadline: Instant,
    patience: Duration,
) -> Result<TcpStream, PerfError> {
    loop {
        match TcpStream::connect_timeout(&peer, CONNECT_ATTEMPT) {
            Ok(s) => {
                s.set_nodelay(true)
                    .and_then(|()| s.set_read_timeout(Some(IO_POLL)))
                    .and_then(|()| s.set_write_timeout(Some(IO_POLL)))
                    .map_err(|e| PerfError::io(format!("configure TCP connection to {peer}"), e))?;
                return Ok(s);
            }
            Err(e) if Instant::now() + CONNECT_RETRY >= deadline => {
                return Err(PerfError::io(
                    format!(
                        "TCP server of peer {peer} did not accept a connection within {:.1} s",
                        patience.as_secs_f64()
                    ),
                    e,
                ))
            }
            Err(e) => {
                tracing::debug!("peer {peer} not ready yet: {e}");
                std::thread::sleep(CONNECT_RETRY);
            }
        }
    }
}

/// The 8-byte request header.
fn header(size: usize, want: u64) -> [u8; 8] {
    // Plan::new keeps sizes under MAX_TCP_MESSAGE, so they fit in u32.
    let mut h = [0u8; 8];
    h[..4].copy_from_slice(&u32::try_from(size).unwrap_or(u32::MAX).to_le_bytes());
    h[4..].copy_from_slice(&u32::try_from(want).unwrap_or(u32::MAX).to_le_bytes());
    h
}

/// A request on its way through one connection.
struct Entry {
    p: Pending,
    /// Already counted as an error; its late response is skipped.
    timed_out: bool,
}

/// What the generator and a connection's reader share.
#[derive(Default)]
struct ConnState {
    /// Requests in the order they were queued, so in response order.
    fifo: VecDeque<Entry>,
    /// The connection failed or stopped; no more requests.
    dead: bool,
}

/// Work for a writer: a request of `size` bytes wanting `want` back.
struct Job {
    size: usize,
    want: u64,
}

/// One pipelined connection.
struct Conn {
    state: Arc<Mutex<ConnState>>,
    tx: Option<Sender<Job>>,
    stream: TcpStream,
    writer: Option<JoinHandle<()>>,
    reader: Option<JoinHandle<Tally>>,
}

/// What every connection shares.
struct Common {
    /// RPCs in flight over all connections (not counting timed-out ones).
    outstanding: AtomicUsize,
    stop: AtomicBool,
    timeout: Duration,
    /// Zeros: requests are slices of it.
    payload: Vec<u8>,
}

/// The loaded client.
pub(super) struct LoadedTcp {
    conns: Vec<Vec<Conn>>,
    /// Per peer, the connection to use next (round-robin).
    next: Vec<usize>,
    response: ResponseSize,
    common: Arc<Common>,
    /// RPCs that could not be queued (connection dead).
    send_failures: Tally,
}

impl LoadedTcp {
    /// Connects to every peer (waiting for them to listen) and starts the
    /// connections' threads.
    pub(super) fn start(plan: &Plan, ready_deadline: Instant) -> Result<LoadedTcp, PerfError> {
        let common = Arc::new(Common {
            outstanding: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            timeout: plan.timeout,
            payload: vec![0u8; plan.max_request()],
        });
        let mut client = LoadedTcp {
            conns: Vec::new(),
            next: vec![0; plan.peers.len()],
            response: plan.response,
            common,
            send_failures: Tally::default(),
        };
        for &peer in &plan.peers {
            let mut conns = Vec::new();
            for _ in 0..plan.tcp_connections {
                let stream = connect(peer, ready_deadline, plan.ready_timeout)?;
                conns.push(client.open(peer, stream)?);
            }
            client.conns.push(conns);
        }
        tracing::info!(
            "connected to all {} TCP peers ({} connections each)",
            plan.peers.len(),
            plan.tcp_connections
        );
        Ok(client)
    }

    /// Starts a connection's writer and reader.
    fn open(&self, peer: SocketAddr, stream: TcpStream) -> Result<Conn, PerfError> {
        let clone = || {
            stream
                .try_clone()
                .map_err(|e| PerfError::io("clone a TCP socket", e))
        };
        let state = Arc::new(Mutex::new(ConnState::default()));
        let (tx, rx) = mpsc::channel();
        let writer = {
            let (s, common) = (clone()?, self.common.clone());
            std::thread::Builder::new()
                .name(format!("cluster-tcp-w-{peer}"))
                .spawn(move || write_requests(s, &rx, &common, peer))
                .map_err(|e| PerfError::io("start a TCP writer thread", e))?
        };
        let reader = {
            let (s, common, state) = (clone()?, self.common.clone(), state.clone());
            std::thread::Builder::new()
                .name(format!("cluster-tcp-r-{peer}"))
                .spawn(move || read_responses(s, &state, &common, peer))
        };
        let reader = match reader {
            Ok(h) => h,
            Err(e) => {
                // Let the writer see its channel close.
                drop(tx);
                let _ = stream.shutdown(Shutdown::Both);
                let _ = writer.join();
                return Err(PerfError::io("start a TCP reader thread", e));
            }
        };
        Ok(Conn {
            state,
            tx: Some(tx),
            stream,
            writer: Some(writer),
            reader: Some(reader),
        })
    }

    /// Drains, then stops every connection; returns the outcomes.
    pub(super) fn finish(mut self, drain: Duration) -> Result<Tally, PerfError> {
        super::load::drain_wait(|| self.outstanding(), drain);
        let mut tally = std::mem::take(&mut self.send_failures);
        let mut panicked = None;
        for t in self.stop_all() {
            match t {
                Ok(t) => tally.merge(t),
                Err(p) => panicked = Some(p),
            }
        }
        match panicked {
            Some(p) => Err(PerfError::from_panic(p)),
            None => Ok(tally),
        }
    }

    /// Stops and joins every connection's threads.
    fn stop_all(&mut self) -> Vec<std::thread::Result<Tally>> {
        self.common.stop.store(true, Ordering::SeqCst);
        let mut results = Vec::new();
        for conn in self.conns.iter_mut().flatten() {
            // Closing the channel ends the writer; the shutdown ends a
            // reader (or writer) blocked in the kernel at once.
            conn.tx = None;
            let _ = conn.stream.shutdown(Shutdown::Both);
            if let Some(w) = conn.writer.take() {
                if let Err(p) = w.join() {
                    results.push(Err(p));
                }
            }
            if let Some(r) = conn.reader.take() {
                results.push(r.join());
            }
        }
        results
    }
}

impl Drop for LoadedTcp {
    fn drop(&mut self) {
        // Nothing left after finish(); on an early return this stops the
        // threads.
        let _ = self.stop_all();
    }
}

impl Issuer for LoadedTcp {
    fn outstanding(&self) -> usize {
        self.common.outstanding.load(Ordering::SeqCst)
    }

    fn issue(&mut self, peer: usize, size: u64, in_window: bool) -> Result<(), PerfError> {
        let k = self.next[peer];
        self.next[peer] = (k + 1) % self.conns[peer].len();
        let conn = &self.conns[peer][k];
        let want = self.response.expected(size);
        let job = Job {
            size: usize::try_from(size).unwrap_or(usize::MAX),
            want,
        };
        // Queued under the lock, so the reader sees the entry before the
        // response can arrive and cannot drain it in between.
        let mut st = lock(&conn.state);
        let start = Instant::now();
        let p = Pending {
            size,
            want,
            start,
            in_window,
        };
        if st.dead {
            self.send_failures.fail(&p);
            return Ok(());
        }
        st.fifo.push_back(Entry {
            p,
            timed_out: false,
        });
        match conn.tx.as_ref().map(|tx| tx.send(job)) {
            Some(Ok(())) => {
                self.common.outstanding.fetch_add(1, Ordering::SeqCst);
            }
            _ => {
                // The writer is gone (its connection failed).
                st.fifo.pop_back();
                st.dead = true;
                self.send_failures.fail(&p);
            }
        }
        Ok(())
    }
}

/// A writer thread: sends queued requests until the channel closes.
fn write_requests(mut s: TcpStream, rx: &Receiver<Job>, common: &Common, peer: SocketAddr) {
    let intr = Interrupt {
        stop: Some(&common.stop),
        deadline: None,
    };
    while let Ok(job) = rx.recv() {
        let payload = &common.payload[..job.size.min(common.payload.len())];
        let h = header(payload.len(), job.want);
        if let Err(e) = write_two(&mut s, &h, payload, &intr) {
            if !common.stop.load(Ordering::SeqCst) {
                tracing::warn!("TCP connection to {peer}: write failed: {e}");
            }
            // The reader then fails the RPCs in flight.
            let _ = s.shutdown(Shutdown::Both);
            return;
        }
    }
}

/// Marks RPCs older than the timeout as errors (they stay queued so their
/// late responses stay in step); errs when the client stops.
fn expire(state: &Mutex<ConnState>, common: &Common, tally: &mut Tally) -> io::Result<()> {
    if common.stop.load(Ordering::SeqCst) {
        return Err(io::Error::new(
            io::ErrorKind::ConnectionAborted,
            "client stopping",
        ));
    }
    let mut st = lock(state);
    for e in st.fifo.iter_mut() {
        if e.p.start.elapsed() <= common.timeout {
            // Queued in start order: the rest are younger.
            break;
        }
        if !e.timed_out {
            e.timed_out = true;
            common.outstanding.fetch_sub(1, Ordering::SeqCst);
            tally.timed_out(&e.p);
        }
    }
    Ok(())
}

/// A reader thread: takes responses in order until the connection ends.
fn read_responses(
    mut s: TcpStream,
    state: &Mutex<ConnState>,
    common: &Common,
    peer: SocketAddr,
) -> Tally {
    let mut tally = Tally::default();
    let mut scratch = vec![0u8; READ_CHUNK];
    let mut last_expire = Instant::now();
    let why = loop {
        let mut len = [0u8; 4];
        if let Err(e) =
            read_full_checked(&mut s, &mut len, &mut || expire(state, common, &mut tally))
        {
            break e;
        }
        let len = u64::from(u32::from_le_bytes(len));
        if len > MAX_TCP_MESSAGE as u64 {
            break io::Error::new(
                io::ErrorKind::InvalidData,
                format!("response of {len} B over the limit"),
            );
        }
        let mut left = len as usize;
        let mut failed = None;
        while left > 0 {
            let n = left.min(scratch.len());
            if let Err(e) = read_full_checked(&mut s, &mut scratch[..n], &mut || {
                expire(state, common, &mut tally)
            }) {
                failed = Some(e);
                break;
            }
            left -= n;
        }
        if let Some(e) = failed {
            break e;
        }
        let end = Instant::now();
        let entry = lock(state).fifo.pop_front();
        match entry {
            None => break io::Error::new(io::ErrorKind::InvalidData, "response without a request"),
            Some(e) if e.timed_out => {}
            Some(e) => {
                common.outstanding.fetch_sub(1, Ordering::SeqCst);
                tally.finish(&e.p, len, end - e.p.start, common.timeout);
            }
        }
        // A busy connection never waits, so expiry is checked here too.
        if last_expire.elapsed() >= IO_POLL {
            last_expire = Instant::now();
            if let Err(e) = expire(state, common, &mut tally) {
                break e;
            }
        }
    };
    let stopping = common.stop.load(Ordering::SeqCst);
    if !stopping {
        tracing::warn!("TCP connection to {peer} failed: {why}");
    }
    let mut st = lock(state);
    st.dead = true;
    for e in st.fifo.drain(..) {
        if e.timed_out {
            continue;
        }
        common.outstanding.fetch_sub(1, Ordering::SeqCst);
        if stopping {
            tally.unfinished(&e.p);
        } else {
            tally.fail(&e.p);
        }
    }
    drop(st);
    // Stops the writer too, if the failure was on this side.
    let _ = s.shutdown(Shutdown::Both);
    tally
}

/// The unloaded client: one connection per peer, one RPC at a time.
pub(super) struct ProbeTcp {
    peers: Vec<SocketAddr>,
    streams: Vec<Option<TcpStream>>,
    payload: Vec<u8>,
    response: ResponseSize,
    timeout: Duration,
    ready_timeout: Duration,
}

impl ProbeTcp {
    /// Connects to every peer, waiting for them to listen.
    pub(super) fn start(plan: &Plan, ready_deadline: Instant) -> Result<ProbeTcp, PerfError> {
        let mut streams = Vec::new();
        for &peer in &plan.peers {
            streams.push(Some(connect(peer, ready_deadline, plan.ready_timeout)?));
        }
        Ok(ProbeTcp {
            peers: plan.peers.clone(),
            streams,
            payload: vec![0u8; plan.max_request()],
            response: plan.response,
            timeout: plan.timeout,
            ready_timeout: plan.ready_timeout,
        })
    }

    fn exchange(s: &mut TcpStream, h: &[u8], payload: &[u8], deadline: Instant) -> io::Result<u64> {
        let intr = Interrupt {
            stop: None,
            deadline: Some(deadline),
        };
        write_two(s, h, payload, &intr)?;
        let mut len = [0u8; 4];
        read_full(s, &mut len, &intr)?;
        let len = u32::from_le_bytes(len) as usize;
        if len > MAX_TCP_MESSAGE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("response of {len} B over the limit"),
            ));
        }
        let mut scratch = vec![0u8; len.min(READ_CHUNK)];
        let mut left = len;
        while left > 0 {
            let n = left.min(scratch.len());
            read_full(s, &mut scratch[..n], &intr)?;
            left -= n;
        }
        Ok(len as u64)
    }
}

impl Prober for ProbeTcp {
    fn peers(&self) -> usize {
        self.peers.len()
    }

    fn rpc(&mut self, peer: usize, size: u64) -> Result<(u64, Duration), String> {
        let addr = self.peers[peer];
        let stream = match &mut self.streams[peer] {
            Some(s) => s,
            slot => {
                // The last RPC broke the connection (its bytes are out of
                // step); start afresh.
                let deadline = Instant::now() + self.timeout;
                let s = connect(addr, deadline, self.ready_timeout).map_err(|e| e.to_string())?;
                slot.insert(s)
            }
        };
        let want = self.response.expected(size);
        let len = usize::try_from(size).unwrap_or(usize::MAX);
        let payload = &self.payload[..len.min(self.payload.len())];
        let h = header(payload.len(), want);
        let start = Instant::now();
        match ProbeTcp::exchange(stream, &h, payload, start + self.timeout) {
            Ok(len) => Ok((len, start.elapsed())),
            Err(e) => {
                if let Some(s) = self.streams[peer].take() {
                    let _ = s.shutdown(Shutdown::Both);
                }
                Err(format!("TCP RPC to {addr}: {e}"))
            }
        }
    }
}

impl Drop for ProbeTcp {
    fn drop(&mut self) {
        for s in self.streams.iter().flatten() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}
