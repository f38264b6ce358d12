//! Open-loop traffic: message sizes drawn from measured workloads and
//! Poisson message arrivals.
//!
//! A workload is an empirical message-size distribution stored as a step
//! CDF, in the format of the repository's `workloads/` directory: a header
//! line `size_bytes,cdf`, then rows `s,p` meaning "a fraction `p` of all
//! messages is at most `s` bytes long". Sampling follows the rule of
//! `workloads/README.md` exactly: draw `u` uniform in (0, 1] and return the
//! size of the first row whose `cdf >= u`; nothing is interpolated, so every
//! sampled size is one of the sizes in the file.
//!
//! The standard tables are compiled into the crate, so the simulator runs
//! from any directory.

use crate::topology::Packetization;
use rand::Rng;
use rand_distr::{Distribution, Exp};
use std::path::{Path, PathBuf};

/// Names of the built-in workloads accepted by [`SizeDist::by_name`]
/// (besides `fixed:N` and the path of a CSV file).
pub const BUILTIN: &[&str] = &["w1", "w2", "w3", "w4", "w5", "thesis-w3", "thesis-w5"];

/// The embedded tables: (canonical name, file stem alias, CSV text).
const TABLES: &[(&str, &str, &str)] = &[
    ("w1", "w1", include_str!("../../../workloads/w1.csv")),
    ("w2", "w2", include_str!("../../../workloads/w2.csv")),
    ("w3", "w3", include_str!("../../../workloads/w3.csv")),
    ("w4", "w4", include_str!("../../../workloads/w4.csv")),
    ("w5", "w5", include_str!("../../../workloads/w5.csv")),
    (
        "thesis-w3",
        "thesis-w3-synthetic",
        include_str!("../../../workloads/thesis-w3-synthetic.csv"),
    ),
    (
        "thesis-w5",
        "thesis-w5-fb-webserver",
        include_str!("../../../workloads/thesis-w5-fb-webserver.csv"),
    ),
];

/// How far the last CDF value may be from 1 (it is then normalised to 1).
const LAST_CDF_TOLERANCE: f64 = 1e-6;

/// Picoseconds per second.
const PS_PER_SEC: f64 = 1e12;

/// Why a workload or an arrival process could not be built.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// A size/CDF table is malformed.
    #[error("workload {name}, line {line}: {reason}")]
    Parse {
        /// Name of the workload (built-in name or file path).
        name: String,
        /// 1-based line number in the CSV text where the problem is.
        line: usize,
        /// What is wrong, in words.
        reason: String,
    },
    /// The name is neither a built-in workload, `fixed:N`, nor an existing
    /// file.
    #[error("unknown workload {name:?}: expected one of {valid}, or the path of a `size_bytes,cdf` CSV file")]
    UnknownName {
        /// The name that was asked for.
        name: String,
        /// The accepted names, comma-separated.
        valid: String,
    },
    /// `fixed:N` with an `N` that is not a byte count.
    #[error("bad fixed workload {spec:?}: expected `fixed:N` with N a whole number of bytes")]
    BadFixed {
        /// The whole specification as given.
        spec: String,
    },
    /// A workload file could not be read.
    #[error("cannot read workload file {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A Poisson arrival rate that is not a positive finite number.
    #[error("arrival rate must be a positive finite number of messages per second, got {rate}")]
    BadRate {
        /// The rejected rate (messages per second).
        rate: f64,
    },
}

/// An empirical message-size distribution: a step CDF over message sizes
/// (application payload bytes, without protocol headers).
///
/// Internally the table is normalised: sizes strictly increase, every row
/// has positive probability (rows that can never be drawn are dropped and
/// repeated sizes merged; neither changes what is sampled), and the last CDF
/// value is exactly 1.
#[derive(Debug, Clone, PartialEq)]
pub struct SizeDist {
    name: String,
    sizes: Vec<u64>,
    cdf: Vec<f64>,
}

