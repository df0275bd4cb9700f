//! PNG line plots (plotters): loss curves side by side, correction rates over training.
//! Text is drawn with DejaVu Sans (Debian's `fonts-dejavu-core`) when it is installed; without
//! it the plot is drawn without labels.

use std::path::Path;
use std::sync::Once;

use plotters::prelude::*;

use crate::{Error, Result};

const FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

fn font_available() -> bool {
    static INIT: Once = Once::new();
    static mut OK: bool = false;
    INIT.call_once(|| {
        if let Ok(bytes) = std::fs::read(FONT) {
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            let ok = plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok();
            // SAFETY: written once inside `call_once`, read only after it.
            unsafe { OK = ok };
        }
    });
    // SAFETY: see above.
    unsafe { OK }
}

type Chart<'a, 'b> = ChartContext<
    'a,
    BitMapBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// The series names in a box.
fn legend<'b>(chart: &mut Chart<'b, 'b>) -> std::result::Result<(), String> {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 16))
        .draw()
        .map_err(|e| e.to_string())
}

/// One named series of (x, y) points.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
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

/// Draws `series` as lines into a PNG at `path` (written atomically); `log_y` puts the y axis
/// on a log10 scale (non-positive values are left out).
pub fn line_plot(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    log_y: bool,
) -> Result<()> {
    if path.is_dir() {
        return Err(Error::Input(format!(
            "{}: is a folder; give a .png file name",
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
    let pad = ((y1 - y0) * 0.05).max(1e-6);
    let (y0, y1) = (y0 - pad, y1 + pad);
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
    let tmp = path.with_extension("tmp.png");
    let drawn = draw(
        &tmp,
        path,
        title,
        x_label,
        y_label,
        &series,
        (x0, x1, y0, y1),
        &x_fmt,
        &y_fmt,
    )
    .and_then(|()| std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e)));
    if drawn.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    drawn
}

#[allow(clippy::too_many_arguments)]
fn draw(
    tmp: &Path,
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    (x0, x1, y0, y1): (f64, f64, f64, f64),
    x_fmt: &dyn Fn(&f64) -> String,
    y_fmt: &dyn Fn(&f64) -> String,
) -> Result<()> {
    let text = font_available();
    {
        let root = BitMapBackend::new(tmp, (900, 560)).into_drawing_area();
        let draw_err =
            |e: String| Error::Input(format!("{}: drawing failed ({e})", path.display()));
        root.fill(&WHITE).map_err(|e| draw_err(e.to_string()))?;
        let mut builder = ChartBuilder::on(&root);
        builder
            .margin(16)
            .x_label_area_size(if text { 40 } else { 0 })
            .y_label_area_size(if text { 60 } else { 0 });
        if text {
            builder.caption(title, ("sans-serif", 22));
        }
        let mut chart = builder
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(|e| draw_err(e.to_string()))?;
        let mut mesh = chart.configure_mesh();
        if text {
            mesh.x_desc(x_label)
                .y_desc(y_label)
                .x_label_formatter(x_fmt)
                .y_label_formatter(y_fmt);
        } else {
            mesh.disable_x_axis().disable_y_axis();
        }
        mesh.draw().map_err(|e| draw_err(e.to_string()))?;
        for (i, s) in series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let line = chart
                .draw_series(LineSeries::new(
                    s.points.iter().copied(),
                    color.stroke_width(2),
                ))
                .map_err(|e| draw_err(e.to_string()))?;
            if text {
                line.label(s.name.clone()).legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
            }
        }
        if text {
            legend(&mut chart).map_err(|e| draw_err(e.to_string()))?;
        }
        root.present().map_err(|e| draw_err(e.to_string()))?;
    }
    Ok(())
}

/// The points (step, `metric`) of a run's `metrics.jsonl`, named after the run's folder; `None`
/// when no line has the field.
pub fn metric_series(run: &Path, metric: &str) -> Result<Option<Series>> {
    let path = run.join("metrics.jsonl");
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    let mut points = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let v: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| Error::Input(format!("{}:{}: {e}", path.display(), i + 1)))?;
        if let (Some(s), Some(y)) = (v["step"].as_f64(), v[metric].as_f64()) {
            points.push((s, y));
        }
    }
    Ok((!points.is_empty()).then(|| Series {
        name: run
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default(),
        points,
    }))
}

