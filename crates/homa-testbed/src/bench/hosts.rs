//! The options of `testbed bench-ssh` and its hosts file, checked whole
//! before any host is contacted.
//!
//! One host per line; `#` starts a comment; blank lines are skipped:
//!
//! ```text
//! # ssh destination    data-plane address   options
//! alice@node1.example  10.0.1.1
//! node2.example        10.0.1.2             port=2222 node-port=4001 dir=/scratch
//! ```
//!
//! - the ssh destination: `host` or `user@host` (as `ssh` takes it, so
//!   `~/.ssh/config` aliases work);
//! - the address the host's node serves Homa and TCP on (an IP address of
//!   the network under test, often not the one ssh uses);
//! - options: `port=N` (ssh port, default 22 or `~/.ssh/config`'s),
//!   `node-port=N` (the node's Homa/TCP port, default 4000), `dir=PATH`
//!   (where the bench makes its temporary directory, default `/tmp`).

use anyhow::{anyhow, bail, Result};
use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

/// Options of `testbed bench-ssh` besides those of `testbed bench`.
#[derive(clap::Args, Debug, Clone)]
pub struct SshArgs {
    /// The hosts: one per line, `DESTINATION ADDRESS [port=N]
    /// [node-port=N] [dir=PATH]`, `#` comments (see docs/cluster.md).
    /// Required.
    #[arg(long, required = true)]
    pub hosts_file: PathBuf,
    /// Private key ssh logs in with (`ssh -i`; the key must not need a
    /// passphrase, or must be in a running ssh-agent) [default: ssh's
    /// own choice: agent, ~/.ssh/config, ~/.ssh/id_*].
    #[arg(long)]
    pub ssh_key: Option<PathBuf>,
    /// An ssh option as `ssh -o` takes it, e.g.
    /// `StrictHostKeyChecking=accept-new`; repeatable, and ahead of the
    /// bench's own (ssh keeps the first value given) [default: none].
    #[arg(long = "ssh-option")]
    pub ssh_options: Vec<String>,
    /// Leave each host's temporary directory (the binary, configurations,
    /// node reports) in place after the bench [default: removed].
    #[arg(long)]
    pub keep_remote: bool,
}

impl SshArgs {
    /// Checks the options and reads the hosts file.
    pub fn validate(&self) -> Result<HostsFile> {
        if let Some(key) = &self.ssh_key {
            if !key.is_file() {
                bail!("--ssh-key {}: no such file", key.display());
            }
        }
        for o in &self.ssh_options {
            let (k, v) = o
                .split_once('=')
                .ok_or_else(|| anyhow!("--ssh-option {o:?}: expected Name=value"))?;
            if k.is_empty()
                || !k.bytes().all(|b| b.is_ascii_alphanumeric())
                || v.is_empty()
                || v.contains('\n')
            {
                bail!("--ssh-option {o:?}: expected Name=value (as ssh -o takes it)");
            }
        }
        HostsFile::read(&self.hosts_file)
    }
}

/// One real host of the bench.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteHost {
    /// `host` or `user@host`.
    pub destination: String,
    /// ssh port, if given.
    pub ssh_port: Option<u16>,
    /// Where the node serves Homa and TCP.
    pub node: SocketAddr,
    /// Parent of the bench's temporary directory on the host.
    pub dir: String,
}

impl RemoteHost {
    /// The destination with its port, as the report shows it.
    pub fn label(&self) -> String {
        match self.ssh_port {
            Some(p) => format!("{}:{p}", self.destination),
            None => self.destination.clone(),
        }
    }
}

/// The hosts of a bench over ssh, in the file's order (host 0 first).
#[derive(Debug, Clone, PartialEq)]
pub struct HostsFile {
    /// The hosts.
    pub hosts: Vec<RemoteHost>,
}

/// The node port when the hosts file gives none.
const NODE_PORT: u16 = super::SERVER_PORT;

impl HostsFile {
    /// Reads and checks `path` (see the module).
    pub fn read(path: &Path) -> Result<HostsFile> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow!("--hosts-file {}: {e}", path.display()))?;
        HostsFile::parse(&text).map_err(|e| anyhow!("--hosts-file {}{e}", path.display()))
    }

    /// Parses a hosts file's text; errors start with `:LINE: ` (or `: `
    /// for the file as a whole).
    pub fn parse(text: &str) -> Result<HostsFile> {
        let mut hosts = Vec::new();
        let mut seen = HashSet::new();
        for (i, line) in text.lines().enumerate() {
            let n = i + 1;
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let host = parse_line(line).map_err(|e| anyhow!(":{n}: {e}"))?;
            if !seen.insert(host.node) {
                bail!(
                    ":{n}: node address {} is already used by another host",
                    host.node
                );
            }
            hosts.push(host);
        }
        if hosts.len() < 2 {
            bail!(": needs at least 2 hosts, found {}", hosts.len());
        }
        Ok(HostsFile { hosts })
    }

    /// Each host as one string, for the settings a resumed bench must
    /// match.
    pub fn keys(&self) -> Vec<String> {
        self.hosts
            .iter()
            .map(|h| format!("{} {}", h.label(), h.node))
            .collect()
    }
}

