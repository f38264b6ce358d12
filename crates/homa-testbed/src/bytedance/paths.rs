//! Detected against true per-peer BDP (issue 14, heterogeneous peers): what
//! each endpoint in ByteDance mode detected about its peers (the nodes'
//! `bytedance_peers`), per ordered pair of hosts, beside the path's true
//! round trip and rate.
//!
//! - **True RTT** of a pair (client host `h`, host 0): the unloaded stock
//!   Homa round trip of a [`PING_BYTES`]-byte RPC between them (the
//!   smallest of [`PING_COUNT`], measured before the loaded runs: software,
//!   kernel and a small frame each way), plus the extra time a full frame
//!   instead of the ping's takes on the way out: on the sender's NIC link
//!   and on the switch port towards the receiver (store and forward). That
//!   is RTTbytes' definition (a full packet out, a small one back), as in
//!   the simulator (`homa-sim reproduce bytedance`).
//! - **True rate**: the slower of the two hosts' configured links.
//! - **BDP** = RTT × rate, detected and true alike
//!   ([`homa_core::bytedance::bdp_bytes`]); the detected one is `rtt_min` ×
//!   the path rate the mode uses (`PeerState::detected_bdp`).

use homa_core::bytedance::bdp_bytes;
use homa_perf::cluster::PeerRecord;
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, SocketAddr};

/// Payload of the ping RPCs, request and response (bytes).
pub const PING_BYTES: u64 = 100;

/// Ping RPCs per client host (one at a time; the smallest counts).
pub const PING_COUNT: u64 = 20;

/// An unloaded round trip between a client host and host 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ping {
    /// The client host.
    pub host: usize,
    /// Payload each way (bytes).
    pub bytes: u64,
    /// Smallest round trip of the RPCs (ns).
    pub min_ns: u64,
}

/// The detected and the true path from one host to another, over the
/// endpoints of `from` that keep state for endpoints of `to`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerPath {
    /// The host whose endpoints detected.
    pub from: usize,
    /// The host of the peers.
    pub to: usize,
    /// Endpoint-peer records of the pair.
    pub records: u64,
    /// Of those, the ones with an RTT sample and a rate (the means below).
    pub sampled: u64,
    /// Unloaded ping round trip between the two hosts (ns), if measured.
    pub ping_ns: Option<u64>,
    /// True round trip (ns; see the module), if a ping was measured.
    pub true_rtt_ns: Option<f64>,
    /// The slower configured link of the two (Mbit/s).
    pub true_mbps: u64,
    /// True BDP (bytes), if a ping was measured.
    pub true_bdp: Option<f64>,
    /// Mean detected `rtt_min` (ns).
    pub rtt_min_ns: f64,
    /// Mean smoothed RTT at the end (ns).
    pub rtt_recent_ns: f64,
    /// Mean path rate the mode used (Mbit/s).
    pub detected_mbps: f64,
    /// Mean detected BDP (bytes).
    pub detected_bdp: f64,
    /// Smallest and largest detected BDP of the pair's records (bytes).
    pub detected_bdp_range: (f64, f64),
}

impl PeerPath {
    /// Detected BDP ÷ true BDP − 1, if both are known.
    pub fn bdp_error(&self) -> Option<f64> {
        match self.true_bdp {
            Some(t) if t > 0.0 && self.sampled > 0 => Some(self.detected_bdp / t - 1.0),
            _ => None,
        }
    }

    /// Detected `rtt_min` ÷ the ping's round trip − 1, if both are known.
    pub fn rtt_vs_ping(&self) -> Option<f64> {
        match self.ping_ns {
            Some(p) if p > 0 && self.sampled > 0 => Some(self.rtt_min_ns / p as f64 - 1.0),
            _ => None,
        }
    }
}

/// Nanoseconds `bytes` take on a link of `mbps` Mbit/s (0 for no rate).
fn wire_ns(bytes: u64, mbps: u64) -> f64 {
    if mbps == 0 {
        0.0
    } else {
        bytes as f64 * 8_000.0 / mbps as f64
    }
}

