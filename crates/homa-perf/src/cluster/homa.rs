//! Cluster mode over Homa: a client endpoint of its own (the node's IP, an
//! automatic port) next to the node's server endpoint.

use super::load::{Issuer, Pending, Tally};
use super::plan::Plan;
use super::unloaded::Prober;
use super::{lock, ResponseSize};
use crate::error::PerfError;
use ::homa::{Endpoint, RpcId};
use bytes::Bytes;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the receiver waits for a response before it looks at the
/// clock (stop flag, timeout sweep).
const RECV_POLL: Duration = Duration::from_millis(20);

/// How often outstanding RPCs are checked against the timeout.
const SWEEP_EVERY: Duration = Duration::from_millis(50);

/// Per-attempt wait of the readiness probe.
const READY_ATTEMPT: Duration = Duration::from_millis(200);

/// Request payloads as zero-copy slices of one buffer.
///
/// A Homa request carries the response size it wants in its first 4 bytes.
/// The buffer starts with a table of every wanted size, 4 bytes apart, and
/// continues with zeros: a request wanting `w` is the slice that starts at
/// `w`'s table entry. What follows the header does not matter to the server.
struct Requests {
    buf: Bytes,
    offsets: HashMap<u64, usize>,
}

impl Requests {
    /// A buffer for requests of up to `max_len` bytes wanting any of `wants`.
    fn new(wants: impl IntoIterator<Item = u64>, max_len: usize) -> Requests {
        let mut wants: Vec<u64> = wants.into_iter().collect();
        wants.sort_unstable();
        wants.dedup();
        let mut buf = vec![0u8; 4 * wants.len() + max_len.max(4)];
        let mut offsets = HashMap::with_capacity(wants.len());
        for (i, &w) in wants.iter().enumerate() {
            // Plan::new keeps every size under the message limit, so u32.
            let w32 = u32::try_from(w).unwrap_or(u32::MAX);
            buf[4 * i..4 * i + 4].copy_from_slice(&w32.to_le_bytes());
            offsets.insert(w, 4 * i);
        }
        Requests {
            buf: Bytes::from(buf),
            offsets,
        }
    }

    /// A request of `size` bytes that asks for a `want`-byte response.
    fn get(&self, size: usize, want: u64) -> Bytes {
        if size < 4 {
            // Too short for a header; the server answers with the default.
            return self.buf.slice(..size);
        }
        match self.offsets.get(&want) {
            Some(&off) if off + size <= self.buf.len() => self.buf.slice(off..off + size),
            _ => {
                // Not planned for: build it (a copy, but correct).
                let mut v = vec![0u8; size];
                let w32 = u32::try_from(want).unwrap_or(u32::MAX);
                v[..4].copy_from_slice(&w32.to_le_bytes());
                Bytes::from(v)
            }
        }
    }
}

/// Waits until every peer's server answers a tiny RPC, or errs naming the
/// first peer that did not by `deadline`.
fn wait_ready(
    ep: &Endpoint,
    peers: &[SocketAddr],
    deadline: Instant,
    patience: Duration,
) -> Result<(), PerfError> {
    let tiny = Bytes::from(4u32.to_le_bytes().to_vec());
    for &peer in peers {
        loop {
            let attempt = match ep.send_request(peer, tiny.clone()) {
                Ok(id) => match ep.recv_response(id, Some(READY_ATTEMPT)) {
                    Ok(_) => Ok(()),
                    Err(e) => {
                        // A late answer to this attempt must not linger.
                        let _ = ep.abort(id);
                        Err(e)
                    }
                },
                Err(e) => {
                    std::thread::sleep(READY_ATTEMPT);
                    Err(e)
                }
            };
            match attempt {
                Ok(()) => break,
                Err(::homa::Error::Closed) => {
                    return Err(PerfError::homa("readiness probe", ::homa::Error::Closed))
                }
                Err(e) if Instant::now() >= deadline => {
                    return Err(PerfError::homa(
                        format!(
                            "Homa server of peer {peer} did not answer within {:.1} s",
                            patience.as_secs_f64()
                        ),
                        e,
                    ))
                }
                Err(e) => tracing::debug!("peer {peer} not ready yet: {e}"),
            }
        }
    }
    tracing::info!("all {} Homa peers answer", peers.len());
    Ok(())
}

/// What the generator and the receiver share.
struct Shared {
    outstanding: Mutex<HashMap<RpcId, Pending>>,
    /// Signalled when an RPC is added (wakes an idle receiver).
    added: Condvar,
    stop: AtomicBool,
}

