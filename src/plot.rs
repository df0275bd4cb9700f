//! PNG line plots (plotters): loss curves side by side, correction rates over training.
//! Text is drawn with DejaVu Sans (Debian's `fonts-dejavu-core`) when it is installed; without
//! it the plot is drawn without labels.

use crate::io::PathQuery;
use std::path::Path;
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::{Error, Result};

const FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

fn font_available() -> bool {
    static INIT: Once = Once::new();
    static mut OK: bool = false;
    INIT.call_once(|| {
        if let Ok(bytes) = crate::io::read::read(Path::new(FONT), crate::io::limit::SMALL) {
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            let ok = plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok();
            // SAFETY: written once inside `call_once`, read only after it.
            unsafe { OK = ok };
        }
    });
    // SAFETY: see above.
    unsafe { OK }
}

/// The colour of series group `i` (Palette99's order).
fn color(i: usize) -> RGBAColor {
    Palette99::pick(i).to_rgba()
}

/// What decides a series' style: its group (series of one group share a colour) and the
/// colour its caller fixed (an objective's, the same in every plot).
struct Styled<'a> {
    group: &'a str,
    colour: Option<usize>,
}

/// (colour, rank within its colour) of each series: its fixed colour, else its group's, the
/// groups taking the colours no series of the plot fixed, in order of appearance; the rank
/// picks the dash pattern and the marker, so that series of one colour (or lying on top of
/// each other) stay apart.
fn styles(series: &[Styled]) -> Vec<(usize, usize)> {
    let fixed: Vec<usize> = series.iter().filter_map(|s| s.colour).collect();
    let mut free = (0..).filter(|c| !fixed.contains(c));
    let mut groups: Vec<(&str, usize)> = Vec::new();
    let mut count = std::collections::HashMap::<usize, usize>::new();
    series
        .iter()
        .map(|s| {
            let c = match s.colour {
                Some(c) => c,
                None => match groups.iter().find(|(g, _)| *g == s.group) {
                    Some(&(_, c)) => c,
                    None => {
                        let c = free.next().expect("an endless supply of colours");
                        groups.push((s.group, c));
                        c
                    }
                },
            };
            let rank = count.entry(c).or_default();
            *rank += 1;
            (c, *rank - 1)
        })
        .collect()
}

/// One named series of (x, y) points; series of one `group` (an objective's name, say) share
/// a colour and differ in dashes and markers. `colour` fixes the colour (an index into the
/// palette, e.g. `ObjectiveKind::colour`), so that an objective looks the same in every plot.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub group: Option<String>,
    pub colour: Option<usize>,
}

/// A tick label without a negative zero, with no more decimals than the tick step needs.
fn tick(v: f64, step: f64) -> String {
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10()).ceil() as usize
    };
    let s = format!("{v:.decimals$}");
    if s.trim_start_matches('-')
        .chars()
        .all(|c| c == '0' || c == '.')
    {
        s.trim_start_matches('-').to_string()
    } else {
        s
    }
}

/// What a reader calls a `metrics.jsonl` field on an axis: a term by `terms` (the objectives'
/// registry, `objective::term_labels`), the loop's own fields (`loss`, `lr`, …) here, `eval_…`
/// → "held-out …"; other fields as they are, `_` as spaces.
pub fn metric_label(field: &str, terms: &[(&str, &str)]) -> String {
    let (held_out, name) = match field.strip_prefix("eval_") {
        Some(rest) => ("held-out ", rest),
        None => ("", field),
    };
    let plain = match terms.iter().find(|(k, _)| *k == name) {
        Some((_, label)) => label.to_string(),
        None => match name {
            "loss" => "total loss".to_string(),
            "lr" => "learning rate".into(),
            "grad_norm" => "gradient norm (before clipping)".into(),
            "tokens_per_s" => "tokens per second".into(),
            other => other.replace('_', " "),
        },
    };
    format!("{held_out}{plain}")
}

/// The axis range of `lo..hi` with a margin; a flat series (all values equal, all zero say)
/// gets a range around its value instead of an empty one.
fn padded(lo: f64, hi: f64, log: bool) -> (f64, f64) {
    if hi - lo < 1e-12 {
        let d = if log { 0.5 } else { (lo.abs() * 0.1).max(0.5) };
        return (lo - d, hi + d);
    }
    let pad = (hi - lo) * 0.05;
    (lo - pad, hi + pad)
}

