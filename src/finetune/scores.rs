//! A fine-tuned classifier's scores: each task's metrics on predictions and gold labels, and
//! the refusals that keep a reported figure meaningful (no example, an unlabelled row, a
//! non-finite prediction, a metric undefined on the gold labels).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::tasks::glue::{GlueExample, GlueTask, Label};
use crate::tasks::metrics::{accuracy, f1_binary, matthews, pearson, spearman};
use crate::{Error, Result};

/// Dev-set scores of one fine-tuned model: each metric (in %) and the task score.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Scores {
    pub metrics: BTreeMap<String, f64>,
    pub score: f64,
}

/// The metric a task is scored by, as ELECTRA and the GLUE papers report it: Matthews
/// correlation for CoLA, Spearman correlation for STS-B, accuracy for every other task
/// (MRPC's and QQP's F1 and STS-B's Pearson are shown beside it).
pub fn score_metric(task: GlueTask) -> &'static str {
    match task {
        GlueTask::Cola => "mcc",
        GlueTask::Stsb => "spearman",
        _ => "accuracy",
    }
}

/// Predictions: a class per example, or a score for STS-B.
pub fn score(task: GlueTask, pred: &[f64], gold: &[Label]) -> Scores {
    let mut m = BTreeMap::new();
    if task.is_regression() {
        let g: Vec<f64> = gold
            .iter()
            .map(|l| if let Label::Score(s) = l { *s } else { 0.0 })
            .collect();
        m.insert("pearson".into(), 100.0 * pearson(pred, &g));
        m.insert("spearman".into(), 100.0 * spearman(pred, &g));
    } else {
        let p: Vec<usize> = pred.iter().map(|&v| v as usize).collect();
        let g: Vec<usize> = gold
            .iter()
            .map(|l| {
                if let Label::Class(c) = l {
                    *c
                } else {
                    usize::MAX
                }
            })
            .collect();
        match task {
            GlueTask::Cola => {
                m.insert("mcc".into(), 100.0 * matthews(&p, &g));
            }
            GlueTask::Mrpc | GlueTask::Qqp => {
                m.insert("accuracy".into(), 100.0 * accuracy(&p, &g));
                m.insert("f1".into(), 100.0 * f1_binary(&p, &g));
            }
            _ => {
                m.insert("accuracy".into(), 100.0 * accuracy(&p, &g));
            }
        }
    }
    let score = m[score_metric(task)];
    Scores { metrics: m, score }
}

/// The scores of `pred` on the labelled examples of `file`, refusing what would give a
/// meaningless figure: a file with no example, an unlabelled example, a non-finite prediction.
pub fn score_file(
    task: GlueTask,
    file: &Path,
    examples: &[GlueExample],
    pred: &[f64],
) -> Result<Scores> {
    let labels: Vec<Option<Label>> = examples.iter().map(|e| e.label).collect();
    score_labels(task, file, &labels, pred)
}

/// [`score_file`] on the gold labels alone, in file order (`evaluate` streams the rows).
pub fn score_labels(
    task: GlueTask,
    file: &Path,
    labels: &[Option<Label>],
    pred: &[f64],
) -> Result<Scores> {
    if labels.is_empty() {
        return Err(Error::Input(format!(
            "{}: no examples to score",
            file.display()
        )));
    }
    let mut gold = Vec::with_capacity(labels.len());
    for (i, (label, p)) in labels.iter().zip(pred).enumerate() {
        let Some(label) = *label else {
            return Err(Error::Input(format!(
                "{}: example {} (in file order) has no label; a scored file labels every example",
                file.display(),
                i + 1
            )));
        };
        if !p.is_finite() {
            return Err(Error::Diverged(format!(
                "{}: the model predicts {p} for example {} (in file order; its weights hold NaN or inf?)",
                file.display(),
                i + 1
            )));
        }
        gold.push(label);
    }
    Ok(score(task, pred, &gold))
}

/// Refuses a dev set on which the task's metric is undefined, instead of reporting 0: MCC
/// (CoLA) needs both classes among the gold labels, Pearson and Spearman (STS-B) two
/// different gold scores.
pub fn check_metric_defined(task: GlueTask, file: &Path, labels: &[Option<Label>]) -> Result<()> {
    let (metric, needs) = match task {
        GlueTask::Cola => ("MCC", "both classes"),
        GlueTask::Stsb => ("Pearson and Spearman", "two different scores"),
        _ => return Ok(()),
    };
    let distinct: std::collections::BTreeSet<String> = labels
        .iter()
        .filter_map(|l| l.map(|l| format!("{l:?}")))
        .collect();
    if distinct.len() < 2 {
        return Err(Error::Input(format!(
            "{}: {metric} undefined on these {} rows: the gold labels need {needs}",
            file.display(),
            labels.len()
        )));
    }
    Ok(())
}

/// One seed's scores over a task's dev files: the first file's (MNLI: matched) metrics and
/// score as they are (ELECTRA reports MNLI's matched accuracy), every other file's metrics
/// under `<file stem>/` (`dev_mismatched/accuracy`), so none overwrites another.
pub fn merge_dev_scores(files: &[&Path], scores: Vec<Scores>) -> Scores {
    let score = scores.first().map_or(f64::NAN, |s| s.score);
    let mut metrics = BTreeMap::new();
    for (i, (s, file)) in scores.into_iter().zip(files).enumerate() {
        let stem = file.file_stem().unwrap_or_default().to_string_lossy();
        for (k, v) in s.metrics {
            let key = if i == 0 { k } else { format!("{stem}/{k}") };
            metrics.insert(key, v);
        }
    }
    Scores { metrics, score }
}
