//! The system calls of a small RPC's path as bare system calls. glibc's
//! wrappers of `recvfrom`, `recvmsg`, `recvmmsg` and `sendto` are
//! cancellation points: each call switches the thread's asynchronous
//! cancellation on and off around the system call, some 40 instructions of
//! the ~75 a spinning reader's empty `recvfrom` cost (valgrind), and every
//! call that brings or sends a packet pays them too. Nothing here cancels
//! threads (Rust has no `pthread_cancel`), so the same system call without
//! them does the same. On other targets, the wrappers.

#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod imp {
    use libc::{c_int, c_long, c_uint, c_void, mmsghdr, msghdr, size_t, sockaddr, socklen_t};

    /// `sendto(2)`; -1 and errno on failure, as the wrapper.
    ///
    /// # Safety
    /// As `libc::sendto`.
    #[inline]
    pub(crate) unsafe fn sendto(
        fd: c_int,
        buf: *const c_void,
        len: size_t,
        flags: c_int,
        addr: *const sockaddr,
        addrlen: socklen_t,
    ) -> isize {
        libc::syscall(
            libc::SYS_sendto,
            fd as c_long,
            buf,
            len,
            flags as c_long,
            addr,
            addrlen as c_long,
        ) as isize
    }

    /// `recvfrom(2)`; -1 and errno on failure, as the wrapper.
    ///
    /// # Safety
    /// As `libc::recvfrom`.
    #[inline]
    pub(crate) unsafe fn recvfrom(
        fd: c_int,
        buf: *mut c_void,
        len: size_t,
        flags: c_int,
        addr: *mut sockaddr,
        addrlen: *mut socklen_t,
    ) -> isize {
        libc::syscall(
            libc::SYS_recvfrom,
            fd as c_long,
            buf,
            len,
            flags as c_long,
            addr,
            addrlen,
        ) as isize
    }

    /// `recvmsg(2)`; -1 and errno on failure.
    ///
    /// # Safety
    /// As `libc::recvmsg`.
    #[inline]
    pub(crate) unsafe fn recvmsg(fd: c_int, msg: *mut msghdr, flags: c_int) -> isize {
        libc::syscall(libc::SYS_recvmsg, fd as c_long, msg, flags as c_long) as isize
    }

    /// `recvmmsg(2)` without a timeout; -1 and errno on failure.
    ///
    /// # Safety
    /// As `libc::recvmmsg`.
    #[inline]
    pub(crate) unsafe fn recvmmsg(fd: c_int, msgs: *mut mmsghdr, n: c_uint, flags: c_int) -> c_int {
        libc::syscall(
            libc::SYS_recvmmsg,
            fd as c_long,
            msgs,
            n as c_long,
            flags as c_long,
            std::ptr::null_mut::<c_void>(),
        ) as c_int
    }
}

/// Elsewhere: glibc's (or the platform's) wrappers.
#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
mod imp {
    use libc::{c_int, c_uint, mmsghdr};
    pub(crate) use libc::{recvfrom, recvmsg, sendto};

    /// `recvmmsg(2)` without a timeout.
    ///
    /// # Safety
    /// As `libc::recvmmsg`.
    pub(crate) unsafe fn recvmmsg(fd: c_int, msgs: *mut mmsghdr, n: c_uint, flags: c_int) -> c_int {
        libc::recvmmsg(fd, msgs, n as _, flags as _, std::ptr::null_mut())
    }
}

pub(crate) use imp::*;
