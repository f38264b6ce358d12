//! RPC streaming in the runtime: [`Endpoint::open_stream`],
//! [`Endpoint::accept_stream`] and the [`Stream`] handle.
//!
//! A stream is one RPC of the core ([`homa_core::StreamEvent`],
//! docs/protocol-notes.md, "RPC streaming"): an ordered, reliable sequence
//! of messages each way, with a window of `Config::core.stream_window`
//! messages per direction. The core's stream events are drained (by
//! whichever thread reads the socket, [`drain`]) into per-stream slots held
//! in the endpoint's state; a thread blocked in [`Stream::recv`] or
//! [`Stream::send`] parks on [`WaitFor::Stream`] and is woken by its
//! stream's events only; a task awaiting `AsyncStream`'s futures
//! (`async_stream.rs`) waits in the same table with its waker, through the
//! same checks ([`Streams::recv_ready`], [`Streams::send_ready`],
//! [`Streams::take_accept`]).

use crate::endpoint::Endpoint;
use crate::error::Error;
use crate::parked::{Parked, WaitFor};
use bytes::Bytes;
use homa_core::keyed::KeyedMap;
use homa_core::{Message, Nanos, RpcId, StreamError, StreamEvent};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The runtime's state of every stream (under the endpoint's lock).
#[derive(Debug, Default)]
pub(crate) struct Streams {
    by_id: KeyedMap<RpcId, Slot>,
    /// Streams peers opened that nobody accepted yet, oldest first.
    accept: VecDeque<RpcId>,
    /// Streams whose waiters an operation under the lock must wake (a
    /// local abort): `Inner::stream_op` wakes them.
    pub(crate) to_wake: Vec<RpcId>,
}

/// What one stream's handle has not taken yet.
#[derive(Debug, Default)]
struct Slot {
    /// Messages received in order, not yet read.
    messages: VecDeque<Message>,
    /// The peer finished its direction.
    ended: bool,
    /// The core reported room to send (after a send found the window full).
    writable: bool,
    /// Both directions ended; the core's state is gone.
    closed: bool,
    /// The stream failed; the core's state is gone.
    failed: Option<StreamError>,
    /// The handle was dropped after `finish`: the stream closes by itself,
    /// and what still arrives is read and dropped.
    detached: bool,
}

/// Moves the core's stream events into `streams` and wakes the threads
/// they concern. Returns true if there was any.
pub(crate) fn drain(
    core: &mut homa_core::Endpoint,
    now: Nanos,
    streams: &mut Streams,
    parked: &mut Parked,
) -> bool {
    let mut any = false;
    while let Some(ev) = core.poll_stream_event() {
        any = true;
        let id = match ev {
            StreamEvent::Opened { stream } => {
                streams.by_id.insert(stream, Slot::default());
                streams.accept.push_back(stream);
                parked.accept_ready();
                continue;
            }
            StreamEvent::Message { stream, message } => {
                match streams.by_id.get_mut(&stream) {
                    Some(s) if !s.detached => s.messages.push_back(message),
                    // Nobody will read it: let the window move.
                    _ => {
                        let _ = core.stream_read(now, stream);
                    }
                }
                stream
            }
            StreamEvent::End { stream } => {
                if let Some(s) = streams.by_id.get_mut(&stream) {
                    s.ended = true;
                }
                stream
            }
            StreamEvent::Writable { stream } => {
                if let Some(s) = streams.by_id.get_mut(&stream) {
                    s.writable = true;
                }
                stream
            }
            StreamEvent::Closed { stream } => {
                streams.gone(stream, None);
                stream
            }
            StreamEvent::Failed { stream, error } => {
                streams.gone(stream, Some(error));
                stream
            }
        };
        parked.stream_ready(id);
    }
    any
}

