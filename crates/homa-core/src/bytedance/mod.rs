//! ByteDance mode (seed 004, "Leveraging Homa"; notes in
//! ../shared/reference/bytedance.md): Homa with per-peer RTT detection and
//! per-peer windows. Switched on per endpoint by
//! [`crate::ByteDanceConfig::enabled`]; docs/protocol-notes.md ("ByteDance
//! mode") records how each gap of the paper was resolved.
//!
//! - [`rtt`]: the per-peer RTT estimator and the `rtt_low` / `rtt_mid` /
//!   `rtt_high` thresholds;
//! - [`window`]: the unscheduled window (with the grant-gap filler), the
//!   scheduled window, GRO rounding;
//! - [`probe`]: when an RTT_PROBE goes, and matching RTT_RESPS answers;
//! - [`ratio`]: the receiver's unscheduled-ratio meter, which drives the
//!   priority split ([`crate::priority::unsched_levels_from_ratio`]);
//! - [`pause`]: the optional pause of grants to a congested peer.
//!
//! The endpoint keeps one [`PeerState`] in each [`crate::peer::Peer`].

pub mod pause;
pub mod probe;
pub mod ratio;
pub mod rtt;
pub mod window;

use crate::config::ByteDanceConfig;
use crate::Nanos;
use probe::ProbeState;
use rtt::{wire_time_ns, RttEstimator, Thresholds};
use window::UnschedInputs;

/// What ByteDance mode knows about one peer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PeerState {
    /// Probe scheduling, the outstanding probe, capability.
    pub probe: ProbeState,
    /// RTT samples of our probes to this peer.
    pub rtt: RttEstimator,
    /// The peer's link rate (Mbit/s) as it last told us; 0 = unknown.
    pub link_mbps: u32,
    /// The peer's unscheduled ratio as a receiver (‰), as it last told us.
    pub unsched_ratio: Option<u16>,
    /// The unscheduled window last computed for this peer (bytes; 0 =
    /// none yet), to count changes.
    pub last_unsched_window: u32,
    /// Deadline (ns) of this peer's pause timer, filed while its grants
    /// are paused and one of its messages is held (`no_grants_above_high`).
    pub pause_timer: Option<Nanos>,
}

/// Bytes of one GSO batch under `c`: `gso_bytes`, or one packet of
/// `payload` bytes.
pub fn gso_bytes(c: &ByteDanceConfig, payload: u32) -> u32 {
    if c.gso_bytes == 0 {
        payload.max(1)
    } else {
        c.gso_bytes
    }
}

/// Bytes of one GRO batch under `c`, in whole packets of `payload` bytes
/// (at least one).
pub fn gro_bytes(c: &ByteDanceConfig, payload: u32) -> u32 {
    window::round_up(c.gro_bytes.max(1), payload.max(1))
}

/// The bandwidth-delay product (bytes) of a path whose round trip is
/// `rtt_ns` and whose bottleneck runs at `mbps` Mbit/s: the one definition
/// the simulator's and the testbed's reports use for both the detected and
/// the true BDP (fractional, for averaging; [`rtt::bytes_in`] is the
/// integer form the windows use).
pub fn bdp_bytes(rtt_ns: f64, mbps: f64) -> f64 {
    rtt_ns * mbps / 8_000.0
}

impl PeerState {
    /// The BDP the mode has detected for this peer: `rtt_min` × the path's
    /// rate ([`PeerState::path_mbps`]), in bytes; `None` before the first
    /// RTT sample or while no rate is known. The windows derive from the
    /// same two values (`rtt_mid` ≈ 4 × (`rtt_min` + GSO delay)).
    pub fn detected_bdp(&self, local_mbps: u64) -> Option<f64> {
        let mbps = self.path_mbps(local_mbps);
        if !self.rtt.has_sample() || mbps == 0 {
            return None;
        }
        Some(bdp_bytes(self.rtt.min_ns as f64, mbps as f64))
    }

