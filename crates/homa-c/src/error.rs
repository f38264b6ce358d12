//! Errors at the C boundary: every failure becomes a negative errno value
//! (the function's return value) plus a sentence kept per thread for
//! `homars_last_error`. The mapping from [`homa::Error`] lives here, in one
//! `match`. `homa::Error` is `#[non_exhaustive]`, so a variant the runtime
//! adds later reaches C as `EIO` (with its sentence in `homars_last_error`)
//! until it is given its own code here and in the README's table.

use std::any::Any;
use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};

/// Why a C call failed.
#[derive(Debug, thiserror::Error)]
pub enum CError {
    /// The runtime refused or failed.
    #[error(transparent)]
    Homa(#[from] homa::Error),
    /// A pointer argument that must not be NULL was NULL (names it).
    #[error("{0} is NULL")]
    Null(&'static str),
    /// An argument is malformed (a timeout below -1, a string that is not
    /// UTF-8, a length too large for memory).
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// A panic inside the library, caught before it reached C.
    #[error("internal error (a panic was caught at the C boundary): {0}")]
    Panic(String),
}

impl CError {
    /// The positive errno value for this error.
    pub fn errno(&self) -> c_int {
        match self {
            CError::Homa(e) => errno_of(e),
            CError::Null(_) | CError::Invalid(_) => libc::EINVAL,
            CError::Panic(_) => libc::EIO,
        }
    }
}

/// The positive errno value for a runtime error. See the README's table.
pub fn errno_of(e: &homa::Error) -> c_int {
    use homa::Error as E;
    match e {
        E::Timeout => libc::ETIMEDOUT,
        E::PeerDead => libc::EHOSTUNREACH,
        E::DesignMismatch => libc::EPROTO,
        E::MessageTooLong { .. } | E::ResponseTooLong { .. } => libc::EMSGSIZE,
        E::NothingOutstanding => libc::ENOMSG,
        E::Closed => libc::ESHUTDOWN,
        E::BadAddress(_) => libc::EINVAL,
        E::PermissionDenied(_) => libc::EPERM,
        E::UnknownRpc(_) => libc::ENOENT,
        E::NotAwaitingReply(_) => libc::EALREADY,
        E::Limit(_) => libc::ENOBUFS,
        E::StreamReset => libc::ECONNRESET,
        E::StreamRefused => libc::ECONNREFUSED,
        E::StreamOpenTimeout => libc::ENOTCONN,
        E::StreamFinished => libc::EPIPE,
        E::Config(_) => libc::EINVAL,
        E::Io(io) => io.raw_os_error().filter(|&n| n > 0).unwrap_or(libc::EIO),
        // A variant newer than this mapping: a generic failure.
        _ => libc::EIO,
    }
}

thread_local! {
    /// The sentence describing this thread's most recent failure.
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
    /// Text for `homars_strerror` of codes it has no fixed text for.
    static STRERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// A C string of `text`, with any NUL byte (which C would read as the end)
/// replaced.
fn c_string(text: String) -> CString {
    CString::new(text.replace('\0', "\u{fffd}")).unwrap_or_default()
}

/// Records `text` as this thread's last error.
pub fn set_last_error(text: String) {
    let c = c_string(text);
    // At thread exit the slot may be gone; the text is then not needed.
    let _ = LAST_ERROR.try_with(|slot| *slot.borrow_mut() = c);
}

/// This thread's last error (empty if none), valid until the next failure
/// on this thread.
pub fn last_error_ptr() -> *const c_char {
    LAST_ERROR
        .try_with(|slot| slot.borrow().as_ptr())
        .unwrap_or(c"".as_ptr())
}

/// Records a failure of `call` and returns its negative errno.
pub fn fail(call: &'static str, e: &CError) -> c_int {
    let n = e.errno();
    tracing::debug!(call, errno = n, error = %e, "homars call failed");
    set_last_error(format!("{call}: {e}"));
    -n
}

/// The message of a caught panic.
pub fn panic_message(p: &(dyn Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

/// The fixed text of the codes homars gives a meaning of its own to.
fn fixed_text(n: c_int) -> Option<&'static CStr> {
    Some(match n {
        0 => c"success",
        libc::ETIMEDOUT => c"timed out waiting for the message",
        libc::EHOSTUNREACH => c"the peer is not responding (presumed dead)",
        libc::EPROTO => c"the peer runs another transport design (Homa vs SIRD)",
        libc::EMSGSIZE => c"message exceeds the maximum message size",
        libc::ENOMSG => c"no RPC is outstanding",
        libc::ESHUTDOWN => c"the endpoint is shut down",
        libc::EINVAL => c"invalid argument (NULL pointer, bad address, bad configuration)",
        libc::EPERM => c"permission needed (raw IP needs root or CAP_NET_RAW)",
        libc::ENOENT => c"no such RPC (finished, failed, aborted, or never existed)",
        libc::EALREADY => c"not a request awaiting a reply (already answered?)",
        libc::ENOBUFS => c"the endpoint is at one of its limits; try again later",
        libc::EIO => c"I/O or internal error",
        libc::ECONNRESET => c"the peer reset the stream",
        libc::ECONNREFUSED => c"the peer refused the stream (streams disabled there, or a limit)",
        libc::ENOTCONN => c"the peer never accepted the stream (dead, or without stream support)",
        libc::EPIPE => c"the stream is finished: no more messages can be sent",
        _ => return None,
    })
}

/// The text for `homars_strerror(err)`; `err` may be negative or positive.
pub fn strerror_ptr(err: c_int) -> *const c_char {
    let n = err.checked_abs().unwrap_or(c_int::MAX);
    if let Some(t) = fixed_text(n) {
        return t.as_ptr();
    }
    let text = std::io::Error::from_raw_os_error(n).to_string();
    // Rust adds " (os error N)"; C's strerror does not.
    let text = match text.rfind(" (os error ") {
        Some(i) => text[..i].to_string(),
        None => text,
    };
    let c = c_string(text);
    STRERROR
        .try_with(|slot| {
            *slot.borrow_mut() = c;
            slot.borrow().as_ptr()
        })
        .unwrap_or(c"unknown error".as_ptr())
}

#[cfg(test)]
mod tests {
    use super::*;
    use homa::RpcId;
    use std::ffi::CStr;

    /// Every variant of `homa::Error` and the code it must map to (the
    /// README's table): a changed mapping fails here. (A variant added to
    /// the runtime maps to EIO until it is listed.)
    #[test]
    fn every_runtime_error_has_its_errno() {
        let id = RpcId {
            id: 2,
            peer: "127.0.0.1:1".parse().unwrap(),
        };
        let cases: Vec<(homa::Error, c_int)> = vec![
            (homa::Error::Timeout, libc::ETIMEDOUT),
            (homa::Error::PeerDead, libc::EHOSTUNREACH),
            (homa::Error::DesignMismatch, libc::EPROTO),
            (
                homa::Error::MessageTooLong { len: 2, max: 1 },
                libc::EMSGSIZE,
            ),
            (
                homa::Error::ResponseTooLong { len: 2, max: 1 },
                libc::EMSGSIZE,
            ),
            (homa::Error::NothingOutstanding, libc::ENOMSG),
            (homa::Error::Closed, libc::ESHUTDOWN),
            (homa::Error::BadAddress("x".into()), libc::EINVAL),
            (homa::Error::PermissionDenied("x".into()), libc::EPERM),
            (homa::Error::UnknownRpc(id), libc::ENOENT),
            (homa::Error::NotAwaitingReply(id), libc::EALREADY),
            (homa::Error::Limit("max_rpcs"), libc::ENOBUFS),
            (homa::Error::Config("x".into()), libc::EINVAL),
            (
                homa::Error::Io(std::io::Error::from_raw_os_error(libc::EADDRINUSE)),
                libc::EADDRINUSE,
            ),
            (homa::Error::Io(std::io::Error::other("no code")), libc::EIO),
        ];
        for (e, want) in cases {
            assert_eq!(errno_of(&e), want, "{e:?}");
            assert_eq!(CError::from(e).errno(), want);
        }
        assert_eq!(CError::Null("x").errno(), libc::EINVAL);
        assert_eq!(CError::Invalid("x".into()).errno(), libc::EINVAL);
        assert_eq!(CError::Panic("x".into()).errno(), libc::EIO);
    }

    fn text(p: *const c_char) -> String {
        // SAFETY: the functions under test return NUL-terminated strings
        // that live at least until the next call on this thread.
        unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_string()
    }

    #[test]
    fn strerror_takes_either_sign_and_any_code() {
        assert_eq!(
            text(strerror_ptr(-libc::ETIMEDOUT)),
            text(strerror_ptr(libc::ETIMEDOUT))
        );
        assert!(text(strerror_ptr(-libc::ESHUTDOWN)).contains("shut down"));
        let in_use = text(strerror_ptr(-libc::EADDRINUSE));
        assert!(
            in_use.contains("in use") && !in_use.contains("os error"),
            "{in_use}"
        );
        assert!(!text(strerror_ptr(c_int::MIN)).is_empty());
        assert!(!text(strerror_ptr(123_456)).is_empty());
    }

    #[test]
    fn failures_are_recorded_per_thread() {
        let n = fail("homars_test", &CError::Null("addr"));
        assert_eq!(n, -libc::EINVAL);
        assert_eq!(text(last_error_ptr()), "homars_test: addr is NULL");
        std::thread::spawn(|| assert_eq!(text(last_error_ptr()), ""))
            .join()
            .unwrap();
        set_last_error("with\0nul".into());
        assert_eq!(text(last_error_ptr()), "with\u{fffd}nul");
    }
}
