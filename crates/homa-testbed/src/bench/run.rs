//! One workload's runs: the idle round-trip times, then each variant
//! under load.

use super::counters::{homa_counters, priority_totals};
use super::link::{apply_overrides, link_config, offered_gbps, wire_factor, MAX_SIZE};
use super::nodes::{read_report, spawn_node, wait_all, CpuWindow, Node};
use super::store::UnitKey;
use super::{BenchArgs, BACKLOG_INTERVAL, DRAIN_S, SERVER_PORT};
use crate::analysis::{self, Baseline};
use crate::cleanup;
use crate::netns::TestbedSpec;
use crate::report::{Variant, VariantRun, WorkloadResult};
use crate::tc::{self, BacklogSampler};
use anyhow::{bail, Context, Result};
use homa_perf::cluster::{ClusterArgs, NodeReport};
use homa_perf::{Protocol, SizeDist};
use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What every run of one workload shares.
pub(super) struct RunCtx<'a> {
    pub(super) args: &'a BenchArgs,
    pub(super) spec: &'a TestbedSpec,
    pub(super) exe: &'a Path,
    pub(super) work: &'a Path,
    pub(super) workload_name: &'a str,
    pub(super) rtt_ns: u64,
}

/// A workload's results from its idle round-trip times and its runs, with
/// the comparisons the report makes (TCP and one priority level against
/// Homa with eight).
pub(super) fn workload_result(
    name: &str,
    key: &UnitKey,
    workload: &SizeDist,
    rtt_ns: u64,
    baseline: &Baseline,
    runs: Vec<VariantRun>,
) -> WorkloadResult {
    let cmp = |a: Variant, b: Variant| {
        let (x, y) = (
            runs.iter().find(|r| r.variant == a)?,
            runs.iter().find(|r| r.variant == b)?,
        );
        Some(analysis::compare(
            (&x.short_half, &x.buckets),
            (&y.short_half, &y.buckets),
        ))
    };
    let tcp_vs_homa = cmp(Variant::Homa, Variant::Tcp);
    let one_vs_eight = cmp(Variant::Homa, Variant::Homa1Prio);
    WorkloadResult {
        workload: name.to_string(),
        rate_mbit: key.rate_mbit,
        mtu: key.mtu,
        wire_factor: wire_factor(workload, key.mtu),
        rtt_ns,
        baseline: baseline.points().to_vec(),
        runs,
        tcp_vs_homa,
        one_vs_eight,
    }
}

