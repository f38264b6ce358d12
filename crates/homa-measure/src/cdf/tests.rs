//! Tests of the workload CDFs.

use super::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// A toy packetization: packets of up to 1,000 payload bytes, 100 bytes of
/// header each, at least one packet per message.
struct Frames;

impl WireBytes for Frames {
    fn message_wire_bytes(&self, size: u64) -> u64 {
        size + size.div_ceil(1000).max(1) * 100
    }
}

fn parse_err(text: &str) -> (usize, String) {
    match SizeDist::from_csv_str("t", text) {
        Err(CdfError::Parse { line, reason, .. }) => (line, reason),
        other => panic!("expected a parse error, got {other:?}"),
    }
}

#[test]
fn builtins_parse_and_means_match_readme() {
    let expected = [
        ("w1", 189.0, 189.0, 100_000),
        ("w2", 442.0, 433.0, 3_529_904),
        ("w3", 2_928.0, 2_423.0, 15_158_197),
        ("w4", 127_797.0, 60_175.0, 10_000_000),
        ("w5", 2_564_690.0, 385_315.0, 29_400_000),
        ("thesis-w3", 2_567.0, 2_567.0, 316_228),
        ("thesis-w5", 68_937.0, 68_937.0, 1_000_000),
    ];
    assert_eq!(
        BUILTIN,
        expected.iter().map(|e| e.0).collect::<Vec<_>>().as_slice()
    );
    for (name, mean, capped_mean, max) in expected {
        let d = SizeDist::by_name(name).unwrap();
        assert_eq!(d.name(), name);
        assert!(
            (d.mean().round() - mean).abs() <= 1.0,
            "{name}: mean {} vs README {mean}",
            d.mean()
        );
        let c = d.capped(1_000_000);
        assert!(
            (c.mean().round() - capped_mean).abs() <= 1.0,
            "{name}: capped mean {} vs README {capped_mean}",
            c.mean()
        );
        assert_eq!(d.max(), max);
        assert!(c.max() <= 1_000_000);
        let total: f64 = d.rows().map(|(_, m)| m).sum();
        assert!((total - 1.0).abs() < 1e-9);
        assert!(d.rows().all(|(_, m)| m > 0.0));
    }
    // Aliases and case.
    assert_eq!(
        SizeDist::by_name("THESIS-W3-synthetic").unwrap(),
        SizeDist::by_name("thesis-w3").unwrap()
    );
}

