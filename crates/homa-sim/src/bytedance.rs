//! ByteDance mode on simulated hosts: the scenario's switch and sizes for
//! the core's [`homa_core::ByteDanceConfig`] (docs/protocol-notes.md,
//! "ByteDance mode"). The mode is a core config: the simulator passes it
//! through unchanged, and the core's RTT_PROBE / RTT_RESPS packets travel
//! like any other control packet (the Homa adapter carries whatever bytes
//! the core emits, at the priority the core chose).
//!
//! The simulated NIC has no GSO or GRO: it takes one packet at a time, so
//! the GSO and GRO batches default to one packet (`0` in the core).

use serde::{Deserialize, Serialize};

/// ByteDance mode as a scenario sets it (`[homa.bytedance]`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ByteDanceSimConfig {
    /// The switch (default off: stock Homa).
    pub enabled: bool,
    /// Bytes of one GSO batch (`None` = one packet: the simulated NIC has
    /// no GSO).
    pub gso_bytes: Option<u32>,
    /// Bytes of one GRO batch (`None` = one packet).
    pub gro_bytes: Option<u32>,
    /// Least time between two probes to one peer (µs); `None` = the core's
    /// 1,000 µs.
    pub probe_interval_us: Option<f64>,
    /// Grant nothing while a peer's path is congested (the paper's future
    /// work; default off).
    pub no_grants_above_high: bool,
}

impl ByteDanceSimConfig {
    /// Sets `c.bytedance` from this (after RTTbytes is final: the caps
    /// follow from it, [`homa_core::Config::set_rtt_bytes`]).
    pub fn apply(&self, c: &mut homa_core::Config) {
        let b = &mut c.bytedance;
        b.enabled = self.enabled;
        b.gso_bytes = self.gso_bytes.unwrap_or(0);
        b.gro_bytes = self.gro_bytes.unwrap_or(0);
        if let Some(us) = self.probe_interval_us {
            b.probe_interval_ns = (us * 1_000.0).round().max(1.0) as u64;
        }
        b.no_grants_above_high = self.no_grants_above_high;
    }

    /// Checks values the core does not check itself.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(us) = self.probe_interval_us {
            if !(us.is_finite() && us > 0.0 && us <= 1e7) {
                return Err(format!(
                    "homa.bytedance.probe_interval_us must be in (0, 1e7], got {us}"
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_by_default_and_one_packet_batches() {
        let s = ByteDanceSimConfig::default();
        let mut c = homa_core::Config::default();
        s.apply(&mut c);
        assert!(!c.bytedance.enabled);
        let on = ByteDanceSimConfig {
            enabled: true,
            probe_interval_us: Some(250.0),
            ..Default::default()
        };
        on.apply(&mut c);
        assert!(c.bytedance.enabled);
        assert_eq!((c.bytedance.gso_bytes, c.bytedance.gro_bytes), (0, 0));
        assert_eq!(c.bytedance.probe_interval_ns, 250_000);
        assert!(c.validate().is_ok());
    }

    #[test]
    fn parses_from_toml_and_refuses_unknown_keys() {
        let s: ByteDanceSimConfig = toml::from_str("enabled = true\ngso_bytes = 2832\n").unwrap();
        assert!(s.enabled);
        assert_eq!(s.gso_bytes, Some(2832));
        assert!(toml::from_str::<ByteDanceSimConfig>("enable = true").is_err());
        let bad = ByteDanceSimConfig {
            probe_interval_us: Some(-1.0),
            ..Default::default()
        };
        assert!(bad.validate().is_err());
    }
}
