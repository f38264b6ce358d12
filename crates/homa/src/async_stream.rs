//! Streams for async code: [`AsyncEndpoint::open_stream`],
//! [`AsyncEndpoint::accept_stream`] and the [`AsyncStream`] handle, the
//! async face of [`Stream`] (the same stream state, the same errors).
//!
//! A wait never blocks the thread that polls: the future checks the
//! stream's state under the endpoint's lock and, with nothing there yet,
//! leaves its task's `Waker` in the endpoint's table of waiters
//! (`parked.rs`), where a blocked thread would park. The stream's events
//! wake it (whichever thread reads the socket drains them, the endpoint's
//! background thread when no application thread waits, as for the async
//! RPC API). Like the rest of [`AsyncEndpoint`], none of this needs a tokio
//! runtime: any executor polls these futures.

use crate::endpoint::Inner;
use crate::parked::{Ticket, WaitFor};
use crate::stream::Streams;
use crate::{AsyncEndpoint, Error, Stream};
use bytes::Bytes;
use homa_core::{Message, RpcId};
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// A future that resolves once `check` on the streams' state yields a
/// result; dropped earlier, it leaves the waiters' table.
struct StreamWait<'a, F> {
    inner: &'a Arc<Inner>,
    what: WaitFor,
    ticket: Option<Ticket>,
    check: F,
}

impl<T, F> Future for StreamWait<'_, F>
where
    F: FnMut(&mut Streams) -> Option<Result<T, Error>> + Unpin,
{
    type Output = Result<T, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let check = &mut this.check;
        this.inner
            .poll_stream(this.what, cx, &mut this.ticket, |streams| check(streams))
    }
}

impl<F> Drop for StreamWait<'_, F> {
    fn drop(&mut self) {
        if let Some(t) = self.ticket.take() {
            self.inner.leave_stream_wait(self.what, t);
        }
    }
}

/// Waits on `inner` for `what` until `check` yields a result.
fn wait<T, F>(inner: &Arc<Inner>, what: WaitFor, check: F) -> StreamWait<'_, F>
where
    F: FnMut(&mut Streams) -> Option<Result<T, Error>> + Unpin,
{
    StreamWait {
        inner,
        what,
        ticket: None,
        check,
    }
}

/// One end of a stream, for async code: send and receive messages in
/// order. The async twin of [`Stream`], with the same semantics and errors.
///
/// `send` and `recv` take `&self`: one task may send while another
/// receives. Dropping the handle before [`AsyncStream::finish`] aborts the
/// stream (the peer's operations fail with [`Error::StreamReset`]); after
/// `finish` the stream ends by itself once the peer finishes too.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use bytes::Bytes;
///
/// let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
/// rt.block_on(async {
///     let server = homa::AsyncEndpoint::bind("127.0.0.1:0".parse()?, homa::Config::default())?;
///     let client = homa::AsyncEndpoint::bind("127.0.0.1:0".parse()?, homa::Config::default())?;
///     let addr = server.local_addr();
///     // The server echoes every message, then finishes after the client
///     // and waits until its end is acknowledged before its endpoint goes.
///     let echo = tokio::spawn(async move {
///         let s = server.accept_stream().await?;
///         while let Some(m) = s.recv().await? {
///             s.send(m).await?;
///         }
///         s.finish().await?;
///         s.closed().await
///     });
///     let s = client.open_stream(addr).await?;
///     s.send(Bytes::from_static(b"one")).await?;
///     s.send(Bytes::from_static(b"two")).await?;
///     s.finish().await?;
///     assert_eq!(s.recv().await?, Some(Bytes::from_static(b"one")));
///     assert_eq!(s.recv().await?, Some(Bytes::from_static(b"two")));
///     assert_eq!(s.recv().await?, None); // the server finished
///     echo.await??;
///     Ok::<(), Box<dyn std::error::Error>>(())
/// })
/// # }
/// ```
#[derive(Debug)]
pub struct AsyncStream {
    stream: Stream,
}

impl AsyncEndpoint {
    /// Opens a stream to `dest`, as [`crate::Endpoint::open_stream`]:
    /// resolves at once (messages sent meanwhile wait for the peer to
    /// accept); a peer that refuses or never answers makes the stream's
    /// operations fail ([`Error::StreamRefused`],
    /// [`Error::StreamOpenTimeout`]).
    pub async fn open_stream(&self, dest: SocketAddr) -> Result<AsyncStream, Error> {
        self.blocking().open_stream(dest).map(AsyncStream::from)
    }

