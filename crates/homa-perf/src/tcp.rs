//! TCP: length-prefixed RPCs, one outstanding per connection.
//!
//! A request is `u32 length, u32 wanted response size` (little-endian)
//! followed by `length` payload bytes; a response is `u32 length` followed
//! by the payload. The payload is a patterned request as Homa's (see
//! [`crate::proto::make_request`]): the server checks it and answers with
//! the pattern bytes its tag and length call for, which the client checks.
//! Sockets use TCP_NODELAY. In busy-poll mode both sides
//! use nonblocking sockets and spin on `EAGAIN`.

use crate::error::PerfError;
use crate::homa_rpc::new_request;
use crate::proto::{
    do_work, make_response, read_full, request_ok, response_ok, write_two, Interrupt,
    MAX_TCP_MESSAGE, STOP_CHECK_INTERVAL,
};
use crate::worker::{RpcClient, RpcDone, RpcError};
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Accepts connections until `stop` is set; one thread per connection.
pub(crate) fn serve(listener: TcpListener, busy_poll: bool, work: Duration, stop: Arc<AtomicBool>) {
    let conns: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
    if let Err(e) = listener.set_nonblocking(true) {
        tracing::error!("tcp server: cannot make the listener nonblocking: {e}");
        return;
    }
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, peer)) => {
                tracing::debug!("tcp server: connection from {peer}");
                let stop = stop.clone();
                let handle = std::thread::Builder::new()
                    .name(format!("tcp-conn-{peer}"))
                    .spawn(move || {
                        if let Err(e) = serve_connection(stream, busy_poll, work, &stop) {
                            tracing::debug!("tcp server: connection from {peer} ended: {e}");
                        }
                    });
                match handle {
                    Ok(h) => lock(&conns).push(h),
                    Err(e) => tracing::error!("tcp server: cannot start a thread: {e}"),
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => {
                tracing::warn!("tcp server: accept failed: {e}");
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        // Reap finished connection threads so the list stays short.
        lock(&conns).retain(|h| !h.is_finished());
    }
    for h in std::mem::take(&mut *lock(&conns)) {
        let _ = h.join();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Sets a stream up for blocking (with a timeout so `stop` is seen) or
/// spinning operation.
fn configure(stream: &TcpStream, busy_poll: bool, timeout: Duration) -> io::Result<()> {
    stream.set_nodelay(true)?;
    stream.set_nonblocking(busy_poll)?;
    if !busy_poll {
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
    }
    Ok(())
}

/// Answers requests on one connection until the client closes it or the
/// server stops.
fn serve_connection(
    mut stream: TcpStream,
    busy_poll: bool,
    work: Duration,
    stop: &AtomicBool,
) -> io::Result<()> {
    configure(&stream, busy_poll, STOP_CHECK_INTERVAL)?;
    let intr = Interrupt {
        stop: Some(stop),
        deadline: None,
    };
    let mut header = [0u8; 8];
    let mut payload = Vec::new();
    // (`stop` is also checked per request: a client that never pauses
    // would otherwise keep the connection, and the server, running.)
    while !stop.load(Ordering::Relaxed) {
        read_full(&mut stream, &mut header, &intr)?;
        let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
        let want = u32::from_le_bytes([header[4], header[5], header[6], header[7]]) as usize;
        if len > MAX_TCP_MESSAGE || want > MAX_TCP_MESSAGE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "message of {len} B or response of {want} B over the {MAX_TCP_MESSAGE} B limit"
                ),
            ));
        }
        if payload.len() < len {
            payload.resize(len, 0);
        }
        read_full(&mut stream, &mut payload[..len], &intr)?;
        let request = &payload[..len];
        let ok = request_ok(request);
        if !ok {
            tracing::warn!("tcp server: a request of {len} B has wrong bytes");
        }
        // Wrong bytes are answered with wrong bytes, for the client to see.
        let response = make_response(request, want, !ok);
        do_work(work);
        write_two(&mut stream, &(want as u32).to_le_bytes(), &response, &intr)?;
    }
    Ok(())
}

/// One client connection with at most one outstanding RPC.
pub(crate) struct TcpClient {
    stream: TcpStream,
    timeout: Duration,
    response_size: usize,
    response: Vec<u8>,
}

impl TcpClient {
    /// Connects to `server`.
    pub(crate) fn connect(
        server: SocketAddr,
        busy_poll: bool,
        timeout: Duration,
        response_size: usize,
    ) -> Result<TcpClient, PerfError> {
        let stream = TcpStream::connect_timeout(&server, timeout)
            .map_err(|e| PerfError::io(format!("connect to TCP server {server}"), e))?;
        configure(&stream, busy_poll, timeout)
            .map_err(|e| PerfError::io("configure TCP socket", e))?;
        Ok(TcpClient {
            stream,
            timeout,
            response_size,
            response: vec![0; response_size],
        })
    }
}

impl RpcClient for TcpClient {
    fn rpc(&mut self, request_size: usize) -> Result<RpcDone, RpcError> {
        let (tag, request) = new_request(self.response_size, request_size);
        let sent = Instant::now();
        let intr = Interrupt {
            stop: None,
            deadline: Some(Instant::now() + self.timeout),
        };
        let mut header = [0u8; 8];
        header[..4].copy_from_slice(&(request_size as u32).to_le_bytes());
        header[4..].copy_from_slice(&(self.response_size as u32).to_le_bytes());
        // Any failure leaves the byte stream out of step, so every error is
        // fatal for this connection.
        let fatal = |e: io::Error| RpcError::Fatal(PerfError::io("TCP RPC", e));
        write_two(&mut self.stream, &header, &request, &intr).map_err(fatal)?;
        let mut len = [0u8; 4];
        read_full(&mut self.stream, &mut len, &intr).map_err(fatal)?;
        let len = u32::from_le_bytes(len) as usize;
        if len > MAX_TCP_MESSAGE {
            return Err(RpcError::Fatal(PerfError::Usage(format!(
                "TCP server sent a {len} B response"
            ))));
        }
        if self.response.len() < len {
            self.response.resize(len, 0);
        }
        read_full(&mut self.stream, &mut self.response[..len], &intr).map_err(fatal)?;
        let latency = sent.elapsed();
        Ok(RpcDone {
            len,
            latency,
            content_ok: response_ok(tag, request_size, &self.response[..len]),
        })
    }

    fn expected_response(&self, _request_size: usize) -> usize {
        self.response_size
    }
}