impl SizeDist {
    /// Parses a `size_bytes,cdf` table. `name` is only used to label the
    /// distribution and its error messages.
    ///
    /// The first non-blank line must be the header `size_bytes,cdf`; blank
    /// lines and lines starting with `#` are ignored. Each row holds a size
    /// (a whole number of bytes that fits in 64 bits) and a CDF value in
    /// [0, 1]. Both columns must not decrease, there must be at least one
    /// row, and the last CDF value must be 1 (within 1e-6; the table is
    /// then scaled so that it is exactly 1).
    pub fn from_csv_str(name: &str, text: &str) -> Result<SizeDist, WorkloadError> {
        let err = |line: usize, reason: String| WorkloadError::Parse {
            name: name.to_string(),
            line,
            reason,
        };
        let mut saw_header = false;
        let mut last_line = 0;
        // Raw rows as read: (size, cdf).
        let mut rows: Vec<(u64, f64)> = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line_no = i + 1;
            let line = raw.trim_start_matches('\u{feff}').trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            last_line = line_no;
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            if !saw_header {
                if fields.len() == 2
                    && fields[0].eq_ignore_ascii_case("size_bytes")
                    && fields[1].eq_ignore_ascii_case("cdf")
                {
                    saw_header = true;
                    continue;
                }
                return Err(err(
                    line_no,
                    format!("expected the header line `size_bytes,cdf`, found `{line}`"),
                ));
            }
            if fields.len() != 2 {
                return Err(err(
                    line_no,
                    format!(
                        "expected two comma-separated fields `size_bytes,cdf`, found {} in `{line}`",
                        fields.len()
                    ),
                ));
            }
            let size = parse_size(fields[0]).map_err(|r| err(line_no, r))?;
            let p = parse_cdf(fields[1]).map_err(|r| err(line_no, r))?;
            if let Some(&(prev_size, prev_p)) = rows.last() {
                if size < prev_size {
                    return Err(err(
                        line_no,
                        format!(
                            "size {size} is smaller than the previous row's size {prev_size} (sizes must not decrease)"
                        ),
                    ));
                }
                if p < prev_p {
                    return Err(err(
                        line_no,
                        format!("cdf decreases from {prev_p} to {p} (the cdf must not decrease)"),
                    ));
                }
            }
            rows.push((size, p));
        }
        if !saw_header {
            return Err(err(
                last_line.max(1),
                "empty table: expected the header line `size_bytes,cdf` and at least one row"
                    .to_string(),
            ));
        }
        let Some(&(_, last_p)) = rows.last() else {
            return Err(err(
                last_line.max(1),
                "no data rows after the header `size_bytes,cdf`".to_string(),
            ));
        };
        if (last_p - 1.0).abs() > LAST_CDF_TOLERANCE {
            return Err(err(
                last_line,
                format!("the last cdf is {last_p}, but it must be 1 (every message has some size)"),
            ));
        }
        Ok(Self::from_rows(
            name.to_string(),
            rows.into_iter().map(|(s, p)| (s, p / last_p)),
        ))
    }

    /// Builds the normalised table from sorted rows whose last CDF value is
    /// 1: merges repeated sizes, drops rows of zero probability, and pins the
    /// last value to exactly 1.
    fn from_rows(name: String, rows: impl Iterator<Item = (u64, f64)>) -> SizeDist {
        let mut sizes: Vec<u64> = Vec::new();
        let mut cdf: Vec<f64> = Vec::new();
        for (s, p) in rows {
            let p = p.min(1.0);
            let prev = cdf.last().copied().unwrap_or(0.0);
            if p <= prev {
                // Never drawn: the previous row (or nothing, if p is 0)
                // already covers every u <= p.
                continue;
            }
            if sizes.last() == Some(&s) {
                *cdf.last_mut().expect("same length as sizes") = p;
            } else {
                sizes.push(s);
                cdf.push(p);
            }
        }
        if let Some(last) = cdf.last_mut() {
            *last = 1.0;
        }
        debug_assert!(!sizes.is_empty());
        SizeDist { name, sizes, cdf }
    }

    /// Every message has exactly `size` bytes. Named `fixed:<size>`.
    pub fn fixed(size: u64) -> SizeDist {
        SizeDist {
            name: format!("fixed:{size}"),
            sizes: vec![size],
            cdf: vec![1.0],
        }
    }

    /// Looks a distribution up by name:
    ///
    /// * a built-in table ([`BUILTIN`]: `w1`..`w5` from the Homa papers,
    ///   `thesis-w3` and `thesis-w5` from the thesis; the file stems
    ///   `thesis-w3-synthetic` and `thesis-w5-fb-webserver` work too, and
    ///   case does not matter);
    /// * `fixed:N`, every message `N` bytes;
    /// * otherwise the path of a `size_bytes,cdf` CSV file.
    ///
    /// A name that is none of these gives [`WorkloadError::UnknownName`],
    /// which lists the valid names.
    pub fn by_name(name: &str) -> Result<SizeDist, WorkloadError> {
        let lower = name.trim().to_ascii_lowercase();
        if let Some((canonical, _, text)) = TABLES
            .iter()
            .find(|(n, alias, _)| *n == lower || *alias == lower)
        {
            return SizeDist::from_csv_str(canonical, text);
        }
        if let Some(n) = lower.strip_prefix("fixed:") {
            return n.trim().parse::<u64>().map(SizeDist::fixed).map_err(|_| {
                WorkloadError::BadFixed {
                    spec: name.to_string(),
                }
            });
        }
        let path = Path::new(name);
        let looks_like_path = name.contains('/')
            || name.contains(std::path::MAIN_SEPARATOR)
            || lower.ends_with(".csv");
        if path.exists() || looks_like_path {
            let text = std::fs::read_to_string(path).map_err(|source| WorkloadError::Io {
                path: path.to_path_buf(),
                source,
            })?;
            return SizeDist::from_csv_str(name, &text);
        }
        let mut valid: Vec<&str> = BUILTIN.to_vec();
        valid.push("fixed:N");
        Err(WorkloadError::UnknownName {
            name: name.to_string(),
            valid: valid.join(", "),
        })
    }

    /// The distribution's name (built-in name, `fixed:N`, or file path).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Draws one message size: `u` uniform in (0, 1], then the size of the
    /// first row whose CDF is at least `u` (a binary search).
    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        // gen::<f64>() is a multiple of 2^-53 in [0, 1); 1 - it is exact
        // and lies in (0, 1].
        let u = 1.0 - rng.gen::<f64>();
        let i = self.cdf.partition_point(|&c| c < u);
        // The last CDF value is exactly 1 >= u, so i < len; the min only
        // guards against the impossible.
        self.sizes[i.min(self.sizes.len() - 1)]
    }

    /// Iterates over the rows as (size, probability mass). Sizes strictly
    /// increase, every mass is positive, and the masses sum to 1.
    pub fn rows(&self) -> impl Iterator<Item = (u64, f64)> + '_ {
        let mut prev = 0.0;
        self.sizes.iter().zip(&self.cdf).map(move |(&s, &c)| {
            let mass = c - prev;
            prev = c;
            (s, mass)
        })
    }

    /// The exact mean size: `sum(size_i * (cdf_i - cdf_{i-1}))` with
    /// `cdf_0 = 0`, as defined in `workloads/README.md`.
    pub fn mean(&self) -> f64 {
        self.rows().map(|(s, m)| s as f64 * m).sum()
    }

    /// The exact expectation of [`Packetization::message_wire_bytes`]: wire
    /// bytes of all data packets of a message (headers, Ethernet framing,
    /// preamble and inter-packet gap included), averaged over the
    /// distribution.
    pub fn mean_wire_bytes(&self, p: &Packetization) -> f64 {
        self.rows()
            .map(|(s, m)| p.message_wire_bytes(s) as f64 * m)
            .sum()
    }

    /// The largest size that can be drawn.
    pub fn max(&self) -> u64 {
        *self
            .sizes
            .last()
            .expect("a distribution has at least one row")
    }

    /// The smallest size that can be drawn.
    pub fn min(&self) -> u64 {
        self.sizes[0]
    }

    /// The fraction of messages at most `size` bytes long.
    pub fn cdf(&self, size: u64) -> f64 {
        let i = self.sizes.partition_point(|&s| s <= size);
        if i == 0 {
            0.0
        } else {
            self.cdf[i - 1]
        }
    }

    /// The smallest size whose CDF is at least `p` (`p` is clamped to
    /// [0, 1]; 0 gives [`SizeDist::min`], 1 gives [`SizeDist::max`]).
    /// For `p` in (0, 1] this is the size [`SizeDist::sample`] returns for
    /// `u = p`.
    pub fn quantile(&self, p: f64) -> u64 {
        let i = self.cdf.partition_point(|&c| c < p);
        self.sizes[i.min(self.sizes.len() - 1)]
    }

    /// The same distribution with every size above `max` replaced by `max`
    /// (a sender that truncates long messages). Returns an unchanged copy if
    /// no size exceeds `max`; otherwise the name gets a ` capped at <max>`
    /// suffix.
    pub fn capped(&self, max: u64) -> SizeDist {
        if self.max() <= max {
            return self.clone();
        }
        SizeDist::from_rows(
            format!("{} capped at {max}", self.name),
            self.sizes
                .iter()
                .zip(&self.cdf)
                .map(|(&s, &c)| (s.min(max), c)),
        )
    }
}

