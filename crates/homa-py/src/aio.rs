//! The asyncio endpoint: each wait is a future of the runtime's
//! [`homa::AsyncEndpoint`], run on a small tokio runtime of this module's
//! own (one worker thread), and bridged to an `asyncio.Future` of the
//! caller's event loop.
//!
//! The bridge is written here rather than taken from `pyo3-async-runtimes`
//! for one reason: a result that arrives just as the awaiting task is
//! cancelled must not be lost. The result is handed to the event loop with
//! `call_soon_threadsafe`, and on the loop's own thread either set on the
//! asyncio future or, if that future is already cancelled, given back: a
//! received request goes back to the runtime's queue (the next
//! `recv_request` gets it) instead of leaving its client waiting for a
//! reply that never comes. A cancellation that comes first drops the Rust
//! future, which the runtime makes safe (a dropped `call` aborts its RPC).
//! The last case, a task cancelled after its future got the request but
//! before the task ran again, is `homars.aio`'s: it gives the request back
//! with `_requeue_request`.

use crate::blocking::{Endpoint, Shared};
use crate::convert::{message, parse_addr, to_python};
use crate::errors::to_py;
use crate::types::{Request, RpcId};
use bytes::Bytes;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyCFunction, PyTuple};
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// The tokio runtime of every asyncio endpoint, started on first use.
static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();

fn runtime() -> PyResult<&'static tokio::runtime::Runtime> {
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("homars-async")
                .enable_time()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start the async runtime: {e}")))
}

/// A result on its way to Python.
pub(crate) trait Outcome: Send + 'static {
    /// The Python value (on the event loop's thread, with the GIL).
    fn to_py(&self, py: Python<'_>) -> PyResult<Py<PyAny>>;
    /// Nobody will take the value: give back what must not be lost.
    fn orphan(self);
}

impl Outcome for Bytes {
    fn to_py(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(PyBytes::new(py, self).into_any().unbind())
    }

    /// A response nobody waits for any more: its RPC is finished anyway.
    fn orphan(self) {}
}

/// A received request, with the endpoint to give it back to.
struct Received {
    req: homa::Request,
    ep: homa::AsyncEndpoint,
}

impl Outcome for Received {
    fn to_py(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(Bound::new(py, Request::new(py, &self.req))?
            .into_any()
            .unbind())
    }

    fn orphan(self) {
        self.ep.blocking().requeue_request(self.req);
    }
}

/// `fut`, given up with [`homa::Error::Timeout`] after `limit` if one is
/// set: the one way every awaited call here honours its `timeout`.
pub(crate) async fn within<T>(
    limit: Option<Duration>,
    fut: impl Future<Output = Result<T, homa::Error>>,
) -> Result<T, homa::Error> {
    match limit {
        None => fut.await,
        Some(t) => tokio::time::timeout(t, fut)
            .await
            .unwrap_or(Err(homa::Error::Timeout)),
    }
}

/// Runs `fut` on the runtime; returns an `asyncio.Future` of the running
/// event loop that gets its outcome.
pub(crate) fn bridge<'py, T, F>(py: Python<'py>, fut: F) -> PyResult<Bound<'py, PyAny>>
where
    T: Outcome,
    F: Future<Output = Result<T, homa::Error>> + Send + 'static,
{
    let rt = runtime()?;
    let event_loop = py.import("asyncio")?.call_method0("get_running_loop")?;
    let py_fut = event_loop.call_method0("create_future")?;
    // When the asyncio future is done (cancelled, or given its result), the
    // Rust future stops; it is also dropped if nobody holds the asyncio
    // future any more (the callback, and with it the sender, goes away).
    let (cancel_tx, cancel_rx) = tokio::sync::oneshot::channel::<()>();
    let cancel_tx = Mutex::new(Some(cancel_tx));
    let on_done = PyCFunction::new_closure(
        py,
        Some(c"homars_on_done"),
        None,
        move |_args: &Bound<'_, PyTuple>, _kw| {
            if let Some(tx) = cancel_tx.lock().unwrap_or_else(|p| p.into_inner()).take() {
                let _ = tx.send(());
            }
        },
    )?;
    py_fut.call_method1("add_done_callback", (on_done,))?;
    let event_loop = event_loop.unbind();
    let target = py_fut.clone().unbind();
    rt.spawn(async move {
        // A task of its own, so that a panic in it becomes an exception
        // rather than a future that never resolves.
        let mut task = tokio::spawn(fut);
        let joined = tokio::select! {
            biased;
            r = &mut task => r,
            _ = cancel_rx => {
                task.abort();
                // It may have finished just before: give back its value.
                if let Ok(Ok(v)) = task.await {
                    v.orphan();
                }
                return;
            }
        };
        let outcome = match joined {
            Ok(r) => r.map_err(Failure::Homa),
            Err(e) => Err(Failure::Panic(panic_text(e))),
        };
        deliver(event_loop, target, outcome);
    });
    Ok(py_fut)
}

