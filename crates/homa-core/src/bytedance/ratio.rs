//! The receiver's unscheduled ratio (seed 004 §5): the share of incoming
//! bytes that arrive unscheduled, measured from the first packet of each
//! new message (its length and what its sender may send before a grant),
//! so it predicts the traffic about to arrive rather than what has.

/// Decay per message: each new message ages the sums by 1/64, so the ratio
/// follows about the last 64 messages.
const DECAY_SHIFT: u32 = 6;

/// Messages measured before the ratio drives the priority split: the
/// meter's memory (64), so one early message does not decide the split.
pub const SETTLED_MESSAGES: u64 = 1 << DECAY_SHIFT;

/// Exponentially decayed sums of unscheduled and total bytes of new
/// messages. O(1) state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RatioMeter {
    /// Decayed unscheduled bytes (bytes × up to 64).
    unsched: u64,
    /// Decayed message bytes (bytes × up to 64).
    total: u64,
    /// Messages recorded.
    messages: u64,
}

impl RatioMeter {
    /// A new message of `length` bytes, of which its sender may send
    /// `unsched` before any grant (capped at `length`).
    pub fn record(&mut self, unsched: u32, length: u32) {
        let unsched = unsched.min(length) as u64;
        self.unsched = self.unsched - (self.unsched >> DECAY_SHIFT) + unsched;
        self.total = self.total - (self.total >> DECAY_SHIFT) + length as u64;
        self.messages += 1;
    }

    /// Messages recorded so far.
    pub fn messages(&self) -> u64 {
        self.messages
    }

    /// [`RatioMeter::permille`] once at least [`SETTLED_MESSAGES`] messages
    /// were recorded (what the priority split follows).
    pub fn settled_permille(&self) -> Option<u16> {
        if self.messages < SETTLED_MESSAGES {
            return None;
        }
        self.permille()
    }

    /// Unscheduled bytes per thousand incoming bytes; `None` before any
    /// byte was recorded.
    pub fn permille(&self) -> Option<u16> {
        if self.total == 0 {
            return None;
        }
        Some((self.unsched.min(self.total) * 1000 / self.total) as u16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_of_bytes_not_of_messages() {
        let mut m = RatioMeter::default();
        assert_eq!(m.permille(), None);
        m.record(0, 0);
        assert_eq!(m.permille(), None);
        // One short message (all unscheduled) and one long one with 40 KB
        // unscheduled of 1 MB: 41,000 of 1,001,000 bytes.
        m.record(1_000, 1_000);
        assert_eq!(m.permille(), Some(1000));
        m.record(40_000, 1_000_000);
        let r = m.permille().unwrap();
        assert!((40..=41).contains(&r), "{r}");
        // A claim above the length counts only the length.
        let mut m = RatioMeter::default();
        m.record(u32::MAX, 500);
        assert_eq!(m.permille(), Some(1000));
    }

    #[test]
    fn settled_after_the_meters_memory() {
        let mut m = RatioMeter::default();
        for i in 0..SETTLED_MESSAGES {
            assert_eq!(m.settled_permille(), None, "after {i}");
            m.record(100, 100);
        }
        assert_eq!(m.messages(), SETTLED_MESSAGES);
        assert_eq!(m.settled_permille(), Some(1000));
    }

    #[test]
    fn follows_a_change_of_mix() {
        let mut m = RatioMeter::default();
        for _ in 0..1_000 {
            m.record(10_000, 10_000);
        }
        assert_eq!(m.permille(), Some(1000));
        // The mix turns to large messages: within a few hundred messages
        // the ratio is theirs (10%), old ones decay away.
        for _ in 0..400 {
            m.record(10_000, 100_000);
        }
        let r = m.permille().unwrap();
        assert!((100..=110).contains(&r), "{r}");
    }
}
