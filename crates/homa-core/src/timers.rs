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
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
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
#[derive(Debug, Default)]
pub struct TimerTable {
    strict: BTreeSet<(Nanos, Timer)>,
    lenient: BTreeSet<(Nanos, Timer)>,
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
    pub fn set_rpc(&mut self, id: RpcId, at: Nanos, lenient: bool) -> RpcTimer {
        self.set_of(lenient).insert((at, Timer::Rpc(id)));
        RpcTimer { at, lenient }
    }

    /// Removes RPC `id`'s silence check, if filed.
    pub fn cancel_rpc(&mut self, id: RpcId, filed: Option<RpcTimer>) {
        if let Some(f) = filed {
            self.set_of(f.lenient).remove(&(f.at, Timer::Rpc(id)));
        }
    }

    /// The earliest timer of both sets, by (deadline, timer): the one
    /// order timers run in; and whether it is in the lenient set.
    fn first(&self) -> Option<((Nanos, Timer), bool)> {
        match (self.strict.first(), self.lenient.first()) {
            (Some(a), Some(b)) if b < a => Some((*b, true)),
            (Some(a), _) => Some((*a, false)),
            (None, b) => b.map(|b| (*b, true)),
        }
    }

    /// The earliest deadline.
    pub fn next(&self) -> Option<Nanos> {
        self.first().map(|((t, _), _)| t)
    }

    /// The earliest deadline of a strict timer (see [`Timer::is_lenient`]).
    pub fn next_strict(&self) -> Option<Nanos> {
        self.strict.first().map(|&(t, _)| t)
    }

    /// Takes the earliest timer if it is due at `now`.
    pub fn pop_due(&mut self, now: Nanos) -> Option<(Nanos, Timer)> {
        let ((t, timer), lenient) = self.first()?;
        if t > now {
            return None;
        }
        self.set_of(lenient).pop_first();
        Some((t, timer))
    }

    /// Timers filed.
    pub fn len(&self) -> usize {
        self.strict.len() + self.lenient.len()
    }

    /// True when no timer is filed.
    pub fn is_empty(&self) -> bool {
        self.strict.is_empty() && self.lenient.is_empty()
    }

    /// Entries filed for RPC `id` (a scan: for tests).
    #[cfg(test)]
    pub(crate) fn filed_for(&self, id: RpcId) -> usize {
        let t = Timer::Rpc(id);
        self.strict
            .iter()
            .chain(&self.lenient)
            .filter(|(_, x)| *x == t)
            .count()
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
}
