//! A run's full description, loadable from TOML. Every field has a default
//! (the thesis' setup), so a scenario file only lists what it changes.

use crate::homa::{HomaConfig, SirdSimConfig};
use crate::pfabric::PFabricConfig;
pub use crate::protocols::ProtocolChoice;
use crate::topology::TopologyConfig;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The shape of the offered traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pattern {
    /// Every host sends messages with Poisson arrivals to uniformly random
    /// other hosts, sizes from the workload.
    Poisson,
    /// `incast.senders` hosts each send one message to host 0 at the same
    /// instant, `incast.rounds` times.
    Incast,
}

/// Parameters of the incast pattern.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IncastConfig {
    /// Hosts sending to the receiver (host 0) in each round.
    pub senders: u32,
    /// Rounds.
    pub rounds: u32,
    /// Time between rounds (µs).
    pub interval_us: f64,
}

impl Default for IncastConfig {
    fn default() -> Self {
        IncastConfig {
            senders: 15,
            rounds: 100,
            interval_us: 200.0,
        }
    }
}

/// An incast overlay on top of Poisson background traffic (the SIRD
/// paper's Incast configuration, after HPCC and dcPIM): every
/// `interval_us`, `senders` distinct random hosts each send one
/// `message_bytes` message to one random receiver. Overlay messages count in
/// the offered load, the goodput and the queues, never in the slowdowns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OverlayConfig {
    /// Senders per round.
    pub senders: u32,
    /// Size of each overlay message (bytes).
    pub message_bytes: u64,
    /// Time between rounds (µs).
    pub interval_us: f64,
}

impl Default for OverlayConfig {
    fn default() -> Self {
        OverlayConfig {
            senders: 30,
            message_bytes: 500_000,
            interval_us: 100.0,
        }
    }
}

/// The offered traffic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Traffic {
    /// Arrival pattern.
    pub pattern: Pattern,
    /// Message sizes: "w1".."w5", "thesis-w3", "thesis-w5", "fixed:N", or
    /// a CSV path.
    pub workload: String,
    /// Offered load, as a fraction of host link bandwidth consumed by the
    /// data packets of the offered messages (headers and Ethernet framing
    /// included; control packets and retransmissions not).
    pub load: f64,
    /// Sizes above this are cut to it (bytes); `None` = no cap.
    pub max_message: Option<u64>,
    /// Incast parameters (pattern = incast).
    pub incast: IncastConfig,
    /// Incast overlay on Poisson traffic; `None` = none.
    pub overlay: Option<OverlayConfig>,
    /// Constant-rate background flows into chosen hosts' downlinks
    /// (`[[traffic.background]]`, [`crate::background`]); none by default.
    pub background: Vec<crate::background::BackgroundFlow>,
}

impl Default for Traffic {
    fn default() -> Self {
        Traffic {
            pattern: Pattern::Poisson,
            workload: "w3".into(),
            load: 0.5,
            max_message: None,
            incast: IncastConfig::default(),
            overlay: None,
            background: Vec::new(),
        }
    }
}

/// Switch port settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SwitchConfig {
    /// Buffer per egress port (bytes of waiting packets); `None` = the
    /// protocol's default (unlimited for Homa, 2×BDP for pFabric).
    pub buffer_bytes: Option<u64>,
    /// Mark packets that find more than this many bytes waiting.
    pub ecn_threshold_bytes: Option<u64>,
    /// Honour packet priorities (8 strict-priority queues); false = one
    /// FIFO per port.
    pub priorities: bool,
}

impl Default for SwitchConfig {
    fn default() -> Self {
        SwitchConfig {
            buffer_bytes: None,
            ecn_threshold_bytes: None,
            priorities: true,
        }
    }
}

/// Everything about one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Scenario {
    /// Transport.
    pub protocol: ProtocolChoice,
    /// Label of this variant in reports and plots.
    pub label: String,
    /// Seed; the run is a pure function of the scenario and the seed.
    pub seed: u64,
    /// Messages to generate (the run ends when they have all completed, or
    /// when the drain limit is reached).
    pub messages: u64,
    /// Fraction of the first messages excluded from the statistics.
    pub warmup_fraction: f64,
    /// After the last arrival, keep running at most this multiple of the
    /// arrival period (plus 10 ms) for stragglers.
    pub drain_factor: f64,
    /// Buckets of the slowdown spectrum.
    pub buckets: usize,
    /// Host NIC queue limit, in full-size packets: the transport is asked
    /// for a packet while the untransmitted bytes in the NIC, including the
    /// new packet, stay within this many full packets. The default, 2, is
    /// the model of the thesis' text (§3.6); its simulator used 1 (the next
    /// packet is handed over when the previous one has left, L647), and so
    /// does `reproduce thesis`.
    pub nic_queue_packets: f64,
    /// The network.
    pub topology: TopologyConfig,
    /// Switch ports.
    pub switch: SwitchConfig,
    /// Traffic.
    pub traffic: Traffic,
    /// Homa parameters.
    pub homa: HomaConfig,
    /// pFabric parameters.
    pub pfabric: PFabricConfig,
    /// SIRD parameters (protocol "sird"; it also uses `homa`'s shared
    /// ones: priority levels, grant window = BDP).
    pub sird: SirdSimConfig,
}