/// The true round trip (ns) from a host whose link runs at `from_mbps` to
/// one at `to_mbps`: the ping's `ping_ns`, plus a `full_frame` instead of
/// the ping's `ping_frame` on the sender's link and on the switch port
/// towards the receiver.
pub fn true_rtt_ns(
    ping_ns: u64,
    ping_frame: u64,
    full_frame: u64,
    from_mbps: u64,
    to_mbps: u64,
) -> f64 {
    let extra = full_frame.saturating_sub(ping_frame);
    ping_ns as f64 + wire_ns(extra, from_mbps) + wire_ns(extra, to_mbps)
}

/// The frames and rates [`aggregate`] needs.
#[derive(Debug, Clone)]
pub struct PathSetting<'a> {
    /// Host `i`'s address.
    pub ips: &'a [IpAddr],
    /// Host `i`'s link rate (Mbit/s).
    pub rates: &'a [u64],
    /// The unloaded round trips measured.
    pub pings: &'a [Ping],
    /// Wire bytes of a ping's frame.
    pub ping_frame: u64,
    /// Wire bytes of a full frame.
    pub full_frame: u64,
}

/// Groups `(host, record)` by ordered pair of hosts (`host` → the peer's
/// host); records of peers on no known host are left out. Pairs in order.
pub fn aggregate(records: &[(usize, PeerRecord)], s: &PathSetting<'_>) -> Vec<PeerPath> {
    let host_of = |peer: &str| -> Option<usize> {
        let ip = peer.parse::<SocketAddr>().ok()?.ip();
        s.ips.iter().position(|&x| x == ip)
    };
    let mut pairs: Vec<((usize, usize), Vec<&PeerRecord>)> = Vec::new();
    for (from, r) in records {
        let Some(to) = host_of(&r.peer) else {
            continue;
        };
        match pairs.iter_mut().find(|(k, _)| *k == (*from, to)) {
            Some((_, v)) => v.push(r),
            None => pairs.push(((*from, to), vec![r])),
        }
    }
    pairs.sort_by_key(|(k, _)| *k);
    pairs
        .into_iter()
        .map(|((from, to), rs)| path(from, to, &rs, s))
        .collect()
}

