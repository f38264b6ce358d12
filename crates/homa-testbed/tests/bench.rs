//! The bench end to end, small: 2 hosts, one workload, a few seconds, Homa
//! and TCP on real sockets through the emulated switch. Needs root and
//! iproute2 (CI runs as root); without them each test says why and passes.
//! Each test checks that nothing is left behind: no namespace, no process.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use homa_testbed::netns;

mod common;
use common::{processes_with, skip_reason, Guard};

/// A prefix and an output directory unique to this test and process.
fn unique(tag: &str) -> (String, PathBuf) {
    let prefix = format!("b{tag}{}", std::process::id() % 100_000);
    let out = std::env::temp_dir().join(format!("homa-testbed-test-{prefix}"));
    let _ = std::fs::remove_dir_all(&out);
    (prefix, out)
}

/// The `testbed bench` command for a small run.
fn bench_command(prefix: &str, out: &Path, seconds: f64) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_testbed"));
    cmd.args([
        "bench",
        "--prefix",
        prefix,
        "--hosts",
        "2",
        "--workloads",
        "w3",
    ])
    .args(["--variants", "homa,tcp", "--rates", "50"])
    .args(["--seconds", &seconds.to_string(), "--warmup", "0.5"])
    .args(["--unloaded-points", "5", "--unloaded-count", "3"])
    .arg("--out")
    .arg(out)
    .args(["--name", "smoke"]);
    cmd
}

/// Node processes of this test still running (their arguments name the
/// test's work directory, which contains the prefix).
fn leftover_nodes(prefix: &str) -> Vec<String> {
    processes_with(&[" node ", &format!("homa-testbed-{prefix}/")])
}

fn assert_nothing_left(prefix: &str) {
    assert!(
        netns::namespaces(prefix).is_empty(),
        "namespaces left: {:?}",
        netns::namespaces(prefix)
    );
    assert!(!netns::exists(prefix));
    // A node killed on the way out (an interrupted bench kills its nodes
    // with SIGKILL and exits) may take a moment to go on a loaded machine:
    // it must be gone soon, not at this very instant.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut nodes = leftover_nodes(prefix);
    while !nodes.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        nodes = leftover_nodes(prefix);
    }
    assert!(nodes.is_empty(), "node processes left: {nodes:?}");
}

