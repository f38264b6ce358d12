//! What a node reports: [`NodeReport`] and, in unloaded mode, one
//! [`UnloadedPoint`] per probed size.

use super::PeerRecord;
use crate::error::PerfError;
use serde::{Deserialize, Serialize};

/// Round trips of one request size in unloaded mode.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct UnloadedPoint {
    /// Request size (bytes).
    pub size: u64,
    /// RPCs that completed (the others were errors).
    pub count: u64,
    /// Fastest round trip (ns).
    pub min_ns: u64,
    /// Median round trip (ns; the lower median for an even count).
    pub p50_ns: u64,
}

/// What one node measured.
///
/// Of the RPCs issued in the window, `issued = completed + errors +
/// unfinished`; `skipped` arrivals were not issued at all.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NodeReport {
    /// `"homa"` or `"tcp"`.
    pub protocol: String,
    /// `"loaded"`, `"unloaded"` or `"server"`.
    pub mode: String,
    /// Workload name, `"fixed:N"` for a fixed size, `"none"` for a server
    /// given neither.
    pub workload: String,
    /// This node's server address.
    pub me: String,
    /// The servers this node's client sent to (without `me`).
    pub peers: Vec<String>,
    /// Payload Gbit/s this host was asked to send (0 unless loaded).
    pub target_gbps: f64,
    /// Poisson arrival rate of this client (RPCs/s; 0 unless loaded).
    pub offered_rate_rps: f64,
    /// The measured window (s): the load window, the unloaded probing
    /// time, or the serving time.
    pub seconds: f64,
    /// RPCs issued in the window.
    pub issued: u64,
    /// Of those, RPCs answered correctly within the timeout.
    pub completed: u64,
    /// Of those, RPCs that failed, timed out or got a wrong-size response.
    pub errors: u64,
    /// Arrivals in the window not sent because `client_max` RPCs were
    /// outstanding: the target load could not be offered.
    pub skipped: u64,
    /// Of the issued RPCs, those still outstanding after the drain.
    pub unfinished: u64,
    /// Request payload bytes of the completed RPCs.
    pub request_bytes: u64,
    /// Response payload bytes of the completed RPCs.
    pub response_bytes: u64,
    /// Worst lateness of an arrival versus the Poisson schedule (µs).
    pub max_send_lag_us: f64,
    /// `(request_size, rtt_ns)` of every completed RPC of the window.
    pub rpcs: Vec<(u64, u64)>,
    /// RPCs issued in the window that never finished (timed out or still
    /// outstanding after the drain): `(request size, ns waited)`, a lower
    /// bound on their round trip. Leaving them out would flatter the tail.
    #[serde(default)]
    pub censored: Vec<(u64, u64)>,
    /// Unloaded mode: one point per probed size.
    pub unloaded: Vec<UnloadedPoint>,
    /// User CPU time of the whole process over the run (s).
    pub cpu_user_s: f64,
    /// System CPU time of the whole process over the run (s).
    pub cpu_sys_s: f64,
    /// Homa only: the client and server endpoints' `metrics()` and
    /// `runtime_stats()`.
    pub homa: Option<serde_json::Value>,
    /// Homa in ByteDance mode only: what the endpoint detected about each
    /// peer it keeps state for, at the end of the run (absent from reports
    /// written before it existed, and empty in stock Homa).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bytedance_peers: Vec<PeerRecord>,
}

impl NodeReport {
    /// Payload Gbit/s of the completed RPCs, both directions, over the
    /// window.
    pub fn achieved_gbps(&self) -> f64 {
        if self.seconds > 0.0 {
            (self.request_bytes + self.response_bytes) as f64 * 8.0 / self.seconds / 1e9
        } else {
            0.0
        }
    }

    /// The `q`-quantile (0..=1, nearest rank) of the recorded round trips
    /// (ns); `None` when nothing was recorded.
    pub fn rtt_quantile_ns(&self, q: f64) -> Option<u64> {
        let mut rtts: Vec<u64> = self.rpcs.iter().map(|&(_, ns)| ns).collect();
        rtts.sort_unstable();
        homa_measure::nearest_rank(&rtts, q.clamp(0.0, 1.0))
    }

    /// One line for humans: counts, achieved rate and round-trip percentiles.
    pub fn summary(&self) -> String {
        let us = |q: f64| {
            self.rtt_quantile_ns(q)
                .map_or("-".to_string(), |ns| format!("{:.1}", ns as f64 / 1e3))
        };
        let head = format!(
            "{} {} {} on {}",
            self.protocol, self.mode, self.workload, self.me
        );
        match self.mode.as_str() {
            "server" => format!("{head}: served for {:.1} s", self.seconds),
            "unloaded" => format!(
                "{head}: {} sizes probed, {} completed, {} errors, RTT p50 {} us p99 {} us \
                 over all sizes",
                self.unloaded.len(),
                self.completed,
                self.errors,
                us(0.5),
                us(0.99),
            ),
            _ => format!(
                "{head}: {} completed, {} errors, {} skipped, {} unfinished, \
                 {:.3} of {} Gbit/s, RTT p50 {} us p99 {} us",
                self.completed,
                self.errors,
                self.skipped,
                self.unfinished,
                self.achieved_gbps(),
                self.target_gbps,
                us(0.5),
                us(0.99),
            ),
        }
    }

    /// The report as one line of JSON.
    pub fn to_json_string(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// Writes the JSON to `out`, or prints it on stdout when there is none.
    pub fn write_json(&self, out: Option<&std::path::Path>) -> Result<(), PerfError> {
        let json = self.to_json_string();
        match out {
            Some(path) => std::fs::write(path, json + "\n")
                .map_err(|e| PerfError::io(format!("write the report to {}", path.display()), e)),
            None => {
                println!("{json}");
                Ok(())
            }
        }
    }
}