impl Streams {
    /// The core's state of `id` is gone (closed, or failed with `error`).
    fn gone(&mut self, id: RpcId, error: Option<StreamError>) {
        let Some(s) = self.by_id.get_mut(&id) else {
            return;
        };
        if s.detached {
            self.by_id.remove(&id);
            return;
        }
        s.closed = true;
        s.failed = error;
    }

    /// Why `id` cannot send: its failure, or that it has closed (or is
    /// unknown).
    fn send_error(&self, id: RpcId) -> Option<Error> {
        match self.by_id.get(&id) {
            None => Some(Error::UnknownRpc(id)),
            Some(Slot {
                failed: Some(e), ..
            }) => Some((*e).into()),
            Some(s) if s.closed => Some(Error::StreamFinished),
            Some(_) => None,
        }
    }

    /// A waiting sender's check: the stream's failure, or room to send
    /// (then the send is tried again), or `None` to wait on.
    pub(crate) fn send_ready(&self, id: RpcId) -> Option<Result<(), Error>> {
        if let Some(e) = self.send_error(id) {
            return Some(Err(e));
        }
        let s = self.by_id.get(&id)?;
        s.writable.then_some(Ok(()))
    }

    /// A check of [`Stream::wait_closed`]: closed (both directions ended,
    /// ours acknowledged), the stream's failure, or `None` to wait on.
    pub(crate) fn closed_ready(&self, id: RpcId) -> Option<Result<(), Error>> {
        match self.by_id.get(&id) {
            None => Some(Err(Error::UnknownRpc(id))),
            Some(Slot {
                failed: Some(e), ..
            }) => Some(Err((*e).into())),
            Some(s) if s.closed => Some(Ok(())),
            Some(_) => None,
        }
    }

    /// A waiting receiver's check: the next message, the end (`None`), the
    /// failure once the messages before it are read, or `None` to wait on.
    pub(crate) fn recv_ready(&mut self, id: RpcId) -> Option<Result<Option<Message>, Error>> {
        let Some(s) = self.by_id.get_mut(&id) else {
            return Some(Err(Error::UnknownRpc(id)));
        };
        if let Some(m) = s.messages.pop_front() {
            return Some(Ok(Some(m)));
        }
        if let Some(e) = s.failed {
            return Some(Err(e.into()));
        }
        (s.ended || s.closed).then_some(Ok(None))
    }

    /// An accepter's check: the oldest stream a peer opened, if any.
    pub(crate) fn take_accept(&mut self) -> Option<Result<RpcId, Error>> {
        self.accept.pop_front().map(Ok)
    }

    /// Whether a stream waits to be accepted.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn accept_pending(&self) -> bool {
        !self.accept.is_empty()
    }
}

/// One end of a stream: send and receive messages in order.
///
/// A sender thread and a receiver thread may share it (`&self` methods).
/// Dropping it before [`Stream::finish`] aborts the stream (the peer's
/// operations fail with [`Error::StreamReset`]); after `finish` the stream
/// ends by itself once the peer finishes too, and whatever the peer still
/// sends is dropped.
#[derive(Debug)]
pub struct Stream {
    endpoint: Endpoint,
    id: RpcId,
    finished: AtomicBool,
}

impl Endpoint {
    /// Opens a stream to `dest` (a homa-rs endpoint whose
    /// `core.stream_window` is not 0). Returns at once: messages sent
    /// meanwhile wait for the peer to accept, and a peer that refuses or
    /// never answers makes the stream's operations fail
    /// ([`Error::StreamRefused`], [`Error::StreamOpenTimeout`]).
    pub fn open_stream(&self, dest: SocketAddr) -> Result<Stream, Error> {
        let inner = self.inner();
        if dest.is_ipv4() != self.local_addr().is_ipv4() {
            return Err(Error::BadAddress(format!(
                "{dest}: this endpoint ({}) speaks the other IP version",
                self.local_addr()
            )));
        }
        let id = inner.stream_op(|core, now, streams| {
            let id = core.open_stream(now, dest)?;
            streams.by_id.insert(id, Slot::default());
            Ok::<_, Error>(id)
        })??;
        Ok(self.stream_handle(id))
    }

