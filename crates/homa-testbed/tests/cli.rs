//! The `testbed` binary's command line: one-line errors whatever
//! RUST_BACKTRACE says, options refused before anything is built, no panic
//! on a closed stdout, defaults in `--help`. Most need no root; the ones
//! that would build a testbed if the checks failed look for it.

use std::path::PathBuf;
use std::process::{Command, Output};

use homa_testbed::netns;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_testbed"))
}

fn with_backtrace(args: &[&str]) -> Output {
    bin()
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .env("RUST_LIB_BACKTRACE", "1")
        .output()
        .expect("runs")
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("homa-testbed-cli-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// A prefix unique to this test and process.
fn prefix(tag: &str) -> String {
    format!("c{tag}{}", std::process::id() % 100_000)
}

fn assert_one_line_error(o: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "not one line:\n{err}");
    assert!(err.starts_with("testbed: "), "{err}");
    assert!(err.contains(needle), "{needle:?} missing: {err}");
    for bad in ["backtrace", "panicked", "Stack"] {
        assert!(!err.contains(bad), "{bad:?} in {err}");
    }
}

#[test]
fn user_errors_are_one_line_whatever_rust_backtrace_says() {
    let o = with_backtrace(&["report", "--from", "/nonexistent/results.json"]);
    assert_one_line_error(&o, "/nonexistent/results.json");
    let o = with_backtrace(&["up", "--hosts", "40", "--prefix", "x"]);
    assert_one_line_error(&o, "hosts must be 2..=16");
    let o = with_backtrace(&["status", "--prefix", "Not/A/Prefix"]);
    assert_one_line_error(&o, "prefix must be");
}

/// `--homa-set` was checked only after the testbed was built and the first
/// workload's idle probe had run; a bad rate for a later workload only
/// when it came. Both are refused before anything is built.
#[test]
fn bench_options_are_refused_before_the_testbed_is_built() {
    let p = prefix("h");
    let out = temp_dir("homaset");
    let out_s = out.to_str().unwrap();
    for (args, needle) in [
        (&["--homa-set", "core.nonsense=1"][..], "nonsense"),
        (&["--homa-set", "poll_us"], "expected key=value"),
        (&["--rates", "w5=200000"], "rate must be"),
        (&["--load", "-0.5"], "--load must be in (0, 1.5], got -0.5"),
        (&["--seconds", "0"], "--seconds must be in (0, ∞), got 0"),
        (&["--variants", "quic"], "unknown variant"),
    ] {
        let o = with_backtrace(&[&["bench", "--prefix", &p, "--out", out_s][..], args].concat());
        assert_one_line_error(&o, needle);
        assert!(!netns::exists(&p), "{args:?}: a testbed was built");
    }
    assert!(!out.exists(), "nothing written");
}

/// The default --out holds the committed report: a bench refuses to
/// replace a report without --force, before it builds anything.
#[test]
fn bench_never_overwrites_a_report_unless_forced() {
    let p = prefix("o");
    let out = temp_dir("overwrite");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("testbed.md"), "# committed").unwrap();
    let o = with_backtrace(&["bench", "--prefix", &p, "--out", out.to_str().unwrap()]);
    assert_one_line_error(&o, "testbed.md already exists; pass --force");
    assert!(!netns::exists(&p));
    assert_eq!(
        std::fs::read_to_string(out.join("testbed.md")).unwrap(),
        "# committed"
    );
    let file = out.join("testbed.md");
    let o = with_backtrace(&["bench", "--prefix", &p, "--out", file.to_str().unwrap()]);
    assert_one_line_error(&o, "not a directory");
    std::fs::remove_dir_all(&out).unwrap();
}

/// `testbed status --json | head` with the pipe closed first, SIGPIPE
/// blocked as some parents leave it: no panic.
#[test]
fn a_closed_stdout_ends_quietly() {
    let p = prefix("s");
    for args in [
        &["status", "--json", "--prefix", &p][..],
        &["status", "--prefix", &p],
        &["--help"],
        &["bench", "--help"],
    ] {
        let o = homa_measure::cli::run_with_closed_stdout(bin().args(args)).unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_ne!(o.status.code(), Some(101), "{args:?}: {err}");
    }
}

#[test]
fn help_shows_defaults_and_limits() {
    let o = bin().args(["bench", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&o.stdout);
    for needle in [
        "[default: 0.8]",
        "(0, 1.5]",
        "[default: w2,w3,w4,w5]",
        "w4 and w5 400",
        "cut to 1 MB",
        "--force",
        "[default: none]",
    ] {
        assert!(help.contains(needle), "{needle:?} missing:\n{help}");
    }
    let o = bin().args(["sird", "incast", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(help.contains("8 to 16,000,000"), "{help}");
}
