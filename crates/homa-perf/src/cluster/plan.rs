//! The run plan: the flags checked and turned into what a node's run
//! needs (mode, peers, sizes, arrival rate, durations, seed).

use super::{ClusterArgs, NodeReport, ResponseSize};
use crate::error::{check_cluster_addr, PerfError};
use crate::proto::{Protocol, MAX_TCP_MESSAGE};
use crate::workload::SizeSpec;
use homa_measure::SizeDist;
use std::net::SocketAddr;
use std::time::Duration;

/// What a node does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    Loaded,
    Unloaded,
    Server,
}

impl Mode {
    pub(super) fn name(self) -> &'static str {
        match self {
            Mode::Loaded => "loaded",
            Mode::Unloaded => "unloaded",
            Mode::Server => "server",
        }
    }
}

/// The flags, checked and turned into what the run needs.
pub(super) struct Plan {
    pub(super) me: SocketAddr,
    pub(super) peers: Vec<SocketAddr>,
    pub(super) protocol: Protocol,
    pub(super) mode: Mode,
    /// `None` only for a server given neither --workload nor --size.
    pub(super) sizes: Option<SizeSpec>,
    label: String,
    pub(super) response: ResponseSize,
    /// Distinct request sizes a draw can return, with their probabilities.
    pub(super) masses: Vec<(u64, f64)>,
    gbps: f64,
    /// Poisson arrival rate (RPCs/s).
    pub(super) rate: f64,
    pub(super) window: Duration,
    pub(super) warmup: Duration,
    pub(super) drain: Duration,
    pub(super) linger: Duration,
    pub(super) ready_timeout: Duration,
    pub(super) timeout: Duration,
    pub(super) client_max: usize,
    pub(super) tcp_connections: usize,
    pub(super) server_threads: usize,
    pub(super) homa_config: ::homa::Config,
    pub(super) unloaded_points: usize,
    pub(super) unloaded_count: u64,
    pub(super) seed: u64,
}

