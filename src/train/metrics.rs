//! One line of a run's `metrics.jsonl`: the step's loss, every logged value by name, the
//! learning rate, the gradient norm, the window's counts and the throughput; the readers of a
//! run's step lines (the records of work between steps left out), its series and its loss
//! plot.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

/// One line of `metrics.jsonl`.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize, PartialEq)]
pub struct StepMetrics {
    pub step: u64,
    pub loss: f64,
    /// Every value the step and the objective log, by name: loss terms before their weights
    /// (`mlm_loss`, `disc_loss`, each objective's own), rates (`disc_accuracy`), and the
    /// objective's counts of the window; see `crate::objective`.
    #[serde(flatten)]
    pub terms: BTreeMap<String, serde_json::Value>,
    pub lr: f64,
    pub grad_norm: f64,
    /// Masked positions. This and the objective's counts are totals over the steps since the
    /// previous line (the step itself with `train.log_every = 1`), so that a count over
    /// `masked` is a rate over the same positions.
    pub masked: usize,
    pub tokens_per_s: f64,
}

impl StepMetrics {
    /// The logged value `name` (`mlm_loss`, `disc_loss`, …), when the run logs it.
    pub fn value(&self, name: &str) -> Option<f64> {
        self.terms.get(name).and_then(serde_json::Value::as_f64)
    }

    /// The logged vector `name` (the weights of a step's terms).
    pub fn vector(&self, name: &str) -> Option<Vec<f64>> {
        let v = self.terms.get(name)?.as_array()?;
        v.iter().map(serde_json::Value::as_f64).collect()
    }

    /// The masked-LM loss (BERT's MLM, ELECTRA's generator), which every run logs.
    pub fn mlm_loss(&self) -> f64 {
        self.value(crate::objective::mlm::LOSS).unwrap_or(f64::NAN)
    }

    /// `{sep}disc 0.1234` for every logged loss term but `mlm_loss` (its name without
    /// `_loss`), for progress lines and summaries.
    pub fn other_losses(&self, sep: &str) -> String {
        self.terms
            .iter()
            .filter(|(k, _)| k.ends_with("_loss") && k.as_str() != "mlm_loss")
            .filter_map(|(k, v)| {
                Some(format!(
                    "{sep}{} {:.4}",
                    k.trim_end_matches("_loss"),
                    v.as_f64()?
                ))
            })
            .collect()
    }
}

/// The lines of `run`'s `metrics.jsonl` that parse, in order; none when it cannot be read.
pub fn read_metrics(run: &Path) -> Vec<StepMetrics> {
    crate::io::read::read_text(&run.join(super::start::METRICS), crate::io::limit::DATA)
        .map(|text| {
            text.lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The held-out evaluations on `run`'s lines (`eval_loss`, `train.eval_every`): the best
/// (lowest) and the last, each as (step, loss); `None` when the run has none.
pub fn eval_losses(run: &Path) -> Option<((u64, f64), (u64, f64))> {
    let evals: Vec<(u64, f64)> = read_metrics(run)
        .iter()
        .filter_map(|m| Some((m.step, m.value("eval_loss")?)))
        .collect();
    let last = *evals.last()?;
    let best = evals.iter().copied().min_by(|a, b| a.1.total_cmp(&b.1))?;
    Some((best, last))
}

/// The points (step, `metric`) of a run's `metrics.jsonl`, named after the run's folder; `None`
/// when no line has the field.
pub fn metric_series(run: &Path, metric: &str) -> crate::Result<Option<crate::plot::Series>> {
    let points: Vec<(f64, f64)> = step_lines(run)?
        .iter()
        .filter_map(|v| Some((v.get("step")?.as_f64()?, v.get(metric)?.as_f64()?)))
        .collect();
    Ok((!points.is_empty()).then(|| crate::plot::Series {
        name: run
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default(),
        points,
        group: run_objective(run),
        colour: None,
    }))
}

/// The objective of a run (`[objective] kind` of its `config.toml`), when it can be read.
fn run_objective(run: &Path) -> Option<String> {
    let text =
        crate::io::read::read_text(&run.join("config.toml"), crate::io::limit::SMALL).ok()?;
    let table: toml::Table = toml::from_str(&text).ok()?;
    Some(table.get("objective")?.get("kind")?.as_str()?.to_string())
}

/// The loss fields of a run's `metrics.jsonl`: `loss`, then every `*_loss` field its lines carry,
/// in order of name.
fn loss_fields(run: &Path) -> crate::Result<Vec<String>> {
    let mut names = std::collections::BTreeSet::new();
    for m in step_lines(run)? {
        names.extend(m.keys().filter(|k| k.ends_with("_loss")).cloned());
    }
    Ok(std::iter::once("loss".to_string()).chain(names).collect())
}

/// The step lines of a run's `metrics.jsonl`, the records of work between steps (`"record":
/// …`) left out; a line that is not a JSON object is an error naming it.
pub fn step_lines(run: &Path) -> crate::Result<Vec<serde_json::Map<String, serde_json::Value>>> {
    let path = run.join("metrics.jsonl");
    let text = crate::io::read::read_text(&path, crate::io::limit::DATA)?;
    let mut out = Vec::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let v: serde_json::Map<String, serde_json::Value> = serde_json::from_str(line)
            .map_err(|e| crate::Error::Input(format!("{}:{}: {e}", path.display(), i + 1)))?;
        if !v.contains_key("record") {
            out.push(v);
        }
    }
    Ok(out)
}

/// `<run>/loss.png` and `loss.svg`: every loss term of a run's `metrics.jsonl` over the steps
/// (log scale: the weighted total and the discriminator's term differ by orders of magnitude);
/// a held-out term has its training term's colour, dashed; terms named by `terms` (see
/// [`crate::plot::metric_label`]).
pub fn run_loss_plot(run: &Path, terms: &[(&str, &str)]) -> crate::Result<std::path::PathBuf> {
    let mut series = Vec::new();
    let mut fields = loss_fields(run)?;
    // Each held-out term right after its training term (solid, then dashed).
    fields.sort_by_key(|f| {
        let term = f.trim_start_matches("eval_");
        (term != "loss", term.to_string(), f.starts_with("eval_"))
    });
    for m in fields {
        let m = m.as_str();
        if let Some(mut s) = metric_series(run, m)? {
            s.name = crate::plot::metric_label(m, terms);
            s.group = Some(m.trim_start_matches("eval_").to_string());
            series.push(s);
        }
    }
    let out = run.join("loss.png");
    for file in [out.clone(), run.join("loss.svg")] {
        crate::plot::line_plot(
            &file,
            "Pre-training losses",
            "training step",
            "loss",
            &series,
            true,
        )?;
    }
    Ok(out)
}