impl Default for Scenario {
    fn default() -> Self {
        Scenario {
            protocol: ProtocolChoice::Homa,
            label: String::new(),
            seed: 1,
            messages: 100_000,
            warmup_fraction: 0.1,
            drain_factor: 1.0,
            buckets: 20,
            nic_queue_packets: 2.0,
            topology: TopologyConfig::default(),
            switch: SwitchConfig::default(),
            traffic: Traffic::default(),
            homa: HomaConfig::default(),
            pfabric: PFabricConfig::default(),
            sird: SirdSimConfig::default(),
        }
    }
}

/// A scenario file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// Unreadable file.
    #[error("cannot read scenario {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// Bad TOML or unknown keys.
    #[error("invalid scenario {path}: {source}")]
    Toml {
        /// The file.
        path: String,
        /// Why.
        source: toml::de::Error,
    },
    /// A value out of range.
    #[error("invalid scenario: {0}")]
    Invalid(String),
}

impl Scenario {
    /// Parses TOML text (unknown keys are rejected).
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Scenario, ScenarioError> {
        let s: Scenario = toml::from_str(text).map_err(|source| ScenarioError::Toml {
            path: origin.to_string(),
            source,
        })?;
        s.validate()?;
        Ok(s)
    }

    /// Reads a TOML scenario file.
    pub fn from_file(path: &Path) -> Result<Scenario, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Scenario::from_toml_str(&text, &path.display().to_string())
    }

    /// Checks values that the components do not check themselves.
    pub fn validate(&self) -> Result<(), ScenarioError> {
        let bad = |s: String| Err(ScenarioError::Invalid(s));
        let l = self.traffic.load;
        if self.traffic.pattern == Pattern::Poisson && !(l.is_finite() && l > 0.0 && l <= 2.0) {
            return bad(format!("traffic.load must be in (0, 2], got {l}"));
        }
        if self.messages == 0 && self.traffic.pattern == Pattern::Poisson {
            return bad("messages must be at least 1".into());
        }
        if !(0.0..1.0).contains(&self.warmup_fraction) {
            return bad(format!(
                "warmup_fraction must be in [0, 1), got {}",
                self.warmup_fraction
            ));
        }
        if !(self.drain_factor.is_finite() && self.drain_factor >= 0.0) {
            return bad(format!(
                "drain_factor must be >= 0, got {}",
                self.drain_factor
            ));
        }
        if self.buckets == 0 || self.buckets > 1000 {
            return bad(format!("buckets must be 1..=1000, got {}", self.buckets));
        }
        if !(self.nic_queue_packets.is_finite() && self.nic_queue_packets >= 1.0) {
            return bad(format!(
                "nic_queue_packets must be at least 1, got {}",
                self.nic_queue_packets
            ));
        }
        let i = &self.traffic.incast;
        if self.traffic.pattern == Pattern::Incast && (i.senders == 0 || i.rounds == 0) {
            return bad("incast.senders and incast.rounds must be at least 1".into());
        }
        if let Some(o) = &self.traffic.overlay {
            if self.traffic.pattern != Pattern::Poisson {
                return bad("traffic.overlay needs pattern = poisson".into());
            }
            if o.senders == 0 || o.message_bytes == 0 {
                return bad("overlay.senders and overlay.message_bytes must be at least 1".into());
            }
            if !(o.interval_us.is_finite() && o.interval_us > 0.0) {
                return bad(format!(
                    "overlay.interval_us must be positive, got {}",
                    o.interval_us
                ));
            }
        }
        if !(1..=8).contains(&self.homa.num_priorities) {
            return bad(format!(
                "homa.num_priorities must be 1..=8, got {}",
                self.homa.num_priorities
            ));
        }
        self.homa
            .bytedance
            .validate()
            .map_err(ScenarioError::Invalid)?;
        if self.homa.bytedance.enabled && self.protocol != ProtocolChoice::Homa {
            return bad(format!(
                "homa.bytedance.enabled is a mode of protocol homa, not {}",
                self.protocol
            ));
        }
        for b in &self.traffic.background {
            b.validate().map_err(ScenarioError::Invalid)?;
        }
        Ok(())
    }
}
