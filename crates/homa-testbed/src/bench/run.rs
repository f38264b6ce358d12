//! One workload's runs: the idle round-trip times, then each variant
//! under load.

use super::backend::Backend;
use super::counters::homa_counters;
use super::link::{apply_overrides, link_config, offered_gbps, wire_factor, MAX_SIZE};
use super::nodes::{read_report, wait_all, CpuWindow, Node};
use super::store::UnitKey;
use super::{BenchArgs, DRAIN_S};
use crate::analysis::{self, Baseline};
use crate::report::{Variant, VariantRun, WorkloadResult};
use anyhow::{bail, Context, Result};
use homa_perf::cluster::{ClusterArgs, NodeReport};
use homa_perf::{Protocol, SizeDist};
use std::fs;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

/// What every run of one workload shares.
pub(super) struct RunCtx<'a> {
    pub(super) args: &'a BenchArgs,
    pub(super) backend: &'a dyn Backend,
    pub(super) key: &'a UnitKey,
    pub(super) rtt_ns: u64,
    /// The workload as the nodes name it: its name, or the path of its
    /// CSV file as they see it.
    pub(super) workload_arg: String,
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

impl<'a> RunCtx<'a> {
    /// The context of `key`'s runs on `backend`: shares the workload's
    /// CSV file (if it is one) with nodes that do not run here.
    pub(super) fn new(
        args: &'a BenchArgs,
        backend: &'a dyn Backend,
        key: &'a UnitKey,
    ) -> Result<RunCtx<'a>> {
        let mut workload_arg = key.workload.clone();
        let file = Path::new(&key.workload);
        if !backend.local() && file.is_file() {
            backend.share(file, "workload.csv")?;
            // Every host's copy has the same name in its own directory;
            // the node argument is per host (see `node_args`).
            workload_arg = "workload.csv".into();
        }
        Ok(RunCtx {
            args,
            backend,
            key,
            rtt_ns: args.rtt_ns(key.rate_mbit, key.mtu),
            workload_arg,
        })
    }

    fn hosts(&self) -> usize {
        self.backend.hosts()
    }

    fn addr(&self, host: usize) -> SocketAddr {
        self.backend.node_addr(host)
    }

    fn peers(&self) -> Vec<SocketAddr> {
        (0..self.hosts()).map(|h| self.addr(h)).collect()
    }

    /// Writes the Homa runtime configuration for this link, shares it with
    /// the nodes and returns its file name.
    /// With `bytedance`, the ByteDance mode is on (its batch sizes filled
    /// in as an endpoint would, [`homa::Config::effective_core`]).
    pub(super) fn homa_config(&self, priorities: u8, bytedance: bool) -> Result<String> {
        let mut config = link_config(
            self.key.rate_mbit,
            self.key.mtu,
            self.rtt_ns,
            self.args.nic_queue_packets,
        );
        config.core.num_priorities = priorities;
        if bytedance {
            config = config.with_bytedance();
        }
        let mut config = apply_overrides(&config, &self.args.homa_set)?;
        config.core = config
            .effective_core(config.core.lower_header_bytes)
            .context("the Homa configuration")?;
        let bd = if bytedance { "-bd" } else { "" };
        let name = format!("homa-{priorities}prio{bd}.toml");
        let path = self.backend.work().join(&name);
        let text = toml::to_string(&config).context("cannot write the Homa configuration")?;
        fs::write(&path, text)?;
        self.backend.share(&path, &name)?;
        Ok(name)
    }

    /// The report file of host `host`'s node in the run `tag`.
    fn report_name(tag: &str, host: usize) -> String {
        format!("{tag}-h{host}.json")
    }

    fn node_args(
        &self,
        host: usize,
        protocol: Protocol,
        config: Option<&str>,
        tag: &str,
    ) -> ClusterArgs {
        let mut a = ClusterArgs::new(self.addr(host), self.peers(), protocol);
        a.workload = Some(if self.workload_arg == self.key.workload {
            self.workload_arg.clone()
        } else {
            let path = self.backend.node_path(host, &self.workload_arg);
            path.to_string_lossy().into_owned()
        });
        a.max_size = MAX_SIZE;
        a.seed = 1 + host as u64;
        a.config = config.map(|c| self.backend.node_path(host, c));
        a.out = Some(self.backend.node_path(host, &Self::report_name(tag, host)));
        a
    }

    /// Reads host `host`'s report of the run `tag`.
    fn report(&self, tag: &str, host: usize) -> Result<NodeReport> {
        let path = self.backend.fetch(host, &Self::report_name(tag, host))?;
        read_report(Some(&path))
    }

    /// Host 0 probes every size one RPC at a time; the others serve.
    pub(super) fn unloaded(&self, config: &str) -> Result<Baseline> {
        let tag = format!("{}-unloaded", file_tag(&self.key.workload));
        let mut servers = Vec::new();
        for h in 1..self.hosts() {
            let mut a = self.node_args(h, Protocol::Homa, Some(config), &tag);
            a.server_only = true;
            // Stopped by the bench once the probe is done.
            a.seconds = 24.0 * 3600.0;
            servers.push(self.spawn(h, &a, &tag)?);
        }
        let mut a = self.node_args(0, Protocol::Homa, Some(config), &tag);
        a.unloaded = true;
        a.unloaded_points = self.args.unloaded_points;
        a.unloaded_count = self.args.unloaded_count as u64;
        a.peers = (1..self.hosts()).map(|h| self.addr(h)).collect();
        a.peers.push(self.addr(0));
        let prober = match self.spawn(0, &a, &tag) {
            Ok(p) => p,
            Err(e) => {
                servers.into_iter().for_each(Node::stop);
                return Err(e);
            }
        };
        let limit = Duration::from_secs(300);
        let outcome = wait_all(vec![prober], limit);
        servers.into_iter().for_each(Node::stop);
        outcome?;
        let report = self.report(&tag, 0)?;
        Baseline::new(report.unloaded.iter().map(|p| (p.size, p.min_ns)).collect())
    }

    pub(super) fn loaded(
        &self,
        variant: Variant,
        config: Option<&str>,
        workload: &SizeDist,
        baseline: &Baseline,
        bounds: &[u64],
    ) -> Result<VariantRun> {
        let tag = format!("{}-{}", file_tag(&self.key.workload), variant.name());
        let protocol = if variant == Variant::Tcp {
            Protocol::Tcp
        } else {
            Protocol::Homa
        };
        let gbps = offered_gbps(self.args.load, self.key.rate_mbit, self.key.mtu, workload);
        let mut argsets = Vec::new();
        for h in 0..self.hosts() {
            let mut a = self.node_args(h, protocol, config, &tag);
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
        let switch = self.backend.watch_switch()?;
        let started = Instant::now();
        let mut nodes = Vec::new();
        for (h, a) in argsets.iter().enumerate() {
            match self.spawn(h, a, &tag) {
                Ok(n) => nodes.push(n),
                Err(e) => {
                    nodes.into_iter().for_each(Node::stop);
                    return Err(e);
                }
            }
        }
        // Machine-wide CPU over the measured window (after the nodes found
        // each other and warmed up; a second is ample for the former), if
        // the nodes run on this machine.
        let window_start = Duration::from_secs_f64(1.0 + self.args.warmup);
        let window = Duration::from_secs_f64((self.args.seconds - 0.5).max(0.2));
        let cpu = if self.backend.local() {
            CpuWindow::measure(started, window_start, window)
        } else {
            None
        };
        let limit = Duration::from_secs_f64(self.args.warmup + self.args.seconds + DRAIN_S + 60.0);
        let outcome = wait_all(nodes, limit);
        let elapsed = started.elapsed().as_secs_f64();
        let switch = switch.map(|w| w.finish());
        outcome?;
        let (switch, ports) = match switch.transpose()? {
            Some((s, p)) => (Some(s), Some(p)),
            None => (None, None),
        };
        let mut reports = Vec::new();
        for h in 0..self.hosts() {
            reports.push(self.report(&tag, h)?);
        }
        let cpu_cores = match cpu {
            Some(c) => c.finish(),
            // Each host's node process, on average.
            None => {
                reports
                    .iter()
                    .map(|r| r.cpu_user_s + r.cpu_sys_s)
                    .sum::<f64>()
                    / elapsed
                    / self.hosts() as f64
            }
        };
        // Unfinished RPCs count with the time they had waited: a lower
        // bound, but leaving them out would flatter the tail.
        let rpcs: Vec<(u64, u64)> = reports
            .iter()
            .flat_map(|r| r.rpcs.iter().chain(&r.censored).copied())
            .collect();
        if rpcs.is_empty() {
            bail!(
                "{tag}: no RPC completed; see the node logs in {}",
                self.backend.work().display()
            );
        }
        let samples = analysis::slowdowns(&rpcs, baseline);
        let sum = |f: fn(&NodeReport) -> u64| reports.iter().map(f).sum::<u64>();
        let bytes = sum(|r| r.request_bytes + r.response_bytes);
        let window_s = reports.first().map_or(self.args.seconds, |r| r.seconds);
        Ok(VariantRun {
            variant,
            target_gbps: gbps,
            achieved_gbps: bytes as f64 * 8.0 / window_s / 1e9 / self.hosts() as f64,
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
            switch,
            ports,
            homa_counters: homa_counters(&reports),
        })
    }

    fn spawn(&self, host: usize, args: &ClusterArgs, tag: &str) -> Result<Node> {
        self.backend.spawn(host, args.to_args(), tag)
    }
}

/// A workload name fit for file names (a CSV file's path has slashes).
fn file_tag(workload: &str) -> String {
    workload.replace(['/', '.'], "_")
}
