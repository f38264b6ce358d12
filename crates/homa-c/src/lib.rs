//! The C API of the homa runtime: `libhomars` (shared and static) and its
//! header `include/homars.h`. A thin layer: each function checks and
//! converts its arguments, calls the blocking [`homa::Endpoint`], and turns
//! the outcome into C values; every protocol decision stays in the runtime.
//!
//! Conventions (the header documents them for C users):
//! - Functions returning `int` return 0 (or a count/descriptor) on success
//!   and a **negative errno value** on failure; [`homars_strerror`] names
//!   the code and [`homars_last_error`] gives this thread's last failure in
//!   a sentence with the details.
//! - Every pointer argument is checked: NULL gives `-EINVAL`, never a
//!   crash. Input buffers are copied before the call returns. Received
//!   messages are heap `homars_msg`s the caller frees with
//!   [`homars_msg_free`].
//! - No panic crosses into C: each function runs under `catch_unwind`, and
//!   a caught panic returns `-EIO`.
//! - Every function may be called from any thread, concurrently on the same
//!   endpoint, except [`homars_close`], which must be the last call on it.
#![deny(missing_docs)]

mod error;
mod stream;
mod types;

pub use error::{errno_of, CError};
pub use stream::HomarsStream;
pub use types::{
    parse_addr, HomarsEndpoint, HomarsMetrics, HomarsMsg, HomarsRpc, HOMARS_ADDRSTRLEN,
};

use bytes::Bytes;
use error::fail;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::os::fd::AsRawFd;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

/// Runs `f`, turning an error or a panic into a negative errno (recorded
/// for [`homars_last_error`]). The body of every exported function.
fn guard(call: &'static str, f: impl FnOnce() -> Result<c_int, CError>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(n)) => n,
        Ok(Err(e)) => fail(call, &e),
        Err(p) => fail(call, &CError::Panic(error::panic_message(&*p))),
    }
}

/// The endpoint behind `ep`.
///
/// # Safety
/// `ep` is NULL or a live endpoint from [`homars_bind`].
unsafe fn endpoint<'a>(ep: *const HomarsEndpoint) -> Result<&'a HomarsEndpoint, CError> {
    // SAFETY: by the contract, non-NULL means live (and never mutably
    // borrowed: the API only hands out shared access).
    unsafe { ep.as_ref() }.ok_or(CError::Null("ep"))
}

/// The UTF-8 text of a C string argument.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string that outlives `'a`.
unsafe fn text<'a>(p: *const c_char, what: &'static str) -> Result<&'a str, CError> {
    if p.is_null() {
        return Err(CError::Null(what));
    }
    // SAFETY: non-NULL and NUL-terminated by the contract.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| CError::Invalid(format!("{what} is not UTF-8")))
}

/// A copy of the `len` bytes at `buf` (`buf` may be NULL when `len` is 0).
///
/// # Safety
/// `buf` is NULL or points to `len` readable bytes.
unsafe fn bytes_in(buf: *const c_void, len: usize, what: &'static str) -> Result<Bytes, CError> {
    if len == 0 {
        return Ok(Bytes::new());
    }
    if buf.is_null() {
        return Err(CError::Null(what));
    }
    if len > isize::MAX as usize {
        return Err(CError::Invalid(format!(
            "{what}: length {len} is too large"
        )));
    }
    // SAFETY: non-NULL, `len` readable bytes by the contract, and `len`
    // fits in isize.
    let s = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) };
    Ok(Bytes::copy_from_slice(s))
}

/// The RPC named by a `homars_rpc` argument.
///
/// # Safety
/// `rpc` is NULL or points to a readable `homars_rpc`.
unsafe fn rpc_in(rpc: *const HomarsRpc) -> Result<homa::RpcId, CError> {
    // SAFETY: non-NULL means readable by the contract.
    unsafe { rpc.as_ref() }.ok_or(CError::Null("rpc"))?.to_id()
}

/// A timeout in milliseconds: -1 waits for ever, 0 only looks.
fn timeout(ms: c_int) -> Result<Option<Duration>, CError> {
    match ms {
        -1 => Ok(None),
        ms if ms >= 0 => Ok(Some(Duration::from_millis(ms as u64))),
        ms => Err(CError::Invalid(format!(
            "timeout_ms {ms} (use -1 to wait for ever, 0 to poll)"
        ))),
    }
}

