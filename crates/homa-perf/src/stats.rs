//! Latency recording and the report a client run produces.
//!
//! Latencies are recorded in nanoseconds in HDR histograms with 3
//! significant digits (so finer than the microsecond resolution reported)
//! and printed in microseconds.

use hdrhistogram::Histogram;
use serde::Serialize;
use std::fmt::Write as _;
use std::time::Duration;

/// Largest latency recorded exactly (100 s); longer ones are clamped.
const MAX_LATENCY_NS: u64 = 100_000_000_000;

use homa_measure::buckets::{size_class_index, SIZE_CLASSES};

fn new_histogram() -> Histogram<u64> {
    // The bounds are constants that hdrhistogram accepts; this cannot fail.
    Histogram::new_with_bounds(1, MAX_LATENCY_NS, 3).expect("valid histogram bounds")
}

/// What one worker measured; workers' recorders are merged at the end.
#[derive(Debug, Clone)]
pub struct Recorder {
    all: Histogram<u64>,
    buckets: Option<Vec<Histogram<u64>>>,
    /// RPCs completed and counted.
    pub rpcs: u64,
    /// RPCs that failed (timeout, wrong response, transport error).
    pub errors: u64,
    /// Of those, responses of the right length whose bytes were wrong.
    pub content_errors: u64,
    /// Request payload bytes of the counted RPCs.
    pub request_bytes: u64,
    /// Response payload bytes of the counted RPCs.
    pub response_bytes: u64,
}

impl Recorder {
    /// An empty recorder; `per_bucket` also keeps one histogram per size class.
    pub fn new(per_bucket: bool) -> Recorder {
        Recorder {
            all: new_histogram(),
            buckets: per_bucket.then(|| SIZE_CLASSES.iter().map(|_| new_histogram()).collect()),
            rpcs: 0,
            errors: 0,
            content_errors: 0,
            request_bytes: 0,
            response_bytes: 0,
        }
    }

    /// Records one successful RPC.
    pub fn record(&mut self, request_size: usize, response_size: usize, latency: Duration) {
        let ns = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX).max(1);
        self.all.saturating_record(ns);
        if let Some(b) = &mut self.buckets {
            b[size_class_index(request_size as u64)].saturating_record(ns);
        }
        self.rpcs += 1;
        self.request_bytes += request_size as u64;
        self.response_bytes += response_size as u64;
    }

    /// Judges a completed RPC and records it: a success when its response
    /// has the `want`ed length and the right bytes (`content_ok`), a content
    /// error when only the bytes are wrong, an error otherwise (each with a
    /// warning). The one verdict every client of homa-perf uses. Returns
    /// whether it was a success.
    pub fn judge(
        &mut self,
        request_size: usize,
        len: usize,
        want: usize,
        content_ok: bool,
        latency: Duration,
    ) -> bool {
        if len == want && content_ok {
            self.record(request_size, len, latency);
            true
        } else if len == want {
            tracing::warn!("response to a {request_size} B request: {len} B of wrong content");
            self.record_content_error();
            false
        } else {
            tracing::warn!("response of {len} B to a {request_size} B request, expected {want} B");
            self.record_error();
            false
        }
    }

    /// Counts one failed RPC.
    pub fn record_error(&mut self) {
        self.errors += 1;
    }

    /// Counts one RPC whose response had the wrong bytes (also an error).
    pub fn record_content_error(&mut self) {
        self.errors += 1;
        self.content_errors += 1;
    }

    /// Adds another worker's measurements to these.
    pub fn merge(&mut self, other: &Recorder) {
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.all.add(&other.all);
        if let (Some(mine), Some(theirs)) = (&mut self.buckets, &other.buckets) {
            for (m, t) in mine.iter_mut().zip(theirs) {
                let _ = m.add(t);
            }
        }
        self.rpcs += other.rpcs;
        self.errors += other.errors;
        self.content_errors += other.content_errors;
        self.request_bytes += other.request_bytes;
        self.response_bytes += other.response_bytes;
    }

    /// Latency at quantile `q` (0..=1) in microseconds, if anything was recorded.
    pub fn quantile_us(&self, q: f64) -> Option<f64> {
        quantile_us(&self.all, q)
    }

    /// Mean latency in microseconds.
    pub fn mean_us(&self) -> Option<f64> {
        (!self.all.is_empty()).then(|| round1(self.all.mean() / 1_000.0))
    }

    /// Summarises the measurements over `elapsed` into per-bucket rows.
    fn bucket_reports(&self) -> Option<Vec<BucketReport>> {
        self.buckets.as_ref().map(|hs| {
            SIZE_CLASSES
                .iter()
                .zip(hs)
                .map(|(b, h)| BucketReport {
                    label: b.label,
                    min_bytes: b.min_bytes,
                    max_bytes: (b.max_bytes != u64::MAX).then_some(b.max_bytes),
                    count: h.len(),
                    p50_us: quantile_us(h, 0.5),
                    p99_us: quantile_us(h, 0.99),
                })
                .collect()
        })
    }
}

