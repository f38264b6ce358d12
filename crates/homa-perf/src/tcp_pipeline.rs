//! TCP, pipelined: one thread keeps K connections busy, one RPC
//! outstanding on each, with nonblocking sockets and `epoll` (through
//! `mio`), the way an event-driven TCP client (or a server's outbound
//! connection pool) works. It is the counterpart of Homa's pipelined
//! client ([`crate::homa_rpc::Pipeline`]): the same number of RPCs in
//! flight, driven by one thread, so that "one thread keeps K RPCs
//! outstanding" compares the transports and not their threading.
//!
//! The messages are those of [`crate::tcp`]: `u32 length, u32 wanted
//! response size` and the patterned request; the response is `u32 length`
//! and pattern bytes, checked as the threaded client checks them.

use crate::error::PerfError;
use crate::homa_rpc::new_request;
use crate::proto::{response_ok, MAX_TCP_MESSAGE};
use crate::stats::Recorder;
use crate::worker::{run_pipelined, LoopParams, LoopResult};
use bytes::Bytes;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use rand_chacha::ChaCha8Rng;
use std::io::{self, IoSlice, Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Where one connection's RPC stands.
enum Step {
    /// No RPC outstanding.
    Idle,
    /// Sending: `header` then `request`; `done` bytes of both sent so far.
    Sending {
        header: [u8; 8],
        request: Bytes,
        done: usize,
    },
    /// The request is sent; `got` bytes of the 4-byte length have come.
    Length { len: [u8; 4], got: usize },
    /// Receiving the response's `len` bytes into the buffer; `got` so far.
    Body { len: usize, got: usize },
}

/// One connection and its RPC.
struct Conn {
    stream: TcpStream,
    step: Step,
    /// The outstanding RPC: when its request was handed to the socket,
    /// its size and its tag.
    sent: Instant,
    size: usize,
    tag: u64,
    /// The response being received.
    response: Vec<u8>,
}

/// What [`Conn::progress`] reached.
enum Progress {
    /// The socket has no more room or data for now.
    Blocked,
    /// The response is complete: its length.
    Done(usize),
}

impl Conn {
    /// Sends and receives as far as the socket allows without blocking.
    fn progress(&mut self) -> io::Result<Progress> {
        loop {
            match &mut self.step {
                Step::Idle => return Ok(Progress::Blocked),
                Step::Sending {
                    header,
                    request,
                    done,
                } => {
                    let total = header.len() + request.len();
                    if *done == total {
                        self.step = Step::Length {
                            len: [0; 4],
                            got: 0,
                        };
                        continue;
                    }
                    let h = (*done).min(header.len());
                    let r = done.saturating_sub(header.len());
                    let slices = [IoSlice::new(&header[h..]), IoSlice::new(&request[r..])];
                    match self.stream.write_vectored(&slices) {
                        Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                        Ok(n) => *done += n,
                        Err(e) => return blocked_or(e),
                    }
                }
                Step::Length { len, got } => {
                    if *got == len.len() {
                        let n = u32::from_le_bytes(*len) as usize;
                        if n > MAX_TCP_MESSAGE {
                            return Err(io::Error::new(
                                io::ErrorKind::InvalidData,
                                format!("the server sent a {n} B response"),
                            ));
                        }
                        if self.response.len() < n {
                            self.response.resize(n, 0);
                        }
                        self.step = Step::Body { len: n, got: 0 };
                        continue;
                    }
                    match self.stream.read(&mut len[*got..]) {
                        Ok(0) => return Err(closed()),
                        Ok(n) => *got += n,
                        Err(e) => return blocked_or(e),
                    }
                }
                Step::Body { len, got } => {
                    if *got == *len {
                        let n = *len;
                        self.step = Step::Idle;
                        return Ok(Progress::Done(n));
                    }
                    match self.stream.read(&mut self.response[*got..*len]) {
                        Ok(0) => return Err(closed()),
                        Ok(n) => *got += n,
                        Err(e) => return blocked_or(e),
                    }
                }
            }
        }
    }
}

/// `Blocked` for `EAGAIN` and `EINTR`, the error otherwise.
fn blocked_or(e: io::Error) -> io::Result<Progress> {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(Progress::Blocked),
        _ => Err(e),
    }
}

fn closed() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "connection closed by the peer",
    )
}

/// The pipelined TCP client: one thread, `concurrency` connections.
pub(crate) struct TcpPipeline {
    poll: Poll,
    conns: Vec<Conn>,
    busy_poll: bool,
    response_size: usize,
    timeout: Duration,
}

