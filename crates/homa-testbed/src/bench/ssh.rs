//! The bench on real hosts over ssh (`testbed bench-ssh`): the system's
//! OpenSSH client, nothing installed on the hosts but a copy of this
//! binary in a temporary directory, removed afterwards.
//!
//! Every ssh call runs with `BatchMode=yes` (a missing key or an unknown
//! host key fails at once instead of prompting) and shares one connection
//! per host (`ControlMaster`). A node runs under a small `sh` script that
//! kills it when the ssh session's stdin closes: when the bench kills the
//! local ssh, drops the node, or dies itself, the remote node goes too.
//! Each node writes its pid file in the temporary directory, so the
//! clean-up (at the end, on an error or on Ctrl-C) kills what is left
//! before removing the directory.

use super::backend::{Backend, ClusterInfo, SwitchWatch};
use super::hosts::{HostsFile, RemoteHost, SshArgs};
use super::nodes::{start_node, Node};
use crate::cleanup;
use crate::report::RealHost;
use anyhow::{anyhow, bail, Context, Result};
use homa_measure::progress::Progress;
use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use tracing::{debug, warn};

/// How ssh reaches one host: its options and destination.
#[derive(Debug, Clone)]
struct Ssh {
    options: Vec<String>,
    destination: String,
}

impl Ssh {
    fn new(args: &SshArgs, host: &RemoteHost, control: Option<&Path>) -> Ssh {
        // ssh keeps the first value of each option: the user's come first.
        let mut options = Vec::new();
        for o in &args.ssh_options {
            options.extend(["-o".to_string(), o.clone()]);
        }
        for o in [
            "BatchMode=yes",
            "ConnectTimeout=15",
            "ServerAliveInterval=10",
            "ServerAliveCountMax=6",
        ] {
            options.extend(["-o".to_string(), o.to_string()]);
        }
        if let Some(key) = &args.ssh_key {
            options.extend(["-i".to_string(), key.to_string_lossy().into_owned()]);
            options.extend(["-o".to_string(), "IdentitiesOnly=yes".to_string()]);
        }
        if let Some(dir) = control {
            options.extend([
                "-o".to_string(),
                "ControlMaster=auto".to_string(),
                "-o".to_string(),
                format!("ControlPath={}/%C", dir.display()),
                "-o".to_string(),
                "ControlPersist=30".to_string(),
            ]);
        }
        if let Some(p) = host.ssh_port {
            options.extend(["-p".to_string(), p.to_string()]);
        }
        Ssh {
            options,
            destination: host.destination.clone(),
        }
    }

    /// `ssh ... DESTINATION exec /bin/sh -c SCRIPT` (whatever the user's
    /// login shell).
    fn command(&self, script: &str) -> Command {
        let mut cmd = Command::new("ssh");
        cmd.args(&self.options)
            .arg(&self.destination)
            .arg(format!("exec /bin/sh -c {}", quote(script)));
        cmd
    }

