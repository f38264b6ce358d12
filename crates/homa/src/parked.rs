//! Threads asleep in the blocking API, by what they wait for, so that an
//! outcome wakes the one thread it is for.
//!
//! They used to sleep on one condition variable that every event notified
//! in full: with N threads sharing an endpoint, each response woke N − 1 of
//! them for nothing (and on a busy host each futile wake-up takes a CPU
//! from someone who needed it). Now a response wakes the thread waiting for
//! that RPC (or one waiting for any response), a request wakes one thread
//! waiting for requests, and a free reader role wakes one thread to take it.
//! A thread parks with a timeout and re-checks the endpoint's state whenever
//! it wakes, so a spurious or early wake-up costs a check, never a result.
//!
//! Async tasks wait for stream events here too (`AsyncStream`, see
//! `async_stream.rs`): an entry is then a task's [`Waker`] instead of a
//! thread, entered by a future's poll and left when it is polled again or
//! dropped. Tasks never take the reader role, so a free role
//! ([`Parked::wake_one`]) wakes threads only.

use homa_core::keyed::KeyedMap;
use homa_core::RpcId;
use smallvec::SmallVec;
use std::collections::VecDeque;
use std::task::Waker;
use std::thread::Thread;

/// What a parked thread waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WaitFor {
    /// The outcome of this RPC (`recv_response`, `call`).
    Response(RpcId),
    /// The outcome of any RPC nobody waits for by id (`recv_any_response`).
    AnyResponse,
    /// The next request (`recv_request`).
    Request,
    /// Something on this stream: a message, its end, room to send, or its
    /// failure (`Stream::recv`, `Stream::send`; see `stream.rs`).
    Stream(RpcId),
    /// The next stream a peer opened (`accept_stream`).
    Accept,
}

/// A parked thread's place, to leave the table by when it wakes.
pub(crate) type Ticket = u64;

/// Who waits: a parked thread, or an async task (its waker).
#[derive(Debug, Clone)]
pub(crate) enum Sleeper {
    /// A thread of the blocking API, parked.
    Thread(Thread),
    /// An async task (a stream future of the async API).
    Task(Waker),
}

impl Sleeper {
    fn is_thread(&self) -> bool {
        matches!(self, Sleeper::Thread(_))
    }

    fn wake(self) {
        match self {
            Sleeper::Thread(t) => t.unpark(),
            Sleeper::Task(w) => w.wake(),
        }
    }
}

/// One waiter's entry.
type Entry = (Ticket, Sleeper);

/// Threads to unpark (and tasks to wake) once the endpoint's lock is
/// released.
pub(crate) type Woken = SmallVec<[Sleeper; 2]>;

/// The parked threads of an endpoint (kept under its lock).
#[derive(Debug, Default)]
pub(crate) struct Parked {
    next: Ticket,
    by_rpc: KeyedMap<RpcId, Vec<Entry>>,
    any_response: VecDeque<Entry>,
    requests: VecDeque<Entry>,
    /// Threads waiting on a stream, and tasks in `stream_tasks` (apart, so
    /// that a free reader role finds a thread without looking at tasks).
    streams: KeyedMap<RpcId, Vec<Entry>>,
    stream_tasks: KeyedMap<RpcId, Vec<Entry>>,
    /// Threads waiting to accept a stream, and tasks in `accept_tasks`;
    /// the oldest ticket of the two goes first.
    accepts: VecDeque<Entry>,
    accept_tasks: VecDeque<Entry>,
    woken: Woken,
    /// What the application thread that reads the socket waits for: it
    /// checks for it after each round of input, so the first such item of
    /// a round is left to it instead of waking a parked thread that would
    /// find nothing (with two server threads, every request woke the other
    /// thread for nothing).
    reader: Option<WaitFor>,
    /// Whether this round's item for the reader is spoken for.
    reader_served: bool,
}

impl Parked {
    /// Registers the calling thread as waiting for `what`; it then parks
    /// (after releasing the lock) and calls [`Parked::leave`] on waking.
    pub(crate) fn enter(&mut self, what: WaitFor) -> Ticket {
        self.enter_as(what, Sleeper::Thread(std::thread::current()))
    }

    /// Registers an async task as waiting for `what` (a stream or an
    /// accept: tasks wait for nothing else here); `waker` is woken by the
    /// event, after which the task's future polls again and calls
    /// [`Parked::leave`].
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn enter_task(&mut self, what: WaitFor, waker: Waker) -> Ticket {
        debug_assert!(matches!(what, WaitFor::Stream(_) | WaitFor::Accept));
        self.enter_as(what, Sleeper::Task(waker))
    }