#[test]
fn unknown_and_fixed_names() {
    match SizeDist::by_name("w9") {
        Err(e @ CdfError::UnknownName { .. }) => {
            let msg = e.to_string();
            for n in BUILTIN {
                assert!(msg.contains(n), "{msg}");
            }
            assert!(msg.contains("fixed:N"), "{msg}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        SizeDist::by_name("fixed:abc"),
        Err(CdfError::BadFixed { .. })
    ));
    assert!(matches!(
        SizeDist::by_name("/nonexistent/dir/x.csv"),
        Err(CdfError::Io { .. })
    ));
    let f = SizeDist::by_name("fixed:1000").unwrap();
    assert_eq!(f, SizeDist::fixed(1000));
    assert_eq!(f.name(), "fixed:1000");
    assert_eq!((f.min(), f.max(), f.mean()), (1000, 1000, 1000.0));
    assert_eq!((f.cdf(999), f.cdf(1000)), (0.0, 1.0));
    assert_eq!(f.quantile(0.3), 1000);
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    assert!((0..1000).all(|_| f.sample(&mut rng) == 1000));
    let p = Frames;
    assert_eq!(f.mean_wire_bytes(&p), p.message_wire_bytes(1000) as f64);
}

#[test]
fn reads_a_file_from_disk() {
    let path = std::env::temp_dir().join(format!("homa-sim-wl-{}.csv", std::process::id()));
    std::fs::write(&path, "size_bytes,cdf\n10,0.5\n20,1\n").unwrap();
    let d = SizeDist::by_name(path.to_str().unwrap()).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(d.mean(), 15.0);
    assert_eq!(d.name(), path.to_str().unwrap());
}

/// Draws `n` sizes from `d`; returns the sample mean and the largest
/// gap between the empirical CDF and `d`'s CDF over `d`'s sizes (the
/// Kolmogorov–Smirnov statistic of a step distribution).
fn sample_stats(d: &SizeDist, n: u32, rng: &mut ChaCha8Rng) -> (f64, f64) {
    let sizes: Vec<u64> = d.rows().map(|(s, _)| s).collect();
    let mut counts = vec![0u64; sizes.len()];
    let mut sum = 0u128;
    for _ in 0..n {
        let s = d.sample(rng);
        sum += s as u128;
        let i = sizes.partition_point(|&x| x < s);
        assert_eq!(
            sizes[i],
            s,
            "{}: sampled size {s} not in the table",
            d.name()
        );
        counts[i] += 1;
    }
    let mut seen = 0u64;
    let mut ks: f64 = 0.0;
    for (&s, &c) in sizes.iter().zip(&counts) {
        seen += c;
        ks = ks.max((seen as f64 / n as f64 - d.cdf(s)).abs());
    }
    (sum as f64 / n as f64, ks)
}

/// Relative standard error of the mean of `n` samples of `d`.
fn rel_std_error(d: &SizeDist, n: u32) -> f64 {
    let mean = d.mean();
    let var: f64 = d.rows().map(|(s, m)| m * (s as f64 - mean).powi(2)).sum();
    var.sqrt() / (n as f64).sqrt() / mean
}

/// Acceptance test of the issue: the mean of 10^6 samples is within 1%
/// of the distribution's exact mean.
///
/// The relative standard error of a 10^6-sample mean (sd / mean / 1000)
/// decides where 1% is a meaningful bound:
///
/// | distribution            | rel. std error |
/// |-------------------------|----------------|
/// | w1                      | 0.25%          |
/// | w2                      | 1.68%          |
/// | w3                      | 2.30%          |
/// | w4                      | 0.55%          |
/// | w5                      | 0.24%          |
/// | thesis-w3               | 0.47%          |
/// | thesis-w5               | 0.21%          |
/// | w2 capped at 1,000,000  | 1.13%          |
/// | w3 capped at 1,000,000  | 1.02%          |
/// | w4 capped at 1,000,000  | 0.30%          |
/// | w5 capped at 1,000,000  | 0.11%          |
///
/// For the distributions below 0.5% (1% is at least 2 sigma) the test
/// asserts 1% with a fixed seed. For w2 and w3 (capped or not) and
/// uncapped w4, 1% is within about one standard error: no correct
/// sampler can meet it reliably at 10^6 samples (a fixed seed would
/// pass or fail by luck). There the mean is checked against 4 standard
/// errors instead, and `sample_distribution_matches_table` checks the
/// whole distribution, tail rows included, which is the stronger test
/// of the sampler.
#[test]
fn sample_mean_within_one_percent() {
    const N: u32 = 1_000_000;
    let mut rng = ChaCha8Rng::seed_from_u64(0x5eed_1234);
    let get = |n: &str| SizeDist::by_name(n).unwrap();
    let one_percent = [
        get("w1"),
        get("w5"),
        get("thesis-w3"),
        get("thesis-w5"),
        get("w4").capped(1_000_000),
        get("w5").capped(1_000_000),
    ];
    for d in &one_percent {
        assert!(rel_std_error(d, N) < 0.005, "{}", d.name());
        let (got, _) = sample_stats(d, N, &mut rng);
        let err = (got - d.mean()).abs() / d.mean();
        assert!(
            err < 0.01,
            "{}: sample mean {got} vs exact {} (error {:.3}%)",
            d.name(),
            d.mean(),
            err * 100.0
        );
    }
    let heavy = [
        get("w2"),
        get("w3"),
        get("w4"),
        get("w2").capped(1_000_000),
        get("w3").capped(1_000_000),
    ];
    for d in &heavy {
        let se = rel_std_error(d, N);
        let (got, _) = sample_stats(d, N, &mut rng);
        let err = (got - d.mean()).abs() / d.mean();
        assert!(
            err < 4.0 * se,
            "{}: sample mean {got} vs exact {} (error {:.3}%, std error {:.3}%)",
            d.name(),
            d.mean(),
            err * 100.0,
            se * 100.0
        );
    }
}

/// The empirical CDF of 10^6 samples matches every built-in table: the
/// Kolmogorov–Smirnov distance stays below 0.0025 (the 99.999% critical
/// value is about 2.4 / sqrt(10^6) = 0.0024), and every sample is a
/// size from the table.
#[test]
fn sample_distribution_matches_table() {
    const N: u32 = 1_000_000;
    let mut rng = ChaCha8Rng::seed_from_u64(0xd157);
    for name in BUILTIN {
        let d = SizeDist::by_name(name).unwrap();
        let (_, ks) = sample_stats(&d, N, &mut rng);
        assert!(ks < 0.0025, "{name}: KS distance {ks}");
    }
}

#[test]
fn samples_are_sizes_from_the_file() {
    let text = include_str!("../../workloads/w2.csv");
    let sizes: std::collections::HashSet<u64> = text
        .lines()
        .skip(1)
        .filter_map(|l| l.split(',').next()?.trim().parse().ok())
        .collect();
    let d = SizeDist::from_csv_str("w2", text).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for _ in 0..100_000 {
        assert!(sizes.contains(&d.sample(&mut rng)));
    }
    assert_eq!(d.min(), 8);
    assert_eq!(d.max(), 3_529_904);
}

#[test]
fn quantile_and_cdf_agree() {
    for name in BUILTIN {
        let d = SizeDist::by_name(name).unwrap();
        for k in 0..=1000 {
            let p = k as f64 / 1000.0;
            let q = d.quantile(p);
            assert!(d.cdf(q) >= p, "{name} p={p}");
            if q > d.min() {
                assert!(d.cdf(q - 1) < p, "{name} p={p}");
            }
        }
        for (s, _) in d.rows() {
            assert_eq!(d.quantile(d.cdf(s)), s);
        }
        assert_eq!(d.cdf(d.max()), 1.0);
        assert_eq!(d.cdf(u64::MAX), 1.0);
        assert_eq!(d.quantile(0.0), d.min());
        assert_eq!(d.quantile(1.0), d.max());
        assert_eq!(d.quantile(2.0), d.max());
    }
}

#[test]
fn step_semantics_and_normalisation() {
    // Repeated sizes, zero-mass rows and a slightly-off last cdf.
    let d = SizeDist::from_csv_str(
        "t",
        "# comment\nsize_bytes, cdf\r\n5,0\n10,0.25\n10,0.5\n\n20,0.5\n30,0.9999995\n40,0.9999995\n",
    )
    .unwrap();
    let rows: Vec<_> = d.rows().collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].0, 10);
    assert_eq!(rows[1].0, 30);
    assert!((rows[0].1 - 0.5).abs() < 1e-6);
    assert_eq!((d.min(), d.max()), (10, 30));
    assert_eq!(d.cdf(9), 0.0);
    assert_eq!(d.cdf(29), d.cdf(10));
    assert_eq!(d.cdf(40), 1.0);
    assert!((d.mean() - 20.0).abs() < 1e-4);

    let c = SizeDist::by_name("w4").unwrap().capped(1000);
    assert_eq!(c.max(), 1000);
    assert_eq!(c.name(), "w4 capped at 1000");
    let w4 = SizeDist::by_name("w4").unwrap();
    assert_eq!(c.cdf(999), w4.cdf(999));
    assert_eq!(w4.capped(u64::MAX), w4);
}

