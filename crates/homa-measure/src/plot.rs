//! PNG plots, drawn with plotters' bitmap backend: the thesis' slowdown
//! plot (slowdown by message-size percentile), grouped bar charts and line
//! plots.
//!
//! Text is rendered with DejaVu Sans, embedded in the binary
//! (`assets/DejaVuSans.ttf`, Bitstream Vera license, see
//! `assets/DejaVuSans-LICENSE.txt`) and registered with plotters' `ab_glyph`
//! font support, so plotting needs neither fontconfig nor system fonts.

use plotters::coord::ranged1d::{AsRangedCoord, Ranged, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{FontStyle, RGBColor};
use std::path::Path;
use std::sync::OnceLock;

/// DejaVu Sans 2.37 (see `assets/DejaVuSans-LICENSE.txt`).
static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

/// The font family every text in the plots uses.
const FAMILY: &str = "sans-serif";

/// Width of the PNGs (pixels).
pub const WIDTH: u32 = 1000;
/// Height of the PNGs (pixels).
pub const HEIGHT: u32 = 600;

/// Registers the embedded font with plotters, once per process.
fn ensure_font() -> Result<(), PlotError> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED
        .get_or_init(|| plotters::style::register_font(FAMILY, FontStyle::Normal, FONT).is_ok());
    if ok {
        Ok(())
    } else {
        Err(PlotError::Font)
    }
}

/// Why a plot could not be written.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// The embedded font could not be registered.
    #[error("the embedded DejaVuSans.ttf is not a valid font")]
    Font,
    /// The directory of the plot could not be created.
    #[error("cannot create the directory of the plot: {0}")]
    Io(#[from] std::io::Error),
    /// plotters failed while drawing or encoding the image.
    #[error("plotting failed: {0}")]
    Draw(String),
}

/// Turns a plotters error (whose types borrow the backend) into a
/// [`PlotError`].
fn plot_err<E: std::fmt::Display>(e: E) -> PlotError {
    PlotError::Draw(e.to_string())
}

/// Series colors: the Tableau 10 palette, in order, then again darker.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// The color of the `i`th series (distinct for the first 20).
pub fn series_color(i: usize) -> RGBColor {
    let RGBColor(r, g, b) = PALETTE[i % PALETTE.len()];
    if (i / PALETTE.len()) % 2 == 1 {
        // Second round: darker shades of the same hues.
        RGBColor(r / 2, g / 2, b / 2)
    } else {
        RGBColor(r, g, b)
    }
}

/// One line of a plot.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Series {
    /// Legend entry.
    pub label: String,
    /// The points, in drawing order.
    pub points: Vec<(f64, f64)>,
}

/// Formats an axis value: integers plainly, others with up to two
/// decimals, large values compactly.
fn fmt_axis(v: f64) -> String {
    if v.abs() >= 1e4 {
        let (x, unit) = if v.abs() >= 1e6 {
            (v / 1e6, "M")
        } else {
            (v / 1e3, "K")
        };
        return format!("{}{unit}", trim_decimals(x, 1));
    }
    trim_decimals(v, 2)
}

/// Formats a tick of a log axis: only the "round" ticks (1, 2, 3 and 5
/// times a power of ten) get a label, the others keep just their grid line.
fn fmt_log_axis(v: f64) -> String {
    if !(v > 0.0 && v.is_finite()) {
        return String::new();
    }
    let mantissa = v / 10f64.powf(v.log10().floor());
    if [1.0, 2.0, 3.0, 5.0, 10.0]
        .iter()
        .any(|m| (mantissa - m).abs() < 1e-6 * m)
    {
        fmt_axis(v)
    } else {
        String::new()
    }
}

/// The largest power of ten at or below `v` (> 0). plotters' log axes put
/// ticks only from the first power of ten inside the range, so log ranges
/// start at one.
fn power_of_ten_below(v: f64) -> f64 {
    10f64.powf(v.log10().floor())
}

fn trim_decimals(v: f64, decimals: usize) -> String {
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Finite points of the series (and, for a log axis, positive ones).
fn finite_points(s: &Series, positive_y: bool) -> impl Iterator<Item = (f64, f64)> + '_ {
    s.points
        .iter()
        .copied()
        .filter(move |(x, y)| x.is_finite() && y.is_finite() && (!positive_y || *y > 0.0))
}

