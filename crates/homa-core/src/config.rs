//! Protocol parameters, with the defaults of Linux Homa where it has one.

use thiserror::Error;

/// Which receiver-driven design an endpoint runs. Both run on the same
/// core (RPCs, reassembly, loss recovery, every bound against hostile
/// input); they differ in their policies (`crate::policy`). Endpoints of
/// different designs that meet fail the RPC with
/// [`crate::RpcError::DesignMismatch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum Design {
    /// Homa: unscheduled RTTbytes, SRPT grants with controlled
    /// overcommitment, 8 priority levels (Linux-compatible on the wire).
    #[default]
    Homa,
    /// SIRD (seed 001): credit from a per-receiver bucket shared among
    /// senders by two AIMD loops (sender congestion bit and ECN), no
    /// priorities needed.
    Sird,
}

/// SIRD's parameters (seed 001, Tables 1–2). Sizes in bytes; the defaults
/// follow from the link's BDP ([`Config::set_rtt_bytes`]): UnschT = 1×BDP,
/// B = 1.5×BDP, SThr = 0.5×BDP, per-sender buckets up to 1×BDP.
///
/// Parameters may be added in a minor release (`#[non_exhaustive]`): start
/// from [`SirdConfig::default`] (or [`Config::default`]) and set fields.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct SirdConfig {
    /// UnschT: messages up to this size send min(BDP, size) unscheduled;
    /// larger ones send nothing before credit.
    pub unsched_threshold: u32,
    /// B: the receiver's cap on credited-but-not-received bytes.
    pub bucket: u32,
    /// SThr: a sender holding at least this much unspent credit over all
    /// receivers sets `csn` on its DATA. `u32::MAX` turns informed
    /// overcommitment off (the paper's SThr = ∞).
    pub sender_threshold: u32,
    /// Largest per-sender bucket (the AIMD loops' ceiling and start).
    pub sender_bucket_max: u32,
    /// Smallest per-sender bucket (the AIMD loops' floor); at least one
    /// packet, or a congested sender would be starved.
    pub sender_bucket_min: u32,
    /// DCTCP gain g of both AIMD loops (‰; the paper's DCTCP uses 0.08).
    pub dctcp_gain: u32,
    /// Pace credit to the downlink's rate (`link_mbps`), so that credited
    /// data arrives no faster than the link drains it.
    pub pace_credit: bool,
    /// Share (‰) of a sender's data packets that go round-robin across its
    /// receivers rather than to the shortest message, so every receiver
    /// keeps seeing feedback (the paper: 50%).
    pub fair_share: u32,
    /// Use two priority levels: control packets and unscheduled prefixes
    /// above scheduled data (the paper's simulations). Off: one level.
    pub priorities: bool,
}

impl Default for SirdConfig {
    fn default() -> Self {
        Config::default().sird
    }
}

impl SirdConfig {
    /// The paper's multiples of the bandwidth-delay product `bdp`
    /// (`payload`: bytes per packet, the floor of a per-sender bucket).
    pub fn set_bdp(&mut self, bdp: u32, payload: u32) {
        self.unsched_threshold = bdp;
        self.bucket = bdp.saturating_add(bdp / 2);
        if self.sender_threshold != u32::MAX {
            self.sender_threshold = bdp / 2;
        }
        self.sender_bucket_max = bdp;
        self.sender_bucket_min = payload.min(bdp).max(1);
    }
}

