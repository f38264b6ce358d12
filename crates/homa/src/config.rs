//! Runtime configuration: the protocol's parameters plus how they meet the
//! operating system. Loadable from TOML (feature `toml`).

use crate::Error;

/// Most segments one UDP GSO send carries (the socket layer's limit).
const MAX_GSO_SEGMENTS: usize = 64;

/// Largest UDP payload, the bound of one GSO send.
const MAX_UDP_PAYLOAD: usize = 65_507;
#[cfg(feature = "toml")]
use std::path::Path;

/// How Homa packets travel.
///
/// More transports may come in a minor release (`#[non_exhaustive]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
#[non_exhaustive]
pub enum Transport {
    /// Homa packets as UDP payloads (IPv4 or IPv6); unprivileged. The UDP
    /// port is the Homa port.
    #[default]
    Udp,
    /// Homa packets directly over IPv4 as protocol 146, byte-identical to
    /// Linux Homa's; needs root or CAP_NET_RAW.
    Raw,
}

/// A faulty network inside the runtime: drops, duplicates and reorders
/// packets, each direction (packets sent, packets received) with its own
/// rates. A test aid to exercise loss recovery over real sockets; never set
/// it in production.
///
/// Every decision is drawn from a random generator seeded with `seed` (one
/// stream per direction), so a run sees the same pattern of faults for the
/// same sequence of packets. Each packet is first dropped with the drop
/// rate; a packet not dropped is duplicated with the duplicate rate (both
/// copies pass), or else held back with the reorder rate: it is released
/// after the next `k` packets of its direction (`k` drawn from
/// 1..=`reorder_max_packets`) or after a delay drawn from
/// 0..=`reorder_max_delay_us`, whichever comes first. Every fault is
/// counted in [`crate::RuntimeStats`].
///
/// Missing keys take their defaults (all rates 0), so a TOML table written
/// for the older drop-only shim (`drop_rate`, `seed`) still loads.
///
/// Fields may be added in a minor release (`#[non_exhaustive]`): outside
/// this crate, start from [`FaultInjection::default`] or
/// [`FaultInjection::loss`] and set fields.
///
/// ```
/// # #[cfg(feature = "toml")] {
/// let config = homa::Config::from_toml_str(r#"
///     [fault_injection]
///     drop_rate = 0.1
///     recv_drop_rate = 0.1
///     reorder_rate = 0.05
///     seed = 7
/// "#).unwrap();
/// let f = config.fault_injection.unwrap();
/// assert_eq!(f.recv_drop_rate, 0.1);
/// assert_eq!(f.duplicate_rate, 0.0);
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
#[non_exhaustive]
pub struct FaultInjection {
    /// Fraction of outgoing packets dropped, 0.0..=1.0.
    pub drop_rate: f64,
    /// Seed of every fault decision.
    pub seed: u64,
    /// Fraction of outgoing packets sent twice.
    pub duplicate_rate: f64,
    /// Fraction of outgoing packets held back and sent later.
    pub reorder_rate: f64,
    /// Fraction of received packets dropped.
    pub recv_drop_rate: f64,
    /// Fraction of received packets processed twice.
    pub recv_duplicate_rate: f64,
    /// Fraction of received packets held back and processed later.
    pub recv_reorder_rate: f64,
    /// A held-back packet goes after at most this many later packets of its
    /// direction (at least 1).
    pub reorder_max_packets: u32,
    /// ... or after at most this many microseconds, whichever comes first.
    pub reorder_max_delay_us: u64,
}

impl Default for FaultInjection {
    fn default() -> FaultInjection {
        FaultInjection {
            drop_rate: 0.0,
            seed: 0,
            duplicate_rate: 0.0,
            reorder_rate: 0.0,
            recv_drop_rate: 0.0,
            recv_duplicate_rate: 0.0,
            recv_reorder_rate: 0.0,
            reorder_max_packets: 4,
            reorder_max_delay_us: 1_000,
        }
    }
}

impl FaultInjection {
    /// The same loss rate in both directions (and nothing else).
    pub fn loss(rate: f64, seed: u64) -> FaultInjection {
        FaultInjection {
            drop_rate: rate,
            recv_drop_rate: rate,
            seed,
            ..FaultInjection::default()
        }
    }

    /// Refuses rates outside 0..=1 (or not numbers).
    pub fn validate(&self) -> Result<(), Error> {
        for (name, r) in [
            ("drop_rate", self.drop_rate),
            ("duplicate_rate", self.duplicate_rate),
            ("reorder_rate", self.reorder_rate),
            ("recv_drop_rate", self.recv_drop_rate),
            ("recv_duplicate_rate", self.recv_duplicate_rate),
            ("recv_reorder_rate", self.recv_reorder_rate),
        ] {
            if !(0.0..=1.0).contains(&r) {
                return Err(Error::Config(format!(
                    "fault_injection.{name} must be within 0..=1, got {r}"
                )));
            }
        }
        Ok(())
    }
}

