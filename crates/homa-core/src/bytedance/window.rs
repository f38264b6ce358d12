//! Per-peer windows (seed 004 §4 and §6): the unscheduled window a sender
//! uses for a new message, and the scheduled (grant) window a receiver
//! keeps open for one message of a peer.

use super::rtt::{bytes_in, Band, Thresholds};
use crate::Nanos;

/// What a sender knows when it sizes the unscheduled part of a message.
#[derive(Debug, Clone, Copy)]
pub struct UnschedInputs {
    /// The path's thresholds (from the peer's `rtt_min`).
    pub thresholds: Thresholds,
    /// The peer's smoothed RTT (ns).
    pub recent_ns: Nanos,
    /// The path's rate (Mbit/s): the slower of our link and the peer's.
    pub path_mbps: u64,
    /// Our sender has no message waiting to send (the paper's "RPC
    /// throttle list is empty").
    pub sender_idle: bool,
    /// The receiver's unscheduled ratio (‰), if it told us.
    pub peer_ratio: Option<u16>,
    /// Below this ratio (‰) the gap filler halves its window.
    pub low_ratio: u32,
    /// The smallest window (bytes): one GSO batch.
    pub min_bytes: u32,
    /// The largest window (bytes): what receivers believe.
    pub max_bytes: u32,
}

/// The time (ns) worth of the path's rate a sender sends unscheduled, by
/// the paper's rule, or `None` for the minimum window:
///
/// - congested (`recent > rtt_high`): the minimum;
/// - rising (`rtt_mid < recent ≤ rtt_high`): `rtt_low − (recent − rtt_mid)
///   × 3/8`, falling linearly (the gap filler does not apply: a congestion
///   signal is never overridden);
/// - clear: `rtt_mid`, halved when the sender is idle and the receiver's
///   unscheduled ratio is below `low_ratio` (the grant-gap filler).
pub fn unscheduled_time(i: &UnschedInputs) -> Option<Nanos> {
    let t = &i.thresholds;
    match t.band(i.recent_ns) {
        Band::Congested => None,
        Band::Rising => {
            let cut = (i.recent_ns - t.mid_ns).saturating_mul(3) / 8;
            Some(t.low_ns.saturating_sub(cut))
        }
        Band::Clear => {
            let low_ratio = i.peer_ratio.is_some_and(|r| (r as u32) < i.low_ratio);
            if i.sender_idle && low_ratio {
                Some(t.mid_ns / 2)
            } else {
                Some(t.mid_ns)
            }
        }
    }
}

/// The unscheduled window (bytes) for a new message to the peer:
/// [`unscheduled_time`] at the path's rate, within `min_bytes..=max_bytes`
/// (`max_bytes` wins if they cross).
pub fn unscheduled_window(i: &UnschedInputs) -> u32 {
    let bytes = match unscheduled_time(i) {
        Some(t) => bytes_in(t, i.path_mbps),
        None => 0,
    };
    bytes
        .max(i.min_bytes as u64)
        .min(i.max_bytes as u64)
        .min(u32::MAX as u64) as u32
}

/// The scheduled window (bytes) a receiver keeps open for a peer's
/// message: `rtt_mid` at our own link's rate (the paper uses `rtt_mid`, not
/// the recent RTT: the reverse path's delay differs, and a constant window
/// keeps the granted rate steady), at most `max_bytes`, rounded up to whole
/// GRO batches of `gro_bytes` (at least one).
pub fn scheduled_window(t: &Thresholds, local_mbps: u64, gro_bytes: u32, max_bytes: u32) -> u32 {
    let bytes = bytes_in(t.mid_ns, local_mbps).min(max_bytes as u64) as u32;
    round_up(bytes.max(1), gro_bytes)
}

