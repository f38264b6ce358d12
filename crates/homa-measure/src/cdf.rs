//! Workload size distributions: the `size_bytes,cdf` tables of the
//! repository's `workloads/` directory, parsed with clear errors, sampled,
//! and summarised (mean, quantiles, CDF).
//!
//! A workload is an empirical message-size distribution stored as a step
//! CDF: a header line `size_bytes,cdf`, then rows `s,p` meaning "a fraction
//! `p` of all messages is at most `s` bytes long". Sampling follows the rule
//! of `workloads/README.md` exactly: draw `u` uniform in (0, 1] and return
//! the size of the first row whose `cdf >= u`; nothing is interpolated, so
//! every sampled size is one of the sizes in the file.
//!
//! The standard tables are compiled into the crate, so every tool that uses
//! them runs from any directory. They are read from the crate's own
//! `workloads/`, whose files are links to the repository's: `cargo package`
//! copies what a link points to, so the published crate carries them.

use rand::Rng;
use std::path::{Path, PathBuf};

/// Names of the built-in workloads accepted by [`SizeDist::by_name`]
/// (besides `fixed:N` and the path of a CSV file).
pub const BUILTIN: &[&str] = &["w1", "w2", "w3", "w4", "w5", "thesis-w3", "thesis-w5"];

/// The embedded tables: (canonical name, file stem alias, CSV text).
const TABLES: &[(&str, &str, &str)] = &[
    ("w1", "w1", include_str!("../workloads/w1.csv")),
    ("w2", "w2", include_str!("../workloads/w2.csv")),
    ("w3", "w3", include_str!("../workloads/w3.csv")),
    ("w4", "w4", include_str!("../workloads/w4.csv")),
    ("w5", "w5", include_str!("../workloads/w5.csv")),
    (
        "thesis-w3",
        "thesis-w3-synthetic",
        include_str!("../workloads/thesis-w3-synthetic.csv"),
    ),
    (
        "thesis-w5",
        "thesis-w5-fb-webserver",
        include_str!("../workloads/thesis-w5-fb-webserver.csv"),
    ),
];

/// How far the last CDF value may be from 1 (it is then normalised to 1).
const LAST_CDF_TOLERANCE: f64 = 1e-6;

/// Why a workload could not be built.
#[derive(Debug, thiserror::Error)]
pub enum CdfError {
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
}

/// How many bytes a message of a given size takes on the wire: a
/// packetization rule, e.g. the simulator's framing.
pub trait WireBytes {
    /// Wire bytes (headers and framing included) of all data packets of a
    /// message of `size` payload bytes.
    fn message_wire_bytes(&self, size: u64) -> u64;
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
    pub fn from_csv_str(name: &str, text: &str) -> Result<SizeDist, CdfError> {
        let err = |line: usize, reason: String| CdfError::Parse {
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
    /// A name that is none of these gives [`CdfError::UnknownName`],
    /// which lists the valid names.
    pub fn by_name(name: &str) -> Result<SizeDist, CdfError> {
        let lower = name.trim().to_ascii_lowercase();
        if let Some((canonical, _, text)) = TABLES
            .iter()
            .find(|(n, alias, _)| *n == lower || *alias == lower)
        {
            return SizeDist::from_csv_str(canonical, text);
        }
        if let Some(n) = lower.strip_prefix("fixed:") {
            return n
                .trim()
                .parse::<u64>()
                .map(SizeDist::fixed)
                .map_err(|_| CdfError::BadFixed {
                    spec: name.to_string(),
                });
        }
        let path = Path::new(name);
        let looks_like_path = name.contains('/')
            || name.contains(std::path::MAIN_SEPARATOR)
            || lower.ends_with(".csv");
        if path.exists() || looks_like_path {
            let text = std::fs::read_to_string(path).map_err(|source| CdfError::Io {
                path: path.to_path_buf(),
                source,
            })?;
            return SizeDist::from_csv_str(name, &text);
        }
        let mut valid: Vec<&str> = BUILTIN.to_vec();
        valid.push("fixed:N");
        Err(CdfError::UnknownName {
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

    /// The exact expectation of [`WireBytes::message_wire_bytes`] (bytes):
    /// wire bytes of all data packets of a message (headers, Ethernet
    /// framing, preamble and inter-packet gap included), averaged over the
    /// distribution.
    pub fn mean_wire_bytes<P: WireBytes + ?Sized>(&self, p: &P) -> f64 {
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

#[cfg(test)]
mod tests;
