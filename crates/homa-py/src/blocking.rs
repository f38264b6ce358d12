//! The blocking endpoint, and the handle it shares with the asyncio one.
//!
//! Every wait releases the GIL, in slices of at most [`SLICE`]: between
//! two slices the thread takes the GIL back to let Python run its signal
//! handlers, so Ctrl-C interrupts a blocked call (a `call` so interrupted
//! aborts its RPC first).

use crate::convert::{message, parse_addr, to_python};
use crate::errors::{name_rpc, to_py};
use crate::types::{Request, RpcId};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Longest a blocked call goes without looking at Python's signals.
const SLICE: Duration = Duration::from_millis(50);

/// One open endpoint, shared by the blocking and the asyncio view of it.
#[derive(Debug)]
pub(crate) struct Shared {
    /// `None` once closed (dropping it releases the socket, as soon as no
    /// call still in progress holds a clone).
    ep: Mutex<Option<homa::AsyncEndpoint>>,
    local: SocketAddr,
    config: homa::Config,
}

impl Shared {
    /// Binds an endpoint (releasing the GIL meanwhile).
    pub(crate) fn bind(
        py: Python<'_>,
        addr: &Bound<'_, PyAny>,
        config: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Arc<Shared>> {
        let addr = parse_addr(py, addr)?;
        let config = crate::convert::config(py, config)?;
        let ep = py
            .detach(|| homa::AsyncEndpoint::bind(addr, config))
            .map_err(|e| to_py(py, e))?;
        Ok(Arc::new(Shared {
            local: ep.local_addr(),
            config: ep.blocking().config().clone(),
            ep: Mutex::new(Some(ep)),
        }))
    }

    /// The endpoint, or `Shutdown` once closed.
    pub(crate) fn get(&self, py: Python<'_>) -> PyResult<homa::AsyncEndpoint> {
        self.ep
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| to_py(py, homa::Error::Closed))
    }

    /// Shuts the endpoint down: calls waiting in other threads or tasks
    /// return `Shutdown`, and the port is free once they have.
    pub(crate) fn close(&self, py: Python<'_>) {
        let ep = self.ep.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(ep) = ep {
            // Joins the endpoint's thread, which never needs the GIL.
            py.detach(move || {
                ep.shutdown();
                drop(ep);
            });
        }
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.ep.lock().unwrap_or_else(|p| p.into_inner()).is_none()
    }

    pub(crate) fn local(&self) -> SocketAddr {
        self.local
    }

    pub(crate) fn config_dict(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        to_python(py, &self.config)
    }
}

/// How a sliced wait ended.
pub(crate) enum Waited<T> {
    /// The runtime's answer (`Err(Timeout)` once the whole timeout passed).
    Done(Result<T, homa::Error>),
    /// A signal handler raised (KeyboardInterrupt, usually).
    Interrupted(PyErr),
}

/// Runs `wait(slice)` without the GIL until it returns something other than
/// a timeout or the deadline passes, checking signals between slices.
pub(crate) fn wait_sliced<T: Send>(
    py: Python<'_>,
    limit: Option<Duration>,
    wait: impl Fn(Duration) -> Result<T, homa::Error> + Sync,
) -> Waited<T> {
    let deadline = limit.map(|t| Instant::now().checked_add(t));
    loop {
        let slice = match deadline {
            None | Some(None) => SLICE,
            Some(Some(d)) => SLICE.min(d.saturating_duration_since(Instant::now())),
        };
        match py.detach(|| wait(slice)) {
            Err(homa::Error::Timeout) => {
                if let Some(Some(d)) = deadline {
                    if Instant::now() >= d {
                        return Waited::Done(Err(homa::Error::Timeout));
                    }
                }
                if let Err(e) = py.check_signals() {
                    return Waited::Interrupted(e);
                }
            }
            r => return Waited::Done(r),
        }
    }
}