/// Clears a message out-parameter (so it is NULL on failure) and returns
/// it checked.
///
/// # Safety
/// `out` is NULL or points to a writable `homars_msg *`.
unsafe fn msg_out<'a>(out: *mut *mut HomarsMsg) -> Result<&'a mut *mut HomarsMsg, CError> {
    // SAFETY: non-NULL means writable by the contract.
    let out = unsafe { out.as_mut() }.ok_or(CError::Null("msg"))?;
    *out = std::ptr::null_mut();
    Ok(out)
}

/// Writes `text` into `buf` (`cap` bytes) the way `snprintf` does and
/// returns its full length.
///
/// # Safety
/// `buf` is NULL (then `cap` must be 0) or points to `cap` writable bytes.
unsafe fn text_out(text: &str, buf: *mut c_char, cap: usize) -> Result<c_int, CError> {
    let len = c_int::try_from(text.len())
        .map_err(|_| CError::Invalid("text longer than INT_MAX".into()))?;
    if cap == 0 {
        return Ok(len);
    }
    if buf.is_null() {
        return Err(CError::Null("buf"));
    }
    let n = text.len().min(cap - 1);
    // SAFETY: `buf` has `cap` > n writable bytes by the contract; the
    // source is `n` bytes of `text`; the two cannot overlap (ours is a
    // Rust string).
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr().cast::<c_char>(), buf, n);
        *buf.add(n) = 0;
    }
    Ok(len)
}

/// The library's version, e.g. "0.1.0" (a static string).
#[no_mangle]
pub extern "C" fn homars_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// Opens an endpoint on `addr` ("ip:port"; port 0 picks a free port) with
/// the configuration in `config_toml` (the runtime's TOML, missing keys at
/// their defaults; NULL for all defaults). On success stores it in `*out`
/// and returns 0.
///
/// # Safety
/// `addr` and `config_toml` are NULL or NUL-terminated strings; `out` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn homars_bind(
    addr: *const c_char,
    config_toml: *const c_char,
    out: *mut *mut HomarsEndpoint,
) -> c_int {
    guard("homars_bind", || {
        // SAFETY: non-NULL means writable by the contract.
        let out = unsafe { out.as_mut() }.ok_or(CError::Null("out"))?;
        *out = std::ptr::null_mut();
        // SAFETY: NULL or NUL-terminated by the contract.
        let addr = parse_addr(unsafe { text(addr, "addr") }?)?;
        let config = if config_toml.is_null() {
            homa::Config::default()
        } else {
            // SAFETY: NUL-terminated by the contract.
            homa::Config::from_toml_str(unsafe { text(config_toml, "config_toml") }?)?
        };
        let ep = homa::Endpoint::bind(addr, config)?;
        *out = Box::into_raw(Box::new(HomarsEndpoint { ep }));
        Ok(0)
    })
}

/// Writes the endpoint's bound address ("ip:port") into `buf` of `cap`
/// bytes, like `snprintf`: NUL-terminated, truncated if needed, and returns
/// the address's full length (so `cap` must exceed it). `buf` may be NULL
/// if `cap` is 0.
///
/// # Safety
/// `ep` is NULL or live; `buf` is NULL or has `cap` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn homars_local_addr(
    ep: *const HomarsEndpoint,
    buf: *mut c_char,
    cap: usize,
) -> c_int {
    guard("homars_local_addr", || {
        // SAFETY: NULL or live by the contract.
        let e = unsafe { endpoint(ep) }?;
        let a = e.ep.local_addr().to_string();
        // SAFETY: `buf` has `cap` writable bytes by the contract.
        unsafe { text_out(&a, buf, cap) }
    })
}

