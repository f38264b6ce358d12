//! The node processes of a run: starting them in their namespaces,
//! waiting for them, reading their reports; and the machine's CPU use.

use crate::cleanup;
use crate::netns::{self, TestbedSpec};
use anyhow::{anyhow, Context, Result};
use homa_perf::cluster::NodeReport;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// Starts `exe SUBCOMMAND ARGS` in host `host`'s namespace of `spec`, its
/// output (without panic backtraces) going to `work/TAG-hHOST.log`.
pub(crate) fn spawn_node(
    spec: &TestbedSpec,
    work: &Path,
    exe: &Path,
    host: usize,
    subcommand: &str,
    args: Vec<String>,
    tag: &str,
) -> Result<Node> {
    let mut argv = vec![subcommand.to_string()];
    argv.extend(args);
    let cmd = netns::command_in(&spec.host_ns(host), exe.as_os_str(), &argv);
    start_node(cmd, host, work.join(format!("{tag}-h{host}.log")), false)
}

/// Starts `cmd` as host `host`'s node, its output (without panic
/// backtraces) going to `log_path`. With `keep_stdin`, its stdin is a pipe
/// the [`Node`] holds open until it is dropped (an ssh session's remote
/// side stops the node when it closes); otherwise `/dev/null`.
pub(crate) fn start_node(
    mut cmd: Command,
    host: usize,
    log_path: PathBuf,
    keep_stdin: bool,
) -> Result<Node> {
    let log = fs::File::create(&log_path)
        .with_context(|| format!("cannot create {}", log_path.display()))?;
    cmd.stdin(if keep_stdin {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(log.try_clone()?)
    .stderr(log)
    .env("RUST_BACKTRACE", "0");
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot start the node on host {host}"))?;
    cleanup::register_child(child.id());
    let stdin = child.stdin.take();
    Ok(Node {
        child,
        host,
        log: log_path,
        _stdin: stdin,
    })
}

/// A node process and where its output goes.
pub(crate) struct Node {
    pub(crate) child: Child,
    pub(crate) host: usize,
    pub(crate) log: PathBuf,
    /// The write end of the node's stdin, if [`start_node`] kept one:
    /// never written, held so that dropping the node closes it.
    pub(crate) _stdin: Option<ChildStdin>,
}

impl Node {
    /// Kills the node (if still running) and waits for it.
    pub(crate) fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        cleanup::unregister_child(self.child.id());
    }
}

/// Waits for every node to exit successfully; kills all of them if one
/// fails or `limit` passes.
pub(crate) fn wait_all(mut nodes: Vec<Node>, limit: Duration) -> Result<()> {
    let deadline = Instant::now() + limit;
    let mut failure: Option<anyhow::Error> = None;
    while !nodes.is_empty() && failure.is_none() {
        let mut i = 0;
        while i < nodes.len() {
            match nodes[i].child.try_wait() {
                Ok(Some(status)) => {
                    let n = nodes.swap_remove(i);
                    cleanup::unregister_child(n.child.id());
                    if !status.success() {
                        failure = Some(anyhow!(
                            "the node on host {} failed ({status}):\n{}",
                            n.host,
                            log_tail(&n.log)
                        ));
                    }
                }
                Ok(None) => i += 1,
                Err(e) => {
                    failure = Some(anyhow!("cannot wait for host {}: {e}", nodes[i].host));
                    break;
                }
            }
        }
        if failure.is_none() && !nodes.is_empty() {
            if Instant::now() > deadline {
                failure = Some(anyhow!(
                    "nodes on hosts {:?} still running after {:?}",
                    nodes.iter().map(|n| n.host).collect::<Vec<_>>(),
                    limit
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    for n in nodes {
        n.stop();
    }
    failure.map_or(Ok(()), Err)
}

fn log_tail(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

pub(crate) fn read_report(path: Option<&Path>) -> Result<NodeReport> {
    let path = path.ok_or_else(|| anyhow!("a node was started without --out"))?;
    let text = fs::read_to_string(path)
        .with_context(|| format!("cannot read the node report {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("bad node report {}", path.display()))
}

/// Busy CPU time of the whole machine (all processes and the kernel's
/// packet processing) over a window, from `/proc/stat`.
pub(crate) struct CpuWindow {
    handle: std::thread::JoinHandle<Option<f64>>,
}

impl CpuWindow {
    pub(crate) fn measure(t0: Instant, start: Duration, len: Duration) -> Option<CpuWindow> {
        let handle = std::thread::Builder::new()
            .name("cpu-window".into())
            .spawn(move || {
                std::thread::sleep((t0 + start).saturating_duration_since(Instant::now()));
                let a = proc_stat()?;
                let t = Instant::now();
                std::thread::sleep(len);
                let b = proc_stat()?;
                let wall = t.elapsed().as_secs_f64();
                let hz = 100.0; // USER_HZ: /proc/stat counts in 1/100 s on Linux.
                Some((b.0 - a.0) as f64 / hz / wall)
            })
            .ok()?;
        Some(CpuWindow { handle })
    }

    /// Busy cores on average over the window (NaN if unmeasured).
    pub(crate) fn finish(self) -> f64 {
        self.handle.join().ok().flatten().unwrap_or(f64::NAN)
    }
}

/// (busy, total) jiffies of all CPUs.
pub(crate) fn proc_stat() -> Option<(u64, u64)> {
    let text = fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().next()?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3)? + v.get(4)?;
    Some((total - idle, total))
}