/// Parses a size field: a whole number of bytes that fits in a `u64`.
fn parse_size(field: &str) -> Result<u64, String> {
    use std::num::IntErrorKind;
    field.parse::<u64>().map_err(|e| match e.kind() {
        IntErrorKind::Empty => "the size field is empty".to_string(),
        IntErrorKind::PosOverflow => {
            format!(
                "size {field} does not fit in 64 bits (at most {})",
                u64::MAX
            )
        }
        _ => format!("size `{field}` is not a whole non-negative number of bytes"),
    })
}

/// Parses a CDF field: a number in [0, 1] (up to the last-row tolerance).
fn parse_cdf(field: &str) -> Result<f64, String> {
    if field.is_empty() {
        return Err("the cdf field is empty".to_string());
    }
    let p: f64 = field
        .parse()
        .map_err(|_| format!("cdf `{field}` is not a number"))?;
    if !(0.0..=1.0 + LAST_CDF_TOLERANCE).contains(&p) {
        return Err(format!("cdf {field} is outside [0, 1]"));
    }
    Ok(p)
}

/// Messages per second per host that offer a given load.
///
/// The load is the fraction of the host link's bandwidth consumed by the
/// data packets of the offered messages, headers and Ethernet framing
/// (preamble, inter-packet gap) included, control packets (grants, acks,
/// resends, …) and retransmissions excluded. With `mean_wire_bytes` the
/// mean wire bytes of a message's data packets under minimal packetization
/// (as [`SizeDist::mean_wire_bytes`] computes), the rate is
/// `load × link_bps ÷ (8 × mean_wire_bytes)`.
///
/// For example a load of 0.5 on a 10 Gbit/s link with 1,000 wire bytes per
/// message is 625,000 messages per second.
pub fn rate_for_load(load: f64, link_bps: u64, mean_wire_bytes: f64) -> f64 {
    load * link_bps as f64 / (8.0 * mean_wire_bytes)
}

