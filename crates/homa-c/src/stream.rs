//! Streams in the C API (`homars_stream_*`): thin wrappers of
//! [`homa::Stream`] with the conventions of the rest of the library.

use crate::{bytes_in, endpoint, guard, msg_out, text, timeout, CError, HomarsMsg, HomarsRpc};
use std::ffi::{c_char, c_int, c_void};

/// `homars_stream`: one end of a stream (opaque to C). Freed with
/// `homars_stream_close`.
#[derive(Debug)]
pub struct HomarsStream {
    stream: homa::Stream,
}

/// The stream behind `s`.
///
/// # Safety
/// `s` is NULL or a live stream from this library.
unsafe fn stream<'a>(s: *const HomarsStream) -> Result<&'a homa::Stream, CError> {
    // SAFETY: by the contract, non-NULL means live (shared access only).
    Ok(&unsafe { s.as_ref() }.ok_or(CError::Null("stream"))?.stream)
}

/// Clears a stream out-parameter and returns it checked.
///
/// # Safety
/// `out` is NULL or points to a writable `homars_stream *`.
unsafe fn stream_out<'a>(out: *mut *mut HomarsStream) -> Result<&'a mut *mut HomarsStream, CError> {
    // SAFETY: non-NULL means writable by the contract.
    let out = unsafe { out.as_mut() }.ok_or(CError::Null("stream"))?;
    *out = std::ptr::null_mut();
    Ok(out)
}

fn boxed(stream: homa::Stream) -> *mut HomarsStream {
    Box::into_raw(Box::new(HomarsStream { stream }))
}

/// Opens a stream to `addr` ("ip:port"); `*out` receives it. Returns 0.
/// Returns at once; a peer that refuses or never answers makes the
/// stream's calls fail (`-ECONNREFUSED`, `-ENOTCONN`).
///
/// # Safety
/// `ep` is NULL or live; `addr` NULL or a C string; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn homars_stream_open(
    ep: *mut crate::HomarsEndpoint,
    addr: *const c_char,
    out: *mut *mut HomarsStream,
) -> c_int {
    guard("homars_stream_open", || {
        // SAFETY: NULL or writable by the contract.
        let out = unsafe { stream_out(out) }?;
        // SAFETY: NULL or live by the contract.
        let e = unsafe { endpoint(ep) }?;
        // SAFETY: NULL or a C string by the contract.
        let dest = crate::parse_addr(unsafe { text(addr, "addr") }?)?;
        *out = boxed(e.ep.open_stream(dest)?);
        Ok(0)
    })
}

/// Waits (`timeout_ms`: -1 for ever, 0 only looks) for a stream a peer
/// opened; `*out` receives it. Returns 0.
///
/// # Safety
/// `ep` is NULL or live; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn homars_stream_accept(
    ep: *mut crate::HomarsEndpoint,
    timeout_ms: c_int,
    out: *mut *mut HomarsStream,
) -> c_int {
    guard("homars_stream_accept", || {
        // SAFETY: NULL or writable by the contract.
        let out = unsafe { stream_out(out) }?;
        // SAFETY: NULL or live by the contract.
        let e = unsafe { endpoint(ep) }?;
        *out = boxed(e.ep.accept_stream(timeout(timeout_ms)?)?);
        Ok(0)
    })
}

/// Sends a copy of the `len` bytes at `buf`, waiting at most `timeout_ms`
/// (-1 for ever; 0: `-ENOBUFS` at once if the window is full) for room.
/// Returns 0; `-EPIPE` after [`homars_stream_finish`].
///
/// # Safety
/// `s` is NULL or live; `buf` NULL or `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn homars_stream_send(
    s: *mut HomarsStream,
    buf: *const c_void,
    len: usize,
    timeout_ms: c_int,
) -> c_int {
    guard("homars_stream_send", || {
        // SAFETY: NULL or live by the contract.
        let s = unsafe { stream(s) }?;
        // SAFETY: NULL or `len` readable bytes by the contract.
        let m = unsafe { bytes_in(buf, len, "buf") }?;
        match timeout(timeout_ms)? {
            Some(t) if t.is_zero() => s.try_send(m)?,
            t => s.send_timeout(m, t)?,
        }
        Ok(0)
    })
}

/// Waits (`timeout_ms`) for the next message: returns 1 with `*msg` set
/// (free it with `homars_msg_free`; its `rpc` names the stream), or 0 with
/// `*msg` NULL when the peer finished.
///
/// # Safety
/// `s` is NULL or live; `msg` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn homars_stream_recv(
    s: *mut HomarsStream,
    timeout_ms: c_int,
    msg: *mut *mut HomarsMsg,
) -> c_int {
    guard("homars_stream_recv", || {
        // SAFETY: NULL or writable by the contract.
        let out = unsafe { msg_out(msg) }?;
        // SAFETY: NULL or live by the contract.
        let s = unsafe { stream(s) }?;
        match s.recv(timeout(timeout_ms)?)? {
            Some(m) => {
                *out = HomarsMsg::boxed(HomarsRpc::from_id(s.id())?, 0, m);
                Ok(1)
            }
            None => Ok(0),
        }
    })
}

/// Ends our direction of the stream (the peer's receive returns 0 after
/// every message sent before). Returns 0. Idempotent.
///
/// # Safety
/// `s` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn homars_stream_finish(s: *mut HomarsStream) -> c_int {
    guard("homars_stream_finish", || {
        // SAFETY: NULL or live by the contract.
        unsafe { stream(s) }?.finish()?;
        Ok(0)
    })
}

/// Frees the stream: aborts it unless [`homars_stream_finish`] was called
/// (the peer's calls then fail with `-ECONNRESET`). The last call on `s`.
/// NULL is ignored.
///
/// # Safety
/// `s` is NULL or live, and not used again.
#[no_mangle]
pub unsafe extern "C" fn homars_stream_close(s: *mut HomarsStream) {
    if s.is_null() {
        return;
    }
    guard("homars_stream_close", || {
        // SAFETY: non-NULL and from this library's Box by the contract,
        // freed only here.
        drop(unsafe { Box::from_raw(s) });
        Ok(0)
    });
}