/// Everything an [`crate::Endpoint`] needs to know.
///
/// Settings may be added in a minor release (`#[non_exhaustive]`): outside
/// this crate, start from [`Config::default`] or [`Config::loopback`] and
/// set fields,
///
/// ```
/// let mut config = homa::Config::loopback();
/// config.busy_poll = true;
/// config.core.unsched_bytes = 60_000;
/// # assert!(config.busy_poll);
/// ```
///
/// or read TOML (feature `toml`), where missing keys keep their defaults:
///
/// ```
/// # #[cfg(feature = "toml")] {
/// let config = homa::Config::from_toml_str(r#"
///     transport = "udp"
///     busy_poll = true
///     [core]
///     unsched_bytes = 60000
/// "#).unwrap();
/// assert!(config.busy_poll);
/// assert_eq!(config.core.unsched_bytes, 60_000);
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
#[non_exhaustive]
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
    /// Poll only while a CPU is free for the peer: when at least as many
    /// threads are runnable as the host has CPUs (read from /proc/loadavg
    /// every 10 ms), a waiting thread sleeps at once, as polling would take
    /// the CPU its reply needs. Does not affect `busy_poll`.
    pub poll_adaptive: bool,
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
    /// Test aid: drop, duplicate and reorder packets in either direction
    /// (see [`FaultInjection`]).
    pub fault_injection: Option<FaultInjection>,
    /// Sockets on the endpoint's address (UDP; 0 or 1: just one), steered
    /// by RPC id: a thread in [`crate::Endpoint::call`] takes one of its
    /// own while one is free and sleeps on it, woken by the kernel when its
    /// RPC's packets come instead of by the thread reading the endpoint's
    /// socket. A power of two, at most 64. Raw IP ignores it.
    pub lanes: usize,
    /// The one peer this endpoint talks to, if it talks to one only (a
    /// client of one server). Its socket is then connected to the peer,
    /// as a UDP client's often is: the kernel keeps the route, so a send
    /// skips the route lookup an unconnected socket makes on every packet
    /// (0.45–0.6 µs of a 100 B round trip on the 2-CPU VM of
    /// docs/runtime-profile.md, twelfth pass), and it drops datagrams from
    /// anyone else. Requests to any other address are refused
    /// ([`crate::Error::BadAddress`]). A reader of a connected socket
    /// sleeps in `ppoll` rather than in the receive call (nobody but the
    /// peer can send the datagram that wakes it there). UDP transport with
    /// one socket only (`lanes` 0 or 1).
    pub peer: Option<std::net::SocketAddr>,
}

impl Default for Config {
    fn default() -> Config {
        let mut core = homa_core::Config::default();
        // A user-space process can be descheduled for tens of milliseconds
        // on a loaded host; the kernel's 5 unanswered RESENDs (~30 ms)
        // would then declare live peers dead. 20 rounds 5 ticks apart: a
        // silent peer fails RPCs in ~105 ms.
        core.timeout_resends = 20;
        // Ask for a range 3 packets have overtaken at once: one socket path
        // does not reorder, and waiting 5 ms per loss made a 1 MB RPC at 5%
        // loss 10x slower than a clean one.
        core.fast_resend_packets = 3;
        Config {
            core,
            transport: Transport::Udp,
            busy_poll: false,
            poll_us: 50,
            poll_adaptive: true,
            max_nic_queue_ns: 2_000,
            pacer_bypass_bytes: 1_000,
            recv_batch: 32,
            segmentation_offload: true,
            receive_offload: true,
            socket_buffer_bytes: 16 << 20,
            fault_injection: None,
            lanes: 0,
            peer: None,
        }
    }
}

/// The loopback interface as a link ([`Config::loopback`]): the kernel
/// copies a flow at tens of Gbit/s (100 is the pacer's bound, so that it
/// never holds back what the kernel can copy), packets up to its 64 KiB
/// MTU, and a round trip of 80 µs, which is what a grant's round trip takes
/// when the receiving thread sleeps: it is woken (50–80 µs on the 2-core VM
/// the project is measured on, docs/runtime-profile.md, seventh pass),
/// reads the first packet and grants, and the sender, still sending its
/// unscheduled bytes, reads the grant. RTTbytes is then 1 MB. With 30 µs
/// (384 KB, the figure of a thread that polls), a 500 KB or 2 MB message
/// waited for its grants: 1.3–1.5× less throughput at one outstanding RPC
/// and 1.2–1.4× less at four.
pub const LOOPBACK_LINK: homa_core::Link = homa_core::Link {
    mbps: 100_000,
    rtt_ns: 80_000,
    mtu: 65_000,
    lower_header_bytes: 28,
};

