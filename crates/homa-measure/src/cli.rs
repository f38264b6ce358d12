//! Behaviour every command-line tool of the project shares, written once:
//!
//! * a write to a closed pipe ends the tool quietly
//!   ([`exit_quietly_on_broken_pipe`]);
//! * an error is one line, its causes joined, never a backtrace
//!   ([`error_line`]);
//! * arguments are checked before any expensive work: numeric ranges
//!   ([`check_in`]), output paths ([`check_output_dir`],
//!   [`check_output_file`]) and finished results that would be replaced
//!   ([`refuse_overwrite`]), each failing with one [`ArgError`];
//! * `--help` shows every option's default ([`options_without_default`]
//!   finds the ones that do not, for the tools' tests).

use std::error::Error;
use std::fmt::Write as _;
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};

/// Makes a write to a closed pipe end the process quietly, as `cat` or
/// `head` do (`homa-sim run ... | head` must not panic with "failed
/// printing to stdout"). Rust ignores SIGPIPE by default, turning it into
/// an `EPIPE` error that `println!` reports by panicking; this restores
/// the default action. Call first thing in `main`, before any thread
/// starts.
///
/// Restoring the action is not enough on its own: a signal mask is
/// inherited across `exec`, and a tool started by a parent that blocks
/// SIGPIPE (some supervisors and language runtimes do) would get `EPIPE`
/// and panic all the same. So SIGPIPE is unblocked too.
pub fn exit_quietly_on_broken_pipe() {
    // SAFETY: setting a signal's disposition to SIG_DFL installs no Rust
    // handler and touches no memory; the sigset is a local value that
    // sigemptyset initialises before use, and changing this thread's mask
    // (threads started later inherit it) affects only signal delivery. Done
    // once at start-up, before any thread that could race exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
}

/// The one line a tool prints for an error: its message, then each cause
/// after `": "`, skipping a cause whose text the line already holds (an
/// error whose message embeds its source would otherwise say it twice).
/// Never a backtrace, whatever `RUST_BACKTRACE` says: print this, not the
/// error's `Debug` form.
pub fn error_line(err: &(dyn Error + 'static)) -> String {
    let mut line = err.to_string();
    let mut cause = err.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !text.is_empty() && !line.contains(&text) {
            let _ = write!(line, ": {text}");
        }
        cause = c.source();
    }
    line
}

/// A command-line argument that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ArgError {
    /// A number outside the range the option allows.
    #[error("{flag} must be in {range}, got {value}")]
    OutOfRange {
        /// The option, e.g. `--load`.
        flag: String,
        /// The allowed range, e.g. `(0, 1]`.
        range: String,
        /// The value given.
        value: String,
    },
    /// Two options that contradict each other, or one with a bad value.
    #[error("{0}")]
    Invalid(String),
    /// An output path that cannot be written.
    #[error("{flag} {}: {problem}", path.display())]
    Output {
        /// The option naming the path, e.g. `--out`.
        flag: String,
        /// The path given.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
    /// Finished results that would be replaced without `--force`.
    #[error(
        "{} already exists; pass --force to replace it, or choose another --out",
        path.display()
    )]
    WouldOverwrite {
        /// The existing file or directory.
        path: PathBuf,
    },
}

/// Writes a range in interval notation: `(0, 1]`, `[1, 8]`, `[0, ∞)`.
fn fmt_range<R: RangeBounds<f64>>(range: &R) -> String {
    let num = |v: &f64| match *v {
        v if v == f64::INFINITY => "∞".to_string(),
        v if v == f64::NEG_INFINITY => "-∞".to_string(),
        v => v.to_string(),
    };
    let lo = match range.start_bound() {
        Bound::Included(v) => format!("[{}", num(v)),
        Bound::Excluded(v) => format!("({}", num(v)),
        Bound::Unbounded => "(-∞".to_string(),
    };
    let hi = match range.end_bound() {
        Bound::Included(v) => format!("{}]", num(v)),
        Bound::Excluded(v) => format!("{})", num(v)),
        Bound::Unbounded => "∞)".to_string(),
    };
    format!("{lo}, {hi}")
}

/// Checks that the value of `flag` lies in `range` (NaN never does), e.g.
/// `check_in("--load", load, (Bound::Excluded(0.0), Bound::Included(1.0)))`
/// for `(0, 1]`.
pub fn check_in<R: RangeBounds<f64>>(flag: &str, value: f64, range: R) -> Result<(), ArgError> {
    if range.contains(&value) {
        Ok(())
    } else {
        Err(ArgError::OutOfRange {
            flag: flag.to_string(),
            range: fmt_range(&range),
            value: value.to_string(),
        })
    }
}

/// The range `(0, 1]`: a fraction that must be positive.
pub const FRACTION: (Bound<f64>, Bound<f64>) = (Bound::Excluded(0.0), Bound::Included(1.0));