/// A Homa endpoint with blocking calls: one UDP socket (by default), any
/// number of client and server RPCs, usable from any number of threads.
///
/// `Endpoint(addr, config=None)` binds `addr` (`"IP:port"` or `(IP, port)`;
/// port 0 picks one). `config` is `None` (the runtime's defaults), TOML
/// text, a dict such as `default_config()` returns, or the path of a TOML
/// file. Every wait releases the GIL and can be interrupted with Ctrl-C.
/// Use it as a context manager, or call `close()`.
#[pyclass(frozen, module = "homars._native", name = "Endpoint")]
pub struct Endpoint {
    pub(crate) shared: Arc<Shared>,
}

#[pymethods]
impl Endpoint {
    #[new]
    #[pyo3(signature = (addr, config=None))]
    fn new(
        py: Python<'_>,
        addr: &Bound<'_, PyAny>,
        config: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Endpoint> {
        Ok(Endpoint {
            shared: Shared::bind(py, addr, config)?,
        })
    }

    /// The bound address, as `"IP:port"`.
    #[getter]
    fn local_addr(&self) -> String {
        self.shared.local().to_string()
    }

    /// The configuration in force, as a dict.
    #[getter]
    fn config(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.shared.config_dict(py)
    }

    /// True once `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.shared.is_closed()
    }