/// The share of a 560-pixel-high plot's data area that a legend of `rows` names takes at the
/// top, with its margins.
fn legend_share(rows: usize) -> f64 {
    ((rows as f64 * 21.0 + 20.0) / 460.0).min(0.6)
}

/// Draws `series` as lines into `path` (written atomically), an SVG file when its name ends in
/// `.svg`, else a PNG; `log_y` puts the y axis on a log10 scale (non-positive values are left
/// out). Series differ by colour (by group), dash pattern and marker.
pub fn line_plot(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    log_y: bool,
) -> Result<()> {
    if path.is_folder() {
        return Err(Error::Input(format!(
            "{}: is a folder; give a .png or .svg file name",
            path.display()
        )));
    }
    let series: Vec<Series> = series
        .iter()
        .map(|s| Series {
            name: s.name.clone(),
            points: s
                .points
                .iter()
                .filter(|(_, y)| !log_y || *y > 0.0)
                .map(|&(x, y)| (x, if log_y { y.log10() } else { y }))
                .collect(),
            group: s.group.clone(),
            colour: s.colour,
        })
        .collect();
    let pts = series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts.filter(|(x, y)| x.is_finite() && y.is_finite()) {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        return Err(Error::Input(format!("{}: nothing to plot", path.display())));
    }
    if x1 - x0 < 1e-12 {
        x1 = x0 + 1.0;
    }
    let (y0, mut y1) = padded(y0, y1, log_y);
    // Head room above the data for the legend, so that it covers no curve.
    if font_available() {
        let share = legend_share(series.len());
        y1 += (y1 - y0) * share / (1.0 - share);
    }
    let x_step = ((x1 - x0) / 10.0).max(1.0);
    let y_step = (y1 - y0) / 10.0;
    let x_fmt = move |v: &f64| tick(*v, x_step);
    let y_fmt = move |v: &f64| {
        if log_y {
            let real = 10f64.powf(*v);
            tick(real, real * y_step * std::f64::consts::LN_10)
        } else {
            tick(*v, y_step)
        }
    };
    let y_label = if log_y && !y_label.contains("log scale") {
        format!("{y_label} (log scale)")
    } else {
        y_label.to_string()
    };
    let plot = LinePlot {
        title,
        x_label,
        y_label: &y_label,
        series: &series,
        range: (x0, x1, y0, y1),
        x_fmt: &x_fmt,
        y_fmt: &y_fmt,
    };
    write_plot(
        path,
        (900, 560),
        |root, text| draw_lines(root, &plot, text),
        |root, text| draw_lines(root, &plot, text),
    )
}

/// Renders into `path` atomically ([`crate::io::write::produce`]): SVG when `path` ends in `.svg`
/// (`svg`), else PNG (`png`); each drawer is told whether text can be drawn (the font).
fn write_plot(
    path: &Path,
    size: (u32, u32),
    png: impl FnOnce(&DrawingArea<BitMapBackend, Shift>, bool) -> std::result::Result<(), String>,
    svg: impl FnOnce(&DrawingArea<SVGBackend, Shift>, bool) -> std::result::Result<(), String>,
) -> Result<()> {
    let is_svg = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("svg"));
    let text = font_available();
    crate::io::write::produce(path, |tmp| {
        let drawn = if is_svg {
            let root = SVGBackend::new(tmp, size).into_drawing_area();
            root.fill(&WHITE)
                .map_err(|e| e.to_string())
                .and_then(|()| svg(&root, text))
                .and_then(|()| root.present().map_err(|e| e.to_string()))
        } else {
            let root = BitMapBackend::new(tmp, size).into_drawing_area();
            root.fill(&WHITE)
                .map_err(|e| e.to_string())
                .and_then(|()| png(&root, text))
                .and_then(|()| root.present().map_err(|e| e.to_string()))
        };
        drawn.map_err(|e| Error::Input(format!("{}: drawing failed ({e})", path.display())))
    })
}

/// What [`line_plot`] draws.
struct LinePlot<'a> {
    title: &'a str,
    x_label: &'a str,
    y_label: &'a str,
    series: &'a [Series],
    range: (f64, f64, f64, f64),
    x_fmt: &'a dyn Fn(&f64) -> String,
    y_fmt: &'a dyn Fn(&f64) -> String,
}

/// The series names in a box at `corner`.
fn legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    corner: SeriesLabelPosition,
) -> std::result::Result<(), String> {
    chart
        .configure_series_labels()
        .position(corner)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 16))
        .draw()
        .map_err(|e| e.to_string())
}

