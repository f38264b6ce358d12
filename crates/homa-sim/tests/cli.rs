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

/// `homa-sim ARGS` with a backtrace asked for, as a developer's shell may
/// have it: user errors must still be one line.
fn with_backtrace(args: &[&str]) -> std::process::Output {
    bin()
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .env("RUST_LIB_BACKTRACE", "1")
        .output()
        .expect("runs")
}

/// Asserts a failed run that printed one clear line (and nothing else).
fn assert_one_line_error(o: &std::process::Output, needle: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "not one line:\n{err}");
    assert!(err.starts_with("homa-sim: error: "), "{err}");
    assert!(err.contains(needle), "{needle:?} missing: {err}");
    for bad in ["backtrace", "panicked", "Caused by", "Stack"] {
        assert!(!err.contains(bad), "{bad:?} in {err}");
    }
    assert!(o.stdout.is_empty(), "ran anyway");
}

#[test]
fn user_errors_are_one_line_whatever_rust_backtrace_says() {
    let o = with_backtrace(&["run", "--workload", "nope", "--messages", "10"]);
    assert_one_line_error(&o, "unknown workload \"nope\"");
    let o = with_backtrace(&["run", "--scenario", "/nonexistent/s.toml"]);
    assert_one_line_error(&o, "/nonexistent/s.toml");
    // The cause is said once, not once per layer that mentions it.
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.matches("os error 2").count(), 1, "{err}");
    let o = with_backtrace(&["topology", "--scenario", "/nonexistent/s.toml"]);
    assert_one_line_error(&o, "/nonexistent/s.toml");
    let o = with_backtrace(&["run", "--workload", "/nonexistent/sizes.csv"]);
    assert_one_line_error(&o, "/nonexistent/sizes.csv");
}

/// `homa-sim ... | head` where the pipe closes first, with SIGPIPE blocked
/// as some parents leave it: no panic, no "failed printing to stdout".
#[test]
fn a_closed_stdout_ends_quietly() {
    for args in [
        &["topology"][..],
        &["--help"],
        &["run", "--quiet", "--messages", "300"],
    ] {
        let o = homa_measure::cli::run_with_closed_stdout(bin().args(args)).unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_ne!(o.status.code(), Some(101), "{args:?}: {err}");
    }
}

#[test]
fn max_load_refuses_ranges_it_cannot_search() {
    let o = with_backtrace(&["max-load", "--lo", "0.9", "--hi", "0.5"]);
    assert_one_line_error(&o, "--lo (0.9) must be below --hi (0.5)");
    let o = with_backtrace(&["max-load", "--threshold", "2"]);
    assert_one_line_error(&o, "--threshold must be in (0, 1], got 2");
    let o = with_backtrace(&["max-load", "--hi", "1.5"]);
    assert_one_line_error(&o, "--hi must be in (0, 1], got 1.5");
    let o = with_backtrace(&["max-load", "--lo", "-0.2"]);
    assert_one_line_error(&o, "--lo must be in (0, 1], got -0.2");
    let o = with_backtrace(&["max-load", "--steps", "1000"]);
    assert_one_line_error(&o, "--steps must be in [0, 20], got 1000");
    let o = with_backtrace(&["max-load", "--load", "0.7"]);
    assert_one_line_error(&o, "--lo and --hi");
}

/// `--load -0.5` was "unexpected argument '-0'": negative numbers parse,
/// and are refused for what they are.
#[test]
fn negative_numbers_are_values_refused_by_range() {
    let o = with_backtrace(&["run", "--load", "-0.5"]);
    assert_one_line_error(&o, "--load must be in (0, 2], got -0.5");
    let o = with_backtrace(&["run", "--priorities", "9"]);
    assert_one_line_error(&o, "--priorities must be in [1, 8], got 9");
    let o = with_backtrace(&["run", "--messages", "0"]);
    assert_one_line_error(&o, "--messages must be at least 1");
}

