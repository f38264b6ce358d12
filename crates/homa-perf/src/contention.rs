//! A reproducible busy host: threads that spin at normal priority while a
//! measurement runs, so that everyone measures under the same contention
//! (`--busy-threads N`). A transport meant for busy datacenter servers is
//! judged here as well as on a quiet machine.

use crate::PerfError;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Most spinning threads accepted (a typo such as `--busy-threads 2000`
/// would only make the machine unusable).
pub const MAX_BUSY_THREADS: usize = 256;

/// Spinning threads; they stop when this is dropped.
#[derive(Debug)]
pub struct Contention {
    stop: Arc<AtomicBool>,
    spinning: Arc<AtomicUsize>,
    /// Each spinner's kernel thread id (0 until it has started), to read
    /// its CPU time from /proc without disturbing it.
    tids: Vec<Arc<AtomicU64>>,
    threads: Vec<JoinHandle<()>>,
}

impl Contention {
    /// Starts `n` threads that each keep one CPU busy with arithmetic (no
    /// memory traffic, no system calls) until dropped. `n = 0` starts none.
    pub fn start(n: usize) -> Result<Contention, PerfError> {
        if n > MAX_BUSY_THREADS {
            return Err(PerfError::Usage(format!(
                "--busy-threads must be at most {MAX_BUSY_THREADS}, got {n}"
            )));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let spinning = Arc::new(AtomicUsize::new(0));
        let mut threads = Vec::with_capacity(n);
        let mut tids = Vec::with_capacity(n);
        for i in 0..n {
            let (stop, spinning) = (stop.clone(), spinning.clone());
            let tid = Arc::new(AtomicU64::new(0));
            tids.push(tid.clone());
            let t = std::thread::Builder::new()
                .name(format!("busy-{i}"))
                .spawn(move || {
                    // SAFETY: gettid has no arguments and cannot fail.
                    tid.store(unsafe { libc::gettid() } as u64, Ordering::SeqCst);
                    spinning.fetch_add(1, Ordering::SeqCst);
                    let mut x = 0x9E37_79B9_7F4A_7C15_u64 ^ i as u64;
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..1_000 {
                            x = black_box(x.rotate_left(7).wrapping_mul(0xBF58_476D_1CE4_E5B9));
                        }
                    }
                    spinning.fetch_sub(1, Ordering::SeqCst);
                })
                .map_err(|e| PerfError::Usage(format!("cannot start a busy thread: {e}")))?;
            threads.push(t);
        }
        Ok(Contention {
            stop,
            spinning,
            tids,
            threads,
        })
    }

    /// Threads started.
    pub fn threads(&self) -> usize {
        self.threads.len()
    }

    /// Threads spinning right now.
    pub fn spinning(&self) -> usize {
        self.spinning.load(Ordering::SeqCst)
    }

    /// CPU time the spinners have used so far (ns), read from
    /// `/proc/self/task/TID/schedstat` by the caller: the spinners
    /// themselves make no system call (asking the kernel for a thread's CPU
    /// time takes its run queue's lock, which the scheduler needs to wake
    /// the threads being measured on that CPU).
    pub fn cpu_ns(&self) -> u64 {
        self.tids
            .iter()
            .map(|t| t.load(Ordering::SeqCst))
            .filter(|&t| t != 0)
            .map(thread_cpu_ns)
            .sum()
    }
}

/// CPU time (ns) of thread `tid` of this process: the first field of its
/// schedstat, 0 if it cannot be read.
fn thread_cpu_ns(tid: u64) -> u64 {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The whole process's CPU time, user and system (ns).
pub fn process_cpu_ns() -> u64 {
    // SAFETY: an all-zero rusage is a valid value to pass for writing.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is valid and writable; getrusage only writes it.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0;
    }
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

impl Drop for Contention {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_spin_until_dropped() {
        let c = Contention::start(2).unwrap();
        assert_eq!(c.threads(), 2);
        while c.spinning() < 2 {
            std::thread::yield_now();
        }
        // They burn CPU, and say so.
        let before = process_cpu_ns();
        while c.cpu_ns() == 0 {
            std::thread::yield_now();
        }
        assert!(process_cpu_ns() >= before);
        let spinning = c.spinning.clone();
        drop(c);
        assert_eq!(spinning.load(Ordering::SeqCst), 0, "all stopped and joined");
        assert_eq!(Contention::start(0).unwrap().threads(), 0);
    }

    #[test]
    fn absurd_counts_are_refused() {
        let e = Contention::start(MAX_BUSY_THREADS + 1).unwrap_err();
        assert!(e.to_string().contains("--busy-threads"), "{e}");
    }
}
