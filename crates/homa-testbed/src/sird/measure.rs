//! Running one phase of an experiment on the testbed and measuring it:
//! the nodes, the switch-queue sampler, the CPU window.

use std::collections::BTreeMap;
use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};

use super::{
    cdf_points, congested_plan, goodput_mbps, incast_plan, quantiles, CongestedRun, IncastRun,
    QueueStats, Role, SirdArgs, Variant, PORT, STARTUP_S,
};
use crate::bench::{self, wait_all, Node};
use crate::cleanup;
use crate::netns::{self, TestbedSpec};
use crate::sird_node::{NodeArgs, NodeOutcome, LINGER_S};
use crate::sird_sniff::{self, FlagCounts};
use crate::tc;

/// What the runs of one experiment share.
pub(super) struct Ctx<'a> {
    pub(super) args: &'a SirdArgs,
    pub(super) spec: &'a TestbedSpec,
    pub(super) exe: &'a Path,
    pub(super) work: &'a Path,
}

/// What a phase watches besides its nodes.
#[derive(Clone, Copy, Default)]
struct Taps<'a> {
    /// Switch ports whose queues are sampled.
    queues: &'a [usize],
    /// A switch port whose DATA packets are counted by sender.
    sniff: Option<usize>,
}

/// The nodes of one phase, their options and what they reported.
struct Phase {
    args: Vec<NodeArgs>,
    outcomes: Vec<NodeOutcome>,
    cpu_cores: f64,
    node_cores: f64,
    queues: Vec<PortSamples>,
    /// `csn` counts on the sniffed port, if one was.
    csn: BTreeMap<String, FlagCounts>,
}