fn parse_line(line: &str) -> Result<RemoteHost> {
    let mut words = line.split_whitespace();
    let destination = words.next().unwrap_or_default().to_string();
    let ok = |b: u8| b.is_ascii_alphanumeric() || b"@._-%:[]".contains(&b);
    if destination.starts_with('-') || !destination.bytes().all(ok) {
        bail!("bad ssh destination {destination:?} (expected host or user@host)");
    }
    let address = words.next().ok_or_else(|| {
        anyhow!("{destination}: the node's address is missing (DESTINATION ADDRESS [options])")
    })?;
    let ip: IpAddr = address
        .parse()
        .map_err(|_| anyhow!("{address:?} is not an IP address (the node's data-plane address)"))?;
    if ip.is_unspecified() || ip.is_multicast() {
        bail!("{ip} cannot be a node's address");
    }
    let mut host = RemoteHost {
        destination,
        ssh_port: None,
        node: SocketAddr::new(ip, NODE_PORT),
        dir: "/tmp".into(),
    };
    for option in words {
        let (k, v) = option
            .split_once('=')
            .ok_or_else(|| anyhow!("option {option:?}: expected name=value"))?;
        match k {
            "port" => host.ssh_port = Some(port(k, v)?),
            "node-port" => host.node.set_port(port(k, v)?),
            "dir" => {
                let safe = |b: u8| b.is_ascii_alphanumeric() || b"/._-".contains(&b);
                if !v.starts_with('/') || !v.bytes().all(safe) {
                    bail!("dir={v:?}: expected an absolute path of [A-Za-z0-9/._-]");
                }
                host.dir = v.to_string();
            }
            _ => bail!("unknown option {k:?} (known: port, node-port, dir)"),
        }
    }
    Ok(host)
}

fn port(name: &str, v: &str) -> Result<u16> {
    match v.parse::<u16>() {
        Ok(p) if p > 0 => Ok(p),
        _ => bail!("{name}={v:?}: expected a port, 1 to 65535"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hosts_file_with_comments_and_options() {
        let f = HostsFile::parse(
            "# the cluster\n\
             alice@n1 10.0.0.1\n\
             \n\
             n2   10.0.0.2  port=2222 node-port=4001 dir=/scratch/x  # fast one\n\
             n3 fd00::3\n",
        )
        .unwrap();
        assert_eq!(f.hosts.len(), 3);
        assert_eq!(f.hosts[0].destination, "alice@n1");
        assert_eq!(f.hosts[0].node, "10.0.0.1:4000".parse().unwrap());
        assert_eq!(f.hosts[0].dir, "/tmp");
        assert_eq!(f.hosts[1].ssh_port, Some(2222));
        assert_eq!(f.hosts[1].node, "10.0.0.2:4001".parse().unwrap());
        assert_eq!(f.hosts[1].dir, "/scratch/x");
        assert_eq!(f.hosts[2].node, "[fd00::3]:4000".parse().unwrap());
        assert_eq!(f.keys()[1], "n2:2222 10.0.0.2:4001");
    }

    #[test]
    fn bad_hosts_files_name_the_line_and_the_problem() {
        let err = |text: &str| HostsFile::parse(text).unwrap_err().to_string();
        assert_eq!(err("a 10.0.0.1\n"), ": needs at least 2 hosts, found 1");
        assert!(err("a 10.0.0.1\nb\n").starts_with(":2: b: the node's address is missing"));
        assert!(err("a 10.0.0.1\nb nodeb\n").contains("is not an IP address"));
        assert!(err("a 10.0.0.1\nb 10.0.0.1\n").contains("already used"));
        assert!(err("a 10.0.0.1\n-oProxyCommand=x 10.0.0.2\n").contains("bad ssh destination"));
        assert!(err("a 10.0.0.1\nb 10.0.0.2 port=0\n").contains("port=\"0\""));
        assert!(err("a 10.0.0.1\nb 10.0.0.2 speed=9\n").contains("unknown option"));
        assert!(err("a 10.0.0.1\nb 10.0.0.2 dir=rel\n").contains("absolute"));
        assert!(err("a 10.0.0.1\nb 10.0.0.2 dir=/a;b\n").contains("absolute"));
        assert!(err("a 0.0.0.0\nb 10.0.0.2\n").contains("cannot be"));
        // Two nodes on one address with distinct ports are fine.
        assert!(HostsFile::parse("a 10.0.0.1\nb 10.0.0.1 node-port=4001\n").is_ok());
    }
}
