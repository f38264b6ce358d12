//! Sleeping until the socket has data, a deadline passes, or another thread
//! kicks us (an eventfd): how the thread that reads the socket is told to
//! step aside.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// An eventfd another thread can write to wake a sleeper.
#[derive(Debug)]
pub(crate) struct Kick {
    fd: OwnedFd,
}

impl Kick {
    pub(crate) fn new() -> io::Result<Kick> {
        // SAFETY: eventfd has no memory arguments; a non-negative result is
        // a new descriptor we then own.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd was just returned by eventfd and is owned by nobody else.
        Ok(Kick {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Wakes whoever sleeps on this kick (or the next to sleep).
    pub(crate) fn kick(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our own eventfd.
        unsafe {
            libc::write(
                self.fd.as_raw_fd(),
                &one as *const u64 as *const libc::c_void,
                8,
            )
        };
    }

    /// Clears pending kicks.
    pub(crate) fn drain(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads at most 8 bytes into a live u64.
        unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                &mut v as *mut u64 as *mut libc::c_void,
                8,
            )
        };
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Sleeps until `sock` is readable (or has an error queued), `kick` fires,
/// or `timeout` passes. Returns (socket readable, kicked, socket error):
/// the error is `POLLERR`, e.g. an ICMP error queued on a raw socket.
pub(crate) fn sleep(sock: RawFd, kick: &Kick, timeout: Option<Duration>) -> (bool, bool, bool) {
    let mut fds = [
        libc::pollfd {
            fd: sock,
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: kick.fd(),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let tsp = ts
        .as_ref()
        .map(|t| t as *const libc::timespec)
        .unwrap_or(std::ptr::null());
    // SAFETY: fds is a live array of two pollfd; tsp is null or points to a
    // live timespec; no signal mask is passed.
    let r = unsafe { libc::ppoll(fds.as_mut_ptr(), 2, tsp, std::ptr::null()) };
    if r <= 0 {
        return (false, false, false);
    }
    (
        fds[0].revents != 0,
        fds[1].revents != 0,
        fds[0].revents & libc::POLLERR != 0,
    )
}