#[test]
fn smoke_bench_runs_both_protocols_and_tears_down() {
    if let Some(why) = skip_reason() {
        eprintln!("skipping: {why}");
        return;
    }
    let (prefix, out) = unique("s");
    let _guard = Guard(prefix.clone());
    let output = bench_command(&prefix, &out, 2.0)
        .output()
        .expect("run testbed bench");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "bench failed:\n{stderr}");
    // Without a terminal, a line per finished run, with the time left.
    assert!(
        stderr.contains("[1/3] w3: idle round-trip times measured"),
        "{stderr}"
    );
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("[2/3] w3: Homa at 80% load: ") && l.contains("; ETA ")),
        "{stderr}"
    );
    assert!(stderr.contains("[3/3] w3: TCP at 80% load"), "{stderr}");
    // The finished runs were kept until the report held them.
    assert!(!out.join("smoke.partial").exists());

    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("smoke/results.json")).expect("results.json"),
    )
    .expect("valid JSON");
    let w = &json["workloads"][0];
    assert_eq!(w["workload"], "w3");
    assert_eq!(w["rate_mbit"], 50);
    assert!(w["baseline"].as_array().is_some_and(|b| !b.is_empty()));
    let runs = w["runs"].as_array().expect("runs");
    let variants: Vec<&str> = runs.iter().filter_map(|r| r["variant"].as_str()).collect();
    assert_eq!(variants, ["homa", "tcp"]);
    for r in runs {
        let v = &r["variant"];
        assert!(r["completed"].as_u64().unwrap() > 50, "{v}: {r}");
        assert_eq!(r["errors"], 0, "{v}");
        let achieved = r["achieved_gbps"].as_f64().unwrap();
        let target = r["target_gbps"].as_f64().unwrap();
        assert!(
            achieved > 0.5 * target,
            "{v}: {achieved} of {target} Gbit/s"
        );
        // The switch saw the traffic, and Homa used more than one level.
        let levels: Vec<u64> = r["switch"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["packets"].as_u64().unwrap() > 0)
            .map(|p| p["priority"].as_u64().unwrap())
            .collect();
        if v == "homa" {
            assert!(levels.contains(&7) && levels.len() > 1, "{levels:?}");
        } else {
            assert_eq!(levels, [0], "TCP uses TOS 0");
        }
    }
    assert!(w["tcp_vs_homa"]["short_half_p99_ratio"].as_f64().is_some());

    let md = std::fs::read_to_string(out.join("smoke.md")).expect("report");
    assert!(md.contains("| w3 | 50 Mbit/s, 1500 B |"), "{md}");
    assert!(md.contains("| w3 | Homa |") && md.contains("| w3 | TCP |"));
    let png = std::fs::metadata(out.join("smoke/slowdown-w3.png")).expect("plot");
    assert!(png.len() > 10_000);

    // The bench built the testbed itself, so it removed it.
    assert_nothing_left(&prefix);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn interrupted_bench_removes_everything() {
    if let Some(why) = skip_reason() {
        eprintln!("skipping: {why}");
        return;
    }
    let (prefix, out) = unique("i");
    let _guard = Guard(prefix.clone());
    let mut child = bench_command(&prefix, &out, 60.0)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start testbed bench");
    // Interrupt once the nodes are running under load.
    let deadline = Instant::now() + Duration::from_secs(30);
    while leftover_nodes(&prefix).len() < 2 {
        assert!(Instant::now() < deadline, "the nodes never started");
        assert!(child.try_wait().unwrap().is_none(), "bench ended early");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: kill only sends a signal to the child we started.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let status = child.wait().expect("wait for the bench");
    assert_eq!(status.code(), Some(130), "exit status {status}");
    // Give killed node processes a moment to be reaped by init.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !leftover_nodes(&prefix).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_nothing_left(&prefix);
    let _ = std::fs::remove_dir_all(&out);
}

/// An interrupted bench keeps the runs it finished, and a rerun with the
/// same options takes them up instead of running them again.
#[test]
fn interrupted_bench_keeps_finished_runs_and_resumes() {
    if let Some(why) = skip_reason() {
        eprintln!("skipping: {why}");
        return;
    }
    let (prefix, out) = unique("r");
    let _guard = Guard(prefix.clone());
    let mut child = bench_command(&prefix, &out, 2.0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start testbed bench");
    // Interrupt once Homa's run is on disk (TCP's runs next).
    let kept = out.join("smoke.partial/w3-50mbit-1500mtu-homa.json");
    let deadline = Instant::now() + Duration::from_secs(120);
    while !kept.exists() {
        assert!(Instant::now() < deadline, "Homa's run never finished");
        assert!(child.try_wait().unwrap().is_none(), "bench ended early");
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: kill only sends a signal to the child we started.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let status = child.wait().expect("wait for the bench");
    assert_eq!(status.code(), Some(130), "exit status {status}");
    assert!(kept.exists(), "the finished run was lost");
    assert!(
        !out.join("smoke.md").exists(),
        "no report from half a bench"
    );
    let kept_run = std::fs::read_to_string(&kept).unwrap();

    let output = bench_command(&prefix, &out, 2.0).output().expect("rerun");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "rerun failed:\n{stderr}");
    assert!(
        stderr.contains("resuming: 2 finished runs kept"),
        "{stderr}"
    );
    assert!(
        stderr.contains("[1/3] w3: idle round-trip times: kept from an earlier run"),
        "{stderr}"
    );
    assert!(
        stderr.contains("[2/3] w3: Homa: kept from an earlier run"),
        "{stderr}"
    );
    assert!(stderr.contains("[3/3] w3: TCP at 80% load"), "{stderr}");
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("smoke/results.json")).expect("results.json"),
    )
    .unwrap();
    let runs = json["workloads"][0]["runs"].as_array().unwrap();
    let variants: Vec<&str> = runs.iter().filter_map(|r| r["variant"].as_str()).collect();
    assert_eq!(variants, ["homa", "tcp"]);
    let homa: serde_json::Value = serde_json::from_str(&kept_run).unwrap();
    assert_eq!(
        runs[0]["completed"], homa["completed"],
        "the kept run is the one reported"
    );
    assert!(!out.join("smoke.partial").exists());
    // And the report is not replaced by a third run without --force.
    let output = bench_command(&prefix, &out, 2.0).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--force"));
    assert_nothing_left(&prefix);
    let _ = std::fs::remove_dir_all(&out);
}
