//! Output: every scenario's report prints as a two-column table or as JSON.

use serde::Serialize;

/// A scenario's findings.
pub trait Report: Serialize {
    /// One line saying what was measured.
    fn title(&self) -> String;
    /// (figure, value) rows for the table.
    fn rows(&self) -> Vec<(String, String)>;
}

/// Renders `report` as an aligned two-column table.
pub fn table(report: &impl Report) -> String {
    let rows = report.rows();
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let mut out = format!("{}\n", report.title());
    for (k, v) in rows {
        out.push_str(&format!("  {k:<width$}  {v}\n"));
    }
    out
}

/// Renders `report` as one JSON object.
pub fn json(report: &impl Report) -> String {
    serde_json::to_string_pretty(report).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

/// Bytes as MiB with one decimal.
pub fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
}

/// KiB (as /proc reports them) as MiB with one decimal.
pub fn kib_as_mib(kib: u64) -> String {
    mib(kib * 1024)
}

/// An optional metric, or "n/a" when the core does not report it.
pub fn opt(v: Option<u64>) -> String {
    v.map_or_else(|| "n/a".into(), |v| v.to_string())
}