    /// The path's rate (Mbit/s): the slower of our link (`local_mbps`, 0 =
    /// unknown) and the peer's; 0 if neither is known.
    pub fn path_mbps(&self, local_mbps: u64) -> u64 {
        match (local_mbps, self.link_mbps as u64) {
            (0, p) => p,
            (l, 0) => l,
            (l, p) => l.min(p),
        }
    }

    /// The thresholds for this peer, once it has an RTT sample and a rate
    /// is known.
    pub fn thresholds(
        &self,
        c: &ByteDanceConfig,
        local_mbps: u64,
        payload: u32,
    ) -> Option<Thresholds> {
        let mbps = self.path_mbps(local_mbps);
        if !self.rtt.has_sample() || mbps == 0 {
            return None;
        }
        let gso_delay = wire_time_ns(gso_bytes(c, payload) as u64, mbps);
        Some(Thresholds::new(self.rtt.min_ns, gso_delay))
    }

    /// The unscheduled window (bytes, before rounding to packets) for a new
    /// message to this capable peer, or `None` while nothing is measured
    /// (Homa's `unsched_bytes` applies).
    pub fn unscheduled_window(
        &self,
        c: &ByteDanceConfig,
        local_mbps: u64,
        payload: u32,
        sender_idle: bool,
    ) -> Option<u32> {
        let thresholds = self.thresholds(c, local_mbps, payload)?;
        Some(window::unscheduled_window(&UnschedInputs {
            thresholds,
            recent_ns: self.rtt.recent_ns,
            path_mbps: self.path_mbps(local_mbps),
            sender_idle,
            peer_ratio: self.unsched_ratio,
            low_ratio: c.low_ratio,
            min_bytes: gso_bytes(c, payload),
            max_bytes: c.max_unsched_bytes,
        }))
    }

    /// Until when (ns) grants to this peer are paused at `now` under
    /// `no_grants_above_high` (see [`pause::paused_until`]; `stale_ns`: the
    /// bound on a sample's age), or `None`.
    pub fn paused_until(
        &self,
        c: &ByteDanceConfig,
        local_mbps: u64,
        payload: u32,
        now: Nanos,
        stale_ns: Nanos,
    ) -> Option<Nanos> {
        if !c.no_grants_above_high {
            return None;
        }
        let t = self.thresholds(c, local_mbps, payload)?;
        pause::paused_until(&self.rtt, &t, stale_ns, now)
    }

    /// The grant window (bytes) for this peer's messages at `now`, or
    /// `None` while nothing is measured (Homa's `grant_window` applies):
    /// `rtt_mid` at our own link's rate in GRO units, or 0 while grants
    /// are paused ([`PeerState::paused_until`]).
    pub fn grant_window(
        &self,
        c: &ByteDanceConfig,
        local_mbps: u64,
        payload: u32,
        now: Nanos,
        stale_ns: Nanos,
    ) -> Option<u32> {
        let window = self.band_grant_window(c, local_mbps, payload)?;
        if self
            .paused_until(c, local_mbps, payload, now, stale_ns)
            .is_some()
        {
            return Some(0);
        }
        Some(window)
    }

