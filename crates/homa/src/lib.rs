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
//!
//! In SIRD mode (`config.core.design = Design::Sird`, see
//! [`homa_core::Design`]) every packet also carries ECT(0) in the ECN bits
//! of that byte, and the receiver reads the ECN field of what arrives
//! (`IP_RECVTOS` / `IPV6_RECVTCLASS` over UDP, the IP header over raw IPv4):
//! packets marked CE ("congestion experienced") by a switch reach the core
//! as `PacketMeta::ce`, and are counted in [`RuntimeStats::ce_received`].
#![deny(missing_docs)]

mod async_api;
mod cmsg;
mod config;
mod contention;
mod endpoint;
mod error;
mod fault;
mod ready;
mod socket;
mod wake;

pub use async_api::AsyncEndpoint;
pub use config::{Config, FaultInjection, Transport};
pub use endpoint::{Endpoint, Request, RuntimeStats};
pub use error::Error;
pub use homa_core::{Metrics, RpcId};
