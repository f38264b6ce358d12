//! Request sizes from workloads (the tables themselves, their sampling rule
//! and means are tested in homa-measure).

use homa_perf::{SizeDist, SizeSpec};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

#[test]
fn size_spec_caps_workload_sizes() {
    let spec = SizeSpec::Workload {
        workload: SizeDist::by_name("w5").unwrap(),
        max: 1_000_000,
    };
    assert_eq!(spec.max(), 1_000_000);
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    assert!((0..10_000).all(|_| spec.next(&mut rng) <= 1_000_000));
    assert_eq!(spec.workload_name(), Some("w5"));
    assert_eq!(SizeSpec::Fixed(123).next(&mut rng), 123);
}

#[test]
fn unknown_workloads_are_refused_with_the_valid_names() {
    let unknown = SizeDist::by_name("w9").unwrap_err().to_string();
    assert!(unknown.contains("w1, w2, w3, w4, w5"), "{unknown}");
    assert!(
        SizeDist::by_name("W2").is_ok(),
        "names are case-insensitive"
    );
}