/// A Poisson arrival process: exponentially distributed gaps between
/// message arrivals, in simulator time (picoseconds).
#[derive(Debug, Clone)]
pub struct PoissonArrivals {
    rate_per_sec: f64,
    /// Gap distribution in picoseconds (λ = rate per picosecond).
    exp: Exp<f64>,
}

impl PoissonArrivals {
    /// A process with `rate_per_sec` arrivals per second on average; the
    /// rate must be positive and finite.
    pub fn new(rate_per_sec: f64) -> Result<Self, WorkloadError> {
        if !(rate_per_sec.is_finite() && rate_per_sec > 0.0) {
            return Err(WorkloadError::BadRate { rate: rate_per_sec });
        }
        let exp = Exp::new(rate_per_sec / PS_PER_SEC)
            .map_err(|_| WorkloadError::BadRate { rate: rate_per_sec })?;
        Ok(PoissonArrivals { rate_per_sec, exp })
    }

    /// The same as the free function [`rate_for_load`]: messages per second
    /// per host so that their data packets (headers and Ethernet framing
    /// included, control packets and retransmissions excluded) take `load`
    /// of the host link.
    pub fn rate_for_load(load: f64, link_bps: u64, mean_wire_bytes: f64) -> f64 {
        rate_for_load(load, link_bps, mean_wire_bytes)
    }

    /// The mean arrival rate (per second).
    pub fn rate_per_sec(&self) -> f64 {
        self.rate_per_sec
    }

