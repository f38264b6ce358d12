//! Cluster mode: every host runs one node that is both a server and a
//! client, like the Homa/Linux paper's `cp_node`.
//!
//! A *loaded* node's client sends RPCs to the other nodes' servers with
//! Poisson arrivals, at the rate that makes the host send `--gbps` of
//! payload (its own requests plus the responses its server sends, which by
//! symmetry equal the responses it receives), and records the size and
//! round-trip time of every RPC issued in the measured window. An
//! *unloaded* node instead probes one RPC at a time, per size, to get the
//! minimum and median round trip; a *server-only* node just serves.
//!
//! Nodes run on loopback (tests) or in network namespaces on private
//! addresses; [`crate::error::check_cluster_addr`] refuses anything else.

mod args;
mod homa;
mod load;
mod peers;
mod plan;
mod report;
mod tcp;
mod unloaded;

pub use args::{ClusterArgs, ResponseSize};
pub use peers::PeerRecord;
pub use report::{NodeReport, UnloadedPoint};

use crate::error::PerfError;
use crate::server::{Server, ServerOptions};
use homa_measure::SizeDist;
use load::{run_loaded, run_unloaded};
use plan::{Mode, Plan};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// The sizes unloaded mode probes: the workload's sizes at `points` evenly
/// spaced quantiles in (0, 1], plus its smallest and largest, each capped at
/// `max_size`, deduplicated and ascending.
pub fn unloaded_sizes(workload: &SizeDist, max_size: u64, points: usize) -> Vec<u64> {
    let mut sizes: Vec<u64> = (1..=points)
        .map(|i| workload.quantile(i as f64 / points as f64))
        .collect();
    // The smallest size a draw can return (rows of zero mass are skipped).
    sizes.push(workload.quantile(f64::MIN_POSITIVE));
    sizes.push(workload.quantile(1.0));
    for s in &mut sizes {
        *s = (*s).min(max_size);
    }
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

/// Runs one node as its flags say and reports what it measured.
pub fn run_node(args: &ClusterArgs) -> Result<NodeReport, PerfError> {
    let plan = Plan::new(args)?;
    let cpu0 = cpu_seconds();
    let server = Server::start_unchecked(&ServerOptions {
        protocol: plan.protocol,
        bind: plan.me,
        threads: plan.server_threads,
        busy_poll: false,
        homa_config: plan.homa_config.clone(),
        work_per_request: std::time::Duration::ZERO,
    })?;
    tracing::info!(
        "cluster node {}: {} server up, mode {}",
        plan.me,
        plan.protocol,
        plan.mode.name()
    );
    let mut report = plan.empty_report();
    let client = match plan.mode {
        Mode::Server => {
            let t = plan.warmup + plan.window + plan.linger;
            std::thread::sleep(t);
            report.seconds = t.as_secs_f64();
            None
        }
        Mode::Loaded => Some(run_loaded(&plan, server.homa_endpoint(), &mut report)?),
        Mode::Unloaded => Some(run_unloaded(&plan, server.homa_endpoint(), &mut report)?),
    };
    // The detected paths as the load left them (before the linger, when
    // nothing is sent and the smoothed RTTs no longer change).
    if let Some(ep) = server.homa_endpoint() {
        report.bytedance_peers = peers::records(ep);
    }
    if client.is_some() {
        std::thread::sleep(plan.linger);
    }
    if let Some(ep) = server.homa_endpoint() {
        // One endpoint served and sent this node's requests.
        let mut stats = serde_json::Map::new();
        stats.insert("endpoint".into(), endpoint_stats(ep));
        report.homa = Some(serde_json::Value::Object(stats));
    }
    server.shutdown();
    let cpu1 = cpu_seconds();
    report.cpu_user_s = cpu1.0 - cpu0.0;
    report.cpu_sys_s = cpu1.1 - cpu0.1;
    if report.errors > 0 || report.unfinished > 0 {
        tracing::warn!(
            "cluster node {}: {} errors, {} unfinished RPCs",
            plan.me,
            report.errors,
            report.unfinished
        );
    }
    Ok(report)
}

/// Process CPU time so far: (user, system) seconds.
fn cpu_seconds() -> (f64, f64) {
    // SAFETY: rusage is plain old data, so all-zero bytes are a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF is valid and `ru` is a live, writable rusage.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    if rc != 0 {
        tracing::warn!("getrusage failed: {}", std::io::Error::last_os_error());
        return (0.0, 0.0);
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(ru.ru_utime), secs(ru.ru_stime))
}

/// A Homa endpoint's protocol and runtime counters as JSON.
fn endpoint_stats(ep: &::homa::Endpoint) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    m.insert(
        "metrics".into(),
        serde_json::to_value(ep.metrics()).unwrap_or(serde_json::Value::Null),
    );
    m.insert(
        "runtime".into(),
        serde_json::to_value(ep.runtime_stats()).unwrap_or(serde_json::Value::Null),
    );
    serde_json::Value::Object(m)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
