//! Homa through this project's runtime (`homa::Endpoint`).
//!
//! Requests carry the wanted response size in their first 4 bytes (see
//! [`crate::proto::wanted_response_size`]), then a tag and pattern bytes
//! the server checks; responses are pattern bytes chosen by the request's
//! tag and length, which the client checks (see [`crate::proto::make_request`]).
//! Two client styles:
//! - threads (default): K threads share one endpoint and each does a
//!   blocking `call`, exactly like the TCP client's K connections;
//! - pipelined: one thread keeps K requests outstanding with
//!   `send_request` and collects them with `recv_any_response_parts`.

use crate::error::PerfError;
use crate::proto::{
    do_work, expected_response_size, make_request_in, make_response_to, request_head,
    request_ok_parts, request_tag, response_ok_parts, wanted_response_size,
};
use crate::stats::Recorder;
use crate::worker::{run_pipelined, LoopParams, LoopResult, RpcClient, RpcDone, RpcError};
use bytes::Bytes;
use homa::{Endpoint, RpcId};
use rand_chacha::ChaCha8Rng;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Consecutive failed RPCs after which the pipelined client gives up.
const MAX_CONSECUTIVE_ERRORS: u32 = 10;

/// How long a server thread waits for a request before it checks `stop`.
const SERVER_POLL: Duration = Duration::from_millis(50);

/// A loopback address with an automatic port, of `server`'s family.
pub(crate) fn client_bind_addr(server: SocketAddr) -> SocketAddr {
    if server.is_ipv4() {
        (std::net::Ipv4Addr::LOCALHOST, 0).into()
    } else {
        (std::net::Ipv6Addr::LOCALHOST, 0).into()
    }
}

