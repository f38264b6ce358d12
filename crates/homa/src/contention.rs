//! Whether the host's CPUs are contended, for adaptive polling.
//!
//! A waiting thread polls (`Config::poll_us`) so that a reply that comes
//! soon is taken without a wake-up. That pays only while a CPU is free for
//! the peer that must produce the reply: on a host whose CPUs all have work,
//! the poller takes the CPU the peer (often on this same host) needs, and a
//! 100 B RPC measured 121 µs polling against 30 µs sleeping at once. So the
//! runtime polls only while fewer threads are runnable than there are CPUs,
//! read from `/proc/loadavg` (its fourth field, "running/total") at most
//! once per [`CHECK_EVERY_NS`] (ns). Without `/proc` the host counts as quiet.
//!
//! The view is the host's, so a process keeps one ([`CpuContention::shared`])
//! for all its endpoints: with one each, 64 client endpoints read the file
//! 6,400 times a second (an open, two reads and a close each).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

/// How long one reading of the run queue is trusted (ns).
pub const CHECK_EVERY_NS: u64 = 10_000_000;

/// The coarse monotonic clock (ns; `CLOCK_MONOTONIC_COARSE`: the time of
/// the last timer tick, a jiffy's resolution, ~10 ns to read against ~50 ns
/// for the precise clock in a VM). Enough to age a view trusted for
/// [`CHECK_EVERY_NS`], read by every wait.
fn coarse_now() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the call only writes it.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    if r != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A cached view of the host's run queue.
#[derive(Debug)]
pub struct CpuContention {
    /// When the view was last refreshed (ns of [`coarse_now`], +1; 0 =
    /// never).
    checked_at: AtomicU64,
    contended: AtomicBool,
    cpus: usize,
}

impl CpuContention {
    /// A view of this host, refreshed on first use.
    pub fn new() -> CpuContention {
        CpuContention {
            checked_at: AtomicU64::new(0),
            contended: AtomicBool::new(false),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }

    /// The process's view, shared by all its endpoints.
    pub fn shared() -> &'static CpuContention {
        static SHARED: OnceLock<CpuContention> = OnceLock::new();
        SHARED.get_or_init(CpuContention::new)
    }

    /// True when at least as many threads are runnable as there are CPUs
    /// (the caller, which is running, included): no CPU would be left for
    /// a peer while the caller polled.
    pub fn contended(&self) -> bool {
        let now = coarse_now() + 1;
        let last = self.checked_at.load(Ordering::Relaxed);
        if last == 0 || now.saturating_sub(last) >= CHECK_EVERY_NS {
            // One thread refreshes; the others keep the cached answer.
            if self
                .checked_at
                .compare_exchange(last, now, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                let runnable = std::fs::read_to_string("/proc/loadavg")
                    .ok()
                    .and_then(|s| runnable_of(&s));
                let busy = runnable.is_some_and(|r| busy_given(r, self.cpus));
                self.contended.store(busy, Ordering::Relaxed);
            }
        }
        self.contended.load(Ordering::Relaxed)
    }
}

impl Default for CpuContention {
    fn default() -> Self {
        Self::new()
    }
}

/// The runnable-thread count of a `/proc/loadavg` line
/// (`0.52 0.58 0.59 3/245 1234`: 3 runnable of 245).
fn runnable_of(loadavg: &str) -> Option<usize> {
    loadavg
        .split_whitespace()
        .nth(3)?
        .split('/')
        .next()?
        .parse()
        .ok()
}

/// With `runnable` threads (the caller among them) on `cpus` CPUs, is any
/// CPU left for another thread?
fn busy_given(runnable: usize, cpus: usize) -> bool {
    cpus <= 1 || runnable > cpus
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_run_queue_of_a_loadavg_line() {
        assert_eq!(runnable_of("0.52 0.58 0.59 3/245 1234\n"), Some(3));
        assert_eq!(runnable_of("0.00 0.01 0.05 1/80 99"), Some(1));
        assert_eq!(runnable_of("garbage"), None);
        assert_eq!(runnable_of("1 2 3 x/5 9"), None);
        assert_eq!(runnable_of(""), None);
    }

    #[test]
    fn contended_when_no_cpu_is_left_for_a_peer() {
        // 2 CPUs: the caller alone, or with one other thread, leaves room;
        // a third runnable thread does not.
        assert!(!busy_given(1, 2));
        assert!(!busy_given(2, 2));
        assert!(busy_given(3, 2));
        // One CPU: polling always takes the peer's CPU.
        assert!(busy_given(1, 1));
        assert!(!busy_given(4, 8));
        assert!(busy_given(9, 8));
    }

    #[test]
    fn the_process_shares_one_view() {
        assert!(std::ptr::eq(
            CpuContention::shared(),
            CpuContention::shared()
        ));
    }
}