#[test]
fn mean_wire_bytes_is_exact() {
    let p = Frames;
    let d = SizeDist::from_csv_str("t", "size_bytes,cdf\n0,0.25\n100,0.5\n3000,1\n").unwrap();
    // 0 B: one empty packet (100); 100 B: 200; 3000 B: three packets, 3300.
    let want = 0.25 * 100.0 + 0.25 * 200.0 + 0.5 * 3300.0;
    assert!((d.mean_wire_bytes(&p) - want).abs() < 1e-9);
    assert_eq!(SizeDist::fixed(3000).mean_wire_bytes(&p), 3300.0);
}

#[test]
fn bad_csvs_report_line_and_reason() {
    let (line, why) = parse_err("size_bytes,cdf\n10,0.5\n20,0.4\n30,1\n");
    assert_eq!(line, 3);
    assert!(why.contains("decreases"), "{why}");

    let (line, why) = parse_err("size_bytes,cdf\n10,0.5\n5,0.6\n30,1\n");
    assert_eq!(line, 3);
    assert!(why.contains("smaller"), "{why}");

    let (line, why) = parse_err("10,0.5\n20,1\n");
    assert_eq!(line, 1);
    assert!(why.contains("header"), "{why}");

    let (line, why) = parse_err("size_bytes,cdf\n10,0.5\n20,1.5\n");
    assert_eq!(line, 3);
    assert!(why.contains("outside [0, 1]"), "{why}");

    let (line, why) = parse_err("size_bytes,cdf\n10,-0.1\n20,1\n");
    assert_eq!(line, 2);
    assert!(why.contains("outside [0, 1]"), "{why}");

    let (line, why) = parse_err("size_bytes,cdf\n10,0.5\n20,0.9\n");
    assert_eq!(line, 3);
    assert!(why.contains("last cdf is 0.9"), "{why}");

    let (line, why) = parse_err("size_bytes,cdf\n10,0.5\nabc,1\n");
    assert_eq!(line, 3);
    assert!(why.contains("`abc`"), "{why}");

    let (line, why) = parse_err("size_bytes,cdf\n10,half\n");
    assert_eq!(line, 2);
    assert!(why.contains("not a number"), "{why}");

    let (line, why) = parse_err("size_bytes,cdf\n99999999999999999999,1\n");
    assert_eq!(line, 2);
    assert!(why.contains("64 bits"), "{why}");

    let (line, why) = parse_err("size_bytes,cdf\n10,0.5,7\n");
    assert_eq!(line, 2);
    assert!(why.contains("two comma-separated"), "{why}");

    let (line, why) = parse_err("size_bytes,cdf\n");
    assert_eq!(line, 1);
    assert!(why.contains("no data rows"), "{why}");

    let (line, why) = parse_err("");
    assert_eq!(line, 1);
    assert!(why.contains("empty"), "{why}");

    // The Display form names the workload and the line.
    let e = SizeDist::from_csv_str("mine", "size_bytes,cdf\n10,0.5\n20,0.4\n").unwrap_err();
    assert!(e.to_string().starts_with("workload mine, line 3: "), "{e}");
}

#[test]
fn sampling_takes_the_first_row_at_or_above_u() {
    // w1 starts: 8,0.31094 / 9,0.31931 / 10,0.32768 / 11,0.41757
    let w = SizeDist::by_name("w1").unwrap();
    assert_eq!(w.quantile(1e-12), 8);
    assert_eq!(w.quantile(0.31094), 8);
    assert_eq!(w.quantile(0.310_941), 9);
    assert_eq!(w.quantile(0.32768), 10);
    assert_eq!(w.quantile(0.4), 11);
    assert_eq!(w.quantile(1.0), 100_000);
    assert_eq!(w.max(), 100_000);
}