fn quantile_us(h: &Histogram<u64>, q: f64) -> Option<f64> {
    (!h.is_empty()).then(|| round1(h.value_at_quantile(q) as f64 / 1_000.0))
}

/// Rounds to 0.1 (µs values are shown to one decimal).
fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Rounds to 0.001.
fn round3(x: f64) -> f64 {
    (x * 1_000.0).round() / 1_000.0
}

/// Latencies of the requests of one size class.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BucketReport {
    /// Size class name.
    pub label: &'static str,
    /// Smallest request size in the class.
    pub min_bytes: u64,
    /// Largest request size in the class; absent for the open-ended last one.
    pub max_bytes: Option<u64>,
    /// RPCs measured in the class.
    pub count: u64,
    /// Median latency (µs); null when the class is empty.
    pub p50_us: Option<f64>,
    /// 99th percentile latency (µs); null when the class is empty.
    pub p99_us: Option<f64>,
}

/// The result of one client run: what `--json` prints, one object.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// `homa`, `tcp` or `udp`.
    pub protocol: String,
    /// Whether client and server spun instead of sleeping.
    pub busy_poll: bool,
    /// Outstanding RPCs.
    pub concurrency: usize,
    /// Fixed request size (bytes), when no workload is used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<usize>,
    /// Workload name, when request sizes come from one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
    /// Response size asked of the server (bytes).
    pub response_size: usize,
    /// RPCs completed in the measured interval (warm-up excluded).
    pub rpcs: u64,
    /// RPCs that failed in the measured interval.
    pub errors: u64,
    /// Of those, responses of the right length with wrong bytes (every
    /// response byte is checked).
    pub content_errors: u64,
    /// Length of the measured interval (s).
    pub elapsed_s: f64,
    /// Completed RPCs per second.
    pub rpcs_per_s: f64,
    /// Request payload bytes of the completed RPCs.
    pub request_bytes: u64,
    /// Request payload bits per second over the interval, in Gbit/s.
    pub gbps: f64,
    /// Response payload bits per second over the interval, in Gbit/s.
    pub response_gbps: f64,
    /// Median latency (µs).
    pub p50_us: Option<f64>,
    /// 99th percentile latency (µs).
    pub p99_us: Option<f64>,
    /// 99.9th percentile latency (µs).
    pub p999_us: Option<f64>,
    /// Mean latency (µs).
    pub mean_us: Option<f64>,
    /// Smallest latency (µs).
    pub min_us: Option<f64>,
    /// Largest latency (µs).
    pub max_us: Option<f64>,
    /// Per size class percentiles, when a workload is used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub buckets: Option<Vec<BucketReport>>,
    /// The Homa client endpoint's counters at the end of the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub homa_metrics: Option<serde_json::Value>,
    /// Peak resident memory of this process so far (KiB; Linux `VmHWM`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_rss_kib: Option<u64>,
}