/// Draws the series as lines with markers (their legend is drawn by
/// [`chart_area_and_legend`], outside the chart).
fn draw_lines<'a, Y>(
    chart: &mut ChartContext<'a, BitMapBackend<'a>, Cartesian2d<RangedCoordf64, Y>>,
    series: &[Series],
    positive_y: bool,
) -> Result<(), PlotError>
where
    Y: Ranged<ValueType = f64>,
{
    for (i, s) in series.iter().enumerate() {
        let color = series_color(i);
        let pts: Vec<(f64, f64)> = finite_points(s, positive_y).collect();
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
            .map_err(plot_err)?;
        chart
            .draw_series(pts.iter().map(|&p| marker(p, i, color)))
            .map_err(plot_err)?;
    }
    Ok(())
}

/// The point marker of the `i`th series: circles for the first ten series,
/// then triangles, then crosses.
fn marker<DB: DrawingBackend, C: Clone + 'static>(
    at: C,
    i: usize,
    color: RGBColor,
) -> DynElement<'static, DB, C> {
    match (i / PALETTE.len()) % 3 {
        0 => Circle::new(at, 3, color.filled()).into_dyn(),
        1 => TriangleMarker::new(at, 4, color.filled()).into_dyn(),
        _ => Cross::new(at, 4, color.stroke_width(2)).into_dyn(),
    }
}

/// Black text of the given size, anchored at `(h, v)` of its box.
fn text_style(size: u32, h: HPos, v: VPos) -> TextStyle<'static> {
    TextStyle::from((FAMILY, size).into_font())
        .color(&BLACK)
        .pos(Pos::new(h, v))
}

/// Creates the parent directory of `path` if it is missing.
fn ensure_parent(path: &Path) -> Result<(), PlotError> {
    if let Some(dir) = path.parent() {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir)?;
        }
    }
    Ok(())
}

/// What a legend entry shows beside its label.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Swatch {
    /// The line and marker of the `i`th series.
    Line(usize),
    /// A filled square of the `i`th series' color.
    Bar(usize),
}

/// Font size of the legend.
const LEGEND_FONT: u32 = 15;
/// Height of a legend row (pixels).
const LEGEND_ROW: i32 = 24;
/// Width of a swatch (pixels).
const SWATCH_W: i32 = 26;
/// Space above and below the legend rows (pixels).
const LEGEND_PAD: i32 = 6;

/// A legend laid out in rows under the chart, never over the data: the
/// entries in order, left to right, a new row when the next one would not
/// fit the image's width.
#[derive(Debug, Clone, PartialEq)]
struct Legend {
    /// `(x, row, label, swatch)` of each entry; x in pixels from the left.
    entries: Vec<(i32, i32, String, Swatch)>,
    /// Height of the strip (pixels); 0 without entries.
    height: u32,
}

impl Legend {
    /// Lays out `entries` (empty labels are left out), measuring the text
    /// on `area`.
    fn layout(
        area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
        entries: &[(String, Swatch)],
    ) -> Result<Legend, PlotError> {
        let font = TextStyle::from((FAMILY, LEGEND_FONT).into_font());
        let max_width = WIDTH as i32 - 40;
        let mut rows: Vec<Vec<(i32, String, Swatch)>> = vec![Vec::new()];
        let mut x = 0;
        for (label, swatch) in entries.iter().filter(|(l, _)| !l.is_empty()) {
            let (text_w, _) = area.estimate_text_size(label, &font).map_err(plot_err)?;
            let w = SWATCH_W + 6 + text_w as i32 + 22;
            let row = rows.last_mut().expect("one row at least");
            if x + w > max_width && !row.is_empty() {
                rows.push(Vec::new());
                x = 0;
            }
            rows.last_mut()
                .expect("one row at least")
                .push((x, label.clone(), *swatch));
            x += w;
        }
        rows.retain(|r| !r.is_empty());
        let mut laid = Vec::new();
        for (r, row) in rows.iter().enumerate() {
            // Centre each row.
            let width = row
                .last()
                .map_or(0, |(x, l, _)| x + SWATCH_W + 6 + text_width(area, l, &font));
            let left = (WIDTH as i32 - width) / 2;
            for (x, label, swatch) in row {
                laid.push((left + x, r as i32, label.clone(), *swatch));
            }
        }
        let height = if rows.is_empty() {
            0
        } else {
            (rows.len() as i32 * LEGEND_ROW + 2 * LEGEND_PAD) as u32
        };
        Ok(Legend {
            entries: laid,
            height,
        })
    }

