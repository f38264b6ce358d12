//! The fault-injection shim: one faulty "wire" per direction that drops,
//! duplicates and reorders packets (see [`FaultInjection`]).

use crate::config::FaultInjection;
use homa_core::Nanos;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// What happens to one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Goes through once.
    Pass,
    /// Lost.
    Drop,
    /// Goes through twice.
    Duplicate,
    /// Held back: hand it to [`Wire::hold`].
    Hold,
}

/// A packet held back, and when it goes.
struct Held<T> {
    item: T,
    /// Packets of this direction still to pass before it goes.
    after: u32,
    /// ... or this time, whichever comes first.
    until: Nanos,
}

/// One direction's faults.
pub(crate) struct Wire<T> {
    drop_rate: f64,
    duplicate_rate: f64,
    reorder_rate: f64,
    max_packets: u32,
    max_delay_ns: Nanos,
    rng: StdRng,
    held: Vec<Held<T>>,
}

impl<T> Wire<T> {
    fn new(f: &FaultInjection, drop: f64, dup: f64, reorder: f64, seed: u64) -> Wire<T> {
        Wire {
            drop_rate: drop.clamp(0.0, 1.0),
            duplicate_rate: dup.clamp(0.0, 1.0),
            reorder_rate: reorder.clamp(0.0, 1.0),
            max_packets: f.reorder_max_packets.max(1),
            max_delay_ns: f.reorder_max_delay_us.saturating_mul(1_000),
            rng: StdRng::seed_from_u64(seed),
            held: Vec::new(),
        }
    }

    /// Decides the fate of the next packet. (The drop decision is always
    /// drawn, so a drop-only configuration sees the same drops as the
    /// older drop-only shim for the same seed.)
    pub(crate) fn decide(&mut self) -> Verdict {
        if self.rng.gen_bool(self.drop_rate) {
            return Verdict::Drop;
        }
        if self.duplicate_rate > 0.0 && self.rng.gen_bool(self.duplicate_rate) {
            return Verdict::Duplicate;
        }
        if self.reorder_rate > 0.0 && self.rng.gen_bool(self.reorder_rate) {
            return Verdict::Hold;
        }
        Verdict::Pass
    }

    /// Holds a packet back (after a [`Verdict::Hold`]).
    pub(crate) fn hold(&mut self, now: Nanos, item: T) {
        let after = self.rng.gen_range(1..=self.max_packets);
        let until = now.saturating_add(self.rng.gen_range(0..=self.max_delay_ns));
        self.held.push(Held { item, after, until });
    }

    /// Notes that a packet went through; returns the held packets that go
    /// now, in the order they were held.
    pub(crate) fn passed(&mut self) -> Vec<T> {
        if self.held.is_empty() {
            return Vec::new();
        }
        for h in &mut self.held {
            h.after = h.after.saturating_sub(1);
        }
        self.release(|h| h.after == 0)
    }

    /// The held packets whose time has come.
    pub(crate) fn due(&mut self, now: Nanos) -> Vec<T> {
        if self.held.is_empty() {
            return Vec::new();
        }
        self.release(|h| h.until <= now)
    }

    /// When the next held packet goes at the latest.
    pub(crate) fn next_deadline(&self) -> Option<Nanos> {
        self.held.iter().map(|h| h.until).min()
    }

    fn release(&mut self, go: impl Fn(&Held<T>) -> bool) -> Vec<T> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < self.held.len() {
            if go(&self.held[i]) {
                out.push(self.held.remove(i).item);
            } else {
                i += 1;
            }
        }
        out
    }
}

/// Both directions: `S` is what is sent, `R` what is received.
pub(crate) struct Faults<S, R> {
    pub(crate) send: Wire<S>,
    pub(crate) recv: Wire<R>,
}

impl<S, R> Faults<S, R> {
    pub(crate) fn new(f: &FaultInjection) -> Faults<S, R> {
        Faults {
            send: Wire::new(f, f.drop_rate, f.duplicate_rate, f.reorder_rate, f.seed),
            // Its own stream, so the faults of one direction do not depend
            // on how many packets went the other way.
            recv: Wire::new(
                f,
                f.recv_drop_rate,
                f.recv_duplicate_rate,
                f.recv_reorder_rate,
                f.seed ^ 0x5eed_0f4e_c1ed_0000,
            ),
        }
    }

    /// When the next held packet of either direction goes at the latest.
    pub(crate) fn next_deadline(&self) -> Option<Nanos> {
        match (self.send.next_deadline(), self.recv.next_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(seed: u64) -> FaultInjection {
        FaultInjection {
            drop_rate: 0.1,
            duplicate_rate: 0.05,
            reorder_rate: 0.1,
            reorder_max_packets: 3,
            reorder_max_delay_us: 1_000,
            seed,
            ..FaultInjection::default()
        }
    }

    /// Runs `n` packets through a wire, returning what comes out in order.
    fn run(seed: u64, n: u32) -> Vec<u32> {
        let mut f: Faults<u32, u32> = Faults::new(&config(seed));
        let mut out = Vec::new();
        for p in 0..n {
            match f.send.decide() {
                Verdict::Drop => continue,
                Verdict::Hold => {
                    f.send.hold(0, p);
                    continue;
                }
                Verdict::Pass => out.push(p),
                Verdict::Duplicate => out.extend([p, p]),
            }
            out.extend(f.send.passed());
        }
        out.extend(f.send.due(u64::MAX));
        out
    }

    #[test]
    fn faults_are_deterministic_and_at_their_rates() {
        let a = run(9, 10_000);
        assert_eq!(a, run(9, 10_000), "same seed, same faults");
        assert_ne!(a, run(10, 10_000));
        let mut seen = vec![0u32; 10_000];
        for &p in &a {
            seen[p as usize] += 1;
        }
        let lost = seen.iter().filter(|&&c| c == 0).count();
        let doubled = seen.iter().filter(|&&c| c == 2).count();
        assert!((800..1_200).contains(&lost), "{lost} lost");
        assert!((300..650).contains(&doubled), "{doubled} duplicated");
        let late = a.windows(2).filter(|w| w[1] < w[0]).count();
        assert!(late > 300, "only {late} reordered");
        // A held packet waits for at most 3 later ones (each maybe doubled,
        // plus packets held meanwhile that go first): never far behind.
        for (i, &p) in a.iter().enumerate() {
            let overtaken = a[..i].iter().filter(|&&q| q > p).count();
            assert!(overtaken <= 20, "packet {p} overtaken by {overtaken}");
        }
    }

    #[test]
    fn held_packets_go_by_time_too() {
        let mut w: Wire<u32> = Wire::new(&config(1), 0.0, 0.0, 1.0, 1);
        w.hold(1_000, 7);
        assert_eq!(
            w.next_deadline().map(|d| d <= 1_000 + 1_000_000),
            Some(true)
        );
        assert!(w.due(999).is_empty());
        assert_eq!(w.due(1_000 + 1_000_000), vec![7]);
        assert_eq!(w.next_deadline(), None);
    }
}
