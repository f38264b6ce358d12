//! `homa-testbed`: an emulated cluster on one Linux machine.
//!
//! Every host is a network namespace with one veth link to a switch
//! namespace. The switch bridges the links and, on each egress port, shapes
//! traffic to the link rate with eight strict-priority queues selected by
//! the IP TOS byte, the way a datacenter switch serves Homa's priorities.
//! Hosts have a plain FIFO NIC at the same rate.
//!
//! - [`netns`] builds, inspects and removes the topology;
//! - [`tc`] holds the queueing-discipline commands and parses their
//!   statistics;
//! - [`cleanup`] tears everything down on Ctrl-C or SIGTERM;
//! - [`bench`](mod@bench) runs Homa and TCP on a testbed, [`analysis`] turns the
//!   round-trip times into slowdowns, [`report`] writes the results;
//! - [`sird`] runs the SIRD paper's testbed experiments (incast, congested
//!   sender) on a switch without priorities, each host a
//!   [`sird_node`], with [`sird_sniff`] counting the `csn` marks that reach
//!   a receiver;
//! - [`bytedance`] runs the ByteDance paper's experiments (incast, TCP
//!   bandwidth split, size sweep, hosts at different rates) with stock
//!   Homa and Homa in the ByteDance mode, several client endpoints behind
//!   one host NIC; [`rates`] gives single hosts their own link rate.

#![deny(missing_docs)]

pub mod analysis;
pub mod bench;
pub mod bytedance;
pub mod cleanup;
pub mod netns;
pub mod rates;
pub mod report;
pub mod sird;
pub mod sird_node;
pub mod sird_sniff;
pub mod tc;
