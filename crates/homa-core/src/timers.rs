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

/// Deadlines of all timers.
#[derive(Debug, Default)]
pub struct TimerTable {
    set: BTreeSet<(Nanos, Timer)>,
}

impl TimerTable {
    /// Files `timer` at `at`, replacing its deadline `old` if it had one.
    /// Returns `at`, which the owner stores as its current deadline.
    pub fn set(&mut self, timer: Timer, old: Option<Nanos>, at: Nanos) -> Nanos {
        if let Some(o) = old {
            self.set.remove(&(o, timer));
        }
        self.set.insert((at, timer));
        at
    }

    /// Removes `timer` filed at `at`.
    pub fn cancel(&mut self, timer: Timer, at: Option<Nanos>) {
        if let Some(at) = at {
            self.set.remove(&(at, timer));
        }
    }

    /// The earliest deadline.
    pub fn next(&self) -> Option<Nanos> {
        self.set.first().map(|&(t, _)| t)
    }

    /// Takes the earliest timer if it is due at `now`.
    pub fn pop_due(&mut self, now: Nanos) -> Option<(Nanos, Timer)> {
        let &(t, timer) = self.set.first()?;
        if t > now {
            return None;
        }
        self.set.pop_first();
        Some((t, timer))
    }

    /// Timers filed.
    pub fn len(&self) -> usize {
        self.set.len()
    }

    /// True when no timer is filed.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
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
        let a = t.set(Timer::Rpc(rpc), None, 50);
        t.set(Timer::Acks(peer), None, 20);
        assert_eq!(t.next(), Some(20));
        assert_eq!(t.pop_due(10), None);
        assert_eq!(t.pop_due(20), Some((20, Timer::Acks(peer))));
        // Moving the RPC's deadline leaves one entry.
        t.set(Timer::Rpc(rpc), Some(a), 70);
        assert_eq!(t.len(), 1);
        assert_eq!(t.pop_due(60), None);
        t.cancel(Timer::Rpc(rpc), Some(70));
        assert!(t.is_empty());
    }
}