    /// Draws the legend on `strip`, an area as wide as the image.
    fn draw(
        &self,
        strip: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    ) -> Result<(), PlotError> {
        let style = text_style(LEGEND_FONT, HPos::Left, VPos::Center);
        for (x, row, label, swatch) in &self.entries {
            let y = LEGEND_PAD + row * LEGEND_ROW + LEGEND_ROW / 2;
            match *swatch {
                Swatch::Line(i) => {
                    let color = series_color(i);
                    strip
                        .draw(&PathElement::new(
                            vec![(*x, y), (x + SWATCH_W, y)],
                            color.stroke_width(2),
                        ))
                        .map_err(plot_err)?;
                    strip
                        .draw(&marker((x + SWATCH_W / 2, y), i, color))
                        .map_err(plot_err)?;
                }
                Swatch::Bar(i) => {
                    strip
                        .draw(&Rectangle::new(
                            [(x + SWATCH_W / 2 - 7, y - 7), (x + SWATCH_W / 2 + 7, y + 7)],
                            series_color(i).filled(),
                        ))
                        .map_err(plot_err)?;
                }
            }
            strip
                .draw(&Text::new(
                    label.clone(),
                    (x + SWATCH_W + 6, y),
                    style.clone(),
                ))
                .map_err(plot_err)?;
        }
        Ok(())
    }
}

fn text_width(
    area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    text: &str,
    font: &TextStyle<'_>,
) -> i32 {
    area.estimate_text_size(text, font)
        .map_or(0, |(w, _)| w as i32)
}

/// Splits the image into the chart's area and, under it, the strip of the
/// legend of `entries` (drawn there), so that the legend never hides data.
fn chart_area_and_legend<'a>(
    root: &DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>,
    entries: &[(String, Swatch)],
) -> Result<DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>, PlotError> {
    let legend = Legend::layout(root, entries)?;
    if legend.height == 0 {
        return Ok(root.clone());
    }
    let (chart, strip) = root.split_vertically(HEIGHT - legend.height);
    legend.draw(&strip)?;
    Ok(chart)
}

/// Legend entries of line series.
fn line_entries(series: &[Series]) -> Vec<(String, Swatch)> {
    series
        .iter()
        .enumerate()
        .map(|(i, s)| (s.label.clone(), Swatch::Line(i)))
        .collect()
}

/// Draws x tick marks, grid lines and labels at custom positions (the
/// chart's own x labels are off). `labels` pairs a data x with its text.
fn draw_x_ticks<'a, Y>(
    root: &DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>,
    chart: &mut ChartContext<'a, BitMapBackend<'a>, Cartesian2d<RangedCoordf64, Y>>,
    labels: &[(f64, String)],
) -> Result<(), PlotError>
where
    Y: Ranged<ValueType = f64>,
{
    let x_range = chart.x_range();
    let y_range = chart.y_range();
    let style = text_style(14, HPos::Center, VPos::Top);
    for (x, text) in labels {
        if !x.is_finite() || *x < x_range.start || *x > x_range.end {
            continue;
        }
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(*x, y_range.start), (*x, y_range.end)],
                BLACK.mix(0.1),
            )))
            .map_err(plot_err)?;
        let (px, py) = chart.backend_coord(&(*x, y_range.start));
        root.draw(&PathElement::new(vec![(px, py), (px, py + 5)], BLACK))
            .map_err(plot_err)?;
        root.draw(&Text::new(text.clone(), (px, py + 8), style.clone()))
            .map_err(plot_err)?;
    }
    Ok(())
}

/// The x-axis title of [`slowdown_plot`]: the ticks are message sizes,
/// placed by the share of messages up to that size.
pub const SIZE_AXIS_LABEL: &str =
    "Message size (spaced by share of messages: equal distances hold equal numbers of messages)";