/// Starts an RPC: sends a copy of the `len` bytes at `buf` to `dest`
/// ("ip:port") and stores the RPC's name in `*rpc` (for
/// [`homars_recv_response`] / [`homars_abort`]). Returns 0.
///
/// # Safety
/// `ep` is NULL or live; `dest` is NULL or NUL-terminated; `buf` is NULL or
/// has `len` readable bytes; `rpc` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn homars_send_request(
    ep: *mut HomarsEndpoint,
    dest: *const c_char,
    buf: *const c_void,
    len: usize,
    rpc: *mut HomarsRpc,
) -> c_int {
    guard("homars_send_request", || {
        // SAFETY: NULL or live by the contract.
        let e = unsafe { endpoint(ep) }?;
        // SAFETY: non-NULL means writable by the contract.
        let rpc = unsafe { rpc.as_mut() }.ok_or(CError::Null("rpc"))?;
        // SAFETY: NULL or NUL-terminated by the contract.
        let dest = parse_addr(unsafe { text(dest, "dest") }?)?;
        // SAFETY: NULL or `len` readable bytes by the contract.
        let msg = unsafe { bytes_in(buf, len, "buf") }?;
        let id = e.ep.send_request(dest, msg)?;
        match HomarsRpc::from_id(id) {
            Ok(r) => *rpc = r,
            Err(err) => {
                let _ = e.ep.abort(id);
                return Err(err);
            }
        }
        Ok(0)
    })
}

/// Sends a request and waits for its response (at most `timeout_ms`; -1
/// waits for ever). On timeout the RPC is aborted. On success stores the
/// response in `*response` (free it with [`homars_msg_free`]) and returns 0.
///
/// # Safety
/// As [`homars_send_request`]; `response` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn homars_call(
    ep: *mut HomarsEndpoint,
    dest: *const c_char,
    buf: *const c_void,
    len: usize,
    timeout_ms: c_int,
    response: *mut *mut HomarsMsg,
) -> c_int {
    guard("homars_call", || {
        // SAFETY: NULL or writable by the contract.
        let out = unsafe { msg_out(response) }?;
        // SAFETY: NULL or live by the contract.
        let e = unsafe { endpoint(ep) }?;
        // SAFETY: NULL or NUL-terminated by the contract.
        let dest = parse_addr(unsafe { text(dest, "dest") }?)?;
        // SAFETY: NULL or `len` readable bytes by the contract.
        let msg = unsafe { bytes_in(buf, len, "buf") }?;
        let (id, resp) = match timeout(timeout_ms)? {
            Some(t) => {
                // `call`, as the runtime defines it (aborts on timeout);
                // the id is needed for the message, so by its parts.
                let id = e.ep.send_request(dest, msg)?;
                match e.ep.recv_response(id, Some(t)) {
                    Err(homa::Error::Timeout) => {
                        let _ = e.ep.abort(id);
                        return Err(homa::Error::Timeout.into());
                    }
                    r => (id, r?),
                }
            }
            None => {
                let id = e.ep.send_request(dest, msg)?;
                (id, e.ep.recv_response(id, None)?)
            }
        };
        *out = HomarsMsg::boxed(HomarsRpc::from_id(id)?, 0, resp);
        Ok(0)
    })
}

/// Waits (at most `timeout_ms`; -1 for ever, 0 only looks) for the
/// response of `rpc`. On success stores it in `*response` and returns 0;
/// if the RPC failed, returns its error (e.g. `-EHOSTUNREACH`).
///
/// # Safety
/// `ep` is NULL or live; `rpc` is NULL or readable; `response` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn homars_recv_response(
    ep: *mut HomarsEndpoint,
    rpc: *const HomarsRpc,
    timeout_ms: c_int,
    response: *mut *mut HomarsMsg,
) -> c_int {
    guard("homars_recv_response", || {
        // SAFETY: NULL or writable by the contract.
        let out = unsafe { msg_out(response) }?;
        // SAFETY: NULL or live by the contract.
        let e = unsafe { endpoint(ep) }?;
        // SAFETY: NULL or readable by the contract.
        let id = unsafe { rpc_in(rpc) }?;
        let resp = e.ep.recv_response(id, timeout(timeout_ms)?)?;
        *out = HomarsMsg::boxed(HomarsRpc::from_id(id)?, 0, resp);
        Ok(0)
    })
}