fn path(from: usize, to: usize, rs: &[&PeerRecord], s: &PathSetting<'_>) -> PeerPath {
    let rate = |h: usize| s.rates.get(h).copied().unwrap_or(0);
    let true_mbps = rate(from).min(rate(to));
    // The ping between the client host of the pair and host 0.
    let ping = s
        .pings
        .iter()
        .find(|p| (p.host, 0) == (from, to) || (p.host, 0) == (to, from))
        .map(|p| p.min_ns);
    let true_rtt = ping.map(|p| true_rtt_ns(p, s.ping_frame, s.full_frame, rate(from), rate(to)));
    let sampled: Vec<(&PeerRecord, f64)> = rs
        .iter()
        .filter_map(|r| Some((*r, r.detected_bdp?)))
        .filter(|(r, _)| r.samples > 0)
        .collect();
    let n = sampled.len();
    let mean = |f: &dyn Fn(&PeerRecord, f64) -> f64| {
        if n == 0 {
            0.0
        } else {
            sampled.iter().map(|&(r, b)| f(r, b)).sum::<f64>() / n as f64
        }
    };
    let bdps = sampled.iter().map(|&(_, b)| b);
    let range = if n == 0 {
        (0.0, 0.0)
    } else {
        (
            bdps.clone().fold(f64::INFINITY, f64::min),
            bdps.fold(0.0, f64::max),
        )
    };
    PeerPath {
        from,
        to,
        records: rs.len() as u64,
        sampled: n as u64,
        ping_ns: ping,
        true_rtt_ns: true_rtt,
        true_mbps,
        true_bdp: true_rtt.map(|t| bdp_bytes(t, true_mbps as f64)),
        rtt_min_ns: mean(&|r, _| r.rtt_min_ns as f64),
        rtt_recent_ns: mean(&|r, _| r.rtt_recent_ns as f64),
        detected_mbps: mean(&|r, _| r.path_mbps as f64),
        detected_bdp: mean(&|_, b| b),
        detected_bdp_range: range,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(peer: &str, rtt_min_ns: u64, path_mbps: u64) -> PeerRecord {
        PeerRecord {
            peer: peer.into(),
            samples: 10,
            rtt_min_ns,
            rtt_recent_ns: 2 * rtt_min_ns,
            peer_link_mbps: path_mbps,
            local_mbps: 400,
            path_mbps,
            detected_bdp: Some(bdp_bytes(rtt_min_ns as f64, path_mbps as f64)),
            unsched_window: None,
            grant_window: None,
        }
    }

    #[test]
    fn true_rtt_adds_a_full_frame_on_both_links() {
        // 9,014 − 214 = 8,800 B more: 176 µs at 400 Mbit/s, 704 µs at 100.
        let t = true_rtt_ns(100_000, 214, 9_014, 400, 100);
        assert!(
            (t - (100_000.0 + 176_000.0 + 704_000.0)).abs() < 1e-6,
            "{t}"
        );
        // A smaller full frame than the ping's adds nothing; no rate, no time.
        assert_eq!(true_rtt_ns(5, 300, 200, 400, 400), 5.0);
        assert_eq!(true_rtt_ns(5, 100, 200, 0, 0), 5.0);
    }

    #[test]
    fn pairs_average_their_records_against_the_true_path() {
        let ips: Vec<IpAddr> = ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        let rates = [400, 400, 100];
        let pings = [
            Ping {
                host: 1,
                bytes: 100,
                min_ns: 200_000,
            },
            Ping {
                host: 2,
                bytes: 100,
                min_ns: 300_000,
            },
        ];
        let s = PathSetting {
            ips: &ips,
            rates: &rates,
            pings: &pings,
            ping_frame: 214,
            full_frame: 9_014,
        };
        let mut no_sample = record("10.0.0.1:4000", 0, 0);
        no_sample.samples = 0;
        no_sample.detected_bdp = None;
        let records = vec![
            // Host 2's endpoints → the server: 100 Mbit/s path.
            (2, record("10.0.0.1:4000", 400_000, 100)),
            (2, record("10.0.0.1:4000", 600_000, 100)),
            (2, no_sample),
            // The server → host 1's endpoints.
            (0, record("10.0.0.2:4001", 100_000, 400)),
            // A peer on no host of the testbed: left out.
            (0, record("192.168.1.1:1", 1, 400)),
        ];
        let p = aggregate(&records, &s);
        assert_eq!(p.len(), 2, "{p:?}");
        let (a, b) = (&p[0], &p[1]);
        assert_eq!((a.from, a.to, a.records, a.sampled), (0, 1, 1, 1));
        assert_eq!((b.from, b.to, b.records, b.sampled), (2, 0, 3, 2));
        // 0 → 1: ping 200 µs + 8,800 B at 400 Mbit/s twice (352 µs) =
        // 552 µs; × 400 Mbit/s = 27,600 B. Detected 100 µs × 400 = 5,000 B.
        assert_eq!(a.true_mbps, 400);
        assert!((a.true_rtt_ns.unwrap() - 552_000.0).abs() < 1e-6);
        assert!((a.true_bdp.unwrap() - 27_600.0).abs() < 1e-6);
        assert!((a.detected_bdp - 5_000.0).abs() < 1e-6);
        assert!((a.bdp_error().unwrap() - (5_000.0 / 27_600.0 - 1.0)).abs() < 1e-12);
        assert!((a.rtt_vs_ping().unwrap() + 0.5).abs() < 1e-12);
        // 2 → 0: ping 300 µs + 8,800 B at 100 (704 µs) and at 400 Mbit/s
        // (176 µs) = 1,180 µs; × 100 Mbit/s = 14,750 B. Detected: the
        // mean of 5,000 and 7,500 B.
        assert_eq!(b.true_mbps, 100);
        assert!((b.true_rtt_ns.unwrap() - 1_180_000.0).abs() < 1e-6);
        assert!((b.true_bdp.unwrap() - 14_750.0).abs() < 1e-6);
        assert!((b.detected_bdp - 6_250.0).abs() < 1e-6);
        assert_eq!(b.detected_bdp_range, (5_000.0, 7_500.0));
        assert!((b.rtt_min_ns - 500_000.0).abs() < 1e-6);
        assert!((b.rtt_recent_ns - 1_000_000.0).abs() < 1e-6);
        assert!((b.detected_mbps - 100.0).abs() < 1e-6);
        assert!((b.bdp_error().unwrap() - (6_250.0 / 14_750.0 - 1.0)).abs() < 1e-12);
        // Without a ping there is no true value, and no error.
        let s2 = PathSetting { pings: &[], ..s };
        let p2 = aggregate(&records, &s2);
        assert_eq!(p2[1].true_bdp, None);
        assert_eq!(p2[1].bdp_error(), None);
    }
}
