//! Streams for asyncio: `AsyncEndpoint.open_stream(dest)`,
//! `AsyncEndpoint.accept_stream(timeout=None)` and the `AsyncStream` they
//! give (wrapped by `homars.aio.AsyncStream`). Each wait is a future of the
//! runtime's [`homa::AsyncStream`], bridged to asyncio as the endpoint's
//! are (`aio.rs`), with the same care for results that arrive as their task
//! is cancelled: a received message goes back to the stream (the next
//! `recv` returns it first), an accepted stream back to the endpoint (the
//! next `accept_stream` returns it first).

use crate::aio::{bridge, Outcome};
use crate::convert::message;
use crate::errors::to_py;
use crate::types::RpcId;
use bytes::Bytes;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

/// Locks `m`, whatever a panic elsewhere left (the queues stay valid).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Values received for a task that was cancelled, given back for the
/// next waiter (first out first). The hand-back happens on the event
/// loop's thread, possibly after the next waiter started: a waiter watches
/// for it ([`GivenBack::first`]).
pub(crate) struct GivenBack<T> {
    queue: Mutex<VecDeque<T>>,
    notify: tokio::sync::Notify,
}

impl<T> Default for GivenBack<T> {
    fn default() -> Self {
        GivenBack {
            queue: Mutex::new(VecDeque::new()),
            notify: tokio::sync::Notify::new(),
        }
    }
}

impl<T> GivenBack<T> {
    /// Gives `v` back: the next (or the current) waiter takes it first.
    pub(crate) fn push(&self, v: T) {
        lock(&self.queue).push_front(v);
        // (Stored as a permit when nobody waits yet.)
        self.notify.notify_one();
    }

    /// A value given back, else the outcome of a fresh `wait()`, whichever
    /// comes first (`wait`'s future is dropped for a value given back
    /// meanwhile: the runtime's waits are cancel-safe).
    pub(crate) async fn first<F, Fut>(&self, mut wait: F) -> Result<Result<T, T>, homa::Error>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, homa::Error>>,
    {
        loop {
            if let Some(v) = lock(&self.queue).pop_front() {
                return Ok(Ok(v));
            }
            tokio::select! {
                biased;
                _ = self.notify.notified() => continue,
                r = wait() => return r.map(Err),
            }
        }
    }
}

/// Messages received but given back (their task was cancelled).
type Unread = Arc<GivenBack<Option<Bytes>>>;

/// Streams accepted but given back (their task was cancelled).
pub(crate) type Accepted = Arc<GivenBack<homa::AsyncStream>>;

/// `first`'s value, whichever way it came.
pub(crate) fn either<T>(r: Result<T, T>) -> T {
    r.unwrap_or_else(|v| v)
}

/// Nothing to hand over (send, finish).
pub(crate) struct Done;

impl Outcome for Done {
    fn to_py(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(py.None())
    }

    fn orphan(self) {}
}

/// A received message (or the end), with the stream to give it back to.
struct Received {
    message: Option<Bytes>,
    unread: Unread,
}

impl Outcome for Received {
    fn to_py(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(match &self.message {
            Some(m) => PyBytes::new(py, m).into_any().unbind(),
            None => py.None(),
        })
    }

    fn orphan(self) {
        if let Some(m) = self.message {
            self.unread.push(Some(m));
        }
    }
}

/// An accepted stream, with the endpoint to give it back to.
pub(crate) struct AcceptedStream {
    stream: Mutex<Option<homa::AsyncStream>>,
    back: Accepted,
}

impl AcceptedStream {
    pub(crate) fn new(stream: homa::AsyncStream, back: Accepted) -> AcceptedStream {
        AcceptedStream {
            stream: Mutex::new(Some(stream)),
            back,
        }
    }
}

impl Outcome for AcceptedStream {
    fn to_py(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        // Taken once: the Python object owns it from now on.
        match lock(&self.stream).take() {
            Some(s) => Ok(Bound::new(py, AsyncStream::new(s))?.into_any().unbind()),
            None => Err(to_py(py, homa::Error::StreamFinished)),
        }
    }

    fn orphan(self) {
        if let Some(s) = lock(&self.stream).take() {
            self.back.push(s);
        }
    }
}

/// One end of a stream for asyncio (`homars.aio.AsyncStream` wraps it):
/// `send` and `recv` return `asyncio.Future`s of the running loop.
#[pyclass(frozen, module = "homars._native", name = "AsyncStream")]
pub struct AsyncStream {
    /// `None` once closed; futures in flight hold clones.
    stream: Mutex<Option<Arc<homa::AsyncStream>>>,
    unread: Unread,
    id: homa::RpcId,
}