/// `v` rounded up to a multiple of `unit` (unchanged for unit 0).
pub fn round_up(v: u32, unit: u32) -> u32 {
    if unit == 0 {
        return v;
    }
    v.div_ceil(unit).saturating_mul(unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// rtt_min 10 µs, no GSO delay, 10 Gbit/s: rtt_low 20 µs (25 KB),
    /// rtt_mid 40 µs (50 KB), rtt_high 80 µs.
    fn inputs(recent_ns: Nanos) -> UnschedInputs {
        UnschedInputs {
            thresholds: Thresholds::new(10_000, 0),
            recent_ns,
            path_mbps: 10_000,
            sender_idle: false,
            peer_ratio: None,
            low_ratio: 400,
            min_bytes: 1_416,
            max_bytes: 1_000_000,
        }
    }

    #[test]
    fn clear_band_uses_rtt_mid() {
        for recent in [1, 10_000, 39_999, 40_000] {
            let i = inputs(recent);
            assert_eq!(unscheduled_time(&i), Some(40_000));
            assert_eq!(unscheduled_window(&i), 50_000);
        }
    }

    #[test]
    fn rising_band_cuts_linearly_from_rtt_low() {
        // Just above rtt_mid: rtt_low (the window halves at the edge, as
        // the paper's rule does).
        assert_eq!(unscheduled_time(&inputs(40_008)), Some(20_000 - 3));
        // Half-way (60 µs): 20 − 20 × 3/8 = 12.5 µs.
        assert_eq!(unscheduled_time(&inputs(60_000)), Some(12_500));
        assert_eq!(unscheduled_window(&inputs(60_000)), 15_625);
        // At rtt_high: 0.5 × rtt_min + 3.5 × gso_delay = 5 µs.
        assert_eq!(unscheduled_time(&inputs(80_000)), Some(5_000));
        // Monotone over the band.
        let mut last = u32::MAX;
        for recent in (40_001..=80_000).step_by(997) {
            let w = unscheduled_window(&inputs(recent));
            assert!(w <= last, "{recent}");
            last = w;
        }
    }

    #[test]
    fn congested_band_gets_the_minimum() {
        let i = inputs(80_001);
        assert_eq!(unscheduled_time(&i), None);
        assert_eq!(unscheduled_window(&i), 1_416);
        // Also a rising-band value below the minimum is raised to it.
        let mut i = inputs(80_000);
        i.min_bytes = 10_000;
        assert_eq!(unscheduled_window(&i), 10_000);
    }

    #[test]
    fn gap_filler_halves_only_for_an_idle_sender_and_a_low_ratio() {
        let mut i = inputs(20_000);
        i.peer_ratio = Some(399);
        assert_eq!(unscheduled_window(&i), 50_000, "busy sender");
        i.sender_idle = true;
        assert_eq!(unscheduled_window(&i), 25_000, "idle, ratio 39.9%");
        i.peer_ratio = Some(400);
        assert_eq!(unscheduled_window(&i), 50_000, "idle, ratio 40%");
        i.peer_ratio = None;
        assert_eq!(unscheduled_window(&i), 50_000, "ratio unknown");
        // Never in the congestion bands.
        let mut i = inputs(60_000);
        i.sender_idle = true;
        i.peer_ratio = Some(0);
        assert_eq!(unscheduled_window(&i), 15_625);
        i.recent_ns = 90_000;
        assert_eq!(unscheduled_window(&i), 1_416);
    }

    #[test]
    fn cap_wins() {
        let mut i = inputs(1);
        i.max_bytes = 30_000;
        assert_eq!(unscheduled_window(&i), 30_000);
        i.min_bytes = 40_000;
        assert_eq!(unscheduled_window(&i), 30_000);
    }

    #[test]
    fn scheduled_window_from_rtt_mid_and_local_link_in_gro_units() {
        let t = Thresholds::new(10_000, 0);
        // 40 µs at 10 Gbit/s = 50,000 B; GRO 8 × 1,416 = 11,328 → 5 batches.
        assert_eq!(scheduled_window(&t, 10_000, 11_328, 1_000_000), 56_640);
        // No GRO: exact; the cap applies before rounding.
        assert_eq!(scheduled_window(&t, 10_000, 0, 1_000_000), 50_000);
        assert_eq!(scheduled_window(&t, 10_000, 11_328, 20_000), 22_656);
        // The window follows our link, not the recent RTT.
        assert_eq!(scheduled_window(&t, 25_000, 0, 1_000_000), 125_000);
        assert_eq!(round_up(1, 1_416), 1_416);
        assert_eq!(round_up(0, 1_416), 0);
    }
}
