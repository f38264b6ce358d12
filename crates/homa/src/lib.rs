//! Homa over real sockets: the protocol of [`homa_core`] driven over UDP
//! (IPv4 or IPv6, unprivileged, the default) or directly over IPv4 as
//! protocol 146 (byte-identical to Linux Homa; needs root), with a blocking
//! API ([`Endpoint`]) and an async one (`AsyncEndpoint`, feature `tokio`).
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
//!
//! # Example
//!
//! An echo server and a client on loopback (the example of the project's
//! README, which a test keeps identical to this one):
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use bytes::Bytes;
//! use std::time::Duration;
//!
//! // A server: any number of threads may call recv_request/reply on clones.
//! // Port 0 lets the system pick a free port; a real server names its own.
//! let server = homa::Endpoint::bind("127.0.0.1:0".parse()?, homa::Config::default())?;
//! let addr = server.local_addr();
//! let echo = server.clone();
//! std::thread::spawn(move || {
//!     while let Ok(req) = echo.recv_request(None) {
//!         echo.reply(req.id, req.message).unwrap(); // echo
//!     }
//! });
//!
//! // A client: port 0 picks a client port.
//! let client = homa::Endpoint::bind("127.0.0.1:0".parse()?, homa::Config::default())?;
//! let resp = client.call(addr, Bytes::from_static(b"hi"), Duration::from_secs(5))?;
//! assert_eq!(resp, Bytes::from_static(b"hi"));
//!
//! // Or many at once: send_request, then recv_response(id) / recv_any_response().
//! let id = client.send_request(addr, Bytes::from(vec![0u8; 500_000]))?;
//! let resp = client.recv_response(id, Some(Duration::from_secs(5)))?;
//! assert_eq!(resp.len(), 500_000);
//!
//! server.shutdown(); // the server thread's recv_request returns Err(Closed)
//! # Ok(())
//! # }
//! ```
//!
//! # Cargo features
//!
//! - `tokio` (default): `AsyncEndpoint`, the async API, and `AsyncStream`,
//!   its streams (`open_stream(..).await`, `accept_stream().await`; `send`
//!   awaits room in the window, `recv` the next message, no executor thread
//!   ever blocked). It runs on any executor; inside a tokio runtime,
//!   `call`'s timeout is tokio's timer.
//! - `toml` (default): `Config::from_toml_str` and `Config::from_toml_file`;
//!   implies `serde`.
//! - `serde`: `Serialize`/`Deserialize` for [`Config`] (and what it holds),
//!   `Serialize` for [`RuntimeStats`], [`Metrics`] and RPC snapshots.
//!
//! With `default-features = false` the crate is the blocking [`Endpoint`]
//! alone, without tokio, serde or toml.
#![deny(missing_docs)]

#[cfg(feature = "tokio")]
mod async_api;
#[cfg(feature = "tokio")]
mod async_stream;
mod cmsg;
mod config;
mod contention;
mod endpoint;
mod error;
mod fault;
mod oneshot;
mod parked;
mod ready;
mod socket;
mod stream;
#[cfg(feature = "tokio")]
mod timer;
mod wake;

#[cfg(feature = "tokio")]
pub use async_api::AsyncEndpoint;
#[cfg(feature = "tokio")]
pub use async_stream::AsyncStream;
pub use config::{Config, FaultInjection, Transport, LOOPBACK_LINK};
pub use endpoint::{Endpoint, Request, RuntimeStats};
pub use error::Error;
pub use homa_core::{Message, Metrics, RpcId};
pub use stream::Stream;
