//! Why a scenario could not run.

use thiserror::Error;

/// Everything that stops the tool.
#[derive(Debug, Error)]
pub enum Error {
    /// A command-line value that cannot be used.
    #[error("invalid argument: {0}")]
    Usage(String),
    /// Raw sockets (spoofed source addresses) need root or CAP_NET_RAW.
    #[error(
        "this scenario sends spoofed packets through a raw socket and needs root or CAP_NET_RAW"
    )]
    NeedsRoot,
    /// The target server process misbehaved.
    #[error("target server: {0}")]
    Target(String),
    /// The Homa runtime refused something.
    #[error("homa: {0}")]
    Homa(#[from] homa::Error),
    /// An operating-system error.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}

/// Result of this crate's operations.
pub type Result<T> = std::result::Result<T, Error>;
