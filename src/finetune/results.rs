//! The results of a fine-tuning run: per task the dev scores of every seed, their mean,
//! standard deviation and median beside the dev set's baselines, and the seeds that were
//! degenerate, written as `results.json` and `results.md` (the layout of the paper's Table 2
//! for GLUE, Table 3 for SQuAD).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::Result;
use crate::finetune::recipe::FinetuneOptions;
use crate::finetune::scores::Scores;
use crate::tasks::task::Task;

/// Mean, sample standard deviation and median of one metric over seeds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub mean: f64,
    pub std: f64,
    pub median: f64,
}

pub fn summary(values: &[f64]) -> Summary {
    if values.is_empty() {
        return Summary {
            mean: f64::NAN,
            std: f64::NAN,
            median: f64::NAN,
        };
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let std = if values.len() > 1 {
        (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
    } else {
        0.0
    };
    let mut s = values.to_vec();
    s.sort_by(f64::total_cmp);
    let median = if s.len() % 2 == 1 {
        s[s.len() / 2]
    } else {
        (s[s.len() / 2 - 1] + s[s.len() / 2]) / 2.0
    };
    Summary { mean, std, median }
}

/// Per task: the dev scores of every seed and their summaries.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TaskResult {
    /// GLUE's folder name (`RTE`, `STS-B`, …) or `SQuAD`.
    pub task: String,
    pub seeds: Vec<u64>,
    pub per_seed: Vec<Scores>,
    /// The task score (GLUE: the mean of the task's metrics; SQuAD: F1) over seeds.
    pub score: Summary,
    /// Each metric over seeds.
    pub metrics: BTreeMap<String, Summary>,
    pub train_examples_per_s: f64,
    pub eval_examples_per_s: f64,
    /// The recipe and every hyperparameter the run used.
    #[serde(default)]
    pub options: Option<FinetuneOptions>,
    /// How many examples it trained and was scored on.
    #[serde(default)]
    pub examples: Option<ExampleCounts>,
    /// The pre-trained encoder it started from.
    #[serde(default)]
    pub model: Option<crate::finetune::pretrained::Provenance>,
    /// The trueneg version that wrote it.
    #[serde(default)]
    pub trueneg_version: Option<String>,
    /// The dev set's baselines (every seed is scored on the same labels; none for SQuAD).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baselines: Option<crate::finetune::scores::Baselines>,
    /// Seeds whose model collapsed to one class (or one score).
    #[serde(default)]
    pub one_class_seeds: usize,
    /// Seeds whose task score is not above the majority-class baseline.
    #[serde(default)]
    pub not_above_majority_seeds: usize,
}

/// The examples of one fine-tuning run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ExampleCounts {
    /// Labelled training examples used (SQuAD: questions).
    pub train: usize,
    /// Rows trained on per epoch: the examples, and their swapped pairs where both orders are
    /// used (SQuAD: questions; each gives one window or more).
    pub train_rows: usize,
    /// Dev examples scored, over every dev file.
    pub dev: usize,
}

impl TaskResult {
    /// How many seeds were degenerate, in words ("1 of 3 seeds predicted one class; 2 of 3 did
    /// not beat the majority class"); none when no seed was.
    pub fn degenerate_seeds(&self) -> Option<String> {
        let n = self.seeds.len();
        (self.one_class_seeds > 0 || self.not_above_majority_seeds > 0).then(|| {
            format!(
                "{} of {n} seeds predicted one class; {} of {n} did not beat the majority class",
                self.one_class_seeds, self.not_above_majority_seeds
            )
        })
    }

