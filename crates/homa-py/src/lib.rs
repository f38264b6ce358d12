//! Python bindings of the homa runtime: the native module `homars._native`
//! of the Python package `homars` (built with maturin; see `README.md`).
//!
//! Thin by design: every protocol decision is the runtime's ([`homa`]).
//! This crate converts values (addresses, messages, configurations,
//! counters, errors), releases the GIL while a call waits, keeps blocked
//! calls interruptible by Python's signals, and bridges the runtime's
//! futures to asyncio.
#![deny(missing_docs)]

mod aio;
mod aio_stream;
mod blocking;
mod convert;
mod errors;
mod stream;
mod types;

use pyo3::prelude::*;

/// The runtime's default configuration, as a dict (the shape `Endpoint`'s
/// `config` takes).
#[pyfunction]
fn default_config(py: Python<'_>) -> PyResult<Py<PyAny>> {
    convert::to_python(py, &homa::Config::default())
}

/// The configuration for the loopback interface (64 KB packets, messages
/// up to 16 MB), as a dict.
#[pyfunction]
fn loopback_config(py: Python<'_>) -> PyResult<Py<PyAny>> {
    convert::to_python(py, &homa::Config::loopback())
}

/// The native module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<blocking::Endpoint>()?;
    m.add_class::<aio::AsyncEndpoint>()?;
    m.add_class::<types::RpcId>()?;
    m.add_class::<types::Request>()?;
    m.add_class::<stream::Stream>()?;
    m.add_class::<aio_stream::AsyncStream>()?;
    m.add_function(wrap_pyfunction!(default_config, m)?)?;
    m.add_function(wrap_pyfunction!(loopback_config, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
