//! Request sizes: a fixed size or one drawn from a workload.
//!
//! The workload tables (`workloads/`, compiled in) and their sampling rule
//! are [`homa_measure::cdf`]: a sample draws `u` uniform in (0, 1] and takes
//! the first row whose `cdf >= u`.

use homa_measure::SizeDist;
use rand::Rng;

/// Where request sizes come from.
#[derive(Debug, Clone, PartialEq)]
pub enum SizeSpec {
    /// Every request has this many bytes.
    Fixed(usize),
    /// Sizes drawn from a workload, capped at `max` bytes (sizes above are
    /// sent as `max` bytes, as the Homa/Linux paper's cluster benchmark did).
    Workload {
        /// The distribution.
        workload: SizeDist,
        /// Largest request sent.
        max: usize,
    },
}

impl SizeSpec {
    /// The next request size.
    pub fn next(&self, rng: &mut impl Rng) -> usize {
        match self {
            SizeSpec::Fixed(n) => *n,
            SizeSpec::Workload { workload, max } => {
                usize::try_from(workload.sample(rng)).map_or(*max, |s| s.min(*max))
            }
        }
    }

    /// The largest request this spec can produce.
    pub fn max(&self) -> usize {
        match self {
            SizeSpec::Fixed(n) => *n,
            SizeSpec::Workload { workload, max } => {
                usize::try_from(workload.max()).map_or(*max, |s| s.min(*max))
            }
        }
    }

    /// The workload's name, if sizes come from one.
    pub fn workload_name(&self) -> Option<&str> {
        match self {
            SizeSpec::Fixed(_) => None,
            SizeSpec::Workload { workload, .. } => Some(workload.name()),
        }
    }
}
