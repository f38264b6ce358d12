//! The topology: host namespaces, a switch namespace, and the links between.
//!
//! Host `i` is the namespace `{prefix}-h{i}` with one interface `eth0`
//! (address `10.111.0.{i+1}/24`). Its veth peer `p{i}` sits in the switch
//! namespace `{prefix}-sw`, enslaved to the bridge `br0`. Queueing
//! disciplines from [`crate::tc`] shape both directions to the link rate.

use std::ffi::OsStr;
use std::fmt;
use std::io::ErrorKind;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use tracing::{debug, info, warn};

use crate::tc::{self, ClassStats, NicStats};

/// Default namespace-name prefix.
pub const DEFAULT_PREFIX: &str = "homatb";
/// Default number of hosts: enough for incast and for several concurrent
/// senders, few enough that two cores keep up with all of them.
pub const DEFAULT_HOSTS: usize = 4;
/// Default link rate in Mbit/s: two cores can load every link of 4 hosts
/// to 80% with it (measured: w4/w5 in 9000-byte frames keep about half of
/// both cores busy, Homa or TCP), while 1 Gbit/s saturates both cores and
/// the measurement becomes one of the CPU scheduler. `testbed bench` picks
/// its own rate per workload.
pub const DEFAULT_RATE_MBIT: u64 = 400;
/// Default buffer of each priority queue of a switch port, in bytes:
/// 8 ms at 400 Mbit/s (3.2 ms at 1 Gbit/s), in the range of a
/// shallow-buffered datacenter switch port.
pub const DEFAULT_BUFFER_BYTES: u64 = 400_000;
/// Default NIC queue of a host, in bytes. Large, so that a host's own queue
/// rarely drops; the socket send buffers usually push back first.
pub const DEFAULT_HOST_QUEUE_BYTES: u64 = 1_000_000;
/// Default MTU. Jumbo frames cut the packet rate six-fold compared with
/// 1500 bytes, which is what lets user-space stacks fill the links.
pub const DEFAULT_MTU: u32 = 9000;

/// Directory holding one JSON state file per testbed.
pub const STATE_DIR: &str = "/run/homa-testbed";

/// Largest number of hosts [`TestbedSpec::validate`] accepts.
pub const MAX_HOSTS: usize = 16;

/// Address of host 0 minus one; host `i` is this plus `i + 1`.
const SUBNET_BASE: Ipv4Addr = Ipv4Addr::new(10, 111, 0, 0);
const SUBNET_LEN: u8 = 24;

/// Serialises building and removing topologies within this process, so a
/// signal handler's teardown never races a half-finished `up`.
static TOPOLOGY_LOCK: Mutex<()> = Mutex::new(());

fn lock_topology() -> MutexGuard<'static, ()> {
    // A panic elsewhere must not stop the teardown.
    TOPOLOGY_LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// What to build: the number of hosts and the properties of their links.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct TestbedSpec {
    /// Namespace-name prefix, `[a-z0-9]{1,10}`.
    pub prefix: String,
    /// Number of hosts, 2 to 16.
    pub hosts: usize,
    /// Rate of every link, both directions, in Mbit/s.
    pub rate_mbit: u64,
    /// Limit of each priority queue of a switch port, in bytes.
    pub buffer_bytes: u64,
    /// Limit of a host's NIC queue, in bytes.
    pub host_queue_bytes: u64,
    /// MTU of every link, in bytes.
    pub mtu: u32,
    /// Queues per switch egress port: 8 strict-priority queues selected by
    /// the TOS byte (Homa's priorities, the default), or 1: a single FIFO
    /// (a switch without priorities, as in SIRD's testbed).
    #[serde(default = "default_switch_levels")]
    pub switch_levels: u8,
}

fn default_switch_levels() -> u8 {
    crate::tc::PRIORITIES
}

impl Default for TestbedSpec {
    fn default() -> Self {
        TestbedSpec {
            prefix: DEFAULT_PREFIX.to_string(),
            hosts: DEFAULT_HOSTS,
            rate_mbit: DEFAULT_RATE_MBIT,
            buffer_bytes: DEFAULT_BUFFER_BYTES,
            host_queue_bytes: DEFAULT_HOST_QUEUE_BYTES,
            mtu: DEFAULT_MTU,
            switch_levels: crate::tc::PRIORITIES,
        }
    }
}

impl TestbedSpec {
    /// Name of host `i`'s namespace.
    pub fn host_ns(&self, i: usize) -> String {
        format!("{}-h{i}", self.prefix)
    }

