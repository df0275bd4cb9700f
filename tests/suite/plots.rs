//! Plots fit for a paper draft: SVG beside PNG, an objective's colour the same in every plot,
//! series of one colour (or on top of each other) told apart by dashes and markers, readable
//! axis names, a flat series on a sane axis.

use std::path::Path;

use trueneg::objective::ObjectiveKind;
use trueneg::plot::{Series, line_plot, metric_label};

/// A series of objective `group` (its config name), in that objective's colour.
fn series(name: &str, group: &str, ys: &[f64]) -> Series {
    Series {
        name: name.into(),
        points: ys.iter().enumerate().map(|(i, &y)| (i as f64, y)).collect(),
        group: Some(group.into()),
        colour: ObjectiveKind::parse(group).map(|k| k.colour()),
    }
}

/// The stroke colours of an SVG's data lines (not the black axes and ticks), in order.
fn strokes(svg: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(svg).unwrap();
    text.split("<polyline")
        .skip(1)
        .filter_map(|p| {
            let at = p.find("stroke=\"")? + 8;
            Some(p[at..at + 7].to_string())
        })
        .filter(|c| c != "#000000")
        .collect()
}

#[test]
fn an_objective_keeps_its_colour_and_overlapping_series_stay_apart() {
    let dir = tempfile::tempdir().unwrap();
    let ys = [5.0, 4.0, 3.5, 3.2, 3.0, 2.9, 2.8, 2.8, 2.7, 2.7, 2.6, 2.6];
    let both = dir.path().join("both.svg");
    let runs = [
        series("base seed 1", "baseline", &ys),
        series("hc seed 1", "hc", &ys),
        series("hc seed 2", "hc", &ys),
    ];
    line_plot(&both, "t", "training step", "loss", &runs, false).unwrap();
    let alone = dir.path().join("alone.svg");
    line_plot(&alone, "t", "training step", "loss", &runs[1..2], false).unwrap();
    let (s, a) = (strokes(&both), strokes(&alone));
    assert!(!a.is_empty(), "no lines in the SVG");
    // Hard Correction's colour (the registry's) does not depend on its place in the list.
    let hc = &a[0];
    // The baseline is drawn first, in a colour of its own; both Hard Correction runs in the
    // colour Hard Correction has alone.
    let base = &s[0];
    assert_ne!(base, hc, "{s:?}");
    assert!(s.iter().all(|c| c == base || c == hc), "{s:?}");
    // The second Hard Correction run (same values, same colour) is dashed: drawn as many
    // short pieces, so its colour has many more lines than the solid baseline.
    let pieces = |c: &String| s.iter().filter(|x| *x == c).count();
    assert!(pieces(hc) > 4 * pieces(base), "{s:?}");
    let png = dir.path().join("both.png");
    line_plot(&png, "t", "training step", "loss", &runs, false).unwrap();
    assert_eq!(&std::fs::read(&png).unwrap()[1..4], b"PNG");
}

#[test]
fn a_flat_series_gets_an_axis_and_axes_read_as_words() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("flat.svg");
    let zeros = [series("corrected", "hc", &[0.0; 8])];
    line_plot(&svg, "t", "training step", "corrected (%)", &zeros, false).unwrap();
    let text = std::fs::read_to_string(&svg).unwrap();
    if Path::new("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf").exists() {
        assert!(text.contains("corrected (%)") && text.contains("training step"));
        // Ticks around zero at a readable step, not 1e-6 apart.
        assert!(
            text.contains("\n0.4\n") && text.contains("\n-0.5\n"),
            "{text}"
        );
        assert!(!text.contains("0.000001"));
    }
    assert_eq!(
        metric_label("eval_mlm_loss", &trueneg::objective::term_labels()),
        "held-out masked-LM loss (generator's for ELECTRA)"
    );
    assert_eq!(
        metric_label("disc_accuracy", &trueneg::objective::term_labels()),
        "discriminator accuracy"
    );
    assert_eq!(
        metric_label("sentence_sr_loss", &trueneg::objective::term_labels()),
        "sentence sr loss"
    );
}
