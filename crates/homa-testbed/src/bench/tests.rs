//! Unit tests of the bench's pieces that need no testbed.

use super::counters::priority_totals;
use super::*;
use crate::netns;
use crate::tc::ClassStats;

fn spec() -> TestbedSpec {
    TestbedSpec {
        prefix: "t".into(),
        hosts: 2,
        rate_mbit: 100,
        buffer_bytes: netns::DEFAULT_BUFFER_BYTES,
        host_queue_bytes: netns::DEFAULT_HOST_QUEUE_BYTES,
        mtu: 1500,
        switch_levels: crate::tc::PRIORITIES,
    }
}

fn args(out: &Path) -> BenchArgs {
    BenchArgs {
        workloads: vec!["w2".into(), "w5".into()],
        variants: vec!["homa".into(), "tcp".into()],
        load: 0.8,
        seconds: 1.0,
        warmup: 0.0,
        rates: vec![],
        mtus: vec![],
        tcp_connections: 1,
        client_max: 10,
        rtt_us: None,
        nic_queue_packets: 0.5,
        homa_set: vec![],
        buckets: 10,
        unloaded_points: 5,
        unloaded_count: 5,
        out: out.to_path_buf(),
        name: "t".into(),
        force: false,
    }
}

fn temp(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("homa-testbed-unit-{tag}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    d
}

/// `--homa-set` and the links were checked only once the testbed was up
/// (the homa-set when a workload's first run started, a bad rate when its
/// workload came): now before anything runs.
#[test]
fn bad_options_are_refused_before_the_testbed_is_built() {
    let out = temp("check");
    let mut a = args(&out);
    assert!(check(&a, &spec()).is_ok());
    a.homa_set = vec!["core.nonsense=1".into()];
    let e = format!("{:#}", check(&a, &spec()).unwrap_err());
    assert!(e.contains("nonsense"), "{e}");
    a.homa_set = vec!["core.max_overcommit=\"many\"".into()];
    assert!(check(&a, &spec()).is_err());
    a.homa_set.clear();
    a.rates = vec!["w5=200000".into()];
    let e = format!("{:#}", check(&a, &spec()).unwrap_err());
    assert!(e.contains("w5") && e.contains("rate"), "{e}");
    a.rates.clear();
    a.mtus = vec!["4294968296".into()];
    assert!(check(&a, &spec()).is_err(), "an MTU that wraps in 32 bits");
    a.mtus.clear();
    a.load = -0.5;
    let e = check(&a, &spec()).unwrap_err().to_string();
    assert_eq!(e, "--load must be in (0, 1.5], got -0.5");
    a.load = 0.8;
    a.unloaded_count = 0;
    assert!(check(&a, &spec()).is_err());
    a.unloaded_count = 5;
    fs::create_dir_all(&out).unwrap();
    fs::write(out.join("file"), "x").unwrap();
    a.out = out.join("file");
    let e = check(&a, &spec()).unwrap_err().to_string();
    assert!(e.contains("not a directory"), "{e}");
    let _ = fs::remove_dir_all(&out);
}

/// A finished report is replaced only with --force; finished runs are
/// kept run by run, resumed with the same options, and refused (not
/// silently mixed in or thrown away) with other ones.
#[test]
fn reports_are_not_overwritten_and_runs_resume() {
    let out = temp("store");
    let mut a = args(&out);
    let s = Settings::of(&a, &spec());
    let (st, kept) = Store::open(&a, &s).unwrap();
    assert_eq!(kept, 0);
    let key = UnitKey {
        workload: "w2".into(),
        rate_mbit: 20,
        mtu: 1500,
    };
    let baseline = crate::analysis::Baseline::new(vec![(100, 50_000), (1000, 60_000)]).unwrap();
    st.save_baseline(&key, &baseline).unwrap();
    drop(st);
    // Interrupted here; a rerun keeps the baseline.
    let (st, kept) = Store::open(&a, &s).unwrap();
    assert_eq!(kept, 1);
    assert_eq!(st.baseline(&key).unwrap(), Some(baseline));
    assert!(st.run(&key, Variant::Homa).unwrap().is_none());
    // Other options: refused, unless --force, which discards the runs.
    let mut b = args(&out);
    b.seconds = 2.0;
    let sb = Settings::of(&b, &spec());
    let e = format!("{:#}", store::check(&b, &sb).unwrap_err());
    assert!(e.contains("--force"), "{e}");
    b.force = true;
    let (st, kept) = Store::open(&b, &sb).unwrap();
    assert_eq!(kept, 0);
    st.remove().unwrap();
    // A finished report stays unless --force.
    fs::create_dir_all(&out).unwrap();
    fs::write(out.join("t.md"), "# done").unwrap();
    let e = check(&a, &spec()).unwrap_err().to_string();
    assert!(e.contains("t.md") && e.contains("--force"), "{e}");
    a.force = true;
    assert!(check(&a, &spec()).is_ok());
    let _ = fs::remove_dir_all(&out);
}

#[test]
fn help_states_every_default() {
    use clap::CommandFactory;
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: BenchArgs,
    }
    let cmd = Cli::command();
    assert_eq!(
        homa_measure::cli::options_without_default(&cmd),
        Vec::<String>::new()
    );
    let rates = cmd
        .get_arguments()
        .find(|a| a.get_id() == "rates")
        .and_then(|a| a.get_help())
        .unwrap()
        .to_string();
    for (w, rate, _) in DEFAULT_LINKS {
        assert!(
            rates.contains(w) && rates.contains(&rate.to_string()),
            "{rates}"
        );
    }
}

