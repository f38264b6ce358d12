//! Hostile traffic against a Homa server, measured.
//!
//! Each scenario in [`scenario`] starts a target server in a child process
//! ([`target`]), optionally a well-behaved client in this process
//! ([`legit`]), sends hand-crafted packets ([`craft`]) and reports what
//! the server did: memory, gauges of its protocol core, packets it sent,
//! whether a forged response was accepted, whether a request ran twice.
//! Everything stays on loopback (127.0.0.0/8).
#![deny(missing_docs)]

pub mod craft;
mod error;
pub mod legit;
pub mod report;
pub mod scenario;
pub mod target;

pub use error::{Error, Result};

use std::path::PathBuf;

/// What every scenario needs to know about how it is run.
#[derive(Debug, Clone)]
pub struct Env {
    /// The `homa-attack` executable, started as `homa-attack serve`.
    pub exe: PathBuf,
    /// Print progress lines on stderr.
    pub progress: bool,
}

impl Env {
    /// Prints a progress line on stderr if asked to.
    pub fn say(&self, msg: impl AsRef<str>) {
        if self.progress {
            eprintln!("homa-attack: {}", msg.as_ref());
        }
    }
}