impl AsyncStream {
    pub(crate) fn new(s: homa::AsyncStream) -> AsyncStream {
        AsyncStream {
            id: s.id(),
            stream: Mutex::new(Some(Arc::new(s))),
            unread: Arc::default(),
        }
    }

    /// The runtime's stream, taken out of this object (which is closed
    /// then), if nothing else holds it.
    pub(crate) fn take_inner(&self) -> Option<homa::AsyncStream> {
        let mut slot = lock(&self.stream);
        let arc = slot.take()?;
        match Arc::try_unwrap(arc) {
            Ok(s) => Some(s),
            Err(arc) => {
                *slot = Some(arc);
                None
            }
        }
    }

    fn get(&self, py: Python<'_>) -> PyResult<Arc<homa::AsyncStream>> {
        lock(&self.stream)
            .clone()
            .ok_or_else(|| to_py(py, homa::Error::StreamFinished))
    }
}

#[pymethods]
impl AsyncStream {
    /// The stream's id (its RPC).
    #[getter]
    fn id(&self) -> RpcId {
        self.id.into()
    }

    /// The peer, as `"IP:port"`.
    #[getter]
    fn peer(&self) -> String {
        self.id.peer.to_string()
    }

    /// True once `finish()` succeeded (or after `close()`).
    #[getter]
    fn finished(&self) -> bool {
        lock(&self.stream).as_ref().is_none_or(|s| s.is_finished())
    }

    /// Future that completes once `data` is sent: it waits for room in the
    /// window (`timeout` seconds at most, `HomaTimeout`; `0` only tries,
    /// `LimitReached` when full). Cancelled, the message was not sent.
    #[pyo3(signature = (data, timeout=None))]
    fn send<'py>(
        &self,
        py: Python<'py>,
        data: &Bound<'py, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let data = message(data)?;
        let limit = crate::convert::timeout(py, timeout)?;
        let s = self.get(py)?;
        bridge(py, async move {
            match limit {
                Some(t) if t.is_zero() => s.try_send(data),
                _ => crate::aio::within(limit, s.send(data)).await,
            }
            .map(|()| Done)
        })
    }

    /// Future of the next message (bytes), or `None` once the peer
    /// finished (`timeout` seconds at most).
    #[pyo3(signature = (timeout=None))]
    fn recv<'py>(&self, py: Python<'py>, timeout: Option<f64>) -> PyResult<Bound<'py, PyAny>> {
        let limit = crate::convert::timeout(py, timeout)?;
        let s = self.get(py)?;
        let unread = self.unread.clone();
        bridge(py, async move {
            let next = unread.first(|| s.recv());
            let message = crate::aio::within(limit, next).await?;
            Ok(Received {
                message: either(message),
                unread,
            })
        })
    }

    /// Gives back a message a cancelled `recv` received: the next `recv`
    /// returns it first.
    #[pyo3(name = "_unrecv")]
    fn unrecv(&self, data: &Bound<'_, PyAny>) -> PyResult<()> {
        if !data.is_none() {
            self.unread.push(Some(message(data)?));
        }
        Ok(())
    }

    /// Future that completes once our direction is ended (at once: the
    /// end follows the messages already sent). Idempotent.
    fn finish<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let s = self.get(py)?;
        bridge(py, async move { s.finish().await.map(|()| Done) })
    }

    /// Future that completes once the stream has closed (both directions
    /// ended, ours acknowledged), within `timeout` seconds.
    #[pyo3(signature = (timeout=None))]
    fn wait_closed<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let limit = crate::convert::timeout(py, timeout)?;
        let s = self.get(py)?;
        bridge(py, async move {
            crate::aio::within(limit, s.closed()).await?;
            Ok(Done)
        })
    }

    /// Lets the stream go: aborts it now unless finished (pending `send`
    /// and `recv` futures then raise `StreamReset`). Idempotent.
    fn close(&self, py: Python<'_>) {
        let s = lock(&self.stream).take();
        py.detach(move || {
            if let Some(s) = s {
                if !s.is_finished() {
                    s.abort();
                }
            }
        });
    }

    fn __repr__(&self) -> String {
        format!(
            "<homars.aio.AsyncStream {} id={}>",
            self.id.peer, self.id.id
        )
    }
}
