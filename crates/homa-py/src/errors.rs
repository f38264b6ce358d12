//! From [`homa::Error`] to the exception classes of `homars.errors`.
//!
//! The classes are written in Python (so that, say, `HomaTimeout` can be
//! both a `HomaError` and a builtin `TimeoutError`); this module looks them
//! up once and raises instances of them, with the error's details as
//! attributes.

use crate::types::RpcId;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyModule;

/// The `homars.errors` module, imported on the first error.
static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// An instance of `homars.errors.<class>` built from `args`, with `attrs`
/// set on it.
fn build<'py>(
    py: Python<'py>,
    class: &str,
    args: impl pyo3::call::PyCallArgs<'py>,
    attrs: &[(&str, Bound<'py, PyAny>)],
) -> PyResult<PyErr> {
    let module = ERRORS.get_or_try_init(py, || py.import("homars.errors").map(|m| m.unbind()))?;
    let exc = module.bind(py).getattr(class)?.call1(args)?;
    for (name, value) in attrs {
        exc.setattr(*name, value)?;
    }
    Ok(PyErr::from_value(exc))
}

/// Builds the exception, or says why it could not be built.
fn or_fallback(py: Python<'_>, what: String, built: PyResult<PyErr>) -> PyErr {
    built.unwrap_or_else(|e| {
        let err = PyRuntimeError::new_err(format!(
            "{what} (and the homars exception for it could not be raised)"
        ));
        err.set_cause(py, Some(e));
        err
    })
}

/// The Python exception for a runtime error.
pub(crate) fn to_py(py: Python<'_>, e: homa::Error) -> PyErr {
    let text = e.to_string();
    let t = text.as_str();
    let built = match e {
        homa::Error::Timeout => build(py, "HomaTimeout", (t,), &[]),
        homa::Error::PeerDead => build(py, "PeerDead", (t,), &[]),
        homa::Error::DesignMismatch => build(py, "DesignMismatch", (t,), &[]),
        homa::Error::MessageTooLong { len, max } => sized(py, "MessageTooLarge", &text, len, max),
        homa::Error::ResponseTooLong { len, max } => {
            sized(py, "ResponseTooLarge", &text, len as usize, max)
        }
        homa::Error::NothingOutstanding => build(py, "NothingOutstanding", (t,), &[]),
        homa::Error::Closed => build(py, "Shutdown", (t,), &[]),
        homa::Error::BadAddress(_) => build(py, "BadAddress", (t,), &[]),
        homa::Error::PermissionDenied(_) => build(py, "PermissionDenied", (t,), &[]),
        homa::Error::UnknownRpc(id) => with_id(py, "UnknownRpc", &text, id),
        homa::Error::NotAwaitingReply(id) => with_id(py, "NotAwaitingReply", &text, id),
        homa::Error::Limit(which) => limit(py, &text, which),
        homa::Error::Config(_) => build(py, "ConfigError", (t,), &[]),
        homa::Error::StreamReset => build(py, "StreamReset", (t,), &[]),
        homa::Error::StreamRefused => build(py, "StreamRefused", (t,), &[]),
        homa::Error::StreamOpenTimeout => build(py, "StreamOpenTimeout", (t,), &[]),
        homa::Error::StreamFinished => build(py, "StreamFinished", (t,), &[]),
        homa::Error::Io(io) => match io.raw_os_error() {
            // OSError's two-argument form sets `errno` and `strerror`.
            Some(code) => build(py, "HomaOSError", (code, t), &[]),
            None => build(py, "HomaOSError", (t,), &[]),
        },
        // `homa::Error` is non-exhaustive: a variant newer than this table
        // is still a HomaError, with the runtime's text.
        _ => build(py, "HomaError", (t,), &[]),
    };
    or_fallback(py, text, built)
}

/// An exception with the message's length and the limit it exceeds.
fn sized(py: Python<'_>, class: &str, text: &str, len: usize, max: u32) -> PyResult<PyErr> {
    let len = len.into_pyobject(py)?.into_any();
    let max = max.into_pyobject(py)?.into_any();
    build(py, class, (text,), &[("length", len), ("limit", max)])
}

/// `LimitReached`, naming the limit.
fn limit(py: Python<'_>, text: &str, which: &'static str) -> PyResult<PyErr> {
    let which = which.into_pyobject(py)?.into_any();
    build(py, "LimitReached", (text,), &[("limit", which)])
}

/// An exception about one RPC, which it names as `rpc_id`.
fn with_id(py: Python<'_>, class: &str, text: &str, id: homa::RpcId) -> PyResult<PyErr> {
    let id = Bound::new(py, RpcId::from(id))?.into_any();
    build(py, class, (text,), &[("rpc_id", id)])
}

/// Sets `rpc_id` on an exception raised for one RPC's outcome (as
/// `recv_any_response` raises it), so the caller knows which RPC failed.
pub(crate) fn name_rpc(py: Python<'_>, err: &PyErr, id: homa::RpcId) {
    if let Ok(id) = Bound::new(py, RpcId::from(id)) {
        // An exception object always takes attributes; if this one would
        // not, the error itself is still what matters.
        let _ = err.value(py).setattr("rpc_id", id);
    }
}

/// `homars.InvalidArgument` (a `ValueError`) with `text`.
pub(crate) fn invalid_argument(py: Python<'_>, text: String) -> PyErr {
    let built = build(py, "InvalidArgument", (text.as_str(),), &[]);
    or_fallback(py, text, built)
}

/// `homars.BadAddress` (a `ValueError`) with `text`.
pub(crate) fn bad_address(py: Python<'_>, text: String) -> PyErr {
    to_py(py, homa::Error::BadAddress(text))
}