impl Plan {
    pub(super) fn new(a: &ClusterArgs) -> Result<Plan, PerfError> {
        let usage = |m: String| Err(PerfError::Usage(m));
        if a.protocol == Protocol::Udp {
            return usage(
                "cluster mode runs --protocol homa or tcp; udp has no loss recovery, \
                 so it cannot carry a loaded cluster's traffic"
                    .into(),
            );
        }
        let mode = match (a.server_only, a.unloaded) {
            (true, true) => return usage("--server-only and --unloaded exclude each other".into()),
            (true, false) => Mode::Server,
            (false, true) => Mode::Unloaded,
            (false, false) => Mode::Loaded,
        };
        check_cluster_addr(a.me)?;
        if a.me.port() == 0 {
            return usage(format!(
                "--me {} needs a port: the other nodes must know it",
                a.me
            ));
        }
        for &p in &a.peers {
            check_cluster_addr(p)?;
            if p.is_ipv4() != a.me.is_ipv4() {
                return usage(format!(
                    "peer {p} and --me {} are of different IP versions",
                    a.me
                ));
            }
        }
        let peers: Vec<SocketAddr> = a.peers.iter().copied().filter(|&p| p != a.me).collect();
        if peers.is_empty() && mode != Mode::Server {
            return usage(format!(
                "--peers lists no node other than --me {}: nobody to send to",
                a.me
            ));
        }
        if a.max_size == 0 {
            return usage("--max-size must be at least 1 byte".into());
        }
        let (sizes, label, masses) = match (&a.workload, a.size) {
            (Some(_), Some(_)) => return usage("give --workload or --size, not both".into()),
            (None, None) if mode == Mode::Server => (None, "none".to_string(), Vec::new()),
            (None, None) => return usage("give --workload w1..w5 or --size N".into()),
            (None, Some(n)) => {
                if n > a.max_size {
                    return usage(format!("--size {n} exceeds --max-size {}", a.max_size));
                }
                let spec = SizeSpec::Fixed(to_usize(n)?);
                (Some(spec), format!("fixed:{n}"), vec![(n, 1.0)])
            }
            (Some(w), None) => {
                let workload = SizeDist::by_name(w)?;
                let masses = size_masses(&workload, a.max_size);
                let label = workload.name().to_string();
                let spec = SizeSpec::Workload {
                    workload,
                    max: to_usize(a.max_size)?,
                };
                (Some(spec), label, masses)
            }
        };
        let homa_config = match (&a.config, a.protocol) {
            (Some(path), Protocol::Homa) => ::homa::Config::from_toml_file(path).map_err(|e| {
                PerfError::homa(format!("load Homa configuration {}", path.display()), e)
            })?,
            _ => ::homa::Config::default(),
        };
        // Nothing may exceed what the transport carries: the server would
        // truncate the response and every RPC would count as an error.
        let largest_request = masses.iter().map(|&(s, _)| s).max().unwrap_or(0);
        let largest_response = masses
            .iter()
            .map(|&(s, _)| a.response_size.expected(s))
            .max()
            .unwrap_or(0);
        let (limit, what) = match a.protocol {
            Protocol::Homa => (
                u64::from(homa_config.core.max_message_size),
                "the Homa configuration's max_message_size",
            ),
            _ => (MAX_TCP_MESSAGE as u64, "the TCP message limit"),
        };
        if largest_request.max(largest_response) > limit {
            return usage(format!(
                "requests of up to {largest_request} B and responses of up to \
                 {largest_response} B exceed {what} ({limit} B); lower --max-size or \
                 --response-size"
            ));
        }
        if !(a.gbps.is_finite() && a.gbps > 0.0) {
            return usage(format!("--gbps must be a positive number, got {}", a.gbps));
        }
        let mean_request = match &sizes {
            Some(SizeSpec::Workload { workload, .. }) => workload.capped(a.max_size).mean(),
            _ => masses.iter().map(|&(s, p)| s as f64 * p).sum(),
        };
        let mean_response: f64 = masses
            .iter()
            .map(|&(s, p)| a.response_size.expected(s) as f64 * p)
            .sum();
        let rate = a.gbps * 1e9 / 8.0 / (mean_request + mean_response);
        if mode == Mode::Loaded && !(rate.is_finite() && rate > 0.0) {
            return usage("requests and responses are all empty: no rate gives that load".into());
        }
        let count = |v: u64, flag: &str| {
            if v == 0 {
                Err(PerfError::Usage(format!("{flag} must be at least 1")))
            } else {
                Ok(v)
            }
        };
        Ok(Plan {
            me: a.me,
            peers,
            protocol: a.protocol,
            mode,
            sizes,
            label,
            response: a.response_size,
            masses,
            gbps: a.gbps,
            rate,
            window: seconds(a.seconds, "--seconds", false)?,
            warmup: seconds(a.warmup, "--warmup", true)?,
            drain: seconds(a.drain, "--drain", true)?,
            linger: seconds(a.linger, "--linger", true)?,
            ready_timeout: seconds(a.ready_timeout, "--ready-timeout", false)?,
            timeout: Duration::from_millis(count(a.timeout_ms, "--timeout-ms")?),
            client_max: count(a.client_max as u64, "--client-max")? as usize,
            tcp_connections: count(a.tcp_connections as u64, "--tcp-connections")? as usize,
            server_threads: count(a.server_threads as u64, "--server-threads")? as usize,
            homa_config,
            unloaded_points: a.unloaded_points,
            unloaded_count: count(a.unloaded_count, "--unloaded-count")?,
            seed: node_seed(a.seed, a.me),
        })
    }

    /// The largest request this node sends.
    pub(super) fn max_request(&self) -> usize {
        self.sizes.as_ref().map_or(0, SizeSpec::max)
    }

