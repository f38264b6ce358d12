//! The endpoint's client RPCs, in one table: each RPC from the moment it
//! is sent until its outcome is collected (or it is aborted).
//!
//! An RPC is [`ClientRpc::Outstanding`] while its outcome is to come; the
//! entry then holds whoever waits for it by id: whether a thread claimed it
//! (so that `recv_any_response` leaves it alone), the [`Handoff`] of the
//! thread the outcome goes straight to, and the channels of async tasks.
//! When the outcome comes ([`Clients::finish`]) it goes to the first of
//! them still listening, and the entry goes with it; with nobody to take
//! it, the entry becomes [`ClientRpc::Done`] and the RPC joins
//! [`Clients`]'s queue of finished RPCs, in the order they finished, for
//! `recv_any_response`.
//!
//! (These used to be five tables, two sets and three maps, and a finished
//! RPC cost four hash-table removals; now a blocking call costs one insert,
//! two lookups and one removal, none of them hashed while it is the only
//! RPC in the table: see `homa_core::front_map`.)

use super::Outcome;
use crate::oneshot;
use crate::parked::Handoff;
use crate::Error;
use homa_core::front_map::FrontMap;
use homa_core::RpcId;
use std::collections::VecDeque;
use std::sync::Arc;

/// Stale ids (of RPCs collected by id or aborted) the queue of finished
/// RPCs may hold beyond twice the finished RPCs still there before it is
/// cleaned.
const STALE_SLACK: usize = 32;

/// A client RPC as the endpoint keeps it.
pub(super) enum ClientRpc {
    /// Sent, the outcome still to come.
    Outstanding(Waiters),
    /// Finished: the outcome waits to be collected.
    Done {
        /// The response or the error.
        outcome: Outcome,
        /// Whether a thread waits for it by id (`recv_any_response`
        /// leaves it to that thread).
        claimed: bool,
    },
}

/// Who waits for an outstanding RPC's outcome.
#[derive(Default)]
pub(super) struct Waiters {
    /// A thread waits for it by id (`recv_response`, `call`).
    claimed: bool,
    /// Where the outcome goes for the thread waiting by id (one per thread,
    /// at most one per RPC: a second thread waiting for the same RPC goes
    /// without; see [`Handoff`]).
    handoff: Option<Arc<Handoff<Outcome>>>,
    /// Async waiters, oldest first. More than one when a waiter that was
    /// cancelled registers late (its task polled after the next waiter's):
    /// the outcome goes to the first still listening, so a stale
    /// registration never displaces a live one.
    tasks: Vec<oneshot::Sender<Outcome>>,
}

impl Waiters {
    /// Whether dropping it would free nothing: no handoff, and no task
    /// list that ever held a task (an empty `Vec` of no capacity owns no
    /// memory).
    fn owns_nothing(&self) -> bool {
        self.handoff.is_none() && self.tasks.capacity() == 0
    }
}

/// Where [`Clients::finish`] left an outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Finished {
    /// Nowhere: the RPC had been aborted (or had finished already).
    Dropped,
    /// With an async task.
    Task,
    /// In the handoff of the thread that waits for it by id.
    Thread,
    /// In the table, to be collected; `claimed` says whether a thread
    /// waits for it by id.
    Queued {
        /// Whether a thread waits for it by id.
        claimed: bool,
    },
}

/// The client RPCs of an endpoint (kept under its lock).
#[derive(Default)]
pub(super) struct Clients {
    rpcs: FrontMap<RpcId, ClientRpc>,
    /// Finished RPCs in the order they finished, for `recv_any_response`.
    /// Also holds the ids of RPCs collected by id or aborted since, which
    /// are skipped when met and cleaned out when they outnumber the rest.
    done_order: VecDeque<RpcId>,
    /// How many entries are [`ClientRpc::Done`].
    done: usize,
}

impl Clients {
    /// RPC `id` was sent.
    pub(super) fn start(&mut self, id: RpcId) {
        self.rpcs
            .insert(id, ClientRpc::Outstanding(Waiters::default()));
    }

    /// Whether an outcome waits to be collected.
    pub(super) fn has_done(&self) -> bool {
        self.done > 0
    }

    /// Whether an RPC is still to finish.
    pub(super) fn has_outstanding(&self) -> bool {
        self.rpcs.len() > self.done
    }

