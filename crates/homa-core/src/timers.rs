//! Every timer of an endpoint in one table, ordered by deadline.
//!
//! Each timer is filed under its deadline, so finding the next one is
//! O(log n) and running the due ones costs O(log n) each: nothing scans all
//! RPCs or all peers on a tick. An owner that moves its deadline often (an
//! RPC that hears from its peer on every packet) does not refile: it keeps
//! the time of its last progress, and when the filed deadline comes it
//! refiles itself later if there was progress meanwhile (lazy timers).

use crate::{Nanos, RpcId};
use std::collections::BTreeSet;
use std::net::SocketAddr;

/// What a timer is for.
// (A tag of its own, as `Phase`'s: the derived order compares variants
// first, and otherwise decoded them from the address's spare values at
// every comparison of a B-tree search.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Timer {
    /// An RPC's silence check (RESEND, probe, NEED_ACK, give up).
    Rpc(RpcId),
    /// Acks owed to a peer have waited long enough: send them.
    Acks(SocketAddr),
    /// Look for idle peers to forget.
    PeerSweep,
    /// Recompute the unscheduled cutoffs from the sizes seen.
    Cutoffs,
    /// The receiver policy asked to decide again (e.g. paced credit).
    Policy,
    /// ByteDance mode: a peer whose grants are paused is due for a probe,
    /// or its pause for expiry.
    GrantPause(SocketAddr),
}

impl Timer {
    /// Whether running this timer somewhat late (a few milliseconds, e.g.
    /// a kernel timeout's jiffy) does no harm: flushing owed acks (the
    /// peer keeps an RPC's state a little longer), forgetting idle peers,
    /// recomputing the cutoffs. The others are strict: an RPC's silence
    /// check (a late one delays the recovery of every lost packet), the
    /// receiver policy's decisions (paced credit), a grant pause's end.
    pub fn is_lenient(&self) -> bool {
        matches!(self, Timer::Acks(_) | Timer::PeerSweep | Timer::Cutoffs)
    }
}

/// Where an RPC's silence check is filed: its deadline and its set. An
/// RPC's timer is strict, except while the RPC waits only for the ack of a
/// response it sent (see `Rpc::lenient_wait`): a late NEED_ACK only keeps
/// the RPC's state a little longer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RpcTimer {
    /// Deadline (ns).
    pub at: Nanos,
    /// Filed among the lenient timers.
    pub lenient: bool,
}

/// Deadlines of all timers, strict and lenient ones apart (so that the
/// earliest strict deadline is found in O(log n) as well).
///
/// The latest RPC timer filed ([`TimerTable::set_rpc`]) waits in a slot of
/// its own until [`TimerTable::settle`] (or the next operation that needs
/// it in its set) files it: filing it is a search and an insert in a
/// B-tree, and an RPC's timer is typically filed as its packet goes out,
/// between the packet's making and the send system call. The endpoint
/// leaves it there until the next RPC timer takes the slot or a timer
/// runs: an RPC that ends first (a one-packet RPC's response or ack
/// usually comes before the next RPC's packet goes out) takes its timer
/// out of the slot ([`TimerTable::cancel_deferred_rpc`]), and the B-tree
/// never sees it. Every answer of the table counts the slot
/// (its deadline, its entry), so whether it was settled is invisible, and
/// the order timers run in is the same (a set ordered by deadline and
/// timer, not by filing).
#[derive(Debug, Default)]
pub struct TimerTable {
    strict: BTreeSet<(Nanos, Timer)>,
    lenient: BTreeSet<(Nanos, Timer)>,
    /// An RPC timer filed and not yet in its set: deadline, RPC, lenient.
    deferred: Option<(Nanos, RpcId, bool)>,
}

impl TimerTable {
    fn set_of(&mut self, lenient: bool) -> &mut BTreeSet<(Nanos, Timer)> {
        if lenient {
            &mut self.lenient
        } else {
            &mut self.strict
        }
    }

    fn of(&mut self, timer: &Timer) -> &mut BTreeSet<(Nanos, Timer)> {
        debug_assert!(!matches!(timer, Timer::Rpc(_)), "RPC timers: set_rpc");
        self.set_of(timer.is_lenient())
    }

    /// Files `timer` (not an RPC's: see [`TimerTable::set_rpc`]) at `at`,
    /// replacing its deadline `old` if it had one. Returns `at`, which the
    /// owner stores as its current deadline.
    pub fn set(&mut self, timer: Timer, old: Option<Nanos>, at: Nanos) -> Nanos {
        let set = self.of(&timer);
        if let Some(o) = old {
            set.remove(&(o, timer));
        }
        set.insert((at, timer));
        at
    }

    /// Removes `timer` filed at `at`.
    pub fn cancel(&mut self, timer: Timer, at: Option<Nanos>) {
        if let Some(at) = at {
            self.of(&timer).remove(&(at, timer));
        }
    }

