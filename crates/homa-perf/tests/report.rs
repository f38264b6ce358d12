//! Percentiles and the JSON report (the size classes are tested in
//! homa-measure).

use homa_perf::stats::{Recorder, RunLabel};
use homa_perf::Report;
use std::time::Duration;

fn label(workload: Option<&str>) -> RunLabel {
    RunLabel {
        protocol: "tcp".into(),
        busy_poll: false,
        concurrency: 2,
        size: if workload.is_some() { None } else { Some(100) },
        workload: workload.map(str::to_string),
        response_size: 100,
    }
}

#[test]
fn percentiles_and_throughput() {
    let mut r = Recorder::new(false);
    for us in 1..=1_000u64 {
        r.record(1_000, 100, Duration::from_micros(us));
    }
    r.record_error();
    let rep = Report::new(label(None), &r, Duration::from_secs(1));
    assert_eq!(rep.rpcs, 1_000);
    assert_eq!(rep.errors, 1);
    let near = |v: Option<f64>, want: f64| (v.unwrap() / want - 1.0).abs() < 0.002;
    assert!(near(rep.p50_us, 500.0), "{:?}", rep.p50_us);
    assert!(near(rep.p99_us, 990.0), "{:?}", rep.p99_us);
    assert!(near(rep.p999_us, 999.0), "{:?}", rep.p999_us);
    assert!(near(rep.mean_us, 500.5), "{:?}", rep.mean_us);
    // 1,000 requests of 1,000 B in 1 s = 8 Mbit/s.
    assert!((rep.gbps - 0.008).abs() < 1e-9, "{}", rep.gbps);
    assert!(rep.buckets.is_none());
}

#[test]
fn merging_recorders_adds_up() {
    let mut a = Recorder::new(true);
    let mut b = Recorder::new(true);
    a.record(100, 100, Duration::from_micros(10));
    b.record(2_000_000, 100, Duration::from_micros(1_000));
    b.record_error();
    a.merge(&b);
    assert_eq!((a.rpcs, a.errors, a.request_bytes), (2, 1, 2_000_100));
    let rep = Report::new(label(Some("w4")), &a, Duration::from_millis(1));
    let buckets = rep.buckets.unwrap();
    assert_eq!(buckets[0].count, 1);
    assert_eq!(buckets[5].count, 1);
    assert!(buckets[1].p50_us.is_none());
}

#[test]
fn json_has_the_documented_fields() {
    let mut r = Recorder::new(true);
    for (size, us) in [(50, 5), (500, 7), (5_000, 9), (50_000, 40), (500_000, 300)] {
        r.record(size, 100, Duration::from_micros(us));
    }
    let rep = Report::new(label(Some("w3")), &r, Duration::from_millis(10));
    let v: serde_json::Value = serde_json::from_str(&rep.to_json_string()).unwrap();
    for key in [
        "protocol",
        "rpcs",
        "errors",
        "p50_us",
        "p99_us",
        "p999_us",
        "mean_us",
        "gbps",
        "busy_poll",
        "concurrency",
        "workload",
        "buckets",
        "elapsed_s",
        "response_size",
    ] {
        assert!(v.get(key).is_some(), "missing {key} in {v}");
    }
    assert_eq!(v["protocol"], "tcp");
    assert_eq!(v["workload"], "w3");
    assert!(v.get("size").is_none(), "size is only for fixed-size runs");
    let buckets = v["buckets"].as_array().unwrap();
    assert_eq!(buckets.len(), 6);
    for b in buckets {
        for key in ["label", "count", "p50_us", "p99_us"] {
            assert!(b.get(key).is_some(), "bucket lacks {key}: {b}");
        }
    }
    assert_eq!(buckets[3]["count"], 1);
    assert_eq!(buckets[5]["count"], 0);
    assert!(buckets[5]["p50_us"].is_null());

    let mut plain = Recorder::new(false);
    plain.record(100, 100, Duration::from_micros(5));
    let fixed = Report::new(label(None), &plain, Duration::from_millis(10));
    let v = fixed.to_json();
    assert_eq!(v["size"], 100);
    assert!(v.get("workload").is_none() && v.get("buckets").is_none());
    // The table mentions the numbers too.
    assert!(fixed.to_table().contains("p99.9 us"));
}
