//! Homa on a simulated host: the project's protocol core
//! ([`homa_core::Endpoint`]), unmodified, behind the simulator's
//! [`Transport`] interface. The same adapter runs SIRD: the core with
//! `Config::design = Design::Sird` ([`Homa::sird`]); ECN marks set by the
//! simulated switches reach the core as `homa_core::PacketMeta::ce`.
//!
//! Each message of the workload is sent as the request of an RPC; the
//! receiver answers with an empty response at once (the thesis' one-way
//! messages), and the message counts as delivered when the request has fully
//! arrived. Packets travel as the exact bytes the core emits and are parsed
//! by the receiving core, so the wire code is exercised too.

use crate::transport::{
    Delivered, HostEnv, HostId, PacketMeta, Protocol, QueueDiscipline, SimPacket, Transport,
    TransportError,
};
use crate::{Time, PS_PER_NS};
use bytes::Bytes;
use homa_core::{Config, Design, Endpoint, Event, Link, Transmit};
use homa_wire::PacketType;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// The Homa port every simulated host uses.
const PORT: u16 = 4000;
/// Hosts are 10.0.0.1, 10.0.0.2, ...
const BASE_ADDR: u32 = 0x0A00_0000;

/// Homa parameters a scenario may set. Anything left `None` takes the
/// core's default for the simulated link (see [`HomaConfig::core_config`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HomaConfig {
    /// Priority levels used (1..=8).
    pub num_priorities: u8,
    /// Most messages granted at once (controlled overcommitment); `None` =
    /// the core's default (8, as Linux).
    pub max_overcommit: Option<u32>,
    /// Unscheduled bytes per message; `None` = the network's RTTbytes.
    pub unsched_bytes: Option<u32>,
    /// Granted-but-unreceived bytes per active message; `None` = RTTbytes.
    pub grant_window: Option<u32>,
    /// Smallest grant worth sending; `None` = one full packet, so grants
    /// are clocked by arriving packets as in the thesis.
    pub grant_increment: Option<u32>,
    /// Share of grants (‰) for the oldest message; `None` = core default.
    pub fifo_grant_fraction: Option<u32>,
    /// Bytes granted to the oldest message at its turn; `None` = one grant
    /// window.
    pub fifo_grant_increment: Option<u32>,
    /// Share of sent packets (‰) from the oldest message; `None` = core
    /// default.
    pub pacer_fifo_fraction: Option<u32>,
    /// Where receivers' unscheduled cutoffs come from at the start.
    pub cutoffs: CutoffSource,
    /// How often receivers recompute unscheduled cutoffs (µs of simulated
    /// time). Linux uses seconds; simulated runs last milliseconds, so the
    /// default is 1,000 µs.
    pub cutoff_update_interval_us: f64,
    /// Message sizes a receiver must have seen before its measured cutoffs
    /// replace the defaults.
    pub cutoff_min_samples: u32,
    /// ByteDance mode (`[homa.bytedance]`; off by default).
    pub bytedance: crate::bytedance::ByteDanceSimConfig,
}

impl Default for HomaConfig {
    fn default() -> Self {
        HomaConfig {
            num_priorities: 8,
            max_overcommit: None,
            unsched_bytes: None,
            grant_window: None,
            grant_increment: None,
            fifo_grant_fraction: None,
            fifo_grant_increment: None,
            pacer_fifo_fraction: None,
            cutoffs: CutoffSource::Workload,
            cutoff_update_interval_us: 1_000.0,
            cutoff_min_samples: 200,
            bytedance: Default::default(),
        }
    }
}

/// SIRD parameters a scenario may set (used by the `sird` protocol). Sizes
/// left `None` follow from the BDP (the grant window, RTTbytes unless
/// `homa.grant_window` sets it) as the paper's Table 2: B = 1.5×BDP,
/// UnschT = 1×BDP, SThr = 0.5×BDP.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SirdSimConfig {
    /// B: the receiver's credit bucket (bytes).
    pub bucket: Option<u32>,
    /// UnschT (bytes).
    pub unsched_threshold: Option<u32>,
    /// SThr (bytes); `informed = false` overrides it with ∞.
    pub sender_threshold: Option<u32>,
    /// Informed overcommitment (the csn loop); false is the paper's
    /// SThr = ∞.
    pub informed: bool,
    /// Two priority levels (control and unscheduled above scheduled data),
    /// as the paper's simulations; false = one level.
    pub priorities: bool,
    /// Pace credit to the downlink rate.
    pub pace_credit: bool,
}

