//! One thread per process that looks in on every endpoint's background
//! thread now and then, so that those threads need no alarm of their own
//! while application threads wait (and read the socket).
//!
//! A background thread takes the reader role once no application thread
//! waits (`Inner::background`). Nobody tells it when the last waiter
//! leaves: that happens after every RPC of a client loop, and a wake-up
//! each time would cost more than the RPC. It used to wake every
//! [`MAX_SLEEP`] to look, which with an endpoint per client thread (64
//! endpoints, 64 background threads) made thousands of wake-ups a second.
//! Now it sleeps until told, and this thread, every [`MAX_SLEEP`], tells
//! each endpoint's background thread that no application thread waits on:
//! one wake-up per period for the process, plus one per endpoint that
//! really has nobody waiting (where its background thread has work).

use super::{Inner, MAX_SLEEP};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// The endpoints of this process (those dropped are pruned as seen).
static ENDPOINTS: OnceLock<Mutex<Vec<Weak<Inner>>>> = OnceLock::new();

/// Adds `inner` to the endpoints looked in on, starting the thread on
/// first use. (Should the thread not start, background threads still wake
/// by themselves, only later: [`super::BACKGROUND_IDLE`].)
pub(super) fn watch(inner: &Arc<Inner>) {
    let list = ENDPOINTS.get_or_init(|| {
        let started = std::thread::Builder::new()
            .name("homa-watch".into())
            .spawn(run);
        if let Err(e) = started {
            tracing::warn!(error = %e, "could not start the endpoints' watch thread");
        }
        Mutex::new(Vec::new())
    });
    list.lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(Arc::downgrade(inner));
}

/// The thread: every [`MAX_SLEEP`], wakes the background thread of each
/// open endpoint that no application thread waits on.
fn run() {
    loop {
        std::thread::sleep(MAX_SLEEP);
        let Some(list) = ENDPOINTS.get() else {
            continue;
        };
        // (Strong references are taken one at a time and dropped before
        // the next: an endpoint whose last handle went meanwhile is freed
        // here, outside the list's lock.)
        let mut i = 0;
        loop {
            let ep = {
                let mut l = list.lock().unwrap_or_else(|p| p.into_inner());
                let mut found = None;
                while i < l.len() {
                    match l[i].upgrade() {
                        Some(ep) if !ep.closed.load(Ordering::Acquire) => {
                            found = Some(ep);
                            i += 1;
                            break;
                        }
                        _ => {
                            l.swap_remove(i);
                        }
                    }
                }
                found
            };
            let Some(ep) = ep else {
                break;
            };
            if ep.waiters.load(Ordering::Acquire) == 0 {
                ep.bg_cond.notify_one();
            }
        }
    }
}