    /// The mean gap between arrivals (picoseconds, not rounded).
    pub fn mean_gap_ps(&self) -> f64 {
        PS_PER_SEC / self.rate_per_sec
    }

    /// Draws the gap until the next arrival, in picoseconds, rounded to the
    /// nearest picosecond (so it may be 0 at extreme rates; very long gaps
    /// saturate at `u64::MAX`).
    #[inline]
    pub fn next_gap_ps<R: Rng + ?Sized>(&mut self, rng: &mut R) -> u64 {
        self.exp.sample(rng).round() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn parse_err(text: &str) -> (usize, String) {
        match SizeDist::from_csv_str("t", text) {
            Err(WorkloadError::Parse { line, reason, .. }) => (line, reason),
            other => panic!("expected a parse error, got {other:?}"),
        }
    }

    #[test]
    fn builtins_parse_and_means_match_readme() {
        let expected = [
            ("w1", 189.0, 189.0, 100_000),
            ("w2", 442.0, 433.0, 3_529_904),
            ("w3", 2_928.0, 2_423.0, 15_158_197),
            ("w4", 127_797.0, 60_175.0, 10_000_000),
            ("w5", 2_564_690.0, 385_315.0, 29_400_000),
            ("thesis-w3", 2_567.0, 2_567.0, 316_228),
            ("thesis-w5", 68_937.0, 68_937.0, 1_000_000),
        ];
        assert_eq!(
            BUILTIN,
            expected.iter().map(|e| e.0).collect::<Vec<_>>().as_slice()
        );
        for (name, mean, capped_mean, max) in expected {
            let d = SizeDist::by_name(name).unwrap();
            assert_eq!(d.name(), name);
            assert!(
                (d.mean().round() - mean).abs() <= 1.0,
                "{name}: mean {} vs README {mean}",
                d.mean()
            );
            let c = d.capped(1_000_000);
            assert!(
                (c.mean().round() - capped_mean).abs() <= 1.0,
                "{name}: capped mean {} vs README {capped_mean}",
                c.mean()
            );
            assert_eq!(d.max(), max);
            assert!(c.max() <= 1_000_000);
            let total: f64 = d.rows().map(|(_, m)| m).sum();
            assert!((total - 1.0).abs() < 1e-9);
            assert!(d.rows().all(|(_, m)| m > 0.0));
        }
        // Aliases and case.
        assert_eq!(
            SizeDist::by_name("THESIS-W3-synthetic").unwrap(),
            SizeDist::by_name("thesis-w3").unwrap()
        );
    }

    #[test]
    fn unknown_and_fixed_names() {
        match SizeDist::by_name("w9") {
            Err(e @ WorkloadError::UnknownName { .. }) => {
                let msg = e.to_string();
                for n in BUILTIN {
                    assert!(msg.contains(n), "{msg}");
                }
                assert!(msg.contains("fixed:N"), "{msg}");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            SizeDist::by_name("fixed:abc"),
            Err(WorkloadError::BadFixed { .. })
        ));
        assert!(matches!(
            SizeDist::by_name("/nonexistent/dir/x.csv"),
            Err(WorkloadError::Io { .. })
        ));
        let f = SizeDist::by_name("fixed:1000").unwrap();
        assert_eq!(f, SizeDist::fixed(1000));
        assert_eq!(f.name(), "fixed:1000");
        assert_eq!((f.min(), f.max(), f.mean()), (1000, 1000, 1000.0));
        assert_eq!((f.cdf(999), f.cdf(1000)), (0.0, 1.0));
        assert_eq!(f.quantile(0.3), 1000);
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        assert!((0..1000).all(|_| f.sample(&mut rng) == 1000));
        let p = Packetization::default();
        assert_eq!(f.mean_wire_bytes(&p), p.message_wire_bytes(1000) as f64);
    }

    #[test]
    fn reads_a_file_from_disk() {
        let path = std::env::temp_dir().join(format!("homa-sim-wl-{}.csv", std::process::id()));
        std::fs::write(&path, "size_bytes,cdf\n10,0.5\n20,1\n").unwrap();
        let d = SizeDist::by_name(path.to_str().unwrap()).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(d.mean(), 15.0);
        assert_eq!(d.name(), path.to_str().unwrap());
    }

    /// Draws `n` sizes from `d`; returns the sample mean and the largest
    /// gap between the empirical CDF and `d`'s CDF over `d`'s sizes (the
    /// Kolmogorov–Smirnov statistic of a step distribution).
    fn sample_stats(d: &SizeDist, n: u32, rng: &mut ChaCha8Rng) -> (f64, f64) {
        let sizes: Vec<u64> = d.rows().map(|(s, _)| s).collect();
        let mut counts = vec![0u64; sizes.len()];
        let mut sum = 0u128;
        for _ in 0..n {
            let s = d.sample(rng);
            sum += s as u128;
            let i = sizes.partition_point(|&x| x < s);
            assert_eq!(
                sizes[i],
                s,
                "{}: sampled size {s} not in the table",
                d.name()
            );
            counts[i] += 1;
        }
        let mut seen = 0u64;
        let mut ks: f64 = 0.0;
        for (&s, &c) in sizes.iter().zip(&counts) {
            seen += c;
            ks = ks.max((seen as f64 / n as f64 - d.cdf(s)).abs());
        }
        (sum as f64 / n as f64, ks)
    }

    /// Relative standard error of the mean of `n` samples of `d`.
    fn rel_std_error(d: &SizeDist, n: u32) -> f64 {
        let mean = d.mean();
        let var: f64 = d.rows().map(|(s, m)| m * (s as f64 - mean).powi(2)).sum();
        var.sqrt() / (n as f64).sqrt() / mean
    }

    /// Acceptance test of the issue: the mean of 10^6 samples is within 1%
    /// of the distribution's exact mean.
    ///
    /// The relative standard error of a 10^6-sample mean (sd / mean / 1000)
    /// decides where 1% is a meaningful bound:
    ///
    /// | distribution            | rel. std error |
    /// |-------------------------|----------------|
    /// | w1                      | 0.25%          |
    /// | w2                      | 1.68%          |
    /// | w3                      | 2.30%          |
    /// | w4                      | 0.55%          |
    /// | w5                      | 0.24%          |
    /// | thesis-w3               | 0.47%          |
    /// | thesis-w5               | 0.21%          |
    /// | w2 capped at 1,000,000  | 1.13%          |
    /// | w3 capped at 1,000,000  | 1.02%          |
    /// | w4 capped at 1,000,000  | 0.30%          |
    /// | w5 capped at 1,000,000  | 0.11%          |
    ///
    /// For the distributions below 0.5% (1% is at least 2 sigma) the test
    /// asserts 1% with a fixed seed. For w2 and w3 (capped or not) and
    /// uncapped w4, 1% is within about one standard error: no correct
    /// sampler can meet it reliably at 10^6 samples (a fixed seed would
    /// pass or fail by luck). There the mean is checked against 4 standard
    /// errors instead, and `sample_distribution_matches_table` checks the
    /// whole distribution, tail rows included, which is the stronger test
    /// of the sampler.
    #[test]
    fn sample_mean_within_one_percent() {
        const N: u32 = 1_000_000;
        let mut rng = ChaCha8Rng::seed_from_u64(0x5eed_1234);
        let get = |n: &str| SizeDist::by_name(n).unwrap();
        let one_percent = [
            get("w1"),
            get("w5"),
            get("thesis-w3"),
            get("thesis-w5"),
            get("w4").capped(1_000_000),
            get("w5").capped(1_000_000),
        ];
        for d in &one_percent {
            assert!(rel_std_error(d, N) < 0.005, "{}", d.name());
            let (got, _) = sample_stats(d, N, &mut rng);
            let err = (got - d.mean()).abs() / d.mean();
            assert!(
                err < 0.01,
                "{}: sample mean {got} vs exact {} (error {:.3}%)",
                d.name(),
                d.mean(),
                err * 100.0
            );
        }
        let heavy = [
            get("w2"),
            get("w3"),
            get("w4"),
            get("w2").capped(1_000_000),
            get("w3").capped(1_000_000),
        ];
        for d in &heavy {
            let se = rel_std_error(d, N);
            let (got, _) = sample_stats(d, N, &mut rng);
            let err = (got - d.mean()).abs() / d.mean();
            assert!(
                err < 4.0 * se,
                "{}: sample mean {got} vs exact {} (error {:.3}%, std error {:.3}%)",
                d.name(),
                d.mean(),
                err * 100.0,
                se * 100.0
            );
        }
    }

    /// The empirical CDF of 10^6 samples matches every built-in table: the
    /// Kolmogorov–Smirnov distance stays below 0.0025 (the 99.999% critical
    /// value is about 2.4 / sqrt(10^6) = 0.0024), and every sample is a
    /// size from the table.
    #[test]
    fn sample_distribution_matches_table() {
        const N: u32 = 1_000_000;
        let mut rng = ChaCha8Rng::seed_from_u64(0xd157);
        for name in BUILTIN {
            let d = SizeDist::by_name(name).unwrap();
            let (_, ks) = sample_stats(&d, N, &mut rng);
            assert!(ks < 0.0025, "{name}: KS distance {ks}");
        }
    }

    #[test]
    fn samples_are_sizes_from_the_file() {
        let text = include_str!("../../../workloads/w2.csv");
        let sizes: std::collections::HashSet<u64> = text
            .lines()
            .skip(1)
            .filter_map(|l| l.split(',').next()?.trim().parse().ok())
            .collect();
        let d = SizeDist::from_csv_str("w2", text).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for _ in 0..100_000 {
            assert!(sizes.contains(&d.sample(&mut rng)));
        }
        assert_eq!(d.min(), 8);
        assert_eq!(d.max(), 3_529_904);
    }

    #[test]
    fn quantile_and_cdf_agree() {
        for name in BUILTIN {
            let d = SizeDist::by_name(name).unwrap();
            for k in 0..=1000 {
                let p = k as f64 / 1000.0;
                let q = d.quantile(p);
                assert!(d.cdf(q) >= p, "{name} p={p}");
                if q > d.min() {
                    assert!(d.cdf(q - 1) < p, "{name} p={p}");
                }
            }
            for (s, _) in d.rows() {
                assert_eq!(d.quantile(d.cdf(s)), s);
            }
            assert_eq!(d.cdf(d.max()), 1.0);
            assert_eq!(d.cdf(u64::MAX), 1.0);
            assert_eq!(d.quantile(0.0), d.min());
            assert_eq!(d.quantile(1.0), d.max());
            assert_eq!(d.quantile(2.0), d.max());
        }
    }

    #[test]
    fn step_semantics_and_normalisation() {
        // Repeated sizes, zero-mass rows and a slightly-off last cdf.
        let d = SizeDist::from_csv_str(
            "t",
            "# comment\nsize_bytes, cdf\r\n5,0\n10,0.25\n10,0.5\n\n20,0.5\n30,0.9999995\n40,0.9999995\n",
        )
        .unwrap();
        let rows: Vec<_> = d.rows().collect();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].0, 10);
        assert_eq!(rows[1].0, 30);
        assert!((rows[0].1 - 0.5).abs() < 1e-6);
        assert_eq!((d.min(), d.max()), (10, 30));
        assert_eq!(d.cdf(9), 0.0);
        assert_eq!(d.cdf(29), d.cdf(10));
        assert_eq!(d.cdf(40), 1.0);
        assert!((d.mean() - 20.0).abs() < 1e-4);