    pub(crate) fn new(task: &str, seeds: &[u64], per_seed: Vec<Scores>, rates: (f64, f64)) -> Self {
        let mut metrics = BTreeMap::new();
        for name in per_seed.iter().flat_map(|s| s.metrics.keys()) {
            let v: Vec<f64> = per_seed
                .iter()
                .filter_map(|s| s.metrics.get(name).copied())
                .collect();
            metrics.insert(name.clone(), summary(&v));
        }
        Self {
            task: task.to_string(),
            seeds: seeds.to_vec(),
            score: summary(&per_seed.iter().map(|s| s.score).collect::<Vec<_>>()),
            baselines: per_seed.first().and_then(|s| s.baselines.clone()),
            one_class_seeds: per_seed.iter().filter(|s| s.collapsed.is_some()).count(),
            not_above_majority_seeds: per_seed.iter().filter(|s| s.not_above_majority()).count(),
            per_seed,
            metrics,
            train_examples_per_s: rates.0,
            eval_examples_per_s: rates.1,
            options: None,
            examples: None,
            model: None,
            trueneg_version: Some(env!("CARGO_PKG_VERSION").to_string()),
        }
    }
}

fn cell(s: &Summary) -> String {
    format!("{:.1} ± {:.1} ({:.1})", s.mean, s.std, s.median)
}

/// Markdown tables: GLUE tasks side by side with their average (the paper's Table 2; mean ±
/// std over seeds, median in brackets), SQuAD as EM / F1 (Table 3).
pub fn results_table(results: &[TaskResult]) -> String {
    let mut out = String::new();
    let glue: Vec<&TaskResult> = results
        .iter()
        .filter(|r| r.task != Task::Squad.display_name())
        .collect();
    if !glue.is_empty() {
        let mut head = String::from("| model |");
        let mut sep = String::from("|---|");
        let mut row = String::from("| trueneg |");
        for r in &glue {
            head += &format!(" {} |", r.task);
            sep += "---:|";
            row += &format!(" {} |", cell(&r.score));
        }
        if glue.len() > 1 {
            let avg = glue.iter().map(|r| r.score.mean).sum::<f64>() / glue.len() as f64;
            head += " Avg |";
            sep += "---:|";
            row += &format!(" {avg:.1} |");
        }
        out += &format!("{head}\n{sep}\n{row}\n");
        out += &baseline_row(&glue, "majority class", |b| b.majority);
        out += &baseline_row(&glue, "chance", |b| b.chance);
    }
    for r in results
        .iter()
        .filter(|r| r.task == Task::Squad.display_name())
    {
        let get = |k: &str| r.metrics.get(k).copied().unwrap_or_default();
        out += &format!(
            "| model | SQuAD v1.1 EM | SQuAD v1.1 F1 |\n|---|---:|---:|\n| trueneg | {} | {} |\n",
            cell(&get("em")),
            cell(&get("f1"))
        );
    }
    out
}

/// A table row of one baseline under the models' row (blank cells where a task has none).
fn baseline_row(
    results: &[&TaskResult],
    name: &str,
    value: fn(&crate::finetune::scores::Baselines) -> f64,
) -> String {
    if results.iter().all(|r| r.baselines.is_none()) {
        return String::new();
    }
    let mut row = format!("| {name} |");
    for r in results {
        match &r.baselines {
            Some(b) => row += &format!(" {:.1} |", value(b)),
            None => row += " |",
        }
    }
    if results.len() > 1 {
        row += " |";
    }
    row + "\n"
}

/// The warnings of a task's seeds, a line each, then how many seeds were degenerate.
pub fn warnings(result: &TaskResult) -> Vec<String> {
    let mut lines = Vec::new();
    for (seed, s) in result.seeds.iter().zip(&result.per_seed) {
        for why in s.warnings() {
            lines.push(format!("Warning, {} seed {seed}: {why}.", result.task));
        }
    }
    lines.extend(
        result
            .degenerate_seeds()
            .map(|d| format!("{}: {d}.", result.task)),
    );
    lines
}

/// Writes `results.json` and `results.md` into `out`.
pub fn write_results(out: &Path, result: &TaskResult) -> Result<String> {
    let mut md = results_table(std::slice::from_ref(result));
    for line in warnings(result) {
        md += &format!("\n{line}\n");
    }
    crate::io::write::folder(out)?;
    crate::io::write_atomic(&out.join("results.md"), md.as_bytes())?;
    crate::io::write_json(&out.join("results.json"), result)?;
    Ok(md)
}