/// ByteDance mode (seed 004, `crate::bytedance`): Homa with per-peer RTT
/// probes, per-peer unscheduled and grant windows and an unscheduled ratio
/// measured by receivers. It patches Homa's policies rather than replacing
/// them, so it is a switch on a Homa endpoint, not a [`Design`]: Linux Homa
/// peers and homa-rs peers with the mode off interoperate unchanged (they
/// never get an RTT_PROBE and are sent Homa's `unsched_bytes`).
///
/// Times in nanoseconds, sizes in bytes, rates in Mbit/s, ratios in
/// thousandths. Parameters may be added in a minor release
/// (`#[non_exhaustive]`): start from [`ByteDanceConfig::default`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct ByteDanceConfig {
    /// The switch (default off).
    pub enabled: bool,
    /// Least time between two RTT probes to one peer (ns; the paper's
    /// `rtt_probe_interval_us`, 1 ms). While the peer's path is congested
    /// (smoothed RTT above `rtt_high`) the interval is 8 × `rtt_min` when
    /// that is shorter.
    pub probe_interval_ns: u64,
    /// Weight (‰) of a new RTT sample in the smoothed `rtt_recent`
    /// (500: the mean of the previous value and the sample).
    pub rtt_ewma_weight: u32,
    /// Bytes one GSO batch puts on the wire at once (the paper's
    /// `gso_pkt_data_size`): the GSO delay term of the thresholds and the
    /// smallest unscheduled window. 0 = one packet (no GSO).
    pub gso_bytes: u32,
    /// Bytes one GRO batch delivers: grants are rounded up to whole GRO
    /// batches and none smaller than one is sent (unless it completes the
    /// message). 0 = one packet.
    pub gro_bytes: u32,
    /// Cap on a peer's unscheduled window (bytes). A receiver in this mode
    /// believes this much unscheduled data from a sender that sets the
    /// ByteDance DATA flag, so both sides must agree on it, as on
    /// `unsched_bytes` ([`Config::set_rtt_bytes`]: 4 × RTTbytes, the
    /// paper's `rtt_mid` at zero GSO delay).
    pub max_unsched_bytes: u32,
    /// Cap on a peer's scheduled (grant) window (bytes;
    /// [`Config::set_rtt_bytes`]: 4 × RTTbytes).
    pub max_grant_window: u32,
    /// Below this unscheduled ratio (‰) of the receiver, an idle sender
    /// halves its gap-filling window (the paper's 40%).
    pub low_ratio: u32,
    /// Grant nothing to a peer while its smoothed RTT and its latest sample
    /// are both above `rtt_high` (the paper's future work; default off).
    /// The pause ends at the first sample at or below `rtt_high`, or when
    /// the latest sample is older than `grant_pause_stale_ns`; a paused
    /// peer keeps being probed. Timers still repair losses.
    pub no_grants_above_high: bool,
    /// How long a high RTT sample may keep a peer's grants paused (ns,
    /// default 4 ms = four probe intervals): with no newer sample by then
    /// (probes or answers lost, or the RTT itself that long) grants resume,
    /// so a stale signal never stalls a message. Capped at `dead_peer_ns`
    /// (an answer older than that is not a sample). At least 1.
    pub grant_pause_stale_ns: u64,
    /// `rtt_min` is the minimum RTT sampled over this much time (ns,
    /// default 10 s, BBR's `min_rtt` window): after a route change to a
    /// longer path the old minimum expires within it. At least 1.
    pub rtt_min_window_ns: u64,
    /// Hysteresis of the priority split the measured unscheduled ratio
    /// drives (thousandths of a level, default 250): the number of
    /// unscheduled levels changes only when `ratio × levels` is more than
    /// half a level plus this far from the current number, so a ratio
    /// near a rounding edge does not make the split flap. At most 1000.
    pub split_hysteresis: u32,
}

impl Default for ByteDanceConfig {
    fn default() -> Self {
        Config::default().bytedance
    }
}