    /// RPC `id` ended with `outcome`: it goes to the newest async task
    /// still listening (an older one may be a waiter its caller has
    /// cancelled whose future is not dropped yet: one registered after it
    /// is alive), else to the thread waiting by id through its handoff,
    /// else into the table until collected.
    pub(super) fn finish(&mut self, id: RpcId, mut outcome: Outcome) -> Finished {
        let Some(mut e) = self.rpcs.occupied(id) else {
            return Finished::Dropped; // aborted meanwhile
        };
        let ClientRpc::Outstanding(w) = e.get_mut() else {
            return Finished::Dropped;
        };
        // (No task waits, usually: then not even an empty drain.)
        if !w.tasks.is_empty() {
            let mut r = Some(outcome);
            for tx in w.tasks.drain(..).rev() {
                match tx.send(r.take().expect("present until sent")) {
                    Ok(()) => break,
                    Err(back) => r = Some(back), // that waiter has gone
                }
            }
            let Some(back) = r else {
                e.remove();
                return Finished::Task;
            };
            outcome = back;
        }
        if let Some(h) = w.handoff.take() {
            // Straight to the thread waiting for it by id: woken, it takes
            // it without the endpoint's lock.
            let gone = e.remove();
            // (What is left of the entry usually owns nothing, no task
            // having ever waited: it is then forgotten, not dropped, whose
            // glue, out of line, cost 33 instructions per RPC.)
            match gone {
                ClientRpc::Outstanding(ref w) if w.owns_nothing() => std::mem::forget(gone),
                _ => drop(gone),
            }
            h.put(outcome);
            return Finished::Thread;
        }
        let claimed = w.claimed;
        *e.get_mut() = ClientRpc::Done { outcome, claimed };
        self.done += 1;
        if self.done_order.len() >= 2 * self.done + STALE_SLACK {
            let rpcs = &self.rpcs;
            self.done_order
                .retain(|id| matches!(rpcs.get(id), Some(ClientRpc::Done { .. })));
        }
        self.done_order.push_back(id);
        Finished::Queued { claimed }
    }

    /// For a thread waiting for `id` by id: its outcome if it is in (the
    /// entry goes), an error if the RPC is unknown, else `None`, and the
    /// RPC is then claimed by the thread, its outcome to go to `handoff`
    /// (unless another thread's handoff is there already).
    pub(super) fn collect(
        &mut self,
        id: RpcId,
        handoff: &Arc<Handoff<Outcome>>,
    ) -> Option<Outcome> {
        match self.rpcs.get_mut(&id) {
            None => return Some(Err(Error::UnknownRpc(id))),
            Some(ClientRpc::Outstanding(w)) => {
                w.claimed = true;
                if w.handoff.is_none() {
                    w.handoff = Some(handoff.clone());
                }
                return None;
            }
            Some(ClientRpc::Done { .. }) => {}
        }
        self.take_done(id)
    }

    /// A thread that waited for `id` by id stops waiting without its
    /// outcome: it no longer claims the RPC, and its handoff leaves.
    pub(super) fn unclaim(&mut self, id: RpcId, handoff: &Arc<Handoff<Outcome>>) {
        match self.rpcs.get_mut(&id) {
            Some(ClientRpc::Outstanding(w)) => {
                w.claimed = false;
                if w.handoff.as_ref().is_some_and(|x| Arc::ptr_eq(x, handoff)) {
                    w.handoff = None;
                }
            }
            Some(ClientRpc::Done { claimed, .. }) => *claimed = false,
            None => {}
        }
    }

    /// The outcome of the RPC that finished first among those nobody
    /// waits for by id (`recv_any_response`); `Err` if none is
    /// outstanding either, `None` if one is.
    pub(super) fn take_any(&mut self) -> Option<Result<(RpcId, Outcome), Error>> {
        let mut skipped = Vec::new();
        let mut found = None;
        while let Some(id) = self.done_order.pop_front() {
            match self.rpcs.get(&id) {
                Some(ClientRpc::Done { claimed: true, .. }) => skipped.push(id),
                Some(ClientRpc::Done { .. }) => {
                    found = self.take_done(id).map(|r| (id, r));
                    break;
                }
                _ => {} // collected by id or aborted since
            }
        }
        for id in skipped.into_iter().rev() {
            self.done_order.push_front(id);
        }
        match found {
            Some(f) => Some(Ok(f)),
            None => (!self.has_outstanding()).then_some(Err(Error::NothingOutstanding)),
        }
    }

    /// Registers an async task waiting for `id`; `Err` carries an
    /// immediate answer: the outcome if it is in, else `Closed` if the
    /// endpoint is closed, or that the RPC is unknown.
    pub(super) fn register_task(
        &mut self,
        id: RpcId,
        closed: bool,
    ) -> Result<oneshot::Receiver<Outcome>, Outcome> {
        match self.rpcs.get_mut(&id) {
            Some(ClientRpc::Done { .. }) => {}
            _ if closed => return Err(Err(Error::Closed)),
            None => return Err(Err(Error::UnknownRpc(id))),
            Some(ClientRpc::Outstanding(w)) => {
                let (tx, rx) = oneshot::channel();
                // Waiters that gave up (timed out, cancelled) leave: a
                // caller waiting again and again in short slices keeps one
                // entry.
                w.tasks.retain(|t| !t.is_closed());
                w.tasks.push(tx);
                return Ok(rx);
            }
        }
        Err(self.take_done(id).expect("done"))
    }