impl TcpPipeline {
    /// Opens `concurrency` connections to `server` (TCP_NODELAY,
    /// nonblocking) and registers them for readiness.
    pub(crate) fn connect(
        server: SocketAddr,
        concurrency: usize,
        busy_poll: bool,
        timeout: Duration,
        response_size: usize,
    ) -> Result<TcpPipeline, PerfError> {
        let poll = Poll::new().map_err(|e| PerfError::io("create an epoll instance", e))?;
        let mut conns = Vec::with_capacity(concurrency);
        for i in 0..concurrency {
            let std = std::net::TcpStream::connect_timeout(&server, timeout)
                .map_err(|e| PerfError::io(format!("connect to TCP server {server}"), e))?;
            std.set_nodelay(true)
                .and_then(|_| std.set_nonblocking(true))
                .map_err(|e| PerfError::io("configure TCP socket", e))?;
            let mut stream = TcpStream::from_std(std);
            poll.registry()
                .register(
                    &mut stream,
                    Token(i),
                    Interest::READABLE | Interest::WRITABLE,
                )
                .map_err(|e| PerfError::io("register a TCP socket with epoll", e))?;
            conns.push(Conn {
                stream,
                step: Step::Idle,
                sent: Instant::now(),
                size: 0,
                tag: 0,
                response: vec![0; response_size],
            });
        }
        Ok(TcpPipeline {
            poll,
            conns,
            busy_poll,
            response_size,
            timeout,
        })
    }

    /// Runs the warm-up, then the measured interval.
    pub(crate) fn run(mut self, params: &LoopParams) -> Result<LoopResult, PerfError> {
        run_pipelined(params, |rng, rec, more| self.phase(params, rng, rec, more))
    }

    /// Issues RPCs while `more(issued, now)` holds, one outstanding per
    /// connection, and waits for all of them. Any socket error is fatal:
    /// it leaves that connection's byte stream out of step.
    fn phase(
        &mut self,
        params: &LoopParams,
        rng: &mut ChaCha8Rng,
        rec: &mut Recorder,
        more: &dyn Fn(u64, Instant) -> bool,
    ) -> Result<(), PerfError> {
        let fatal = |e: io::Error| PerfError::io("TCP RPC", e);
        let mut events = Events::with_capacity(self.conns.len().max(1));
        let mut issued = 0u64;
        let mut outstanding = 0usize;
        let mut last_done = Instant::now();
        // Connections with an RPC to start or to push on, in order.
        let mut ready: Vec<usize> = (0..self.conns.len()).collect();
        loop {
            for i in ready.drain(..) {
                let conn = &mut self.conns[i];
                loop {
                    if matches!(conn.step, Step::Idle) {
                        if !more(issued, Instant::now()) {
                            break;
                        }
                        let size = params.sizes.next(rng);
                        let (tag, request) = new_request(self.response_size, size);
                        let mut header = [0u8; 8];
                        header[..4].copy_from_slice(&(size as u32).to_le_bytes());
                        header[4..].copy_from_slice(&(self.response_size as u32).to_le_bytes());
                        issued += 1;
                        outstanding += 1;
                        conn.size = size;
                        conn.tag = tag;
                        conn.sent = Instant::now();
                        conn.step = Step::Sending {
                            header,
                            request,
                            done: 0,
                        };
                    }
                    match conn.progress().map_err(fatal)? {
                        Progress::Blocked => break,
                        Progress::Done(len) => {
                            let latency = conn.sent.elapsed();
                            outstanding -= 1;
                            last_done = Instant::now();
                            let ok = response_ok(conn.tag, conn.size, &conn.response[..len]);
                            rec.judge(conn.size, len, self.response_size, ok, latency);
                        }
                    }
                }
            }
            if outstanding == 0 {
                return Ok(());
            }
            let waited = last_done.elapsed();
            if waited >= self.timeout {
                return Err(PerfError::Usage(format!(
                    "no TCP response within {:?}; {outstanding} RPCs outstanding",
                    self.timeout
                )));
            }
            let wait = if self.busy_poll {
                Duration::ZERO
            } else {
                self.timeout - waited
            };
            match self.poll.poll(&mut events, Some(wait)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(PerfError::io("epoll wait", e)),
            }
            ready.extend(events.iter().map(|e| e.token().0));
        }
    }
}
