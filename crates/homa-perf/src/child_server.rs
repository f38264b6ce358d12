//! A server in a process of its own, for the demo: client and server then
//! share no allocator, no locks and no scheduler bookkeeping of one process,
//! as on two hosts, and each side's CPU time is measured apart.
//!
//! The parent runs `homa-perf demo-server` (a hidden subcommand) with the
//! server's options and talks to it over the child's stdin and stdout:
//! - the child binds 127.0.0.1 on a free port and prints `ADDR` on one line;
//! - it serves until its stdin reaches end of file (the parent closed it,
//!   or died), then prints `cpu_ns N`, the CPU time it used since it printed
//!   its address (both user and system, all threads; from getrusage), stops
//!   the server and exits.

use crate::contention::process_cpu_ns;
use crate::error::PerfError;
use crate::proto::Protocol;
use crate::server::{Server, ServerOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// Name of the hidden subcommand that runs [`serve_for_parent`].
pub const SUBCOMMAND: &str = "demo-server";

/// What the parent passes to the child (all of [`ServerOptions`] but the
/// address, which is always 127.0.0.1 on a free port).
#[derive(Debug, Clone)]
pub struct ChildServerOptions {
    /// Transport.
    pub protocol: Protocol,
    /// Receiving threads.
    pub threads: usize,
    /// Spin on the sockets instead of sleeping.
    pub busy_poll: bool,
    /// Homa runtime configuration, passed as JSON on the command line.
    pub homa_config: homa::Config,
}

impl ChildServerOptions {
    /// The child's command-line arguments after the subcommand.
    pub fn to_args(&self) -> Result<Vec<String>, PerfError> {
        let config = serde_json::to_string(&self.homa_config)
            .map_err(|e| PerfError::Usage(format!("cannot pass the Homa configuration on: {e}")))?;
        let mut args = vec![
            "--protocol".to_string(),
            self.protocol.name().to_string(),
            "--threads".to_string(),
            self.threads.to_string(),
            "--config-json".to_string(),
            config,
        ];
        if self.busy_poll {
            args.push("--busy-poll".to_string());
        }
        Ok(args)
    }
}

/// The child's side: serves until stdin closes, then reports its CPU time.
pub fn serve_for_parent(opts: &ChildServerOptions) -> Result<(), PerfError> {
    let server = Server::start(&ServerOptions {
        protocol: opts.protocol,
        bind: (std::net::Ipv4Addr::LOCALHOST, 0).into(),
        threads: opts.threads,
        busy_poll: opts.busy_poll,
        homa_config: opts.homa_config.clone(),
        work_per_request: std::time::Duration::ZERO,
    })?;
    let cpu0 = process_cpu_ns();
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", server.local_addr())
        .and_then(|()| out.flush())
        .map_err(|e| PerfError::io("tell the demo the server's address", e))?;
    // Anything on stdin is ignored; its end is the signal to stop.
    let mut sink = [0u8; 64];
    let mut stdin = std::io::stdin().lock();
    while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
    let cpu_ns = process_cpu_ns().saturating_sub(cpu0);
    // The parent may be gone (it died): then nobody reads this, which is fine.
    let _ = writeln!(out, "cpu_ns {cpu_ns}").and_then(|()| out.flush());
    server.shutdown();
    Ok(())
}

/// The parent's side: a running child server.
pub struct ChildServer {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    addr: SocketAddr,
}

impl ChildServer {
    /// Starts `exe demo-server ...` and waits for it to print its address.
    pub fn start(exe: &Path, opts: &ChildServerOptions) -> Result<ChildServer, PerfError> {
        let mut child = Command::new(exe)
            .arg(SUBCOMMAND)
            .args(opts.to_args()?)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| PerfError::io(format!("start a server process ({})", exe.display()), e))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().map(BufReader::new);
        let (Some(stdin), Some(mut stdout)) = (stdin, stdout) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(PerfError::Usage("a server process has no pipes".into()));
        };
        let mut line = String::new();
        let read = stdout.read_line(&mut line);
        let addr = match read.map(|_| line.trim().parse::<SocketAddr>()) {
            Ok(Ok(a)) => a,
            outcome => {
                drop(stdin);
                let status = child.wait();
                return Err(PerfError::Usage(format!(
                    "the server process did not start (said {:?}, {:?}; exit {:?})",
                    line.trim(),
                    outcome.err().map(|e| e.to_string()),
                    status.ok()
                )));
            }
        };
        Ok(ChildServer {
            child,
            stdin: Some(stdin),
            stdout,
            addr,
        })
    }

    /// The address clients should use.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops the child and returns the CPU time it used while serving (ns).
    pub fn shutdown(mut self) -> Result<u64, PerfError> {
        drop(self.stdin.take());
        let mut line = String::new();
        let read = self.stdout.read_line(&mut line);
        let status = self
            .child
            .wait()
            .map_err(|e| PerfError::io("wait for the server process", e))?;
        let cpu = read
            .ok()
            .and_then(|_| line.trim().strip_prefix("cpu_ns ")?.parse::<u64>().ok());
        match cpu {
            Some(ns) if status.success() => Ok(ns),
            _ => Err(PerfError::Usage(format!(
                "the server process ended badly ({status}, said {:?})",
                line.trim()
            ))),
        }
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        // Only reached without `shutdown` (an error on the way): make sure
        // no server process outlives the demo.
        if self.stdin.take().is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configuration_survives_the_trip_to_the_child() {
        let mut c = homa::Config::loopback();
        c.poll_us = 0;
        c.busy_poll = true;
        let opts = ChildServerOptions {
            protocol: Protocol::Homa,
            threads: 2,
            busy_poll: true,
            homa_config: c.clone(),
        };
        let args = opts.to_args().unwrap();
        let i = args.iter().position(|a| a == "--config-json").unwrap();
        let back: homa::Config = serde_json::from_str(&args[i + 1]).unwrap();
        assert_eq!(back, c);
        assert!(args.contains(&"--busy-poll".to_string()));
        assert_eq!(args[1], "homa");
    }
}
