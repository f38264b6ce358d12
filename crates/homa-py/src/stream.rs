//! Streams for Python: `Endpoint.open_stream(dest)`,
//! `Endpoint.accept_stream(timeout=None)` and the `Stream` they return
//! (thin wrappers of [`homa::Stream`]; waits release the GIL in slices, as
//! the endpoint's do). Stream failures raise the `homars.StreamError`
//! classes (`StreamReset`, `StreamRefused`, `StreamOpenTimeout`,
//! `StreamFinished`) or `PeerDead`.

use crate::blocking::{wait_sliced, Waited};
use crate::convert::message;
use crate::errors::to_py;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use std::sync::{Arc, Mutex};

/// One end of a stream: ordered, reliable messages each way. `send(data,
/// timeout=None)` blocks while the window is full; `recv(timeout=None)`
/// returns the next message, or `None` once the peer finished; `finish()`
/// ends our direction; `close()` (or leaving a `with` block) aborts the
/// stream unless it was finished.
#[pyclass(frozen, module = "homars._native", name = "Stream")]
pub struct Stream {
    stream: Mutex<Option<Arc<homa::Stream>>>,
}

impl Stream {
    pub(crate) fn new(s: homa::Stream) -> Stream {
        Stream {
            stream: Mutex::new(Some(Arc::new(s))),
        }
    }

    fn get(&self, py: Python<'_>) -> PyResult<Arc<homa::Stream>> {
        self.stream
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| to_py(py, homa::Error::StreamFinished))
    }
}

#[pymethods]
impl Stream {
    /// Sends `data` (bytes-like), waiting at most `timeout` seconds for
    /// room in the window (`HomaTimeout`; `timeout=0` only tries).
    #[pyo3(signature = (data, timeout=None))]
    fn send(&self, py: Python<'_>, data: &Bound<'_, PyAny>, timeout: Option<f64>) -> PyResult<()> {
        let data = message(data)?;
        let limit = crate::convert::timeout(py, timeout)?;
        let s = self.get(py)?;
        if limit.is_some_and(|t| t.is_zero()) {
            return py.detach(|| s.try_send(data)).map_err(|e| to_py(py, e));
        }
        match wait_sliced(py, limit, |slice| s.send_timeout(data.clone(), Some(slice))) {
            Waited::Done(r) => r.map_err(|e| to_py(py, e)),
            Waited::Interrupted(e) => Err(e),
        }
    }

    /// The next message (bytes), or `None` once the peer finished.
    #[pyo3(signature = (timeout=None))]
    fn recv<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let limit = crate::convert::timeout(py, timeout)?;
        let s = self.get(py)?;
        match wait_sliced(py, limit, |slice| s.recv(Some(slice))) {
            Waited::Done(Ok(m)) => Ok(m.map(|m| PyBytes::new(py, &m))),
            Waited::Done(Err(e)) => Err(to_py(py, e)),
            Waited::Interrupted(e) => Err(e),
        }
    }

    /// Ends our direction (idempotent).
    fn finish(&self, py: Python<'_>) -> PyResult<()> {
        let s = self.get(py)?;
        py.detach(|| s.finish()).map_err(|e| to_py(py, e))
    }

    /// Waits at most `timeout` seconds until the stream has closed: both
    /// directions ended and ours acknowledged (wait for it before closing
    /// the endpoint right after `finish`, or the end may be lost).
    #[pyo3(signature = (timeout=None))]
    fn wait_closed(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        let limit = crate::convert::timeout(py, timeout)?;
        let s = self.get(py)?;
        match wait_sliced(py, limit, |slice| s.wait_closed(Some(slice))) {
            Waited::Done(r) => r.map_err(|e| to_py(py, e)),
            Waited::Interrupted(e) => Err(e),
        }
    }

    /// Lets the stream go: aborts it unless finished.
    fn close(&self, py: Python<'_>) {
        let s = self.stream.lock().unwrap_or_else(|p| p.into_inner()).take();
        py.detach(move || drop(s));
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, PyTuple>) -> bool {
        self.close(py);
        false
    }
}