/// Whether this process may write into the directory `dir` (create files
/// in it): `access(2)`, which also says no on a read-only file system,
/// even to root.
fn writable(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: access only reads the NUL-terminated path it is given.
    unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) == 0 }
}

/// The closest ancestor of `path` that exists (`.` for a relative path
/// none of whose parents exist).
fn existing_ancestor(path: &Path) -> PathBuf {
    let mut p = path;
    loop {
        if p.as_os_str().is_empty() {
            return PathBuf::from(".");
        }
        if p.symlink_metadata().is_ok() {
            return p.to_path_buf();
        }
        match p.parent() {
            Some(parent) => p = parent,
            None => return PathBuf::from("."),
        }
    }
}

fn output_error(flag: &str, path: &Path, problem: String) -> ArgError {
    ArgError::Output {
        flag: flag.to_string(),
        path: path.to_path_buf(),
        problem,
    }
}

/// Checks, before any work, that `dir` is a directory this process can
/// write into, or one it can create (its closest existing ancestor is a
/// writable directory). Files in it may be replaced; see
/// [`refuse_overwrite`] for results that must not be.
pub fn check_output_dir(flag: &str, dir: &Path) -> Result<(), ArgError> {
    let base = existing_ancestor(dir);
    let meta = std::fs::metadata(&base)
        .map_err(|e| output_error(flag, dir, format!("cannot use {}: {e}", base.display())))?;
    if !meta.is_dir() {
        let problem = if base == dir {
            "exists and is not a directory".to_string()
        } else {
            format!("{} is a file, not a directory", base.display())
        };
        return Err(output_error(flag, dir, problem));
    }
    if !writable(&base) {
        let problem = if base == dir {
            "is not writable".to_string()
        } else {
            format!("cannot be created: {} is not writable", base.display())
        };
        return Err(output_error(flag, dir, problem));
    }
    Ok(())
}

/// Checks, before any work, that the file `file` can be created or
/// replaced: it is not a directory, and its directory exists writable or
/// can be created.
pub fn check_output_file(flag: &str, file: &Path) -> Result<(), ArgError> {
    if file.is_dir() {
        return Err(output_error(flag, file, "is a directory".into()));
    }
    let dir = match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    check_output_dir(flag, dir).map_err(|e| match e {
        ArgError::Output { problem, .. } => {
            // Name the directory where the check of `dir` spoke of itself.
            let problem = match problem.as_str() {
                "exists and is not a directory" => {
                    format!("{} is a file, not a directory", dir.display())
                }
                "is not writable" => format!("{} is not writable", dir.display()),
                _ => problem,
            };
            output_error(flag, file, problem)
        }
        other => other,
    })
}

/// Refuses to go on when any of `paths` (finished results the command
/// would replace) exists, unless `force`.
pub fn refuse_overwrite<P: AsRef<Path>>(
    paths: impl IntoIterator<Item = P>,
    force: bool,
) -> Result<(), ArgError> {
    if force {
        return Ok(());
    }
    match paths.into_iter().find(|p| p.as_ref().exists()) {
        Some(p) => Err(ArgError::WouldOverwrite {
            path: p.as_ref().to_path_buf(),
        }),
        None => Ok(()),
    }
}

/// The options of `cmd` and its visible subcommands (as `sub --option`)
/// that take a value and may be left out, but whose help says nothing of
/// what happens then: neither a default clap shows (`default_value_t`)
/// nor "default" in their help text (`[default: none]`, "default: number
/// of CPUs"). A tool's test asserts that this is empty.
pub fn options_without_default(cmd: &clap::Command) -> Vec<String> {
    let mut missing = Vec::new();
    collect_without_default(cmd, "", &mut missing);
    missing
}

fn collect_without_default(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
    for arg in cmd.get_arguments() {
        let takes_value = arg.get_action().takes_values();
        if !takes_value || arg.is_positional() || arg.is_required_set() || arg.is_hide_set() {
            continue;
        }
        if matches!(arg.get_id().as_str(), "help" | "version") {
            continue;
        }
        if !arg.get_default_values().is_empty() && !arg.is_hide_default_value_set() {
            continue;
        }
        let help = arg
            .get_long_help()
            .or(arg.get_help())
            .map(|h| h.to_string().to_ascii_lowercase())
            .unwrap_or_default();
        if !help.contains("default") {
            let name = arg
                .get_long()
                .map(|l| format!("--{l}"))
                .unwrap_or_else(|| arg.get_id().to_string());
            missing.push(format!("{path}{name}"));
        }
    }
    for sub in cmd.get_subcommands() {
        if sub.is_hide_set() {
            continue;
        }
        collect_without_default(sub, &format!("{path}{} ", sub.get_name()), missing);
    }
}