    /// Awaits the next stream a peer opens.
    ///
    /// Cancel-safe: a stream is taken only by the poll that resolves the
    /// future; dropped before, the future leaves the next stream to
    /// another accepter.
    pub async fn accept_stream(&self) -> Result<AsyncStream, Error> {
        let ep = self.blocking();
        let id = wait(ep.inner(), WaitFor::Accept, Streams::take_accept).await?;
        Ok(ep.stream_handle(id).into())
    }
}

impl From<Stream> for AsyncStream {
    fn from(stream: Stream) -> AsyncStream {
        AsyncStream { stream }
    }
}

impl AsyncStream {
    /// The stream's id (its RPC).
    pub fn id(&self) -> RpcId {
        self.stream.id()
    }

    /// The peer's address.
    pub fn peer(&self) -> SocketAddr {
        self.stream.peer()
    }

    /// The blocking handle underneath (the same stream), for a thread.
    pub fn into_blocking(self) -> Stream {
        self.stream
    }

    /// Sends `message`, waiting while the window is full (the receiver has
    /// not read enough): backpressure. Fails with the stream's failure, or
    /// [`Error::StreamFinished`] after [`AsyncStream::finish`].
    ///
    /// Cancel-safe: dropped before it resolves, the message was not sent.
    /// For a time limit, wrap it in `tokio::time::timeout`.
    pub async fn send(&self, message: Bytes) -> Result<(), Error> {
        let id = self.id();
        loop {
            match self.stream.try_send_inner(&message)? {
                Ok(()) => return Ok(()),
                Err(()) => {
                    wait(
                        self.stream.endpoint().inner(),
                        WaitFor::Stream(id),
                        move |s: &mut Streams| s.send_ready(id),
                    )
                    .await?
                }
            }
        }
    }

    /// Sends `message` if the window has room, else fails at once with
    /// [`Error::Limit`], as [`Stream::try_send`].
    pub fn try_send(&self, message: Bytes) -> Result<(), Error> {
        self.stream.try_send(message)
    }

    /// Awaits the next message in order. `Ok(None)`: the peer finished,
    /// nothing more will come. Messages that arrived before a failure are
    /// returned first, then the failure.
    ///
    /// Cancel-safe: a message is taken only by the poll that resolves the
    /// future; dropped before, nothing is lost.
    pub async fn recv(&self) -> Result<Option<Bytes>, Error> {
        Ok(self.recv_parts().await?.map(Message::into_bytes))
    }

    /// [`AsyncStream::recv`], the message left in the packets it came in
    /// (see [`crate::Endpoint::recv_request_parts`]).
    pub async fn recv_parts(&self) -> Result<Option<Message>, Error> {
        let id = self.id();
        let got = wait(
            self.stream.endpoint().inner(),
            WaitFor::Stream(id),
            move |s: &mut Streams| s.recv_ready(id),
        )
        .await?;
        if got.is_some() {
            self.stream.read_done();
        }
        Ok(got)
    }

    /// Ends our direction, as [`Stream::finish`] (never waits: the end
    /// follows the messages already queued). Idempotent.
    pub async fn finish(&self) -> Result<(), Error> {
        self.stream.finish()
    }

    /// Resolves once the stream has closed (both directions ended and our
    /// end acknowledged), as [`Stream::wait_closed`]: await it before
    /// dropping the endpoint right after [`AsyncStream::finish`], or the
    /// end may never reach the peer. Fails with the stream's failure.
    ///
    /// Cancel-safe. For a time limit, wrap it in `tokio::time::timeout`.
    pub async fn closed(&self) -> Result<(), Error> {
        let id = self.id();
        wait(
            self.stream.endpoint().inner(),
            WaitFor::Stream(id),
            move |s: &mut Streams| s.closed_ready(id),
        )
        .await
    }

    /// Whether [`AsyncStream::finish`] succeeded on this handle.
    pub fn is_finished(&self) -> bool {
        self.stream.is_finished()
    }

    /// Aborts the stream now, keeping the handle: the peer's operations
    /// fail with [`Error::StreamReset`], and so do this handle's, including
    /// futures other tasks are awaiting. (Dropping an unfinished handle
    /// aborts too.) Does nothing once the stream has closed or failed.
    pub fn abort(&self) {
        self.stream.reset_now();
    }
}