/// Why a future produced no value.
enum Failure {
    /// The runtime's error.
    Homa(homa::Error),
    /// The future panicked (a bug): its message.
    Panic(String),
}

impl Failure {
    fn into_py(self, py: Python<'_>) -> PyErr {
        match self {
            Failure::Homa(e) => to_py(py, e),
            Failure::Panic(text) => pyo3::panic::PanicException::new_err(format!(
                "homars: the runtime panicked: {text}"
            )),
        }
    }
}

/// The message of a task that panicked (or was cancelled).
fn panic_text(e: tokio::task::JoinError) -> String {
    match e.try_into_panic() {
        Ok(p) => p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".into()),
        Err(e) => e.to_string(),
    }
}

/// Hands `outcome` to the event loop's thread, which sets it on `target`
/// unless that is already done (cancelled); then the outcome is orphaned.
fn deliver<T: Outcome>(event_loop: Py<PyAny>, target: Py<PyAny>, outcome: Result<T, Failure>) {
    Python::attach(|py| {
        let slot = Arc::new(Mutex::new(Some(outcome)));
        let slot_in_loop = slot.clone();
        let set = PyCFunction::new_closure(
            py,
            Some(c"homars_set_result"),
            None,
            move |args: &Bound<'_, PyTuple>, _kw| -> PyResult<()> {
                let py = args.py();
                let taken = slot_in_loop
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .take();
                let Some(outcome) = taken else {
                    return Ok(());
                };
                let target = target.bind(py);
                let done = target
                    .call_method0("done")
                    .and_then(|d| d.is_truthy())
                    .unwrap_or(true);
                if done {
                    if let Ok(v) = outcome {
                        v.orphan();
                    }
                    return Ok(());
                }
                match outcome {
                    Ok(v) => match v.to_py(py) {
                        Ok(obj) => target.call_method1("set_result", (obj,)).map(drop),
                        Err(e) => {
                            v.orphan();
                            target
                                .call_method1("set_exception", (e.into_value(py),))
                                .map(drop)
                        }
                    },
                    Err(e) => target
                        .call_method1("set_exception", (e.into_py(py).into_value(py),))
                        .map(drop),
                }
            },
        );
        let scheduled = set.and_then(|f| {
            event_loop
                .bind(py)
                .call_method1("call_soon_threadsafe", (f,))
        });
        if scheduled.is_err() {
            // The loop is closed: nobody will ever take the outcome.
            let taken = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(Ok(v)) = taken {
                v.orphan();
            }
        }
    });
}

/// The asyncio view of an endpoint (`homars.aio.Endpoint` wraps it): the
/// waiting methods return `asyncio.Future`s of the running loop.
#[pyclass(frozen, module = "homars._native", name = "AsyncEndpoint")]
pub struct AsyncEndpoint {
    shared: Arc<Shared>,
    /// Streams accepted for a task that was cancelled: the next
    /// `accept_stream` takes them first.
    accepted: crate::aio_stream::Accepted,
}

