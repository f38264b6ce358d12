//! `homa-perf lossmatrix`: Homa echo RPCs on loopback under injected loss.
//!
//! For every loss rate × message size, a fresh server and client endpoint
//! (both with the runtime's fault shim dropping that fraction of the
//! packets they send *and* of those they receive) run a fixed count of RPCs
//! one at a time: requests of the size, responses of the same size, every
//! response byte checked (see [`crate::proto::make_request`]). A cell stops
//! at its time limit; RPCs still outstanding then are *censored* (their
//! latency is only known to exceed the time they had), RPCs not started
//! are *not run*. An extra row keeps several RPCs outstanding at once
//! (by default 16 concurrent 1 MB RPCs at 20% loss).

use crate::error::PerfError;
use crate::homa_rpc::new_request;
use crate::proto::{response_ok, Protocol};
use crate::server::{Server, ServerOptions};
use crate::stats::{fmt_us, Recorder};
use homa::{Endpoint, FaultInjection, RpcId};
use serde::Serialize;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// What the loss matrix runs.
#[derive(Debug, Clone)]
pub struct LossMatrixOptions {
    /// Loss rates in percent: each end drops this share of the packets it
    /// sends, so each direction loses this share.
    pub losses: Vec<f64>,
    /// Message sizes (request and response) in bytes.
    pub sizes: Vec<usize>,
    /// RPCs per cell.
    pub count: u64,
    /// RPCs run first in each cell (under the same loss), not counted:
    /// they warm up the allocator, the caches and the peers' state.
    pub warmup: u64,
    /// Time limit of a cell (warm-up included).
    pub cell_limit: Duration,
    /// The extra row: `(outstanding RPCs, loss %, size)`; `None` skips it.
    pub concurrent: Option<(usize, f64, usize)>,
    /// Seed of the fault shims (each endpoint of each cell gets its own).
    pub seed: u64,
    /// Homa runtime configuration of both ends (its `fault_injection` is
    /// replaced by the cell's loss).
    pub homa_config: homa::Config,
}

impl LossMatrixOptions {
    /// {0, 5, 10, 20}% × {100 B, 30 KB, 1 MB}, 200 RPCs a cell after 5 of
    /// warm-up, 60 s limit, 16 concurrent 1 MB RPCs at 20%,
    /// `homa::Config::loopback()`.
    pub fn new() -> LossMatrixOptions {
        LossMatrixOptions {
            losses: vec![0.0, 5.0, 10.0, 20.0],
            sizes: vec![100, 30_000, 1_000_000],
            count: 200,
            warmup: 5,
            cell_limit: Duration::from_secs(60),
            concurrent: Some((16, 20.0, 1_000_000)),
            seed: 1,
            homa_config: homa::Config::loopback(),
        }
    }

    /// Refuses settings that cannot run.
    pub fn validate(&self) -> Result<(), PerfError> {
        if self.count == 0 {
            return Err(PerfError::Usage("--count must be at least 1".into()));
        }
        if self.losses.is_empty() || self.sizes.is_empty() {
            return Err(PerfError::Usage(
                "--losses and --sizes need at least one value each".into(),
            ));
        }
        let concurrent_loss = self.concurrent.map(|c| c.1);
        for &l in self.losses.iter().chain(concurrent_loss.iter()) {
            if !(0.0..100.0).contains(&l) {
                return Err(PerfError::Usage(format!(
                    "loss rates are percentages in 0..100, got {l}"
                )));
            }
        }
        let max = self.homa_config.core.max_message_size as usize;
        let concurrent_size = self.concurrent.map(|c| c.2);
        for &s in self.sizes.iter().chain(concurrent_size.iter()) {
            if s > max {
                return Err(PerfError::Usage(format!(
                    "size {s} B exceeds Homa's message limit of {max} B"
                )));
            }
        }
        if self.concurrent.is_some_and(|c| c.0 == 0) {
            return Err(PerfError::Usage("--concurrency must be at least 1".into()));
        }
        if self.cell_limit.is_zero() {
            return Err(PerfError::Usage("--cell-seconds must be positive".into()));
        }
        Ok(())
    }
}

impl Default for LossMatrixOptions {
    fn default() -> LossMatrixOptions {
        LossMatrixOptions::new()
    }
}