impl Ctx<'_> {
    fn addr(&self, host: usize) -> SocketAddr {
        SocketAddr::new(self.spec.host_ip(host).into(), PORT)
    }

    pub(super) fn write_config(&self, variant: Variant) -> Result<PathBuf> {
        let config = self.args.config(variant)?;
        let path = self.work.join(format!("{}.toml", variant.name()));
        fs::write(&path, toml::to_string(&config)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(path)
    }

    /// Runs `roles` for `seconds` after `warmup`, sampling the backlog of
    /// the switch ports towards `watch`.
    fn phase(
        &self,
        tag: &str,
        roles: &[Role],
        config: &Path,
        warmup: f64,
        seconds: f64,
        taps: Taps<'_>,
    ) -> Result<Phase> {
        let (watch, sniff) = (taps.queues, taps.sniff);
        let start_unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as u64
            + (STARTUP_S * 1e3) as u64;
        let argsets: Vec<NodeArgs> = roles
            .iter()
            .map(|r| NodeArgs {
                me: self.addr(r.host),
                config: config.to_path_buf(),
                targets: r.targets.iter().map(|&t| self.addr(t)).collect(),
                size: r.size.max(1),
                record_rtts: r.probe,
                start_unix_ms,
                warmup,
                seconds,
                out: self.work.join(format!("{tag}-h{}.json", r.host)),
            })
            .collect();
        for a in &argsets {
            let _ = fs::remove_file(&a.out);
        }
        let sampler = QueueSampler::start(
            self.spec,
            watch,
            Duration::from_millis(self.args.sample_ms),
            Instant::now() + Duration::from_secs_f64(STARTUP_S + warmup),
            Duration::from_secs_f64(seconds),
        );
        let launched = Instant::now();
        let mut nodes = Vec::new();
        let sniff_out = self.work.join(format!("{tag}-sniff.json"));
        let _ = fs::remove_file(&sniff_out);
        if let Some(port) = sniff {
            // The middle of the window, at most 3 s (it costs CPU).
            let len = (seconds / 2.0).min(3.0);
            let argv = vec![
                "sird-sniff".to_string(),
                "--dev".into(),
                format!("p{port}"),
                "--delay".into(),
                (STARTUP_S + warmup + (seconds - len) / 2.0).to_string(),
                "--seconds".into(),
                len.to_string(),
                "--out".into(),
                sniff_out.display().to_string(),
            ];
            let log_path = self.work.join(format!("{tag}-sniff.log"));
            let log = fs::File::create(&log_path)?;
            let mut cmd = netns::command_in(&self.spec.switch_ns(), self.exe.as_os_str(), &argv);
            cmd.stdin(Stdio::null())
                .stdout(log.try_clone()?)
                .stderr(log)
                .env("RUST_BACKTRACE", "0");
            let child = cmd.spawn().context("cannot start the packet counter")?;
            cleanup::register_child(child.id());
            nodes.push(Node {
                child,
                host: usize::MAX,
                log: log_path,
                _stdin: None,
            });
        }
        for (r, a) in roles.iter().zip(&argsets) {
            match self.spawn(r.host, a, tag) {
                Ok(n) => nodes.push(n),
                Err(e) => {
                    let _ = wait_all(nodes, Duration::ZERO);
                    return Err(e);
                }
            }
        }
        let cpu = CpuWindow::start(
            launched + Duration::from_secs_f64(STARTUP_S + warmup),
            Duration::from_secs_f64(seconds),
        );
        let limit = Duration::from_secs_f64(STARTUP_S + warmup + seconds + LINGER_S + 30.0);
        let outcome = wait_all(nodes, limit);
        let lifetime_s = launched.elapsed().as_secs_f64();
        let queues = sampler.stop();
        let cpu_cores = cpu.finish();
        outcome?;
        let outcomes = argsets
            .iter()
            .map(|a| {
                let text = fs::read_to_string(&a.out)
                    .with_context(|| format!("cannot read {}", a.out.display()))?;
                serde_json::from_str(&text).with_context(|| format!("bad {}", a.out.display()))
            })
            .collect::<Result<Vec<NodeOutcome>>>()?;
        let node_cores = outcomes.iter().map(|o| o.cpu_s).sum::<f64>() / lifetime_s;
        let csn = if sniff.is_some() {
            sird_sniff::read(&sniff_out)?
        } else {
            BTreeMap::new()
        };
        Ok(Phase {
            args: argsets,
            outcomes,
            cpu_cores,
            node_cores,
            queues,
            csn,
        })
    }

    fn spawn(&self, host: usize, args: &NodeArgs, tag: &str) -> Result<Node> {
        let (spec, work, exe) = (self.spec, self.work, self.exe);
        bench::spawn_node(spec, work, exe, host, "sird-node", args.to_args(), tag)
    }

    /// Runs `roles` for the measured window (`--seconds` after
    /// `--warmup`), with what the switch ports counted meanwhile.
    fn measured(
        &self,
        tag: &str,
        roles: &[Role],
        config: &Path,
        taps: Taps<'_>,
    ) -> Result<(Phase, Vec<tc::ClassStats>)> {
        let before = tc::switch_port_stats(self.spec)?;
        let phase = self.phase(
            tag,
            roles,
            config,
            self.args.warmup,
            self.args.seconds,
            taps,
        )?;
        let after = tc::switch_port_stats(self.spec)?;
        Ok((phase, tc::delta(&before, &after)))
    }

    pub(super) fn incast(
        &self,
        variant: Variant,
        repeat: usize,
        config: &Path,
    ) -> Result<IncastRun> {
        let a = self.args;
        let plan = incast_plan(a.senders, a.size);
        let receiver = 0;
        let prober = a.senders + 1;
        let tag = format!("incast-{}-{repeat}", variant.name());
        // Idle: the prober and the receiver only.
        let idle_roles: Vec<Role> = plan
            .iter()
            .filter(|r| r.host == receiver || r.host == prober)
            .cloned()
            .collect();
        let idle = self.phase(
            &format!("{tag}-idle"),
            &idle_roles,
            config,
            0.5,
            a.unloaded_seconds,
            Taps::default(),
        )?;
        let mut idle_rtts = probe_rtts(&idle);
        let unloaded = quantiles(&mut idle_rtts);
        let (loaded_phase, ports) = self.measured(
            &tag,
            &plan,
            config,
            Taps {
                queues: &[receiver],
                sniff: None,
            },
        )?;
        let mut rtts = probe_rtts(&loaded_phase);
        let loaded = quantiles(&mut rtts);
        if loaded.count == 0 {
            bail!("{tag}: no probe completed; logs in {}", self.work.display());
        }
        let rx = &loaded_phase.outcomes[receiver];
        let window = rx.window_s;
        let sender_goodput_mbps = (1..=a.senders)
            .map(|h| {
                let ip = self.spec.host_ip(h).to_string();
                goodput_mbps(
                    rx.served_bytes_by_peer.get(&ip).copied().unwrap_or(0),
                    window,
                )
            })
            .collect();
        let watched = loaded_phase
            .queues
            .iter()
            .find(|p| p.port == receiver)
            .cloned()
            .unwrap_or_default();
        let mut samples = watched.backlog.clone();
        let mut queue = QueueStats::from_samples(&mut samples);
        let port = ports
            .into_iter()
            .filter(|c| c.port == receiver)
            .fold((0, 0), |(d, b), c| (d + c.drops, b + c.bytes));
        queue.drops = port.0;
        queue.sent_bytes = port.1;
        let all = idle.outcomes.iter().chain(&loaded_phase.outcomes);
        Ok(IncastRun {
            variant: variant.name().into(),
            repeat,
            unloaded,
            loaded,
            unloaded_cdf: cdf_points(&idle_rtts, 200),
            loaded_cdf: cdf_points(&rtts, 200),
            probe_errors: loaded_phase.outcomes[prober]
                .clients
                .iter()
                .map(|c| c.errors)
                .sum(),
            goodput_mbps: goodput_mbps(rx.served_bytes, window),
            sender_goodput_mbps,
            queue,
            link_mbps: watched.rate_mbps(),
            cpu_cores: loaded_phase.cpu_cores,
            node_cores: loaded_phase.node_cores,
            designs: loaded_phase
                .outcomes
                .iter()
                .map(|o| o.design.clone())
                .collect(),
            config_checked: all.clone().all(|o| config_matches(variant, o)),
            ce_received: all.map(|o| o.ce_received).sum(),
        })
    }

    pub(super) fn congested(
        &self,
        variant: Variant,
        repeat: usize,
        config: &Path,
    ) -> Result<CongestedRun> {
        let a = self.args;
        let plan = congested_plan(a.receivers, a.size, a.other_size);
        let tag = format!("congested-{}-{repeat}", variant.name());
        let receivers: Vec<usize> = (1..=a.receivers).collect();
        let (phase, ports) = self.measured(
            &tag,
            &plan,
            config,
            Taps {
                queues: &receivers,
                sniff: Some(1),
            },
        )?;
        let congested_ip = self.spec.host_ip(0).to_string();
        let (mut total, mut from_c, mut from_o) = (Vec::new(), Vec::new(), Vec::new());
        for &r in &receivers {
            let o = &phase.outcomes[r];
            let other_ip = self.spec.host_ip(a.receivers + r).to_string();
            let get = |ip: &str| o.served_bytes_by_peer.get(ip).copied().unwrap_or(0);
            total.push(goodput_mbps(o.served_bytes, o.window_s));
            from_c.push(goodput_mbps(get(&congested_ip), o.window_s));
            from_o.push(goodput_mbps(get(&other_ip), o.window_s));
        }
        let drops = ports
            .iter()
            .filter(|c| receivers.contains(&c.port))
            .map(|c| c.drops)
            .sum();
        let receiver_link_mbps = phase.queues.iter().map(|p| p.rate_mbps()).collect();
        Ok(CongestedRun {
            variant: variant.name().into(),
            repeat,
            aggregate_mbps: total.iter().sum(),
            receiver_goodput_mbps: total,
            from_congested_mbps: from_c,
            from_other_mbps: from_o,
            drops,
            max_backlog_bytes: phase
                .queues
                .iter()
                .flat_map(|p| p.backlog.iter().copied())
                .max()
                .unwrap_or(0),
            cpu_cores: phase.cpu_cores,
            node_cores: phase.node_cores,
            receiver_link_mbps,
            designs: phase.outcomes.iter().map(|o| o.design.clone()).collect(),
            config_checked: phase.outcomes.iter().all(|o| config_matches(variant, o)),
            csn_into_first_receiver: phase.csn.clone(),
            errors: phase
                .outcomes
                .iter()
                .flat_map(|o| &o.clients)
                .map(|c| c.errors)
                .sum(),
        })
    }
}