#[pymethods]
impl AsyncEndpoint {
    #[new]
    #[pyo3(signature = (addr, config=None))]
    fn new(
        py: Python<'_>,
        addr: &Bound<'_, PyAny>,
        config: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<AsyncEndpoint> {
        Ok(AsyncEndpoint {
            shared: Shared::bind(py, addr, config)?,
            accepted: Default::default(),
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

    /// A blocking `Endpoint` for the same endpoint (same socket, same RPCs).
    fn blocking(&self) -> Endpoint {
        Endpoint {
            shared: self.shared.clone(),
        }
    }

    /// Future of the response to `data` sent to `dest` (`timeout` seconds
    /// at most; on timeout or cancellation the RPC is aborted).
    #[pyo3(signature = (dest, data, timeout=None))]
    fn call<'py>(
        &self,
        py: Python<'py>,
        dest: &Bound<'py, PyAny>,
        data: &Bound<'py, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let dest = parse_addr(py, dest)?;
        let data = message(data)?;
        let limit = crate::convert::timeout(py, timeout)?.unwrap_or(Duration::MAX);
        let ep = self.shared.get(py)?;
        bridge(py, async move { ep.call(dest, data, limit).await })
    }

    /// Future of the response of `id` (`timeout` seconds at most; a timeout
    /// or cancellation leaves the RPC in place).
    #[pyo3(signature = (id, timeout=None))]
    fn recv_response<'py>(
        &self,
        py: Python<'py>,
        id: PyRef<'py, RpcId>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let id = id.inner;
        let limit = crate::convert::timeout(py, timeout)?;
        let ep = self.shared.get(py)?;
        bridge(py, async move { within(limit, ep.recv_response(id)).await })
    }

    /// Future of the next request (`timeout` seconds at most).
    #[pyo3(signature = (timeout=None))]
    fn recv_request<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let limit = crate::convert::timeout(py, timeout)?;
        let ep = self.shared.get(py)?;
        bridge(py, async move {
            let req = within(limit, ep.recv_request()).await?;
            Ok(Received { req, ep })
        })
    }

    /// Opens a stream to `dest` (never waits: a peer that refuses or never
    /// answers makes the stream's operations raise `StreamRefused` or
    /// `StreamOpenTimeout`).
    fn open_stream(
        &self,
        py: Python<'_>,
        dest: &Bound<'_, PyAny>,
    ) -> PyResult<crate::aio_stream::AsyncStream> {
        let dest = parse_addr(py, dest)?;
        let ep = self.shared.get(py)?;
        let s = py
            .detach(|| ep.blocking().open_stream(dest))
            .map_err(|e| to_py(py, e))?;
        Ok(crate::aio_stream::AsyncStream::new(s.into()))
    }

    /// Future of the next stream a peer opens (`timeout` seconds at most).
    #[pyo3(signature = (timeout=None))]
    fn accept_stream<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let limit = crate::convert::timeout(py, timeout)?;
        let ep = self.shared.get(py)?;
        let back = self.accepted.clone();
        bridge(py, async move {
            let next = back.first(|| ep.accept_stream());
            let s = within(limit, next).await?;
            Ok(crate::aio_stream::AcceptedStream::new(
                crate::aio_stream::either(s),
                back,
            ))
        })
    }

    /// Gives back a stream a cancelled `accept_stream` accepted: the next
    /// `accept_stream` returns it first.
    #[pyo3(name = "_unaccept")]
    fn unaccept(&self, stream: PyRef<'_, crate::aio_stream::AsyncStream>) {
        if let Some(s) = stream.take_inner() {
            self.accepted.push(s);
        }
    }

    /// Gives back a request that was received but will not be handled (its
    /// task was cancelled as the request arrived): the next `recv_request`
    /// gets it. Does nothing once the endpoint is closed.
    #[pyo3(name = "_requeue_request")]
    fn requeue_request(&self, py: Python<'_>, request: PyRef<'_, Request>) {
        if let Ok(ep) = self.shared.get(py) {
            ep.blocking().requeue_request(request.to_runtime(py));
        }
    }

    /// Starts an RPC and returns its id (never waits).
    fn send_request(
        &self,
        py: Python<'_>,
        dest: &Bound<'_, PyAny>,
        data: &Bound<'_, PyAny>,
    ) -> PyResult<RpcId> {
        self.blocking().send_request(py, dest, data)
    }

    /// Sends the response to a request (never waits).
    fn reply(&self, py: Python<'_>, id: PyRef<'_, RpcId>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        self.blocking().reply(py, id, data)
    }

    /// Abandons an RPC (see `Endpoint.abort`).
    fn abort(&self, py: Python<'_>, id: PyRef<'_, RpcId>) -> PyResult<()> {
        self.blocking().abort(py, id)
    }

    /// The protocol's counters and gauges, as a dict.
    fn metrics(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let ep = self.shared.get(py)?;
        to_python(py, &ep.metrics())
    }

    /// The runtime's own counters, as a dict.
    fn runtime_stats(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let ep = self.shared.get(py)?;
        to_python(py, &ep.blocking().runtime_stats())
    }

    /// Closes the endpoint: pending futures raise `Shutdown`.
    fn close(&self, py: Python<'_>) {
        self.shared.close(py);
    }

    fn __repr__(&self) -> String {
        let state = if self.shared.is_closed() {
            " closed"
        } else {
            ""
        };
        format!("<homars.aio.Endpoint {}{state}>", self.shared.local())
    }
}