/// The loss fields of a run's `metrics.jsonl`: `loss`, then every `*_loss` field its lines carry,
/// in order of name.
fn loss_fields(run: &Path) -> Result<Vec<String>> {
    let path = run.join("metrics.jsonl");
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    let mut names = std::collections::BTreeSet::new();
    for line in text.lines() {
        if let Ok(serde_json::Value::Object(m)) = serde_json::from_str(line) {
            names.extend(m.keys().filter(|k| k.ends_with("_loss")).cloned());
        }
    }
    Ok(std::iter::once("loss".to_string()).chain(names).collect())
}

/// `<run>/loss.png`: every loss term of a run's `metrics.jsonl` over the steps (log scale: the
/// weighted total and the discriminator's term differ by orders of magnitude).
pub fn run_loss_plot(run: &Path) -> Result<std::path::PathBuf> {
    let mut series = Vec::new();
    for m in loss_fields(run)? {
        let m = m.as_str();
        if let Some(mut s) = metric_series(run, m)? {
            s.name = m.to_string();
            series.push(s);
        }
    }
    let out = run.join("loss.png");
    line_plot(
        &out,
        "Pre-training losses",
        "step",
        "loss (log scale)",
        &series,
        true,
    )?;
    Ok(out)
}

/// One named series of (mean, low, high) per category; `None` where it has no value.
pub struct IntervalSeries {
    pub name: String,
    pub points: Vec<Option<(f64, f64, f64)>>,
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
    let y_step = (y1 - y0) / 10.0;
    let tmp = path.with_extension("tmp.png");
    let text = font_available();
    let drawn = (|| -> Result<()> {
        let draw_err =
            |e: String| Error::Input(format!("{}: drawing failed ({e})", path.display()));
        let root = BitMapBackend::new(&tmp, (1100, 560)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| draw_err(e.to_string()))?;
        let mut builder = ChartBuilder::on(&root);
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
            .map_err(|e| draw_err(e.to_string()))?;
        let mut mesh = chart.configure_mesh();
        mesh.disable_x_mesh().disable_x_axis();
        let y_fmt = move |v: &f64| tick(*v, y_step);
        if text {
            mesh.y_desc(y_label).y_label_formatter(&y_fmt);
        } else {
            mesh.disable_y_axis();
        }
        mesh.draw().map_err(|e| draw_err(e.to_string()))?;
        if zero_line {
            chart
                .draw_series(LineSeries::new(
                    [(-0.5, 0.0), (n - 0.5, 0.0)],
                    BLACK.stroke_width(1),
                ))
                .map_err(|e| draw_err(e.to_string()))?;
        }
        let width = 0.7 / series.len().max(1) as f64;
        for (i, s) in series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let offset = -0.35 + width * (i as f64 + 0.5);
            let at = |c: usize| c as f64 + offset;
            let whiskers = s.points.iter().enumerate().filter_map(|(c, p)| {
                p.map(|(_, l, h)| {
                    PathElement::new(vec![(at(c), l), (at(c), h)], color.stroke_width(2))
                })
            });
            chart
                .draw_series(whiskers)
                .map_err(|e| draw_err(e.to_string()))?;
            let dots = chart
                .draw_series(s.points.iter().enumerate().filter_map(|(c, p)| {
                    p.map(|(m, _, _)| Circle::new((at(c), m), 4, color.filled()))
                }))
                .map_err(|e| draw_err(e.to_string()))?;
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
            chart
                .draw_series(labels)
                .map_err(|e| draw_err(e.to_string()))?;
            legend(&mut chart).map_err(|e| draw_err(e.to_string()))?;
        }
        root.present().map_err(|e| draw_err(e.to_string()))?;
        Ok(())
    })()
    .and_then(|()| std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e)));
    if drawn.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    drawn
}