    /// Sends `data` to `dest` and waits for the response, at most `timeout`
    /// seconds (`None`: until the protocol gives up on the peer). On timeout
    /// (`HomaTimeout`) or interruption the RPC is aborted.
    #[pyo3(signature = (dest, data, timeout=None))]
    fn call<'py>(
        &self,
        py: Python<'py>,
        dest: &Bound<'py, PyAny>,
        data: &Bound<'py, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let dest = parse_addr(py, dest)?;
        let data = message(data)?;
        let limit = crate::convert::timeout(py, timeout)?;
        let ep = self.shared.get(py)?;
        let ep = ep.blocking();
        let id = py
            .detach(|| ep.send_request(dest, data))
            .map_err(|e| to_py(py, e))?;
        match wait_sliced(py, limit, |slice| ep.recv_response(id, Some(slice))) {
            Waited::Done(Ok(resp)) => Ok(PyBytes::new(py, &resp)),
            Waited::Done(Err(e)) => {
                if matches!(e, homa::Error::Timeout) {
                    let _ = ep.abort(id);
                }
                Err(to_py(py, e))
            }
            Waited::Interrupted(e) => {
                let _ = ep.abort(id);
                Err(e)
            }
        }
    }

    /// Starts an RPC and returns its id at once; collect the response with
    /// `recv_response(id)` or `recv_any_response()`.
    pub(crate) fn send_request(
        &self,
        py: Python<'_>,
        dest: &Bound<'_, PyAny>,
        data: &Bound<'_, PyAny>,
    ) -> PyResult<RpcId> {
        let dest = parse_addr(py, dest)?;
        let data = message(data)?;
        let ep = self.shared.get(py)?;
        py.detach(|| ep.send_request(dest, data))
            .map(RpcId::from)
            .map_err(|e| to_py(py, e))
    }

    /// Waits for the response of `id`, at most `timeout` seconds. Unlike
    /// `call`, a timeout leaves the RPC in place: wait again, or `abort`.
    #[pyo3(signature = (id, timeout=None))]
    fn recv_response<'py>(
        &self,
        py: Python<'py>,
        id: PyRef<'py, RpcId>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let id = id.inner;
        let limit = crate::convert::timeout(py, timeout)?;
        let ep = self.shared.get(py)?;
        let ep = ep.blocking();
        match wait_sliced(py, limit, |slice| ep.recv_response(id, Some(slice))) {
            Waited::Done(r) => r
                .map(|resp| PyBytes::new(py, &resp))
                .map_err(|e| to_py(py, e)),
            Waited::Interrupted(e) => Err(e),
        }
    }

    /// Waits for whichever outstanding RPC finishes first and returns
    /// `(id, response)`. If that RPC failed, its exception is raised with
    /// the RPC's id as `rpc_id`; `NothingOutstanding` if no RPC is.
    #[pyo3(signature = (timeout=None))]
    fn recv_any_response<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let limit = crate::convert::timeout(py, timeout)?;
        let ep = self.shared.get(py)?;
        let ep = ep.blocking();
        match wait_sliced(py, limit, |slice| ep.recv_any_response(Some(slice))) {
            Waited::Done(Ok((id, Ok(resp)))) => {
                let resp = PyBytes::new(py, &resp);
                PyTuple::new(
                    py,
                    [Bound::new(py, RpcId::from(id))?.into_any(), resp.into_any()],
                )
            }
            Waited::Done(Ok((id, Err(e)))) => {
                let err = to_py(py, e);
                name_rpc(py, &err, id);
                Err(err)
            }
            Waited::Done(Err(e)) => Err(to_py(py, e)),
            Waited::Interrupted(e) => Err(e),
        }
    }

    /// Opens a stream to `dest` (returns at once; see `Stream`).
    fn open_stream(
        &self,
        py: Python<'_>,
        dest: &Bound<'_, PyAny>,
    ) -> PyResult<crate::stream::Stream> {
        let dest = parse_addr(py, dest)?;
        let ep = self.shared.get(py)?;
        let s = py
            .detach(|| ep.blocking().open_stream(dest))
            .map_err(|e| to_py(py, e))?;
        Ok(crate::stream::Stream::new(s))
    }

    /// Waits for a stream a peer opened, at most `timeout` seconds.
    #[pyo3(signature = (timeout=None))]
    fn accept_stream(
        &self,
        py: Python<'_>,
        timeout: Option<f64>,
    ) -> PyResult<crate::stream::Stream> {
        let limit = crate::convert::timeout(py, timeout)?;
        let ep = self.shared.get(py)?;
        let ep = ep.blocking();
        match wait_sliced(py, limit, |slice| ep.accept_stream(Some(slice))) {
            Waited::Done(r) => r.map(crate::stream::Stream::new).map_err(|e| to_py(py, e)),
            Waited::Interrupted(e) => Err(e),
        }
    }

    /// Waits for the next request, at most `timeout` seconds.
    #[pyo3(signature = (timeout=None))]
    fn recv_request(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Request> {
        let limit = crate::convert::timeout(py, timeout)?;
        let ep = self.shared.get(py)?;
        let ep = ep.blocking();
        match wait_sliced(py, limit, |slice| ep.recv_request(Some(slice))) {
            Waited::Done(r) => r
                .map(|req| Request::new(py, &req))
                .map_err(|e| to_py(py, e)),
            Waited::Interrupted(e) => Err(e),
        }
    }

    /// Sends the response to a request (does not wait for delivery).
    pub(crate) fn reply(
        &self,
        py: Python<'_>,
        id: PyRef<'_, RpcId>,
        data: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let id = id.inner;
        let data = message(data)?;
        let ep = self.shared.get(py)?;
        py.detach(|| ep.reply(id, data)).map_err(|e| to_py(py, e))
    }

    /// Abandons an RPC: a client RPC is forgotten (a waiting
    /// `recv_response` raises `UnknownRpc`); a server RPC is dropped
    /// without a reply.
    pub(crate) fn abort(&self, py: Python<'_>, id: PyRef<'_, RpcId>) -> PyResult<()> {
        let id = id.inner;
        let ep = self.shared.get(py)?;
        ep.abort(id).map_err(|e| to_py(py, e))
    }

    /// The protocol's counters and gauges, as a dict (`sent` and
    /// `received` count packets and bytes per packet type).
    fn metrics(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let ep = self.shared.get(py)?;
        to_python(py, &ep.metrics())
    }

    /// The runtime's own counters (system calls, packets, injected
    /// faults), as a dict.
    fn runtime_stats(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let ep = self.shared.get(py)?;
        to_python(py, &ep.blocking().runtime_stats())
    }

    /// Closes the endpoint: calls blocked in other threads raise
    /// `Shutdown`, RPCs in progress are abandoned, the port is released.
    /// Closing twice is harmless.
    fn close(&self, py: Python<'_>) {
        self.shared.close(py);
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, PyTuple>) -> bool {
        self.shared.close(py);
        false
    }

    fn __repr__(&self) -> String {
        let state = if self.shared.is_closed() {
            " closed"
        } else {
            ""
        };
        format!("<homars.Endpoint {}{state}>", self.shared.local())
    }
}
