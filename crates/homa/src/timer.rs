//! Deadlines for [`crate::AsyncEndpoint::call`] where tokio's timer is not
//! available (no tokio runtime on the polling thread: another executor or a
//! plain `block_on`): one process-wide thread, started on first use, wakes
//! each waiting future when its deadline passes.
//!
//! The thread sleeps until the earliest deadline it knows of and is woken
//! only for an earlier one, so calls that finish before their deadline
//! (the usual case) cost it nothing: it wakes about once per timeout period
//! however many calls come and go.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

/// A deadline: (when, a unique number to tell equal instants apart).
type Key = (Instant, u64);

struct State {
    wakers: BTreeMap<Key, Waker>,
    next_id: u64,
    /// When the thread wakes next by itself (`None`: not until notified).
    wakes_at: Option<Instant>,
}

struct Timer {
    state: Mutex<State>,
    cond: Condvar,
}

impl Timer {
    fn lock(&self) -> MutexGuard<'_, State> {
        // No user code runs under the lock (wakers are woken outside it).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn run(&self) {
        let mut st = self.lock();
        loop {
            let now = Instant::now();
            let mut due = Vec::new();
            while let Some(entry) = st.wakers.first_entry() {
                if entry.key().0 > now {
                    break;
                }
                due.push(entry.remove());
            }
            if !due.is_empty() {
                drop(st);
                due.into_iter().for_each(Waker::wake);
                st = self.lock();
                continue;
            }
            st.wakes_at = st.wakers.keys().next().map(|k| k.0);
            st = match st.wakes_at {
                Some(at) => {
                    self.cond
                        .wait_timeout(st, at.saturating_duration_since(now))
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
                None => self.cond.wait(st).unwrap_or_else(|e| e.into_inner()),
            };
        }
    }
}

/// The timer thread, started on first use.
fn timer() -> std::io::Result<&'static Timer> {
    static TIMER: OnceLock<Timer> = OnceLock::new();
    static STARTED: OnceLock<Result<(), std::io::ErrorKind>> = OnceLock::new();
    let t = TIMER.get_or_init(|| Timer {
        state: Mutex::new(State {
            wakers: BTreeMap::new(),
            next_id: 0,
            wakes_at: None,
        }),
        cond: Condvar::new(),
    });
    let started = STARTED.get_or_init(|| {
        std::thread::Builder::new()
            .name("homa-timer".into())
            .spawn(move || t.run())
            .map(drop)
            .map_err(|e| e.kind())
    });
    match started {
        Ok(()) => Ok(t),
        Err(kind) => Err(std::io::Error::new(
            *kind,
            "cannot start the thread that times out AsyncEndpoint::call outside a tokio runtime",
        )),
    }
}

/// `future`'s output, or `None` once `duration` has passed (counted from
/// the first poll).
pub(crate) async fn timeout<F: Future>(
    duration: Duration,
    future: F,
) -> std::io::Result<Option<F::Output>> {
    let mut sleep = Sleep::new(duration)?;
    let mut future = std::pin::pin!(future);
    Ok(std::future::poll_fn(|cx| {
        if let Poll::Ready(v) = future.as_mut().poll(cx) {
            return Poll::Ready(Some(v));
        }
        if sleep.expired(cx.waker()) {
            Poll::Ready(None)
        } else {
            Poll::Pending
        }
    })
    .await)
}

/// A deadline whose waker the timer thread holds while it waits.
struct Sleep {
    /// `None`: past the clock's range, never comes.
    deadline: Option<Instant>,
    timer: &'static Timer,
    /// Where the waker is filed, once it waits.
    key: Option<Key>,
}

impl Sleep {
    fn new(duration: Duration) -> std::io::Result<Sleep> {
        Ok(Sleep {
            deadline: Instant::now().checked_add(duration),
            timer: timer()?,
            key: None,
        })
    }

    /// Whether the deadline has passed; if not, `waker` is woken when it
    /// does.
    fn expired(&mut self, waker: &Waker) -> bool {
        let Some(deadline) = self.deadline else {
            return false;
        };
        if Instant::now() >= deadline {
            return true;
        }
        let mut st = self.timer.lock();
        let key = match self.key {
            Some(key) => key,
            None => {
                st.next_id += 1;
                let key = (deadline, st.next_id);
                self.key = Some(key);
                key
            }
        };
        match st.wakers.get_mut(&key) {
            Some(w) if w.will_wake(waker) => {}
            Some(w) => *w = waker.clone(),
            None => {
                st.wakers.insert(key, waker.clone());
                if st.wakes_at.is_none_or(|at| deadline < at) {
                    st.wakes_at = Some(deadline);
                    self.timer.cond.notify_one();
                }
            }
        }
        false
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            let waker = self.timer.lock().wakers.remove(&key);
            drop(waker); // outside the lock: dropping a waker may run code
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::task::{Context, Wake};

    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }

    fn block_on<F: Future>(f: F) -> F::Output {
        let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
        let mut cx = Context::from_waker(&waker);
        let mut f = std::pin::pin!(f);
        loop {
            if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
                return v;
            }
            std::thread::park();
        }
    }

    #[test]
    fn a_pending_future_times_out_on_time_and_a_ready_one_does_not() {
        let start = Instant::now();
        let r = block_on(timeout(
            Duration::from_millis(50),
            std::future::pending::<()>(),
        ))
        .unwrap();
        let took = start.elapsed();
        assert_eq!(r, None);
        assert!(took >= Duration::from_millis(50), "{took:?}");
        assert!(took < Duration::from_secs(2), "{took:?}");

        let r = block_on(timeout(Duration::from_secs(10), std::future::ready(3))).unwrap();
        assert_eq!(r, Some(3));
        // A huge timeout (past the clock's range) never fires.
        let r = block_on(timeout(Duration::MAX, std::future::ready(4))).unwrap();
        assert_eq!(r, Some(4));
    }

    #[test]
    fn many_overlapping_deadlines_each_fire_and_dropped_ones_are_forgotten() {
        // A long deadline filed first must not delay short ones filed later
        // (the thread, asleep until the long one, is woken for them).
        let long_start = Instant::now();
        let long_wait = Duration::from_secs(2);
        let long = std::thread::spawn(move || {
            block_on(timeout(long_wait, std::future::pending::<()>())).unwrap()
        });
        std::thread::sleep(Duration::from_millis(20));
        let threads: Vec<_> = (0..8u64)
            .map(|i| {
                std::thread::spawn(move || {
                    let start = Instant::now();
                    let d = Duration::from_millis(10 + 5 * i);
                    let r = block_on(timeout(d, std::future::pending::<()>())).unwrap();
                    (r, start.elapsed(), d, Instant::now())
                })
            })
            .collect();
        for t in threads {
            let (r, took, d, end) = t.join().unwrap();
            assert_eq!(r, None);
            assert!(took >= d, "{took:?} for {d:?}");
            assert!(
                end < long_start + long_wait,
                "{d:?} waited for the long deadline"
            );
        }
        assert_eq!(long.join().unwrap(), None);
        assert!(long_start.elapsed() >= long_wait);
        // A deadline dropped before it comes leaves nothing filed.
        let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
        let mut sleep = Sleep::new(Duration::from_secs(60)).unwrap();
        assert!(!sleep.expired(&waker));
        let key = sleep.key.unwrap();
        assert!(timer().unwrap().lock().wakers.contains_key(&key));
        drop(sleep);
        assert!(!timer().unwrap().lock().wakers.contains_key(&key));
    }
}
