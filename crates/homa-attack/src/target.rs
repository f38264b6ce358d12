//! The target: a Homa echo server in a child process (`homa-attack serve`),
//! so that its memory can be read from `/proc/PID/status`, and the handle
//! the scenarios use to start it, query it and stop it.
//!
//! Control protocol over the child's stdin/stdout, one line each way:
//! the child prints `ready ADDR` once bound; `stats` gets one JSON line
//! ([`ServerStats`]); `quit` or end of input stops it.
//!
//! Handler-run accounting: every request counts in `handler_runs`. Requests
//! whose bytes start with [`DUP_TAG`] are also remembered by a hash of their
//! content, and a second run of the same content counts in `repeat_runs`.
//! Requests starting with [`SLOW_TAG`] followed by a big-endian u32 are
//! answered that many milliseconds late (to open a window for a forged
//! response).

use crate::{Error, Result};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Requests starting with this are checked for repeated execution.
pub const DUP_TAG: &[u8; 8] = b"HATK-DUP";
/// Requests starting with this and a u32 (ms) are answered late.
pub const SLOW_TAG: &[u8; 9] = b"HATK-SLOW";

/// What the child reports on `stats`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerStats {
    /// `homa::Endpoint::metrics()` as JSON (kept untyped, so that this tool
    /// keeps working while the core's counters change).
    pub metrics: serde_json::Value,
    /// Requests the handler ran.
    pub handler_runs: u64,
    /// Runs of a [`DUP_TAG`] request whose content had already run.
    pub repeat_runs: u64,
}

impl ServerStats {
    /// A numeric metric by name (`active_rpcs`, `peers`, …); `None` if the
    /// core has no such field.
    pub fn metric(&self, name: &str) -> Option<u64> {
        self.metrics.get(name).and_then(|v| v.as_u64())
    }

    /// Total packets the server's core sent (all types).
    pub fn packets_sent(&self) -> Option<u64> {
        let arr = self.metrics.get("sent")?.get("packets")?.as_array()?;
        Some(arr.iter().filter_map(|v| v.as_u64()).sum())
    }

    /// Packets the server's core sent, by type name (in the wire's type
    /// order; empty if the metrics lack the field).
    pub fn sent_by_type(&self) -> Vec<(String, u64)> {
        let Some(arr) = self
            .metrics
            .get("sent")
            .and_then(|s| s.get("packets"))
            .and_then(|p| p.as_array())
        else {
            return Vec::new();
        };
        arr.iter()
            .enumerate()
            .map(|(i, v)| {
                let name = homa_wire::PacketType::ALL
                    .get(i)
                    .map_or_else(|| format!("type{i}"), |t| format!("{t:?}"));
                (name, v.as_u64().unwrap_or(0))
            })
            .collect()
    }

    /// Total Homa bytes the server's core sent (all types).
    pub fn bytes_sent(&self) -> Option<u64> {
        let arr = self.metrics.get("sent")?.get("bytes")?.as_array()?;
        Some(arr.iter().filter_map(|v| v.as_u64()).sum())
    }
}

/// Memory of a process, from `/proc/PID/status` (KiB).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Memory {
    /// Resident set now.
    pub rss_kib: u64,
    /// Peak resident set.
    pub hwm_kib: u64,
}

/// Reads `VmRSS` and `VmHWM` of a process.
pub fn memory_of(pid: u32) -> Result<Memory> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Ok(Memory {
        rss_kib: field("VmRSS:"),
        hwm_kib: field("VmHWM:"),
    })
}

struct Control {
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

/// A running target server.
pub struct Target {
    child: Mutex<Child>,
    control: Mutex<Control>,
    addr: SocketAddr,
    pid: u32,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("addr", &self.addr)
            .field("pid", &self.pid)
            .finish()
    }
}

impl Target {
    /// Starts `exe serve --bind 127.0.0.1:0` and waits until it is bound.
    pub fn spawn(exe: &Path) -> Result<Target> {
        Target::spawn_with(exe, &[])
    }

