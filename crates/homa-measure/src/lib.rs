//! Measurement shared by the project's tools — the simulator (`homa-sim`),
//! the loopback and cluster benchmark (`homa-perf`) and the namespace
//! testbed (`homa-testbed`) — written once:
//!
//! * [`cdf`]: workload size distributions (the `size_bytes,cdf` tables of
//!   `workloads/`): parsing with line-numbered errors, sampling, mean,
//!   quantiles of sizes;
//! * [`quantile`]: nearest-rank quantiles of measured samples;
//! * [`buckets`]: size buckets, fixed classes and workload-relative cuts;
//! * [`plot`]: PNG slowdown, bar and line plots;
//! * [`table`]: compact sizes, CSV fields and markdown tables;
//! * [`cli`]: what every command-line tool does alike (errors, argument
//!   checks, broken pipes, defaults in `--help`);
//! * [`progress`]: progress bars and a steady estimate of the time left.
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod buckets;
pub mod cdf;
#[allow(unsafe_code)] // one libc call, see the module
pub mod cli;
pub mod plot;
pub mod progress;
pub mod quantile;
pub mod table;

pub use cdf::{CdfError, SizeDist, WireBytes, BUILTIN};
pub use quantile::nearest_rank;
pub use table::fmt_size;
