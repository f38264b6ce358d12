//! Open-loop traffic: message sizes drawn from measured workloads and
//! Poisson message arrivals.
//!
//! The size distributions themselves (parsing the `workloads/` tables,
//! sampling, means) live in [`homa_measure::cdf`], shared with the other
//! tools; this module adds the simulator's side: the wire cost of a message
//! under the simulator's packetization, the load rule and the arrival
//! process.

use crate::sim::SimError;
use crate::topology::Packetization;
use homa_measure::cdf::CdfError;
use rand::Rng;
use rand_distr::{Distribution, Exp};

pub use homa_measure::cdf::{SizeDist, WireBytes, BUILTIN};

/// Picoseconds per second.
const PS_PER_SEC: f64 = 1e12;

/// Why a workload or an arrival process could not be built.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// The size distribution could not be built (bad table, unknown name,
    /// unreadable file).
    #[error(transparent)]
    Cdf(#[from] CdfError),
    /// A Poisson arrival rate that is not a positive finite number.
    #[error("arrival rate must be a positive finite number of messages per second, got {rate}")]
    BadRate {
        /// The rejected rate (messages per second).
        rate: f64,
    },
}

impl From<CdfError> for SimError {
    fn from(e: CdfError) -> SimError {
        SimError::Workload(WorkloadError::Cdf(e))
    }
}

impl WireBytes for Packetization {
    fn message_wire_bytes(&self, size: u64) -> u64 {
        Packetization::message_wire_bytes(self, size)
    }
}

/// Messages per second per host that offer a given load.
///
/// The load is the fraction of the host link's bandwidth consumed by the
/// data packets of the offered messages, headers and Ethernet framing
/// (preamble, inter-packet gap) included, control packets (grants, acks,
/// resends, …) and retransmissions excluded. With `mean_wire_bytes` the
/// mean wire bytes of a message's data packets under minimal packetization
/// (as [`SizeDist::mean_wire_bytes`] computes), the rate is
/// `load × link_bps ÷ (8 × mean_wire_bytes)`.
///
/// For example a load of 0.5 on a 10 Gbit/s link with 1,000 wire bytes per
/// message is 625,000 messages per second.
pub fn rate_for_load(load: f64, link_bps: u64, mean_wire_bytes: f64) -> f64 {
    load * link_bps as f64 / (8.0 * mean_wire_bytes)
}

/// A Poisson arrival process: exponentially distributed gaps between
/// message arrivals, in simulator time (picoseconds).
#[derive(Debug, Clone)]
pub struct PoissonArrivals {
    rate_per_sec: f64,
    /// Gap distribution in picoseconds (λ = rate per picosecond).
    exp: Exp<f64>,
}

impl PoissonArrivals {
    /// A process with `rate_per_sec` arrivals per second on average; the
    /// rate must be positive and finite.
    pub fn new(rate_per_sec: f64) -> Result<Self, WorkloadError> {
        if !(rate_per_sec.is_finite() && rate_per_sec > 0.0) {
            return Err(WorkloadError::BadRate { rate: rate_per_sec });
        }
        let exp = Exp::new(rate_per_sec / PS_PER_SEC)
            .map_err(|_| WorkloadError::BadRate { rate: rate_per_sec })?;
        Ok(PoissonArrivals { rate_per_sec, exp })
    }

    /// The same as the free function [`rate_for_load`]: messages per second
    /// per host so that their data packets (headers and Ethernet framing
    /// included, control packets and retransmissions excluded) take `load`
    /// of the host link.
    pub fn rate_for_load(load: f64, link_bps: u64, mean_wire_bytes: f64) -> f64 {
        rate_for_load(load, link_bps, mean_wire_bytes)
    }

    /// The mean arrival rate (per second).
    pub fn rate_per_sec(&self) -> f64 {
        self.rate_per_sec
    }

    /// The mean gap between arrivals (picoseconds, not rounded).
    pub fn mean_gap_ps(&self) -> f64 {
        PS_PER_SEC / self.rate_per_sec
    }

    /// Draws the gap until the next arrival, in picoseconds, rounded to the
    /// nearest picosecond (so it may be 0 at extreme rates; very long gaps
    /// saturate at `u64::MAX`).
    #[inline]
    pub fn next_gap_ps<R: Rng + ?Sized>(&mut self, rng: &mut R) -> u64 {
        self.exp.sample(rng).round() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn mean_wire_bytes_is_exact() {
        let p = Packetization::default();
        let mp = p.max_payload() as u64;
        let d = SizeDist::from_csv_str("t", "size_bytes,cdf\n0,0.25\n100,0.5\n3000,1\n").unwrap();
        let want = 0.25 * p.message_wire_bytes(0) as f64
            + 0.25 * p.message_wire_bytes(100) as f64
            + 0.5 * p.message_wire_bytes(3000) as f64;
        assert!((d.mean_wire_bytes(&p) - want).abs() < 1e-9);
        // A message of exactly k full packets costs k full frames.
        let f = SizeDist::fixed(3 * mp);
        assert_eq!(f.mean_wire_bytes(&p), 3.0 * p.max_frame() as f64);
    }

    #[test]
    fn poisson_gap_mean() {
        let rate = 625_000.0;
        let mut a = PoissonArrivals::new(rate).unwrap();
        assert_eq!(a.rate_per_sec(), rate);
        assert_eq!(a.mean_gap_ps(), 1.6e6);
        let mut rng = ChaCha8Rng::seed_from_u64(42);
        const N: u64 = 100_000;
        let sum: u64 = (0..N).map(|_| a.next_gap_ps(&mut rng)).sum();
        let mean = sum as f64 / N as f64;
        let want = 1e12 / rate;
        assert!(
            (mean - want).abs() / want < 0.02,
            "mean gap {mean} ps vs {want} ps"
        );
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(matches!(
                PoissonArrivals::new(bad),
                Err(WorkloadError::BadRate { .. })
            ));
        }
    }

    #[test]
    fn rate_for_load_arithmetic() {
        // 50% of 10 Gbit/s is 625,000,000 bytes/s; 1,000 wire bytes each.
        assert_eq!(rate_for_load(0.5, 10_000_000_000, 1000.0), 625_000.0);
        assert_eq!(
            PoissonArrivals::rate_for_load(0.8, 25_000_000_000, 2500.0),
            1_000_000.0
        );
        // Fixed 1,000-byte messages with default packetization: one frame.
        let p = Packetization::default();
        let d = SizeDist::fixed(1000);
        let wire = d.mean_wire_bytes(&p);
        assert_eq!(wire, p.data_frame(1000) as f64);
        let r = rate_for_load(1.0, 10_000_000_000, wire);
        assert!((r * wire * 8.0 - 1e10).abs() < 1e-3);
    }
}