    /// Like [`Target::spawn`], with more `serve` arguments.
    pub fn spawn_with(exe: &Path, extra: &[&str]) -> Result<Target> {
        let mut child = Command::new(exe)
            .args(["serve", "--bind", "127.0.0.1:0"])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| Error::Target(format!("cannot start {}: {e}", exe.display())))?;
        let pid = child.id();
        let stdin = child.stdin.take().expect("piped");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        let addr = line
            .trim()
            .strip_prefix("ready ")
            .and_then(|a| a.parse::<SocketAddr>().ok());
        let Some(addr) = addr else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Error::Target(format!(
                "expected `ready ADDR` from the server, got {line:?}"
            )));
        };
        Ok(Target {
            child: Mutex::new(child),
            control: Mutex::new(Control { stdin, stdout }),
            addr,
            pid,
        })
    }

    /// The server's Homa address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The server's IPv4 address (the target always binds IPv4).
    pub fn addr_v4(&self) -> std::net::SocketAddrV4 {
        match self.addr {
            SocketAddr::V4(a) => a,
            SocketAddr::V6(_) => unreachable!("the target binds 127.0.0.1"),
        }
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Asks the server for its counters.
    pub fn stats(&self) -> Result<ServerStats> {
        let mut c = self.control.lock().unwrap_or_else(|p| p.into_inner());
        writeln!(c.stdin, "stats")?;
        c.stdin.flush()?;
        let mut line = String::new();
        if c.stdout.read_line(&mut line)? == 0 {
            return Err(Error::Target("the server exited".into()));
        }
        serde_json::from_str(&line)
            .map_err(|e| Error::Target(format!("bad stats line {line:?}: {e}")))
    }

    /// The server's memory now.
    pub fn memory(&self) -> Result<Memory> {
        memory_of(self.pid)
    }

    fn stop(&self) {
        {
            let mut c = self.control.lock().unwrap_or_else(|p| p.into_inner());
            let _ = writeln!(c.stdin, "quit");
            let _ = c.stdin.flush();
        }
        let mut child = self.child.lock().unwrap_or_else(|p| p.into_inner());
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Peak values seen by a [`Monitor`].
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Peaks {
    /// Largest `active_rpcs`.
    pub active_rpcs: u64,
    /// Largest `peers`.
    pub peers: u64,
    /// Largest `rx_bytes_buffered`.
    pub rx_bytes_buffered: u64,
    /// Largest `tx_bytes_buffered`.
    pub tx_bytes_buffered: u64,
    /// Samples taken.
    pub samples: u64,
}

/// Samples the target's gauges in the background and keeps the peaks.
pub struct Monitor {
    stop: Arc<std::sync::atomic::AtomicBool>,
    peaks: Arc<Mutex<Peaks>>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Monitor {
    /// Samples `target` every `every`.
    pub fn start(target: Arc<Target>, every: Duration) -> Monitor {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let peaks = Arc::new(Mutex::new(Peaks::default()));
        let (s, p) = (stop.clone(), peaks.clone());
        let handle = std::thread::spawn(move || {
            while !s.load(Ordering::Acquire) {
                if let Ok(st) = target.stats() {
                    let mut pk = p.lock().unwrap_or_else(|e| e.into_inner());
                    let m = |n| st.metric(n).unwrap_or(0);
                    pk.active_rpcs = pk.active_rpcs.max(m("active_rpcs"));
                    pk.peers = pk.peers.max(m("peers"));
                    pk.rx_bytes_buffered = pk.rx_bytes_buffered.max(m("rx_bytes_buffered"));
                    pk.tx_bytes_buffered = pk.tx_bytes_buffered.max(m("tx_bytes_buffered"));
                    pk.samples += 1;
                }
                std::thread::sleep(every);
            }
        });
        Monitor {
            stop,
            peaks,
            handle: Some(handle),
        }
    }

    /// The peaks so far.
    pub fn peaks(&self) -> Peaks {
        *self.peaks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stops sampling and returns the peaks.
    pub fn finish(mut self) -> Peaks {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        self.peaks()
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[derive(Default)]
struct RunCounts {
    seen: HashMap<u64, u32>,
    repeats: u64,
}

/// Runs the server (the `serve` subcommand) until `quit`, end of input or
/// SIGTERM/SIGINT. With `print_metrics`, prints the final metrics as one
/// JSON line on the way out.
pub fn serve(
    bind: SocketAddr,
    print_metrics: bool,
    workers: usize,
    max_rpcs: Option<u32>,
) -> Result<()> {
    let mut config = homa::Config::default();
    if let Some(n) = max_rpcs {
        config.core.max_rpcs = n;
    }
    let ep = homa::Endpoint::bind(bind, config)?;
    let runs = Arc::new(AtomicU64::new(0));
    let counts = Arc::new(Mutex::new(RunCounts::default()));
    let stdout = Arc::new(Mutex::new(std::io::stdout()));

    let final_metrics = {
        let (ep, stdout) = (ep.clone(), stdout.clone());
        move || {
            if print_metrics {
                let json = serde_json::to_string(&ep.metrics()).unwrap_or_default();
                let mut out = stdout.lock().unwrap_or_else(|p| p.into_inner());
                let _ = writeln!(out, "{json}");
                let _ = out.flush();
            }
        }
    };
    {
        let f = final_metrics.clone();
        ctrlc::set_handler(move || {
            f();
            std::process::exit(0);
        })
        .map_err(|e| Error::Target(format!("cannot install the signal handler: {e}")))?;
    }

    for _ in 0..workers.max(1) {
        let (ep, runs, counts) = (ep.clone(), runs.clone(), counts.clone());
        std::thread::spawn(move || loop {
            let req = match ep.recv_request(Some(Duration::from_millis(200))) {
                Ok(r) => r,
                Err(homa::Error::Timeout) => continue,
                Err(_) => return,
            };
            runs.fetch_add(1, Ordering::Relaxed);
            let msg = req.message;
            if msg.starts_with(DUP_TAG) {
                let mut h = std::collections::hash_map::DefaultHasher::new();
                msg.hash(&mut h);
                let mut c = counts.lock().unwrap_or_else(|p| p.into_inner());
                let n = c.seen.entry(h.finish()).or_insert(0);
                *n += 1;
                if *n > 1 {
                    c.repeats += 1;
                }
            }
            if msg.len() >= SLOW_TAG.len() + 4 && msg.starts_with(SLOW_TAG) {
                let at = SLOW_TAG.len();
                let ms = u32::from_be_bytes([msg[at], msg[at + 1], msg[at + 2], msg[at + 3]]);
                let ep = ep.clone();
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(u64::from(ms.min(10_000))));
                    let _ = ep.reply(req.id, msg);
                });
            } else {
                let _ = ep.reply(req.id, msg);
            }
        });
    }

    {
        let mut out = stdout.lock().unwrap_or_else(|p| p.into_inner());
        writeln!(out, "ready {}", ep.local_addr())?;
        out.flush()?;
    }
    let stdin = std::io::stdin();
    let mut line = String::new();
    loop {
        line.clear();
        if stdin.lock().read_line(&mut line)? == 0 {
            break;
        }
        match line.trim() {
            "stats" => {
                let repeats = counts.lock().unwrap_or_else(|p| p.into_inner()).repeats;
                let stats = ServerStats {
                    metrics: serde_json::to_value(ep.metrics())
                        .map_err(|e| Error::Target(e.to_string()))?,
                    handler_runs: runs.load(Ordering::Relaxed),
                    repeat_runs: repeats,
                };
                let json =
                    serde_json::to_string(&stats).map_err(|e| Error::Target(e.to_string()))?;
                let mut out = stdout.lock().unwrap_or_else(|p| p.into_inner());
                writeln!(out, "{json}")?;
                out.flush()?;
            }
            "quit" => break,
            "" => {}
            other => eprintln!("homa-attack serve: unknown command {other:?}"),
        }
    }
    final_metrics();
    ep.shutdown();
    Ok(())
}

/// A request the server answers `delay_ms` late, carrying `body` after the
/// tag and delay.
pub fn slow_request(delay_ms: u32, body: &[u8]) -> Bytes {
    let mut v = Vec::with_capacity(SLOW_TAG.len() + 4 + body.len());
    v.extend_from_slice(SLOW_TAG);
    v.extend_from_slice(&delay_ms.to_be_bytes());
    v.extend_from_slice(body);
    Bytes::from(v)
}