    /// Runs `script` on the host, `stdin` (a file, or nothing) as its
    /// input; returns its output, or an error with ssh's last words.
    fn run(&self, script: &str, stdin: Option<fs::File>) -> Result<String> {
        let mut cmd = self.command(script);
        cmd.stdin(stdin.map_or_else(Stdio::null, Stdio::from));
        debug!(host = %self.destination, %script, "ssh");
        let out = cmd
            .output()
            .context("cannot run ssh (is the OpenSSH client installed?)")?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            let last = err.lines().rev().find(|l| !l.trim().is_empty());
            bail!(
                "{}: {} ({})",
                self.destination,
                last.unwrap_or("failed").trim(),
                out.status
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// `s` as one word for `sh`.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A host in use: how to reach it and its temporary directory there.
struct Remote {
    spec: RemoteHost,
    ssh: Ssh,
    dir: String,
    cpus: usize,
    kernel: String,
}

/// What removes the bench from the hosts: kills nodes still running,
/// removes the directories (unless kept), closes the shared connections.
/// Runs once: the end of the bench and the Ctrl-C handler may both ask,
/// at the same time, and the second waits for the first to finish.
#[derive(Clone)]
struct Teardown {
    hosts: Vec<(Ssh, String)>,
    keep: bool,
    multiplexed: bool,
    done: Arc<Mutex<bool>>,
}

impl Teardown {
    fn run(&self) {
        let mut done = self.done.lock().unwrap_or_else(|e| e.into_inner());
        if *done {
            return;
        }
        *done = true;
        std::thread::scope(|s| {
            for (ssh, dir) in &self.hosts {
                s.spawn(move || {
                    let rm = if self.keep {
                        String::new()
                    } else {
                        format!("; cd / && rm -rf {}", quote(dir))
                    };
                    let script = format!(
                        "cd {} 2>/dev/null || exit 0; for f in node-*.pid; do \
                         [ -f \"$f\" ] && kill \"$(cat \"$f\")\" 2>/dev/null; rm -f \"$f\"; done{rm}",
                        quote(dir)
                    );
                    if let Err(e) = ssh.run(&script, None) {
                        warn!("cleaning up {dir} on {}: {e:#}", ssh.destination);
                    }
                    if self.multiplexed {
                        let _ = Command::new("ssh")
                            .args(&ssh.options)
                            .args(["-O", "exit", &ssh.destination])
                            .stdin(Stdio::null())
                            .stdout(Stdio::null())
                            .stderr(Stdio::null())
                            .status();
                    }
                });
            }
        });
    }
}

/// The hosts of a hosts file, each with this binary in its own temporary
/// directory.
pub(crate) struct SshHosts {
    remotes: Vec<Remote>,
    work: PathBuf,
    teardown: Teardown,
}

impl SshHosts {
    /// Connects to every host (in parallel), makes its temporary
    /// directory, copies this binary there and checks that it runs.
    pub(crate) fn connect(args: &SshArgs, hosts: HostsFile) -> Result<SshHosts> {
        let exe = std::env::current_exe().context("cannot find the testbed executable")?;
        let work = std::env::temp_dir().join(format!("homa-testbed-ssh-{}", std::process::id()));
        let _ = fs::remove_dir_all(&work);
        fs::create_dir_all(&work).with_context(|| format!("cannot create {}", work.display()))?;
        // A control socket's path must fit in 108 bytes; %C is 40.
        let control = work.join("cm");
        let multiplexed = control.as_os_str().len() + 42 < 100 && fs::create_dir(&control).is_ok();
        if !multiplexed {
            warn!(
                "no ssh connection sharing: {} is too long",
                control.display()
            );
        }
        let size_mb = fs::metadata(&exe).map_or(0.0, |m| m.len() as f64 / 1e6);
        eprintln!(
            "testbed: copying {} ({size_mb:.0} MB) to {} hosts over ssh",
            exe.display(),
            hosts.hosts.len()
        );
        let ssh: Vec<Ssh> = hosts
            .hosts
            .iter()
            .map(|h| Ssh::new(args, h, multiplexed.then_some(control.as_path())))
            .collect();
        let made: Vec<Result<(String, usize, String)>> = std::thread::scope(|s| {
            let jobs: Vec<_> = hosts
                .hosts
                .iter()
                .zip(&ssh)
                .map(|(h, ssh)| s.spawn(|| prepare(ssh, h, &exe)))
                .collect();
            jobs.into_iter()
                .map(|j| j.join().unwrap_or_else(|_| Err(anyhow!("internal error"))))
                .collect()
        });
        let mut remotes = Vec::new();
        let mut first_error = None;
        for (i, ((h, ssh), made)) in hosts.hosts.into_iter().zip(ssh).zip(made).enumerate() {
            match made {
                Ok((dir, cpus, kernel)) => remotes.push(Remote {
                    spec: h,
                    ssh,
                    dir,
                    cpus,
                    kernel,
                }),
                Err(e) => {
                    // The hosts that did work are cleaned up below.
                    first_error.get_or_insert(e.context(format!("host {i}")));
                }
            }
        }
        let teardown = Teardown {
            hosts: remotes
                .iter()
                .map(|r| (r.ssh.clone(), r.dir.clone()))
                .collect(),
            keep: args.keep_remote,
            multiplexed,
            done: Arc::new(Mutex::new(false)),
        };
        let hook = teardown.clone();
        cleanup::add_hook(move || hook.run());
        let hosts = SshHosts {
            remotes,
            work,
            teardown,
        };
        match first_error {
            Some(e) => Err(e),
            None => Ok(hosts),
        }
    }

    fn remote(&self, host: usize) -> &Remote {
        &self.remotes[host]
    }
}

/// Makes the host's temporary directory and copies `exe` there; returns
/// the directory, the host's CPUs and kernel release.
fn prepare(ssh: &Ssh, host: &RemoteHost, exe: &Path) -> Result<(String, usize, String)> {
    let script = format!(
        "set -e; umask 077; mkdir -p {0}; d=$(mktemp -d {0}/homa-rs-bench-XXXXXX); \
         echo \"$d\"; nproc; uname -r",
        quote(&host.dir)
    );
    let out = ssh.run(&script, None)?;
    let lines: Vec<&str> = out.lines().map(str::trim).collect();
    let [dir, cpus, kernel] = lines[..] else {
        bail!("{}: unexpected answer {out:?}", ssh.destination);
    };
    if !dir.starts_with(&host.dir) || dir.contains('\'') {
        bail!(
            "{}: unexpected temporary directory {dir:?}",
            ssh.destination
        );
    }
    let cpus = cpus.parse().unwrap_or(0);
    let binary = fs::File::open(exe).with_context(|| format!("cannot read {}", exe.display()))?;
    let copy = format!(
        "set -e; cat > {0}/testbed; chmod 700 {0}/testbed; {0}/testbed --version",
        quote(dir)
    );
    ssh.run(&copy, Some(binary)).with_context(|| {
        format!(
            "copying the testbed binary to {dir} (the hosts need the same architecture and a \
             compatible libc)"
        )
    })?;
    Ok((dir.to_string(), cpus, kernel.to_string()))
}

impl Drop for SshHosts {
    fn drop(&mut self) {
        self.teardown.run();
    }
}

impl Backend for SshHosts {
    fn hosts(&self) -> usize {
        self.remotes.len()
    }

    fn node_addr(&self, host: usize) -> SocketAddr {
        self.remote(host).spec.node
    }

    fn work(&self) -> &Path {
        &self.work
    }

    fn local(&self) -> bool {
        false
    }

    fn prepare_link(&mut self, _: &str, _: u64, _: u32, _: &Progress) -> Result<()> {
        Ok(())
    }

    fn node_path(&self, host: usize, name: &str) -> PathBuf {
        Path::new(&self.remote(host).dir).join(name)
    }

    fn share(&self, local: &Path, name: &str) -> Result<()> {
        for r in &self.remotes {
            let file = fs::File::open(local)
                .with_context(|| format!("cannot read {}", local.display()))?;
            r.ssh
                .run(
                    &format!("cat > {}", quote(&format!("{}/{name}", r.dir))),
                    Some(file),
                )
                .with_context(|| format!("copying {name} to the hosts"))?;
        }
        Ok(())
    }

    fn spawn(&self, host: usize, args: Vec<String>, tag: &str) -> Result<Node> {
        let r = self.remote(host);
        let argv: Vec<String> = args.iter().map(|a| quote(a)).collect();
        // fd 3 keeps the session's stdin for the watcher: sh gives
        // background jobs /dev/null as stdin.
        let script = format!(
            "cd {} || exit 1; exec 3<&0; \
             RUST_BACKTRACE=0 ./testbed node {} </dev/null 3<&- & p=$!; \
             echo $p > node-$p.pid; \
             {{ cat <&3 >/dev/null 2>&1; kill $p 2>/dev/null; }} >/dev/null 2>&1 & w=$!; \
             exec 3<&-; wait $p; s=$?; rm -f node-$p.pid; kill $w 2>/dev/null; exit $s",
            quote(&r.dir),
            argv.join(" ")
        );
        let cmd = r.ssh.command(&script);
        let log = self.work.join(format!("{tag}-h{host}.log"));
        start_node(cmd, host, log, true)
    }

    fn fetch(&self, host: usize, name: &str) -> Result<PathBuf> {
        let r = self.remote(host);
        let local = self.work.join(name);
        let text = r
            .ssh
            .run(
                &format!("cat {}", quote(&format!("{}/{name}", r.dir))),
                None,
            )
            .with_context(|| format!("fetching {name} from host {host}"))?;
        fs::write(&local, text).with_context(|| format!("cannot write {}", local.display()))?;
        Ok(local)
    }

    fn watch_switch(&self) -> Result<Option<SwitchWatch>> {
        Ok(None)
    }

    fn describe(&self) -> ClusterInfo {
        ClusterInfo {
            cpus: self.remotes.iter().map(|r| r.cpus).min().unwrap_or(0),
            kernel: self
                .remotes
                .first()
                .map(|r| r.kernel.clone())
                .unwrap_or_default(),
            buffer_bytes: None,
            host_queue_bytes: None,
            real_hosts: Some(
                self.remotes
                    .iter()
                    .map(|r| RealHost {
                        ssh: r.spec.label(),
                        address: r.spec.node.to_string(),
                        cpus: r.cpus,
                        kernel: r.kernel.clone(),
                    })
                    .collect(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_survives_the_shell() {
        for s in ["plain", "it's", "a b", "$HOME", "'", "\"x\"; rm -rf /"] {
            let out = Command::new("sh")
                .arg("-c")
                .arg(format!("printf %s {}", quote(s)))
                .output()
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&out.stdout), s);
        }
    }
}