/// Answers requests until `stop` is set or the endpoint is shut down.
/// Responses are capped at `max_response` bytes. A patterned request whose
/// bytes are wrong is counted in `bad_requests` and answered with wrong
/// bytes, so that its client sees the error too.
pub(crate) fn serve(
    endpoint: &Endpoint,
    stop: &AtomicBool,
    max_response: usize,
    work: Duration,
    bad_requests: &AtomicU64,
) {
    while !stop.load(Ordering::Relaxed) {
        // (The request stays in the packets it came in: checking it in
        // place spares a copy of every byte, as TCP's server reads each
        // byte once.)
        match endpoint.recv_request_parts(Some(SERVER_POLL)) {
            Ok((id, message)) => {
                let (head, len) = request_head(message.parts());
                let want = wanted_response_size(&head).min(max_response);
                let ok = request_ok_parts(message.parts());
                if !ok {
                    bad_requests.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!("homa server: request {id:?} of {len} B has wrong bytes");
                }
                let response = make_response_to(request_tag(&head), len, want, !ok);
                do_work(work);
                if let Err(e) = endpoint.reply(id, response) {
                    tracing::warn!("homa server: reply to {id:?} failed: {e}");
                }
            }
            Err(homa::Error::Timeout) => {}
            Err(homa::Error::Closed) => break,
            Err(e) => {
                tracing::warn!("homa server: recv_request failed: {e}");
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

/// Tags of this process's requests: unique, so a response that belongs to
/// another RPC is caught.
static NEXT_TAG: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The calling thread's requests are made here ([`make_request_in`]).
    static ARENA: std::cell::RefCell<bytes::BytesMut> = std::cell::RefCell::new(bytes::BytesMut::new());
}

/// A fresh patterned request (see [`make_request`]) and its tag, made in
/// the thread's arena (every client of every transport makes its
/// requests here).
pub(crate) fn new_request(response_size: usize, len: usize) -> (u64, Bytes) {
    let tag = NEXT_TAG.fetch_add(1, Ordering::Relaxed);
    let request = ARENA.with(|a| make_request_in(&mut a.borrow_mut(), tag, response_size, len));
    (tag, request)
}

/// One of K threads doing blocking `call`s on a shared endpoint.
pub(crate) struct HomaClient {
    endpoint: Endpoint,
    server: SocketAddr,
    timeout: Duration,
    response_size: usize,
}

impl HomaClient {
    /// A caller on `endpoint` (a clone of the shared one).
    pub(crate) fn new(
        endpoint: Endpoint,
        server: SocketAddr,
        timeout: Duration,
        response_size: usize,
    ) -> HomaClient {
        HomaClient {
            endpoint,
            server,
            timeout,
            response_size,
        }
    }
}

/// Sorts a runtime error: an endpoint that is closed cannot be used again.
fn classify(e: homa::Error) -> RpcError {
    match e {
        homa::Error::Closed => RpcError::Fatal(PerfError::homa("Homa RPC", homa::Error::Closed)),
        other => RpcError::Transient(other.to_string()),
    }
}

impl RpcClient for HomaClient {
    fn rpc(&mut self, request_size: usize) -> Result<RpcDone, RpcError> {
        let (tag, request) = new_request(self.response_size, request_size);
        let sent = Instant::now();
        // The response stays in its packets (no copy into one buffer, as
        // TCP's client reads into a buffer it keeps).
        let response = self
            .endpoint
            .call_parts(self.server, request, self.timeout)
            .map_err(classify)?;
        let latency = sent.elapsed();
        Ok(RpcDone {
            len: response.len(),
            latency,
            content_ok: response_ok_parts(tag, request_size, response.parts()),
        })
    }

    fn expected_response(&self, request_size: usize) -> usize {
        expected_response_size(request_size, self.response_size)
    }
}

/// The pipelined client: one thread, `concurrency` RPCs outstanding.
pub(crate) struct Pipeline<'a> {
    /// The client endpoint.
    pub endpoint: &'a Endpoint,
    /// Where requests go.
    pub server: SocketAddr,
    /// Response size asked for.
    pub response_size: usize,
    /// RPCs kept outstanding.
    pub concurrency: usize,
    /// Give up on the outstanding RPCs when none completes for this long.
    pub timeout: Duration,
}

impl Pipeline<'_> {
    /// Runs the warm-up, then the measured interval.
    pub(crate) fn run(&self, params: &LoopParams) -> Result<LoopResult, PerfError> {
        run_pipelined(params, |rng, rec, more| self.phase(params, rng, rec, more))
    }

    /// Issues RPCs while `more(issued, now)` holds, keeping `concurrency`
    /// outstanding, and waits for all of them.
    fn phase(
        &self,
        params: &LoopParams,
        rng: &mut ChaCha8Rng,
        rec: &mut Recorder,
        more: &dyn Fn(u64, Instant) -> bool,
    ) -> Result<(), PerfError> {
        let mut outstanding: HashMap<RpcId, (Instant, usize, u64)> = HashMap::new();
        let mut issued = 0u64;
        let mut consecutive = 0u32;
        loop {
            while outstanding.len() < self.concurrency && more(issued, Instant::now()) {
                let size = params.sizes.next(rng);
                issued += 1;
                let (tag, request) = new_request(self.response_size, size);
                let sent = Instant::now();
                match self.endpoint.send_request(self.server, request) {
                    Ok(id) => {
                        outstanding.insert(id, (sent, size, tag));
                    }
                    Err(homa::Error::Closed) => {
                        return Err(PerfError::homa("send_request", homa::Error::Closed))
                    }
                    Err(e) => {
                        tracing::warn!("homa send_request failed: {e}");
                        rec.record_error();
                        consecutive += 1;
                    }
                }
                if consecutive >= MAX_CONSECUTIVE_ERRORS {
                    return Err(PerfError::Usage(format!(
                        "{consecutive} Homa RPCs in a row failed; giving up"
                    )));
                }
            }
            if outstanding.is_empty() {
                return Ok(());
            }
            match self.endpoint.recv_any_response_parts(Some(self.timeout)) {
                Ok((id, result)) => {
                    let Some((sent, size, tag)) = outstanding.remove(&id) else {
                        tracing::warn!("homa: response for an RPC not outstanding: {id:?}");
                        continue;
                    };
                    let latency = sent.elapsed();
                    let want = expected_response_size(size, self.response_size);
                    match result {
                        Ok(response) => {
                            let ok = response.len() == want
                                && response_ok_parts(tag, size, response.parts());
                            if rec.judge(size, response.len(), want, ok, latency) {
                                consecutive = 0;
                            } else {
                                consecutive += 1;
                            }
                        }
                        Err(e) => {
                            tracing::warn!("homa RPC failed: {e}");
                            rec.record_error();
                            consecutive += 1;
                        }
                    }
                }
                Err(homa::Error::Timeout) => {
                    tracing::warn!(
                        "homa: no response within {:?}; aborting {} outstanding RPCs",
                        self.timeout,
                        outstanding.len()
                    );
                    for (id, _) in outstanding.drain() {
                        let _ = self.endpoint.abort(id);
                        rec.record_error();
                    }
                    consecutive += 1;
                }
                Err(e) => return Err(PerfError::homa("recv_any_response", e)),
            }
            if consecutive >= MAX_CONSECUTIVE_ERRORS {
                return Err(PerfError::Usage(format!(
                    "{consecutive} Homa RPCs in a row failed; giving up"
                )));
            }
        }
    }
}

/// Binds a Homa endpoint, naming the address in the error.
pub(crate) fn bind(addr: SocketAddr, config: homa::Config) -> Result<Endpoint, PerfError> {
    Endpoint::bind(addr, config)
        .map_err(|e| PerfError::homa(format!("bind Homa endpoint on {addr}"), e))
}
