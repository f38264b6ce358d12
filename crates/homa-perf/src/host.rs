//! How busy the host was before a benchmark started: CPUs, load average and
//! the share of CPU time other work used, so that a report says whether its
//! figures were taken on a quiet machine and warns when they were not.
//!
//! Latencies of a few microseconds depend on whether a CPU is free when a
//! thread wakes: on a host whose CPUs other jobs keep busy, the same
//! benchmark reads several times slower (Homa's polling default even more
//! so). The demo cannot make the machine quiet, but it can say it was not.

use std::time::Duration;

/// Share of CPU time other work may use before the figures are flagged.
pub const BUSY_WARN_FRACTION: f64 = 0.25;

/// What the host was doing just before the measurements.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct HostLoad {
    /// CPUs this process may run on.
    pub cpus: usize,
    /// One-minute load average (runnable and uninterruptible threads,
    /// averaged), from `/proc/loadavg`; `None` without `/proc`.
    pub load_average: Option<f64>,
    /// Share of all CPUs' time that was not idle during the sampling
    /// interval (0..=1), from `/proc/stat`; `None` without `/proc`.
    pub busy_fraction: Option<f64>,
}

impl HostLoad {
    /// Samples the host for `interval` (the caller's own threads should be
    /// idle meanwhile: whatever runs counts as other work).
    pub fn sample(interval: Duration) -> HostLoad {
        let before = read_cpu_times();
        std::thread::sleep(interval);
        let after = read_cpu_times();
        HostLoad {
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            load_average: std::fs::read_to_string("/proc/loadavg")
                .ok()
                .and_then(|s| load_average_of(&s)),
            busy_fraction: before.zip(after).and_then(|(b, a)| busy_between(b, a)),
        }
    }

    /// One line for a report's header.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "host: {} CPU{}",
            self.cpus,
            if self.cpus == 1 { "" } else { "s" }
        );
        if let Some(l) = self.load_average {
            s += &format!(", load average {l:.2}");
        }
        if let Some(b) = self.busy_fraction {
            s += &format!(
                ", {:.0}% of CPU time used by other work before the run",
                b * 100.0
            );
        }
        s
    }

    /// A warning when other work kept the CPUs busy (`None` on a quiet
    /// host, or when `/proc` could not tell).
    pub fn warning(&self) -> Option<String> {
        let b = self.busy_fraction?;
        (b > BUSY_WARN_FRACTION).then(|| {
            format!(
                "warning: other work used {:.0}% of the CPUs before the run (load average {}); \
                 the figures below depend on it and cannot be compared with a quiet \
                 machine's. For a reproducible busy host use --busy-threads on a quiet one.",
                b * 100.0,
                self.load_average
                    .map_or("unknown".to_string(), |l| format!("{l:.2}"))
            )
        })
    }
}

/// (busy, total) jiffies summed over all CPUs: the first line of
/// `/proc/stat`.
fn read_cpu_times() -> Option<(u64, u64)> {
    cpu_times_of(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// Parses the aggregate `cpu` line of `/proc/stat` into (busy, total),
/// idle and iowait counting as not busy.
fn cpu_times_of(stat: &str) -> Option<(u64, u64)> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    if v.len() < 4 {
        return None;
    }
    // user nice system idle iowait irq softirq steal (guest time is already
    // inside user and nice).
    let total: u64 = v.iter().take(8).sum();
    let idle = v[3] + v.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

fn busy_between(before: (u64, u64), after: (u64, u64)) -> Option<f64> {
    let total = after.1.checked_sub(before.1)?;
    let busy = after.0.checked_sub(before.0)?;
    (total > 0).then(|| (busy as f64 / total as f64).clamp(0.0, 1.0))
}

fn load_average_of(loadavg: &str) -> Option<f64> {
    loadavg.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_stat() {
        let stat = "cpu  100 5 50 800 20 3 2 10 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 1\n";
        assert_eq!(cpu_times_of(stat), Some((170, 990)));
        assert_eq!(cpu_times_of("cpu0 1 2 3 4\n"), None, "aggregate line only");
        assert_eq!(cpu_times_of("cpu  1 x 3 4\n"), None);
        assert_eq!(cpu_times_of("cpu  1 2\n"), None);
    }

    #[test]
    fn busy_share_between_two_readings() {
        assert_eq!(busy_between((100, 1000), (150, 1100)), Some(0.5));
        assert_eq!(
            busy_between((100, 1000), (100, 1000)),
            None,
            "no time passed"
        );
        assert_eq!(
            busy_between((100, 1000), (90, 1100)),
            None,
            "counter went back"
        );
    }

    #[test]
    fn warns_only_when_busy() {
        let quiet = HostLoad {
            cpus: 2,
            load_average: Some(0.3),
            busy_fraction: Some(0.05),
        };
        assert!(quiet.warning().is_none());
        assert!(quiet.describe().contains("2 CPUs, load average 0.30, 5%"));
        let busy = HostLoad {
            busy_fraction: Some(0.8),
            load_average: Some(4.5),
            ..quiet
        };
        let w = busy.warning().expect("a warning");
        assert!(w.contains("80%") && w.contains("4.50"), "{w}");
        let unknown = HostLoad {
            load_average: None,
            busy_fraction: None,
            ..quiet
        };
        assert!(unknown.warning().is_none());
        assert_eq!(unknown.describe(), "host: 2 CPUs");
    }

    #[test]
    fn load_average_is_the_first_field() {
        assert_eq!(load_average_of("4.32 5.49 4.68 3/402 1234\n"), Some(4.32));
        assert_eq!(load_average_of(""), None);
    }

    #[test]
    fn samples_this_host() {
        let h = HostLoad::sample(Duration::from_millis(20));
        assert!(h.cpus >= 1);
        if let Some(b) = h.busy_fraction {
            assert!((0.0..=1.0).contains(&b));
        }
    }
}
