//! Runtime configuration: the protocol's parameters plus how they meet the
//! operating system. Loadable from TOML.

use crate::Error;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// How Homa packets travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// Homa packets as UDP payloads (IPv4 or IPv6); unprivileged. The UDP
    /// port is the Homa port.
    #[default]
    Udp,
    /// Homa packets directly over IPv4 as protocol 146, byte-identical to
    /// Linux Homa's; needs root or CAP_NET_RAW.
    Raw,
}

/// Drops a fraction of outgoing packets: a test aid to exercise loss
/// recovery over real sockets. Never set it in production.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultInjection {
    /// Fraction of outgoing packets dropped, 0.0..1.0.
    pub drop_rate: f64,
    /// Seed of the drop decisions.
    pub seed: u64,
}

/// Everything an [`crate::Endpoint`] needs to know.
///
/// ```
/// let config = homa::Config::from_toml_str(r#"
///     transport = "udp"
///     busy_poll = true
///     [core]
///     unsched_bytes = 60000
/// "#).unwrap();
/// assert!(config.busy_poll);
/// assert_eq!(config.core.unsched_bytes, 60_000);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Protocol parameters (MTU, RTTbytes, overcommitment, priorities,
    /// timers). `core.lower_header_bytes` is set from the transport.
    pub core: homa_core::Config,
    /// UDP (default) or raw IP.
    pub transport: Transport,
    /// Waiting threads spin on the socket instead of sleeping: lowest
    /// latency, one busy core per waiting thread.
    pub busy_poll: bool,
    /// Microseconds a waiting thread polls before it sleeps (Homa/Linux
    /// polls 50 µs); 0 sleeps at once. `busy_poll` polls for ever.
    pub poll_us: u64,
    /// Link rate the pacer assumes (Mbit/s); 0 turns pacing off.
    pub pacer_link_mbps: u64,
    /// Most transmission time (ns) the pacer lets wait in the kernel/NIC.
    pub max_nic_queue_ns: u64,
    /// Packets smaller than this bypass the pacer.
    pub pacer_bypass_bytes: usize,
    /// Datagrams taken per receive system call.
    pub recv_batch: usize,
    /// Use UDP GSO: one send call per run of equal-size packets.
    pub segmentation_offload: bool,
    /// Use UDP GRO: the kernel hands over runs of packets in one buffer.
    /// Ignored (off) in busy-poll mode, where it adds latency.
    pub receive_offload: bool,
    /// Socket buffer sizes (bytes) to ask the kernel for.
    pub socket_buffer_bytes: usize,
    /// Test aid: drop outgoing packets.
    pub fault_injection: Option<FaultInjection>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            core: homa_core::Config {
                // A user-space process can be descheduled for tens of
                // milliseconds on a loaded host; the kernel's 5 unanswered
                // RESENDs (~30 ms) would then declare live peers dead. 20
                // rounds 5 ticks apart: a silent peer fails RPCs in ~105 ms.
                timeout_resends: 20,
                // Longer than that patience (see `Config::validate`).
                ack_memory_ns: 500_000_000,
                ..homa_core::Config::default()
            },
            transport: Transport::Udp,
            busy_poll: false,
            poll_us: 50,
            pacer_link_mbps: 10_000,
            max_nic_queue_ns: 2_000,
            pacer_bypass_bytes: 1_000,
            recv_batch: 32,
            segmentation_offload: true,
            receive_offload: true,
            socket_buffer_bytes: 16 << 20,
            fault_injection: None,
        }
    }
}

impl Config {
    /// Settings for traffic on the loopback interface: its 64 KiB MTU, a
    /// link fast enough that the pacer never holds back what the kernel
    /// can copy, and RTTbytes to match.
    pub fn loopback() -> Config {
        let base = Config::default();
        let core = homa_core::Config {
            mtu: 65_000,
            max_message_size: 16 << 20,
            // RTTbytes: a ~30 µs software round trip at the ~100 Gbit/s
            // the kernel copies loopback packets.
            unsched_bytes: 384_000,
            grant_window: 384_000,
            max_incoming: 4_000_000,
            grant_increment: 64_000,
            ..base.core.clone()
        };
        Config {
            core,
            pacer_link_mbps: 100_000,
            max_nic_queue_ns: 20_000,
            ..base
        }
    }

    /// Parses TOML; missing keys keep their defaults.
    pub fn from_toml_str(text: &str) -> Result<Config, Error> {
        let config: Config = toml::from_str(text).map_err(|e| Error::Config(e.to_string()))?;
        config
            .core
            .validate()
            .map_err(|e| Error::Config(e.to_string()))?;
        Ok(config)
    }

    /// Reads a TOML file.
    pub fn from_toml_file(path: &Path) -> Result<Config, Error> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Config(format!("cannot read {}: {e}", path.display())))?;
        Config::from_toml_str(&text)
    }
}
