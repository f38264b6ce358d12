//! Unloaded round trips: one RPC outstanding at a time, a fixed number per
//! size, peers in turn.

use super::load::{Pending, Tally};
use super::plan::Plan;
use super::{nanos, UnloadedPoint};
use std::time::{Duration, Instant};

/// Longest pause between two probes.
const PROBE_GAP_MAX: Duration = Duration::from_millis(20);

/// A client that performs one RPC at a time.
pub(super) trait Prober {
    /// How many peers there are.
    fn peers(&self) -> usize;
    /// Sends a `size`-byte request to peer number `peer` and waits for the
    /// response: its length and the round trip, timed from just before the
    /// request went to the transport.
    fn rpc(&mut self, peer: usize, size: u64) -> Result<(u64, Duration), String>;
}

/// What the probes measured.
pub(super) struct Probed {
    pub points: Vec<UnloadedPoint>,
    pub tally: Tally,
    pub issued: u64,
    pub elapsed: Duration,
}

/// Probes every size `plan.unloaded_count` times.
pub(super) fn probe(client: &mut dyn Prober, plan: &Plan, sizes: &[u64]) -> Probed {
    let peers = client.peers().max(1);
    // One untimed RPC per peer first: connections, peer state and caches
    // are set up before the measurements.
    let smallest = sizes.first().copied().unwrap_or(0);
    for peer in 0..peers {
        if let Err(e) = client.rpc(peer, smallest) {
            tracing::warn!("unloaded warm-up RPC failed: {e}");
        }
    }
    let t0 = Instant::now();
    let mut tally = Tally::default();
    let mut points = Vec::with_capacity(sizes.len());
    let mut issued = 0;
    let mut turn = 0usize;
    for &size in sizes {
        let mut rtts = Vec::new();
        for _ in 0..plan.unloaded_count {
            let peer = turn % peers;
            turn = turn.wrapping_add(1);
            issued += 1;
            let p = Pending {
                size,
                want: plan.response.expected(size),
                start: Instant::now(),
                in_window: true,
            };
            match client.rpc(peer, size) {
                Ok((len, rtt)) => {
                    let before = tally.completed;
                    tally.finish(&p, len, rtt, plan.timeout);
                    if tally.completed > before {
                        rtts.push(nanos(rtt));
                    }
                    // Let the links go idle again: back-to-back probes keep a
                    // slow (shaped) link busy, and each would then measure
                    // the queue the previous one left.
                    std::thread::sleep((2 * rtt).min(PROBE_GAP_MAX));
                }
                Err(e) => {
                    tracing::warn!("unloaded RPC of {size} B failed: {e}");
                    tally.fail(&p);
                }
            }
        }
        if rtts.is_empty() {
            tracing::warn!("unloaded: no RPC of {size} B completed; size left out");
            continue;
        }
        rtts.sort_unstable();
        points.push(UnloadedPoint {
            size,
            count: rtts.len() as u64,
            min_ns: rtts[0],
            p50_ns: rtts[(rtts.len() - 1) / 2],
        });
    }
    Probed {
        points,
        tally,
        issued,
        elapsed: t0.elapsed(),
    }
}
