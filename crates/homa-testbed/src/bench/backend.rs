//! Where a bench's nodes run. The runs (`run`) start nodes, move files and
//! read the switch only through a [`Backend`]: the namespace testbed
//! ([`Namespaces`]) is one, real hosts over ssh (`ssh`) another.

use super::counters::priority_totals;
use super::nodes::{spawn_node, Node};
use super::BACKLOG_INTERVAL;
use crate::netns::{self, TestbedSpec};
use crate::report::{PriorityTotals, RealHost};
use crate::tc::{self, BacklogSampler, ClassStats};
use anyhow::{Context, Result};
use homa_measure::progress::Progress;
use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// A cluster the bench can run nodes on.
pub(crate) trait Backend {
    /// Number of hosts.
    fn hosts(&self) -> usize;

    /// The address host `host`'s node serves on.
    fn node_addr(&self, host: usize) -> SocketAddr;

    /// Local directory of the Homa configurations, the node logs and the
    /// node reports.
    fn work(&self) -> &Path;

    /// Whether the nodes run on this machine: they then read its files and
    /// use its CPUs (and its `/proc/stat` measures them).
    fn local(&self) -> bool;

    /// Readies the links for a workload at `rate_mbit` and `mtu`: the
    /// testbed shapes its links to them; real hosts' links are what they
    /// are.
    fn prepare_link(
        &mut self,
        workload: &str,
        rate_mbit: u64,
        mtu: u32,
        progress: &Progress,
    ) -> Result<()>;

    /// The path under which host `host`'s node finds the file `name`
    /// ([`Backend::share`]) or writes it (its report).
    fn node_path(&self, host: usize, name: &str) -> PathBuf;

    /// Makes the local file `local` readable by every node as
    /// [`Backend::node_path`]`(host, name)`.
    fn share(&self, local: &Path, name: &str) -> Result<()>;

    /// Starts `testbed node ARGS` as host `host`'s node, its output going
    /// to `work/TAG-hHOST.log`.
    fn spawn(&self, host: usize, args: Vec<String>, tag: &str) -> Result<Node>;

    /// Brings the file `name` that host `host`'s node wrote to
    /// `work/name`, and returns that path.
    fn fetch(&self, host: usize, name: &str) -> Result<PathBuf>;

    /// Starts reading the switch for a run; `None` where the bench has no
    /// switch to read (its columns are then reported as not available).
    fn watch_switch(&self) -> Result<Option<SwitchWatch>>;

    /// The cluster as the report describes it.
    fn describe(&self) -> ClusterInfo;
}

/// What the report says about the cluster.
pub(crate) struct ClusterInfo {
    pub(crate) cpus: usize,
    pub(crate) kernel: String,
    pub(crate) buffer_bytes: Option<u64>,
    pub(crate) host_queue_bytes: Option<u64>,
    pub(crate) real_hosts: Option<Vec<RealHost>>,
}

/// The switch counters at the start of a run and the backlog sampler.
pub(crate) struct SwitchWatch {
    spec: TestbedSpec,
    before: Vec<ClassStats>,
    sampler: BacklogSampler,
}

impl SwitchWatch {
    /// Stops sampling; returns the run's counters by priority and by port.
    pub(crate) fn finish(self) -> Result<(Vec<PriorityTotals>, Vec<ClassStats>)> {
        let peaks = self.sampler.stop();
        let after = tc::switch_port_stats(&self.spec)?;
        let ports = tc::delta(&self.before, &after);
        Ok((priority_totals(&ports, &peaks), ports))
    }
}

/// The namespace testbed: hosts are namespaces of this machine behind an
/// emulated switch; nodes share this machine's files.
pub(crate) struct Namespaces {
    spec: TestbedSpec,
    exe: PathBuf,
    work: PathBuf,
}

impl Namespaces {
    /// The testbed of `spec` (built by [`Backend::prepare_link`] as
    /// needed), with a fresh work directory.
    pub(crate) fn new(spec: &TestbedSpec) -> Result<Namespaces> {
        let exe = std::env::current_exe().context("cannot find the testbed executable")?;
        let work = std::env::temp_dir().join(format!("homa-testbed-{}", spec.prefix));
        let _ = fs::remove_dir_all(&work);
        fs::create_dir_all(&work).with_context(|| format!("cannot create {}", work.display()))?;
        Ok(Namespaces {
            spec: spec.clone(),
            exe,
            work,
        })
    }
}

impl Backend for Namespaces {
    fn hosts(&self) -> usize {
        self.spec.hosts
    }

    fn node_addr(&self, host: usize) -> SocketAddr {
        SocketAddr::new(self.spec.host_ip(host).into(), super::SERVER_PORT)
    }

    fn work(&self) -> &Path {
        &self.work
    }

    fn local(&self) -> bool {
        true
    }

    fn prepare_link(
        &mut self,
        workload: &str,
        rate_mbit: u64,
        mtu: u32,
        progress: &Progress,
    ) -> Result<()> {
        let spec = &mut self.spec;
        if rate_mbit == spec.rate_mbit && mtu == spec.mtu && netns::exists(&spec.prefix) {
            return Ok(());
        }
        spec.rate_mbit = rate_mbit;
        spec.mtu = mtu;
        spec.validate()?;
        progress.println(&format!(
            "testbed: links at {rate_mbit} Mbit/s, MTU {mtu} B for {workload}"
        ));
        progress.suspend(|| netns::up(spec))
    }

    fn node_path(&self, _host: usize, name: &str) -> PathBuf {
        self.work.join(name)
    }

    fn share(&self, local: &Path, name: &str) -> Result<()> {
        let to = self.work.join(name);
        if local != to {
            fs::copy(local, &to).with_context(|| format!("cannot write {}", to.display()))?;
        }
        Ok(())
    }

    fn spawn(&self, host: usize, args: Vec<String>, tag: &str) -> Result<Node> {
        spawn_node(&self.spec, &self.work, &self.exe, host, "node", args, tag)
    }

    fn fetch(&self, _host: usize, name: &str) -> Result<PathBuf> {
        Ok(self.work.join(name))
    }

    fn watch_switch(&self) -> Result<Option<SwitchWatch>> {
        Ok(Some(SwitchWatch {
            spec: self.spec.clone(),
            before: tc::switch_port_stats(&self.spec)?,
            sampler: BacklogSampler::start(&self.spec, BACKLOG_INTERVAL),
        }))
    }

    fn describe(&self) -> ClusterInfo {
        ClusterInfo {
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            kernel: fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
            buffer_bytes: Some(self.spec.buffer_bytes),
            host_queue_bytes: Some(self.spec.host_queue_bytes),
            real_hosts: None,
        }
    }
}
