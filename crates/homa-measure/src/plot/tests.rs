//! Tests of the plots: each writes a PNG of plausible size.

use super::*;
use std::path::PathBuf;

/// A fresh, empty directory under the system temp dir.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!(
            "homa-measure-plot-{name}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Checks that `path` is a PNG of a plausible size (text and lines
/// drawn, not a blank canvas).
fn check_png(path: &Path) {
    let bytes = std::fs::read(path).unwrap();
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert!(
        bytes.len() > 8_000,
        "suspiciously small PNG: {} bytes",
        bytes.len()
    );
}

fn many_series(n: usize) -> Vec<Series> {
    (0..n)
        .map(|i| Series {
            label: format!("series {i}"),
            points: (0..20)
                .map(|k| {
                    let x = 2.5 + 5.0 * k as f64;
                    (
                        x,
                        1.0 + (i + 1) as f64 * (1.0 + (x / 20.0).sin().abs()) * 2.0,
                    )
                })
                .collect(),
        })
        .collect()
}

#[test]
fn slowdown_plot_writes_png() {
    let dir = TempDir::new("slowdown");
    let series = many_series(12);
    let ticks: Vec<(f64, String)> = (0..=10)
        .map(|i| {
            (
                i as f64 * 10.0,
                crate::table::fmt_size(10u64.pow(i / 2 + 1)),
            )
        })
        .collect();
    let path = dir.0.join("slowdown.png");
    slowdown_plot(
        &path,
        "W3, 80% load: 99th-percentile slowdown",
        "Slowdown",
        &series,
        &ticks,
    )
    .unwrap();
    check_png(&path);
    // Empty input still produces a valid (empty) plot.
    let empty = dir.0.join("empty.png");
    slowdown_plot(&empty, "empty", "Slowdown", &[], &[]).unwrap();
    assert!(std::fs::read(&empty).unwrap().starts_with(b"\x89PNG"));
}

#[test]
fn bar_plot_writes_png() {
    let dir = TempDir::new("bar");
    let groups: Vec<(String, Vec<(String, f64)>)> = ["W1", "W2", "W3", "W4", "W5"]
        .iter()
        .enumerate()
        .map(|(i, w)| {
            (
                w.to_string(),
                vec![
                    ("Homa".to_string(), 0.9 - 0.02 * i as f64),
                    ("pFabric".to_string(), 0.75 - 0.03 * i as f64),
                ],
            )
        })
        .collect();
    let path = dir.0.join("nested/bars.png");
    bar_plot(&path, "Max sustainable load", "Network load", &groups).unwrap();
    check_png(&path);
}

#[test]
fn line_plot_writes_png() {
    let dir = TempDir::new("line");
    let series = vec![
        Series {
            label: "w3 p99".into(),
            points: (1..=7).map(|k| (k as f64, 40.0 / k as f64 + 2.0)).collect(),
        },
        Series {
            label: "w4 p99".into(),
            points: (1..=7).map(|k| (k as f64, 20.0 / k as f64 + 1.5)).collect(),
        },
    ];
    for log_y in [false, true] {
        let path = dir.0.join(format!("line-{log_y}.png"));
        line_plot(
            &path,
            "p99 slowdown vs overcommitment",
            "Overcommitment (degree)",
            "p99 slowdown",
            &series,
            log_y,
        )
        .unwrap();
        check_png(&path);
    }
}

/// The RGB pixels of a PNG, row by row, and its width.
fn pixels(path: &Path) -> (Vec<[u8; 3]>, usize) {
    let decoder = png::Decoder::new(std::fs::File::open(path).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!(info.color_type, png::ColorType::Rgb);
    let px = buf[..info.buffer_size()]
        .chunks(3)
        .map(|c| [c[0], c[1], c[2]])
        .collect();
    (px, info.width as usize)
}

/// A legend inside the chart hid whichever curve ran under it (the
/// testbed's TCP p99 at the top right, or a curve at the top left): every
/// curve must stay visible along its whole length, the legend being under
/// the chart.
#[test]
fn the_legend_hides_no_curve() {
    let dir = TempDir::new("legend");
    // Two curves at the top of the chart, across its whole width, and
    // three lower ones: a legend in either upper corner would cover one.
    let flat = |y: f64| (0..=20).map(|k| (k as f64 * 5.0, y)).collect::<Vec<_>>();
    let series: Vec<Series> = [900.0, 800.0, 30.0, 10.0, 3.0]
        .iter()
        .enumerate()
        .map(|(i, &y)| Series {
            label: format!("a long legend label for the curve number {i}"),
            points: flat(y),
        })
        .collect();
    let ticks: Vec<(f64, String)> = (0..=10)
        .map(|i| (i as f64 * 10.0, format!("{i}K")))
        .collect();
    let path = dir.0.join("legend.png");
    slowdown_plot(&path, "legend", "Slowdown", &series, &ticks).unwrap();
    let (px, width) = pixels(&path);
    let height = px.len() / width;
    for i in 0..series.len() {
        let RGBColor(r, g, b) = series_color(i);
        let colored = |x: usize| (0..height).any(|y| px[y * width + x] == [r, g, b]);
        // The plotting area spans about x = 80..985 (y-label area and
        // margins); every column of it shows the curve.
        let hidden: Vec<usize> = (100..960).filter(|&x| !colored(x)).collect();
        assert!(
            hidden.is_empty(),
            "curve {i} hidden in {} columns from x = {:?}",
            hidden.len(),
            hidden.first()
        );
    }
    check_png(&path);
}

#[test]
fn the_size_axis_is_titled_by_size() {
    assert!(SIZE_AXIS_LABEL.starts_with("Message size"));
    assert!(!SIZE_AXIS_LABEL.contains("percentile"));
}