impl Config {
    /// Refuses settings the runtime cannot use (the core's are checked
    /// when its endpoint is made); [`crate::Endpoint::bind`] calls it.
    pub fn check(&self) -> Result<(), Error> {
        let l = self.lanes;
        if l > crate::socket::MAX_LANES || (l > 1 && !l.is_power_of_two()) {
            return Err(Error::Config(format!(
                "lanes must be 0, 1 or a power of two up to {}, got {l}",
                crate::socket::MAX_LANES
            )));
        }
        if let Some(peer) = self.peer {
            if self.transport != Transport::Udp || l > 1 {
                return Err(Error::Config(format!(
                    "peer {peer}: a connected endpoint needs the UDP transport and one socket (lanes 0 or 1)"
                )));
            }
            if peer.ip().is_unspecified() || peer.port() == 0 {
                return Err(Error::Config(format!(
                    "peer {peer}: needs an address and a port"
                )));
            }
        }
        Ok(())
    }

    /// Settings for traffic on the loopback interface: its 64 KiB MTU, a
    /// link fast enough that the pacer never holds back what the kernel
    /// can copy, and RTTbytes to match ([`LOOPBACK_LINK`]).
    pub fn loopback() -> Config {
        let base = Config::default();
        let mut core = base.core.clone();
        core.apply_link(&homa_core::Link {
            lower_header_bytes: core.lower_header_bytes,
            ..LOOPBACK_LINK
        });
        core.max_message_size = 16 << 20;
        // A grant once it adds a whole 64 KB packet (the derived 10 KB
        // would send six grants per packet received).
        core.grant_increment = 64_000;
        Config {
            core,
            // Loopback has no NIC queue for a control packet to wait in
            // (the kernel delivers each send before it returns): let a
            // whole unscheduled burst (RTTbytes) go at once rather than wake
            // the reader to release it. 500 KB RPCs with one outstanding
            // went from 0.59× TCP's throughput with 20 µs to 0.80× (one
            // side-by-side run of homa-perf client --size 500000).
            max_nic_queue_ns: 100_000,
            ..base
        }
    }

    /// This configuration with ByteDance's enhancements switched on
    /// (`core.bytedance.enabled`; docs/protocol-notes.md, "ByteDance
    /// mode"): per-peer RTT probes and per-peer unscheduled and grant
    /// windows. Everything else stays as it was, so start from a preset
    /// whose `core.link_mbps` is the local link's rate (the grant window
    /// follows from it) and whose RTTbytes is the one every endpoint of the
    /// network uses: the receivers believe `core.bytedance.max_unsched_bytes`
    /// (4 × RTTbytes after [`homa_core::Config::set_rtt_bytes`]) of
    /// unscheduled data from a sender in the mode, so all endpoints in the
    /// mode must agree on it. The GSO and GRO batch sizes are filled in at
    /// bind time from the offload settings ([`Config::effective_core`]).
    ///
    /// ```
    /// let config = homa::Config::loopback().with_bytedance();
    /// assert!(config.core.bytedance.enabled);
    /// let core = config.effective_core(28).unwrap();
    /// assert!(core.bytedance.gso_bytes > 0);
    /// ```
    ///
    /// The same from TOML (feature `toml`):
    ///
    /// ```
    /// # #[cfg(feature = "toml")] {
    /// let config = homa::Config::from_toml_str(r#"
    ///     [core]
    ///     link_mbps = 25000
    ///     [core.bytedance]
    ///     enabled = true
    /// "#).unwrap();
    /// assert!(config.core.bytedance.enabled);
    /// # }
    /// ```
    pub fn with_bytedance(mut self) -> Config {
        self.core.bytedance.enabled = true;
        self
    }