/// The process's peak resident set size (KiB), from /proc/self/status.
pub fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// What a run was, to label its report.
#[derive(Debug, Clone)]
pub struct RunLabel {
    /// Protocol name.
    pub protocol: String,
    /// Busy polling on.
    pub busy_poll: bool,
    /// Outstanding RPCs.
    pub concurrency: usize,
    /// Fixed request size.
    pub size: Option<usize>,
    /// Workload name.
    pub workload: Option<String>,
    /// Response size.
    pub response_size: usize,
}

impl Report {
    /// Builds the report of a run from its merged recorder and interval.
    pub fn new(label: RunLabel, rec: &Recorder, elapsed: Duration) -> Report {
        let secs = elapsed.as_secs_f64().max(1e-9);
        Report {
            protocol: label.protocol,
            busy_poll: label.busy_poll,
            concurrency: label.concurrency,
            size: label.size,
            workload: label.workload,
            response_size: label.response_size,
            rpcs: rec.rpcs,
            errors: rec.errors,
            content_errors: rec.content_errors,
            elapsed_s: round3(elapsed.as_secs_f64()),
            rpcs_per_s: (rec.rpcs as f64 / secs).round(),
            request_bytes: rec.request_bytes,
            gbps: round3(rec.request_bytes as f64 * 8.0 / secs / 1e9),
            response_gbps: round3(rec.response_bytes as f64 * 8.0 / secs / 1e9),
            p50_us: rec.quantile_us(0.5),
            p99_us: rec.quantile_us(0.99),
            p999_us: rec.quantile_us(0.999),
            mean_us: rec.mean_us(),
            min_us: rec.quantile_us(0.0),
            max_us: rec.quantile_us(1.0),
            buckets: rec.bucket_reports(),
            homa_metrics: None,
            peak_rss_kib: peak_rss_kib(),
        }
    }

    /// The report as one JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        // A struct of plain fields always serializes.
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// The report as one line of JSON, fields in declaration order.
    pub fn to_json_string(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "null".to_string())
    }

    /// A compact human-readable table.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let what = match (&self.workload, self.size) {
            (Some(w), _) => format!("workload {w}"),
            (None, Some(s)) => format!("{s} B requests"),
            (None, None) => "requests".to_string(),
        };
        let _ = writeln!(
            out,
            "{} {}, {} B responses, {} outstanding, {}",
            self.protocol,
            what,
            self.response_size,
            self.concurrency,
            if self.busy_poll {
                "busy-poll"
            } else {
                "blocking"
            }
        );
        let _ = writeln!(
            out,
            "  {:>10} {:>7} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8}",
            "rpcs",
            "errors",
            "rpc/s",
            "p50 us",
            "p99 us",
            "p99.9 us",
            "mean us",
            "max us",
            "Gbit/s"
        );
        let _ = writeln!(
            out,
            "  {:>10} {:>7} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8.3}",
            self.rpcs,
            self.errors,
            self.rpcs_per_s,
            fmt_us(self.p50_us),
            fmt_us(self.p99_us),
            fmt_us(self.p999_us),
            fmt_us(self.mean_us),
            fmt_us(self.max_us),
            self.gbps
        );
        if self.content_errors > 0 {
            let _ = writeln!(
                out,
                "  {} of the errors: responses with wrong bytes",
                self.content_errors
            );
        }
        if let Some(buckets) = &self.buckets {
            let _ = writeln!(
                out,
                "  {:<12} {:>10} {:>10} {:>10}",
                "request size", "rpcs", "p50 us", "p99 us"
            );
            for b in buckets {
                let _ = writeln!(
                    out,
                    "  {:<12} {:>10} {:>10} {:>10}",
                    b.label,
                    b.count,
                    fmt_us(b.p50_us),
                    fmt_us(b.p99_us)
                );
            }
        }
        if let Some(kib) = self.peak_rss_kib {
            let _ = writeln!(
                out,
                "  peak memory (RSS) of this process: {:.1} MiB",
                kib as f64 / 1024.0
            );
        }
        out
    }
}

/// A latency in µs for a table cell, `-` when there is none.
pub fn fmt_us(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.1}"))
}