    /// Name of the switch namespace.
    pub fn switch_ns(&self) -> String {
        format!("{}-sw", self.prefix)
    }

    /// Address of host `i`: `10.111.0.{i+1}`.
    pub fn host_ip(&self, i: usize) -> Ipv4Addr {
        let offset = u32::try_from(i).unwrap_or(u32::MAX - 1).saturating_add(1);
        Ipv4Addr::from(u32::from(SUBNET_BASE).saturating_add(offset))
    }

    /// Link rate in bytes per second.
    pub fn rate_bytes_per_sec(&self) -> u64 {
        self.rate_mbit * 1_000_000 / 8
    }

    /// Checks that the spec describes something this tool can build.
    pub fn validate(&self) -> Result<()> {
        validate_prefix(&self.prefix)?;
        if !(2..=MAX_HOSTS).contains(&self.hosts) {
            bail!("hosts must be 2..={MAX_HOSTS}, not {}", self.hosts);
        }
        validate_link(self.rate_mbit, self.mtu)?;
        if self.switch_levels != 1 && self.switch_levels != crate::tc::PRIORITIES {
            bail!(
                "a switch port has 1 or {} queues, not {}",
                crate::tc::PRIORITIES,
                self.switch_levels
            );
        }
        // bfifo limits are 32-bit in the kernel.
        let mtu = u64::from(self.mtu);
        let max = u64::from(u32::MAX);
        if !(mtu..=max).contains(&self.buffer_bytes) {
            bail!(
                "switch buffer must be between one MTU ({mtu} B) and {max} B, not {} B",
                self.buffer_bytes
            );
        }
        if !(mtu..=max).contains(&self.host_queue_bytes) {
            bail!(
                "host queue must be between one MTU ({mtu} B) and {max} B, not {} B",
                self.host_queue_bytes
            );
        }
        Ok(())
    }
}

/// Checks a link's rate (Mbit/s) and MTU (bytes) against what the bench
/// supports, on the testbed or on real hosts.
pub fn validate_link(rate_mbit: u64, mtu: u32) -> Result<()> {
    if !(1..=100_000).contains(&rate_mbit) {
        bail!("rate must be 1..=100000 Mbit/s, not {rate_mbit}");
    }
    if !(576..=65_000).contains(&mtu) {
        bail!("mtu must be 576..=65000, not {mtu}");
    }
    Ok(())
}

/// Checks that `prefix` is `[a-z0-9]{1,10}`, which keeps namespace names
/// short and makes the prefix match nothing but this tool's namespaces.
pub fn validate_prefix(prefix: &str) -> Result<()> {
    let ok = (1..=10).contains(&prefix.len())
        && prefix
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if !ok {
        bail!("prefix must be 1 to 10 characters of [a-z0-9], not {prefix:?}");
    }
    Ok(())
}

/// Path of the state file of the testbed `prefix`.
pub fn state_path(prefix: &str) -> PathBuf {
    PathBuf::from(STATE_DIR).join(format!("{prefix}.json"))
}

/// Reads back the spec that `up` stored; `None` if there is none.
pub fn load_spec(prefix: &str) -> Result<Option<TestbedSpec>> {
    validate_prefix(prefix)?;
    let path = state_path(prefix);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let spec = serde_json::from_str(&text)
                .with_context(|| format!("parsing {}", path.display()))?;
            Ok(Some(spec))
        }
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

fn store_spec(spec: &TestbedSpec) -> Result<()> {
    std::fs::create_dir_all(STATE_DIR).with_context(|| format!("creating {STATE_DIR}"))?;
    let path = state_path(&spec.prefix);
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_string_pretty(spec)?;
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    // Rename so a reader never sees half a file.
    std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Builds `ip netns exec NS program args…`.
pub fn command_in<I, S>(ns: &str, program: impl AsRef<OsStr>, args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns]).arg(program).args(args);
    cmd
}

fn command_line(cmd: &Command) -> String {
    let mut line = cmd.get_program().to_string_lossy().into_owned();
    for arg in cmd.get_args() {
        line.push(' ');
        line.push_str(&arg.to_string_lossy());
    }
    line
}

