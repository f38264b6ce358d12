//! Measurement of a run: the measurement window (what the ports, the
//! switches and the hosts did between its opening and its closing) and the
//! report built from it.

use super::*;

pub(super) struct WindowSnapshot {
    ports: Vec<crate::port::PortStats>,
    wasted: Time,
    offered_wire: u64,
    delivered_wire: u64,
    offered_data: u64,
    completed_data: u64,
    tor: SwitchQueueStats,
    spine: SwitchQueueStats,
}

impl<P: Protocol + Clone> Simulation<P> {
    pub(super) fn open_window(&mut self, now: Time) {
        self.window_start = Some(now);
        for p in &mut self.ports {
            p.reset_stats(now);
        }
        for h in &mut self.hosts {
            h.wasted = 0;
            h.wasting_since = now;
        }
        self.switches.reset(now);
        self.background.at_open = self.background.total;
        self.offered_wire = 0;
        self.delivered_wire = 0;
        self.offered_data = 0;
        self.window_base = self.unique_received();
    }

    pub(super) fn close_window(&mut self, now: Time) {
        if self.window_start.is_none() {
            self.open_window(now);
        }
        self.window_end = Some(now);
        let wasted = self
            .hosts
            .iter()
            .map(|h| h.wasted + if h.wasting { now - h.wasting_since } else { 0 })
            .sum();
        let (tor, spine) = self.switches.stats(now);
        self.background.at_close = Some(self.background.total);
        self.window_snapshot = Some(WindowSnapshot {
            tor,
            spine,
            ports: self.ports.iter_mut().map(|p| p.stats(now)).collect(),
            wasted,
            offered_wire: self.offered_wire,
            delivered_wire: self.delivered_wire,
            offered_data: self.offered_data,
            completed_data: self.unique_received() - self.window_base,
        });
    }

