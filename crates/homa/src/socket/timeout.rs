//! The receive timeout of a UDP socket (`SO_RCVTIMEO`) as a coarse alarm
//! clock for the reader asleep in the receive call: the kernel wakes it for
//! a deadline a jiffy or more away, so no other thread has to (before, the
//! background thread woke at each such deadline to kick it, and was nudged
//! each time the reader went to sleep with an earlier one).
//!
//! The kernel keeps the timeout in jiffies (`HZ`, e.g. 4 ms at 250 Hz),
//! rounding up, and a sleep of `k` jiffies ends at the `k`-th jiffy
//! boundary from now: after between `k - 1` and `k` jiffies. So a timeout
//! of `k` whole jiffies never wakes the reader later than `k` jiffies, and
//! may wake it up to a jiffy early (the reader then sleeps again, for the
//! rest). The value is changed only when the one in force would wake the
//! reader late, or more than twice as early as it needs: one `setsockopt`
//! now and then, not one per sleep.

use super::HomaSocket;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;
use std::time::Duration;

/// The kernel's jiffy (`1/HZ`), if it could be learnt: the resolution of
/// `CLOCK_MONOTONIC_COARSE`, which is the jiffy. `None` (no kernel
/// timeouts are then relied on) when that is not plausible.
pub(crate) fn jiffy() -> Option<Duration> {
    static JIFFY: OnceLock<Option<Duration>> = OnceLock::new();
    *JIFFY.get_or_init(|| {
        // SAFETY: all-zero is a valid timespec.
        let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
        // SAFETY: `ts` is a live, writable timespec.
        let r = unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
        let j = Duration::new(ts.tv_sec.max(0) as u64, ts.tv_nsec.max(0) as u32);
        // (100 to 1000 Hz are what Linux offers; microsecond-exact, as the
        // kernel divides by USEC_PER_SEC / HZ.)
        let plausible = r == 0
            && j >= Duration::from_millis(1)
            && j <= Duration::from_millis(10)
            && j.subsec_nanos() % 1000 == 0;
        plausible.then_some(j)
    })
}

/// The receive timeout to set for a sleep that must end within `latest`
/// (whole jiffies, never more than `latest`), given the one in force
/// (`current`), with jiffy `j`: `None` when `current` will do (it is no
/// longer than `latest` and at least half of it, or a jiffy), `Some(None)`
/// when the kernel cannot promise `latest` (less than a jiffy), else the
/// new value.
pub(crate) fn timeout_for(
    latest: Duration,
    current: Duration,
    j: Duration,
) -> Option<Option<Duration>> {
    if latest < j {
        return Some(None);
    }
    if current <= latest && current >= j && current >= latest / 2 {
        return None;
    }
    let k = (latest.as_nanos() / j.as_nanos()) as u32;
    Some(Some(j * k))
}

impl HomaSocket {
    /// UDP: makes sure the next blocking receive ([`HomaSocket::recv_wait`])
    /// returns by itself within `latest` from now (it may return early, by
    /// up to half of `latest` and a jiffy). False when the kernel cannot
    /// promise that: `latest` is under a jiffy, or the jiffy is unknown;
    /// the caller must then have the reader woken some other way.
    pub(crate) fn bound_recv_wait(&self, latest: Duration) -> bool {
        let Some(j) = jiffy() else {
            return false;
        };
        let current = Duration::from_nanos(self.recv_timeout_ns.load(Ordering::Relaxed));
        match timeout_for(latest, current, j) {
            None => true,
            Some(None) => false,
            Some(Some(t)) => {
                if self.socket.set_read_timeout(Some(t)).is_err() {
                    return false;
                }
                self.recv_timeout_ns
                    .store(t.as_nanos() as u64, Ordering::Relaxed);
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const J: Duration = Duration::from_millis(4);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_deadline_under_a_jiffy_cannot_be_kept_by_the_kernel() {
        assert_eq!(timeout_for(ms(3), ms(4), J), Some(None));
    }

    #[test]
    fn the_timeout_is_whole_jiffies_never_past_the_deadline() {
        assert_eq!(timeout_for(ms(11), ms(20), J), Some(Some(ms(8))));
        assert_eq!(timeout_for(ms(4), ms(20), J), Some(Some(ms(4))));
        assert_eq!(
            timeout_for(Duration::from_micros(7999), ms(20), J),
            Some(Some(ms(4)))
        );
    }

    #[test]
    fn the_timeout_in_force_is_kept_unless_late_or_far_too_early() {
        // Within [latest / 2, latest]: kept (no system call).
        assert_eq!(timeout_for(ms(5), ms(4), J), None);
        assert_eq!(timeout_for(ms(14), ms(8), J), None);
        // Would wake late.
        assert_eq!(timeout_for(ms(6), ms(8), J), Some(Some(ms(4))));
        // Would wake more than twice as early as needed.
        assert_eq!(timeout_for(ms(14), ms(4), J), Some(Some(ms(12))));
    }

    #[test]
    fn the_jiffy_is_learnt_on_linux() {
        let j = jiffy().expect("CLOCK_MONOTONIC_COARSE gives the jiffy");
        assert!(j >= ms(1) && j <= ms(10), "{j:?}");
    }
}