/// Runs `cmd` to completion and returns its stdout; the error names the
/// command line and carries its stderr.
pub(crate) fn run(cmd: &mut Command) -> Result<String> {
    let line = command_line(cmd);
    debug!(cmd = %line, "running");
    let out = cmd
        .stdin(std::process::Stdio::null())
        .output()
        .with_context(|| format!("could not run `{line}`"))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        bail!("`{line}` failed ({}): {}", out.status, stderr.trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs a program with arguments; see [`run`].
fn run_args<S: AsRef<OsStr>>(program: &str, args: &[S]) -> Result<String> {
    let mut cmd = Command::new(program);
    cmd.args(args);
    run(&mut cmd)
}

/// Runs one step of `up`, refusing once a termination signal arrived.
fn step<S: AsRef<OsStr>>(program: &str, args: &[S]) -> Result<String> {
    if crate::cleanup::interrupted() {
        bail!("interrupted by a signal");
    }
    run_args(program, args)
}

fn is_ours(prefix: &str, name: &str) -> bool {
    if name == format!("{prefix}-sw") {
        return true;
    }
    match name.strip_prefix(&format!("{prefix}-h")) {
        Some(n) => !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()),
        None => false,
    }
}

/// Sort key: switch first, then hosts by number.
fn ns_order(prefix: &str, name: &str) -> (usize, u64) {
    match name
        .strip_prefix(&format!("{prefix}-h"))
        .and_then(|n| n.parse::<u64>().ok())
    {
        Some(n) => (1, n),
        None => (0, 0),
    }
}

/// Parses `ip netns list` output ("name" or "name (id: N)" per line).
fn parse_netns_list(text: &str, prefix: &str) -> Vec<String> {
    let mut names: Vec<String> = text
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| is_ours(prefix, n))
        .map(str::to_string)
        .collect();
    names.sort_by_key(|n| ns_order(prefix, n));
    names.dedup();
    names
}

fn list_namespaces(prefix: &str) -> Result<Vec<String>> {
    let out = run_args("ip", &["netns", "list"])?;
    Ok(parse_netns_list(&out, prefix))
}

/// Namespaces that belong to the testbed `prefix`: exactly `{prefix}-sw`
/// and `{prefix}-h<digits>`. Empty when `ip netns list` fails.
pub fn namespaces(prefix: &str) -> Vec<String> {
    match list_namespaces(prefix) {
        Ok(names) => names,
        Err(e) => {
            warn!("listing namespaces: {e:#}");
            Vec::new()
        }
    }
}

/// Whether any namespace of the testbed `prefix` exists.
pub fn exists(prefix: &str) -> bool {
    !namespaces(prefix).is_empty()
}

/// Builds the testbed, replacing any testbed with the same prefix.
///
/// On failure everything with the prefix is removed and the error names the
/// command that failed and its stderr.
pub fn up(spec: &TestbedSpec) -> Result<()> {
    spec.validate()?;
    up_prefix_checked(spec)
}

/// Like [`up`] but checks only the prefix, so tests can drive the failure
/// path with a spec the kernel refuses.
#[doc(hidden)]
pub fn up_unchecked(spec: &TestbedSpec) -> Result<()> {
    validate_prefix(&spec.prefix)?;
    up_prefix_checked(spec)
}

fn up_prefix_checked(spec: &TestbedSpec) -> Result<()> {
    let _guard = lock_topology();
    if !list_namespaces(&spec.prefix)?.is_empty() {
        info!(prefix = %spec.prefix, "testbed exists; replacing it");
        down_locked(&spec.prefix)?;
    }
    let started = Instant::now();
    match build(spec) {
        Ok(()) => {
            info!(
                prefix = %spec.prefix,
                hosts = spec.hosts,
                rate_mbit = spec.rate_mbit,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "testbed up"
            );
            Ok(())
        }
        Err(e) => {
            if let Err(cleanup) = down_locked(&spec.prefix) {
                warn!("removing the partial testbed also failed: {cleanup:#}");
            }
            Err(e.context(format!(
                "bringing up testbed '{}' failed; removed what had been created",
                spec.prefix
            )))
        }
    }
}

fn add_namespace(ns: &str) -> Result<()> {
    step("ip", &["netns", "add", ns])?;
    // Before any interface exists, so none ever gets an IPv6 address and
    // the links carry no router solicitations or duplicate-address probes.
    for key in ["all", "default"] {
        let setting = format!("net.ipv6.conf.{key}.disable_ipv6=1");
        step("ip", &["netns", "exec", ns, "sysctl", "-qw", &setting])?;
    }
    step("ip", &["-n", ns, "link", "set", "lo", "up"])?;
    Ok(())
}