    /// Files RPC `id`'s silence check at `at`, among the lenient timers if
    /// `lenient`. The RPC stores what this returns, for
    /// [`TimerTable::cancel_rpc`].
    ///
    /// The timer waits in the table's slot until [`TimerTable::settle`]
    /// (an earlier one there is filed first): O(1) now, the B-tree's work
    /// later.
    pub fn set_rpc(&mut self, id: RpcId, at: Nanos, lenient: bool) -> RpcTimer {
        self.settle();
        self.deferred = Some((at, id, lenient));
        RpcTimer { at, lenient }
    }

    /// Files the RPC timer that waits in the slot, if any (see
    /// [`TimerTable::set_rpc`]). Nothing the table answers changes.
    #[inline]
    pub fn settle(&mut self) {
        if let Some((at, id, lenient)) = self.deferred.take() {
            self.set_of(lenient).insert((at, Timer::Rpc(id)));
        }
    }

    /// True while an RPC timer waits in the slot for [`TimerTable::settle`].
    pub fn unsettled(&self) -> bool {
        self.deferred.is_some()
    }

    /// Takes RPC `id`'s silence check `filed` out of the slot if it waits
    /// there, in O(1); returns whether it did (if not, it is in its set,
    /// or was never filed, and nothing changes). For an RPC that ends
    /// before its timer was settled: the timer then never costs the
    /// B-tree's insert nor, when the RPC is freed, its removal. (An RPC's
    /// timer is filed once, where `filed` says: a timer in the slot is
    /// not in a set too.)
    #[inline]
    pub fn cancel_deferred_rpc(&mut self, id: RpcId, filed: RpcTimer) -> bool {
        if self.deferred == Some((filed.at, id, filed.lenient)) {
            self.deferred = None;
            return true;
        }
        false
    }

    /// Removes RPC `id`'s silence check, if filed.
    pub fn cancel_rpc(&mut self, id: RpcId, filed: Option<RpcTimer>) {
        if let Some(f) = filed {
            if self.deferred == Some((f.at, id, f.lenient)) {
                self.deferred = None;
            }
            self.set_of(f.lenient).remove(&(f.at, Timer::Rpc(id)));
        }
    }

    /// The earliest timer of both sets, by (deadline, timer): the one
    /// order timers run in; and whether it is in the lenient set. (The
    /// slot not included: see [`TimerTable::settle`].)
    fn first(&self) -> Option<((Nanos, Timer), bool)> {
        match (self.strict.first(), self.lenient.first()) {
            (Some(a), Some(b)) if b < a => Some((*b, true)),
            (Some(a), _) => Some((*a, false)),
            (None, b) => b.map(|b| (*b, true)),
        }
    }

    /// The deadline of the RPC timer in the slot, if any and if `strict`
    /// timers only are asked for, only if it is strict.
    fn deferred_at(&self, strict: bool) -> Option<Nanos> {
        match self.deferred {
            Some((at, _, lenient)) if !(strict && lenient) => Some(at),
            _ => None,
        }
    }

    /// The earliest deadline.
    pub fn next(&self) -> Option<Nanos> {
        let filed = self.first().map(|((t, _), _)| t);
        earliest(filed, self.deferred_at(false))
    }

    /// The earliest deadline of a strict timer (see [`Timer::is_lenient`]).
    pub fn next_strict(&self) -> Option<Nanos> {
        let filed = self.strict.first().map(|&(t, _)| t);
        earliest(filed, self.deferred_at(true))
    }

    /// Takes the earliest timer if it is due at `now`.
    pub fn pop_due(&mut self, now: Nanos) -> Option<(Nanos, Timer)> {
        self.settle();
        let ((t, timer), lenient) = self.first()?;
        if t > now {
            return None;
        }
        self.set_of(lenient).pop_first();
        Some((t, timer))
    }

    /// Timers filed.
    pub fn len(&self) -> usize {
        let filed = self.strict.len() + self.lenient.len();
        match self.deferred {
            // (A timer filed twice is one entry, as in a set.)
            Some((at, id, lenient)) => {
                let set = if lenient { &self.lenient } else { &self.strict };
                filed + !set.contains(&(at, Timer::Rpc(id))) as usize
            }
            None => filed,
        }
    }

    /// True when no timer is filed.
    pub fn is_empty(&self) -> bool {
        self.deferred.is_none() && self.strict.is_empty() && self.lenient.is_empty()
    }

    /// Entries filed for RPC `id` (a scan: for tests).
    #[cfg(test)]
    pub(crate) fn filed_for(&self, id: RpcId) -> usize {
        let t = Timer::Rpc(id);
        let filed = self
            .strict
            .iter()
            .chain(&self.lenient)
            .filter(|(_, x)| *x == t)
            .count();
        match self.deferred {
            Some((at, d, lenient)) if d == id => {
                let set = if lenient { &self.lenient } else { &self.strict };
                filed + !set.contains(&(at, t)) as usize
            }
            _ => filed,
        }
    }
}