/// Whether an endpoint ran `variant`'s configuration.
pub fn config_matches(variant: Variant, o: &NodeOutcome) -> bool {
    match variant {
        Variant::Homa => o.design == "homa",
        Variant::SirdPaced | Variant::SirdSthrHalf => {
            o.design == "sird" && o.pace_credit && o.sender_threshold != u32::MAX
        }
        Variant::SirdUnpaced => o.design == "sird" && !o.pace_credit,
        Variant::SirdSthrInf => o.design == "sird" && o.sender_threshold == u32::MAX,
    }
}

fn probe_rtts(phase: &Phase) -> Vec<u64> {
    phase
        .args
        .iter()
        .zip(&phase.outcomes)
        .filter(|(a, _)| a.record_rtts)
        .flat_map(|(_, o)| o.clients.iter().flat_map(|c| c.rtts_ns.iter().copied()))
        .collect()
}

/// What the sampler saw at one switch port in the window.
#[derive(Debug, Clone, Default)]
struct PortSamples {
    port: usize,
    /// Backlog samples (bytes).
    backlog: Vec<u64>,
    /// (time, bytes sent so far) of the first and the latest sample.
    first: Option<(Instant, u64)>,
    last: Option<(Instant, u64)>,
}

impl PortSamples {
    /// Mbit/s the port sent between the first and the last sample.
    fn rate_mbps(&self) -> f64 {
        match (self.first, self.last) {
            (Some((t0, b0)), Some((t1, b1))) if t1 > t0 => {
                goodput_mbps(b1.saturating_sub(b0), t1.duration_since(t0).as_secs_f64())
            }
            _ => f64::NAN,
        }
    }
}