impl SirdSimConfig {
    /// UnschT on a network of `env` (the override, else the BDP that
    /// [`HomaConfig::core_config`] gives the core), without building the
    /// core's configuration.
    pub fn unsched_threshold_for(&self, homa: &HomaConfig, env: &HostEnv) -> u64 {
        let bdp = homa
            .grant_window
            .unwrap_or(env.rtt_bytes.clamp(1, u32::MAX as u64) as u32)
            .max(1);
        self.unsched_threshold.unwrap_or(bdp) as u64
    }
}

impl Default for SirdSimConfig {
    fn default() -> Self {
        SirdSimConfig {
            bucket: None,
            unsched_threshold: None,
            sender_threshold: None,
            informed: true,
            priorities: true,
            pace_credit: true,
        }
    }
}

/// How receivers get their first unscheduled cutoffs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CutoffSource {
    /// Computed at start from a sample of the workload, as an administrator
    /// configures them for a known workload (the thesis' implementation
    /// did); periodic measurement continues from there.
    Workload,
    /// Linux's defaults until each receiver has measured enough messages.
    Measured,
}

impl HomaConfig {
    /// The core configuration for a host of `env`: the core's defaults for
    /// the link and RTT, raw IPv4 headers, and this struct's overrides.
    pub fn core_config(&self, env: &HostEnv) -> Config {
        let rtt_ns = (env.rtt / PS_PER_NS).max(1);
        let mut c = Config::for_link(&Link {
            mbps: env.host_link_bps / 1_000_000,
            rtt_ns,
            mtu: env.packetization.mtu,
            lower_header_bytes: env.packetization.ip_header,
        });
        let rtt_bytes = env.rtt_bytes.clamp(1, u32::MAX as u64) as u32;
        c.max_message_size = env.max_message.clamp(1, homa_wire::CUTOFF_UNLIMITED as u64) as u32;
        c.num_priorities = self.num_priorities;
        if let Some(v) = self.max_overcommit {
            c.max_overcommit = v;
        }
        // RTTbytes as the simulator measures it on its topology (payload
        // bytes in flight over a round trip), and what follows from it.
        c.set_rtt_bytes(self.grant_window.unwrap_or(rtt_bytes));
        c.unsched_bytes = self.unsched_bytes.unwrap_or(rtt_bytes);
        // Grants are clocked by arriving packets, as in the thesis.
        c.grant_increment = self
            .grant_increment
            .unwrap_or_else(|| c.max_payload().min(c.grant_window));
        if let Some(v) = self.fifo_grant_fraction {
            c.fifo_grant_fraction = v;
        }
        c.fifo_grant_increment = self.fifo_grant_increment.unwrap_or(c.grant_window);
        if let Some(v) = self.pacer_fifo_fraction {
            c.pacer_fifo_fraction = v;
        }
        c.cutoff_update_interval_ns = (self.cutoff_update_interval_us * 1_000.0).round() as u64;
        c.cutoff_min_samples = self.cutoff_min_samples;
        // A server must remember acknowledged RPCs longer than a client can
        // be silent; keep the core's rule satisfied for any tick setting.
        c.ack_memory_ns = c.ack_memory_ns.max(c.dead_peer_ns() + c.tick_ns);
        self.bytedance.apply(&mut c);
        c
    }

    /// The core configuration of a SIRD host: [`HomaConfig::core_config`]
    /// (which derives SIRD's sizes from the BDP) with `design = Sird` and
    /// `sird`'s overrides.
    pub fn sird_core_config(&self, sird: &SirdSimConfig, env: &HostEnv) -> Config {
        let mut c = self.core_config(env);
        c.design = Design::Sird;
        let d = &mut c.sird;
        if let Some(v) = sird.bucket {
            d.bucket = v;
        }
        if let Some(v) = sird.unsched_threshold {
            d.unsched_threshold = v;
        }
        if let Some(v) = sird.sender_threshold {
            d.sender_threshold = v;
        }
        if !sird.informed {
            d.sender_threshold = u32::MAX;
        }
        d.priorities = sird.priorities;
        d.pace_credit = sird.pace_credit;
        c
    }
}

/// The Homa protocol (or SIRD, on the same core) for the simulator.
#[derive(Debug, Clone, Default)]
pub struct Homa {
    /// Parameters.
    pub config: HomaConfig,
    /// SIRD's parameters, when this runs SIRD.
    pub sird: Option<SirdSimConfig>,
    /// Message contents shared by all hosts (zeros, mapped lazily).
    zeros: std::sync::OnceLock<Bytes>,
}

impl Homa {
    /// Homa with these parameters.
    pub fn new(config: HomaConfig) -> Homa {
        Homa {
            config,
            sird: None,
            zeros: Default::default(),
        }
    }

    /// SIRD: the same core with `design = Sird`; `config` supplies what the
    /// two designs share (priority levels, BDP, timers).
    pub fn sird(config: HomaConfig, sird: SirdSimConfig) -> Homa {
        Homa {
            config,
            sird: Some(sird),
            zeros: Default::default(),
        }
    }