/// Every tunable of the protocol core. Times are in nanoseconds, sizes in
/// bytes, fractions in thousandths.
///
/// Parameters may be added in a minor release (`#[non_exhaustive]`): outside
/// this crate, start from [`Config::default`] (or [`Config::for_link`]) and
/// set fields:
///
/// ```
/// let mut config = homa_core::Config::default();
/// config.mtu = 9_000;
/// config.set_rtt_bytes(100_000);
/// assert!(config.validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct Config {
    /// The receiver-driven design: Homa (default) or SIRD.
    pub design: Design,
    /// SIRD's parameters (used when `design` is SIRD).
    pub sird: SirdConfig,
    /// ByteDance mode (a switch on Homa; off by default).
    pub bytedance: ByteDanceConfig,
    /// Largest IP packet the path carries (bytes, IP header included).
    pub mtu: u32,
    /// Bytes of headers below Homa in each packet: 20 for raw IPv4, 28 for
    /// UDP over IPv4, 48 for UDP over IPv6.
    pub lower_header_bytes: u32,
    /// Largest message (request or response) accepted or sent.
    pub max_message_size: u32,
    /// Link speed of this host (Mbit/s): drivers pace their transmissions
    /// to it (the socket runtime's pacer; 0 = no pacing). Set with the
    /// parameters derived from it by [`Config::apply_link`].
    pub link_mbps: u64,
    /// Bytes of each message a sender transmits before any grant
    /// ("RTTbytes"); rounded up to whole packets.
    pub unsched_bytes: u32,
    /// Granted-but-not-received bytes the receiver keeps outstanding for each
    /// active message.
    pub grant_window: u32,
    /// Cap on the granted-but-not-received bytes over all incoming messages.
    pub max_incoming: u32,
    /// Most messages granted at once (controlled overcommitment).
    pub max_overcommit: u32,
    /// Smallest grant worth sending, unless it completes the message.
    pub grant_increment: u32,
    /// Share of granted bytes (‰) given to the oldest message rather than
    /// the SRPT choice, so that the largest messages never starve. 0 = off.
    pub fifo_grant_fraction: u32,
    /// Bytes granted to the oldest message each time its turn comes.
    pub fifo_grant_increment: u32,
    /// Share of transmitted data packets (‰) taken from the oldest outgoing
    /// message rather than the SRPT choice. 0 = off.
    pub pacer_fifo_fraction: u32,
    /// Priority levels in use, 1..=8. Control packets use the highest.
    pub num_priorities: u8,
    /// How often a receiver recomputes its unscheduled cutoffs from the
    /// message sizes it has seen (ns).
    pub cutoff_update_interval_ns: u64,
    /// Message sizes remembered for the cutoff computation.
    pub cutoff_sample_size: u32,
    /// Sizes needed before measured cutoffs replace the defaults.
    pub cutoff_min_samples: u32,
    /// Timer tick (ns). All loss handling counts in ticks.
    pub tick_ns: u64,
    /// Ticks without progress before an RPC that expects data asks for it.
    pub resend_ticks: u32,
    /// Ticks between successive RESENDs to one peer.
    pub resend_interval: u32,
    /// Unanswered RESENDs after which a peer is declared dead.
    pub timeout_resends: u32,
    /// Ticks a server waits for an ack after sending a whole response
    /// before it sends NEED_ACK.
    pub need_ack_ticks: u32,
    /// Outstanding client RPCs beyond which new requests ask servers to
    /// limit the unscheduled part of their responses (incast control).
    pub incast_threshold: u32,
    /// Unscheduled bytes a server sends of a response to a request that
    /// asked for incast control.
    pub incast_unsched_bytes: u32,
    /// Cap on the memory held for incoming messages (bytes, plus a fixed
    /// charge per RPC); packets that would start a message beyond it are
    /// dropped and the sender recovers by timeout.
    pub rx_buffer_limit: u64,
    /// How long a server remembers an acknowledged RPC so that stale
    /// duplicates of its request are not executed again (ns).
    pub ack_memory_ns: u64,
    /// Idle time after which a peer without RPCs is forgotten (ns).
    pub peer_idle_ns: u64,
    /// Most RPCs (client and server) in existence; a request beyond it is
    /// refused (client: an error; server: dropped, the client retries).
    pub max_rpcs: u32,
    /// RPC streaming: each stream's receive window and send queue, in
    /// messages (at most 16,384); 0 disables streams (an OPEN is refused).
    pub stream_window: u16,
    /// Most server RPCs one client (address and port) may have at once.
    pub max_server_rpcs_per_peer: u32,
    /// Most peers remembered; idle ones are forgotten first.
    pub max_peers: u32,
    /// Cap on the bytes held in outgoing messages; `send_request` beyond it
    /// fails.
    pub tx_buffer_limit: u64,
    /// Most missing ranges an RPC asks for in one timeout (one RESEND each).
    pub resend_gaps: u32,
    /// Most timer-driven packets (RESEND, NEED_ACK, probes) sent to one peer
    /// per tick; the rest wait for the next tick.
    pub timer_packets_per_peer: u32,
    /// Bytes a message may retransmit over its life in whole ranges, in
    /// percent of its length (plus `timeout_resends` packets); as many again
    /// one packet per RESEND, at most one per half `resend_interval`, so a
    /// live receiver that lost a packet after the first allowance went to
    /// late copies still gets it. RESENDs beyond both get BUSY.
    pub retransmit_pct: u32,
    /// Most acknowledged RPCs remembered against stale duplicates; beyond
    /// it the oldest are forgotten early (counted).
    pub max_remembered_acks: u32,
    /// A receiver asks at once for a missing range that this many full
    /// packets of the same message have overtaken (it is then probably
    /// lost, not late), instead of waiting `resend_ticks`. 0 = off (the
    /// default, as in Linux Homa, where packets of different priorities may
    /// overtake each other in switches); the runtime turns it on.
    pub fast_resend_packets: u32,
    /// New requests per tick accepted from peers that have not shown they
    /// hear us (see `Peer::proven`) while the driver reports a backlog
    /// ([`crate::Endpoint::handle_packet_backlogged`], e.g. under a flood of
    /// spoofed first packets); the rest are dropped before any work is done
    /// for them (counted in `shed_unproven_requests`). Known peers and
    /// RPCs keep their service.
    pub backlog_unproven_per_tick: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            design: Design::Homa,
            sird: SirdConfig {
                unsched_threshold: 40_000,
                bucket: 60_000,
                sender_threshold: 20_000,
                sender_bucket_max: 40_000,
                sender_bucket_min: 1_416,
                dctcp_gain: 80,
                pace_credit: true,
                fair_share: 500,
                priorities: true,
            },
            bytedance: ByteDanceConfig {
                enabled: false,
                probe_interval_ns: 1_000_000,
                rtt_ewma_weight: 500,
                gso_bytes: 0,
                gro_bytes: 0,
                max_unsched_bytes: 160_000,
                max_grant_window: 160_000,
                low_ratio: 400,
                no_grants_above_high: false,
                grant_pause_stale_ns: 4_000_000,
                rtt_min_window_ns: 10_000_000_000,
                split_hysteresis: 250,
            },
            mtu: 1500,
            lower_header_bytes: 28,
            max_message_size: 1_000_000,
            link_mbps: 10_000,
            unsched_bytes: 40_000,
            grant_window: 40_000,
            max_incoming: 400_000,
            max_overcommit: 8,
            grant_increment: 10_000,
            fifo_grant_fraction: 50,
            fifo_grant_increment: 50_000,
            pacer_fifo_fraction: 50,
            num_priorities: 8,
            cutoff_update_interval_ns: 500_000_000,
            cutoff_sample_size: 10_000,
            cutoff_min_samples: 1_000,
            tick_ns: 1_000_000,
            resend_ticks: 5,
            resend_interval: 5,
            timeout_resends: 5,
            need_ack_ticks: 2,
            incast_threshold: 10,
            incast_unsched_bytes: 300,
            rx_buffer_limit: 1 << 30,
            ack_memory_ns: 2_000_000_000,
            peer_idle_ns: 60_000_000_000,
            max_rpcs: 131_072,
            stream_window: 8,
            max_server_rpcs_per_peer: 16_384,
            max_peers: 65_536,
            tx_buffer_limit: 1 << 30,
            resend_gaps: 8,
            timer_packets_per_peer: 32,
            retransmit_pct: 100,
            max_remembered_acks: 1 << 20,
            fast_resend_packets: 0,
            backlog_unproven_per_tick: 16,
        }
    }
}

