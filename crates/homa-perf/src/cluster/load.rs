//! The client side of a run: the open-loop Poisson load generator with
//! the per-RPC bookkeeping its transports share ([`Pending`], [`Tally`],
//! [`Issuer`]), and the loaded and unloaded runs that fill the report.

use super::plan::Plan;
use super::{homa, nanos, tcp, unloaded, unloaded_sizes, NodeReport};
use crate::error::PerfError;
use crate::proto::Protocol;
use crate::workload::SizeSpec;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::{Duration, Instant};

/// How often the drain checks whether every RPC has come back.
const DRAIN_POLL: Duration = Duration::from_millis(1);

/// One RPC in flight.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pending {
    /// Request size (bytes).
    pub(super) size: u64,
    /// Response length a correct server returns.
    pub(super) want: u64,
    /// Just before the request went to the transport.
    pub(super) start: Instant,
    /// Issued inside the measured window (else it is not recorded).
    pub(super) in_window: bool,
}

/// Outcomes of the window's RPCs, kept per thread and merged at the end.
#[derive(Debug, Default)]
pub(super) struct Tally {
    pub(super) completed: u64,
    errors: u64,
    unfinished: u64,
    request_bytes: u64,
    response_bytes: u64,
    rpcs: Vec<(u64, u64)>,
    censored: Vec<(u64, u64)>,
}

impl Tally {
    /// A response of `got` bytes arrived `rtt` after the request left.
    pub(super) fn finish(&mut self, p: &Pending, got: u64, rtt: Duration, timeout: Duration) {
        if got != p.want {
            tracing::debug!(
                "response of {got} B to a {} B request, expected {} B",
                p.size,
                p.want
            );
            self.fail(p);
        } else if rtt > timeout {
            self.fail(p);
        } else if p.in_window {
            self.completed += 1;
            self.request_bytes += p.size;
            self.response_bytes += got;
            self.rpcs.push((p.size, nanos(rtt)));
        }
    }

    pub(super) fn fail(&mut self, p: &Pending) {
        if p.in_window {
            self.errors += 1;
        }
    }

    pub(super) fn unfinished(&mut self, p: &Pending) {
        if p.in_window {
            self.unfinished += 1;
            self.censored.push((p.size, nanos(p.start.elapsed())));
        }
    }

    /// Given up on after `timeout` without an answer.
    pub(super) fn timed_out(&mut self, p: &Pending) {
        if p.in_window {
            self.errors += 1;
            self.censored.push((p.size, nanos(p.start.elapsed())));
        }
    }

    pub(super) fn merge(&mut self, other: Tally) {
        self.completed += other.completed;
        self.errors += other.errors;
        self.unfinished += other.unfinished;
        self.request_bytes += other.request_bytes;
        self.response_bytes += other.response_bytes;
        self.rpcs.extend(other.rpcs);
        self.censored.extend(other.censored);
    }

    fn into_report(self, r: &mut NodeReport) {
        r.completed = self.completed;
        r.errors = self.errors;
        r.unfinished = self.unfinished;
        r.request_bytes = self.request_bytes;
        r.response_bytes = self.response_bytes;
        r.rpcs = self.rpcs;
        r.censored = self.censored;
    }
}

/// A loaded client's transport side: hands requests over and tracks them.
pub(super) trait Issuer {
    /// RPCs sent and not yet answered or given up.
    fn outstanding(&self) -> usize;
    /// Sends a request of `size` bytes to peer number `peer`. Errs only when
    /// the client cannot go on.
    fn issue(&mut self, peer: usize, size: u64, in_window: bool) -> Result<(), PerfError>;
}

/// What the generator did.
#[derive(Debug, Default)]
struct Generated {
    issued: u64,
    skipped: u64,
    max_lag: Duration,
}

/// Waits for `t` by sleeping. The generator never spins: on a small
/// machine running several hosts, a spinning generator takes the CPU the
/// protocol stacks need. With the thread's timer slack at 1 µs (see
/// [`tight_timer_slack`]) a sleep ends within tens of microseconds of `t`,
/// and any lateness shows in `max_send_lag_us`.
fn wait_until(t: Instant) {
    let now = Instant::now();
    if t > now {
        std::thread::sleep(t - now);
    }
}