/// One cell's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// Loss rate (%) of the packets each end sends (each direction).
    pub loss_pct: f64,
    /// Request and response size (bytes).
    pub size: usize,
    /// RPCs kept outstanding.
    pub outstanding: usize,
    /// RPCs asked for.
    pub count: u64,
    /// RPCs completed with the right bytes.
    pub completed: u64,
    /// RPCs that ended in an error or with wrong bytes.
    pub failed: u64,
    /// Of those, responses with wrong bytes.
    pub content_errors: u64,
    /// RPCs still outstanding at the time limit (aborted).
    pub censored: u64,
    /// RPCs never started because the time limit came first.
    pub not_run: u64,
    /// Median latency of the completed RPCs (µs).
    pub p50_us: Option<f64>,
    /// 99th percentile latency of the completed RPCs (µs).
    pub p99_us: Option<f64>,
    /// Largest latency of the completed RPCs (µs).
    pub max_us: Option<f64>,
    /// Shortest time a censored RPC had been waiting when cut off (µs):
    /// its latency is larger.
    pub censored_min_us: Option<f64>,
    /// Wall time of the cell (s).
    pub elapsed_s: f64,
    /// Packets the fault shims dropped (both ends, both directions).
    pub injected_drops: u64,
    /// Packets the two endpoints received.
    pub packets_received: u64,
    /// RESENDs both ends asked for.
    pub resends: u64,
}

impl Cell {
    /// True when the percentiles are not to be trusted as they are: some
    /// RPCs were cut off or failed, and the true quantiles may be higher.
    pub fn incomplete(&self) -> bool {
        self.completed < self.count
    }
}

/// The whole matrix.
#[derive(Debug, Clone, Serialize)]
pub struct LossMatrix {
    /// RPCs per cell.
    pub count: u64,
    /// Uncounted RPCs before them.
    pub warmup: u64,
    /// Time limit of a cell (s).
    pub cell_limit_s: f64,
    /// Homa MTU of the runs (bytes).
    pub mtu: u32,
    /// The loss × size cells, loss-major.
    pub cells: Vec<Cell>,
    /// The concurrent row, if it ran.
    pub concurrent: Option<Cell>,
}

