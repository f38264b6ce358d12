//! A sans-I/O, deterministic implementation of the Homa transport protocol.
//!
//! Homa is a receiver-driven, message-based RPC transport for datacenters:
//! senders transmit the first RTTbytes of a message at once (unscheduled),
//! receivers grant the rest in SRPT order with controlled overcommitment and
//! choose the network priority of every packet, and senders also run SRPT.
//!
//! This crate holds the whole protocol and nothing else: no sockets, no
//! threads, no clock. An [`Endpoint`] is driven by its caller, which passes
//! the current time (nanoseconds, [`Nanos`]) into every call, feeds it
//! received packets, asks it for packets to send when the link can take one,
//! and runs its timer. The socket runtime, the simulator and the tests all
//! drive the same code.
//!
//! Cargo feature `serde` (off by default): `Serialize`/`Deserialize` for
//! [`Config`] (read from TOML or JSON files), `Serialize` for [`Metrics`]
//! and [`RpcSnapshot`] (reports).
//!
//! ```
//! use bytes::Bytes;
//! use homa_core::{Config, Endpoint, Event};
//!
//! let client_addr = "127.0.0.1:40000".parse().unwrap();
//! let server_addr = "127.0.0.2:4000".parse().unwrap();
//! let mut client = Endpoint::new(Config::default(), client_addr, 1).unwrap();
//! let mut server = Endpoint::new(Config::default(), server_addr, 2).unwrap();
//!
//! let now = 0;
//! let rpc = client.send_request(now, server_addr, Bytes::from_static(b"ping")).unwrap();
//! // A perfect network: move every packet across at once.
//! fn pump(from: &mut Endpoint, to: &mut Endpoint) {
//!     while let Some(t) = from.poll_transmit(0) {
//!         to.handle_packet(0, from.local_addr().ip(), &t.to_bytes());
//!     }
//! }
//! pump(&mut client, &mut server);
//! let Some(Event::Request { rpc: srv_rpc, message }) = server.poll_event() else { panic!() };
//! assert_eq!(message, b"ping"[..]);
//! server.reply(now, srv_rpc, Bytes::from_static(b"pong")).unwrap();
//! pump(&mut server, &mut client);
//! assert_eq!(
//!     client.poll_event(),
//!     Some(Event::Response { rpc, message: Bytes::from_static(b"pong").into() })
//! );
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod ack;
pub mod bytedance;
pub mod config;
pub mod endpoint;
pub mod event;
pub mod front_map;
pub mod grant;
pub mod incast;
pub mod incoming;
pub mod keyed;
pub mod message;
pub mod metrics;
pub mod outgoing;
pub mod pacer;
pub mod peer;
pub mod policy;
pub mod priority;
pub mod rpc;
pub mod rpc_table;
pub mod srpt;
pub mod stream;
pub mod timers;

pub use config::{ByteDanceConfig, Config, ConfigError, Design, Link, SirdConfig};
pub use endpoint::{Endpoint, PacketMeta, RpcSnapshot, Transmit};
pub use event::{Error, Event, IdTag, RpcError, RpcId};
/// The inline header a [`Transmit`] carries (from `homa-wire`).
pub use homa_wire::HeaderBuf;
pub use message::Message;
pub use metrics::{Metrics, PerType};
pub use pacer::Pacer;
pub use priority::PriorityPlan;
pub use stream::{StreamError, StreamEvent};

/// Time in nanoseconds since an origin the driver chooses.
pub type Nanos = u64;
