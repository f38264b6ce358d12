//! RTT probes (seed 004 §2): when to send one, and matching answers.
//!
//! A probe carries a random nonce, not our clock: the RTT is measured
//! against the time we recorded when we queued the probe, so a peer can
//! neither fake an RTT by echoing a chosen timestamp nor make us trust its
//! clock, and an off-path host cannot answer a probe it has not seen. One
//! probe per peer is outstanding at a time (bounded state); a newer probe
//! replaces an unanswered one, whose late answer then no longer matches.

use super::rtt::{Band, RttEstimator, Thresholds};
use crate::Nanos;

/// A probe waiting for its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outstanding {
    /// The nonce the answer must echo.
    pub nonce: u64,
    /// When it was queued (ns, our clock).
    pub sent_at: Nanos,
}

/// Why an RTT_RESPS was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unmatched {
    /// No probe outstanding, or another nonce.
    NoSuchProbe,
    /// The answer came later than the caller's limit.
    Late,
}

/// Per-peer probe state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProbeState {
    /// The peer has shown it understands probes (the ByteDance DATA flag on
    /// its latest new message, or a probe of its own).
    pub capable: bool,
    /// When we last sent a probe (ns).
    pub last_sent: Option<Nanos>,
    /// The probe waiting for an answer.
    pub outstanding: Option<Outstanding>,
    /// The tick of the latest probe answered, and answers in it.
    reply_tick: u64,
    replies: u32,
}

/// The probe interval (ns): `base`, or 8 × `rtt_min` when that is shorter
/// while the path is congested (so `rtt_recent` stays fresh).
pub fn interval(base: Nanos, rtt: &RttEstimator, thresholds: Option<&Thresholds>) -> Nanos {
    match thresholds {
        Some(t) if rtt.has_sample() && t.band(rtt.recent_ns) == Band::Congested => {
            base.min(rtt.min_ns.saturating_mul(8)).max(1)
        }
        _ => base.max(1),
    }
}

impl ProbeState {
    /// True if a probe may go at `now`, the last one `interval_ns` ago or
    /// more (or none yet).
    pub fn due(&self, now: Nanos, interval_ns: Nanos) -> bool {
        self.last_sent
            .is_none_or(|t| now >= t.saturating_add(interval_ns))
    }

    /// Records a probe with `nonce` sent at `now` (replacing any
    /// unanswered one).
    pub fn start(&mut self, now: Nanos, nonce: u64) {
        self.outstanding = Some(Outstanding {
            nonce,
            sent_at: now,
        });
        self.last_sent = Some(now);
    }

    /// Matches an answer echoing `nonce` at `now`: the RTT (ns, never
    /// below one) if it answers the outstanding probe within `max_age_ns`.
    /// A matching answer ends the probe even when late; one that does not
    /// match leaves it waiting (a forged answer cannot cancel it).
    pub fn answer(
        &mut self,
        nonce: u64,
        now: Nanos,
        max_age_ns: Nanos,
    ) -> Result<Nanos, Unmatched> {
        match self.outstanding {
            Some(o) if o.nonce == nonce => {
                self.outstanding = None;
                let rtt = now.saturating_sub(o.sent_at);
                if rtt > max_age_ns {
                    Err(Unmatched::Late)
                } else {
                    Ok(rtt.max(1))
                }
            }
            _ => Err(Unmatched::NoSuchProbe),
        }
    }

    /// Takes one of `per_tick` answers this peer's probes may get in
    /// `tick`; false when none is left.
    pub fn take_reply(&mut self, tick: u64, per_tick: u32) -> bool {
        if self.reply_tick != tick {
            self.reply_tick = tick;
            self.replies = 0;
        }
        if self.replies >= per_tick.max(1) {
            return false;
        }
        self.replies += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_after_the_interval() {
        let mut p = ProbeState::default();
        assert!(p.due(0, 1_000_000));
        p.start(5_000, 7);
        assert!(!p.due(5_000, 1_000_000));
        assert!(!p.due(1_004_999, 1_000_000));
        assert!(p.due(1_005_000, 1_000_000));
    }

    #[test]
    fn congested_paths_probe_every_eight_rtt_min() {
        let mut rtt = RttEstimator::default();
        let base = 1_000_000;
        assert_eq!(interval(base, &rtt, None), base);
        rtt.sample(0, 10_000, 500, 10_000_000_000);
        let t = Thresholds::new(rtt.min_ns, 0);
        assert_eq!(interval(base, &rtt, Some(&t)), base, "clear");
        rtt.sample(1, 200_000, 1000, 10_000_000_000);
        assert_eq!(interval(base, &rtt, Some(&t)), 80_000, "congested");
        // Never longer than the base.
        assert_eq!(interval(50_000, &rtt, Some(&t)), 50_000);
    }

    #[test]
    fn answers_must_echo_the_outstanding_nonce() {
        let mut p = ProbeState::default();
        assert_eq!(p.answer(1, 10, 100), Err(Unmatched::NoSuchProbe));
        p.start(1_000, 0xABCD);
        // A forged nonce does not match and does not cancel the probe.
        assert_eq!(
            p.answer(0xABCE, 1_500, 1_000_000),
            Err(Unmatched::NoSuchProbe)
        );
        assert_eq!(p.answer(0xABCD, 1_900, 1_000_000), Ok(900));
        // Answered once: a duplicate does not match.
        assert_eq!(
            p.answer(0xABCD, 2_000, 1_000_000),
            Err(Unmatched::NoSuchProbe)
        );
        // A newer probe replaces an unanswered one.
        p.start(3_000, 1);
        p.start(4_000, 2);
        assert_eq!(p.answer(1, 4_100, 1_000_000), Err(Unmatched::NoSuchProbe));
        assert_eq!(p.answer(2, 4_000, 1_000_000), Ok(1), "at least 1 ns");
        // Too late: dropped, and the probe is over.
        p.start(10_000, 3);
        assert_eq!(p.answer(3, 10_000 + 501, 500), Err(Unmatched::Late));
        assert_eq!(p.outstanding, None);
    }

    #[test]
    fn replies_are_limited_per_tick() {
        let mut p = ProbeState::default();
        assert!(p.take_reply(5, 2));
        assert!(p.take_reply(5, 2));
        assert!(!p.take_reply(5, 2));
        assert!(p.take_reply(6, 2));
    }
}
