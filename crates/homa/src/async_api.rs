//! The same API for async code (tokio or any executor): every wait is a
//! future instead of a blocked thread. The endpoint's background thread
//! reads the socket for async users.

use crate::{Endpoint, Error, Request};
use bytes::Bytes;
use homa_core::{Metrics, RpcId};
use std::net::SocketAddr;
use std::time::Duration;

/// An async view of an [`Endpoint`]. Cheap to clone.
///
/// ```no_run
/// # async fn demo() -> Result<(), homa::Error> {
/// let ep = homa::AsyncEndpoint::bind("127.0.0.1:0".parse().unwrap(), homa::Config::default())?;
/// let resp = ep
///     .call("127.0.0.1:4000".parse().unwrap(), bytes::Bytes::from_static(b"hi"), std::time::Duration::from_secs(1))
///     .await?;
/// # let _ = resp; Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct AsyncEndpoint {
    ep: Endpoint,
}

impl AsyncEndpoint {
    /// Opens an endpoint, as [`Endpoint::bind`].
    pub fn bind(addr: SocketAddr, config: crate::Config) -> Result<AsyncEndpoint, Error> {
        Ok(AsyncEndpoint {
            ep: Endpoint::bind(addr, config)?,
        })
    }

    /// The blocking endpoint underneath (the same endpoint).
    pub fn blocking(&self) -> &Endpoint {
        &self.ep
    }

    /// The bound address and port.
    pub fn local_addr(&self) -> SocketAddr {
        self.ep.local_addr()
    }

    /// Sends a request and awaits its response, for at most `timeout`
    /// (on timeout the RPC is aborted).
    pub async fn call(
        &self,
        dest: SocketAddr,
        request: Bytes,
        timeout: Duration,
    ) -> Result<Bytes, Error> {
        let id = self.ep.send_request(dest, request)?;
        match tokio::time::timeout(timeout, self.recv_response(id)).await {
            Ok(r) => r,
            Err(_) => {
                let _ = self.ep.abort(id);
                Err(Error::Timeout)
            }
        }
    }

    /// Starts an RPC (never blocks).
    pub fn send_request(&self, dest: SocketAddr, request: Bytes) -> Result<RpcId, Error> {
        self.ep.send_request(dest, request)
    }

    /// Awaits the response of `id`.
    pub async fn recv_response(&self, id: RpcId) -> Result<Bytes, Error> {
        match self.ep.inner().register_response(id) {
            Ok(rx) => rx.await.unwrap_or(Err(Error::Closed)),
            Err(now) => now,
        }
    }

    /// Awaits the next request.
    pub async fn recv_request(&self) -> Result<Request, Error> {
        match self.ep.inner().register_request() {
            Ok(rx) => rx.await.map_err(|_| Error::Closed),
            Err(now) => now,
        }
    }

    /// Sends the response to a request (never blocks).
    pub fn reply(&self, id: RpcId, response: Bytes) -> Result<(), Error> {
        self.ep.reply(id, response)
    }

    /// Abandons an RPC.
    pub fn abort(&self, id: RpcId) -> Result<(), Error> {
        self.ep.abort(id)
    }

    /// The protocol's counters.
    pub fn metrics(&self) -> Metrics {
        self.ep.metrics()
    }

    /// Closes the endpoint; pending futures resolve to [`Error::Closed`].
    pub fn shutdown(&self) {
        self.ep.shutdown()
    }
}
