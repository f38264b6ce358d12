//! `testbed bench-ssh` end to end, rehearsed on this machine: a testbed of
//! three host namespaces, each running its own `sshd` (generated host key,
//! a generated client key authorized), and a short bench driven over ssh
//! from inside host 0, as a researcher would from one node of a cluster.
//! Needs root, iproute2 and OpenSSH (client, server, ssh-keygen); without
//! them it prints SKIP and why, and passes. The bad-input test needs none.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use homa_testbed::netns::{self, TestbedSpec};

mod common;
use common::{processes_with, skip_reason, Guard};

const SSHD: &str = "/usr/sbin/sshd";

fn runs(program: &str, arg: &str) -> bool {
    Command::new(program)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// Why the rehearsal cannot run here, if it cannot.
fn ssh_skip_reason() -> Option<String> {
    if let Some(why) = skip_reason() {
        return Some(why);
    }
    if !Path::new(SSHD).is_file() {
        return Some(format!(
            "{SSHD} is missing (apt-get install openssh-server)"
        ));
    }
    for tool in ["ssh", "ssh-keygen"] {
        if !runs(tool, "-V") && !runs(tool, "-?") {
            return Some(format!("`{tool}` is missing (OpenSSH client)"));
        }
    }
    None
}

/// The sshd processes of the test, killed when it ends however it ends.
struct Sshds(Vec<Child>);

impl Drop for Sshds {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn keygen(path: &Path) {
    let ok = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .status()
        .expect("ssh-keygen")
        .success();
    assert!(ok, "ssh-keygen {}", path.display());
}

/// Starts an sshd in each host namespace of `spec` (host 1 on port 2222,
/// the others on 22) and writes the known_hosts file the client needs.
fn start_sshds(spec: &TestbedSpec, dir: &Path) -> Sshds {
    keygen(&dir.join("host_key"));
    keygen(&dir.join("client_key"));
    fs::copy(dir.join("client_key.pub"), dir.join("authorized_keys")).unwrap();
    // sshd's privilege separation directory (Debian's package makes it at
    // boot, which a container never has).
    fs::create_dir_all("/run/sshd").unwrap();
    let host_key = fs::read_to_string(dir.join("host_key.pub")).unwrap();
    let mut known = String::new();
    let mut sshds = Sshds(Vec::new());
    for h in 0..spec.hosts {
        let ip = spec.host_ip(h);
        let port = if h == 1 { 2222 } else { 22 };
        let config = dir.join(format!("sshd-h{h}.conf"));
        fs::write(
            &config,
            format!(
                "Port {port}\nListenAddress {ip}\nHostKey {d}/host_key\n\
                 PidFile {d}/sshd-h{h}.pid\nAuthorizedKeysFile {d}/authorized_keys\n\
                 PermitRootLogin prohibit-password\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPrintMotd no\n",
                d = dir.display()
            ),
        )
        .unwrap();
        let log = fs::File::create(dir.join(format!("sshd-h{h}.log"))).unwrap();
        let child = netns::command_in(&spec.host_ns(h), SSHD, ["-D", "-e", "-f"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start sshd");
        sshds.0.push(child);
        let name = if port == 22 {
            ip.to_string()
        } else {
            format!("[{ip}]:{port}")
        };
        known.push_str(&format!("{name} {host_key}"));
    }
    fs::write(dir.join("known_hosts"), known).unwrap();
    // sshd writes its pid file once it listens.
    let deadline = Instant::now() + Duration::from_secs(20);
    for h in 0..spec.hosts {
        while !dir.join(format!("sshd-h{h}.pid")).exists() {
            let log = fs::read_to_string(dir.join(format!("sshd-h{h}.log"))).unwrap_or_default();
            assert!(
                Instant::now() < deadline,
                "sshd on host {h} did not start:\n{log}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    sshds
}

/// The bench's temporary directories on the "hosts" (all this machine),
/// under `base`.
fn remote_dirs(base: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = fs::read_dir(base)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("homa-rs-bench-"))
                })
                .collect()
        })
        .unwrap_or_default();
    dirs.sort();
    dirs
}

fn processes_mentioning(what: &str) -> Vec<String> {
    processes_with(&[what])
}

/// Three namespace "hosts" with their sshd, a hosts file and keys; all
/// removed when dropped, however the test ends.
struct Rehearsal {
    spec: TestbedSpec,
    dir: PathBuf,
    // Dropped in this order: the sshds, then the namespaces.
    _sshds: Sshds,
    _guard: Guard,
}

impl Rehearsal {
    fn start(tag: &str) -> Rehearsal {
        let prefix = format!("ss{tag}{}", std::process::id() % 100_000);
        let dir = std::env::temp_dir().join(format!("homa-testbed-test-{prefix}"));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        // Fast links: the "network under test" carries the binary copies
        // too; the bench is told 50 Mbit/s, so it offers a light load.
        let spec = TestbedSpec {
            prefix: prefix.clone(),
            hosts: 3,
            rate_mbit: 10_000,
            mtu: 1500,
            ..TestbedSpec::default()
        };
        let guard = Guard(prefix);
        netns::up(&spec).expect("testbed up");
        let sshds = start_sshds(&spec, &dir);
        let ip = |h| spec.host_ip(h);
        // The hosts share this machine's /tmp: each test's own directory.
        let remote = dir.join("remote");
        fs::create_dir_all(&remote).unwrap();
        let r = remote.display();
        fs::write(
            dir.join("hosts"),
            format!(
                "# rehearsal: three namespaces of this machine\n\
                 root@{} {} dir={r}\n\
                 root@{} {} port=2222 dir={r}  # sshd on another port\n\
                 root@{} {} node-port=4100 dir={r}\n",
                ip(0),
                ip(0),
                ip(1),
                ip(1),
                ip(2),
                ip(2)
            ),
        )
        .unwrap();
        Rehearsal {
            spec,
            dir,
            _sshds: sshds,
            _guard: guard,
        }
    }

    /// `testbed bench-ssh` on the three hosts, run from host 0.
    fn bench(&self, seconds: &str) -> Command {
        let mut cmd = netns::command_in(
            &self.spec.host_ns(0),
            env!("CARGO_BIN_EXE_testbed"),
            ["bench-ssh", "--hosts-file"],
        );
        cmd.arg(self.dir.join("hosts"))
            .arg("--ssh-key")
            .arg(self.dir.join("client_key"))
            .arg("--ssh-option")
            .arg(format!(
                "UserKnownHostsFile={}",
                self.dir.join("known_hosts").display()
            ))
            .args([
                "--workloads",
                "w3",
                "--variants",
                "homa,tcp",
                "--rates",
                "50",
            ])
            .args(["--seconds", seconds, "--warmup", "0.5"])
            .args(["--unloaded-points", "5", "--unloaded-count", "3"])
            .arg("--out")
            .arg(self.dir.join("out"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }
}

impl Drop for Rehearsal {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// Nothing left on the hosts: no directory, no node, no ssh connection.
/// The bench removed the directories before it exited; the shells that
/// wrapped killed nodes may take a moment more to go.
fn assert_hosts_clean(r: &Rehearsal, bench_pid: u32) {
    let remote = r.dir.join("remote");
    assert_eq!(
        remote_dirs(&remote),
        [] as [PathBuf; 0],
        "temporary directories left"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut left = processes_mentioning(&remote.display().to_string());
        left.extend(processes_mentioning(&format!(
            "homa-testbed-ssh-{bench_pid}"
        )));
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "processes left: {left:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn bench_over_ssh_on_namespace_hosts() {
    if let Some(why) = ssh_skip_reason() {
        eprintln!("SKIP bench_over_ssh_on_namespace_hosts: {why}");
        return;
    }
    let r = Rehearsal::start("b");
    let ip = |h| r.spec.host_ip(h);
    let child = r.bench("2").spawn().expect("run testbed bench-ssh");
    let bench_pid = child.id();
    let output = child.wait_with_output().expect("wait for the bench");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "bench-ssh failed:\n{stderr}");
    eprintln!("{stderr}");
    assert!(stderr.contains("to 3 hosts over ssh"), "{stderr}");
    assert!(stderr.contains("[3/3] w3: TCP at 80% load"), "{stderr}");

    // The report is named `cluster` by default on real hosts.
    let out = r.dir.join("out");
    let json: serde_json::Value = serde_json::from_str(
        &fs::read_to_string(out.join("cluster/results.json")).expect("results.json"),
    )
    .expect("valid JSON");
    assert_eq!(json["hosts"], 3);
    assert!(json["buffer_bytes"].is_null(), "no switch buffer to report");
    let real = json["real_hosts"].as_array().expect("real_hosts");
    assert_eq!(real.len(), 3);
    assert_eq!(real[1]["ssh"], format!("root@{}:2222", ip(1)));
    assert_eq!(real[2]["address"], format!("{}:4100", ip(2)));
    assert!(real[0]["cpus"].as_u64().unwrap() >= 1);
    let w = &json["workloads"][0];
    assert_eq!(w["rate_mbit"], 50);
    assert_eq!(w["mtu"], 1500);
    assert!(w["baseline"].as_array().is_some_and(|b| !b.is_empty()));
    let runs = w["runs"].as_array().expect("runs");
    let variants: Vec<&str> = runs.iter().filter_map(|r| r["variant"].as_str()).collect();
    assert_eq!(variants, ["homa", "tcp"]);
    for r in runs {
        let v = &r["variant"];
        assert!(r["completed"].as_u64().unwrap() > 0, "{v}: {r}");
        assert_eq!(r["errors"], 0, "{v}");
        // Not zero: not available.
        assert!(r["switch"].is_null() && r["ports"].is_null(), "{v}: {r}");
        assert!(r["cpu_cores"].as_f64().is_some_and(|c| c > 0.0), "{v}");
    }
    assert!(!runs[0]["homa_counters"].as_array().unwrap().is_empty());
    let md = fs::read_to_string(out.join("cluster.md")).expect("report");
    eprintln!("{md}");
    assert!(md.contains("on 3 real hosts over ssh"), "{md}");
    assert!(md.contains("Switch queues: not available"), "{md}");
    assert!(
        md.contains("| w3 | Homa |") && md.contains("| n/a |"),
        "{md}"
    );
    assert!(!out.join("cluster.partial").exists());
    assert_hosts_clean(&r, bench_pid);
}

/// Ctrl-C in the middle of a loaded run: the remote nodes are killed and
/// the hosts cleaned up, and the finished runs are kept for a resume.
#[test]
fn interrupted_bench_over_ssh_leaves_nothing_on_the_hosts() {
    if let Some(why) = ssh_skip_reason() {
        eprintln!("SKIP interrupted_bench_over_ssh_leaves_nothing_on_the_hosts: {why}");
        return;
    }
    let r = Rehearsal::start("i");
    let mut child = r.bench("600").spawn().expect("run testbed bench-ssh");
    let bench_pid = child.id();
    // Wait until the loaded Homa run's nodes run on all three hosts.
    let deadline = Instant::now() + Duration::from_secs(300);
    let homa_nodes = || {
        processes_mentioning("-homa-h")
            .iter()
            .filter(|l| l.split_whitespace().nth(1) == Some("./testbed"))
            .count()
    };
    while homa_nodes() < 3 {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the bench ended early: {status}");
        }
        assert!(Instant::now() < deadline, "the loaded run did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    let pid = libc::pid_t::try_from(bench_pid).unwrap();
    // SAFETY: a plain syscall on the child this test started.
    unsafe {
        libc::kill(pid, libc::SIGINT);
    }
    let output = child.wait_with_output().expect("wait for the bench");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert!(r.dir.join("out/cluster.partial").is_dir(), "{stderr}");
    assert_hosts_clean(&r, bench_pid);
}

/// Bad input is refused before any host is contacted, in one line.
#[test]
fn bad_hosts_files_are_refused_before_connecting() {
    let dir = std::env::temp_dir().join(format!("homa-testbed-ssh-bad-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    let run = |hosts: &str, extra: &[&str]| {
        let file = dir.join("hosts");
        fs::write(&file, hosts).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_testbed"))
            .args(["bench-ssh", "--hosts-file"])
            .arg(&file)
            .arg("--out")
            .arg(&dir)
            .args(extra)
            .env("RUST_BACKTRACE", "1")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        stderr
    };
    let e = run("a 10.0.0.1\nb 10.0.0.2 speed=9\n", &["--rates", "100"]);
    assert!(e.contains(":2: unknown option \"speed\""), "{e}");
    let e = run("a 10.0.0.1\n", &["--rates", "100"]);
    assert!(e.contains("needs at least 2 hosts"), "{e}");
    let e = run("a 10.0.0.1\nb 10.0.0.2\n", &[]);
    assert!(e.contains("--rates is required"), "{e}");
    let e = run(
        "a 10.0.0.1\nb 10.0.0.2\n",
        &["--rates", "100", "--ssh-key", "/nonexistent/key"],
    );
    assert!(
        e.contains("--ssh-key /nonexistent/key: no such file"),
        "{e}"
    );
    let _ = fs::remove_dir_all(&dir);
}
