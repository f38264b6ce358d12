//! Helpers of the tests that compile and run C: finding the C compiler and
//! the library cargo built, compiling the C programs once per test binary,
//! running programs with a time limit, and a server process that is killed
//! if a test fails.
#![allow(dead_code)] // each test binary uses a different subset

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// This crate's directory (header, examples, C tests, Makefile).
pub const CRATE_DIR: &str = env!("CARGO_MANIFEST_DIR");

/// Longest any one C program may run (they take well under a second; the
/// margin is for a loaded machine).
pub const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// What the static library needs from the system when linking (as
/// `rustc --print native-static-libs` reports for Linux; the Makefile's
/// `Libs.private` says the same).
pub const NATIVE_LIBS: &[&str] = &[
    "-lgcc_s",
    "-lutil",
    "-lrt",
    "-lpthread",
    "-lm",
    "-ldl",
    "-lc",
];

/// Flags every C program is compiled with: warnings are errors, so the
/// header must stay clean.
pub const CFLAGS: &[&str] = &["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-O1"];

/// The C programs, by name, and their sources.
pub const PROGRAMS: &[(&str, &str)] = &[
    ("echo_server", "examples/c/echo_server.c"),
    ("echo_client", "examples/c/echo_client.c"),
    ("epoll_echo", "examples/c/epoll_echo.c"),
    ("errors_test", "tests/c/errors_test.c"),
    ("threads_test", "tests/c/threads_test.c"),
    ("stream_test", "tests/c/stream_test.c"),
    ("layout", "tests/c/layout.c"),
];

/// True if `cmd --version` runs.
pub fn works(cmd: &str) -> bool {
    Command::new(cmd)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The C compiler (`$CC` or `cc`), or None after saying the test skips.
pub fn c_compiler() -> Option<String> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    if works(&cc) {
        Some(cc)
    } else {
        eprintln!(
            "skipping: no C compiler ({cc}) found; install one (e.g. gcc) to run the C tests"
        );
        None
    }
}

/// The directory holding the `libhomars.a` and `libhomars.so` cargo built
/// for this test run: next to the test binary (`target/<profile>/deps`),
/// or the profile directory above it.
pub fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let deps = exe.parent().expect("test binary directory").to_path_buf();
    for dir in [deps.clone(), deps.parent().unwrap_or(&deps).to_path_buf()] {
        if dir.join("libhomars.a").is_file() && dir.join("libhomars.so").is_file() {
            return dir;
        }
    }
    panic!(
        "libhomars.a / libhomars.so not found in {} or its parent: cargo builds them with \
         this package's tests (crate-type cdylib + staticlib)",
        deps.display()
    );
}

/// The C programs, compiled.
pub struct Built {
    /// The C compiler used.
    pub cc: String,
    dir: PathBuf,
}

impl Built {
    /// The path of the compiled program `name`.
    pub fn bin(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

static BUILT: OnceLock<Option<Built>> = OnceLock::new();

/// Compiles every C program once (statically linked with `libhomars.a`);
/// None if there is no C compiler.
pub fn built() -> Option<&'static Built> {
    BUILT
        .get_or_init(|| {
            let cc = c_compiler()?;
            let lib = lib_dir().join("libhomars.a");
            // One directory per test binary: they may run at the same time.
            let exe = std::env::current_exe().expect("test binary path");
            let stem = exe.file_stem().expect("a file name").to_string_lossy();
            let name = stem.rsplit_once('-').map_or(&*stem, |(n, _hash)| n);
            let dir = out_dir(&format!("c-programs-{name}"));
            for (name, src) in PROGRAMS {
                let mut cmd = Command::new(&cc);
                cmd.args(CFLAGS)
                    .arg(format!("-I{CRATE_DIR}/include"))
                    .arg(format!("-I{CRATE_DIR}/tests/c"))
                    .arg(Path::new(CRATE_DIR).join(src))
                    .arg(&lib)
                    .args(NATIVE_LIBS)
                    // Smaller programs: no unused code, no debug info.
                    .args(["-Wl,--gc-sections", "-Wl,--strip-debug"])
                    .arg("-o")
                    .arg(dir.join(name));
                run(&mut cmd, RUN_TIMEOUT);
            }
            Some(Built { cc, dir })
        })
        .as_ref()
}

/// An empty scratch directory for this test binary, under cargo's target
/// directory.
pub fn out_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("homars-c")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

/// What a finished program printed.
pub struct Output {
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

/// Kills a child of ours (by its own handle) if the test lets go of it
/// while it still runs.
struct Reaper(Child);

impl Drop for Reaper {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Reads a pipe to its end on a thread.
fn drain(mut r: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut s = String::new();
        let mut bytes = Vec::new();
        let _ = r.read_to_end(&mut bytes);
        s.push_str(&String::from_utf8_lossy(&bytes));
        let _ = tx.send(s);
    });
    rx
}

/// Waits for `child` until `deadline`; None if it is still running then.
fn wait_until(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    loop {
        if let Some(s) = child.try_wait().expect("wait for child") {
            return Some(s);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs `cmd` to completion within `timeout`; panics (with its output) if
/// it fails or takes longer.
pub fn run(cmd: &mut Command, timeout: Duration) -> Output {
    let what = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    let out = drain(child.stdout.take().expect("piped"));
    let err = drain(child.stderr.take().expect("piped"));
    let mut reaper = Reaper(child);
    let status = wait_until(&mut reaper.0, Instant::now() + timeout);
    drop(reaper); // kills it if still running, which closes its pipes
    let stdout = out.recv().unwrap_or_default();
    let stderr = err.recv().unwrap_or_default();
    match status {
        Some(s) if s.success() => Output { stdout, stderr },
        Some(s) => panic!("{what} failed ({s}):\n{stdout}\n{stderr}"),
        None => panic!("{what} took longer than {timeout:?}:\n{stdout}\n{stderr}"),
    }
}

/// A server program that prints "listening on ADDR" first.
pub struct Server {
    /// The address it listens on.
    pub addr: String,
    child: Reaper,
    rest: mpsc::Receiver<String>,
}

impl Server {
    /// Starts `bin args...` and waits for its "listening on" line.
    pub fn start(bin: &Path, args: &[&str]) -> Server {
        Server::start_with(Command::new(bin).args(args))
    }

    /// Starts `cmd` and waits for its "listening on" line.
    pub fn start_with(cmd: &mut Command) -> Server {
        let what = format!("{cmd:?}");
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
        let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
        let child = Reaper(child);
        let (tx, first) = mpsc::channel();
        let (rest_tx, rest) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = stdout.read_line(&mut line);
            let _ = tx.send(line);
            let mut s = String::new();
            let _ = stdout.read_to_string(&mut s);
            let _ = rest_tx.send(s);
        });
        let line = first
            .recv_timeout(RUN_TIMEOUT)
            .unwrap_or_else(|_| panic!("{what} did not start"));
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("{what} printed {line:?} instead of \"listening on ADDR\""))
            .to_string();
        Server { addr, child, rest }
    }

    /// Waits for the server to exit by itself; its status and the rest of
    /// its output.
    pub fn wait(mut self, timeout: Duration) -> (ExitStatus, String) {
        let status = wait_until(&mut self.child.0, Instant::now() + timeout)
            .unwrap_or_else(|| panic!("the server did not exit within {timeout:?}"));
        let rest = self.rest.recv_timeout(timeout).unwrap_or_default();
        (status, rest)
    }
}
