//! `testbed bytedance` and per-host link rates, end to end and small.
//! Needs root and iproute2; without them each test says why and passes.
//! Each test removes its testbed however it ends and checks nothing is
//! left.

use std::process::Command;

use homa_testbed::bytedance::BdResult;
use homa_testbed::netns::{self, TestbedSpec};
use homa_testbed::rates;

mod common;
use common::{skip_reason, Guard};

fn prefix(tag: &str) -> String {
    format!("{tag}{}", std::process::id() % 100_000)
}

fn tc_classes(ns: &str, dev: &str) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "tc", "class", "show", "dev", dev])
        .output()
        .expect("run tc");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_host_gets_its_own_link_rate() {
    if let Some(why) = skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let spec = TestbedSpec {
        prefix: prefix("bdr"),
        hosts: 2,
        rate_mbit: 400,
        ..TestbedSpec::default()
    };
    let _guard = Guard(spec.prefix.clone());
    netns::up(&spec).unwrap();
    rates::set_host_rate(&spec, 1, 100).unwrap();
    let nic1 = tc_classes(&spec.host_ns(1), "eth0");
    assert!(nic1.contains("rate 100Mbit"), "{nic1}");
    let p1 = tc_classes(&spec.switch_ns(), "p1");
    assert!(p1.contains("rate 100Mbit"), "{p1}");
    assert!(!p1.contains("400Mbit"), "{p1}");
    // The other host keeps the testbed's rate.
    let p0 = tc_classes(&spec.switch_ns(), "p0");
    assert!(
        p0.contains("rate 400Mbit") && !p0.contains("100Mbit"),
        "{p0}"
    );
    assert!(rates::set_host_rate(&spec, 2, 100).is_err());
    drop(_guard);
    assert!(!netns::exists(&spec.prefix));
}

#[test]
fn a_small_incast_runs_both_variants_and_only_the_mode_probes() {
    if let Some(why) = skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let prefix = prefix("bdi");
    let _guard = Guard(prefix.clone());
    let out = std::env::temp_dir().join(format!("homa-testbed-test-{prefix}"));
    let _ = std::fs::remove_dir_all(&out);
    let status = Command::new(env!("CARGO_BIN_EXE_testbed"))
        .args(["bytedance", "incast", "--clients", "2", "--seconds", "1.5"])
        .args(["--warmup", "0.3", "--rate-mbit", "200", "--prefix", &prefix])
        .arg("--out")
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    assert!(!netns::exists(&prefix), "testbed left behind");
    let text = std::fs::read_to_string(out.join("bytedance/incast.json")).unwrap();
    let r: BdResult = serde_json::from_str(&text).unwrap();
    assert_eq!(r.runs.len(), 2);
    assert_eq!(r.host_rates, vec![(0, 100)]);
    for run in &r.runs {
        assert!(run.homa_rpcs > 0, "{run:?}");
        assert!(!run.buckets.is_empty());
        let probes = run
            .counters
            .iter()
            .find(|(k, _)| k == "rtt_probes_sent")
            .map(|(_, v)| *v)
            .unwrap();
        assert_eq!(probes > 0, run.bytedance, "{run:?}");
        // The mode's nodes report what they detected about their peers.
        assert_eq!(!run.paths.is_empty(), run.bytedance, "{:?}", run.paths);
        if run.bytedance {
            let p = run
                .paths
                .iter()
                .find(|p| (p.from, p.to) == (1, 0))
                .unwrap_or_else(|| panic!("no clients → server path: {:?}", run.paths));
            assert_eq!(p.records, 2, "{p:?}");
            assert!(p.sampled > 0 && p.rtt_min_ns > 0.0, "{p:?}");
            assert_eq!(p.true_mbps, 100);
            assert!(p.true_bdp.is_some() && p.bdp_error().is_some(), "{p:?}");
        }
    }
    // Each client host's unloaded ping to the server, for the true RTTs.
    assert_eq!(r.pings.len(), 1, "{:?}", r.pings);
    assert!(r.pings[0].host == 1 && r.pings[0].min_ns > 0);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn bad_options_get_one_error_line_and_build_nothing() {
    let out = Command::new(env!("CARGO_BIN_EXE_testbed"))
        .args(["bytedance", "sweep", "--sizes", "0", "--prefix", "bdbad"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--sizes"), "{err}");
    assert!(!netns::exists("bdbad"));
}
