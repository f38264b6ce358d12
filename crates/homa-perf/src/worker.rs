//! The closed-loop client: K workers, each with one outstanding RPC at a
//! time, a warm-up excluded from the statistics, then a measured interval
//! that ends after a count of RPCs or a duration.

use crate::error::PerfError;
use crate::stats::Recorder;
use crate::workload::SizeSpec;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Consecutive failed RPCs after which a worker gives up.
const MAX_CONSECUTIVE_ERRORS: u32 = 10;
/// Failed warm-up RPCs, none answered, after which a worker concludes that
/// no server is there.
const UNANSWERED_BEFORE_GIVING_UP: u32 = 2;
/// How often a thread waiting at the start gate looks at the abort flag
/// and, for the main thread, whether a worker ended early.
const GATE_CHECK: Duration = Duration::from_millis(10);

/// How a failed RPC affects the run.
#[derive(Debug)]
pub(crate) enum RpcError {
    /// Count it and go on (a timeout, a lost datagram).
    Transient(String),
    /// The connection is unusable; this worker stops.
    Fatal(PerfError),
}

impl RpcError {
    /// Timeouts are transient; other socket errors too, up to the limit of
    /// consecutive errors.
    pub(crate) fn from_io(e: std::io::Error) -> RpcError {
        RpcError::Transient(e.to_string())
    }

    fn describe(&self) -> String {
        match self {
            RpcError::Transient(s) => s.clone(),
            RpcError::Fatal(e) => e.to_string(),
        }
    }
}

/// A completed RPC.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RpcDone {
    /// The response's length.
    pub len: usize,
    /// From the request handed to the transport to the response received
    /// (building the request and checking the response are not counted).
    pub latency: Duration,
    /// False when the response's bytes are not the ones the server must
    /// send (protocols that do not check contents always say true).
    pub content_ok: bool,
}

/// One connection (or endpoint handle) that performs RPCs one at a time.
pub(crate) trait RpcClient: Send {
    /// Sends a request of `request_size` bytes and waits for its response.
    fn rpc(&mut self, request_size: usize) -> Result<RpcDone, RpcError>;

    /// The response length a correct server returns for such a request.
    fn expected_response(&self, request_size: usize) -> usize;
}

/// When the measured interval ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StopRule {
    /// After this many RPCs (over all workers).
    Count(u64),
    /// After this much time.
    Duration(Duration),
}

/// Parameters shared by all workers of a run.
pub(crate) struct LoopParams<'a> {
    pub sizes: &'a SizeSpec,
    pub stop: StopRule,
    pub warmup: u64,
    pub seed: u64,
}

/// The outcome of a closed-loop run.
pub(crate) struct LoopResult {
    pub recorder: Recorder,
    pub elapsed: Duration,
    /// First fatal error of any worker, if one stopped early.
    pub fatal: Option<PerfError>,
}