/// The loaded client: the generator sends, one receiver thread collects.
pub(super) struct LoadedHoma {
    ep: Endpoint,
    peers: Vec<SocketAddr>,
    requests: Requests,
    response: ResponseSize,
    shared: Arc<Shared>,
    receiver: Option<JoinHandle<Tally>>,
    /// RPCs that failed in `send_request`.
    send_failures: Tally,
}

impl LoadedHoma {
    /// Waits for the peers and starts the receiver. `ep` is the node's
    /// server endpoint: one endpoint per host, as one Homa socket can be
    /// client and server, so one pacer sees everything the host sends (two
    /// pacers would each fill the NIC queue).
    pub(super) fn start(
        plan: &Plan,
        ready_deadline: Instant,
        ep: Endpoint,
    ) -> Result<LoadedHoma, PerfError> {
        wait_ready(&ep, &plan.peers, ready_deadline, plan.ready_timeout)?;
        let wants = plan
            .masses
            .iter()
            .filter(|&&(s, _)| s >= 4)
            .map(|&(s, _)| plan.response.for_request(s));
        let requests = Requests::new(wants, plan.max_request());
        let shared = Arc::new(Shared {
            outstanding: Mutex::new(HashMap::new()),
            added: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let receiver = {
            let (ep, shared, timeout) = (ep.clone(), shared.clone(), plan.timeout);
            std::thread::Builder::new()
                .name("cluster-homa-recv".into())
                .spawn(move || receive(&ep, &shared, timeout))
                .map_err(|e| PerfError::io("start the Homa receiver thread", e))?
        };
        Ok(LoadedHoma {
            ep,
            peers: plan.peers.clone(),
            requests,
            response: plan.response,
            shared,
            receiver: Some(receiver),
            send_failures: Tally::default(),
        })
    }

    /// Drains and stops the receiver (the endpoint keeps serving until the
    /// node shuts its server down). Returns the outcomes.
    pub(super) fn finish(mut self, drain: Duration) -> Result<Tally, PerfError> {
        super::load::drain_wait(|| self.outstanding(), drain);
        let tally = self.stop_receiver();
        tally
            .map(|mut t| {
                t.merge(std::mem::take(&mut self.send_failures));
                t
            })
            .map_err(PerfError::from_panic)
    }

    /// Stops and joins the receiver, then counts what is still outstanding
    /// as unfinished.
    fn stop_receiver(&mut self) -> std::thread::Result<Tally> {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.added.notify_all();
        let mut tally = match self.receiver.take() {
            Some(h) => h.join()?,
            None => Tally::default(),
        };
        let left: Vec<(RpcId, Pending)> = lock(&self.shared.outstanding).drain().collect();
        for (id, p) in left {
            tally.unfinished(&p);
            let _ = self.ep.abort(id);
        }
        Ok(tally)
    }
}

impl Drop for LoadedHoma {
    fn drop(&mut self) {
        // After finish() this finds nothing to do; on an early return it
        // keeps the receiver from outliving the client.
        if self.receiver.is_some() {
            let _ = self.stop_receiver();
        }
    }
}

impl Issuer for LoadedHoma {
    fn outstanding(&self) -> usize {
        lock(&self.shared.outstanding).len()
    }

    fn issue(&mut self, peer: usize, size: u64, in_window: bool) -> Result<(), PerfError> {
        let len = usize::try_from(size).unwrap_or(usize::MAX);
        let request = self.requests.get(len, self.response.for_request(size));
        // Held across send_request so the receiver cannot see the response
        // before the RPC is registered; it takes its timestamp first.
        let mut outstanding = lock(&self.shared.outstanding);
        let start = Instant::now();
        let pending = Pending {
            size,
            want: self.response.expected(size),
            start,
            in_window,
        };
        match self.ep.send_request(self.peers[peer], request) {
            Ok(id) => {
                outstanding.insert(id, pending);
                drop(outstanding);
                self.shared.added.notify_one();
                Ok(())
            }
            Err(::homa::Error::Closed) => Err(PerfError::homa(
                "send_request on the client endpoint",
                ::homa::Error::Closed,
            )),
            Err(e) => {
                tracing::debug!("homa send_request to {} failed: {e}", self.peers[peer]);
                self.send_failures.fail(&pending);
                Ok(())
            }
        }
    }
}

/// The receiver thread: completes RPCs and aborts those past `timeout`.
fn receive(ep: &Endpoint, shared: &Shared, timeout: Duration) -> Tally {
    let mut tally = Tally::default();
    let mut last_sweep = Instant::now();
    while !shared.stop.load(Ordering::SeqCst) {
        match ep.recv_any_response_parts(Some(RECV_POLL)) {
            Ok((id, result)) => {
                let end = Instant::now();
                // Missing: aborted by the sweep, or a stale readiness probe.
                if let Some(p) = lock(&shared.outstanding).remove(&id) {
                    match result {
                        Ok(msg) => tally.finish(&p, msg.len() as u64, end - p.start, timeout),
                        Err(e) => {
                            tracing::debug!("homa RPC of {} B failed: {e}", p.size);
                            tally.fail(&p);
                        }
                    }
                }
            }
            Err(::homa::Error::Timeout) => {}
            Err(::homa::Error::NothingOutstanding) => {
                let outstanding = lock(&shared.outstanding);
                if outstanding.is_empty() && !shared.stop.load(Ordering::SeqCst) {
                    let _ = shared.added.wait_timeout(outstanding, RECV_POLL);
                }
            }
            Err(::homa::Error::Closed) => break,
            Err(e) => {
                tracing::warn!("homa recv_any_response failed: {e}");
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        if last_sweep.elapsed() >= SWEEP_EVERY {
            last_sweep = Instant::now();
            sweep(ep, shared, timeout, &mut tally);
        }
    }
    tally
}

/// Aborts the RPCs outstanding for longer than `timeout`; they are errors.
fn sweep(ep: &Endpoint, shared: &Shared, timeout: Duration, tally: &mut Tally) {
    let expired: Vec<(RpcId, Pending)> = {
        let mut outstanding = lock(&shared.outstanding);
        let ids: Vec<RpcId> = outstanding
            .iter()
            .filter(|(_, p)| p.start.elapsed() > timeout)
            .map(|(&id, _)| id)
            .collect();
        ids.into_iter()
            .filter_map(|id| outstanding.remove(&id).map(|p| (id, p)))
            .collect()
    };
    if !expired.is_empty() {
        tracing::warn!(
            "homa: {} RPCs unanswered after {:?}; aborted",
            expired.len(),
            timeout
        );
    }
    for (id, p) in expired {
        tracing::warn!(
            "homa: RPC {} to {} ({} B) gave up: {}",
            id.id,
            id.peer,
            p.size,
            ep.rpc_snapshot(id)
                .map(|s| s.to_string())
                .unwrap_or_else(|| "unknown to the core".into())
        );
        let _ = ep.abort(id);
        tally.timed_out(&p);
    }
}

/// The unloaded client: blocking calls, one at a time.
pub(super) struct ProbeHoma {
    ep: Endpoint,
    peers: Vec<SocketAddr>,
    requests: Requests,
    response: ResponseSize,
    timeout: Duration,
}

impl ProbeHoma {
    /// Waits for the peers; `ep` is the node's server endpoint (see
    /// [`LoadedHoma::start`]).
    pub(super) fn start(
        plan: &Plan,
        sizes: &[u64],
        ready_deadline: Instant,
        ep: Endpoint,
    ) -> Result<ProbeHoma, PerfError> {
        wait_ready(&ep, &plan.peers, ready_deadline, plan.ready_timeout)?;
        let wants = sizes
            .iter()
            .filter(|&&s| s >= 4)
            .map(|&s| plan.response.for_request(s));
        let max = sizes.iter().copied().max().unwrap_or(0);
        Ok(ProbeHoma {
            requests: Requests::new(wants, usize::try_from(max).unwrap_or(usize::MAX)),
            ep,
            peers: plan.peers.clone(),
            response: plan.response,
            timeout: plan.timeout,
        })
    }
}

impl Prober for ProbeHoma {
    fn peers(&self) -> usize {
        self.peers.len()
    }

    fn rpc(&mut self, peer: usize, size: u64) -> Result<(u64, Duration), String> {
        let len = usize::try_from(size).unwrap_or(usize::MAX);
        let request = self.requests.get(len, self.response.for_request(size));
        let start = Instant::now();
        let response = self
            .ep
            .call_parts(self.peers[peer], request, self.timeout)
            .map_err(|e| e.to_string())?;
        Ok((response.len() as u64, start.elapsed()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::wanted_response_size;

    #[test]
    fn requests_carry_their_wanted_size() {
        let r = Requests::new([5, 1_000, 5, 70_000], 100_000);
        for want in [5, 1_000, 70_000] {
            for size in [4, 99, 100_000] {
                let req = r.get(size, want);
                assert_eq!(req.len(), size);
                assert_eq!(wanted_response_size(&req) as u64, want);
            }
        }
        // Unplanned sizes still work.
        let req = r.get(10, 33);
        assert_eq!(wanted_response_size(&req), 33);
        assert_eq!(r.get(3, 5).len(), 3);
    }
}