    /// Bytes of message data one GSO send of this runtime puts on the wire
    /// back to back, on a socket whose layers below Homa take
    /// `lower_header_bytes` per packet: one packet without segmentation
    /// offload (or over raw IP, which has none); otherwise the packets the
    /// pacer releases at once into an empty NIC queue (`max_nic_queue_ns`
    /// of link time, plus the one it always lets go), at most what one
    /// UDP GSO send carries (64 segments, 65,507 bytes). Without a link
    /// rate (no pacer) a whole GSO send.
    pub fn gso_batch_bytes(&self, lower_header_bytes: u32) -> u32 {
        let mut core = self.core.clone();
        core.lower_header_bytes = lower_header_bytes;
        let payload = core.max_payload().max(1);
        if !self.segmentation_offload || self.transport == Transport::Raw {
            return payload;
        }
        let datagram = core.mtu.saturating_sub(lower_header_bytes).max(1) as usize;
        let gso_max = (MAX_UDP_PAYLOAD / datagram).clamp(1, MAX_GSO_SEGMENTS) as u64;
        let packets = if core.link_mbps == 0 {
            gso_max
        } else {
            let wire_ns = ((u64::from(core.mtu) + homa_core::pacer::ETHERNET_OVERHEAD) * 8_000)
                .div_ceil(core.link_mbps)
                .max(1);
            (self.max_nic_queue_ns / wire_ns + 1).min(gso_max)
        };
        u32::try_from(packets.saturating_mul(u64::from(payload))).unwrap_or(u32::MAX)
    }

    /// Bytes of message data one GRO batch hands this runtime: one packet
    /// without receive offload (off in busy-poll mode, or over raw IP);
    /// otherwise a sender's back-to-back run, which for a peer running
    /// this runtime with the same settings is [`Config::gso_batch_bytes`].
    pub fn gro_batch_bytes(&self, lower_header_bytes: u32) -> u32 {
        let mut core = self.core.clone();
        core.lower_header_bytes = lower_header_bytes;
        let payload = core.max_payload().max(1);
        if !self.receive_offload || self.busy_poll || self.transport == Transport::Raw {
            return payload;
        }
        let mut as_sender = self.clone();
        as_sender.segmentation_offload = true;
        as_sender.gso_batch_bytes(lower_header_bytes)
    }

    /// The protocol configuration an endpoint runs with, on a socket whose
    /// layers below Homa take `lower_header_bytes` per packet (20 raw IPv4,
    /// 28 UDP/IPv4, 48 UDP/IPv6): `core` with that header size and, in the
    /// ByteDance mode, `bytedance.gso_bytes` and `gro_bytes` that are 0
    /// filled in from this runtime's offload settings
    /// ([`Config::gso_batch_bytes`], [`Config::gro_batch_bytes`]; set them
    /// to keep your own; one packet's payload means no batching). Refuses
    /// the mode without `core.link_mbps`: the per-peer grant window is the
    /// local link's rate × the peer's RTT. Idempotent.
    pub fn effective_core(&self, lower_header_bytes: u32) -> Result<homa_core::Config, Error> {
        let mut core = self.core.clone();
        core.lower_header_bytes = lower_header_bytes;
        if core.bytedance.enabled {
            if core.link_mbps == 0 {
                return Err(Error::Config(
                    "core.bytedance.enabled needs core.link_mbps (the local link's rate sizes \
                     each peer's grant window)"
                        .into(),
                ));
            }
            if core.bytedance.gso_bytes == 0 {
                core.bytedance.gso_bytes = self.gso_batch_bytes(lower_header_bytes);
            }
            if core.bytedance.gro_bytes == 0 {
                core.bytedance.gro_bytes = self.gro_batch_bytes(lower_header_bytes);
            }
        }
        core.validate().map_err(|e| Error::Config(e.to_string()))?;
        Ok(core)
    }

    /// Parses TOML; missing keys keep their defaults.
    #[cfg(feature = "toml")]
    pub fn from_toml_str(text: &str) -> Result<Config, Error> {
        let config: Config = toml::from_str(text).map_err(|e| Error::Config(e.to_string()))?;
        // Validates the core, and the ByteDance mode's needs.
        config.effective_core(config.core.lower_header_bytes)?;
        config.check()?;
        if let Some(f) = &config.fault_injection {
            f.validate()?;
        }
        Ok(config)
    }