/// Waits (at most `timeout_ms`) for whichever outstanding RPC of this
/// endpoint finishes first (except those another thread waits for by id).
/// Stores it in `*response` and returns 0; an RPC that failed comes as a
/// message with `status` set to its negative errno (and no bytes). With no
/// RPC outstanding returns `-ENOMSG`.
///
/// # Safety
/// `ep` is NULL or live; `response` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn homars_recv_any_response(
    ep: *mut HomarsEndpoint,
    timeout_ms: c_int,
    response: *mut *mut HomarsMsg,
) -> c_int {
    guard("homars_recv_any_response", || {
        // SAFETY: NULL or writable by the contract.
        let out = unsafe { msg_out(response) }?;
        // SAFETY: NULL or live by the contract.
        let e = unsafe { endpoint(ep) }?;
        let (id, r) = e.ep.recv_any_response(timeout(timeout_ms)?)?;
        let rpc = HomarsRpc::from_id(id)?;
        *out = match r {
            Ok(bytes) => HomarsMsg::boxed(rpc, 0, bytes),
            Err(err) => {
                let err = CError::from(err);
                let status = -err.errno();
                error::set_last_error(format!("homars_recv_any_response: {id}: {err}"));
                HomarsMsg::boxed(rpc, status, Bytes::new())
            }
        };
        Ok(0)
    })
}

/// Waits (at most `timeout_ms`) for the next request. Stores it in
/// `*request` (its `rpc` names the RPC for [`homars_reply`]) and returns 0.
///
/// # Safety
/// `ep` is NULL or live; `request` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn homars_recv_request(
    ep: *mut HomarsEndpoint,
    timeout_ms: c_int,
    request: *mut *mut HomarsMsg,
) -> c_int {
    guard("homars_recv_request", || {
        // SAFETY: NULL or writable by the contract.
        let out = unsafe { msg_out(request) }?;
        // SAFETY: NULL or live by the contract.
        let e = unsafe { endpoint(ep) }?;
        let req = e.ep.recv_request(timeout(timeout_ms)?)?;
        let rpc = match HomarsRpc::from_id(req.id) {
            Ok(r) => r,
            Err(err) => {
                let _ = e.ep.abort(req.id);
                return Err(err);
            }
        };
        *out = HomarsMsg::boxed(rpc, 0, req.message);
        Ok(0)
    })
}

/// Answers the request `rpc` with a copy of the `len` bytes at `buf`.
/// Returns 0.
///
/// # Safety
/// `ep` is NULL or live; `rpc` is NULL or readable; `buf` is NULL or has
/// `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn homars_reply(
    ep: *mut HomarsEndpoint,
    rpc: *const HomarsRpc,
    buf: *const c_void,
    len: usize,
) -> c_int {
    guard("homars_reply", || {
        // SAFETY: NULL or live by the contract.
        let e = unsafe { endpoint(ep) }?;
        // SAFETY: NULL or readable by the contract.
        let id = unsafe { rpc_in(rpc) }?;
        // SAFETY: NULL or `len` readable bytes by the contract.
        let msg = unsafe { bytes_in(buf, len, "buf") }?;
        e.ep.reply(id, msg)?;
        Ok(0)
    })
}

/// Abandons an RPC: a client RPC is forgotten (a response that comes is
/// dropped; waiting for it then gives `-ENOENT`), a server RPC is dropped
/// without a reply. Returns 0, or `-ENOENT` if there is no such RPC.
///
/// # Safety
/// `ep` is NULL or live; `rpc` is NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn homars_abort(ep: *mut HomarsEndpoint, rpc: *const HomarsRpc) -> c_int {
    guard("homars_abort", || {
        // SAFETY: NULL or live by the contract.
        let e = unsafe { endpoint(ep) }?;
        // SAFETY: NULL or readable by the contract.
        let id = unsafe { rpc_in(rpc) }?;
        e.ep.abort(id)?;
        Ok(0)
    })
}

/// A descriptor for `epoll`/`poll`/`select`: readable while a request or a
/// client RPC's outcome waits to be collected, and once the endpoint is
/// shut down (level-triggered). Owned by the endpoint: never read, write or
/// close it. Returns it (>= 0).
///
/// # Safety
/// `ep` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn homars_ready_fd(ep: *mut HomarsEndpoint) -> c_int {
    guard("homars_ready_fd", || {
        // SAFETY: NULL or live by the contract.
        let e = unsafe { endpoint(ep) }?;
        Ok(e.ep.ready_fd()?.as_raw_fd())
    })
}

