//! Progress of long work on stderr, with an estimate of the time left that
//! holds still.
//!
//! The tools' long commands (`homa-sim reproduce`, `testbed bench`) run
//! jobs whose durations differ a thousandfold: a job count makes a poor
//! clock, and an estimate from "jobs done per second" swings from minutes
//! to days as short and long jobs finish. Here the caller measures the work
//! instead, in units that cost about the same wall time each (simulated
//! packets, nominal seconds of a run), and [`Eta`] divides the work left by
//! the rate of work done so far, smoothed over time.
//!
//! [`Progress`] shows it: a bar on a terminal; without one (a log file, a
//! pipe), one line per finished job, so that the log says how far the work
//! got.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Instant;

/// Longest time constant (s) over which a new estimate replaces the
/// previous one; shorter early on (a quarter of the time elapsed, at least
/// a second), so that the estimate of a short job follows its pace.
const SMOOTHING_S: f64 = 30.0;

/// No estimate before this share of the work is done...
const MIN_SHARE: f64 = 0.01;
/// ... nor before this many seconds have passed.
const MIN_ELAPSED_S: f64 = 2.0;

/// The estimate of the time left, from work done and time spent.
#[derive(Debug, Clone)]
pub struct Eta {
    total: f64,
    /// The last estimate: (elapsed s when made, seconds left then).
    last: Option<(f64, f64)>,
}

impl Eta {
    /// Work of `total` units ahead.
    pub fn new(total: f64) -> Eta {
        Eta { total, last: None }
    }

    /// Takes `work` units off the total without spending time on them
    /// (results kept from an earlier, interrupted run): they neither count
    /// as done nor speed up the rate.
    pub fn skip(&mut self, work: f64) {
        self.total = (self.total - work).max(0.0);
    }

    /// The work still counted.
    pub fn total(&self) -> f64 {
        self.total
    }

    /// Seconds left after `done` units in `elapsed_s` seconds, or `None`
    /// before 1% of the work is done and 2 s have passed. The raw estimate, work left ÷ the average
    /// rate so far, is blended into the previous one (counted down by the
    /// time since) with weight `1 - exp(-dt / τ)`, τ a quarter of the time
    /// elapsed between 1 and 30 s, so that one job finishing early or late
    /// moves it a little, and only a lasting change of pace moves it far.
    pub fn estimate(&mut self, done: f64, elapsed_s: f64) -> Option<f64> {
        if done >= self.total {
            return Some(0.0);
        }
        // Too little seen yet to tell the pace: the first jobs done in a
        // fraction of a second would make any figure a guess.
        if done < MIN_SHARE * self.total || elapsed_s < MIN_ELAPSED_S {
            return self
                .last
                .map(|(at, left)| (left - (elapsed_s - at)).max(0.0));
        }
        let raw = (self.total - done) * elapsed_s / done;
        let left = match self.last {
            None => raw,
            Some((at, prev)) => {
                let dt = (elapsed_s - at).max(0.0);
                let carried = (prev - dt).max(0.0);
                let tau = (0.25 * elapsed_s).clamp(1.0, SMOOTHING_S);
                let w = 1.0 - (-dt / tau).exp();
                carried + w * (raw - carried)
            }
        };
        self.last = Some((elapsed_s, left));
        Some(left)
    }
}

/// A duration for people: `"45 s"`, `"12 min"`, `"3.4 h"`, `"2.1 days"`.
pub fn fmt_duration(secs: f64) -> String {
    if !secs.is_finite() {
        "-".into()
    } else if secs < 60.0 {
        format!("{:.0} s", secs.max(0.0))
    } else if secs < 3600.0 {
        format!("{:.0} min", secs / 60.0)
    } else if secs < 48.0 * 3600.0 {
        format!("{:.1} h", secs / 3600.0)
    } else {
        format!("{:.1} days", secs / 86400.0)
    }
}

struct State {
    eta: Eta,
    started: Instant,
    done: f64,
    jobs_done: usize,
    current: String,
    left: Option<f64>,
}

/// Progress of a set of jobs: a bar with the share of the work done and
/// the time left on a terminal, one line per job otherwise. Shared by the
/// threads that run the jobs.
pub struct Progress {
    bar: ProgressBar,
    jobs: usize,
    /// Print lines (false with `quiet`).
    lines: bool,
    state: Mutex<State>,
}

/// Positions of the bar: per mille of the work.
const BAR_STEPS: u64 = 1000;

