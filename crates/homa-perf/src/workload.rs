//! Message-size distributions: a fixed size or one of the standard workloads.
//!
//! The workload tables live in the repository's `workloads/` directory and
//! are compiled into the binary, so `homa-perf` works from any directory.
//! Each table is `size_bytes,cdf` rows sorted by size; a sample draws `u`
//! uniform in (0, 1] and takes the first row whose `cdf >= u`.

use crate::error::PerfError;
use rand::Rng;

/// The embedded tables: (name, CSV text).
const TABLES: &[(&str, &str)] = &[
    ("w1", include_str!("../../../workloads/w1.csv")),
    ("w2", include_str!("../../../workloads/w2.csv")),
    ("w3", include_str!("../../../workloads/w3.csv")),
    ("w4", include_str!("../../../workloads/w4.csv")),
    ("w5", include_str!("../../../workloads/w5.csv")),
];

/// Names accepted by [`Workload::named`].
pub const WORKLOAD_NAMES: [&str; 5] = ["w1", "w2", "w3", "w4", "w5"];

/// An empirical message-size distribution (a step-function CDF).
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    name: String,
    sizes: Vec<u64>,
    cdf: Vec<f64>,
}

impl Workload {
    /// One of the embedded standard workloads `w1`..`w5`.
    pub fn named(name: &str) -> Result<Workload, PerfError> {
        let lower = name.to_ascii_lowercase();
        match TABLES.iter().find(|(n, _)| *n == lower) {
            Some((n, text)) => Workload::parse(n, text),
            None => Err(PerfError::Workload {
                name: name.to_string(),
                why: format!(
                    "unknown workload; choose one of {}",
                    WORKLOAD_NAMES.join(", ")
                ),
            }),
        }
    }

    /// Parses a `size_bytes,cdf` table (a header line is allowed; blank
    /// lines and `#` comments are skipped). Sizes must not decrease, the CDF
    /// must not decrease, and the last CDF value must be 1.
    pub fn parse(name: &str, text: &str) -> Result<Workload, PerfError> {
        let bad = |why: String| PerfError::Workload {
            name: name.to_string(),
            why,
        };
        let mut sizes = Vec::new();
        let mut cdf = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut fields = line.split(',');
            let (Some(s), Some(c), None) = (fields.next(), fields.next(), fields.next()) else {
                return Err(bad(format!("line {}: expected `size_bytes,cdf`", i + 1)));
            };
            let (s, c) = (s.trim(), c.trim());
            let size: u64 = match s.parse() {
                Ok(v) => v,
                // The header row.
                Err(_) if sizes.is_empty() && s.parse::<f64>().is_err() => continue,
                Err(_) => return Err(bad(format!("line {}: bad size {s:?}", i + 1))),
            };
            let p: f64 = c
                .parse()
                .map_err(|_| bad(format!("line {}: bad cdf {c:?}", i + 1)))?;
            if !(0.0..=1.0).contains(&p) {
                return Err(bad(format!("line {}: cdf {p} outside [0, 1]", i + 1)));
            }
            if let (Some(&last_s), Some(&last_p)) = (sizes.last(), cdf.last()) {
                if size < last_s || p < last_p {
                    return Err(bad(format!("line {}: rows are not sorted", i + 1)));
                }
            }
            sizes.push(size);
            cdf.push(p);
        }
        match cdf.last() {
            None => Err(bad("no rows".to_string())),
            Some(&p) if (p - 1.0).abs() > 1e-9 => Err(bad(format!("last cdf is {p}, expected 1"))),
            Some(_) => Ok(Workload {
                name: name.to_string(),
                sizes,
                cdf,
            }),
        }
    }

    /// The workload's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The largest size in the table.
    pub fn max_size(&self) -> u64 {
        self.sizes.last().copied().unwrap_or(0)
    }

    /// Size of the message at cumulative probability `u` in (0, 1]: the first
    /// row whose CDF is at least `u`.
    pub fn size_at(&self, u: f64) -> u64 {
        let i = self.cdf.partition_point(|&p| p < u);
        self.sizes[i.min(self.sizes.len() - 1)]
    }

    /// Fraction of messages of at most `size` bytes (the CDF as a step
    /// function: 0 below the smallest size, 1 from the largest on).
    pub fn cdf_at(&self, size: u64) -> f64 {
        let i = self.sizes.partition_point(|&s| s <= size);
        if i == 0 {
            0.0
        } else {
            self.cdf[i - 1]
        }
    }

    /// Draws one size.
    pub fn sample(&self, rng: &mut impl Rng) -> u64 {
        // gen::<f64>() is in [0, 1); 1 - it is in (0, 1].
        let u = 1.0 - rng.gen::<f64>();
        self.size_at(u)
    }

    /// The exact mean of the distribution, with sizes above `cap` counted as
    /// `cap` (pass `u64::MAX` for no cap).
    pub fn mean(&self, cap: u64) -> f64 {
        let mut prev = 0.0;
        let mut mean = 0.0;
        for (&s, &p) in self.sizes.iter().zip(&self.cdf) {
            mean += s.min(cap) as f64 * (p - prev);
            prev = p;
        }
        mean
    }
}

/// Where request sizes come from.
#[derive(Debug, Clone, PartialEq)]
pub enum SizeSpec {
    /// Every request has this many bytes.
    Fixed(usize),
    /// Sizes drawn from a workload, capped at `max` bytes (sizes above are
    /// sent as `max` bytes, as the Homa/Linux paper's cluster benchmark did).
    Workload {
        /// The distribution.
        workload: Workload,
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
                usize::try_from(workload.max_size()).map_or(*max, |s| s.min(*max))
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