/// Runs the matrix, calling `progress` with a line now and then.
pub fn run_loss_matrix(
    opts: &LossMatrixOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<LossMatrix, PerfError> {
    opts.validate()?;
    let mut cells = Vec::new();
    let mut n = 0u64;
    let total = opts.losses.len() * opts.sizes.len() + usize::from(opts.concurrent.is_some());
    for &loss in &opts.losses {
        for &size in &opts.sizes {
            n += 1;
            progress(&format!(
                "[{n}/{total}] {} at {loss}% loss each way: {} RPCs",
                size_name(size),
                opts.count
            ));
            let cell = run_cell(opts, loss, size, 1, n, progress)?;
            progress(&summary(&cell));
            cells.push(cell);
        }
    }
    let concurrent = match opts.concurrent {
        Some((k, loss, size)) => {
            n += 1;
            progress(&format!(
                "[{n}/{total}] {k} concurrent {} RPCs at {loss}% loss each way: {} RPCs",
                size_name(size),
                opts.count
            ));
            let cell = run_cell(opts, loss, size, k, n, progress)?;
            progress(&summary(&cell));
            Some(cell)
        }
        None => None,
    };
    Ok(LossMatrix {
        count: opts.count,
        warmup: opts.warmup,
        cell_limit_s: opts.cell_limit.as_secs_f64(),
        mtu: opts.homa_config.core.mtu,
        cells,
        concurrent,
    })
}

fn summary(c: &Cell) -> String {
    format!(
        "    done in {:.1} s: {} completed, {} failed, {} censored, {} not run; p50 {} us, p99 {} us",
        c.elapsed_s,
        c.completed,
        c.failed,
        c.censored,
        c.not_run,
        fmt_us(c.p50_us),
        fmt_us(c.p99_us)
    )
}

/// A size for people: 100 B, 30 KB, 1 MB.
fn size_name(size: usize) -> String {
    if size >= 1_000_000 && size % 1_000_000 == 0 {
        format!("{} MB", size / 1_000_000)
    } else if size >= 1_000 && size % 1_000 == 0 {
        format!("{} KB", size / 1_000)
    } else {
        format!("{size} B")
    }
}

/// How often a running cell reports progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

fn run_cell(
    opts: &LossMatrixOptions,
    loss: f64,
    size: usize,
    outstanding_max: usize,
    cell_no: u64,
    progress: &mut dyn FnMut(&str),
) -> Result<Cell, PerfError> {
    let faulty = |seed: u64| {
        let mut c = opts.homa_config.clone();
        // Each end drops this share of what it sends: every packet, in
        // either direction, is lost with probability `loss` once.
        c.fault_injection = (loss > 0.0).then(|| {
            let mut f = FaultInjection::default();
            f.drop_rate = loss / 100.0;
            f.seed = seed;
            f
        });
        c
    };
    let seed = opts.seed.wrapping_mul(1_000).wrapping_add(2 * cell_no);
    let server = Server::start(&ServerOptions {
        protocol: Protocol::Homa,
        bind: "127.0.0.1:0"
            .parse()
            .map_err(|_| PerfError::Usage("cannot parse the loopback address".to_string()))?,
        threads: 1,
        busy_poll: false,
        homa_config: faulty(seed),
        work_per_request: std::time::Duration::ZERO,
    })?;
    let dest: SocketAddr = server.local_addr();
    let client = crate::homa_rpc::bind(crate::homa_rpc::client_bind_addr(dest), faulty(seed + 1))?;
    let start = Instant::now();
    let deadline = start + opts.cell_limit;
    let mut rec = Recorder::new(false);
    // id -> (sent, tag, counted: not a warm-up RPC)
    let mut outstanding: HashMap<RpcId, (Instant, u64, bool)> = HashMap::new();
    let total = opts.count + opts.warmup;
    let mut issued = 0u64;
    let mut failed = 0u64;
    let mut censored: Vec<Duration> = Vec::new();
    let mut next_progress = start + PROGRESS_EVERY;
    loop {
        while outstanding.len() < outstanding_max && issued < total {
            let (tag, request) = new_request(size, size);
            let counted = issued >= opts.warmup;
            issued += 1;
            let sent = Instant::now();
            match client.send_request(dest, request) {
                Ok(id) => {
                    outstanding.insert(id, (sent, tag, counted));
                }
                Err(e) => {
                    tracing::warn!("lossmatrix: send_request failed: {e}");
                    failed += u64::from(counted);
                }
            }
        }
        if outstanding.is_empty() {
            break;
        }
        let now = Instant::now();
        if now >= next_progress {
            progress(&format!(
                "    {:.0} s: {} of {} done",
                (now - start).as_secs_f64(),
                (rec.rpcs + rec.errors + failed).min(opts.count),
                opts.count
            ));
            next_progress = now + PROGRESS_EVERY;
        }
        if now >= deadline {
            for (id, (sent, _, counted)) in outstanding.drain() {
                if counted {
                    censored.push(now - sent);
                }
                let _ = client.abort(id);
            }
            break;
        }
        let wait = (deadline - now).min(next_progress.saturating_duration_since(now));
        match client.recv_any_response(Some(wait)) {
            Ok((id, result)) => {
                let Some((sent, tag, counted)) = outstanding.remove(&id) else {
                    continue;
                };
                let latency = sent.elapsed();
                if !counted {
                    if let Err(e) = result {
                        tracing::warn!("lossmatrix: warm-up RPC failed: {e}");
                    }
                    continue;
                }
                match result {
                    Ok(r) if r.len() == size && response_ok(tag, size, &r) => {
                        rec.record(size, size, latency);
                    }
                    Ok(r) if r.len() == size => {
                        tracing::warn!("lossmatrix: {size} B response with wrong bytes");
                        rec.record_content_error();
                    }
                    Ok(r) => {
                        tracing::warn!("lossmatrix: {} B response, expected {size} B", r.len());
                        rec.record_error();
                    }
                    Err(e) => {
                        tracing::warn!("lossmatrix: RPC failed: {e}");
                        rec.record_error();
                    }
                }
            }
            Err(homa::Error::Timeout) => {}
            Err(e) => return Err(PerfError::homa("recv_any_response", e)),
        }
    }
    let elapsed = start.elapsed();
    let stats = |e: &Endpoint| (e.runtime_stats(), e.metrics());
    let (cs, cm) = stats(&client);
    let (ss, sm) = server
        .homa_endpoint()
        .map(stats)
        .unwrap_or((cs, cm.clone()));
    client.shutdown();
    server.shutdown();
    let us = |d: Duration| (d.as_secs_f64() * 1e7).round() / 10.0;
    Ok(Cell {
        loss_pct: loss,
        size,
        outstanding: outstanding_max,
        count: opts.count,
        completed: rec.rpcs,
        failed: rec.errors + failed,
        content_errors: rec.content_errors,
        censored: censored.len() as u64,
        not_run: total - issued.max(opts.warmup),
        p50_us: rec.quantile_us(0.5),
        p99_us: rec.quantile_us(0.99),
        max_us: rec.quantile_us(1.0),
        censored_min_us: censored.iter().min().map(|&d| us(d)),
        elapsed_s: (elapsed.as_secs_f64() * 100.0).round() / 100.0,
        injected_drops: cs.injected_drops
            + cs.injected_recv_drops
            + ss.injected_drops
            + ss.injected_recv_drops,
        packets_received: cs.packets_received + ss.packets_received,
        resends: cm.resends_requested + sm.resends_requested + cm.fast_resends + sm.fast_resends,
    })
}

impl LossMatrix {
    /// The matrix as one line of JSON.
    pub fn to_json_string(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "null".to_string())
    }

    /// The matrix as a markdown table, one row per cell.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "Homa echo RPCs on loopback (MTU {} B), each end drops that share of the packets it \
             sends; {} RPCs a cell after {} of warm-up, {} s limit a cell.\n",
            self.mtu, self.count, self.warmup, self.cell_limit_s
        );
        let _ = writeln!(
            out,
            "| loss each way | size | outstanding | completed | failed | censored | not run | p50 µs | p99 µs | max µs | dropped pkts | RESENDs | wall s |"
        );
        let _ = writeln!(
            out,
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        );
        for c in self.cells.iter().chain(self.concurrent.iter()) {
            // With RPCs cut off or failed, the true quantile is at least
            // the one shown.
            let q = |v: Option<f64>| {
                let s = fmt_us(v);
                if c.incomplete() && v.is_some() {
                    format!("≥{s}")
                } else {
                    s
                }
            };
            let _ = writeln!(
                out,
                "| {}% | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} |",
                c.loss_pct,
                size_name(c.size),
                c.outstanding,
                c.completed,
                c.failed,
                c.censored,
                c.not_run,
                q(c.p50_us),
                q(c.p99_us),
                q(c.max_us),
                c.injected_drops,
                c.resends,
                c.elapsed_s
            );
        }
        if self
            .cells
            .iter()
            .chain(self.concurrent.iter())
            .any(Cell::incomplete)
        {
            let _ = writeln!(
                out,
                "\n≥: some RPCs of the cell failed, were cut off at the time limit (censored) or \
                 never ran; its percentiles are over the completed ones only, so the true ones \
                 are at least as high."
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tiny_matrix_runs_and_renders() {
        let mut opts = LossMatrixOptions::new();
        opts.losses = vec![0.0, 10.0];
        opts.sizes = vec![100, 30_000];
        opts.count = 20;
        opts.concurrent = Some((4, 10.0, 30_000));
        let mut lines = Vec::new();
        let m = run_loss_matrix(&opts, &mut |l| lines.push(l.to_string())).unwrap();
        assert_eq!(m.cells.len(), 4);
        for c in m.cells.iter().chain(m.concurrent.iter()) {
            assert_eq!(c.completed, 20, "{c:?}");
            assert_eq!(c.failed + c.censored + c.not_run, 0, "{c:?}");
        }
        assert!(m.cells[2].injected_drops > 0, "{:?}", m.cells[2]);
        let md = m.to_markdown();
        assert!(md.contains("| 10% | 30 KB | 1 | 20 |"), "{md}");
        assert!(md.contains("| 10% | 30 KB | 4 | 20 |"), "{md}");
        assert!(lines.iter().any(|l| l.starts_with("[5/5]")), "{lines:?}");
        let json: serde_json::Value = serde_json::from_str(&m.to_json_string()).unwrap();
        assert_eq!(json["cells"].as_array().map(Vec::len), Some(4));
    }

    #[test]
    fn bad_options_are_refused() {
        let mut o = LossMatrixOptions::new();
        o.losses = vec![100.0];
        assert!(o.validate().is_err());
        let mut o = LossMatrixOptions::new();
        o.count = 0;
        assert!(o.validate().is_err());
        let mut o = LossMatrixOptions::new();
        o.sizes = vec![1 << 30];
        assert!(o.validate().is_err());
    }
}