/// A host's link to the network, from which [`Config::apply_link`]
/// derives the protocol's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Link {
    /// Link rate (Mbit/s).
    pub mbps: u64,
    /// Round-trip time the unscheduled bytes must cover (ns).
    pub rtt_ns: u64,
    /// Largest IP packet (bytes, IP header included).
    pub mtu: u32,
    /// Headers below Homa in each packet (bytes): 20 raw IPv4, 28 UDP/IPv4,
    /// 48 UDP/IPv6.
    pub lower_header_bytes: u32,
}

impl Link {
    /// A link of `mbps` and a round trip of `rtt_ns`, with Ethernet's MTU
    /// and UDP/IPv4 headers.
    pub fn new(mbps: u64, rtt_ns: u64) -> Link {
        Link {
            mbps,
            rtt_ns,
            mtu: 1500,
            lower_header_bytes: 28,
        }
    }

    /// One bandwidth-delay product (bytes).
    pub fn bdp_bytes(&self) -> u32 {
        (self.mbps as u128 * self.rtt_ns as u128 / 8_000).clamp(1, u32::MAX as u128) as u32
    }
}

/// A configuration that cannot work, and why.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid Homa configuration: {0}")]
pub struct ConfigError(pub String);

/// Fixed memory charged per incoming message against `rx_buffer_limit`, so
/// that a flood of empty messages is bounded too.
pub(crate) const RPC_MEMORY_CHARGE: u64 = 512;

