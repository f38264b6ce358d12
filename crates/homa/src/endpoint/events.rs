//! Where the core's events go: a finished RPC's outcome to the thread or
//! task that waits for it (or to the queue of finished ones), a request to
//! a waiting receiver (or the queue of requests); and how async callers
//! register to be told.

use super::clients::Finished;
use super::*;

impl Inner {
    /// Moves core events to whoever waits for them (the parked threads to
    /// wake are left in `st.parked`).
    pub(super) fn dispatch(&self, st: &mut State, now: Nanos) {
        st.parked.new_round();
        let mut any = false;
        while let Some(ev) = st.core.poll_event() {
            if !any {
                st.generation += 1;
            }
            any = true;
            match ev {
                Event::Request { rpc, message } => {
                    let mut req = Some(Queued { id: rpc, message });
                    while let Some(tx) = st.async_requests.pop_front() {
                        match tx.send(req.take().expect("present until sent")) {
                            Ok(()) => break,
                            Err(r) => req = Some(r), // that waiter has gone
                        }
                    }
                    if let Some(r) = req {
                        st.requests.push_back(r);
                        st.parked.request_ready();
                    }
                }
                Event::Response { rpc, message } => Self::finish(st, rpc, Ok(message)),
                Event::Failed { rpc, error } => Self::finish(st, rpc, Err(error.into())),
            }
        }
        // Stream events go to their streams (`stream.rs`).
        if crate::stream::drain(&mut st.core, now, &mut st.streams, &mut st.parked) && !any {
            st.generation += 1;
        }
        if any {
            self.sync_ready(st);
        }
    }

    /// Client RPC `rpc` ended: its outcome goes to whoever waits for it
    /// (`clients.rs`), and the thread that waits is woken.
    pub(super) fn finish(st: &mut State, rpc: RpcId, r: Outcome) {
        match st.clients.finish(rpc, r) {
            Finished::Dropped | Finished::Task => {}
            Finished::Thread => {
                // (A thread in a lane sleeps on its socket, not parked.)
                st.lanes.note_finished(rpc);
                st.parked.response_ready(rpc, true)
            }
            Finished::Queued { claimed } => st.parked.response_ready(rpc, claimed),
        }
    }

    /// Registers an async waiter for a response; `Err` carries an immediate
    /// answer.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn register_response(
        &self,
        id: RpcId,
    ) -> Result<oneshot::Receiver<Outcome>, Outcome> {
        let mut st = self.lock();
        let closed = self.closed.load(Ordering::Acquire);
        let r = st.clients.register_task(id, closed);
        if r.is_err() {
            self.sync_ready(&st);
        }
        r
    }

    /// Takes back the outcome of client RPC `id` from an async waiter that
    /// was handed it and dropped before it read it (a cancelled
    /// `recv_response`): it goes to whoever else waits, or into the table
    /// until collected, as if it had just come.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn refile_response(&self, id: RpcId, outcome: Outcome) {
        let mut st = self.lock();
        st.generation += 1;
        st.clients.start(id);
        Self::finish(&mut st, id, outcome);
        self.sync_ready(&st);
        let woken = st.parked.take_woken();
        drop(st);
        unpark(woken);
    }

    /// Puts a request back at the head of the queue (or hands it to the
    /// first async waiter still there) and wakes whoever waits.
    pub(crate) fn requeue_request(&self, request: Queued) {
        let mut st = self.lock();
        st.generation += 1;
        let mut req = Some(request);
        while let Some(tx) = st.async_requests.pop_front() {
            match tx.send(req.take().expect("present until sent")) {
                Ok(()) => break,
                Err(r) => req = Some(r), // that waiter has gone
            }
        }
        if let Some(r) = req {
            st.requests.push_front(r);
            st.parked.request_ready();
        }
        if self.waiters.load(Ordering::Acquire) > 0 && st.reader != Reader::Nobody {
            // The reader may sleep on the socket: it checks the queue again.
            self.kick_reader(&st);
        }
        let woken = st.parked.take_woken();
        drop(st);
        unpark(woken);
    }

    /// Registers an async waiter for the next request.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn register_request(
        &self,
    ) -> Result<oneshot::Receiver<Queued>, Result<Queued, Error>> {
        let mut st = self.lock();
        if let Some(r) = st.requests.pop_front() {
            self.sync_ready(&st);
            return Err(Ok(r));
        }
        if self.closed.load(Ordering::Acquire) {
            return Err(Err(Error::Closed));
        }
        let (tx, rx) = oneshot::channel();
        st.async_requests.push_back(tx);
        Ok(rx)
    }
}
