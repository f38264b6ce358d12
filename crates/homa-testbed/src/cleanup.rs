//! Leaving nothing behind: on SIGINT, SIGTERM or SIGHUP, kill the child
//! processes this program started, run the registered clean-up hooks
//! (e.g. removing the bench's directories on remote hosts), tear the
//! testbed down and exit.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use tracing::warn;

use crate::netns;

/// Exit status after a termination signal (128 + SIGINT, by convention).
pub const EXIT_INTERRUPTED: i32 = 130;

static CHILDREN: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());
static PREFIX: Mutex<Option<String>> = Mutex::new(None);
/// A clean-up action run by the signal handler.
type Hook = Box<dyn Fn() + Send>;

static HOOKS: Mutex<Vec<Hook>> = Mutex::new(Vec::new());
static INSTALLED: AtomicBool = AtomicBool::new(false);
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

fn children() -> MutexGuard<'static, BTreeSet<u32>> {
    // The registry must stay usable after a panic elsewhere.
    CHILDREN.lock().unwrap_or_else(|e| e.into_inner())
}

fn prefix() -> MutexGuard<'static, Option<String>> {
    PREFIX.lock().unwrap_or_else(|e| e.into_inner())
}

/// Installs the handler for SIGINT, SIGTERM and SIGHUP, which kills every
/// registered child, runs [`netns::down`] for `prefix`, prints one line to
/// stderr and exits with status 130.
///
/// The handler can be installed once per process; calling this again only
/// changes the prefix to tear down.
pub fn install(prefix: &str) {
    *self::prefix() = Some(prefix.to_string());
    install_handler();
}

/// Installs the handler without a testbed to tear down (a bench on real
/// hosts): it kills the registered children, runs the hooks and exits.
pub fn install_handler() {
    if INSTALLED.swap(true, Ordering::SeqCst) {
        return;
    }
    if let Err(e) = ctrlc::set_handler(on_signal) {
        warn!("cannot install the signal handler; Ctrl-C will leave the testbed up: {e}");
    }
}

/// Whether a termination signal has arrived; long operations stop early
/// when it has.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Blocks for good once a termination signal has arrived, so the handler,
/// which ends the process, finishes its teardown and reports the exit
/// status; returns at once otherwise.
pub fn wait_if_interrupted() {
    if !interrupted() {
        return;
    }
    loop {
        std::thread::park();
    }
}

/// Records a child process to kill if a termination signal arrives.
pub fn register_child(pid: u32) {
    children().insert(pid);
}

/// Forgets a child process, once it has been waited for.
pub fn unregister_child(pid: u32) {
    children().remove(&pid);
}

/// Adds an action for the signal handler to run after killing the
/// children (in the order added); it must not block for long.
pub fn add_hook(hook: impl Fn() + Send + 'static) {
    HOOKS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Box::new(hook));
}

fn on_signal() {
    INTERRUPTED.store(true, Ordering::SeqCst);
    let pids: Vec<u32> = children().iter().copied().collect();
    for pid in pids {
        // Never 0 or negative: those would signal whole process groups.
        if let Ok(pid) = libc::pid_t::try_from(pid) {
            if pid > 0 {
                // SAFETY: plain syscall on a pid this process started.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
    }
    for hook in HOOKS.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        hook();
    }
    let prefix = self::prefix().clone();
    match prefix {
        Some(prefix) => match netns::down(&prefix) {
            Ok(_) => eprintln!("testbed: interrupted; testbed '{prefix}' removed"),
            Err(e) => eprintln!("testbed: interrupted; removing testbed '{prefix}' failed: {e:#}"),
        },
        None => eprintln!("testbed: interrupted"),
    }
    std::process::exit(EXIT_INTERRUPTED);
}