    fn enter_as(&mut self, what: WaitFor, sleeper: Sleeper) -> Ticket {
        self.next += 1;
        let entry = (self.next, sleeper);
        match what {
            WaitFor::Response(id) => self.by_rpc.entry(id).or_default().push(entry),
            WaitFor::AnyResponse => self.any_response.push_back(entry),
            WaitFor::Request => self.requests.push_back(entry),
            WaitFor::Stream(id) if entry.1.is_thread() => {
                self.streams.entry(id).or_default().push(entry)
            }
            WaitFor::Stream(id) => self.stream_tasks.entry(id).or_default().push(entry),
            WaitFor::Accept if entry.1.is_thread() => self.accepts.push_back(entry),
            WaitFor::Accept => self.accept_tasks.push_back(entry),
        }
        self.next
    }

    /// Removes the thread's entry if a wake-up has not removed it already.
    pub(crate) fn leave(&mut self, what: WaitFor, ticket: Ticket) {
        let gone = |q: &mut VecDeque<Entry>| q.retain(|(t, _)| *t != ticket);
        match what {
            WaitFor::Response(id) => {
                if let Some(v) = self.by_rpc.get_mut(&id) {
                    v.retain(|(t, _)| *t != ticket);
                    if v.is_empty() {
                        self.by_rpc.remove(&id);
                    }
                }
            }
            WaitFor::AnyResponse => gone(&mut self.any_response),
            WaitFor::Request => gone(&mut self.requests),
            WaitFor::Stream(id) => {
                for map in [&mut self.streams, &mut self.stream_tasks] {
                    if let Some(v) = map.get_mut(&id) {
                        v.retain(|(t, _)| *t != ticket);
                        if v.is_empty() {
                            map.remove(&id);
                        }
                    }
                }
            }
            WaitFor::Accept => {
                gone(&mut self.accepts);
                gone(&mut self.accept_tasks);
            }
        }
    }

    /// An application thread waiting for `what` became the reader (or, with
    /// `None`, the reader left).
    pub(crate) fn set_reader(&mut self, what: Option<WaitFor>) {
        self.reader = what;
        self.reader_served = false;
    }

    /// A round of input begins: the reader will check again after it.
    pub(crate) fn new_round(&mut self) {
        self.reader_served = false;
    }

    /// Leaves this item to the reader if it waits for one like it and has
    /// none this round.
    fn for_reader(&mut self, what: WaitFor) -> bool {
        if self.reader == Some(what) && !self.reader_served {
            self.reader_served = true;
            return true;
        }
        false
    }

    /// A request was queued: wakes the thread that has waited longest
    /// (unless the reader, which waits for a request, will take it).
    pub(crate) fn request_ready(&mut self) {
        if self.for_reader(WaitFor::Request) {
            return;
        }
        if let Some((_, t)) = self.requests.pop_front() {
            self.woken.push(t);
        }
    }

    /// RPC `id` has an outcome to collect: wakes whoever waits for it by id,
    /// or else (unless a thread that is not parked claimed it) the thread
    /// that has waited longest for any response.
    ///
    /// (Inline for the usual case, a thread that waits by id and reads
    /// the socket itself: nothing to do, which the call took 21
    /// instructions to find.)
    #[inline]
    pub(crate) fn response_ready(&mut self, id: RpcId, claimed: bool) {
        if claimed && self.by_rpc.is_empty() {
            return;
        }
        self.response_ready_slow(id, claimed);
    }

    /// [`Parked::response_ready`] when someone may be parked for it.
    #[inline(never)]
    fn response_ready_slow(&mut self, id: RpcId, claimed: bool) {
        // (Usually nobody is parked for an RPC: the thread that waits for
        // it reads the socket itself. An empty table is not hashed into.)
        if let Some(v) = self.by_rpc_remove(id) {
            self.woken.extend(v.into_iter().map(|(_, t)| t));
        } else if !claimed && !self.for_reader(WaitFor::AnyResponse) {
            if let Some((_, t)) = self.any_response.pop_front() {
                self.woken.push(t);
            }
        }
    }

    /// RPC `id` is gone without an outcome (aborted): its waiters learn it,
    /// and so do those waiting for any response (there may be nothing
    /// outstanding now).
    pub(crate) fn rpc_gone(&mut self, id: RpcId) {
        if let Some(v) = self.by_rpc_remove(id) {
            self.woken.extend(v.into_iter().map(|(_, t)| t));
        }
        self.woken
            .extend(self.any_response.drain(..).map(|(_, t)| t));
    }

