//! Workload tables: the embedded CSVs, the sampling rule, and their means.

use homa_perf::{SizeSpec, Workload};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Mean of `n` samples drawn with a fixed seed.
fn sample_mean(w: &Workload, n: usize, seed: u64) -> f64 {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| w.sample(&mut rng) as f64).sum::<f64>() / n as f64
}

#[test]
fn exact_means_match_the_readme() {
    // workloads/README.md: untruncated means, and the means after
    // truncation at 1,000,000 B reported by the Homa/Linux paper.
    let expected = [
        ("w1", 189.0, 189.0),
        ("w2", 442.0, 433.0),
        ("w3", 2_928.0, 2_423.0),
        ("w4", 127_797.0, 60_175.0),
        ("w5", 2_564_690.0, 385_315.0),
    ];
    for (name, full, truncated) in expected {
        let w = Workload::named(name).unwrap();
        let m = w.mean(u64::MAX);
        assert!((m - full).abs() <= 1.0, "{name}: mean {m}, README {full}");
        let t = w.mean(1_000_000);
        assert!(
            (t - truncated).abs() <= 1.0,
            "{name}: truncated mean {t}, paper {truncated}"
        );
    }
}

#[test]
fn sampled_mean_of_w1_is_close() {
    let w = Workload::named("w1").unwrap();
    let m = sample_mean(&w, 100_000, 7);
    // Standard error at 100k samples is 0.8% of the mean.
    assert!((m / 189.17 - 1.0).abs() < 0.03, "w1 sampled mean {m}");
}

#[test]
fn sampled_mean_of_w3_is_close() {
    let w = Workload::named("w3").unwrap();
    // w3's tail (up to 15 MB) makes its standard deviation 67 KB, 23 times
    // the mean: 100k samples would leave a 7% standard error, so this uses
    // 2M (1.6%) and a 5% tolerance, and checks 100k only loosely.
    let m = sample_mean(&w, 2_000_000, 7);
    assert!((m / 2_927.7 - 1.0).abs() < 0.05, "w3 sampled mean {m}");
    let m100k = sample_mean(&w, 100_000, 7);
    assert!(
        (m100k / 2_927.7 - 1.0).abs() < 0.25,
        "w3 100k-sample mean {m100k}"
    );
}

#[test]
fn sampling_takes_the_first_row_at_or_above_u() {
    // w1 starts: 8,0.31094 / 9,0.31931 / 10,0.32768 / 11,0.41757
    let w = Workload::named("w1").unwrap();
    assert_eq!(w.size_at(1e-12), 8);
    assert_eq!(w.size_at(0.31094), 8);
    assert_eq!(w.size_at(0.310_941), 9);
    assert_eq!(w.size_at(0.32768), 10);
    assert_eq!(w.size_at(0.4), 11);
    assert_eq!(w.size_at(1.0), 100_000);
    assert_eq!(w.max_size(), 100_000);
}

#[test]
fn samples_only_take_table_sizes() {
    let text = "size_bytes,cdf\n10,0.5\n20,0.75\n30,1\n";
    let w = Workload::parse("tiny", text).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut counts = [0u32; 3];
    for _ in 0..40_000 {
        match w.sample(&mut rng) {
            10 => counts[0] += 1,
            20 => counts[1] += 1,
            30 => counts[2] += 1,
            other => panic!("sampled {other}, not in the table"),
        }
    }
    let share = |c: u32| f64::from(c) / 40_000.0;
    assert!((share(counts[0]) - 0.5).abs() < 0.02);
    assert!((share(counts[1]) - 0.25).abs() < 0.02);
    assert!((share(counts[2]) - 0.25).abs() < 0.02);
}

#[test]
fn bad_tables_and_names_are_refused_with_reasons() {
    let err = |text: &str| Workload::parse("t", text).unwrap_err().to_string();
    assert!(err("").contains("no rows"));
    assert!(err("10,0.5\n").contains("last cdf"));
    assert!(err("20,0.5\n10,1\n").contains("not sorted"));
    assert!(err("10,0.6\n20,0.5\n30,1\n").contains("not sorted"));
    assert!(err("10,abc\n").contains("bad cdf"));
    assert!(err("10\n").contains("size_bytes,cdf"));
    assert!(err("10,1.5\n").contains("outside"));
    let unknown = Workload::named("w9").unwrap_err().to_string();
    assert!(unknown.contains("w1, w2, w3, w4, w5"), "{unknown}");
    assert!(Workload::named("W2").is_ok(), "names are case-insensitive");
}

#[test]
fn size_spec_caps_workload_sizes() {
    let spec = SizeSpec::Workload {
        workload: Workload::named("w5").unwrap(),
        max: 1_000_000,
    };
    assert_eq!(spec.max(), 1_000_000);
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    assert!((0..10_000).all(|_| spec.next(&mut rng) <= 1_000_000));
    assert_eq!(spec.workload_name(), Some("w5"));
    assert_eq!(SizeSpec::Fixed(123).next(&mut rng), 123);
}

#[test]
fn cdf_at_is_the_step_function_of_the_table() {
    let w = Workload::parse("t", "size_bytes,cdf\n10,0.25\n100,0.75\n1000,1\n").unwrap();
    assert_eq!(w.cdf_at(9), 0.0);
    assert_eq!(w.cdf_at(10), 0.25);
    assert_eq!(w.cdf_at(99), 0.25);
    assert_eq!(w.cdf_at(100), 0.75);
    assert_eq!(w.cdf_at(5000), 1.0);
    // size_at and cdf_at agree: the size at u has a CDF of at least u.
    for u in [0.1, 0.25, 0.5, 0.9, 1.0] {
        assert!(w.cdf_at(w.size_at(u)) >= u);
    }
}