/// Asks the kernel to wake this thread's sleeps on time (the default slack
/// of 50 µs would delay every arrival by up to that much).
fn tight_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes an integer argument and only changes
    // the calling thread's timer slack; no memory is passed.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1_000 as libc::c_ulong, 0, 0, 0) };
    if rc != 0 {
        tracing::debug!(
            "cannot set the timer slack: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// Offers Poisson load from `t0`: warm-up, then the window. A late arrival
/// is sent at once, never dropped to catch up.
fn generate(
    issuer: &mut dyn Issuer,
    plan: &Plan,
    sizes: &SizeSpec,
    t0: Instant,
) -> Result<Generated, PerfError> {
    tight_timer_slack();
    let mut rng = ChaCha8Rng::seed_from_u64(plan.seed);
    let warm_end = t0 + plan.warmup;
    let end = warm_end + plan.window;
    let mut g = Generated::default();
    let mut next = t0;
    loop {
        // gen() is in [0, 1); 1 - it is in (0, 1], so the log is finite.
        let u = 1.0 - rng.gen::<f64>();
        let gap = Duration::try_from_secs_f64(-u.ln() / plan.rate).unwrap_or(Duration::MAX);
        next = match next.checked_add(gap) {
            Some(t) if t < end => t,
            _ => break,
        };
        wait_until(next);
        let now = Instant::now();
        if now >= end {
            break;
        }
        g.max_lag = g.max_lag.max(now - next);
        let in_window = now >= warm_end;
        let peer = rng.gen_range(0..plan.peers.len());
        let size = sizes.next(&mut rng) as u64;
        if issuer.outstanding() >= plan.client_max {
            if in_window {
                g.skipped += 1;
            }
            continue;
        }
        issuer.issue(peer, size, in_window)?;
        if in_window {
            g.issued += 1;
        }
    }
    Ok(g)
}

/// Waits until `outstanding()` is zero or `drain` has passed.
pub(super) fn drain_wait(outstanding: impl Fn() -> usize, drain: Duration) {
    let deadline = Instant::now() + drain;
    while outstanding() > 0 && Instant::now() < deadline {
        std::thread::sleep(DRAIN_POLL);
    }
}

/// Readiness check, load, drain; fills the report. `ep` is the server's
/// Homa endpoint, which the Homa client shares.
pub(super) fn run_loaded(
    plan: &Plan,
    ep: Option<&::homa::Endpoint>,
    report: &mut NodeReport,
) -> Result<(), PerfError> {
    let Some(sizes) = &plan.sizes else {
        return Err(PerfError::Usage("no request sizes given".into()));
    };
    let ready_deadline = Instant::now() + plan.ready_timeout;
    let (generated, tally) = match (plan.protocol, ep) {
        (Protocol::Homa, Some(ep)) => {
            let mut client = homa::LoadedHoma::start(plan, ready_deadline, ep.clone())?;
            let t0 = Instant::now();
            let generated = generate(&mut client, plan, sizes, t0);
            let tally = client.finish(plan.drain)?;
            (generated?, tally)
        }
        (Protocol::Homa, None) => return Err(no_endpoint()),
        _ => {
            let mut client = tcp::LoadedTcp::start(plan, ready_deadline)?;
            let t0 = Instant::now();
            let generated = generate(&mut client, plan, sizes, t0);
            let tally = client.finish(plan.drain)?;
            (generated?, tally)
        }
    };
    tally.into_report(report);
    report.issued = generated.issued;
    report.skipped = generated.skipped;
    report.max_send_lag_us = generated.max_lag.as_secs_f64() * 1e6;
    if generated.skipped > 0 {
        tracing::warn!(
            "cluster node {}: {} arrivals skipped at --client-max {}: the target load was not offered",
            plan.me,
            generated.skipped,
            plan.client_max
        );
    }
    Ok(())
}

fn no_endpoint() -> PerfError {
    PerfError::Usage("the Homa server has no endpoint to send requests from".into())
}

/// Readiness check and the one-at-a-time probes; fills the report.
pub(super) fn run_unloaded(
    plan: &Plan,
    ep: Option<&::homa::Endpoint>,
    report: &mut NodeReport,
) -> Result<(), PerfError> {
    let sizes = match &plan.sizes {
        Some(SizeSpec::Fixed(n)) => vec![*n as u64],
        Some(SizeSpec::Workload { workload, max }) => {
            unloaded_sizes(workload, *max as u64, plan.unloaded_points)
        }
        None => return Err(PerfError::Usage("no request sizes given".into())),
    };
    let ready_deadline = Instant::now() + plan.ready_timeout;
    let probed = match (plan.protocol, ep) {
        (Protocol::Homa, Some(ep)) => {
            let mut client = homa::ProbeHoma::start(plan, &sizes, ready_deadline, ep.clone())?;
            unloaded::probe(&mut client, plan, &sizes)
        }
        (Protocol::Homa, None) => return Err(no_endpoint()),
        _ => {
            let mut client = tcp::ProbeTcp::start(plan, ready_deadline)?;
            unloaded::probe(&mut client, plan, &sizes)
        }
    };
    report.issued = probed.issued;
    report.seconds = probed.elapsed.as_secs_f64();
    report.unloaded = probed.points;
    probed.tally.into_report(report);
    Ok(())
}