    /// A report with the run's description and no measurements yet.
    pub(super) fn empty_report(&self) -> NodeReport {
        let loaded = self.mode == Mode::Loaded;
        NodeReport {
            protocol: self.protocol.name().to_string(),
            mode: self.mode.name().to_string(),
            workload: self.label.clone(),
            me: self.me.to_string(),
            peers: self.peers.iter().map(|p| p.to_string()).collect(),
            target_gbps: if loaded { self.gbps } else { 0.0 },
            offered_rate_rps: if loaded { self.rate } else { 0.0 },
            seconds: if loaded {
                self.window.as_secs_f64()
            } else {
                0.0
            },
            issued: 0,
            completed: 0,
            errors: 0,
            skipped: 0,
            unfinished: 0,
            request_bytes: 0,
            response_bytes: 0,
            max_send_lag_us: 0.0,
            rpcs: Vec::new(),
            censored: Vec::new(),
            unloaded: Vec::new(),
            cpu_user_s: 0.0,
            cpu_sys_s: 0.0,
            homa: None,
            bytedance_peers: Vec::new(),
        }
    }
}

fn to_usize(n: u64) -> Result<usize, PerfError> {
    usize::try_from(n).map_err(|_| PerfError::Usage(format!("{n} bytes is too large here")))
}

fn seconds(s: f64, flag: &str, zero_ok: bool) -> Result<Duration, PerfError> {
    let ok = s.is_finite() && s <= 1e6 && (s > 0.0 || (zero_ok && s == 0.0));
    if !ok {
        let what = if zero_ok { "non-negative" } else { "positive" };
        return Err(PerfError::Usage(format!(
            "{flag} must be a {what} number of seconds, got {s}"
        )));
    }
    Ok(Duration::from_secs_f64(s))
}

/// Mixes the node's address into the seed so that hosts differ, the same
/// way on every run (FNV-1a: stable across Rust versions, unlike std's
/// hasher).
fn node_seed(seed: u64, me: SocketAddr) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in me.to_string().bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Every size `workload` can draw, capped at `cap` bytes, with its
/// probability, ascending.
fn size_masses(workload: &SizeDist, cap: u64) -> Vec<(u64, f64)> {
    workload.capped(cap).rows().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masses_cover_the_distribution() {
        let w = SizeDist::from_csv_str("t", "size_bytes,cdf\n2,0.25\n10,0.25\n20,0.75\n40,1\n")
            .unwrap();
        let m = size_masses(&w, 30);
        let sizes: Vec<u64> = m.iter().map(|&(s, _)| s).collect();
        assert_eq!(sizes, vec![2, 20, 30]);
        let probs: Vec<f64> = m.iter().map(|&(_, p)| p).collect();
        for (p, want) in probs.iter().zip([0.25, 0.5, 0.25]) {
            assert!((p - want).abs() < 1e-12, "{m:?}");
        }
    }

    #[test]
    fn masses_match_the_workload_mean() {
        for name in homa_measure::BUILTIN {
            let w = SizeDist::by_name(name).unwrap();
            let m = size_masses(&w, 1_000_000);
            let total: f64 = m.iter().map(|&(_, p)| p).sum();
            assert!((total - 1.0).abs() < 1e-9, "{name}: {total}");
            let mean: f64 = m.iter().map(|&(s, p)| s as f64 * p).sum();
            let exact = w.capped(1_000_000).mean();
            assert!(
                (mean - exact).abs() / exact < 1e-9,
                "{name}: {mean} vs {exact}"
            );
        }
    }

    #[test]
    fn arrival_rate_counts_both_directions() {
        let me: SocketAddr = "127.0.0.1:1000".parse().unwrap();
        let peer: SocketAddr = "127.0.0.1:1001".parse().unwrap();
        let mut a = ClusterArgs::new(me, vec![me, peer], Protocol::Tcp);
        a.size = Some(1_000);
        a.gbps = 0.016;
        // 2 MB/s over 2,000 B per RPC.
        let plan = Plan::new(&a).unwrap();
        assert!((plan.rate - 1_000.0).abs() < 1e-6, "{}", plan.rate);
        a.response_size = ResponseSize::Bytes(3_000);
        assert!((Plan::new(&a).unwrap().rate - 500.0).abs() < 1e-6);
    }

    #[test]
    fn node_seeds_differ_by_address() {
        let a: SocketAddr = "10.0.0.1:4000".parse().unwrap();
        let b: SocketAddr = "10.0.0.2:4000".parse().unwrap();
        assert_ne!(node_seed(1, a), node_seed(1, b));
        assert_eq!(node_seed(1, a), node_seed(1, a));
    }
}
