//! The `homa-sim` binary end to end: a small scenario run writes its
//! outputs, and bad input gets a clear error.

use std::path::PathBuf;
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_homa-sim"))
}

fn scenario(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(name)
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("homa-sim-cli-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn run_writes_json_csv_and_plot() {
    let out = temp_dir("run");
    let o = bin()
        .args(["run", "--quiet", "--messages", "2000", "--out"])
        .arg(&out)
        .arg("--scenario")
        .arg(scenario("small.toml"))
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(stdout.contains("homa"), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(report[0]["messages_generated"], 2000);
    assert_eq!(report[0]["messages_incomplete"], 0);
    let buckets = std::fs::read_to_string(out.join("buckets.csv")).unwrap();
    assert!(buckets.lines().count() > 2);
    let ports = std::fs::read_to_string(out.join("ports.csv")).unwrap();
    // Header plus 8 NICs, 8 ToR downlinks, 4 ToR uplinks, 4 spine downlinks.
    assert_eq!(ports.lines().count(), 1 + 24, "{ports}");
    let png = std::fs::read(out.join("slowdown.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn every_example_scenario_parses() {
    for entry in std::fs::read_dir(scenario("")).unwrap() {
        let path = entry.unwrap().path();
        homa_sim::scenario::Scenario::from_file(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}

#[test]
fn incast_scenario_runs_to_completion() {
    let o = bin()
        .args(["run", "--quiet", "--scenario"])
        .arg(scenario("incast.toml"))
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // 1,500 messages, 10% warm-up: 1,350 measured, none incomplete.
    assert!(stdout.contains("1350"), "{stdout}");
}

#[test]
fn bad_input_gets_a_clear_error() {
    let o = bin()
        .args(["run", "--workload", "w9", "--messages", "10"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("w9") && err.contains("w1"), "{err}");

    let o = bin().args(["run", "--load", "3"]).output().unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("load"));

    let o = bin()
        .args(["reproduce", "nonsense", "--out", "/tmp/x"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("thesis"));
}

#[test]
fn topology_prints_the_derived_numbers() {
    let o = bin().arg("topology").output().unwrap();
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success());
    assert!(s.contains("RTT: 7.744 us"), "{s}");
    assert!(s.contains("RTTbytes: 8962"), "{s}");
}