/// Runs every client in its own thread until the stop rule is met.
pub(crate) fn run_closed_loop(
    clients: Vec<Box<dyn RpcClient>>,
    params: &LoopParams,
) -> Result<LoopResult, PerfError> {
    let k = clients.len().max(1) as u64;
    let warmup_each = params.warmup.div_ceil(k);
    // Workers count themselves ready after their warm-up, then wait for the
    // start time (or the abort flag, if not every worker could start).
    let ready = AtomicUsize::new(0);
    let abort = AtomicBool::new(false);
    let start: OnceLock<Instant> = OnceLock::new();
    let claimed = AtomicU64::new(0);
    // Workers that finished their warm-up sleep here until the start (a
    // poll every 50 µs made 64 waiting workers cost a wake-up each per
    // poll, which the client's CPU and context switches per RPC counted).
    let gate = (Mutex::new(()), Condvar::new());
    let per_bucket = matches!(params.sizes, SizeSpec::Workload { .. });

    std::thread::scope(|scope| {
        let mut handles = Vec::new();
        for (i, mut client) in clients.into_iter().enumerate() {
            let (ready, abort, start, claimed, gate) = (&ready, &abort, &start, &claimed, &gate);
            let handle = std::thread::Builder::new()
                .name(format!("client-{i}"))
                .spawn_scoped(scope, move || {
                    let mut rng = ChaCha8Rng::seed_from_u64(params.seed.wrapping_add(i as u64));
                    let mut rec = Recorder::new(per_bucket);
                    let mut fatal = None;
                    let mut consecutive = 0u32;
                    let mut any_answered = false;
                    for _ in 0..warmup_each {
                        let size = params.sizes.next(&mut rng);
                        match client.rpc(size) {
                            Ok(_) => {
                                any_answered = true;
                                consecutive = 0;
                            }
                            Err(RpcError::Fatal(e)) => {
                                fatal = Some(e);
                                break;
                            }
                            Err(e) if !any_answered => {
                                // Nothing has answered yet: most likely no
                                // server is there. Say so once, quickly,
                                // instead of a warning per RPC.
                                consecutive += 1;
                                if consecutive >= UNANSWERED_BEFORE_GIVING_UP {
                                    fatal = Some(PerfError::Usage(format!(
                                        "the server does not answer ({consecutive} RPCs failed, none succeeded; \
                                         is a server of this protocol running there?): {}",
                                        e.describe()
                                    )));
                                    break;
                                }
                            }
                            Err(e) => tracing::warn!("warm-up RPC failed: {}", e.describe()),
                        }
                    }
                    consecutive = 0;
                    ready.fetch_add(1, Ordering::SeqCst);
                    let t0 = {
                        let mut g = gate.0.lock().unwrap_or_else(|p| p.into_inner());
                        gate.1.notify_all();
                        loop {
                            if let Some(&t0) = start.get() {
                                break t0;
                            }
                            if abort.load(Ordering::SeqCst) {
                                return (rec, Instant::now(), fatal);
                            }
                            g = gate
                                .1
                                .wait_timeout(g, GATE_CHECK)
                                .unwrap_or_else(|p| p.into_inner())
                                .0;
                        }
                    };
                    while fatal.is_none() {
                        match params.stop {
                            StopRule::Count(n) => {
                                if claimed.fetch_add(1, Ordering::Relaxed) >= n {
                                    break;
                                }
                            }
                            StopRule::Duration(d) => {
                                if t0.elapsed() >= d {
                                    break;
                                }
                            }
                        }
                        let size = params.sizes.next(&mut rng);
                        match client.rpc(size) {
                            Ok(RpcDone {
                                len,
                                latency,
                                content_ok,
                            }) => {
                                let want = client.expected_response(size);
                                if rec.judge(size, len, want, content_ok, latency) {
                                    consecutive = 0;
                                } else {
                                    consecutive += 1;
                                }
                            }
                            Err(e) => {
                                tracing::warn!("RPC failed: {}", e.describe());
                                rec.record_error();
                                consecutive += 1;
                                if let RpcError::Fatal(e) = e {
                                    fatal = Some(e);
                                }
                            }
                        }
                        if consecutive >= MAX_CONSECUTIVE_ERRORS && fatal.is_none() {
                            fatal = Some(PerfError::Usage(format!(
                                "{consecutive} RPCs in a row failed; giving up"
                            )));
                        }
                    }
                    (rec, Instant::now(), fatal)
                });
            match handle {
                Ok(h) => handles.push(h),
                Err(e) => {
                    // Release the workers already started; the scope joins them.
                    abort.store(true, Ordering::SeqCst);
                    return Err(PerfError::io("start a client thread", e));
                }
            }
        }
        let mut g = gate.0.lock().unwrap_or_else(|p| p.into_inner());
        while ready.load(Ordering::SeqCst) < handles.len() {
            // Before the start, a worker can only have finished by panicking.
            if handles.iter().any(|h| h.is_finished()) {
                abort.store(true, Ordering::SeqCst);
                break;
            }
            g = gate
                .1
                .wait_timeout(g, GATE_CHECK)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        let t0 = Instant::now();
        if !abort.load(Ordering::SeqCst) {
            let _ = start.set(t0);
        }
        gate.1.notify_all();
        drop(g);
        let mut recorder = Recorder::new(per_bucket);
        let mut end = t0;
        let mut first_fatal = None;
        for h in handles {
            let (rec, t, fatal) = h.join().map_err(PerfError::from_panic)?;
            recorder.merge(&rec);
            end = end.max(t);
            if first_fatal.is_none() {
                first_fatal = fatal;
            }
        }
        Ok(LoopResult {
            recorder,
            elapsed: end - t0,
            fatal: first_fatal,
        })
    })
}

/// Runs a one-thread pipelined client (any transport): `phase` issues and
/// collects RPCs while `more(issued, now)` holds, keeping its pipeline
/// full, and returns once none is outstanding. It runs twice: for the
/// warm-up (`params.warmup` RPCs, recorded nowhere) and for the measured
/// interval (`params.stop`).
pub(crate) fn run_pipelined(
    params: &LoopParams,
    mut phase: impl FnMut(
        &mut ChaCha8Rng,
        &mut Recorder,
        &dyn Fn(u64, Instant) -> bool,
    ) -> Result<(), PerfError>,
) -> Result<LoopResult, PerfError> {
    let mut rng = ChaCha8Rng::seed_from_u64(params.seed);
    let per_bucket = matches!(params.sizes, SizeSpec::Workload { .. });
    let mut scratch = Recorder::new(false);
    if let Err(e) = phase(&mut rng, &mut scratch, &|issued, _| issued < params.warmup) {
        return Ok(LoopResult {
            recorder: Recorder::new(per_bucket),
            elapsed: Duration::ZERO,
            fatal: Some(e),
        });
    }
    let mut recorder = Recorder::new(per_bucket);
    let t0 = Instant::now();
    let fatal = phase(&mut rng, &mut recorder, &|issued, now| match params.stop {
        StopRule::Count(n) => issued < n,
        StopRule::Duration(d) => now.duration_since(t0) < d,
    })
    .err();
    Ok(LoopResult {
        recorder,
        elapsed: t0.elapsed(),
        fatal,
    })
}