#[test]
fn rates_default_per_workload_and_can_be_overridden() {
    let mut a = args(&temp("rates"));
    a.variants = vec!["homa".into()];
    assert_eq!(a.link_for("w5"), (400, 9000));
    assert_eq!(a.link_for("w2"), (20, 1500));
    a.rates = vec!["300".into(), "w5=700".into()];
    a.mtus = vec!["w2=3000".into()];
    assert_eq!(a.link_for("w2"), (300, 3000));
    assert_eq!(a.link_for("w5"), (700, 9000));
    assert!(a.validate(Some(&spec())).is_ok());
    a.rates = vec!["w5=fast".into()];
    let e = a.validate(Some(&spec())).unwrap_err().to_string();
    assert!(e.contains("expected a number"), "{e}");
    a.rates = vec![];
    a.variants = vec!["quic".into()];
    assert!(a.validate(Some(&spec())).is_err());
}

#[test]
fn wire_factor_counts_a_header_per_packet() {
    let one = SizeDist::from_csv_str("t", "size_bytes,cdf\n1000,1\n").unwrap();
    let f = wire_factor(&one, 1500);
    assert!(
        (f - (1000.0 + PACKET_OVERHEAD as f64) / 1000.0).abs() < 1e-9,
        "{f}"
    );
    // 10,000 B in 1500-byte frames: 8 packets.
    let ten = SizeDist::from_csv_str("t", "size_bytes,cdf\n10000,1\n").unwrap();
    let per = 1500 - (PACKET_OVERHEAD - 14);
    assert_eq!(10_000usize.div_ceil(per), 8);
    let f = wire_factor(&ten, 1500);
    assert!((f - (10_000.0 + 8.0 * PACKET_OVERHEAD as f64) / 10_000.0).abs() < 1e-9);
    // Small-message workloads pay more for headers.
    let w2 = SizeDist::by_name("w2").unwrap();
    let w5 = SizeDist::by_name("w5").unwrap();
    assert!(wire_factor(&w2, 1500) > 1.15);
    assert!(wire_factor(&w5, 9000) < 1.02);
    let g = offered_gbps(0.8, 1000, 9000, &w5);
    assert!(g < 0.8 && g > 0.78, "{g}");
}

#[test]
fn homa_overrides_change_keys_and_refuse_unknown_ones() {
    let base = homa::Config::default();
    let c = apply_overrides(
        &base,
        &["core.fifo_grant_fraction=200".into(), "poll_us = 7".into()],
    )
    .unwrap();
    assert_eq!(c.core.fifo_grant_fraction, 200);
    assert_eq!(c.poll_us, 7);
    assert!(apply_overrides(&base, &["core.nonsense=1".into()]).is_err());
    assert!(apply_overrides(&base, &["poll_us".into()]).is_err());
    assert!(apply_overrides(&base, &["poll_us=[".into()]).is_err());
    // Values are checked like a configuration file.
    assert!(apply_overrides(&base, &["core.mtu=\"big\"".into()]).is_err());
}

#[test]
fn auto_rtt_covers_two_frames() {
    // 9014-byte frames at 400 Mbit/s take 180 µs each.
    assert_eq!(auto_rtt_ns(400, 9000), 50_000 + 2 * 180_280);
    assert_eq!(auto_rtt_ns(100, 1500), 50_000 + 2 * 121_120);
}

#[test]
fn priority_totals_sum_ports_and_keep_the_peak() {
    let c = |port, priority, bytes, drops| ClassStats {
        port,
        priority,
        bytes,
        packets: 1,
        drops,
        backlog_bytes: 0,
        backlog_packets: 0,
        overlimits: 0,
    };
    let t = priority_totals(
        &[c(0, 7, 100, 0), c(1, 7, 50, 1), c(0, 0, 10, 2)],
        &[(0, 7, 3000), (1, 7, 9000), (1, 0, 5)],
    );
    assert_eq!(t.len(), 2);
    assert_eq!(
        (
            t[0].priority,
            t[0].bytes,
            t[0].drops,
            t[0].peak_backlog_bytes
        ),
        (7, 150, 1, 9000)
    );
    assert_eq!((t[1].priority, t[1].packets, t[1].drops), (0, 1, 2));
}

#[test]
fn proc_stat_reads_busy_and_total() {
    let (busy, total) = proc_stat().expect("/proc/stat");
    assert!(busy <= total && total > 0);
}
