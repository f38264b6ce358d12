//! The small value classes: `RpcId` and `Request`.

use crate::convert::parse_addr;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// Names one RPC: the id the protocol gave it and the peer at the other
/// end (the server for an RPC this endpoint started, the client for a
/// request it received).
///
/// Returned by `send_request` and carried by `Request.id`; passed to
/// `recv_response`, `reply` and `abort`. Immutable, hashable, comparable.
#[pyclass(
    frozen,
    eq,
    hash,
    from_py_object,
    module = "homars._native",
    name = "RpcId"
)]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RpcId {
    pub(crate) inner: homa::RpcId,
}

impl From<homa::RpcId> for RpcId {
    fn from(inner: homa::RpcId) -> RpcId {
        RpcId { inner }
    }
}

#[pymethods]
impl RpcId {
    /// An RPC id from its parts (normally they come from the endpoint).
    #[new]
    fn new(py: Python<'_>, id: u64, peer: &Bound<'_, PyAny>) -> PyResult<RpcId> {
        Ok(RpcId {
            inner: homa::RpcId {
                id,
                peer: parse_addr(py, peer)?,
            },
        })
    }

    /// The protocol's id of the RPC (even for RPCs this endpoint started).
    #[getter]
    fn id(&self) -> u64 {
        self.inner.id
    }

    /// The other end, as `"IP:port"`.
    #[getter]
    fn peer(&self) -> String {
        self.inner.peer.to_string()
    }

    /// True for an RPC this endpoint started (as the client).
    #[getter]
    fn is_client(&self) -> bool {
        self.inner.is_client()
    }

    fn __repr__(&self) -> String {
        format!("RpcId(id={}, peer='{}')", self.inner.id, self.inner.peer)
    }
}

/// A request received by a server: answer it with
/// `endpoint.reply(request.id, response)`.
#[pyclass(frozen, module = "homars._native", name = "Request")]
pub struct Request {
    id: RpcId,
    data: Py<PyBytes>,
}

impl Request {
    /// The Python view of a runtime request (copies the message).
    pub(crate) fn new(py: Python<'_>, req: &homa::Request) -> Request {
        Request {
            id: req.id.into(),
            data: PyBytes::new(py, &req.message).unbind(),
        }
    }

    /// The runtime request again (copies the message), to give it back.
    pub(crate) fn to_runtime(&self, py: Python<'_>) -> homa::Request {
        homa::Request {
            id: self.id.inner,
            message: bytes::Bytes::copy_from_slice(self.data.bind(py).as_bytes()),
        }
    }
}

#[pymethods]
impl Request {
    /// The RPC, for `reply` (or `abort`).
    #[getter]
    fn id(&self) -> RpcId {
        self.id.clone()
    }

    /// The client's address, as `"IP:port"`.
    #[getter]
    fn peer(&self) -> String {
        self.id.inner.peer.to_string()
    }

    /// The request message.
    #[getter]
    fn data(&self, py: Python<'_>) -> Py<PyBytes> {
        self.data.clone_ref(py)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Request(id={}, peer='{}', data=<{} bytes>)",
            self.id.inner.id,
            self.id.inner.peer,
            self.data.bind(py).as_bytes().len()
        )
    }
}