/// Fills `*out` with the endpoint's main counters. Returns 0.
///
/// # Safety
/// `ep` is NULL or live; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn homars_get_metrics(
    ep: *const HomarsEndpoint,
    out: *mut HomarsMetrics,
) -> c_int {
    guard("homars_get_metrics", || {
        // SAFETY: NULL or live by the contract.
        let e = unsafe { endpoint(ep) }?;
        // SAFETY: non-NULL means writable by the contract.
        let out = unsafe { out.as_mut() }.ok_or(CError::Null("out"))?;
        *out = HomarsMetrics::of(&e.ep);
        Ok(0)
    })
}

/// Writes every counter of the endpoint as one JSON object
/// (`{"protocol": {...}, "runtime": {...}}`) into `buf` of `cap` bytes,
/// like `snprintf`, and returns the text's full length.
///
/// # Safety
/// `ep` is NULL or live; `buf` is NULL or has `cap` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn homars_metrics_json(
    ep: *const HomarsEndpoint,
    buf: *mut c_char,
    cap: usize,
) -> c_int {
    guard("homars_metrics_json", || {
        // SAFETY: NULL or live by the contract.
        let e = unsafe { endpoint(ep) }?;
        let json = serde_json::json!({
            "protocol": e.ep.metrics(),
            "runtime": e.ep.runtime_stats(),
        })
        .to_string();
        // SAFETY: `buf` has `cap` writable bytes by the contract.
        unsafe { text_out(&json, buf, cap) }
    })
}

/// Shuts the endpoint down: calls blocked in it (in any thread) return
/// `-ESHUTDOWN`, as do later calls; RPCs in progress are abandoned; the
/// ready descriptor becomes readable. The endpoint must still be closed.
/// Returns 0.
///
/// # Safety
/// `ep` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn homars_shutdown(ep: *mut HomarsEndpoint) -> c_int {
    guard("homars_shutdown", || {
        // SAFETY: NULL or live by the contract.
        let e = unsafe { endpoint(ep) }?;
        e.ep.shutdown();
        Ok(0)
    })
}

/// Shuts the endpoint down (if not yet) and frees it, releasing its port
/// and its ready descriptor. Must be the last call on `ep`: no other thread
/// may be using it or use it afterwards (shut it down and join those
/// threads first). NULL is ignored.
///
/// # Safety
/// `ep` is NULL or live, and not used again.
#[no_mangle]
pub unsafe extern "C" fn homars_close(ep: *mut HomarsEndpoint) {
    if ep.is_null() {
        return;
    }
    guard("homars_close", || {
        // SAFETY: non-NULL and from `homars_bind`'s Box by the contract,
        // freed only here.
        drop(unsafe { Box::from_raw(ep) });
        Ok(0)
    });
}

/// Frees a message from a receive call (or [`homars_call`]), with its
/// bytes. NULL is ignored.
///
/// # Safety
/// `msg` is NULL or a message from this library not yet freed.
#[no_mangle]
pub unsafe extern "C" fn homars_msg_free(msg: *mut HomarsMsg) {
    if msg.is_null() {
        return;
    }
    guard("homars_msg_free", || {
        // SAFETY: from `HomarsMsg::boxed` and not yet freed, by the
        // contract.
        unsafe { HomarsMsg::free(msg) };
        Ok(0)
    });
}

/// A description of an errno value (negative, as the functions return it,
/// or positive). Valid until the next `homars_strerror` call on this thread
/// (static for the codes homars itself returns).
#[no_mangle]
pub extern "C" fn homars_strerror(err: c_int) -> *const c_char {
    catch_unwind(|| error::strerror_ptr(err)).unwrap_or(c"unknown error".as_ptr())
}