fn tc_in(ns: &str, args: &[String]) -> Result<()> {
    let mut full = vec!["-n".to_string(), ns.to_string()];
    full.extend(args.iter().cloned());
    step("tc", &full)?;
    Ok(())
}

/// MAC address of `dev` in `ns`, from `ip -j link show`.
fn mac_of(ns: &str, dev: &str) -> Result<String> {
    let out = step("ip", &["-n", ns, "-j", "link", "show", dev])?;
    let links: serde_json::Value =
        serde_json::from_str(&out).with_context(|| format!("parsing `ip -j link` in {ns}"))?;
    links
        .get(0)
        .and_then(|l| l.get("address"))
        .and_then(|a| a.as_str())
        .map(str::to_string)
        .ok_or_else(|| anyhow!("no MAC address for {dev} in {ns}"))
}

fn build(spec: &TestbedSpec) -> Result<()> {
    let sw = spec.switch_ns();
    let mtu = spec.mtu.to_string();
    add_namespace(&sw)?;
    step(
        "ip",
        &[
            "-n",
            &sw,
            "link",
            "add",
            "br0",
            "multicast",
            "off",
            "type",
            "bridge",
            "stp_state",
            "0",
            "mcast_snooping",
            "0",
        ],
    )?;
    // Bridged packets must leave the sender's socket accounting at the
    // switch, as on a real wire. With bridge netfilter on, they pass the IP
    // layer, which orphans them; with it off (measured), a UDP sender stopped
    // at ~16 packets queued in the switch port because they still counted
    // against its socket buffer, and the port never overflowed. The knob is
    // per namespace; new namespaces have it on, set it to be sure.
    if Path::new("/proc/sys/net/bridge").exists() {
        step(
            "ip",
            &[
                "netns",
                "exec",
                &sw,
                "sysctl",
                "-qw",
                "net.bridge.bridge-nf-call-iptables=1",
            ],
        )?;
    } else {
        warn!(
            "no bridge netfilter (net.bridge sysctls): packets queued in the switch will count \
             against their sender's socket buffer, which throttles senders unlike a real switch"
        );
    }
    for i in 0..spec.hosts {
        let host = spec.host_ns(i);
        let port = format!("p{i}");
        add_namespace(&host)?;
        // Both ends are created in their namespaces directly, so no
        // temporary name ever appears in the root namespace.
        step(
            "ip",
            &[
                "link", "add", "eth0", "netns", &host, "mtu", &mtu, "type", "veth", "peer", "name",
                &port, "netns", &sw, "mtu", &mtu,
            ],
        )?;
        // One segment per packet: with segmentation offload, 64 KB
        // super-packets would enter the queues and defeat the priorities.
        step(
            "ip",
            &["-n", &host, "link", "set", "eth0", "gso_max_segs", "1"],
        )?;
        step(
            "ip",
            &[
                "-n",
                &sw,
                "link",
                "set",
                &port,
                "master",
                "br0",
                "gso_max_segs",
                "1",
            ],
        )?;
        let addr = format!("{}/{SUBNET_LEN}", spec.host_ip(i));
        step("ip", &["-n", &host, "addr", "add", &addr, "dev", "eth0"])?;
        for args in tc::host_nic_commands(spec) {
            tc_in(&host, &args)?;
        }
        for args in tc::switch_port_commands(spec, i) {
            tc_in(&sw, &args)?;
        }
        step("ip", &["-n", &sw, "link", "set", &port, "up"])?;
        step("ip", &["-n", &host, "link", "set", "eth0", "up"])?;
    }
    step("ip", &["-n", &sw, "link", "set", "br0", "up"])?;

    let macs = (0..spec.hosts)
        .map(|i| mac_of(&spec.host_ns(i), "eth0"))
        .collect::<Result<Vec<_>>>()?;
    for (i, mac) in macs.iter().enumerate() {
        // Static forwarding entries: the bridge never floods a one-way
        // stream to every port while it waits to learn the receiver.
        let port = format!("p{i}");
        step(
            "bridge",
            &[
                "-n", &sw, "fdb", "replace", mac, "dev", &port, "master", "static",
            ],
        )?;
    }
    for i in 0..spec.hosts {
        let host = spec.host_ns(i);
        for (j, mac) in macs.iter().enumerate() {
            if i == j {
                continue;
            }
            // Static neighbours: no ARP traffic competes with the
            // measurements and no first packet waits for resolution.
            let ip = spec.host_ip(j).to_string();
            step(
                "ip",
                &[
                    "-n",
                    &host,
                    "neigh",
                    "replace",
                    &ip,
                    "lladdr",
                    mac,
                    "dev",
                    "eth0",
                    "nud",
                    "permanent",
                ],
            )?;
        }
    }
    store_spec(spec)
}

