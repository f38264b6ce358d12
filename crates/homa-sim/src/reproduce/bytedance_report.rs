//! The report of `reproduce bytedance` ([`super::bytedance`]).

use super::bytedance::Entry;

/// One CSV row per run.
pub fn csv(entries: &[Entry]) -> String {
    let _ = entries;
    String::new()
}

/// The markdown report.
pub fn markdown(entries: &[Entry], wall_s: f64) -> String {
    let _ = (entries, wall_s);
    String::new()
}