    /// Waits for a peer to open a stream with us (at most `timeout`, or
    /// for ever).
    pub fn accept_stream(&self, timeout: Option<Duration>) -> Result<Stream, Error> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let id = self
            .inner()
            .wait_stream(WaitFor::Accept, deadline, Streams::take_accept)?;
        Ok(self.stream_handle(id))
    }

    /// The handle of stream `id`, whose slot exists.
    pub(crate) fn stream_handle(&self, id: RpcId) -> Stream {
        Stream {
            endpoint: self.clone(),
            id,
            finished: AtomicBool::new(false),
        }
    }
}

/// Whether a refused send is to be retried when the stream is writable.
fn window_full(e: &homa_core::Error) -> bool {
    matches!(
        e,
        homa_core::Error::Limit("stream send window") | homa_core::Error::Limit("tx_buffer_limit")
    )
}

impl Stream {
    /// The stream's id (its RPC).
    pub fn id(&self) -> RpcId {
        self.id
    }

    /// The peer's address.
    pub fn peer(&self) -> SocketAddr {
        self.id.peer
    }

    /// Sends `message`, blocking while the window is full (the receiver has
    /// not read enough). Fails with the stream's failure, or
    /// [`Error::StreamFinished`] after [`Stream::finish`].
    pub fn send(&self, message: Bytes) -> Result<(), Error> {
        self.send_timeout(message, None)
    }

