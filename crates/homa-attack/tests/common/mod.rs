//! What every hostile-traffic test shares.
#![allow(dead_code)] // each test binary uses a different part

use homa_attack::Env;
use std::path::PathBuf;

/// The environment for library scenarios: the built `homa-attack` binary
/// as the target server, no progress lines.
pub fn env() -> Env {
    Env {
        exe: PathBuf::from(env!("CARGO_BIN_EXE_homa-attack")),
        progress: false,
    }
}

/// True when raw sockets can be opened; otherwise prints why the test is
/// skipped.
pub fn root_or_skip(test: &str) -> bool {
    if homa_attack::craft::have_raw_privilege() {
        true
    } else {
        eprintln!("SKIPPED {test}: spoofing needs a raw socket (run as root)");
        false
    }
}

/// KiB to MiB, for messages.
pub fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}