fn draw_lines<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    p: &LinePlot,
    text: bool,
) -> std::result::Result<(), String> {
    let (x0, x1, y0, y1) = p.range;
    let mut builder = ChartBuilder::on(root);
    builder
        .margin(16)
        .x_label_area_size(if text { 40 } else { 0 })
        .y_label_area_size(if text { 70 } else { 0 });
    if text {
        builder.caption(p.title, ("sans-serif", 22));
    }
    let mut chart = builder
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(|e| e.to_string())?;
    let mut mesh = chart.configure_mesh();
    if text {
        mesh.x_desc(p.x_label)
            .y_desc(p.y_label)
            .x_label_formatter(p.x_fmt)
            .y_label_formatter(p.y_fmt);
    } else {
        mesh.disable_x_axis().disable_y_axis();
    }
    mesh.draw().map_err(|e| e.to_string())?;
    let groups: Vec<String> = (p.series.iter().enumerate())
        .map(|(i, s)| s.group.clone().unwrap_or_else(|| format!("series {i}")))
        .collect();
    let styled: Vec<Styled> = (p.series.iter().zip(&groups))
        .map(|(s, g)| Styled {
            group: g,
            colour: s.colour,
        })
        .collect();
    for (i, (s, (c, rank))) in p.series.iter().zip(styles(&styled)).enumerate() {
        let style = color(c).stroke_width(2);
        let pts = s.points.iter().copied();
        match rank % 3 {
            0 => chart.draw_series(LineSeries::new(pts, style)),
            1 => chart.draw_series(DashedLineSeries::new(pts, 12, 6, style)),
            _ => chart.draw_series(DashedLineSeries::new(pts, 3, 5, style)),
        }
        .map_err(|e| e.to_string())?;
        // About ten markers a series, shifted by its index so that lines on top of each other
        // still show every marker.
        let every = (s.points.len() / 10).max(1);
        let marks = s
            .points
            .iter()
            .skip(i * every / 3 % every)
            .step_by(every)
            .copied();
        let fill = color(c).filled();
        let anno = match i % 3 {
            0 => chart.draw_series(marks.map(|q| Circle::new(q, 4, fill))),
            1 => chart.draw_series(marks.map(|q| TriangleMarker::new(q, 5, fill))),
            _ => chart.draw_series(marks.map(|q| Cross::new(q, 4, style))),
        }
        .map_err(|e| e.to_string())?;
        if text {
            // The line's pattern in three pieces: solid, dashed or dotted.
            let pieces = match rank % 3 {
                0 => [(0, 8), (8, 16), (16, 24)],
                1 => [(0, 7), (10, 17), (20, 24)],
                _ => [(0, 2), (9, 11), (18, 20)],
            };
            anno.label(s.name.clone()).legend(move |(x, y)| {
                let piece = |(a, b): (i32, i32)| PathElement::new(vec![(a, 0), (b, 0)], style);
                EmptyElement::at((x, y))
                    + piece(pieces[0])
                    + piece(pieces[1])
                    + piece(pieces[2])
                    + Circle::new((12, 0), 3, fill)
            });
        }
    }
    if text {
        legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    }
    Ok(())
}

/// One named series of (mean, low, high) per category; `None` where it has no value. `colour`
/// as [`Series::colour`].
pub struct IntervalSeries {
    pub name: String,
    pub points: Vec<Option<(f64, f64, f64)>>,
    pub colour: Option<usize>,
}

/// The lowest and highest finite value of `series` (means and interval ends; 0 with
/// `zero_line`), `None` when there is none.
fn interval_range(series: &[IntervalSeries], zero_line: bool) -> Option<(f64, f64)> {
    let values = series
        .iter()
        .flat_map(|s| s.points.iter().flatten())
        .flat_map(|&(m, l, h)| [m, l, h])
        .filter(|v| v.is_finite());
    let (mut y0, mut y1) = (f64::MAX, f64::MIN);
    for v in values.chain(zero_line.then_some(0.0)) {
        y0 = y0.min(v);
        y1 = y1.max(v);
    }
    (y0 <= y1).then_some((y0, y1))
}

