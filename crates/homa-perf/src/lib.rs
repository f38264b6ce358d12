//! `homa-perf`: latency and throughput of Homa, TCP and UDP RPCs on loopback.
//!
//! The library behind the `homa-perf` binary, usable from tests:
//! - [`server::Server`] runs a server of any of the three protocols in
//!   background threads;
//! - [`client::run_client`] runs a closed-loop client and returns a
//!   [`stats::Report`] (HDR-histogram percentiles, throughput, per-size-class
//!   percentiles for workloads);
//! - [`demo::run_demo`] runs the project's headline comparison;
//! - [`lossmatrix::run_loss_matrix`] measures Homa under injected loss;
//! - [`streams::run_streams`] compares messages over streams with one RPC
//!   per message;
//! - [`workload`] samples the standard message-size workloads;
//! - [`contention::Contention`] keeps CPUs busy, for measurements on a busy
//!   host;
//! - [`cluster::run_node`] runs one host of a cluster benchmark (server and
//!   Poisson-load client at once, like the Homa/Linux paper's `cp_node`).
//!
//! Every server and client refuses addresses outside loopback, except
//! cluster mode, which also accepts private (network-namespace) addresses.

#![deny(missing_docs)]

pub mod child_server;
pub mod client;
pub mod cluster;
pub mod contention;
pub mod demo;
mod demo_ratios;
pub mod error;
mod homa_rpc;
pub mod host;
pub mod lossmatrix;
pub mod proto;
pub mod server;
pub mod stats;
pub mod streams;
mod tcp;
mod tcp_pipeline;
mod udp;
pub mod worker;
pub mod workload;

pub use client::{run_client, ClientOptions};
pub use contention::Contention;
pub use demo::{run_demo, DemoOptions, DemoResult};
pub use error::PerfError;
pub use homa_measure::SizeDist;
pub use lossmatrix::{run_loss_matrix, LossMatrix, LossMatrixOptions};
pub use proto::Protocol;
pub use server::{Server, ServerOptions};
pub use stats::Report;
pub use worker::StopRule;
pub use workload::SizeSpec;