    pub(super) fn report(mut self, wall_s: f64) -> RunReport {
        let now = self.events.now();
        let snap = self.window_snapshot.take().expect("window closed");
        let start = self.window_start.unwrap_or(0);
        let end = self.window_end.unwrap_or(now);
        let span = end.saturating_sub(start).max(1);
        let span_s = span as f64 * 1e-12;
        let capacity = self.topo.hosts as f64 * self.topo.host_bps as f64 / 8.0 * span_s;

        // Slowdowns of measured messages, ordered by size.
        let mut memo: FxHashMap<(u64, bool), Time> = FxHashMap::default();
        let mut pair_memo: FxHashMap<(u64, HostId, HostId), Time> = FxHashMap::default();
        let heterogeneous = self.topo.heterogeneous();
        let mut measured: Vec<(u64, u32, f64)> = Vec::new();
        let mut incomplete = 0;
        let (mut overlay, mut overlay_incomplete) = (0u64, 0u64);
        let mut background = 0u64;
        for (i, m) in self.messages.iter().enumerate() {
            if m.overlay {
                overlay += 1;
                overlay_incomplete += m.end.is_none() as u64;
                continue;
            }
            background += 1;
            let Some(e) = m.end else {
                incomplete += 1;
                continue;
            };
            if background <= self.warmup {
                continue;
            }
            let min = if heterogeneous {
                *pair_memo
                    .entry((m.size, m.src, m.dst))
                    .or_insert_with(|| self.topo.unloaded_latency_between(m.size, m.src, m.dst))
            } else {
                *memo
                    .entry((m.size, m.same_rack))
                    .or_insert_with(|| self.topo.unloaded_latency(m.size, m.same_rack))
            };
            measured.push((m.size, i as u32, (e - m.start) as f64 / min as f64));
        }
        measured.sort_by_key(|a| (a.0, a.1));
        let n = measured.len();
        let mut buckets = Vec::with_capacity(self.scenario.buckets);
        for (lo, hi) in homa_measure::buckets::equal_count_ranges(n, self.scenario.buckets) {
            let slice = &measured[lo..hi];
            buckets.push(Bucket {
                percentile_lo: lo as f64 / n as f64,
                percentile_hi: hi as f64 / n as f64,
                size_lo: slice[0].0,
                size_hi: slice[slice.len() - 1].0,
                slowdown: stats(slice.iter().map(|x| x.2)),
            });
        }
        let overall = stats(measured.iter().map(|x| x.2));
        let short_half = stats(measured[..n / 2].iter().map(|x| x.2));

        let mut queues: BTreeMap<String, QueueStats> = BTreeMap::new();
        for (port, st) in self.ports.iter().zip(&snap.ports) {
            let name = kind_name(port.kind);
            let q = queues.entry(name.to_string()).or_default();
            q.ports += 1;
            q.mean_bytes += st.mean_bytes;
            q.max_port_mean_bytes = q.max_port_mean_bytes.max(st.mean_bytes);
            q.peak_bytes = q.peak_bytes.max(st.peak_bytes);
            q.utilization += st.utilization;
            q.drops += st.drops;
            q.ecn_marks += st.ecn_marks;
        }
        for q in queues.values_mut() {
            q.mean_bytes /= q.ports.max(1) as f64;
            q.utilization /= q.ports.max(1) as f64;
        }
        let host_tx: u64 = self
            .ports
            .iter()
            .zip(&snap.ports)
            .filter(|(p, _)| p.kind == PortKind::HostNic)
            .map(|(_, s)| s.tx_bytes)
            .sum();
        let ports: Vec<PortReport> = self
            .ports
            .iter()
            .zip(&snap.ports)
            .enumerate()
            .map(|(i, (p, st))| PortReport {
                kind: kind_name(p.kind).to_string(),
                port: i as u32,
                mean_bytes: st.mean_bytes,
                peak_bytes: st.peak_bytes,
                utilization: st.utilization,
                drops: st.drops,
            })
            .collect();
        let mut counters: BTreeMap<String, u64> = BTreeMap::new();
        for h in &self.hosts {
            for (name, v) in h.transport.counters() {
                *counters.entry(name.to_string()).or_default() += v;
            }
        }
        counters.insert("messages_not_started".into(), self.failed_to_start);
        for (name, v) in self.background.counters(span_s) {
            counters.insert(name.into(), v);
        }
        if self.scenario.traffic.overlay.is_some() {
            counters.insert("overlay_messages".into(), overlay);
            counters.insert("overlay_incomplete".into(), overlay_incomplete);
        }
        let per_host_gbps = |bytes: u64| bytes as f64 * 8.0 / span_s / self.topo.hosts as f64 / 1e9;
        let events = self.events.processed();
        RunReport {
            protocol: self.protocol_name.to_string(),
            workload: self.dist.name().to_string(),
            load: self.scenario.traffic.load,
            seed: self.scenario.seed,
            label: self.scenario.label.clone(),
            messages_generated: self.generated(),
            messages_measured: n as u64,
            messages_incomplete: incomplete,
            messages_failed: counters.get("rpcs_failed").copied().unwrap_or(0)
                + self.failed_to_start,
            sim_time_s: now as f64 * 1e-12,
            window_s: span_s,
            offered_load: snap.offered_wire as f64 / capacity,
            delivered_load: snap.delivered_wire as f64 / capacity,
            delivered_ratio: snap.completed_data as f64 / snap.offered_data.max(1) as f64,
            late_delivered_ratio: {
                let (o, c) = self.mid.unwrap_or((0, 0));
                let late_received = (snap.completed_data + self.window_base).saturating_sub(c);
                late_received as f64 / (snap.offered_data - o).max(1) as f64
            },
            host_tx_load: host_tx as f64 / capacity,
            goodput_gbps: per_host_gbps(snap.completed_data),
            offered_gbps: per_host_gbps(snap.offered_data),
            wasted_bandwidth: snap.wasted as f64 / (span as f64 * self.topo.hosts as f64),
            overall,
            short_half,
            buckets,
            queues,
            switches: [
                ("tor".to_string(), snap.tor),
                ("spine".to_string(), snap.spine),
            ]
            .into_iter()
            .collect(),
            ports,
            counters,
            events,
            wall_time_s: wall_s,
            events_per_sec: events as f64 / wall_s.max(1e-9),
        }
    }
}

fn kind_name(k: PortKind) -> &'static str {
    match k {
        PortKind::HostNic => "host_nic",
        PortKind::TorDown => "tor_down",
        PortKind::TorUp => "tor_up",
        PortKind::SpineDown => "spine_down",
    }
}

/// Mean, median, 99th percentile and maximum (quantiles by
/// [`homa_measure::quantile::nearest_rank`], the project's one definition).
fn stats(values: impl Iterator<Item = f64>) -> SlowdownStats {
    use homa_measure::quantile::nearest_rank;
    let mut v: Vec<f64> = values.collect();
    if v.is_empty() {
        return SlowdownStats::default();
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let rank = |q: f64| nearest_rank(&v, q).expect("not empty");
    SlowdownStats {
        count: v.len() as u64,
        mean: v.iter().sum::<f64>() / v.len() as f64,
        p50: rank(0.5),
        p99: rank(0.99),
        max: v[v.len() - 1],
    }
}