impl Progress {
    /// `jobs` jobs of `total_work` units together; a bar when stderr is a
    /// terminal and `quiet` is false, lines when it is not a terminal,
    /// nothing when `quiet`.
    pub fn new(total_work: f64, jobs: usize, quiet: bool) -> Progress {
        let bar = if !quiet && std::io::stderr().is_terminal() {
            let bar = ProgressBar::new(BAR_STEPS);
            bar.set_style(
                ProgressStyle::with_template("[{elapsed_precise}] {bar:30} {percent:>3}% {msg}")
                    .expect("valid template"),
            );
            bar.enable_steady_tick(std::time::Duration::from_millis(500));
            bar
        } else {
            ProgressBar::hidden()
        };
        Progress {
            bar,
            jobs,
            lines: !quiet,
            state: Mutex::new(State {
                eta: Eta::new(total_work),
                started: Instant::now(),
                done: 0.0,
                jobs_done: 0,
                current: String::new(),
                left: None,
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn print(&self, line: String) {
        if !self.lines {
            return;
        }
        if self.bar.is_hidden() {
            eprintln!("{line}");
        } else {
            self.bar.println(line);
        }
    }

    fn redraw(&self, s: &State) {
        let total = s.eta.total();
        let share = if total > 0.0 { s.done / total } else { 1.0 };
        self.bar
            .set_position(((share * BAR_STEPS as f64) as u64).min(BAR_STEPS));
        let eta = s.left.map_or_else(
            || "ETA -".to_string(),
            |l| format!("ETA {}", fmt_duration(l)),
        );
        let current = if s.current.is_empty() {
            String::new()
        } else {
            format!(" · {}", s.current)
        };
        self.bar.set_message(format!(
            "{}/{} jobs, {eta}{current}",
            s.jobs_done, self.jobs
        ));
    }

    /// Says what is running now (shown beside the bar).
    pub fn set_current(&self, what: &str) {
        let mut s = self.state();
        s.current = what.to_string();
        self.redraw(&s);
    }

    /// A job whose result was kept from an earlier run: `work` comes off
    /// the total, and a line says so.
    pub fn skip(&self, work: f64, what: &str) {
        let line = {
            let mut s = self.state();
            s.eta.skip(work);
            s.jobs_done += 1;
            self.redraw(&s);
            format!(
                "[{}/{}] {what}: kept from an earlier run",
                s.jobs_done, self.jobs
            )
        };
        self.print(line);
    }

    /// All jobs together have done `done` units of work (call as often as
    /// convenient; finished jobs included).
    pub fn set_done(&self, done: f64) {
        let mut s = self.state();
        let elapsed = s.started.elapsed().as_secs_f64();
        s.done = done;
        s.left = s.eta.estimate(done, elapsed);
        self.redraw(&s);
    }

    /// A job finished, bringing the work done to `done`; prints `what`
    /// with the job count and the time left.
    pub fn job_done(&self, done: f64, what: &str) {
        let line = {
            let mut s = self.state();
            let elapsed = s.started.elapsed().as_secs_f64();
            s.done = done;
            s.jobs_done += 1;
            s.left = s.eta.estimate(done, elapsed);
            self.redraw(&s);
            let eta = match s.left {
                Some(l) if s.jobs_done < self.jobs => format!("; ETA {}", fmt_duration(l)),
                _ => String::new(),
            };
            format!("[{}/{}] {what}{eta}", s.jobs_done, self.jobs)
        };
        self.print(line);
    }

    /// Runs `f` with the bar hidden, for work that writes to stderr itself.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        self.bar.suspend(f)
    }

    /// Prints a line above the bar (or to stderr without one).
    pub fn println(&self, line: &str) {
        self.print(line.to_string());
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Jobs whose costs span 1..1000 units and take 0.01 s per unit, ±30%:
    /// the time left estimated along the way stays within a factor 1.6 of
    /// the truth once a tenth of the work is done, where a job count would
    /// be off by orders of magnitude.
    #[test]
    fn estimate_follows_work_not_job_count() {
        let costs: Vec<f64> = (0..60)
            .map(|i| [1000.0, 1.0, 30.0, 300.0, 3.0, 100.0][i % 6])
            .collect();
        let noise = |i: usize| 1.0 + 0.3 * ((i * 7919 % 13) as f64 / 6.0 - 1.0);
        let durations: Vec<f64> = costs
            .iter()
            .enumerate()
            .map(|(i, c)| c * 0.01 * noise(i))
            .collect();
        let total: f64 = costs.iter().sum();
        let total_time: f64 = durations.iter().sum();
        let mut eta = Eta::new(total);
        let (mut done, mut t) = (0.0, 0.0);
        for (c, d) in costs.iter().zip(&durations) {
            done += c;
            t += d;
            let left = eta.estimate(done, t).unwrap();
            let truth = total_time - t;
            if done >= 0.1 * total && truth > 1.0 {
                let r = left / truth;
                assert!((1.0 / 1.6..1.6).contains(&r), "{left} vs {truth}");
            }
        }
        assert_eq!(eta.estimate(total, t), Some(0.0));
    }

    #[test]
    fn one_slow_job_moves_the_estimate_a_little() {
        let mut eta = Eta::new(1000.0);
        // 100 units per 10 s: 50 s left after 500 units... then a job of 10
        // units that took 60 s.
        let mut left = 0.0;
        for k in 1..=5 {
            left = eta.estimate(100.0 * k as f64, 10.0 * k as f64).unwrap();
        }
        assert!((left - 50.0).abs() < 1.0, "{left}");
        let after = eta.estimate(510.0, 110.0).unwrap();
        // The raw estimate jumps to 106 s; the smoothed one moves towards
        // it from the previous estimate counted down (0 s), not all the way.
        let raw = 490.0 * 110.0 / 510.0;
        assert!(after < raw && after > 0.0, "{after} vs raw {raw}");
    }

    #[test]
    fn skipped_work_neither_counts_nor_speeds_up() {
        let mut eta = Eta::new(100.0);
        eta.skip(50.0);
        assert_eq!(eta.total(), 50.0);
        // 10 of the remaining 50 units in 10 s: 40 s left.
        assert_eq!(eta.estimate(10.0, 10.0), Some(40.0));
        assert_eq!(Eta::new(10.0).estimate(0.0, 5.0), None);
        // Not from the first instants or the first crumbs of work.
        assert_eq!(Eta::new(1000.0).estimate(500.0, 1.0), None);
        assert_eq!(Eta::new(1000.0).estimate(5.0, 10.0), None);
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(fmt_duration(42.4), "42 s");
        assert_eq!(fmt_duration(720.0), "12 min");
        assert_eq!(fmt_duration(3.5 * 3600.0), "3.5 h");
        assert_eq!(fmt_duration(3.0 * 86400.0), "3.0 days");
    }
}
