//! The link a workload runs on and the Homa configuration sized for it:
//! default rates and MTUs, the round trip Homa assumes, header overhead,
//! offered load, and `--homa-set` overrides.

use anyhow::{anyhow, bail, Context, Result};
use homa_perf::SizeDist;

/// Largest message size (the Homa/Linux paper truncated at 1 MB): larger
/// messages of a workload are cut to it.
pub const MAX_SIZE: u64 = 1_000_000;

/// Default link per workload: (name, rate in Mbit/s, MTU in bytes).
///
/// Two cores must generate, carry and absorb 80% of every host's link at
/// once with CPU to spare, or the measurement is of the CPU scheduler, not
/// the network. Measured here (4 hosts, Homa, 80% load): w2 at 20 Mbit/s
/// and w4/w5 at 400 Mbit/s keep ~0.7-1.0 of the 2 cores busy, w3 at
/// 100 Mbit/s ~1.5; w3 at 500 Mbit/s or w4 at 1 Gbit/s saturate both.
/// - Short-message workloads are limited by RPCs per second (each costs
///   ~100 µs of CPU across both ends and the emulated network), so they
///   get slow links and 1500-byte frames, which cost little CPU at these
///   rates and keep a frame's transmission time close to a round trip.
/// - Long-message workloads are limited by packets per second, so they get
///   9000-byte frames (180 µs at 400 Mbit/s).
pub const DEFAULT_LINKS: [(&str, u64, u32); 5] = [
    ("w1", 20, 1500),
    ("w2", 20, 1500),
    ("w3", 100, 1500),
    ("w4", 400, 9000),
    ("w5", 400, 9000),
];

/// Software part of the round trip Homa assumes when `--rtt-us` is not
/// given (µs): about the idle RTT of a tiny RPC here (27–45 µs measured).
pub const SOFTWARE_RTT_US: f64 = 50.0;

/// The round trip Homa's RTTbytes should cover on a link (ns): the
/// software round trip plus a full frame's transmission through the two
/// shaped hops (host NIC, switch port) before the receiver can grant.
pub fn auto_rtt_ns(rate_mbit: u64, mtu: u32) -> u64 {
    let frame_ns = (mtu as u64 + 14) * 8_000 / rate_mbit.max(1);
    (SOFTWARE_RTT_US * 1e3) as u64 + 2 * frame_ns
}

/// Bytes each packet adds on the link: Ethernet (14), IPv4 (20), UDP (8)
/// and Homa's DATA header. TCP's headers are smaller but it adds ACKs; the
/// same figure is used for both, so both carry the same payload.
pub const PACKET_OVERHEAD: usize = 14 + 20 + 8 + homa_wire::DATA_HEADER_LEN;

/// Link bytes per payload byte for `workload`'s messages (truncated at
/// 1 MB) in packets of at most `mtu` bytes.
pub fn wire_factor(workload: &SizeDist, mtu: u32) -> f64 {
    let per_packet = (mtu as usize).saturating_sub(PACKET_OVERHEAD - 14).max(1) as u64;
    // The expectation over the size distribution, by quantiles.
    const STEPS: u32 = 20_000;
    let (mut payload, mut wire) = (0.0, 0.0);
    for k in 0..STEPS {
        let u = (k as f64 + 0.5) / STEPS as f64;
        let size = workload.quantile(u).min(MAX_SIZE);
        let packets = size.div_ceil(per_packet).max(1);
        payload += size as f64;
        wire += (size + packets * PACKET_OVERHEAD as u64) as f64;
    }
    if payload > 0.0 {
        wire / payload
    } else {
        1.0
    }
}