/// Removes the testbed `prefix`: kills the processes still inside its
/// namespaces, deletes the namespaces and the state file. Returns whether
/// anything was removed; no error when nothing exists.
pub fn down(prefix: &str) -> Result<bool> {
    let _guard = lock_topology();
    down_locked(prefix)
}

fn pids_in(ns: &str) -> Result<Vec<i32>> {
    let out = run_args("ip", &["netns", "pids", ns])?;
    Ok(out
        .split_whitespace()
        .filter_map(|p| p.parse::<i32>().ok())
        .filter(|&p| p > 0)
        .collect())
}

fn down_locked(prefix: &str) -> Result<bool> {
    validate_prefix(prefix)?;
    let names = list_namespaces(prefix)?;
    let me = i32::try_from(std::process::id()).unwrap_or(0);
    let mut killed = 0usize;
    for ns in &names {
        for pid in pids_in(ns).unwrap_or_default() {
            if pid != me {
                // SAFETY: plain syscall on a positive pid read from the
                // kernel's list of processes inside our namespace.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
                killed += 1;
            }
        }
    }
    if killed > 0 {
        debug!(killed, "killed processes left in the namespaces");
        // Give the kernel a moment so the namespaces really go away.
        let deadline = Instant::now() + Duration::from_secs(1);
        while Instant::now() < deadline
            && names
                .iter()
                .any(|ns| pids_in(ns).map(|p| !p.is_empty()).unwrap_or(false))
        {
            thread::sleep(Duration::from_millis(20));
        }
    }
    let mut failures = Vec::new();
    for ns in &names {
        if let Err(e) = run_args("ip", &["netns", "del", ns.as_str()]) {
            failures.push(format!("{e:#}"));
        }
    }
    let path = state_path(prefix);
    let removed_state = match std::fs::remove_file(&path) {
        Ok(()) => true,
        Err(e) if e.kind() == ErrorKind::NotFound => false,
        Err(e) => {
            failures.push(format!("removing {}: {e}", path.display()));
            false
        }
    };
    if !failures.is_empty() {
        bail!(
            "removing testbed '{prefix}' failed: {}",
            failures.join("; ")
        );
    }
    if !names.is_empty() {
        info!(prefix, namespaces = names.len(), "testbed down");
    }
    Ok(!names.is_empty() || removed_state)
}

/// A testbed's configuration, namespaces and queue counters.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// The prefix asked about.
    pub prefix: String,
    /// The spec stored by `up`, if any.
    pub spec: Option<TestbedSpec>,
    /// Namespaces of this prefix that exist.
    pub namespaces: Vec<String>,
    /// Counters of every priority queue of every switch port.
    pub ports: Vec<ClassStats>,
    /// Counters of every host's NIC queue.
    pub nics: Vec<NicStats>,
}

