//! Text for reports: compact sizes, CSV fields and GitHub markdown tables.

use std::fmt::Write as _;

/// Formats a byte count compactly with decimal units: `"512B"`, `"1.2K"`,
/// `"10K"`, `"1M"`, `"2.5G"` (one decimal below 10 of a unit, dropped when
/// it is zero).
pub fn fmt_size(bytes: u64) -> String {
    if bytes < 1000 {
        return format!("{bytes}B");
    }
    let units = [("K", 1e3), ("M", 1e6), ("G", 1e9), ("T", 1e12)];
    let v = bytes as f64;
    for (i, (unit, scale)) in units.iter().enumerate() {
        let x = v / scale;
        let text = if x < 9.95 {
            let t = format!("{x:.1}");
            t.strip_suffix(".0").map(str::to_string).unwrap_or(t)
        } else {
            format!("{x:.0}")
        };
        // Move on to the next unit when rounding reaches 1000 ("1000K").
        if x.round() < 1000.0 || i == units.len() - 1 {
            return format!("{text}{unit}");
        }
    }
    unreachable!("the last unit always returns")
}

/// Quotes a CSV field if it needs it (RFC 4180): a field that contains a
/// comma, quote or line break is put in quotes, its quotes doubled.
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Joins already formatted values into one CSV line (no line break),
/// quoting each with [`csv_field`].
pub fn csv_row<S: AsRef<str>>(fields: &[S]) -> String {
    fields
        .iter()
        .map(|f| csv_field(f.as_ref()))
        .collect::<Vec<_>>()
        .join(",")
}

/// Escapes text for a markdown table cell: `|` is escaped, line breaks
/// become spaces.
pub fn md_cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// How a markdown table column is aligned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Left (`:---`): text.
    Left,
    /// Right (`---:`): numbers.
    Right,
    /// The renderer's default (`---`).
    Default,
}

/// A GitHub markdown table: a header row, the alignment row, then one line
/// per row with its cells escaped by [`md_cell`]. `align` has one entry per
/// column (missing entries are [`Align::Default`]); headers are written as
/// given.
pub fn markdown_table<S: AsRef<str>>(headers: &[&str], align: &[Align], rows: &[Vec<S>]) -> String {
    let mut out = String::new();
    out.push_str("| ");
    out.push_str(&headers.join(" | "));
    out.push_str(" |\n|");
    for i in 0..headers.len() {
        out.push_str(match align.get(i).copied().unwrap_or(Align::Default) {
            Align::Left => ":---|",
            Align::Right => "---:|",
            Align::Default => "---|",
        });
    }
    out.push('\n');
    for row in rows {
        let cells: Vec<String> = row.iter().map(|c| md_cell(c.as_ref())).collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_compact() {
        assert_eq!(fmt_size(0), "0B");
        assert_eq!(fmt_size(999), "999B");
        assert_eq!(fmt_size(1000), "1K");
        assert_eq!(fmt_size(1234), "1.2K");
        assert_eq!(fmt_size(9_960), "10K");
        assert_eq!(fmt_size(150_000), "150K");
        assert_eq!(fmt_size(999_700), "1M");
        assert_eq!(fmt_size(2_500_000), "2.5M");
        assert_eq!(fmt_size(3_000_000_000), "3G");
        assert_eq!(fmt_size(u64::MAX), "18446744T");
    }

    #[test]
    fn csv_quotes_only_when_needed() {
        assert_eq!(csv_field("a\"b"), "\"a\"\"b\"");
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_row(&["x", "y,z", "1"]), "x,\"y,z\",1");
    }

    #[test]
    fn markdown_tables_align_and_escape() {
        let t = markdown_table(
            &["name", "value", "note"],
            &[Align::Left, Align::Right],
            &[vec!["a|b", "1", "x\ny"], vec!["c", "22", ""]],
        );
        assert_eq!(
            t,
            "| name | value | note |\n|:---|---:|---|\n| a\\|b | 1 | x y |\n| c | 22 |  |\n"
        );
    }
}
