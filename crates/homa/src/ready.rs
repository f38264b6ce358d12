//! A readiness descriptor for event loops: an eventfd that is readable
//! exactly while the endpoint holds a message nobody has collected yet (a
//! request for `recv_request`, or a finished client RPC, response or
//! failure, for `recv_response`/`recv_any_response`), or once the endpoint
//! is shut down. Made for callers that multiplex many descriptors with
//! `epoll`/`poll`/`select` (the C API hands it out), so it is created only
//! when asked for; until then keeping it up to date costs one atomic load.
//!
//! The descriptor is level-triggered: the endpoint writes to the eventfd
//! when the first message becomes collectable and reads it empty when the
//! last one is taken, so it works with both level- and edge-triggered
//! `epoll`. It may be readable for a moment after another thread has
//! started to take the last message (the caller then finds nothing with a
//! zero timeout), but it is never unreadable while a message waits.
//!
//! All changes happen while the endpoint's state lock is held (the caller
//! of [`Readiness::set`] holds it), so the eventfd's counter and
//! `signalled` always agree.

use crate::wake::Kick;
use std::io;
use std::os::fd::{BorrowedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// The readiness eventfd of one endpoint, created on first use.
#[derive(Debug, Default)]
pub(crate) struct Readiness {
    fd: OnceLock<Kick>,
    /// Whether the eventfd currently holds a count (is readable). Only read
    /// and written under the endpoint's state lock.
    signalled: AtomicBool,
}

impl Readiness {
    pub(crate) fn new() -> Readiness {
        Readiness::default()
    }

    /// Makes the descriptor readable (`ready`) or not. A no-op until
    /// [`Readiness::fd`] has created it. The caller holds the endpoint's
    /// state lock.
    pub(crate) fn set(&self, ready: bool) {
        let Some(kick) = self.fd.get() else {
            return;
        };
        if self.signalled.load(Ordering::Relaxed) == ready {
            return;
        }
        if ready {
            kick.kick();
        } else {
            kick.drain();
        }
        self.signalled.store(ready, Ordering::Relaxed);
    }

    /// The descriptor, created on the first call and made readable at once
    /// if `ready_now`. The caller holds the endpoint's state lock (so no
    /// other thread creates it meanwhile).
    pub(crate) fn fd(&self, ready_now: bool) -> io::Result<BorrowedFd<'_>> {
        let raw: RawFd = match self.fd.get() {
            Some(kick) => kick.fd(),
            None => {
                let kick = Kick::new()?;
                let raw = kick.fd();
                // Cannot fail: only callers holding the state lock set it,
                // and it was empty just now.
                let _ = self.fd.set(kick);
                self.set(ready_now);
                raw
            }
        };
        // SAFETY: `raw` belongs to the `Kick` stored in `self.fd`, which is
        // never taken out or replaced, so it stays open as long as `self`,
        // the lifetime the borrow carries.
        Ok(unsafe { BorrowedFd::borrow_raw(raw) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    /// Whether `fd` polls readable right now.
    fn readable(fd: RawFd) -> bool {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one live pollfd, zero timeout.
        let r = unsafe { libc::poll(&mut p, 1, 0) };
        assert!(r >= 0, "poll failed: {}", io::Error::last_os_error());
        r == 1 && p.revents & libc::POLLIN != 0
    }

    #[test]
    fn follows_the_level_it_is_set_to() {
        let r = Readiness::new();
        r.set(true); // before creation: nothing to signal, and no state kept
        let fd = r.fd(false).unwrap().as_raw_fd();
        assert!(!readable(fd), "created not ready");
        r.set(true);
        assert!(readable(fd));
        r.set(true); // setting twice keeps one count
        r.set(false);
        assert!(!readable(fd), "one clear undoes any number of sets");
        r.set(false);
        assert!(!readable(fd));
        r.set(true);
        assert!(readable(fd));
        assert_eq!(r.fd(false).unwrap().as_raw_fd(), fd, "created once");
    }

    #[test]
    fn created_ready_when_asked() {
        let r = Readiness::new();
        let fd = r.fd(true).unwrap().as_raw_fd();
        assert!(readable(fd));
        r.set(false);
        assert!(!readable(fd));
    }
}