/// The most recent failure of a homars call on this thread, in a sentence
/// naming the call and the details (sizes, addresses, configuration
/// mistakes); "" if none. Not cleared by successful calls. Valid until the
/// next failure on this thread.
#[no_mangle]
pub extern "C" fn homars_last_error() -> *const c_char {
    catch_unwind(error::last_error_ptr).unwrap_or(c"".as_ptr())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;
    use std::ptr::{null, null_mut};

    fn last_error() -> String {
        // SAFETY: homars_last_error returns a NUL-terminated string valid
        // until the next failure on this thread.
        unsafe { CStr::from_ptr(homars_last_error()) }
            .to_string_lossy()
            .into_owned()
    }

    fn bind(addr: &str) -> *mut HomarsEndpoint {
        let a = CString::new(addr).unwrap();
        let mut ep = null_mut();
        // SAFETY: valid string and out-pointer.
        let r = unsafe { homars_bind(a.as_ptr(), null(), &mut ep) };
        assert_eq!(r, 0, "{}", last_error());
        ep
    }

    #[test]
    fn panics_become_eio() {
        let r = guard("homars_test", || panic!("boom"));
        assert_eq!(r, -libc::EIO);
        let e = last_error();
        assert!(e.contains("homars_test") && e.contains("boom"), "{e}");
    }

    /// Every function given NULL where a pointer is needed says EINVAL and
    /// names the argument.
    #[test]
    fn null_arguments_are_einval() {
        let ep = bind("127.0.0.1:0");
        let dest = CString::new("127.0.0.1:9").unwrap();
        let mut rpc = HomarsRpc::from_id(homa::RpcId {
            id: 2,
            peer: "127.0.0.1:9".parse().unwrap(),
        })
        .unwrap();
        let mut msg = null_mut();
        let mut m = HomarsMetrics::default();
        let e = -libc::EINVAL;
        // SAFETY: every pointer passed is NULL or valid.
        unsafe {
            let mut out = null_mut();
            assert_eq!(homars_bind(null(), null(), &mut out), e);
            assert!(out.is_null());
            assert!(last_error().contains("addr is NULL"));
            assert_eq!(homars_bind(dest.as_ptr(), null(), null_mut()), e);
            assert_eq!(homars_local_addr(null(), null_mut(), 0), e);
            assert_eq!(homars_local_addr(ep, null_mut(), 10), e);
            assert_eq!(
                homars_send_request(null_mut(), dest.as_ptr(), null(), 0, &mut rpc),
                e
            );
            assert_eq!(homars_send_request(ep, null(), null(), 0, &mut rpc), e);
            assert_eq!(
                homars_send_request(ep, dest.as_ptr(), null(), 5, &mut rpc),
                e
            );
            assert!(last_error().contains("buf is NULL"));
            assert_eq!(
                homars_send_request(ep, dest.as_ptr(), null(), 0, null_mut()),
                e
            );
            assert_eq!(homars_call(ep, dest.as_ptr(), null(), 0, 0, null_mut()), e);
            assert_eq!(
                homars_call(null_mut(), dest.as_ptr(), null(), 0, 0, &mut msg),
                e
            );
            assert_eq!(homars_recv_response(ep, null(), 0, &mut msg), e);
            assert_eq!(homars_recv_response(ep, &rpc, 0, null_mut()), e);
            assert_eq!(homars_recv_any_response(null_mut(), 0, &mut msg), e);
            assert_eq!(homars_recv_any_response(ep, 0, null_mut()), e);
            assert_eq!(homars_recv_request(null_mut(), 0, &mut msg), e);
            assert_eq!(homars_recv_request(ep, 0, null_mut()), e);
            assert_eq!(homars_reply(null_mut(), &rpc, null(), 0), e);
            assert_eq!(homars_reply(ep, null(), null(), 0), e);
            assert_eq!(homars_reply(ep, &rpc, null(), 1), e);
            assert_eq!(homars_abort(null_mut(), &rpc), e);
            assert_eq!(homars_abort(ep, null()), e);
            assert_eq!(homars_ready_fd(null_mut()), e);
            assert_eq!(homars_get_metrics(null(), &mut m), e);
            assert_eq!(homars_get_metrics(ep, null_mut()), e);
            assert_eq!(homars_metrics_json(null(), null_mut(), 0), e);
            assert_eq!(homars_shutdown(null_mut()), e);
            assert!(msg.is_null());
            homars_msg_free(null_mut());
            homars_close(null_mut());
            homars_close(ep);
        }
    }

    #[test]
    fn bad_arguments_are_einval() {
        let ep = bind("127.0.0.1:0");
        let mut out = null_mut();
        let mut msg = null_mut();
        let bad = CString::new("not an address").unwrap();
        let any = CString::new("127.0.0.1:0").unwrap();
        let toml = CString::new("no_such_key = 1").unwrap();
        // SAFETY: every pointer passed is valid.
        unsafe {
            assert_eq!(homars_bind(bad.as_ptr(), null(), &mut out), -libc::EINVAL);
            assert!(last_error().contains("not an address"), "{}", last_error());
            assert_eq!(
                homars_bind(any.as_ptr(), toml.as_ptr(), &mut out),
                -libc::EINVAL
            );
            assert!(last_error().contains("no_such_key"), "{}", last_error());
            assert!(out.is_null());
            assert_eq!(homars_recv_request(ep, -2, &mut msg), -libc::EINVAL);
            assert!(last_error().contains("timeout_ms -2"));
            let mut rpc = HomarsRpc {
                id: 2,
                peer: [b'x' as c_char; HOMARS_ADDRSTRLEN],
            };
            assert_eq!(homars_abort(ep, &rpc), -libc::EINVAL);
            rpc.peer[0] = 0;
            assert_eq!(homars_abort(ep, &rpc), -libc::EINVAL);
            homars_close(ep);
        }
    }

    /// Request, reply, response over loopback through the C functions, and
    /// the text outputs in snprintf style.
    #[test]
    fn echo_through_the_c_functions() {
        let server = bind("127.0.0.1:0");
        let client = bind("127.0.0.1:0");
        let mut addr = [0 as c_char; HOMARS_ADDRSTRLEN];
        // SAFETY: every pointer passed is valid; messages are freed once.
        unsafe {
            let n = homars_local_addr(server, addr.as_mut_ptr(), addr.len());
            assert!(n > 0);
            let text = CStr::from_ptr(addr.as_ptr()).to_str().unwrap();
            assert_eq!(text.len(), n as usize);
            assert!(text.starts_with("127.0.0.1:"));
            // Truncation, as snprintf.
            let mut small = [1 as c_char; 4];
            assert_eq!(homars_local_addr(server, small.as_mut_ptr(), 4), n);
            assert_eq!(CStr::from_ptr(small.as_ptr()).to_bytes(), b"127");

            let mut rpc = std::mem::zeroed::<HomarsRpc>();
            let body = b"hello";
            assert_eq!(
                homars_send_request(client, addr.as_ptr(), body.as_ptr().cast(), 5, &mut rpc),
                0
            );
            let mut req = null_mut();
            assert_eq!(
                homars_recv_request(server, 5_000, &mut req),
                0,
                "{}",
                last_error()
            );
            let r = &*req;
            assert_eq!(std::slice::from_raw_parts(r.data, r.len), body);
            // The server's id of the RPC is the client's plus one (odd).
            assert_eq!((r.rpc.id, r.status), (rpc.id | 1, 0));
            assert_eq!(homars_reply(server, &r.rpc, r.data.cast(), r.len), 0);
            homars_msg_free(req);
            let mut resp = null_mut();
            assert_eq!(homars_recv_response(client, &rpc, 5_000, &mut resp), 0);
            assert_eq!(std::slice::from_raw_parts((*resp).data, (*resp).len), body);
            homars_msg_free(resp);
            // Collected once: then unknown.
            assert_eq!(
                homars_recv_response(client, &rpc, 0, &mut resp),
                -libc::ENOENT
            );
            assert!(resp.is_null());

            let mut m = HomarsMetrics::default();
            assert_eq!(homars_get_metrics(client, &mut m), 0);
            assert_eq!((m.requests_started, m.responses_delivered), (1, 1));
            let need = homars_metrics_json(server, null_mut(), 0);
            assert!(need > 0);
            // (The endpoint is live: a counter may grow a digit between
            // the two calls, so leave room.)
            let mut buf = vec![0 as c_char; need as usize + 256];
            let got = homars_metrics_json(server, buf.as_mut_ptr(), buf.len());
            assert!(
                got >= need && (got as usize) < buf.len(),
                "{got} for {need}"
            );
            let json: serde_json::Value =
                serde_json::from_str(CStr::from_ptr(buf.as_ptr()).to_str().unwrap()).unwrap();
            assert_eq!(json["protocol"]["requests_delivered"], 1);
            assert!(json["runtime"]["packets_received"].as_u64().unwrap() >= 1);
            homars_close(server);
            homars_close(client);
        }
    }
}
