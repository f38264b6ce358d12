//! A packet-level datacenter simulator that runs the project's own Homa
//! protocol core, unmodified, on every simulated host.
//!
//! The model follows the thesis' simulations: a two-tier leaf–spine network
//! of store-and-forward switches whose egress ports have 8 strict-priority
//! queues, hosts whose NIC is a short FIFO fed by the transport whenever it
//! drains, open-loop Poisson traffic with sizes from measured workloads, and
//! slowdown as the metric. Protocols plug in through
//! [`transport::Protocol`] and are registered in [`protocols`]; Homa and an
//! idealised pFabric are provided. [`testnet`] drives any transport between
//! a few hosts without a network model, for unit tests.
#![deny(missing_docs)]

pub mod background;
pub mod bytedance;
pub mod engine;
pub mod homa;
pub mod links;
pub mod output;
pub mod pfabric;
pub mod plot;
pub mod port;
pub mod protocols;
pub mod report;
pub mod reproduce;
pub mod scenario;
pub mod search;
pub mod sim;
pub mod switches;
pub mod testnet;
pub mod topology;
pub mod transport;
pub mod workload;

/// Simulated time in picoseconds (so that serialisation times at 10, 25,
/// 40 and 100 Gbit/s are exact integers).
pub type Time = u64;

/// Picoseconds per nanosecond.
pub const PS_PER_NS: Time = 1_000;