impl Config {
    /// The defaults for `link`: see [`Config::apply_link`].
    pub fn for_link(link: &Link) -> Config {
        let mut c = Config::default();
        c.apply_link(link);
        c
    }

    /// Sets everything that follows from the host's link — the one place
    /// the project derives protocol parameters from a link (the runtime,
    /// the simulator and the testbed all call it): rate, MTU and lower
    /// headers as given, and RTTbytes (one bandwidth-delay product) with
    /// what follows from it ([`Config::set_rtt_bytes`]).
    pub fn apply_link(&mut self, link: &Link) {
        self.link_mbps = link.mbps;
        self.mtu = link.mtu;
        self.lower_header_bytes = link.lower_header_bytes;
        self.set_rtt_bytes(link.bdp_bytes());
    }

    /// Sets RTTbytes and what follows from it: unscheduled bytes and grant
    /// window are `bytes`, grants go out in eighths of it, FIFO grants in
    /// whole windows, and `max_incoming` allows a window for each
    /// overcommitted message plus two.
    pub fn set_rtt_bytes(&mut self, bytes: u32) {
        let base = Config::default();
        let bytes = bytes.max(1);
        self.unsched_bytes = bytes;
        self.grant_window = bytes;
        // A grant is only worth sending once it adds this much; with the
        // window at one BDP, anything close to the window would leave the
        // link idle while the grant makes its round trip.
        self.grant_increment = (bytes / 8).clamp(1, base.grant_increment);
        // The oldest message's share comes in window-sized grants: a 50 KB
        // FIFO grant to a sender that is busy elsewhere would hold most of
        // a BDP-sized `max_incoming` for milliseconds and stall every other
        // incoming message (found in the simulator on W7).
        self.fifo_grant_increment = bytes.clamp(1, base.fifo_grant_increment);
        self.max_incoming = bytes.saturating_mul(self.max_overcommit + 2);
        let payload = self.max_payload();
        self.sird.set_bdp(bytes, payload);
        // ByteDance's windows reach `rtt_mid` = 4 × (rtt_min + GSO delay):
        // four BDPs on an idle path.
        self.bytedance.max_unsched_bytes = bytes.saturating_mul(4);
        self.bytedance.max_grant_window = bytes.saturating_mul(4);
    }

    /// Longest a silent peer is given before an RPC with it is given up
    /// (ns): the first RESEND after `resend_ticks`, then `timeout_resends`
    /// more intervals, plus one for the tick that gives up. The one place
    /// this bound is written; drivers that wait for a core verdict add their
    /// margin to it.
    pub fn dead_peer_ns(&self) -> u64 {
        let ticks = self.resend_ticks as u64
            + (self.timeout_resends as u64 + 1) * self.resend_interval as u64;
        ticks.saturating_mul(self.tick_ns)
    }