        let c = SizeDist::by_name("w4").unwrap().capped(1000);
        assert_eq!(c.max(), 1000);
        assert_eq!(c.name(), "w4 capped at 1000");
        let w4 = SizeDist::by_name("w4").unwrap();
        assert_eq!(c.cdf(999), w4.cdf(999));
        assert_eq!(w4.capped(u64::MAX), w4);
    }

    #[test]
    fn mean_wire_bytes_is_exact() {
        let p = Packetization::default();
        let mp = p.max_payload() as u64;
        let d = SizeDist::from_csv_str("t", "size_bytes,cdf\n0,0.25\n100,0.5\n3000,1\n").unwrap();
        let want = 0.25 * p.message_wire_bytes(0) as f64
            + 0.25 * p.message_wire_bytes(100) as f64
            + 0.5 * p.message_wire_bytes(3000) as f64;
        assert!((d.mean_wire_bytes(&p) - want).abs() < 1e-9);
        // A message of exactly k full packets costs k full frames.
        let f = SizeDist::fixed(3 * mp);
        assert_eq!(f.mean_wire_bytes(&p), 3.0 * p.max_frame() as f64);
    }

    #[test]
    fn bad_csvs_report_line_and_reason() {
        let (line, why) = parse_err("size_bytes,cdf\n10,0.5\n20,0.4\n30,1\n");
        assert_eq!(line, 3);
        assert!(why.contains("decreases"), "{why}");

        let (line, why) = parse_err("size_bytes,cdf\n10,0.5\n5,0.6\n30,1\n");
        assert_eq!(line, 3);
        assert!(why.contains("smaller"), "{why}");

        let (line, why) = parse_err("10,0.5\n20,1\n");
        assert_eq!(line, 1);
        assert!(why.contains("header"), "{why}");

        let (line, why) = parse_err("size_bytes,cdf\n10,0.5\n20,1.5\n");
        assert_eq!(line, 3);
        assert!(why.contains("outside [0, 1]"), "{why}");

        let (line, why) = parse_err("size_bytes,cdf\n10,-0.1\n20,1\n");
        assert_eq!(line, 2);
        assert!(why.contains("outside [0, 1]"), "{why}");

        let (line, why) = parse_err("size_bytes,cdf\n10,0.5\n20,0.9\n");
        assert_eq!(line, 3);
        assert!(why.contains("last cdf is 0.9"), "{why}");

        let (line, why) = parse_err("size_bytes,cdf\n10,0.5\nabc,1\n");
        assert_eq!(line, 3);
        assert!(why.contains("`abc`"), "{why}");

        let (line, why) = parse_err("size_bytes,cdf\n10,half\n");
        assert_eq!(line, 2);
        assert!(why.contains("not a number"), "{why}");

        let (line, why) = parse_err("size_bytes,cdf\n99999999999999999999,1\n");
        assert_eq!(line, 2);
        assert!(why.contains("64 bits"), "{why}");

        let (line, why) = parse_err("size_bytes,cdf\n10,0.5,7\n");
        assert_eq!(line, 2);
        assert!(why.contains("two comma-separated"), "{why}");

        let (line, why) = parse_err("size_bytes,cdf\n");
        assert_eq!(line, 1);
        assert!(why.contains("no data rows"), "{why}");

        let (line, why) = parse_err("");
        assert_eq!(line, 1);
        assert!(why.contains("empty"), "{why}");

        // The Display form names the workload and the line.
        let e = SizeDist::from_csv_str("mine", "size_bytes,cdf\n10,0.5\n20,0.4\n").unwrap_err();
        assert!(e.to_string().starts_with("workload mine, line 3: "), "{e}");
    }

    #[test]
    fn poisson_gap_mean() {
        let rate = 625_000.0;
        let mut a = PoissonArrivals::new(rate).unwrap();
        assert_eq!(a.rate_per_sec(), rate);
        assert_eq!(a.mean_gap_ps(), 1.6e6);
        let mut rng = ChaCha8Rng::seed_from_u64(42);
        const N: u64 = 100_000;
        let sum: u64 = (0..N).map(|_| a.next_gap_ps(&mut rng)).sum();
        let mean = sum as f64 / N as f64;
        let want = 1e12 / rate;
        assert!(
            (mean - want).abs() / want < 0.02,
            "mean gap {mean} ps vs {want} ps"
        );
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(matches!(
                PoissonArrivals::new(bad),
                Err(WorkloadError::BadRate { .. })
            ));
        }
    }

    #[test]
    fn rate_for_load_arithmetic() {
        // 50% of 10 Gbit/s is 625,000,000 bytes/s; 1,000 wire bytes each.
        assert_eq!(rate_for_load(0.5, 10_000_000_000, 1000.0), 625_000.0);
        assert_eq!(
            PoissonArrivals::rate_for_load(0.8, 25_000_000_000, 2500.0),
            1_000_000.0
        );
        // Fixed 1,000-byte messages with default packetization: one frame.
        let p = Packetization::default();
        let d = SizeDist::fixed(1000);
        let wire = d.mean_wire_bytes(&p);
        assert_eq!(wire, p.data_frame(1000) as f64);
        let r = rate_for_load(1.0, 10_000_000_000, wire);
        assert!((r * wire * 8.0 - 1e10).abs() < 1e-3);
    }
}