    /// The core configuration of a host of `env`.
    pub fn host_config(&self, env: &HostEnv) -> Config {
        match &self.sird {
            None => self.config.core_config(env),
            Some(s) => self.config.sird_core_config(s, env),
        }
    }
}

impl Protocol for Homa {
    type Host = HomaHost;

    fn name(&self) -> &'static str {
        if self.sird.is_some() {
            "sird"
        } else {
            "homa"
        }
    }

    fn queue_discipline(&self) -> QueueDiscipline {
        QueueDiscipline::StrictPriority
    }

    fn default_buffer_bytes(&self, _env: &HostEnv) -> Option<u64> {
        None
    }

    fn message_overhead_bytes(&self, size: u64, env: &HostEnv) -> u64 {
        // The empty response that completes the RPC. (The ack that lets the
        // server forget it nearly always rides on a later request.)
        let p = &env.packetization;
        let empty = p.frame_bytes(PacketType::Data.header_len() as u32) as u64;
        // SIRD announces a message above UnschT with an empty DATA packet
        // (its CREDITREQ).
        let creditreq = match &self.sird {
            Some(s) if size > s.unsched_threshold_for(&self.config, env) => empty,
            _ => 0,
        };
        empty + creditreq
    }

    fn build_host(&self, id: HostId, env: &HostEnv) -> Result<HomaHost, TransportError> {
        let config = self.host_config(env);
        let protocol = self.name();
        let seed = env.seed ^ (id as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut ep = Endpoint::new(config, addr(id), seed).map_err(|e| TransportError::Config {
            protocol,
            reason: e.0,
        })?;
        if self.config.cutoffs == CutoffSource::Workload {
            ep.prime_size_sample(&env.size_sample);
        }
        // Hosts' clocks are not synchronised: give each core a random clock
        // offset within one timer tick, or every host's periodic work (ack
        // flushes, resend checks) would fire in the same instant.
        let tick = self.host_config(env).tick_ns.max(1);
        let clock_offset = seed.wrapping_mul(0xD605_BBB5_8C8A_BEC5) % tick;
        Ok(HomaHost {
            ep,
            id,
            clock_offset,
            packetization: env.packetization,
            zeros: self
                .zeros
                .get_or_init(|| {
                    Bytes::from(vec![0u8; env.max_message.min(u32::MAX as u64) as usize])
                })
                .clone(),
            delivered: VecDeque::new(),
            rpcs_failed: 0,
            ce_received: 0,
        })
    }
}

/// The socket address of a simulated host.
pub fn addr(h: HostId) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::from(BASE_ADDR + h + 1)), PORT)
}

/// The host behind an address, if it is one of ours.
pub fn host_of(ip: IpAddr) -> Option<HostId> {
    match ip {
        IpAddr::V4(v4) => u32::from(v4).checked_sub(BASE_ADDR + 1),
        IpAddr::V6(_) => None,
    }
}

/// One host's Homa endpoint.
pub struct HomaHost {
    ep: Endpoint,
    id: HostId,
    /// Added to simulated time to get this host's clock (ns).
    clock_offset: u64,
    packetization: crate::topology::Packetization,
    /// Message contents: every message is a slice of this (no copies).
    zeros: Bytes,
    delivered: VecDeque<Delivered>,
    rpcs_failed: u64,
    /// Packets handed to the core with ECN CE set.
    ce_received: u64,
}

impl HomaHost {
    /// This host's clock (ns) at simulated time `now`.
    fn clock(&self, now: Time) -> u64 {
        now / PS_PER_NS + self.clock_offset
    }

    /// The endpoint, for inspection.
    pub fn endpoint(&self) -> &Endpoint {
        &self.ep
    }

    fn drain_events(&mut self, now_ns: u64) {
        while let Some(ev) = self.ep.poll_event() {
            match ev {
                Event::Request { rpc, .. } => {
                    // One-way message: acknowledge with an empty response.
                    let _ = self.ep.reply(now_ns, rpc, Bytes::new());
                    if let Some(src) = host_of(rpc.peer.ip()) {
                        self.delivered.push_back(Delivered {
                            src,
                            key: rpc.id ^ 1,
                        });
                    }
                }
                Event::Response { .. } => {}
                Event::Failed { .. } => self.rpcs_failed += 1,
            }
        }
    }
}

impl Transport for HomaHost {
    type Body = Transmit;

    fn start_message(&mut self, now: Time, dst: HostId, size: u64) -> Result<u64, TransportError> {
        if size > self.zeros.len() as u64 {
            return Err(TransportError::Message {
                size,
                reason: format!(
                    "larger than the run's maximum of {} bytes",
                    self.zeros.len()
                ),
            });
        }
        let msg = self.zeros.slice(..size as usize);
        self.ep
            .send_request(self.clock(now), addr(dst), msg)
            .map(|rpc| rpc.id)
            .map_err(|e| TransportError::Message {
                size,
                reason: e.to_string(),
            })
    }