/// Samples the backlog and byte counter of some switch ports in a
/// background thread within a window.
struct QueueSampler {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<Vec<PortSamples>>,
}

impl QueueSampler {
    fn start(
        spec: &TestbedSpec,
        ports: &[usize],
        every: Duration,
        from: Instant,
        len: Duration,
    ) -> QueueSampler {
        let (stop, stopped) = mpsc::channel::<()>();
        let ns = spec.switch_ns();
        let ports = ports.to_vec();
        let thread = std::thread::spawn(move || {
            let mut out: Vec<PortSamples> = ports
                .iter()
                .map(|&port| PortSamples {
                    port,
                    ..Default::default()
                })
                .collect();
            if ports.is_empty() {
                return out;
            }
            if stopped
                .recv_timeout(from.saturating_duration_since(Instant::now()))
                .is_ok()
            {
                return out;
            }
            let end = from + len;
            while Instant::now() < end {
                let t = Instant::now();
                for p in out.iter_mut() {
                    if let Some((backlog, bytes)) = port_counters(&ns, p.port) {
                        let now = Instant::now();
                        p.backlog.push(backlog);
                        p.first.get_or_insert((now, bytes));
                        p.last = Some((now, bytes));
                    }
                }
                match stopped.recv_timeout(every.saturating_sub(t.elapsed())) {
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    _ => break,
                }
            }
            out
        });
        QueueSampler { stop, thread }
    }

    fn stop(self) -> Vec<PortSamples> {
        let _ = self.stop.send(());
        self.thread.join().unwrap_or_default()
    }
}

/// (bytes queued now, bytes sent so far) at switch port `p{port}`, over
/// all its leaves.
fn port_counters(switch_ns: &str, port: usize) -> Option<(u64, u64)> {
    let out = Command::new("tc")
        .args(["-n", switch_ns, "-s", "-j", "qdisc", "show", "dev"])
        .arg(format!("p{port}"))
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let qdiscs = tc::parse_qdisc_json(&String::from_utf8_lossy(&out.stdout)).ok()?;
    let leaves = qdiscs.iter().filter(|q| q.kind == "bfifo");
    Some(leaves.fold((0, 0), |(q, b), l| (q + l.backlog_bytes, b + l.bytes)))
}

/// Busy cores of the whole machine over a window, from `/proc/stat`.
struct CpuWindow(JoinHandle<Option<f64>>);

impl CpuWindow {
    fn start(from: Instant, len: Duration) -> CpuWindow {
        CpuWindow(std::thread::spawn(move || {
            std::thread::sleep(from.saturating_duration_since(Instant::now()));
            let a = bench::proc_stat()?;
            let t = Instant::now();
            std::thread::sleep(len);
            let b = bench::proc_stat()?;
            Some((b.0 - a.0) as f64 / 100.0 / t.elapsed().as_secs_f64())
        }))
    }

    fn finish(self) -> f64 {
        self.0.join().ok().flatten().unwrap_or(f64::NAN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_matches_follows_the_variants() {
        // The check of what the endpoints report agrees with the variants'
        // configurations.
        let o = |design: &str, pace: bool, sthr: u32| NodeOutcome {
            design: design.into(),
            pace_credit: pace,
            sender_threshold: sthr,
            ..Default::default()
        };
        assert!(config_matches(
            Variant::SirdSthrInf,
            &o("sird", true, u32::MAX)
        ));
        assert!(!config_matches(
            Variant::SirdSthrHalf,
            &o("sird", true, u32::MAX)
        ));
        assert!(!config_matches(Variant::SirdPaced, &o("homa", true, 5)));
        assert!(config_matches(Variant::SirdUnpaced, &o("sird", false, 5)));
    }
}