/// The thesis' slowdown plot: x is the percentile of messages ordered by
/// size (0..100, linear), labelled with the sizes in `x_ticks` (position in
/// percent, text, e.g. from [`crate::table::fmt_size`]) and titled
/// [`SIZE_AXIS_LABEL`]; y is the slowdown on a log axis from 1 to 1.3× the
/// largest value (at least 1..10; from 0.1 if some value is below 1).
/// One line with point markers per series, the legend in rows under the
/// chart (never over the data), 1000×600 pixels.
pub fn slowdown_plot(
    path: &Path,
    title: &str,
    y_label: &str,
    series: &[Series],
    x_ticks: &[(f64, String)],
) -> Result<(), PlotError> {
    ensure_font()?;
    ensure_parent(path)?;
    let ys = || {
        series
            .iter()
            .flat_map(|s| finite_points(s, true))
            .map(|p| p.1)
    };
    let y_max = (ys().fold(1.0_f64, f64::max) * 1.3).max(10.0);
    let y_min = power_of_ten_below(ys().fold(1.0_f64, f64::min));

    let root = BitMapBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let area = chart_area_and_legend(&root, &line_entries(series))?;
    let mut chart = build_chart(&area, title, 0f64..100f64, (y_min..y_max).log_scale())?;
    chart
        .configure_mesh()
        .x_labels(0)
        .disable_x_mesh()
        .y_labels(12)
        .y_label_formatter(&|v| fmt_log_axis(*v))
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 16))
        .x_desc(SIZE_AXIS_LABEL)
        .y_desc(y_label)
        .light_line_style(BLACK.mix(0.04))
        .bold_line_style(BLACK.mix(0.12))
        .draw()
        .map_err(plot_err)?;
    draw_x_ticks(&root, &mut chart, x_ticks)?;
    draw_lines(&mut chart, series, true)?;
    root.present().map_err(plot_err)?;
    Ok(())
}

/// A grouped bar chart: one group of bars per entry of `groups` (its name
/// under the group), one bar per `(series name, value)` in it. Bars of the
/// same series name share a color across groups and get one legend entry.
/// y runs from 0 to 1.15× the largest value; each bar is labelled with its
/// value.
pub fn bar_plot(
    path: &Path,
    title: &str,
    y_label: &str,
    groups: &[(String, Vec<(String, f64)>)],
) -> Result<(), PlotError> {
    ensure_font()?;
    ensure_parent(path)?;
    // Series names in order of first appearance.
    let mut names: Vec<&str> = Vec::new();
    for (_, bars) in groups {
        for (name, _) in bars {
            if !names.contains(&name.as_str()) {
                names.push(name);
            }
        }
    }
    let max = groups
        .iter()
        .flat_map(|(_, bars)| bars.iter().map(|b| b.1))
        .filter(|v| v.is_finite())
        .fold(0.0_f64, f64::max);
    let y_max = if max > 0.0 { max * 1.15 } else { 1.0 };
    let n_groups = groups.len().max(1) as f64;

    let root = BitMapBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let entries: Vec<(String, Swatch)> = names
        .iter()
        .enumerate()
        .map(|(k, n)| (n.to_string(), Swatch::Bar(k)))
        .collect();
    let area = chart_area_and_legend(&root, &entries)?;
    let mut chart = build_chart(&area, title, 0f64..n_groups, 0f64..y_max)?;
    chart
        .configure_mesh()
        .x_labels(0)
        .disable_x_mesh()
        .y_label_formatter(&|v| fmt_axis(*v))
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 16))
        .y_desc(y_label)
        .light_line_style(BLACK.mix(0.04))
        .bold_line_style(BLACK.mix(0.12))
        .draw()
        .map_err(plot_err)?;

    // Group labels at the group centers, without grid lines.
    let label_style = text_style(15, HPos::Center, VPos::Top);
    for (g, (name, _)) in groups.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(g as f64 + 0.5, 0.0));
        root.draw(&Text::new(name.clone(), (px, py + 8), label_style.clone()))
            .map_err(plot_err)?;
    }

    // Each group spans one unit; its bars share the middle 80%.
    let value_style = text_style(12, HPos::Center, VPos::Bottom);
    for (k, name) in names.iter().enumerate() {
        let color = series_color(k);
        let mut rects = Vec::new();
        let mut texts = Vec::new();
        for (g, (_, bars)) in groups.iter().enumerate() {
            let present: Vec<&(String, f64)> = bars.iter().collect();
            let width = 0.8 / present.len().max(1) as f64;
            for (j, (bar_name, value)) in present.iter().enumerate() {
                if bar_name != name || !value.is_finite() {
                    continue;
                }
                let x0 = g as f64 + 0.1 + j as f64 * width;
                let x1 = x0 + width * 0.92;
                let v = value.max(0.0);
                rects.push(Rectangle::new([(x0, 0.0), (x1, v)], color.filled()));
                texts.push(((x0 + x1) / 2.0, v, fmt_axis(*value)));
            }
        }
        chart.draw_series(rects).map_err(plot_err)?;
        for (x, y, text) in texts {
            let (px, py) = chart.backend_coord(&(x, y));
            root.draw(&Text::new(text, (px, py - 3), value_style.clone()))
                .map_err(plot_err)?;
        }
    }
    root.present().map_err(plot_err)?;
    Ok(())
}