    /// [`Stream::send`], waiting at most `timeout` for room
    /// ([`Error::Timeout`]; the message was not sent).
    pub fn send_timeout(&self, message: Bytes, timeout: Option<Duration>) -> Result<(), Error> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            match self.try_send_inner(&message)? {
                Ok(()) => return Ok(()),
                Err(()) => {
                    let id = self.id;
                    self.endpoint.inner().wait_stream(
                        WaitFor::Stream(id),
                        deadline,
                        |streams| streams.send_ready(id),
                    )?;
                }
            }
        }
    }

    /// Sends `message` if the window has room; else fails with
    /// [`Error::Limit`] (`"stream send window"`, or `"tx_buffer_limit"` when
    /// the endpoint's send buffer is full) without blocking.
    pub fn try_send(&self, message: Bytes) -> Result<(), Error> {
        match self.try_send_inner(&message)? {
            Ok(()) => Ok(()),
            Err(()) => Err(Error::Limit("stream send window")),
        }
    }

    /// One attempt: `Ok(Err(()))` when the window is full.
    pub(crate) fn try_send_inner(&self, message: &Bytes) -> Result<Result<(), ()>, Error> {
        let id = self.id;
        self.endpoint.inner().stream_op(|core, now, streams| {
            if let Some(e) = streams.send_error(id) {
                return Err(e);
            }
            if let Some(s) = streams.by_id.get_mut(&id) {
                s.writable = false;
            }
            match core.stream_send(now, id, message.clone()) {
                Ok(()) => Ok(Ok(())),
                Err(e) if window_full(&e) => Ok(Err(())),
                Err(homa_core::Error::NotAwaitingReply(_)) => Err(Error::StreamFinished),
                Err(e) => Err(e.into()),
            }
        })?
    }

    /// Waits for the next message (at most `timeout`, or for ever).
    /// `Ok(None)`: the peer finished, nothing more will come. Messages that
    /// arrived before a failure are returned first, then the failure.
    pub fn recv(&self, timeout: Option<Duration>) -> Result<Option<Bytes>, Error> {
        Ok(self.recv_parts(timeout)?.map(Message::into_bytes))
    }

    /// [`Stream::recv`], the message left in the packets it came in (see
    /// [`Endpoint::recv_request_parts`]).
    pub fn recv_parts(&self, timeout: Option<Duration>) -> Result<Option<Message>, Error> {
        let id = self.id;
        let deadline = timeout.map(|t| Instant::now() + t);
        let got = self
            .endpoint
            .inner()
            .wait_stream(WaitFor::Stream(id), deadline, |streams| {
                streams.recv_ready(id)
            })?;
        if got.is_some() {
            self.read_done();
        }
        Ok(got)
    }

    /// A message was taken: the window moves (the stream may have closed
    /// meanwhile).
    pub(crate) fn read_done(&self) {
        let id = self.id;
        let _ = self.endpoint.inner().stream_op(|core, now, _| {
            let _ = core.stream_read(now, id);
        });
    }

    /// The endpoint the stream belongs to.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Whether [`Stream::finish`] succeeded on this handle.
    pub fn is_finished(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }

    /// Aborts the stream now, the handle kept: the peer's operations fail
    /// with [`Error::StreamReset`], and so do this handle's, including
    /// those waiting in other threads or tasks. Does nothing if the stream
    /// has already closed or failed.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn reset_now(&self) {
        let id = self.id;
        let _ = self.endpoint.inner().stream_op(|core, now, streams| {
            let Some(s) = streams.by_id.get_mut(&id) else {
                return;
            };
            if s.closed {
                return;
            }
            let _ = core.stream_abort(now, id);
            s.messages.clear();
            s.closed = true;
            s.failed = Some(StreamError::Reset);
            streams.to_wake.push(id);
        });
    }

    /// Ends our direction: the peer's [`Stream::recv`] returns `None` after
    /// every message sent before. Receiving goes on until the peer
    /// finishes too. Idempotent.
    pub fn finish(&self) -> Result<(), Error> {
        let id = self.id;
        self.endpoint.inner().stream_op(|core, now, streams| {
            match core.stream_finish(now, id) {
                Ok(()) => Ok(()),
                Err(homa_core::Error::UnknownRpc(_)) => match streams.by_id.get(&id) {
                    Some(Slot {
                        failed: Some(e), ..
                    }) => Err((*e).into()),
                    Some(s) if s.closed => Ok(()),
                    _ => Err(Error::UnknownRpc(id)),
                },
                Err(e) => Err(e.into()),
            }
        })??;
        self.finished.store(true, Ordering::Release);
        Ok(())
    }

    /// Waits (at most `timeout`, or for ever) until the stream has closed:
    /// both directions ended and our end acknowledged, so the peer has
    /// every message we sent and knows nothing more will come. Fails with
    /// the stream's failure, or [`Error::Timeout`].
    ///
    /// Wait for this before closing the endpoint right after
    /// [`Stream::finish`]: shutting an endpoint down ends its streams at
    /// once, and what was not yet delivered (the end included) is lost.
    /// Closing needs [`Stream::finish`] here and the peer's end; unread
    /// messages do not hold it back.
    pub fn wait_closed(&self, timeout: Option<Duration>) -> Result<(), Error> {
        let id = self.id;
        let deadline = timeout.map(|t| Instant::now() + t);
        self.endpoint
            .inner()
            .wait_stream(WaitFor::Stream(id), deadline, |streams| {
                streams.closed_ready(id)
            })
    }

    /// Aborts the stream now (as dropping it unfinished does).
    pub fn abort(self) {
        self.finished.store(false, Ordering::Release);
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let id = self.id;
        let finished = self.finished.load(Ordering::Acquire);
        let _ = self.endpoint.inner().stream_op(|core, now, streams| {
            let Some(s) = streams.by_id.get_mut(&id) else {
                return;
            };
            if s.closed {
                streams.by_id.remove(&id);
            } else if finished {
                s.detached = true;
                for _ in s.messages.drain(..) {
                    let _ = core.stream_read(now, id);
                }
            } else {
                let _ = core.stream_abort(now, id);
                streams.by_id.remove(&id);
            }
        });
    }
}