    /// Message bytes one DATA packet carries.
    pub fn max_payload(&self) -> u32 {
        self.mtu
            .saturating_sub(self.lower_header_bytes)
            .saturating_sub(homa_wire::DATA_HEADER_LEN as u32)
    }

    /// The highest priority level in use; control packets go there. (SIRD
    /// uses at most two levels: 1 with `sird.priorities`, else 0.)
    pub fn top_priority(&self) -> u8 {
        let top = self.num_priorities.saturating_sub(1);
        match self.design {
            Design::Homa => top,
            Design::Sird => top.min(self.sird.priorities as u8),
        }
    }

    /// Checks that the parameters fit together.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let err = |s: String| Err(ConfigError(s));
        if self.max_payload() < 64 {
            return err(format!(
                "mtu {} leaves {} payload bytes per packet after {} lower-layer and {} Homa \
                 header bytes; at least 64 are needed",
                self.mtu,
                self.max_payload(),
                self.lower_header_bytes,
                homa_wire::DATA_HEADER_LEN
            ));
        }
        if !(1..=8).contains(&self.num_priorities) {
            return err(format!(
                "num_priorities is {}; it must be 1..=8",
                self.num_priorities
            ));
        }
        if self.max_message_size > homa_wire::CUTOFF_UNLIMITED {
            return err(format!(
                "max_message_size {} exceeds the wire limit of {} bytes",
                self.max_message_size,
                homa_wire::CUTOFF_UNLIMITED
            ));
        }
        for (name, v) in [
            ("max_overcommit", self.max_overcommit),
            ("grant_window", self.grant_window),
            ("max_incoming", self.max_incoming),
            ("resend_ticks", self.resend_ticks),
            ("resend_interval", self.resend_interval),
            ("timeout_resends", self.timeout_resends),
            ("need_ack_ticks", self.need_ack_ticks),
            ("cutoff_sample_size", self.cutoff_sample_size),
            ("max_rpcs", self.max_rpcs),
            ("max_server_rpcs_per_peer", self.max_server_rpcs_per_peer),
            ("max_peers", self.max_peers),
            ("resend_gaps", self.resend_gaps),
            ("timer_packets_per_peer", self.timer_packets_per_peer),
        ] {
            if v == 0 {
                return err(format!("{name} must be at least 1"));
            }
        }
        if self.stream_window > 0x4000 {
            return err(format!(
                "stream_window ({}) must be at most 16384",
                self.stream_window
            ));
        }
        if self.tick_ns == 0 {
            return err("tick_ns must be at least 1".into());
        }
        if self.design == Design::Sird {
            let d = &self.sird;
            if d.sender_bucket_min == 0 || d.sender_bucket_min > d.sender_bucket_max {
                return err(format!(
                    "sird.sender_bucket_min ({}) must be at least 1 and at most sird.sender_bucket_max ({})",
                    d.sender_bucket_min, d.sender_bucket_max
                ));
            }
            if d.bucket < self.max_payload() {
                return err(format!(
                    "sird.bucket ({}) must hold at least one packet ({} bytes)",
                    d.bucket,
                    self.max_payload()
                ));
            }
            if d.dctcp_gain == 0 || d.dctcp_gain > 1000 || d.fair_share > 1000 {
                return err(format!(
                    "sird.dctcp_gain must be 1..=1000 and sird.fair_share 0..=1000 (thousandths; got {} and {})",
                    d.dctcp_gain, d.fair_share
                ));
            }
        }
        if self.bytedance.enabled {
            let b = &self.bytedance;
            if self.design != Design::Homa {
                return err("bytedance.enabled needs design = homa (the mode patches Homa)".into());
            }
            if b.probe_interval_ns == 0 || b.rtt_ewma_weight == 0 || b.rtt_ewma_weight > 1000 {
                return err(format!(
                    "bytedance.probe_interval_ns must be at least 1 and bytedance.rtt_ewma_weight \
                     1..=1000 (thousandths; got {} and {})",
                    b.probe_interval_ns, b.rtt_ewma_weight
                ));
            }
            if b.low_ratio > 1000 {
                return err(format!(
                    "bytedance.low_ratio is in thousandths, at most 1000 (got {})",
                    b.low_ratio
                ));
            }
            if b.max_unsched_bytes == 0 || b.max_grant_window == 0 {
                return err(
                    "bytedance.max_unsched_bytes and max_grant_window must be at least 1".into(),
                );
            }
            if b.rtt_min_window_ns == 0 || b.split_hysteresis > 1000 {
                return err(format!(
                    "bytedance.rtt_min_window_ns must be at least 1 and bytedance.split_hysteresis \
                     0..=1000 (thousandths of a level; got {} and {})",
                    b.rtt_min_window_ns, b.split_hysteresis
                ));
            }
            if b.grant_pause_stale_ns == 0 {
                return err("bytedance.grant_pause_stale_ns must be at least 1".into());
            }
        }
        if self.fifo_grant_fraction > 500 || self.pacer_fifo_fraction > 500 {
            return err(format!(
                "fifo fractions are in thousandths and at most 500 (got grant {}, pacer {})",
                self.fifo_grant_fraction, self.pacer_fifo_fraction
            ));
        }
        // A refused or acked RPC must be remembered longer than its client
        // keeps asking for it, or a late RESEND draws RPC_UNKNOWN and the
        // client restarts it.
        let patience = self.dead_peer_ns();
        if self.ack_memory_ns <= patience {
            return err(format!(
                "ack_memory_ns ({} ns) must exceed the time a client keeps \
                 retrying a silent server, tick_ns × (resend_ticks + \
                 (timeout_resends + 1) × resend_interval) = {patience} ns",
                self.ack_memory_ns
            ));
        }
        if self.fifo_grant_fraction > 0 && self.fifo_grant_increment == 0 {
            return err("fifo_grant_increment must be positive when FIFO grants are on".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_linux_like() {
        let c = Config::default();
        c.validate().unwrap();
        assert_eq!(c.max_payload(), 1500 - 28 - 56);
        assert_eq!(c.unsched_bytes, 40_000);
        assert_eq!(c.max_overcommit, 8);
        assert_eq!(c.top_priority(), 7);
    }

    #[test]
    fn for_link_derives_rtt_bytes() {
        // 25 Gbit/s × 8 µs = 25,000 bytes.
        let c = Config::for_link(&Link::new(25_000, 8_000));
        assert_eq!(c.unsched_bytes, 25_000);
        assert_eq!(c.grant_window, 25_000);
        c.validate().unwrap();
    }

    #[test]
    fn for_link_keeps_grants_pipelined() {
        // A 10 Gbit/s link with a 7.7 µs round trip: one BDP is ~9.7 KB.
        // Grants must come in pieces well below the window (else the sender
        // idles for a round trip per window), and the oldest message's FIFO
        // share must not exceed a window (else it holds most of
        // max_incoming).
        let c = Config::for_link(&Link::new(10_000, 7_744));
        assert_eq!(c.grant_window, 9_680);
        assert_eq!(c.grant_increment, 1_210);
        assert_eq!(c.fifo_grant_increment, 9_680);
        assert!(c.fifo_grant_increment as u64 * 4 <= c.max_incoming as u64);
        // Fast links keep the Linux values where they fit.
        let c = Config::for_link(&Link::new(100_000, 100_000));
        assert_eq!(c.grant_increment, 10_000);
        assert_eq!(c.fifo_grant_increment, 50_000);
        c.validate().unwrap();
    }

    #[test]
    fn bad_configs_are_explained() {
        let c = Config {
            mtu: 100,
            ..Config::default()
        };
        let e = c.validate().unwrap_err();
        assert!(e.to_string().contains("mtu 100"), "{e}");
        let c = Config {
            num_priorities: 9,
            ..Config::default()
        };
        assert!(c.validate().unwrap_err().to_string().contains("1..=8"));
        let c = Config {
            timeout_resends: 0,
            ..Config::default()
        };
        assert!(c.validate().is_err());
        let c = Config {
            timeout_resends: 20,
            ack_memory_ns: 100_000_000,
            ..Config::default()
        };
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("ack_memory_ns"), "{e}");
    }
}