/// A generic line plot (e.g. p99 slowdown vs overcommitment level): linear
/// x axis spanning the data with a little margin, y linear from
/// min(0, smallest value) or, with `log_y`, logarithmic from the power of
/// ten below the (positive) data to 1.3× its largest value. One line with point markers per series, the legend under the chart;
/// 1000×600 pixels.
pub fn line_plot(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    log_y: bool,
) -> Result<(), PlotError> {
    ensure_font()?;
    ensure_parent(path)?;
    let points: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|s| finite_points(s, log_y))
        .collect();
    let (x_lo, x_hi) = span(points.iter().map(|p| p.0)).unwrap_or((0.0, 1.0));
    let x_pad = if x_hi > x_lo {
        (x_hi - x_lo) * 0.05
    } else {
        1.0
    };
    let x_range = (x_lo - x_pad)..(x_hi + x_pad);
    let (y_lo, y_hi) = span(points.iter().map(|p| p.1)).unwrap_or((0.0, 1.0));

    let root = BitMapBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let area = chart_area_and_legend(&root, &line_entries(series))?;
    if log_y {
        let (lo, hi) = if points.is_empty() {
            (1.0, 10.0)
        } else {
            (
                power_of_ten_below(y_lo / 1.05),
                (y_hi * 1.3).max(y_lo * 2.0),
            )
        };
        let chart = build_chart(&area, title, x_range, (lo..hi).log_scale())?;
        finish_line_plot(&root, chart, x_label, y_label, series, true)
    } else {
        let lo = y_lo.min(0.0);
        let hi = if y_hi > lo {
            y_hi + (y_hi - lo) * 0.1
        } else {
            lo + 1.0
        };
        let chart = build_chart(&area, title, x_range, lo..hi)?;
        finish_line_plot(&root, chart, x_label, y_label, series, false)
    }
}

/// Smallest and largest of the values, if any.
fn span(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    values.fold(None, |acc, v| match acc {
        None => Some((v, v)),
        Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
    })
}

type Chart<'a, Y> = ChartContext<'a, BitMapBackend<'a>, Cartesian2d<RangedCoordf64, Y>>;

/// A 1000×600 chart with the title on top, linear x over `x_range` and
/// the y coordinate `y`.
fn build_chart<'a, Y>(
    root: &DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>,
    title: &str,
    x_range: std::ops::Range<f64>,
    y: Y,
) -> Result<Chart<'a, Y::CoordDescType>, PlotError>
where
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    ChartBuilder::on(root)
        .caption(title, (FAMILY, 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d(x_range, y)
        .map_err(plot_err)
}

fn finish_line_plot<'a, Y>(
    root: &DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>,
    mut chart: Chart<'a, Y>,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    log_y: bool,
) -> Result<(), PlotError>
where
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    chart
        .configure_mesh()
        .x_label_formatter(&|v| fmt_axis(*v))
        .y_label_formatter(if log_y {
            &|v| fmt_log_axis(*v)
        } else {
            &|v| fmt_axis(*v)
        })
        .y_labels(if log_y { 12 } else { 10 })
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 16))
        .x_desc(x_label)
        .y_desc(y_label)
        .light_line_style(BLACK.mix(0.04))
        .bold_line_style(BLACK.mix(0.12))
        .draw()
        .map_err(plot_err)?;
    draw_lines(&mut chart, series, log_y)?;
    root.present().map_err(plot_err)?;
    Ok(())
}

#[cfg(test)]
mod tests;