/// For a tool's tests: runs `cmd` with its standard output a pipe whose
/// reading end is already closed, and SIGPIPE blocked in the child (as a
/// parent may leave it), so that its first write to stdout fails. Returns
/// how it ended and what it wrote to stderr.
pub fn run_with_closed_stdout(
    cmd: &mut std::process::Command,
) -> std::io::Result<std::process::Output> {
    use std::os::fd::FromRawFd;
    use std::os::unix::process::CommandExt;
    let mut fds = [0; 2];
    // SAFETY: pipe writes two new descriptors into the array it is given.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned here only.
    let (read, write) = unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    };
    drop(read);
    cmd.stdout(std::process::Stdio::from(write))
        .stderr(std::process::Stdio::piped())
        .stdin(std::process::Stdio::null());
    // SAFETY: between fork and exec the closure only calls
    // async-signal-safe functions on a local sigset.
    unsafe {
        cmd.pre_exec(|| {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGPIPE);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            Ok(())
        });
    }
    cmd.output()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read {path}: {source}")]
    struct Repeats {
        path: String,
        source: std::io::Error,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("loading the scenario")]
    struct Outer(#[source] Repeats);

    #[test]
    fn error_line_joins_causes_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let e = Outer(Repeats {
            path: "/x.toml".into(),
            source: io,
        });
        assert_eq!(
            error_line(&e),
            "loading the scenario: cannot read /x.toml: no such file"
        );
    }

    #[test]
    fn ranges_are_checked_and_named() {
        assert!(check_in("--load", 0.5, FRACTION).is_ok());
        assert!(check_in("--load", 1.0, FRACTION).is_ok());
        let e = check_in("--load", -0.5, FRACTION).unwrap_err();
        assert_eq!(e.to_string(), "--load must be in (0, 1], got -0.5");
        assert!(check_in("--load", 0.0, FRACTION).is_err());
        assert!(check_in("--load", f64::NAN, FRACTION).is_err());
        let e = check_in("--steps", 40.0, 0.0..=20.0).unwrap_err();
        assert_eq!(e.to_string(), "--steps must be in [0, 20], got 40");
        let e = check_in("--seconds", -1.0, (Bound::Excluded(0.0), Bound::Unbounded)).unwrap_err();
        assert_eq!(e.to_string(), "--seconds must be in (0, ∞), got -1");
        let e = check_in("--warmup", -1.0, 0.0..f64::INFINITY).unwrap_err();
        assert_eq!(e.to_string(), "--warmup must be in [0, ∞), got -1");
    }

    fn temp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("homa-measure-cli-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let _ = std::fs::remove_file(&d);
        d
    }

    #[test]
    fn output_paths_are_checked_before_work() {
        let dir = temp("out");
        // Missing directories under a writable one can be created.
        assert!(check_output_dir("--out", &dir.join("a/b")).is_ok());
        std::fs::create_dir_all(&dir).unwrap();
        assert!(check_output_dir("--out", &dir).is_ok());
        let file = dir.join("file");
        std::fs::write(&file, "x").unwrap();
        let e = check_output_dir("--out", &file).unwrap_err().to_string();
        assert!(e.contains("exists and is not a directory"), "{e}");
        let e = check_output_dir("--out", &file.join("sub"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("is a file, not a directory"), "{e}");
        // Files: replacing one is fine, a directory is not a file.
        assert!(check_output_file("--out", &file).is_ok());
        assert!(check_output_file("--out", &dir.join("new.json")).is_ok());
        let e = check_output_file("--out", &dir).unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
        let e = check_output_file("--out", &file.join("x.json"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("is a file, not a directory"), "{e}");
        // Finished results stay unless forced.
        let e = refuse_overwrite([&file], false).unwrap_err().to_string();
        assert!(e.contains("--force"), "{e}");
        assert!(refuse_overwrite([&file], true).is_ok());
        assert!(refuse_overwrite([dir.join("absent")], false).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn options_without_a_stated_default_are_found() {
        let cmd = clap::Command::new("t")
            .arg(clap::Arg::new("a").long("a").default_value("1"))
            .arg(clap::Arg::new("b").long("b").help("B [default: none]"))
            .arg(clap::Arg::new("c").long("c").help("C"))
            .arg(
                clap::Arg::new("flag")
                    .long("flag")
                    .action(clap::ArgAction::SetTrue),
            )
            .subcommand(clap::Command::new("sub").arg(clap::Arg::new("d").long("d")));
        assert_eq!(options_without_default(&cmd), ["--c", "sub --d"]);
    }

    #[test]
    fn closed_stdout_helper_makes_the_first_write_fail() {
        // `echo` (bash's builtin or coreutils) reports the failed write.
        let out = run_with_closed_stdout(
            std::process::Command::new("sh").args(["-c", "echo hi; echo rc=$? >&2"]),
        )
        .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("rc=1"), "{err}");
    }
}