    /// Forgets RPC `id` (aborted): whether its outcome was in. Its async
    /// tasks hear that their channel closed.
    pub(super) fn remove(&mut self, id: RpcId) -> bool {
        match self.rpcs.remove(&id) {
            Some(ClientRpc::Done { .. }) => {
                self.done -= 1;
                true
            }
            _ => false,
        }
    }

    /// The endpoint closed: every async task hears that its channel
    /// closed.
    pub(super) fn drop_tasks(&mut self) {
        for rpc in self.rpcs.values_mut() {
            if let ClientRpc::Outstanding(w) = rpc {
                w.tasks.clear();
            }
        }
    }

    /// Takes the outcome of `id` out if it is in.
    fn take_done(&mut self, id: RpcId) -> Option<Outcome> {
        match self.rpcs.remove(&id)? {
            ClientRpc::Done { outcome, .. } => {
                self.done -= 1;
                Some(outcome)
            }
            w @ ClientRpc::Outstanding(_) => {
                self.rpcs.insert(id, w);
                None
            }
        }
    }

    /// How many ids the queue of finished RPCs holds (stale ones too).
    #[cfg(test)]
    fn queued_ids(&self) -> usize {
        self.done_order.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use homa_core::Message;

    fn id(n: u64) -> RpcId {
        RpcId {
            id: n * 2,
            peer: "127.0.0.1:9".parse().unwrap(),
        }
    }

    fn ok(byte: u8) -> Outcome {
        Ok(Message::from_parts(vec![bytes::Bytes::from(vec![byte])]))
    }

    fn byte(r: Outcome) -> u8 {
        r.expect("a response").into_bytes()[0]
    }

    /// The immediate answer of [`Clients::register_task`].
    fn at_once(r: Result<oneshot::Receiver<Outcome>, Outcome>) -> Outcome {
        match r {
            Err(now) => now,
            Ok(_) => panic!("registered"),
        }
    }

    #[test]
    fn an_outcome_goes_to_the_claiming_threads_handoff_and_the_entry_goes() {
        let mut c = Clients::default();
        let h = Arc::new(Handoff::default());
        c.start(id(1));
        assert!(c.has_outstanding());
        assert!(c.collect(id(1), &h).is_none());
        assert_eq!(c.finish(id(1), ok(7)), Finished::Thread);
        assert_eq!(byte(h.take().unwrap()), 7);
        assert!(!c.has_outstanding() && !c.has_done());
        assert_eq!(c.rpcs.len(), 0);
        assert!(matches!(
            c.collect(id(1), &h),
            Some(Err(Error::UnknownRpc(_)))
        ));
        assert_eq!(c.queued_ids(), 0);
    }

    #[test]
    fn an_outcome_nobody_waits_for_is_queued_until_collected() {
        let mut c = Clients::default();
        let h = Arc::new(Handoff::default());
        c.start(id(1));
        c.start(id(2));
        assert_eq!(c.finish(id(1), ok(1)), Finished::Queued { claimed: false });
        assert!(c.has_done() && c.has_outstanding());
        assert_eq!(byte(c.collect(id(1), &h).unwrap()), 1);
        assert!(!c.has_done());
        assert!(h.take().is_none());
        // Its stale id is skipped by `take_any`.
        assert!(c.take_any().is_none()); // id(2) still outstanding
        assert_eq!(c.finish(id(2), ok(2)), Finished::Queued { claimed: false });
        let (got, r) = c.take_any().unwrap().unwrap();
        assert_eq!((got, byte(r)), (id(2), 2));
        assert!(matches!(c.take_any(), Some(Err(Error::NothingOutstanding))));
    }

    #[test]
    fn take_any_goes_in_finishing_order_and_skips_claimed_rpcs() {
        let mut c = Clients::default();
        let h = Arc::new(Handoff::default());
        let other = Arc::new(Handoff::default());
        for n in 1..=3 {
            c.start(id(n));
        }
        // A thread claims 2; another thread's leaving does not take its
        // handoff out.
        assert!(c.collect(id(2), &h).is_none());
        c.unclaim(id(2), &other);
        assert_eq!(c.finish(id(2), ok(2)), Finished::Thread);
        assert_eq!(byte(h.take().unwrap()), 2);
        c.start(id(4));
        assert!(c.collect(id(4), &h).is_none());
        c.unclaim(id(4), &h);
        assert!(c.collect(id(4), &other).is_none());
        c.unclaim(id(4), &other);
        // Claimed without a handoff: stays queued but claimed.
        if let Some(ClientRpc::Outstanding(w)) = c.rpcs.get_mut(&id(4)) {
            w.claimed = true;
        }
        assert_eq!(c.finish(id(4), ok(4)), Finished::Queued { claimed: true });
        assert_eq!(c.finish(id(3), ok(3)), Finished::Queued { claimed: false });
        assert_eq!(c.finish(id(1), ok(1)), Finished::Queued { claimed: false });
        let (a, _) = c.take_any().unwrap().unwrap();
        let (b, _) = c.take_any().unwrap().unwrap();
        assert_eq!((a, b), (id(3), id(1)));
        // Only the claimed one is left: nothing outstanding.
        assert!(matches!(c.take_any(), Some(Err(Error::NothingOutstanding))));
        c.unclaim(id(4), &h);
        let (d, r) = c.take_any().unwrap().unwrap();
        assert_eq!((d, byte(r)), (id(4), 4));
    }

    /// Of two async tasks listening, the newer gets the outcome (the older
    /// may be one its caller cancelled, not dropped yet); the older hears
    /// that its channel closed.
    #[test]
    fn the_newest_async_task_gets_the_outcome() {
        let mut c = Clients::default();
        c.start(id(1));
        let mut older = c.register_task(id(1), false).unwrap();
        let mut newer = c.register_task(id(1), false).unwrap();
        assert_eq!(c.finish(id(1), ok(7)), Finished::Task);
        assert_eq!(byte(newer.close_and_take().unwrap()), 7);
        assert!(older.close_and_take().is_none());
    }

    #[test]
    fn async_tasks_come_first_and_gone_ones_are_passed_over() {
        let mut c = Clients::default();
        let h = Arc::new(Handoff::default());
        c.start(id(1));
        let gone = c.register_task(id(1), false).unwrap();
        drop(gone);
        let mut live = c.register_task(id(1), false).unwrap();
        assert!(c.collect(id(1), &h).is_none());
        assert_eq!(c.finish(id(1), ok(5)), Finished::Task);
        assert_eq!(byte(live.close_and_take().unwrap()), 5);
        assert!(h.take().is_none());
        assert_eq!(c.rpcs.len(), 0);
        // Every task gone: to the thread.
        c.start(id(2));
        drop(c.register_task(id(2), false).unwrap());
        assert!(c.collect(id(2), &h).is_none());
        assert_eq!(c.finish(id(2), ok(6)), Finished::Thread);
        assert_eq!(byte(h.take().unwrap()), 6);
    }

    #[test]
    fn register_task_answers_at_once_when_it_can() {
        let mut c = Clients::default();
        c.start(id(1));
        c.finish(id(1), ok(1));
        // The outcome comes first, even on a closed endpoint.
        assert_eq!(byte(at_once(c.register_task(id(1), true))), 1);
        assert!(matches!(
            at_once(c.register_task(id(1), false)),
            Err(Error::UnknownRpc(_))
        ));
        c.start(id(2));
        assert!(matches!(
            at_once(c.register_task(id(2), true)),
            Err(Error::Closed)
        ));
        let mut rx = c.register_task(id(2), false).unwrap();
        c.drop_tasks();
        assert!(rx.close_and_take().is_none());
        assert!(c.has_outstanding());
    }

    #[test]
    fn aborts_forget_the_rpc_and_its_late_outcome() {
        let mut c = Clients::default();
        c.start(id(1));
        c.start(id(2));
        c.finish(id(2), ok(2));
        assert!(!c.remove(id(1)));
        assert!(c.remove(id(2)));
        assert!(!c.remove(id(2)));
        assert_eq!(c.finish(id(1), ok(1)), Finished::Dropped);
        assert!(!c.has_done() && !c.has_outstanding());
        assert!(matches!(c.take_any(), Some(Err(Error::NothingOutstanding))));
    }

    #[test]
    fn the_finishing_order_stays_bounded_when_outcomes_are_collected_by_id() {
        let mut c = Clients::default();
        let h = Arc::new(Handoff::default());
        for n in 0..10_000 {
            c.start(id(n));
            c.finish(id(n), ok(0));
            assert!(c.collect(id(n), &h).is_some());
        }
        assert!(c.queued_ids() <= STALE_SLACK + 1, "{}", c.queued_ids());
        assert_eq!(c.rpcs.len(), 0);
    }
}