/// Payload Gbit/s each host offers so that its link carries `load` of
/// `rate_mbit` (requests plus responses, headers included).
///
/// The Homa/Linux paper counts payload only; with its 3000-byte packets
/// at 25 Gbit/s CPU limits came first. Here, for a small-message
/// workload such as w2, headers add ~20%, and 80% of the link in
/// payload would overload it.
pub fn offered_gbps(load: f64, rate_mbit: u64, mtu: u32, workload: &SizeDist) -> f64 {
    load * rate_mbit as f64 / 1000.0 / wire_factor(workload, mtu)
}

/// `config` with `key=value` overrides (dotted TOML keys, TOML values)
/// applied and the result validated as the runtime will.
pub fn apply_overrides(config: &homa::Config, sets: &[String]) -> Result<homa::Config> {
    if sets.is_empty() {
        return Ok(config.clone());
    }
    let mut tree = toml::Value::try_from(config).context("cannot represent the configuration")?;
    for set in sets {
        let (key, value) = set
            .split_once('=')
            .ok_or_else(|| anyhow!("--homa-set {set:?}: expected key=value"))?;
        let value: toml::Value = toml::from_str::<toml::Table>(&format!("v = {}", value.trim()))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .ok_or_else(|| anyhow!("--homa-set {set:?}: {value:?} is not a TOML value"))?;
        let mut node = &mut tree;
        let parts: Vec<&str> = key.trim().split('.').collect();
        for (i, part) in parts.iter().enumerate() {
            let table = node
                .as_table_mut()
                .ok_or_else(|| anyhow!("--homa-set {set:?}: {part:?} is not in a table"))?;
            if i + 1 == parts.len() {
                if !table.contains_key(*part) {
                    bail!("--homa-set {set:?}: the configuration has no key {key:?}");
                }
                table.insert(part.to_string(), value.clone());
                break;
            }
            node = table
                .get_mut(*part)
                .ok_or_else(|| anyhow!("--homa-set {set:?}: no table {part:?}"))?;
        }
    }
    let text = toml::to_string(&tree)?;
    homa::Config::from_toml_str(&text).map_err(|e| anyhow!("--homa-set: {e}"))
}

/// The runtime configuration for a testbed link of `rate_mbit` and `mtu`
/// with round trip `rtt_ns` (Homa design, 8 priorities): the runtime's
/// defaults with the core sized by [`homa_core::Config::apply_link`] (the
/// one derivation of RTTbytes, and SIRD's BDP multiples), timers scaled to
/// the round trip, the pacer holding at most `nic_queue_packets` frames in
/// the NIC queue, no segmentation offload (the qdiscs must see MTU-sized
/// packets), and threads that sleep instead of polling.
pub fn link_config(rate_mbit: u64, mtu: u32, rtt_ns: u64, nic_queue_packets: f64) -> homa::Config {
    // The runtime's defaults (user-space timeouts), sized for this link.
    let base = homa::Config::default();
    let mut core = base.core.clone();
    core.apply_link(&homa_core::Link {
        mtu,
        ..homa_core::Link::new(rate_mbit, rtt_ns)
    });
    core.max_message_size = core.max_message_size.max(MAX_SIZE as u32);
    // Loss handling counts in ticks. Homa/Linux's 1 ms tick is ~70 of
    // its round trips; these links are 30-300x slower, and a 1 ms tick
    // would ask for resends of data merely queued behind a backlog
    // (then retransmit it, and make the backlog worse).
    core.tick_ns = core.tick_ns.max(10 * rtt_ns);
    // A server must remember acks longer than a client keeps retrying.
    core.ack_memory_ns = core.ack_memory_ns.max(2 * core.dead_peer_ns());
    // One full packet's transmission time.
    let packet_ns = mtu as u64 * 8_000 / rate_mbit.max(1);
    let mut config = base;
    config.core = core;
    config.max_nic_queue_ns = (nic_queue_packets * packet_ns as f64) as u64;
    // The qdiscs must see MTU-sized packets (priorities act per packet).
    config.segmentation_offload = false;
    // All hosts share two cores: a thread that polls takes CPU
    // from the one it waits for.
    config.poll_us = 0;
    config
}
