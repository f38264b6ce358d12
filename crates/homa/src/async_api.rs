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
    /// (on timeout the RPC is aborted). `Duration::MAX` waits for as long
    /// as the protocol keeps the RPC alive.
    ///
    /// Cancel-safe: if the future is dropped before it resolves, the RPC is
    /// aborted (nothing is left behind).
    pub async fn call(
        &self,
        dest: SocketAddr,
        request: Bytes,
        timeout: Duration,
    ) -> Result<Bytes, Error> {
        let id = self.ep.send_request(dest, request)?;
        // Aborts the RPC unless it finished (dropped future or timeout).
        let mut guard = AbortUnlessDone {
            ep: &self.ep,
            id,
            done: false,
        };
        let r = match tokio::time::timeout(timeout, self.recv_response(id)).await {
            Ok(r) => {
                guard.done = true;
                r
            }
            Err(_) => Err(Error::Timeout),
        };
        drop(guard);
        r
    }

    /// Starts an RPC (never blocks).
    pub fn send_request(&self, dest: SocketAddr, request: Bytes) -> Result<RpcId, Error> {
        self.ep.send_request(dest, request)
    }

    /// Awaits the response of `id`. Fails with [`Error::UnknownRpc`] if the
    /// RPC is aborted meanwhile, [`Error::Closed`] if the endpoint is shut
    /// down.
    ///
    /// Cancel-safe: if the future is dropped, the RPC stays outstanding and
    /// its response can still be collected.
    pub async fn recv_response(&self, id: RpcId) -> Result<Bytes, Error> {
        match self.ep.inner().register_response(id) {
            // The sender goes away without a value when the RPC is aborted
            // or the endpoint closes; say which.
            Ok(rx) => rx.await.unwrap_or_else(|_| {
                Err(match self.ep.inner().check_open() {
                    Err(closed) => closed,
                    Ok(()) => Error::UnknownRpc(id),
                })
            }),
            Err(now) => now,
        }
    }

    /// Awaits the next request.
    ///
    /// Cancel-safe: if the future is dropped, no request is lost (one
    /// handed over at that moment goes back to the head of the queue).
    pub async fn recv_request(&self) -> Result<Request, Error> {
        match self.ep.inner().register_request() {
            Ok(rx) => {
                let mut pending = PendingRequest { rx, ep: &self.ep };
                (&mut pending.rx).await.map_err(|_| Error::Closed)
            }
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

/// Aborts a client RPC when dropped, unless told it finished.
struct AbortUnlessDone<'a> {
    ep: &'a Endpoint,
    id: RpcId,
    done: bool,
}

impl Drop for AbortUnlessDone<'_> {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.ep.abort(self.id);
        }
    }
}

/// An async waiter's channel for the next request: dropped before the
/// request was taken out of it, it gives the request back.
struct PendingRequest<'a> {
    rx: tokio::sync::oneshot::Receiver<Request>,
    ep: &'a Endpoint,
}

impl Drop for PendingRequest<'_> {
    fn drop(&mut self) {
        self.rx.close();
        if let Ok(req) = self.rx.try_recv() {
            self.ep.requeue_request(req);
        }
    }
}