    /// Reads a TOML file.
    #[cfg(feature = "toml")]
    pub fn from_toml_file(path: &Path) -> Result<Config, Error> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Config(format!("cannot read {}: {e}", path.display())))?;
        Config::from_toml_str(&text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The loopback preset works in either design: SIRD's buckets follow
    /// from its RTTbytes and hold its 64 KB packets.
    #[test]
    fn loopback_preset_is_valid_in_both_designs() {
        for design in [homa_core::Design::Homa, homa_core::Design::Sird] {
            let mut c = Config::loopback();
            c.core.design = design;
            c.core.validate().unwrap();
            assert!(c.core.sird.bucket >= c.core.max_payload());
            assert_eq!(c.core.unsched_bytes, LOOPBACK_LINK.bdp_bytes());
            assert_eq!(c.core.unsched_bytes, 1_000_000);
        }
    }

    /// `peer` comes from TOML as an address string (the C and Python
    /// bindings take their configuration so), and one that cannot be
    /// connected to is refused there, not at bind.
    #[cfg(feature = "toml")]
    #[test]
    fn peer_from_toml() {
        let c = Config::from_toml_str("peer = \"127.0.0.1:4000\"\n").unwrap();
        assert_eq!(c.peer, Some("127.0.0.1:4000".parse().unwrap()));
        let c = Config::from_toml_str("peer = \"[::1]:9\"\n").unwrap();
        assert_eq!(c.peer, Some("[::1]:9".parse().unwrap()));
        for bad in [
            "peer = \"127.0.0.1\"\n",
            "peer = \"127.0.0.1:0\"\n",
            "peer = \"0.0.0.0:80\"\n",
            "peer = \"127.0.0.1:80\"\nlanes = 8\n",
            "peer = \"127.0.0.1:80\"\ntransport = \"raw\"\n",
        ] {
            assert!(
                matches!(Config::from_toml_str(bad), Err(Error::Config(_))),
                "{bad}"
            );
        }
    }

    /// `[core.bytedance] enabled = true` switches the mode on from TOML,
    /// and the batch sizes left at 0 follow the offload settings at bind.
    #[cfg(feature = "toml")]
    #[test]
    fn bytedance_from_toml() {
        let c = Config::from_toml_str(
            "[core]\nlink_mbps = 10000\n[core.bytedance]\nenabled = true\nprobe_interval_ns = 500000\n",
        )
        .unwrap();
        assert!(c.core.bytedance.enabled);
        assert_eq!(c.core.bytedance.probe_interval_ns, 500_000);
        assert_eq!(c.core.bytedance.gso_bytes, 0);
        let core = c.effective_core(28).unwrap();
        // 10 Gbit/s, MTU 1500: the pacer lets 2 µs of link time wait, so
        // two full packets go back to back (1,416 B each over UDP/IPv4).
        assert_eq!(core.bytedance.gso_bytes, 2 * 1_416);
        assert_eq!(core.bytedance.gro_bytes, 2 * 1_416);
        assert_eq!(core.lower_header_bytes, 28);
        // Explicit sizes are kept.
        let c = Config::from_toml_str(
            "[core.bytedance]\nenabled = true\ngso_bytes = 9000\ngro_bytes = 3000\n",
        )
        .unwrap();
        let core = c.effective_core(28).unwrap();
        assert_eq!(
            (core.bytedance.gso_bytes, core.bytedance.gro_bytes),
            (9_000, 3_000)
        );
        // The mode without a link rate is refused with one clear error.
        let e = Config::from_toml_str("[core]\nlink_mbps = 0\n[core.bytedance]\nenabled = true\n")
            .unwrap_err();
        assert!(e.to_string().contains("link_mbps"), "{e}");
        // Off: nothing is filled in.
        let core = Config::default().effective_core(28).unwrap();
        assert_eq!(core.bytedance.gso_bytes, 0);
    }

    /// The batch sizes follow the offload switches: one packet without
    /// GSO, over raw IP, or (GRO) in busy-poll mode; a whole GSO send
    /// without a pacer; at most 64 segments and 65,507 bytes.
    #[test]
    fn bytedance_batch_sizes_follow_offload_settings() {
        let mut c = Config::default().with_bytedance();
        let one = 1_416;
        c.segmentation_offload = false;
        assert_eq!(c.gso_batch_bytes(28), one);
        c.segmentation_offload = true;
        c.busy_poll = true;
        assert_eq!(c.gro_batch_bytes(28), one);
        c.busy_poll = false;
        c.transport = Transport::Raw;
        assert_eq!(c.gso_batch_bytes(20), 1_424);
        assert_eq!(c.gro_batch_bytes(20), 1_424);
        c.transport = Transport::Udp;
        c.core.link_mbps = 0;
        // 65,507 / 1,472-byte datagrams = 44 segments.
        assert_eq!(c.gso_batch_bytes(28), 44 * one);
        c.core.link_mbps = 100_000;
        c.max_nic_queue_ns = 1_000_000;
        assert_eq!(c.gso_batch_bytes(28), 44 * one);
        // Loopback: one 64 KB packet per send.
        let l = Config::loopback().with_bytedance();
        let core = l.effective_core(28).unwrap();
        assert_eq!(core.bytedance.gso_bytes, core.max_payload());
        assert_eq!(core.bytedance.gro_bytes, core.max_payload());
        // Idempotent.
        let mut again = l.clone();
        again.core = core.clone();
        assert_eq!(again.effective_core(28).unwrap(), core);
    }
}