    /// Takes the threads parked for RPC `id` out of the table.
    fn by_rpc_remove(&mut self, id: RpcId) -> Option<Vec<Entry>> {
        if self.by_rpc.is_empty() {
            return None;
        }
        self.by_rpc.remove(&id)
    }

    /// Something happened on stream `id`: wakes every thread waiting on it
    /// (a sender and a receiver may share a stream; each re-checks).
    pub(crate) fn stream_ready(&mut self, id: RpcId) {
        for map in [&mut self.streams, &mut self.stream_tasks] {
            if let Some(v) = map.remove(&id) {
                self.woken.extend(v.into_iter().map(|(_, t)| t));
            }
        }
    }

    /// A peer opened a stream: wakes the thread (or task) that has waited
    /// longest to accept one. (A task woken so that drops its future
    /// without polling passes the turn on: `async_stream.rs`.)
    pub(crate) fn accept_ready(&mut self) {
        let thread_first = match (self.accepts.front(), self.accept_tasks.front()) {
            (Some((a, _)), Some((b, _))) => a < b,
            (a, _) => a.is_some(),
        };
        let next = if thread_first {
            self.accepts.pop_front()
        } else {
            self.accept_tasks.pop_front()
        };
        if let Some((_, t)) = next {
            self.woken.push(t);
        }
    }

    /// The reader role is free: wakes one thread to take it (tasks cannot).
    /// (The usual case, nobody else waits, is checked inline: out of line
    /// the call cost some 26 instructions per round trip.)
    #[inline]
    pub(crate) fn wake_one(&mut self) {
        if self.requests.is_empty()
            && self.accepts.is_empty()
            && self.streams.is_empty()
            && self.any_response.is_empty()
            && self.by_rpc.is_empty()
        {
            return; // (the usual case: the reader was the only waiter)
        }
        self.wake_one_slow();
    }

    /// [`Parked::wake_one`] when some thread waits.
    #[inline(never)]
    fn wake_one_slow(&mut self) {
        let t = match self
            .requests
            .pop_front()
            .or_else(|| self.accepts.pop_front())
            .or_else(|| {
                if self.streams.is_empty() {
                    return None;
                }
                let id = self.streams.keys().next().copied()?;
                let v = self.streams.get_mut(&id)?;
                let t = v.pop();
                if v.is_empty() {
                    self.streams.remove(&id);
                }
                t
            }) {
            Some((_, t)) => Some(t),
            None => match self.any_response.pop_front() {
                Some((_, t)) => Some(t),
                None if self.by_rpc.is_empty() => None,
                None => {
                    let id = self.by_rpc.keys().next().copied();
                    id.and_then(|id| {
                        let v = self.by_rpc.get_mut(&id)?;
                        let t = v.pop().map(|(_, t)| t);
                        if v.is_empty() {
                            self.by_rpc.remove(&id);
                        }
                        t
                    })
                }
            },
        };
        self.woken.extend(t);
    }

    /// The endpoint closed: wakes everyone.
    pub(crate) fn wake_all(&mut self) {
        for (_, v) in self.by_rpc.drain() {
            self.woken.extend(v.into_iter().map(|(_, t)| t));
        }
        self.woken
            .extend(self.any_response.drain(..).map(|(_, t)| t));
        self.woken.extend(self.requests.drain(..).map(|(_, t)| t));
        for (_, v) in self.streams.drain().chain(self.stream_tasks.drain()) {
            self.woken.extend(v.into_iter().map(|(_, t)| t));
        }
        self.woken.extend(self.accepts.drain(..).map(|(_, t)| t));
        self.woken
            .extend(self.accept_tasks.drain(..).map(|(_, t)| t));
    }

    /// The threads to unpark and tasks to wake (after releasing the lock).
    pub(crate) fn take_woken(&mut self) -> Woken {
        std::mem::take(&mut self.woken)
    }
}

/// Where the thread that reads the socket puts the outcome of an RPC for
/// the thread that waits for it by id (`recv_response`, `call`), under the
/// endpoint's lock: woken, that thread takes it from here without taking
/// the endpoint's lock again. (With 64 threads sharing an endpoint, that
/// lock, taken three times per RPC by each, was contended enough that
/// waiters spun and yielded their CPU.) Generic so that it can be tested
/// apart; the endpoint keeps its outcomes here.
#[derive(Debug)]
pub(crate) struct Handoff<T>(parking_lot::Mutex<Option<T>>);