/// Draws each category's intervals side by side (a dot at the mean, a whisker from low to
/// high, one colour per series) into a PNG at `path`; `zero_line` draws y = 0.
pub fn interval_plot(
    path: &Path,
    title: &str,
    y_label: &str,
    categories: &[String],
    series: &[IntervalSeries],
    zero_line: bool,
) -> Result<()> {
    let Some((y0, y1)) = interval_range(series, zero_line).filter(|_| !categories.is_empty())
    else {
        return Err(Error::Input(format!("{}: nothing to plot", path.display())));
    };
    let pad = ((y1 - y0) * 0.08).max(1e-3);
    // Room under the data for the category names (up to three lines).
    let (y0, y1) = (y0 - 2.4 * pad, y1 + pad);
    let plot = IntervalPlot {
        title,
        y_label,
        categories,
        series,
        zero_line,
        range: (y0, y1),
        pad,
    };
    write_plot(
        path,
        (1100, 560),
        |root, text| draw_intervals(root, &plot, text),
        |root, text| draw_intervals(root, &plot, text),
    )
}

/// What [`interval_plot`] draws.
struct IntervalPlot<'a> {
    title: &'a str,
    y_label: &'a str,
    categories: &'a [String],
    series: &'a [IntervalSeries],
    zero_line: bool,
    range: (f64, f64),
    pad: f64,
}

fn draw_intervals<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    p: &IntervalPlot,
    text: bool,
) -> std::result::Result<(), String> {
    let (title, y_label, categories, series, zero_line, pad) = (
        p.title,
        p.y_label,
        p.categories,
        p.series,
        p.zero_line,
        p.pad,
    );
    let (y0, y1) = p.range;
    let y_step = (y1 - y0) / 10.0;
    let mut builder = ChartBuilder::on(root);
    builder
        .margin(16)
        .x_label_area_size(0)
        .y_label_area_size(if text { 60 } else { 0 });
    if text {
        builder.caption(title, ("sans-serif", 22));
    }
    let n = categories.len() as f64;
    let mut chart = builder
        .build_cartesian_2d(-0.5..n - 0.5, y0..y1)
        .map_err(|e| e.to_string())?;
    let mut mesh = chart.configure_mesh();
    mesh.disable_x_mesh().disable_x_axis();
    let y_fmt = move |v: &f64| tick(*v, y_step);
    if text {
        mesh.y_desc(y_label).y_label_formatter(&y_fmt);
    } else {
        mesh.disable_y_axis();
    }
    mesh.draw().map_err(|e| e.to_string())?;
    if zero_line {
        chart
            .draw_series(LineSeries::new(
                [(-0.5, 0.0), (n - 0.5, 0.0)],
                BLACK.stroke_width(1),
            ))
            .map_err(|e| e.to_string())?;
    }
    let width = 0.7 / series.len().max(1) as f64;
    // An objective's colour is the one it has in the report's other plots.
    let styled: Vec<Styled> = (series.iter())
        .map(|s| Styled {
            group: &s.name,
            colour: s.colour,
        })
        .collect();
    for (i, (s, (c, _))) in series.iter().zip(styles(&styled)).enumerate() {
        let color = color(c);
        let offset = -0.35 + width * (i as f64 + 0.5);
        let at = |c: usize| c as f64 + offset;
        let whiskers = s.points.iter().enumerate().filter_map(|(c, p)| {
            p.map(|(_, l, h)| PathElement::new(vec![(at(c), l), (at(c), h)], color.stroke_width(2)))
        });
        chart.draw_series(whiskers).map_err(|e| e.to_string())?;
        let dots =
            chart
                .draw_series(s.points.iter().enumerate().filter_map(|(c, p)| {
                    p.map(|(m, _, _)| Circle::new((at(c), m), 4, color.filled()))
                }))
                .map_err(|e| e.to_string())?;
        if text {
            dots.label(s.name.clone())
                .legend(move |(x, y)| Circle::new((x + 10, y), 4, color.filled()));
        }
    }
    if text {
        // Long names one word a line.
        let labels = categories.iter().enumerate().flat_map(|(c, name)| {
            let lines: Vec<String> = if name.len() > 12 {
                name.split(' ').map(String::from).collect()
            } else {
                vec![name.clone()]
            };
            let n_lines = lines.len();
            lines.into_iter().enumerate().map(move |(i, line)| {
                let y = y0 + pad * (0.4 + 0.7 * (n_lines - 1 - i) as f64);
                Text::new(line, (c as f64 - 0.4, y), ("sans-serif", 13).into_font())
            })
        });
        chart.draw_series(labels).map_err(|e| e.to_string())?;
        legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    }
    Ok(())
}