/// The earlier of two optional deadlines.
fn earliest(a: Option<Nanos>, b: Option<Nanos>) -> Option<Nanos> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first_and_refiling() {
        let peer: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let rpc = RpcId { id: 2, peer };
        let mut t = TimerTable::default();
        let a = t.set_rpc(rpc, 50, false);
        t.set(Timer::Acks(peer), None, 20);
        assert_eq!(t.next(), Some(20));
        assert_eq!(t.pop_due(10), None);
        assert_eq!(t.pop_due(20), Some((20, Timer::Acks(peer))));
        // Moving the RPC's deadline leaves one entry.
        t.cancel_rpc(rpc, Some(a));
        let b = t.set_rpc(rpc, 70, false);
        assert_eq!(t.len(), 1);
        assert_eq!(t.pop_due(60), None);
        t.cancel_rpc(rpc, Some(b));
        assert!(t.is_empty());
    }

    #[test]
    fn strict_deadlines_apart_from_lenient_ones_one_order_for_both() {
        let peer: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let rpc = RpcId { id: 2, peer };
        let mut t = TimerTable::default();
        t.set(Timer::Acks(peer), None, 10);
        t.set(Timer::PeerSweep, None, 30);
        t.set_rpc(rpc, 30, false);
        t.set(Timer::Policy, None, 40);
        assert_eq!(t.next(), Some(10));
        assert_eq!(t.next_strict(), Some(30));
        assert_eq!(t.len(), 4);
        // Due timers come in (deadline, timer) order across both sets: at
        // 30 the RPC's check before the sweep, as in one table.
        assert_eq!(t.pop_due(50), Some((10, Timer::Acks(peer))));
        assert_eq!(t.pop_due(50), Some((30, Timer::Rpc(rpc))));
        assert_eq!(t.pop_due(50), Some((30, Timer::PeerSweep)));
        assert_eq!(t.next_strict(), Some(40));
        t.cancel(Timer::Policy, Some(40));
        assert!(t.is_empty());
        assert_eq!(t.next_strict(), None);
    }

    #[test]
    fn an_rpc_timer_lenient_or_strict_as_filed_one_order_for_both() {
        let peer: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let a = RpcId { id: 2, peer };
        let b = RpcId { id: 4, peer };
        let mut t = TimerTable::default();
        let fa = t.set_rpc(a, 30, true);
        let fb = t.set_rpc(b, 30, false);
        assert_eq!(
            fa,
            RpcTimer {
                at: 30,
                lenient: true
            }
        );
        // Only the strict one counts for a precise sleep.
        assert_eq!(t.next(), Some(30));
        assert_eq!(t.next_strict(), Some(30));
        t.cancel_rpc(b, Some(fb));
        assert_eq!(t.next_strict(), None);
        assert_eq!(t.next(), Some(30));
        // Cancelling looks in the set it was filed in.
        t.cancel_rpc(a, Some(fa));
        assert!(t.is_empty());
        // Same deadline: (deadline, timer) order across both sets.
        t.set_rpc(b, 30, true);
        t.set_rpc(a, 30, false);
        assert_eq!(t.pop_due(30), Some((30, Timer::Rpc(a))));
        assert_eq!(t.pop_due(30), Some((30, Timer::Rpc(b))));
        assert!(t.is_empty());
    }

    #[test]
    fn an_rpc_timer_in_the_slot_answers_as_if_filed() {
        let peer: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let (a, b, c) = (
            RpcId { id: 2, peer },
            RpcId { id: 4, peer },
            RpcId { id: 6, peer },
        );
        let mut t = TimerTable::default();
        t.set(Timer::PeerSweep, None, 40);
        // A lenient RPC timer in the slot: the earliest deadline, but not
        // a strict one.
        let fa = t.set_rpc(a, 20, true);
        assert!(t.unsettled());
        assert_eq!((t.next(), t.next_strict(), t.len()), (Some(20), None, 2));
        // The next one files it and takes the slot.
        let fb = t.set_rpc(b, 10, false);
        assert_eq!(t.filed_for(a), 1);
        assert_eq!(
            (t.next(), t.next_strict(), t.len()),
            (Some(10), Some(10), 3)
        );
        // Cancelled in the slot: gone.
        t.cancel_rpc(b, Some(fb));
        assert!(!t.unsettled());
        assert_eq!((t.next(), t.next_strict(), t.len()), (Some(20), None, 2));
        // Due timers in (deadline, timer) order, the slot's among them.
        t.set_rpc(c, 20, false);
        assert_eq!(t.pop_due(50), Some((20, Timer::Rpc(a))));
        assert_eq!(t.pop_due(50), Some((20, Timer::Rpc(c))));
        assert_eq!(t.pop_due(50), Some((40, Timer::PeerSweep)));
        assert!(t.is_empty());
        // The same timer filed twice is one entry, settled or not.
        let f = t.set_rpc(a, 30, false);
        t.settle();
        t.set_rpc(a, 30, false);
        assert_eq!(t.len(), 1);
        t.cancel_rpc(a, Some(f));
        assert!(t.is_empty());
        assert_eq!(t.len(), 0);
        let _ = fa;
    }
}