impl<T> Default for Handoff<T> {
    fn default() -> Self {
        Handoff(parking_lot::Mutex::new(None))
    }
}

impl<T> Handoff<T> {
    /// Leaves `outcome` for the waiting thread (which is then woken).
    pub(crate) fn put(&self, outcome: T) {
        *self.0.lock() = Some(outcome);
    }

    /// The outcome left here, if any.
    pub(crate) fn take(&self) -> Option<T> {
        self.0.lock().take()
    }
}

/// Unparks the threads (and wakes the tasks) [`Parked::take_woken`]
/// returned.
///
/// (The usual case, nobody, is checked inline: out of line the call cost
/// some 15 instructions, three times per round trip.)
#[inline]
pub(crate) fn unpark(woken: Woken) {
    if woken.is_empty() && !woken.spilled() {
        // The usual case. Nothing to drop either: an empty inline vector
        // owns nothing, and its drop glue cost more than the rest.
        std::mem::forget(woken);
        return;
    }
    wake_all(woken);
}

/// [`unpark`]'s work when somebody is to be woken.
#[inline(never)]
fn wake_all(woken: Woken) {
    for t in woken {
        t.wake();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    fn rpc(n: u64) -> RpcId {
        let peer: SocketAddr = "127.0.0.1:9".parse().unwrap();
        RpcId { peer, id: n }
    }

    fn woken(p: &mut Parked) -> usize {
        p.take_woken().len()
    }

    #[test]
    fn a_response_wakes_only_its_waiter() {
        let mut p = Parked::default();
        p.enter(WaitFor::Response(rpc(2)));
        p.enter(WaitFor::Response(rpc(4)));
        p.enter(WaitFor::Request);
        p.enter(WaitFor::AnyResponse);
        p.response_ready(rpc(2), true);
        assert_eq!(woken(&mut p), 1);
        // Nobody waits for 6 by id: the any-waiter takes it, once.
        p.response_ready(rpc(6), false);
        assert_eq!(woken(&mut p), 1);
        p.response_ready(rpc(8), false);
        assert_eq!(woken(&mut p), 0);
        // A claimed RPC's outcome does not wake any-waiters.
        p.enter(WaitFor::AnyResponse);
        p.response_ready(rpc(10), true);
        assert_eq!(woken(&mut p), 0);
    }

    #[test]
    fn requests_wake_one_thread_each_oldest_first() {
        let mut p = Parked::default();
        let a = p.enter(WaitFor::Request);
        let b = p.enter(WaitFor::Request);
        p.request_ready();
        assert_eq!(woken(&mut p), 1);
        // The first left the queue when woken; leaving again is harmless.
        p.leave(WaitFor::Request, a);
        assert_eq!(p.requests.len(), 1);
        assert_eq!(p.requests[0].0, b);
        p.leave(WaitFor::Request, b);
        p.request_ready();
        assert_eq!(woken(&mut p), 0);
    }

    #[test]
    fn the_reader_takes_the_first_item_of_a_round_itself() {
        let mut p = Parked::default();
        p.enter(WaitFor::Request);
        p.enter(WaitFor::Request);
        p.set_reader(Some(WaitFor::Request));
        p.new_round();
        p.request_ready();
        assert_eq!(woken(&mut p), 0, "the reader takes the first");
        p.request_ready();
        assert_eq!(woken(&mut p), 1, "a second one wakes a parked thread");
        p.new_round();
        p.request_ready();
        assert_eq!(woken(&mut p), 0);
        // A reader waiting for something else leaves nothing to itself.
        p.set_reader(Some(WaitFor::Response(rpc(2))));
        p.request_ready();
        assert_eq!(woken(&mut p), 1);
        p.set_reader(Some(WaitFor::AnyResponse));
        p.enter(WaitFor::AnyResponse);
        p.response_ready(rpc(4), false);
        assert_eq!(woken(&mut p), 0);
        p.response_ready(rpc(6), false);
        assert_eq!(woken(&mut p), 1);
        p.set_reader(None);
        p.enter(WaitFor::Request);
        p.request_ready();
        assert_eq!(woken(&mut p), 1);
    }

    #[test]
    fn leaving_forgets_the_entry() {
        let mut p = Parked::default();
        let t = p.enter(WaitFor::Response(rpc(2)));
        p.leave(WaitFor::Response(rpc(2)), t);
        assert!(p.by_rpc.is_empty());
        let t = p.enter(WaitFor::AnyResponse);
        p.leave(WaitFor::AnyResponse, t);
        assert!(p.any_response.is_empty());
    }

    #[test]
    fn a_free_reader_role_wakes_one_of_any_kind_and_closing_wakes_all() {
        let mut p = Parked::default();
        p.wake_one();
        assert_eq!(woken(&mut p), 0);
        p.enter(WaitFor::Response(rpc(2)));
        p.wake_one();
        assert_eq!(woken(&mut p), 1);
        assert!(p.by_rpc.is_empty());
        p.enter(WaitFor::Response(rpc(2)));
        p.enter(WaitFor::Response(rpc(2)));
        p.enter(WaitFor::AnyResponse);
        p.enter(WaitFor::Request);
        p.enter(WaitFor::Stream(rpc(4)));
        p.enter(WaitFor::Accept);
        p.wake_all();
        assert_eq!(woken(&mut p), 6);
        p.wake_all();
        assert_eq!(woken(&mut p), 0);
    }

    #[test]
    fn stream_events_wake_that_streams_waiters_and_accepts_one() {
        let mut p = Parked::default();
        p.enter(WaitFor::Stream(rpc(2)));
        let t = p.enter(WaitFor::Stream(rpc(2)));
        p.enter(WaitFor::Stream(rpc(4)));
        p.enter(WaitFor::Accept);
        p.enter(WaitFor::Accept);
        p.stream_ready(rpc(2));
        assert_eq!(woken(&mut p), 2);
        p.leave(WaitFor::Stream(rpc(2)), t);
        p.stream_ready(rpc(2));
        assert_eq!(woken(&mut p), 0);
        p.accept_ready();
        assert_eq!(woken(&mut p), 1);
        p.wake_one();
        assert_eq!(woken(&mut p), 1);
        p.wake_one();
        assert_eq!(woken(&mut p), 1);
        assert!(p.streams.is_empty() && p.accepts.is_empty());
    }

    #[test]
    fn an_aborted_rpc_wakes_its_waiters_and_the_any_waiters() {
        let mut p = Parked::default();
        p.enter(WaitFor::Response(rpc(2)));
        p.enter(WaitFor::AnyResponse);
        p.enter(WaitFor::AnyResponse);
        p.enter(WaitFor::Request);
        p.rpc_gone(rpc(2));
        assert_eq!(woken(&mut p), 3);
        assert_eq!(p.requests.len(), 1);
    }

    #[test]
    fn tasks_are_woken_by_stream_events_but_never_given_the_reader_role() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        struct Count(AtomicUsize);
        impl std::task::Wake for Count {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut p = Parked::default();
        p.enter_task(WaitFor::Stream(rpc(2)), waker.clone());
        p.enter_task(WaitFor::Accept, waker.clone());
        // A free reader role finds no thread: nobody is woken.
        p.wake_one();
        assert_eq!(woken(&mut p), 0);
        let thread = p.enter(WaitFor::Stream(rpc(2)));
        p.wake_one();
        let w = p.take_woken();
        assert!(w.len() == 1 && w[0].is_thread());
        p.leave(WaitFor::Stream(rpc(2)), thread);
        // The stream's event and an accept wake the tasks.
        p.stream_ready(rpc(2));
        p.accept_ready();
        unpark(p.take_woken());
        assert_eq!(count.0.load(Ordering::SeqCst), 2);
        assert!(p.streams.is_empty() && p.accepts.is_empty());
        assert!(p.stream_tasks.is_empty() && p.accept_tasks.is_empty());
    }

    #[test]
    fn a_handoff_gives_its_outcome_once() {
        let h = Handoff::<u32>::default();
        assert_eq!(h.take(), None);
        h.put(7);
        assert_eq!(h.take(), Some(7));
        assert_eq!(h.take(), None);
    }

    /// Accepts go oldest first whether a thread or a task waits.
    #[test]
    fn accepts_are_served_in_arrival_order_across_threads_and_tasks() {
        let mut p = Parked::default();
        let waker = Waker::noop().clone();
        p.enter_task(WaitFor::Accept, waker.clone());
        p.enter(WaitFor::Accept);
        p.enter_task(WaitFor::Accept, waker);
        let mut order = Vec::new();
        for _ in 0..3 {
            p.accept_ready();
            order.extend(p.take_woken().iter().map(Sleeper::is_thread));
        }
        assert_eq!(order, [false, true, false]);
    }
}
