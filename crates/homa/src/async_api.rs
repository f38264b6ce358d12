//! The same API for async code (tokio or any executor): every wait is a
//! future instead of a blocked thread. The endpoint's background thread
//! reads the socket for async users. Streams have their async face too:
//! [`AsyncEndpoint::open_stream`] / [`AsyncEndpoint::accept_stream`] and
//! [`crate::AsyncStream`] (`async_stream.rs`).
//!
//! Nothing here needs a tokio runtime: the futures are woken by the
//! endpoint's threads through their `Waker`, whatever polls them. Only
//! `call`'s timeout needs a timer: tokio's when the polling thread is in a
//! tokio runtime (so it follows `tokio::time::pause` in tests; tokio
//! requires its time driver then, `enable_time` or `enable_all`), and a
//! timer thread of this crate's otherwise.

use crate::endpoint::Queued;
use crate::{Endpoint, Error, Request};
use bytes::Bytes;
use homa_core::Message;
use homa_core::{Metrics, RpcId};
use std::net::SocketAddr;
use std::time::Duration;

/// An async view of an [`Endpoint`]. Cheap to clone.
///
/// Works on any executor, and from plain threads: [`AsyncEndpoint::bind`]
/// and the calls that never block need no runtime at all, and the futures
/// need none to be polled (see the module's documentation for `call`'s
/// timer). Feature `tokio` (on by default).
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use bytes::Bytes;
/// use std::time::Duration;
///
/// let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
/// rt.block_on(async {
///     let server = homa::AsyncEndpoint::bind("127.0.0.1:0".parse()?, homa::Config::default())?;
///     let addr = server.local_addr();
///     let echo = server.clone();
///     tokio::spawn(async move {
///         while let Ok(req) = echo.recv_request().await {
///             echo.reply(req.id, req.message).unwrap();
///         }
///     });
///     let client = homa::AsyncEndpoint::bind("127.0.0.1:0".parse()?, homa::Config::default())?;
///     let resp = client.call(addr, Bytes::from_static(b"hi"), Duration::from_secs(5)).await?;
///     assert_eq!(resp, Bytes::from_static(b"hi"));
///     server.shutdown();
///     Ok::<(), Box<dyn std::error::Error>>(())
/// })
/// # }
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
    /// (on timeout the RPC is aborted and the result is
    /// [`Error::Timeout`]).
    ///
    /// Runs on any executor: inside a tokio runtime the timeout is tokio's
    /// timer (which tokio requires to be enabled, `enable_time`), elsewhere
    /// this crate's timer thread.
    ///
    /// Cancel-safe: if the future is dropped before it resolves, the RPC is
    /// aborted (nothing is left behind).
    pub async fn call(
        &self,
        dest: SocketAddr,
        request: Bytes,
        timeout: Duration,
    ) -> Result<Bytes, Error> {
        self.call_parts(dest, request, timeout)
            .await
            .map(Message::into_bytes)
    }

    /// Like [`AsyncEndpoint::call`], but the response stays in the packets
    /// it came in ([`Message::parts`]): no copy into one buffer (see
    /// [`Endpoint::recv_request_parts`]). Cancel-safe as `call`.
    pub async fn call_parts(
        &self,
        dest: SocketAddr,
        request: Bytes,
        timeout: Duration,
    ) -> Result<Message, Error> {
        let id = self.ep.send_request(dest, request)?;
        // Aborts the RPC unless it finished (dropped future, timeout, or
        // no timer to be had).
        let mut guard = AbortUnlessDone {
            ep: &self.ep,
            id,
            done: false,
        };
        let outcome = if tokio::runtime::Handle::try_current().is_ok() {
            tokio::time::timeout(timeout, self.recv_response_parts(id))
                .await
                .ok()
        } else {
            match crate::timer::timeout(timeout, self.recv_response_parts(id)).await {
                Ok(outcome) => outcome,
                Err(e) => return Err(Error::Io(e)),
            }
        };
        match outcome {
            Some(r) => {
                guard.done = true;
                r
            }
            None => Err(Error::Timeout),
        }
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
        self.recv_response_parts(id).await.map(Message::into_bytes)
    }

    /// Like [`AsyncEndpoint::recv_response`], but the response stays in the
    /// packets it came in (no copy into one buffer). Cancel-safe as
    /// `recv_response`.
    pub async fn recv_response_parts(&self, id: RpcId) -> Result<Message, Error> {
        match self.ep.inner().register_response(id) {
            // The sender goes away without a value when the RPC is aborted
            // or the endpoint closes; say which.
            Ok(rx) => {
                let mut pending = PendingResponse {
                    rx,
                    ep: &self.ep,
                    id,
                };
                (&mut pending.rx).await.unwrap_or_else(|_| {
                    Err(match self.ep.inner().check_open() {
                        Err(closed) => closed,
                        Ok(()) => Error::UnknownRpc(id),
                    })
                })
            }
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
        .map(Queued::into_request)
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

/// An async waiter's channel for the response of RPC `id`: dropped
/// before the response was taken out of it (the caller cancelled the
/// wait just as it came), it gives the response back to the endpoint.
struct PendingResponse<'a> {
    rx: crate::oneshot::Receiver<crate::endpoint::Outcome>,
    ep: &'a Endpoint,
    id: RpcId,
}

impl Drop for PendingResponse<'_> {
    fn drop(&mut self) {
        if let Some(outcome) = self.rx.close_and_take() {
            self.ep.inner().refile_response(self.id, outcome);
        }
    }
}

/// An async waiter's channel for the next request: dropped before the
/// request was taken out of it, it gives the request back.
struct PendingRequest<'a> {
    rx: crate::oneshot::Receiver<Queued>,
    ep: &'a Endpoint,
}

impl Drop for PendingRequest<'_> {
    fn drop(&mut self) {
        if let Some(req) = self.rx.close_and_take() {
            self.ep.inner().requeue_request(req);
        }
    }
}
