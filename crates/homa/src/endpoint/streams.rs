//! Hooks for streams (`stream.rs`, `async_stream.rs`): operations on the
//! core's streams under the endpoint's lock, and waiting for their events,
//! as a blocked thread or (async) as a task's waker in the same table.

use super::{Inner, Output, Reader};
use crate::parked::{unpark, WaitFor};
use crate::Error;
use homa_core::Nanos;
use std::time::Instant;

impl Inner {
    /// Runs `f` on the core and the streams' state under the lock (stream
    /// events drained before and after), then sends what it produced and
    /// wakes whoever its stream events concern.
    pub(crate) fn stream_op<T>(
        &self,
        f: impl FnOnce(&mut homa_core::Endpoint, Nanos, &mut crate::stream::Streams) -> T,
    ) -> Result<T, Error> {
        self.check_open()?;
        let mut guard = self.lock();
        // Again under the lock: a shutdown may have come in between.
        self.check_open()?;
        let st = &mut *guard;
        let now = self.now();
        let mut events = crate::stream::drain(&mut st.core, now, &mut st.streams, &mut st.parked);
        let r = f(&mut st.core, now, &mut st.streams);
        for id in std::mem::take(&mut st.streams.to_wake) {
            st.parked.stream_ready(id);
        }
        events |= crate::stream::drain(&mut st.core, now, &mut st.streams, &mut st.parked);
        if events {
            st.generation += 1;
            if st.reader != Reader::Nobody {
                // The reader may wait on one of these streams, asleep.
                self.kick_reader(st);
            }
        }
        let mut out = Output::new();
        self.take_output(st, now, &mut out);
        self.wake_reader_for_pacer(st);
        let send = self.queue_out(&mut out);
        let woken = st.parked.take_woken();
        drop(guard);
        unpark(woken);
        self.send_queued(send, &out);
        Ok(r)
    }

    /// Waits (as [`Inner::wait_until`]) until `check` on the streams'
    /// state yields a result.
    pub(crate) fn wait_stream<T>(
        &self,
        what: WaitFor,
        deadline: Option<Instant>,
        mut check: impl FnMut(&mut crate::stream::Streams) -> Option<Result<T, Error>>,
    ) -> Result<T, Error> {
        self.wait_until(what, deadline, |st| check(&mut st.streams))
    }

    /// One poll of an async stream wait (`async_stream.rs`): `check` on
    /// the streams' state under the lock; without a result, the task's
    /// waker enters the parked table (as a thread would park) under
    /// `ticket`, replacing the entry of the previous poll. The background
    /// thread reads the socket for tasks, as for the async RPC API.
    #[cfg(feature = "tokio")]
    pub(crate) fn poll_stream<T>(
        &self,
        what: WaitFor,
        cx: &mut std::task::Context<'_>,
        ticket: &mut Option<crate::parked::Ticket>,
        check: impl FnOnce(&mut crate::stream::Streams) -> Option<Result<T, Error>>,
    ) -> std::task::Poll<Result<T, Error>> {
        use std::task::Poll;
        let mut st = self.lock();
        if let Some(t) = ticket.take() {
            st.parked.leave(what, t);
        }
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Poll::Ready(Err(Error::Closed));
        }
        if let Some(r) = check(&mut st.streams) {
            return Poll::Ready(r);
        }
        *ticket = Some(st.parked.enter_task(what, cx.waker().clone()));
        Poll::Pending
    }

    /// An async stream wait that is dropped leaves the parked table. An
    /// accept woken for a stream it now will not take passes the turn to
    /// the next waiter.
    #[cfg(feature = "tokio")]
    pub(crate) fn leave_stream_wait(&self, what: WaitFor, ticket: crate::parked::Ticket) {
        let mut st = self.lock();
        st.parked.leave(what, ticket);
        if what == WaitFor::Accept && st.streams.accept_pending() {
            st.parked.accept_ready();
        }
        let woken = st.parked.take_woken();
        drop(st);
        unpark(woken);
    }
}