impl RunCtx<'_> {
    fn addr(&self, host: usize) -> SocketAddr {
        SocketAddr::new(self.spec.host_ip(host).into(), SERVER_PORT)
    }

    fn peers(&self) -> Vec<SocketAddr> {
        (0..self.spec.hosts).map(|h| self.addr(h)).collect()
    }

    /// Writes the Homa runtime configuration for this link and returns its path.
    pub(super) fn homa_config(&self, priorities: u8) -> Result<PathBuf> {
        let mut config = link_config(
            self.spec.rate_mbit,
            self.spec.mtu,
            self.rtt_ns,
            self.args.nic_queue_packets,
        );
        config.core.num_priorities = priorities;
        let config = apply_overrides(&config, &self.args.homa_set)?;
        let path = self.work.join(format!("homa-{priorities}prio.toml"));
        let text = toml::to_string(&config).context("cannot write the Homa configuration")?;
        fs::write(&path, text)?;
        Ok(path)
    }

    fn node_args(&self, host: usize, protocol: Protocol, tag: &str) -> ClusterArgs {
        let mut a = ClusterArgs::new(self.addr(host), self.peers(), protocol);
        a.workload = Some(self.workload_name.to_string());
        a.max_size = MAX_SIZE;
        a.seed = 1 + host as u64;
        a.out = Some(self.work.join(format!("{tag}-h{host}.json")));
        a
    }

    /// Host 0 probes every size one RPC at a time; the others serve.
    pub(super) fn unloaded(&self, config: &Path) -> Result<Baseline> {
        let tag = format!("{}-unloaded", self.workload_name);
        let mut servers = Vec::new();
        for h in 1..self.spec.hosts {
            let mut a = self.node_args(h, Protocol::Homa, &tag);
            a.config = Some(config.to_path_buf());
            a.server_only = true;
            // Stopped by the bench once the probe is done.
            a.seconds = 24.0 * 3600.0;
            servers.push(self.spawn(h, &a, &tag)?);
        }
        let mut a = self.node_args(0, Protocol::Homa, &tag);
        a.config = Some(config.to_path_buf());
        a.unloaded = true;
        a.unloaded_points = self.args.unloaded_points;
        a.unloaded_count = self.args.unloaded_count as u64;
        a.peers = (1..self.spec.hosts).map(|h| self.addr(h)).collect();
        a.peers.push(self.addr(0));
        let prober = self.spawn(0, &a, &tag)?;
        let limit = Duration::from_secs(300);
        let outcome = wait_all(vec![prober], limit);
        for mut s in servers {
            let _ = s.child.kill();
            let _ = s.child.wait();
            cleanup::unregister_child(s.child.id());
        }
        outcome?;
        let report = read_report(a.out.as_deref())?;
        Baseline::new(report.unloaded.iter().map(|p| (p.size, p.min_ns)).collect())
    }

    pub(super) fn loaded(
        &self,
        variant: Variant,
        config: Option<PathBuf>,
        workload: &SizeDist,
        baseline: &Baseline,
        bounds: &[u64],
    ) -> Result<VariantRun> {
        let tag = format!("{}-{}", self.workload_name, variant.name());
        let protocol = if variant == Variant::Tcp {
            Protocol::Tcp
        } else {
            Protocol::Homa
        };
        let gbps = offered_gbps(self.args.load, self.spec.rate_mbit, self.spec.mtu, workload);
        let mut argsets = Vec::new();
        for h in 0..self.spec.hosts {
            let mut a = self.node_args(h, protocol, &tag);
            a.config = config.clone();
            a.gbps = gbps;
            a.seconds = self.args.seconds;
            a.warmup = self.args.warmup;
            a.client_max = self.args.client_max;
            a.tcp_connections = self.args.tcp_connections;
            // Under SRPT at 80% load the longest messages can wait seconds;
            // they are measured, not given up on.
            a.timeout_ms = 120_000;
            a.drain = DRAIN_S;
            argsets.push(a);
        }
        let before = tc::switch_port_stats(self.spec)?;
        let sampler = BacklogSampler::start(self.spec, BACKLOG_INTERVAL);
        let started = Instant::now();
        let mut nodes = Vec::new();
        for (h, a) in argsets.iter().enumerate() {
            nodes.push(self.spawn(h, a, &tag)?);
        }
        // Machine-wide CPU over the measured window (after the nodes found
        // each other and warmed up; a second is ample for the former).
        let window_start = Duration::from_secs_f64(1.0 + self.args.warmup);
        let window = Duration::from_secs_f64((self.args.seconds - 0.5).max(0.2));
        let cpu = CpuWindow::measure(started, window_start, window);
        let limit = Duration::from_secs_f64(self.args.warmup + self.args.seconds + DRAIN_S + 60.0);
        let outcome = wait_all(nodes, limit);
        let peaks = sampler.stop();
        outcome?;
        let after = tc::switch_port_stats(self.spec)?;
        let cpu_cores = cpu.map(|c| c.finish()).unwrap_or(f64::NAN);
        let mut reports = Vec::new();
        for a in &argsets {
            reports.push(read_report(a.out.as_deref())?);
        }
        // Unfinished RPCs count with the time they had waited: a lower
        // bound, but leaving them out would flatter the tail.
        let rpcs: Vec<(u64, u64)> = reports
            .iter()
            .flat_map(|r| r.rpcs.iter().chain(&r.censored).copied())
            .collect();
        if rpcs.is_empty() {
            bail!(
                "{tag}: no RPC completed; see the node logs in {}",
                self.work.display()
            );
        }
        let samples = analysis::slowdowns(&rpcs, baseline);
        let ports = tc::delta(&before, &after);
        let sum = |f: fn(&NodeReport) -> u64| reports.iter().map(f).sum::<u64>();
        let bytes = sum(|r| r.request_bytes + r.response_bytes);
        let window_s = reports.first().map_or(self.args.seconds, |r| r.seconds);
        Ok(VariantRun {
            variant,
            target_gbps: gbps,
            achieved_gbps: bytes as f64 * 8.0 / window_s / 1e9 / self.spec.hosts as f64,
            completed: sum(|r| r.completed),
            errors: sum(|r| r.errors),
            skipped: sum(|r| r.skipped),
            unfinished: sum(|r| r.unfinished),
            max_send_lag_us: reports
                .iter()
                .map(|r| r.max_send_lag_us)
                .fold(0.0, f64::max),
            cpu_cores,
            buckets: analysis::spectrum(&samples, workload, bounds),
            short_half: analysis::short_half(&samples, workload),
            switch: priority_totals(&ports, &peaks),
            ports,
            homa_counters: homa_counters(&reports),
        })
    }

    fn spawn(&self, host: usize, args: &ClusterArgs, tag: &str) -> Result<Node> {
        spawn_node(
            self.spec,
            self.work,
            self.exe,
            host,
            "node",
            args.to_args(),
            tag,
        )
    }
}
