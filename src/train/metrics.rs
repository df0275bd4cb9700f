//! One line of a run's `metrics.jsonl`: the step's loss, every logged value by name, the
//! learning rate, the gradient norm, the window's counts and the throughput.

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
