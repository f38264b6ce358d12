//! Homa over real sockets: the protocol of [`homa_core`] driven over UDP
//! (IPv4 or IPv6, unprivileged, the default) or directly over IPv4 as
//! protocol 146 (byte-identical to Linux Homa; needs root), with a blocking
//! API ([`Endpoint`]) and an async one ([`AsyncEndpoint`]).
//!
//! Each packet carries its Homa priority in the IP TOS byte (`priority << 5`),
//! so a switch (or a Linux qdisc) that honours precedence bits gives Homa
//! its priority queues. Sends are batched (`sendmmsg`, UDP GSO), receives
//! too (`recvmmsg`, UDP GRO), and a pacer keeps the bytes queued in the
//! kernel below a limit so that the core's SRPT choices hold.
#![deny(missing_docs)]

mod async_api;
mod config;
mod endpoint;
mod error;
mod fault;
mod socket;
mod wake;

pub use async_api::AsyncEndpoint;
pub use config::{Config, FaultInjection, Transport};
pub use endpoint::{Endpoint, Request, RuntimeStats};
pub use error::Error;
pub use homa_core::{Metrics, RpcId};