/// `run --out FILE` failed only after the whole run: outputs are checked
/// first, and an earlier run's results are replaced only with --force.
#[test]
fn outputs_are_checked_before_running() {
    let dir = temp_dir("outcheck");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("a-file");
    std::fs::write(&file, "x").unwrap();
    let f = file.to_str().unwrap();
    let o = with_backtrace(&["run", "--quiet", "--messages", "2000", "--out", f]);
    assert_one_line_error(&o, "exists and is not a directory");
    let under = format!("{f}/out");
    let o = with_backtrace(&["run", "--quiet", "--messages", "2000", "--out", &under]);
    assert_one_line_error(&o, "is a file, not a directory");
    let o = with_backtrace(&["max-load", "--quiet", "--out", f]);
    assert_one_line_error(&o, "not a directory");
    let o = with_backtrace(&["reproduce", "thesis", "--out", f]);
    assert_one_line_error(&o, "not a directory");

    let out = dir.join("run");
    let out_s = out.to_str().unwrap();
    let args = ["run", "--quiet", "--messages", "500", "--out", out_s];
    let o = bin().args(args).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = with_backtrace(&args);
    assert_one_line_error(&o, "--force");
    let o = bin().args(args).arg("--force").output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // A finished thesis report is not replaced either.
    std::fs::write(out.join("thesis.md"), "# done").unwrap();
    let o = with_backtrace(&["reproduce", "thesis", "--quick", "--out", out_s]);
    assert_one_line_error(&o, "thesis.md already exists");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn help_shows_defaults_and_limits() {
    let o = bin().args(["run", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&o.stdout);
    for needle in [
        "[default: 0.5",
        "(0, 2]",
        "[default: w3",
        "[default: 100000",
        "1 to 8",
        "[default: none",
    ] {
        assert!(help.contains(needle), "{needle:?} missing:\n{help}");
    }
    let o = bin().args(["max-load", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&o.stdout);
    for needle in ["[default: 0.98]", "(0, 1]", "0 to 20"] {
        assert!(help.contains(needle), "{needle:?} missing:\n{help}");
    }
}

/// Short runs: the summary says what the delivery figure is, and why a
/// short run's is low.
#[test]
fn the_summary_explains_delivery() {
    let o = bin()
        .args(["run", "--quiet", "--messages", "3000", "--load", "0.8"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(s.contains("deliv/off"), "{s}");
    assert!(s.contains("delivered ÷ data offered"), "{s}");
    // 3,000 messages of w3 at 80%: a window of tens of µs, far shorter
    // than w3's largest messages take.
    assert!(s.contains("note: homa w3 80%"), "{s}");
    assert!(s.contains("--messages"), "{s}");
}

#[test]
fn bytedance_flag_and_mixed_scenario_run() {
    let out = temp_dir("bytedance");
    let o = bin()
        .args(["run", "--quiet", "--messages", "1500", "--out"])
        .arg(&out)
        .arg("--scenario")
        .arg(scenario("bytedance-mixed.toml"))
        .output()
        .expect("runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    let c = &report[0]["counters"];
    assert_eq!(report[0]["messages_incomplete"], 0);
    assert!(c["rtt_responses"].as_u64().unwrap() > 0, "{c}");
    assert_eq!(c["background_flows"], 2);
    assert!(c["background_delivered_frames"].as_u64().unwrap() > 0);
    std::fs::remove_dir_all(&out).unwrap();
    // The flag turns the mode on for a scenario without it.
    let out = temp_dir("bytedance-flag");
    let o = bin()
        .args([
            "run",
            "--quiet",
            "--bytedance",
            "--messages",
            "1000",
            "--out",
        ])
        .arg(&out)
        .arg("--scenario")
        .arg(scenario("small.toml"))
        .output()
        .expect("runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    assert!(report[0]["counters"]["rtt_probes_sent"].as_u64().unwrap() > 0);
    std::fs::remove_dir_all(&out).unwrap();
    // Only with Homa; reproduce bytedance has no --small.
    let o = bin()
        .args([
            "run",
            "--bytedance",
            "--protocol",
            "pfabric",
            "--messages",
            "10",
        ])
        .output()
        .expect("runs");
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("bytedance"));
    let o = bin()
        .args(["reproduce", "bytedance", "--small"])
        .output()
        .expect("runs");
    assert!(!o.status.success());
}
