//! A DCTCP-style additive-increase / multiplicative-decrease loop over a
//! byte budget, as SIRD runs two of per sender (seed 001 §4.3: one fed by
//! the sender's `csn` bit, one by ECN marks).
//!
//! Once per window — as many bytes as the budget, i.e. about one round
//! trip of that sender's data — the loop updates its estimate of the
//! marked fraction, `α ← (1 − g)·α + g·F`, and then shrinks the budget by
//! `α/2` if any byte of the window was marked, or grows it by one packet
//! if none was (DCTCP, RFC 8257 §3.3–3.4, with the budget in the place of
//! the congestion window).

/// Fixed-point scale of `α` and of the gain (1.0 = 65,536).
const ONE: u64 = 1 << 16;

/// One AIMD loop over a byte budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Aimd {
    /// The budget now (bytes), within `[min, max]`.
    budget: u32,
    /// Estimated marked fraction (of `ONE`).
    alpha: u64,
    /// Bytes seen in the current window, and of those marked.
    window: u64,
    marked: u64,
}

/// The loop's constants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AimdParams {
    /// Smallest budget (bytes).
    pub min: u32,
    /// Largest budget, and the starting one (bytes).
    pub max: u32,
    /// Additive increase per unmarked window (bytes; one packet).
    pub step: u32,
    /// Gain g in thousandths.
    pub gain_permille: u32,
}

impl Aimd {
    /// A loop starting at the largest budget, with no congestion seen.
    pub fn new(p: &AimdParams) -> Aimd {
        Aimd {
            budget: p.max,
            alpha: 0,
            window: 0,
            marked: 0,
        }
    }

    /// The budget now (bytes).
    pub fn budget(&self) -> u32 {
        self.budget
    }

    /// The estimated marked fraction, in thousandths (for diagnostics).
    pub fn alpha_permille(&self) -> u32 {
        (self.alpha * 1000 / ONE) as u32
    }

    /// Counts `bytes` that arrived, `marked` or not; at the end of a window
    /// adjusts the budget.
    pub fn on_bytes(&mut self, p: &AimdParams, bytes: u32, marked: bool) {
        self.window += bytes as u64;
        if marked {
            self.marked += bytes as u64;
        }
        if self.window < self.budget.max(1) as u64 {
            return;
        }
        let g = (p.gain_permille as u64 * ONE / 1000).clamp(1, ONE);
        let f = self.marked * ONE / self.window;
        self.alpha = (self.alpha * (ONE - g) + f * g) / ONE;
        let budget = self.budget as u64;
        let next = if self.marked > 0 {
            // (At least one byte less: a window that was all marked with a
            // tiny α must still shrink.)
            (budget - budget * self.alpha / (2 * ONE)).min(budget.saturating_sub(1))
        } else {
            budget + p.step as u64
        };
        self.budget = next.clamp(p.min as u64, p.max as u64) as u32;
        self.window = 0;
        self.marked = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: AimdParams = AimdParams {
        min: 1_500,
        max: 100_000,
        step: 1_500,
        gain_permille: 80,
    };

    #[test]
    fn starts_at_the_ceiling_and_stays_without_marks() {
        let mut a = Aimd::new(&P);
        assert_eq!(a.budget(), 100_000);
        for _ in 0..1_000 {
            a.on_bytes(&P, 1_500, false);
        }
        assert_eq!(a.budget(), 100_000);
        assert_eq!(a.alpha_permille(), 0);
    }

    #[test]
    fn marks_shrink_the_budget_down_to_the_floor_and_it_recovers() {
        let mut a = Aimd::new(&P);
        let mut last = a.budget();
        let mut shrank = 0;
        for _ in 0..5_000 {
            a.on_bytes(&P, 1_500, true);
            assert!(a.budget() <= last, "never grows while every byte is marked");
            shrank += (a.budget() < last) as u32;
            last = a.budget();
        }
        assert!(shrank > 5);
        assert_eq!(a.budget(), P.min);
        // α converges towards 1 when everything is marked.
        assert!(a.alpha_permille() > 900, "{}", a.alpha_permille());
        // Without marks it grows back by one packet per window, to the ceiling.
        let mut windows = 0;
        while a.budget() < P.max {
            let before = a.budget();
            for _ in 0..(before / 1_500 + 1) {
                a.on_bytes(&P, 1_500, false);
            }
            windows += 1;
            assert!(a.budget() <= before + P.step);
            assert!(windows < 10_000);
        }
        assert_eq!(a.budget(), P.max);
    }

    #[test]
    fn the_cut_is_proportional_to_the_marked_fraction() {
        // A window with 10% marked bytes after a long 10% history: α ≈ 0.1,
        // so the budget shrinks by about 5% per window.
        let mut a = Aimd::new(&P);
        for i in 0..100_000u32 {
            a.on_bytes(&P, 1_000, i % 10 == 0);
        }
        let alpha = a.alpha_permille();
        assert!((60..=140).contains(&alpha), "α = {alpha}‰");
    }
}
