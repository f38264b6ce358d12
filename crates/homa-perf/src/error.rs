//! The one error type of the benchmark library.

use std::net::{IpAddr, SocketAddr};
use thiserror::Error;

/// Why a benchmark could not be set up or run.
#[derive(Debug, Error)]
pub enum PerfError {
    /// A command-line value or combination of values that cannot work.
    #[error("{0}")]
    Usage(String),
    /// homa-perf only ever talks to loopback addresses.
    #[error("{0} is not a loopback address: homa-perf only runs on 127.0.0.0/8 and ::1")]
    NotLoopback(SocketAddr),
    /// Cluster mode only talks to loopback or private (network-namespace)
    /// addresses.
    #[error(
        "{0} is neither a loopback nor a private address: cluster mode only talks to \
         loopback or private (namespace) addresses (127.0.0.0/8, ::1, 10.0.0.0/8, \
         172.16.0.0/12, 192.168.0.0/16, fc00::/7)"
    )]
    NotPrivate(SocketAddr),
    /// A workload table that does not parse or is unknown.
    #[error(transparent)]
    Workload(#[from] homa_measure::CdfError),
    /// An operating-system error, with what was being done.
    #[error("{what}: {source}")]
    Io {
        /// What failed, e.g. "connect to 127.0.0.1:4000".
        what: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// An error of the Homa runtime, with what was being done.
    #[error("{what}: {source}")]
    Homa {
        /// What failed, e.g. "bind Homa endpoint".
        what: String,
        /// The runtime's error.
        source: homa::Error,
    },
    /// A worker thread panicked (a bug in homa-perf or the transport).
    #[error("a worker thread panicked: {0}")]
    Panic(String),
}

impl PerfError {
    /// Wraps an I/O error with a description of the failed operation.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> PerfError {
        PerfError::Io {
            what: what.into(),
            source,
        }
    }

    /// Wraps a Homa runtime error with a description of the failed operation.
    pub fn homa(what: impl Into<String>, source: homa::Error) -> PerfError {
        PerfError::Homa {
            what: what.into(),
            source,
        }
    }

    /// Turns the payload of a panicked thread into an error.
    pub(crate) fn from_panic(payload: Box<dyn std::any::Any + Send>) -> PerfError {
        let text = if let Some(s) = payload.downcast_ref::<&str>() {
            (*s).to_string()
        } else if let Some(s) = payload.downcast_ref::<String>() {
            s.clone()
        } else {
            "unknown panic".to_string()
        };
        PerfError::Panic(text)
    }
}

/// Refuses any address outside loopback.
pub fn check_loopback(addr: SocketAddr) -> Result<(), PerfError> {
    if addr.ip().is_loopback() {
        Ok(())
    } else {
        Err(PerfError::NotLoopback(addr))
    }
}

/// Refuses any address but loopback, IPv4 private (RFC 1918) and IPv6
/// unique-local (fc00::/7) ones: cluster mode runs on loopback or between
/// network namespaces, never towards the outside world.
pub fn check_cluster_addr(addr: SocketAddr) -> Result<(), PerfError> {
    let ip = match addr.ip() {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    let ok = match ip {
        IpAddr::V4(v4) => v4.is_loopback() || v4.is_private(),
        IpAddr::V6(v6) => v6.is_loopback() || (v6.segments()[0] & 0xfe00) == 0xfc00,
    };
    if ok {
        Ok(())
    } else {
        Err(PerfError::NotPrivate(addr))
    }
}