    fn receive(&mut self, now: Time, packet: SimPacket<Transmit>) {
        let t = packet.body;
        let now_ns = self.clock(now);
        // The payload stays a slice of the shared message buffer: simulated
        // messages cost no memory per byte.
        let meta = homa_core::PacketMeta {
            ce: packet.meta.ecn,
            backlogged: false,
        };
        self.ce_received += meta.ce as u64;
        self.ep.handle_packet_parts_meta(
            now_ns,
            addr(packet.meta.src).ip(),
            &t.header,
            t.payload,
            meta,
        );
        // Ended RPCs are freed right after each event, so the core's state
        // between events is what it would be if it freed them at once; and
        // the bookkeeping left for after the send is done (`settle`).
        self.ep.reap(usize::MAX);
        self.ep.settle();
        self.drain_events(now_ns);
    }

    fn poll_transmit(&mut self, now: Time) -> Option<SimPacket<Transmit>> {
        let t = self.ep.poll_transmit(self.clock(now));
        // (The packet is "sent": what the core left for after it is done.)
        self.ep.settle();
        let t = t?;
        let dst = host_of(t.dst.ip())?;
        // (Read from the bytes: the core built them, a full parse is waste.)
        let (flow, retransmit) =
            homa_wire::CommonHeader::peek_id_and_retransmit(&t.header).unwrap_or((0, false));
        let payload_bytes = if t.packet_type == PacketType::Data {
            t.payload.len() as u32
        } else {
            0
        };
        let meta = PacketMeta {
            src: self.id,
            dst,
            priority: t.priority,
            rank: 0,
            wire_bytes: self.packetization.frame_bytes(t.len() as u32),
            payload_bytes,
            retransmit,
            flow: flow ^ ((self.id as u64) << 48),
            ecn: false,
        };
        Some(SimPacket { meta, body: t })
    }

    fn next_timeout(&self) -> Option<Time> {
        self.ep.poll_timeout().map(|t| {
            t.saturating_sub(self.clock_offset)
                .saturating_mul(PS_PER_NS)
        })
    }

    fn on_timeout(&mut self, now: Time) {
        let now_ns = self.clock(now);
        self.ep.handle_timeout(now_ns);
        self.ep.reap(usize::MAX);
        self.ep.settle();
        self.drain_events(now_ns);
    }

    fn poll_delivered(&mut self) -> Option<Delivered> {
        self.delivered.pop_front()
    }

    fn duplicate_payload_bytes(&self) -> u64 {
        self.ep.metrics().duplicate_data_bytes
    }

    fn has_grantable_incoming(&self) -> bool {
        self.ep.has_grantable_incoming()
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let m = self.ep.metrics();
        vec![
            ("data_packets_sent", m.sent.packets_of(PacketType::Data)),
            ("data_bytes_sent", m.data_bytes_sent),
            ("data_bytes_retransmitted", m.data_bytes_retransmitted),
            ("grants_sent", m.sent.packets_of(PacketType::Grant)),
            ("grants_srpt", m.grants_srpt),
            ("grants_fifo", m.grants_fifo),
            ("pacer_fifo_packets", m.sender_out_of_order_packets),
            ("resends_sent", m.sent.packets_of(PacketType::Resend)),
            ("busy_sent", m.sent.packets_of(PacketType::Busy)),
            ("cutoffs_sent", m.cutoffs_sent),
            ("cutoff_updates", m.cutoff_updates),
            ("acks_sent", m.acks_sent),
            ("ack_packets_sent", m.sent.packets_of(PacketType::Ack)),
            ("need_acks_sent", m.sent.packets_of(PacketType::NeedAck)),
            ("timeouts", m.timeouts),
            ("incast_requests", m.incast_requests),
            ("rpcs_failed", self.rpcs_failed),
            ("malformed_dropped", m.malformed_dropped),
            ("unknown_rpc_packets", m.unknown_rpc_packets),
            ("rx_buffer_drops", m.rx_buffer_drops),
            ("data_beyond_grant", m.data_beyond_grant),
            ("resends_duplicate", m.resends_duplicate),
            ("timeouts_postponed_busy", m.timeouts_postponed_busy),
            ("ce_marked_received", self.ce_received),
            ("rtt_probes_sent", m.rtt_probes_sent),
            ("rtt_probes_answered", m.rtt_probes_answered),
            ("rtt_responses", m.rtt_responses),
            ("rtt_invalid", m.rtt_invalid),
            ("bytedance_window_changes", m.bytedance_window_changes),
        ]
    }
}
