//! `testbed sird` end to end, very short: both experiments with few hosts
//! on slow links, checking behaviour (every probe answered, goodput, the
//! design and SIRD settings of every endpoint, results kept unless
//! --force, nothing left behind), never timings. Needs root and iproute2;
//! without them the root test says why and passes.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use homa_testbed::netns;

mod common;
use common::{skip_reason, Guard};

fn testbed(args: &[&str], out: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_testbed"))
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .expect("run testbed")
}

fn json(path: PathBuf) -> serde_json::Value {
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).expect("valid JSON")
}

#[test]
fn sird_experiments_run_short_and_keep_their_results() {
    if let Some(why) = skip_reason() {
        eprintln!("skipping: {why}");
        return;
    }
    let prefix = format!("sd{}", std::process::id() % 100_000);
    let out = std::env::temp_dir().join(format!("homa-testbed-test-{prefix}"));
    let _ = std::fs::remove_dir_all(&out);
    let _guard = Guard(prefix.clone());
    let short = [
        "--prefix",
        &prefix,
        "--rate-mbit",
        "100",
        "--seconds",
        "0.6",
        "--warmup",
        "0.3",
        "--repeats",
        "1",
        "--sample-ms",
        "100",
    ];

    // Incast: 2 senders, a prober, a receiver; SIRD and Homa.
    let mut args = vec![
        "sird",
        "incast",
        "--senders",
        "2",
        "--variants",
        "sird,homa",
    ];
    args.extend(["--unloaded-seconds", "0.3"]);
    args.extend(short);
    let o = testbed(&args, &out);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "incast failed:\n{stderr}");
    assert!(
        stderr.contains("[1/2]") && stderr.contains("ETA"),
        "{stderr}"
    );
    let r = json(out.join("sird/incast.json"));
    assert_eq!(r["complete"], true);
    assert_eq!(r["hosts"], 4);
    let runs = r["incast"].as_array().expect("runs");
    assert_eq!(runs.len(), 2);
    for (run, design) in runs.iter().zip(["sird", "homa"]) {
        assert_eq!(run["probe_errors"], 0, "{run}");
        assert!(
            run["loaded"]["count"].as_u64().unwrap() > 0,
            "no probe answered: {run}"
        );
        assert!(run["unloaded"]["count"].as_u64().unwrap() > 0, "{run}");
        assert!(run["goodput_mbps"].as_f64().unwrap() > 0.0, "{run}");
        let designs = run["designs"].as_array().unwrap();
        assert_eq!(designs.len(), 4);
        assert!(designs.iter().all(|d| d == design), "{designs:?}");
        assert_eq!(run["config_checked"], true);
        assert!(run["queue"]["sent_bytes"].as_u64().unwrap() > 0);
    }

    // Congested sender with 2 receivers: both SThr settings.
    let mut args = vec!["sird", "congested", "--receivers", "2", "--size", "200000"];
    args.extend(["--other-size", "400000"]);
    args.extend(short);
    let o = testbed(&args, &out);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "congested failed:\n{stderr}");
    let r = json(out.join("sird/congested.json"));
    assert_eq!(r["hosts"], 5);
    let runs = r["congested"].as_array().expect("runs");
    let names: Vec<&str> = runs
        .iter()
        .map(|x| x["variant"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["sthr-inf", "sthr-half"]);
    for run in runs {
        assert!(run["aggregate_mbps"].as_f64().unwrap() > 0.0, "{run}");
        assert_eq!(run["receiver_goodput_mbps"].as_array().unwrap().len(), 2);
        assert_eq!(run["config_checked"], true, "{run}");
        assert!(run["designs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d == "sird"));
        assert_eq!(run["errors"], 0, "{run}");
        // The packet counter saw SIRD DATA into receiver 1; with SThr = ∞
        // nothing may carry csn.
        let counts = run["csn_into_first_receiver"].as_object().expect("counts");
        assert!(!counts.is_empty(), "{run}");
        for c in counts.values() {
            assert!(c["data"].as_u64().unwrap() > 0);
            assert_eq!(c["sird"], c["data"], "{run}");
            if run["variant"] == "sthr-inf" {
                assert_eq!(c["csn"], 0, "{run}");
            }
        }
    }

    // The report has both parts and the plots.
    let md = std::fs::read_to_string(out.join("sird.md")).expect("report");
    assert!(md.contains("## 6-to-1 incast") && md.contains("## Congested sender"));
    assert!(
        std::fs::metadata(out.join("sird/incast-cdf.png"))
            .unwrap()
            .len()
            > 5_000
    );

    // Results are kept unless --force.
    let o = testbed(&["sird", "incast", "--prefix", &prefix], &out);
    assert!(!o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("--force"), "{stderr}");

    assert!(netns::namespaces(&prefix).is_empty(), "namespaces left");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn bad_arguments_give_one_clear_error() {
    let out = std::env::temp_dir().join("homa-testbed-test-sird-bad");
    for args in [
        vec![
            "sird",
            "incast",
            "--variants",
            "sthr-inf",
            "--prefix",
            "sdbad",
        ],
        vec!["sird", "congested", "--seconds", "-1", "--prefix", "sdbad"],
        vec!["sird", "report", "--name", "nothing-here"],
    ] {
        let o = testbed(&args, &out);
        assert!(!o.status.success(), "{args:?} succeeded");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            !stderr.contains("panicked") && !stderr.contains("backtrace"),
            "{args:?}: {stderr}"
        );
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert!(
            lines.len() <= 3
                && lines
                    .iter()
                    .any(|l| l.contains("error") || l.contains("testbed:")),
            "{args:?}: {stderr}"
        );
    }
    assert!(netns::namespaces("sdbad").is_empty());
}