    /// The grant window (bytes) this peer's RTT band gives, whether or
    /// not grants to it are paused now (for reports taken after a run,
    /// when a pause says nothing about it): `rtt_mid` at our own link's
    /// rate in GRO units, capped; `None` while nothing is measured.
    pub fn band_grant_window(
        &self,
        c: &ByteDanceConfig,
        local_mbps: u64,
        payload: u32,
    ) -> Option<u32> {
        if local_mbps == 0 {
            return None;
        }
        let t = self.thresholds(c, local_mbps, payload)?;
        Some(window::scheduled_window(
            &t,
            local_mbps,
            gro_bytes(c, payload),
            c.max_grant_window,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Config;

    const W: Nanos = 10_000_000_000;
    const NOW: Nanos = 2_000;
    const STALE: Nanos = 4_000_000;

    fn config() -> ByteDanceConfig {
        let mut c = Config::default().bytedance;
        c.enabled = true;
        c
    }

    #[test]
    fn nothing_before_a_sample() {
        let p = PeerState::default();
        let c = config();
        assert_eq!(p.unscheduled_window(&c, 10_000, 1_416, true), None);
        assert_eq!(p.grant_window(&c, 10_000, 1_416, NOW, STALE), None);
    }

    #[test]
    fn windows_from_the_measured_path() {
        let c = config();
        let mut p = PeerState::default();
        p.rtt.sample(0, 10_000, c.rtt_ewma_weight, W);
        p.link_mbps = 25_000;
        // Path 10 Gbit/s (our link is slower); GSO one packet: 1,133 ns.
        assert_eq!(p.path_mbps(10_000), 10_000);
        let t = p.thresholds(&c, 10_000, 1_416).unwrap();
        assert_eq!(t.gso_delay_ns, 1_132);
        // rtt_mid = 4 × 11,132 ns = 44,528 ns → 55,660 B.
        assert_eq!(p.unscheduled_window(&c, 10_000, 1_416, false), Some(55_660));
        // Grant window: rtt_mid at our 10 Gbit/s, whole packets (GRO 0 =
        // one packet): 55,660 → 40 packets.
        assert_eq!(p.grant_window(&c, 10_000, 1_416, NOW, STALE), Some(56_640));
        // Congested: the minimum (one GSO batch = one packet); grants go
        // on unless the option is set.
        p.rtt.sample(1_000, 1_000_000, 1000, W);
        assert_eq!(p.unscheduled_window(&c, 10_000, 1_416, false), Some(1_416));
        assert_eq!(p.grant_window(&c, 10_000, 1_416, NOW, STALE), Some(56_640));
        let mut c2 = c.clone();
        c2.no_grants_above_high = true;
        assert_eq!(p.grant_window(&c2, 10_000, 1_416, NOW, STALE), Some(0));
        // The band's own window is what a report shows, paused or not.
        assert_eq!(p.band_grant_window(&c2, 10_000, 1_416), Some(56_640));
        assert_eq!(p.band_grant_window(&c2, 0, 1_416), None);
        assert_eq!(
            p.paused_until(&c2, 10_000, 1_416, NOW, STALE),
            Some(1_000 + STALE)
        );
        // The latest sample grows stale: the grant window is back.
        let later = 1_000 + STALE;
        assert_eq!(
            p.grant_window(&c2, 10_000, 1_416, later, STALE),
            Some(56_640)
        );
        // No rate known at all: nothing.
        let mut q = PeerState::default();
        q.rtt.sample(0, 10_000, 500, W);
        assert_eq!(q.unscheduled_window(&c, 0, 1_416, false), None);
        q.link_mbps = 10_000;
        assert!(q.unscheduled_window(&c, 0, 1_416, false).is_some());
        assert_eq!(
            q.grant_window(&c, 0, 1_416, NOW, STALE),
            None,
            "our own link is unknown"
        );
    }

    #[test]
    fn detected_bdp_is_rtt_min_times_the_path_rate() {
        // 100 µs at 400 Mbit/s: 5,000 B.
        assert_eq!(bdp_bytes(100_000.0, 400.0), 5_000.0);
        let c = config();
        let mut p = PeerState::default();
        assert_eq!(p.detected_bdp(400), None, "no sample yet");
        p.rtt.sample(0, 100_000, c.rtt_ewma_weight, W);
        p.rtt.sample(1_000, 300_000, c.rtt_ewma_weight, W);
        assert_eq!(p.detected_bdp(0), None, "no rate known");
        // The slower of our 400 and the peer's 100 Mbit/s; rtt_min, not
        // the smoothed RTT.
        p.link_mbps = 100;
        assert_eq!(p.detected_bdp(400), Some(1_250.0));
        assert_eq!(p.detected_bdp(0), Some(1_250.0));
    }

    #[test]
    fn batch_sizes() {
        let mut c = config();
        assert_eq!(gso_bytes(&c, 1_416), 1_416);
        assert_eq!(gro_bytes(&c, 1_416), 1_416);
        c.gso_bytes = 65_536;
        c.gro_bytes = 65_536;
        assert_eq!(gso_bytes(&c, 1_416), 65_536);
        assert_eq!(gro_bytes(&c, 1_416), 47 * 1_416);
    }
}
