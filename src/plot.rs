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

/// One named series of (x, y) points.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// Draws `series` as lines into a PNG at `path` (written atomically).
pub fn line_plot(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
) -> Result<()> {
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
    let tmp = path.with_extension("tmp.png");
    let text = font_available();
    {
        let root = BitMapBackend::new(&tmp, (900, 560)).into_drawing_area();
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
            mesh.x_desc(x_label).y_desc(y_label);
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
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .label_font(("sans-serif", 16))
                .draw()
                .map_err(|e| draw_err(e.to_string()))?;
        }
        root.present().map_err(|e| draw_err(e.to_string()))?;
    }
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
}
