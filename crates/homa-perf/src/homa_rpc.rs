//! Homa through this project's runtime (`homa::Endpoint`).
//!
//! Requests carry the wanted response size in their first 4 bytes (see
//! [`crate::proto::wanted_response_size`]). Two client styles:
//! - threads (default): K threads share one endpoint and each does a
//!   blocking `call`, exactly like the TCP client's K connections;
//! - pipelined: one thread keeps K requests outstanding with
//!   `send_request` and collects them with `recv_any_response`.

use crate::error::PerfError;
use crate::proto::{expected_response_size, wanted_response_size};
use crate::stats::Recorder;
use crate::worker::{LoopParams, LoopResult, RpcClient, RpcError, StopRule};
use bytes::Bytes;
use homa::{Endpoint, RpcId};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
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

/// A request buffer of `max` bytes whose first 4 bytes ask for
/// `response_size`; requests are zero-copy slices of it.
pub(crate) fn request_payload(max: usize, response_size: usize) -> Bytes {
    let mut v = vec![0u8; max.max(4)];
    v[..4].copy_from_slice(&(response_size as u32).to_le_bytes());
    Bytes::from(v)
}

/// Answers requests until `stop` is set or the endpoint is shut down.
/// Responses are capped at `max_response` bytes.
pub(crate) fn serve(endpoint: &Endpoint, stop: &AtomicBool, max_response: usize) {
    let mut zeros = Bytes::new();
    while !stop.load(Ordering::Relaxed) {
        match endpoint.recv_request(Some(SERVER_POLL)) {
            Ok(request) => {
                let want = wanted_response_size(&request.message).min(max_response);
                if zeros.len() < want {
                    zeros = Bytes::from(vec![0u8; want.next_power_of_two().min(max_response)]);
                }
                if let Err(e) = endpoint.reply(request.id, zeros.slice(..want)) {
                    tracing::warn!("homa server: reply to {:?} failed: {e}", request.id);
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

/// One of K threads doing blocking `call`s on a shared endpoint.
pub(crate) struct HomaClient {
    endpoint: Endpoint,
    server: SocketAddr,
    payload: Bytes,
    timeout: Duration,
    response_size: usize,
}

impl HomaClient {
    /// A caller on `endpoint` (a clone of the shared one).
    pub(crate) fn new(
        endpoint: Endpoint,
        server: SocketAddr,
        payload: Bytes,
        timeout: Duration,
        response_size: usize,
    ) -> HomaClient {
        HomaClient {
            endpoint,
            server,
            payload,
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
    fn rpc(&mut self, request_size: usize) -> Result<usize, RpcError> {
        self.endpoint
            .call(
                self.server,
                self.payload.slice(..request_size),
                self.timeout,
            )
            .map(|response| response.len())
            .map_err(classify)
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
    /// Request buffer (see [`request_payload`]).
    pub payload: Bytes,
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
        let mut rng = ChaCha8Rng::seed_from_u64(params.seed);
        let per_bucket = matches!(params.sizes, crate::workload::SizeSpec::Workload { .. });
        let mut scratch = Recorder::new(false);
        if let Err(e) = self.phase(params, &mut rng, &mut scratch, |issued, _| {
            issued < params.warmup
        }) {
            return Ok(LoopResult {
                recorder: Recorder::new(per_bucket),
                elapsed: Duration::ZERO,
                fatal: Some(e),
            });
        }
        let mut recorder = Recorder::new(per_bucket);
        let t0 = Instant::now();
        let fatal = self
            .phase(
                params,
                &mut rng,
                &mut recorder,
                |issued, now| match params.stop {
                    StopRule::Count(n) => issued < n,
                    StopRule::Duration(d) => now.duration_since(t0) < d,
                },
            )
            .err();
        Ok(LoopResult {
            recorder,
            elapsed: t0.elapsed(),
            fatal,
        })
    }

    /// Issues RPCs while `more(issued, now)` holds, keeping `concurrency`
    /// outstanding, and waits for all of them.
    fn phase(
        &self,
        params: &LoopParams,
        rng: &mut ChaCha8Rng,
        rec: &mut Recorder,
        more: impl Fn(u64, Instant) -> bool,
    ) -> Result<(), PerfError> {
        let mut outstanding: HashMap<RpcId, (Instant, usize)> = HashMap::new();
        let mut issued = 0u64;
        let mut consecutive = 0u32;
        loop {
            while outstanding.len() < self.concurrency && more(issued, Instant::now()) {
                let size = params.sizes.next(rng);
                issued += 1;
                let sent = Instant::now();
                match self
                    .endpoint
                    .send_request(self.server, self.payload.slice(..size))
                {
                    Ok(id) => {
                        outstanding.insert(id, (sent, size));
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
            match self.endpoint.recv_any_response(Some(self.timeout)) {
                Ok((id, result)) => {
                    let Some((sent, size)) = outstanding.remove(&id) else {
                        tracing::warn!("homa: response for an RPC not outstanding: {id:?}");
                        continue;
                    };
                    let latency = sent.elapsed();
                    let want = expected_response_size(size, self.response_size);
                    match result {
                        Ok(response) if response.len() == want => {
                            rec.record(size, response.len(), latency);
                            consecutive = 0;
                        }
                        Ok(response) => {
                            tracing::warn!(
                                "homa: response of {} B to a {size} B request, expected {want} B",
                                response.len()
                            );
                            rec.record_error();
                            consecutive += 1;
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