/// Reports on the testbed `prefix`. Counters are read only when both the
/// namespaces and the state file exist.
pub fn status(prefix: &str) -> Result<Status> {
    validate_prefix(prefix)?;
    let namespaces = list_namespaces(prefix)?;
    let spec = load_spec(prefix)?;
    let (ports, nics) = match &spec {
        Some(spec) if !namespaces.is_empty() => {
            (tc::switch_port_stats(spec)?, tc::host_nic_stats(spec)?)
        }
        _ => (Vec::new(), Vec::new()),
    };
    Ok(Status {
        prefix: prefix.to_string(),
        spec,
        namespaces,
        ports,
        nics,
    })
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespaces.is_empty() {
            return writeln!(f, "testbed '{}' is down", self.prefix);
        }
        let Some(spec) = &self.spec else {
            writeln!(
                f,
                "testbed '{}': namespaces {} exist but there is no state file {}; \
                 run `testbed down --prefix {}`",
                self.prefix,
                self.namespaces.join(" "),
                state_path(&self.prefix).display(),
                self.prefix
            )?;
            return Ok(());
        };
        writeln!(
            f,
            "testbed '{}': {} hosts, {} Mbit/s links, MTU {}, switch queue {} B {}, \
             host queue {} B",
            spec.prefix,
            spec.hosts,
            spec.rate_mbit,
            spec.mtu,
            spec.buffer_bytes,
            if spec.switch_levels == 1 {
                "(one FIFO per port)"
            } else {
                "per priority"
            },
            spec.host_queue_bytes
        )?;
        writeln!(f, "namespaces: {}", self.namespaces.join(" "))?;
        writeln!(f)?;
        writeln!(
            f,
            "{:>4}  {:<15} {:<14} {:>14} {:>10} {:>8}",
            "host", "address", "namespace", "nic bytes", "packets", "drops"
        )?;
        for i in 0..spec.hosts {
            let nic = self.nics.iter().find(|n| n.host == i);
            let (bytes, packets, drops) = nic.map_or((0, 0, 0), |n| (n.bytes, n.packets, n.drops));
            writeln!(
                f,
                "{:>4}  {:<15} {:<14} {:>14} {:>10} {:>8}",
                i,
                spec.host_ip(i).to_string(),
                spec.host_ns(i),
                bytes,
                packets,
                drops
            )?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "switch egress queues (port i leads to host i; prio 7 first):"
        )?;
        writeln!(
            f,
            "{:>4} {:>4} {:>14} {:>10} {:>8} {:>10} {:>8} {:>10}",
            "port", "prio", "bytes", "packets", "drops", "backlog B", "backlog", "overlimits"
        )?;
        for c in &self.ports {
            writeln!(
                f,
                "{:>4} {:>4} {:>14} {:>10} {:>8} {:>10} {:>8} {:>10}",
                c.port,
                c.priority,
                c.bytes,
                c.packets,
                c.drops,
                c.backlog_bytes,
                c.backlog_packets,
                c.overlimits
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_named() {
        let spec = TestbedSpec::default();
        spec.validate().expect("defaults must be valid");
        assert_eq!(spec.host_ns(3), "homatb-h3");
        assert_eq!(spec.switch_ns(), "homatb-sw");
        assert_eq!(spec.host_ip(0), Ipv4Addr::new(10, 111, 0, 1));
        assert_eq!(spec.host_ip(15), Ipv4Addr::new(10, 111, 0, 16));
        assert_eq!(spec.rate_bytes_per_sec(), 50_000_000);
    }

    #[test]
    fn validation_rejects_out_of_range() {
        let ok = TestbedSpec::default();
        let bad = [
            TestbedSpec {
                hosts: 1,
                ..ok.clone()
            },
            TestbedSpec {
                hosts: 17,
                ..ok.clone()
            },
            TestbedSpec {
                rate_mbit: 0,
                ..ok.clone()
            },
            TestbedSpec {
                rate_mbit: 100_001,
                ..ok.clone()
            },
            TestbedSpec {
                mtu: 575,
                ..ok.clone()
            },
            TestbedSpec {
                mtu: 65_001,
                ..ok.clone()
            },
            TestbedSpec {
                buffer_bytes: 8999,
                ..ok.clone()
            },
            TestbedSpec {
                host_queue_bytes: 1 << 33,
                ..ok.clone()
            },
            TestbedSpec {
                prefix: String::new(),
                ..ok.clone()
            },
            TestbedSpec {
                prefix: "Upper".into(),
                ..ok.clone()
            },
            TestbedSpec {
                prefix: "a-b".into(),
                ..ok.clone()
            },
            TestbedSpec {
                prefix: "abcdefghijk".into(),
                ..ok.clone()
            },
            TestbedSpec {
                switch_levels: 2,
                ..ok.clone()
            },
        ];
        for spec in bad {
            assert!(spec.validate().is_err(), "{spec:?} should be invalid");
        }
    }

    #[test]
    fn netns_list_keeps_only_exact_names() {
        let text = "tb-h10 (id: 4)\ntb-h2 (id: 3)\ntb-sw (id: 0)\ntb-hx\ntbx-h1\ntb-h\n\
                    tb-sw2\nother\ntb-h1\n";
        assert_eq!(
            parse_netns_list(text, "tb"),
            vec!["tb-sw", "tb-h1", "tb-h2", "tb-h10"]
        );
        assert!(parse_netns_list("", "tb").is_empty());
    }

    #[test]
    fn command_in_wraps_ip_netns_exec() {
        let cmd = command_in("tb-h0", "python3", ["-c", "print(1)"]);
        assert_eq!(
            command_line(&cmd),
            "ip netns exec tb-h0 python3 -c print(1)"
        );
    }
}
