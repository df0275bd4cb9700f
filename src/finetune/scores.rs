//! A fine-tuned classifier's scores: each task's metrics on predictions and gold labels, and
//! the refusals that keep a reported figure meaningful (no example, an unlabelled row, a
//! non-finite prediction, a metric undefined on the gold labels).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::tasks::glue::{GlueExample, GlueTask, Label};
use crate::tasks::metrics::{accuracy, f1_binary, matthews, pearson, spearman};
use crate::tasks::task::TaskMetric;
use crate::{Error, Result};

/// Dev-set scores of one fine-tuned model: each metric (in %) and the task score.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Scores {
    pub metrics: BTreeMap<String, f64>,
    pub score: f64,
    /// Set when the predictions collapsed (one class for nearly every example, or nearly the
    /// same score): what was seen and the likely cause.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collapsed: Option<String>,
    /// What a model that ignores its input scores on the same gold labels, by the same
    /// metric (none for SQuAD).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baselines: Option<Baselines>,
    /// The mean loss per example on these labels, by the training loss's function (scored
    /// during fine-tuning; none elsewhere).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<f64>,
}

/// The task score of two predictors that never read the input, on the gold labels scored:
/// always the most frequent gold class (STS-B: one constant score), and a class drawn
/// uniformly at random (its expected score).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Baselines {
    /// The task score of always predicting `majority_class`.
    pub majority: f64,
    /// The most frequent gold class (STS-B: "a constant score").
    pub majority_class: String,
    /// The expected task score of uniform random guessing.
    pub chance: f64,
}

impl Scores {
    /// The score beside its baselines, in words: `accuracy 49.46 (majority class
    /// `entailment` 52.71, chance 50.00)`.
    pub fn with_baselines(&self, metric: &str) -> String {
        match &self.baselines {
            Some(b) => format!(
                "{metric} {:.2} (majority class `{}` {:.2}, chance {:.2})",
                self.score, b.majority_class, b.majority, b.chance
            ),
            None => format!("{metric} {:.2}", self.score),
        }
    }

    /// Every metric, then the baselines of the task score: `accuracy 49.46 (majority class
    /// `entailment` 52.71, chance 50.00)`.
    pub fn line(&self) -> String {
        let metrics = self
            .metrics
            .iter()
            .map(|(k, v)| format!("{k} {v:.2}"))
            .collect::<Vec<_>>()
            .join(", ");
        match &self.baselines {
            Some(b) => format!(
                "{metrics} (majority class `{}` {:.2}, chance {:.2})",
                b.majority_class, b.majority, b.chance
            ),
            None => metrics,
        }
    }

    /// Whether the model failed to beat the majority class on its task score.
    pub fn not_above_majority(&self) -> bool {
        self.baselines
            .as_ref()
            .is_some_and(|b| self.score <= b.majority)
    }

    /// What is wrong with these scores, a line each: a collapse to one class, a score not
    /// above the majority-class baseline. Empty when neither.
    pub fn warnings(&self) -> Vec<String> {
        let mut w: Vec<String> = self.collapsed.iter().cloned().collect();
        if let Some(b) = &self.baselines
            && self.not_above_majority()
            && self.collapsed.is_none()
        {
            w.push(format!(
                "scores {:.2}, not above the majority-class baseline {:.2} (always `{}`): the model has learnt nothing the label counts do not give; {CAUSES}",
                self.score, b.majority, b.majority_class
            ));
        }
        w
    }
}

/// A share of the examples above which one predicted class is a collapse (unless the gold
/// labels are that one-sided too).
const ONE_CLASS: f64 = 0.95;

/// The likely causes of a collapse, for the note.
const CAUSES: &str = "usually a learning rate too high for the model's size, or too few training steps (more epochs or examples; a larger pre-trained model)";

/// Whether `pred` collapsed against `gold`, in words: a class predicted for at least
/// [`ONE_CLASS`] of 10 or more examples while the gold labels are not that one-sided; scores
/// spread under 1 % of the gold scores' spread.
fn collapse(task: GlueTask, pred: &[f64], gold: &[Label]) -> Option<String> {
    let n = pred.len();
    if n < 10 {
        return None;
    }
    if task.is_regression() {
        let spread = |v: &[f64]| {
            let m = v.iter().sum::<f64>() / v.len() as f64;
            (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / v.len() as f64).sqrt()
        };
        let g: Vec<f64> = gold
            .iter()
            .map(|l| if let Label::Score(s) = l { *s } else { 0.0 })
            .collect();
        let (sp, sg) = (spread(pred), spread(&g));
        return (sg > 0.0 && sp < 0.01 * sg).then(|| {
            format!(
                "predicts nearly the same score for all {n} examples (spread {sp:.4} against the gold scores' {sg:.2}): the model collapsed to a constant; {CAUSES}"
            )
        });
    }
    let mut counts = BTreeMap::new();
    for &p in pred {
        *counts.entry(p as usize).or_insert(0usize) += 1;
    }
    let (&class, &top) = counts.iter().max_by_key(|(_, c)| **c)?;
    let mut golds = BTreeMap::new();
    for l in gold {
        if let Label::Class(c) = l {
            *golds.entry(*c).or_insert(0usize) += 1;
        }
    }
    let majority = golds.values().copied().max().unwrap_or(0) as f64 / n as f64;
    let name = task.labels().get(class).copied().unwrap_or("?");
    (top as f64 >= ONE_CLASS * n as f64 && majority < ONE_CLASS).then(|| {
        format!(
            "predicts `{name}` for {top} of {n} examples (the gold labels' most frequent class is {:.1} %): the model collapsed to one class; {CAUSES}",
            100.0 * majority
        )
    })
}

/// The metric a task is scored by, as ELECTRA and the GLUE papers report it: Matthews
/// correlation for CoLA, Spearman correlation for STS-B, accuracy for every other task
/// (MRPC's and QQP's F1 and STS-B's Pearson are shown beside it).
pub fn score_metric(task: GlueTask) -> &'static str {
    match task.spec().metric() {
        TaskMetric::Mcc => "mcc",
        TaskMetric::PearsonSpearman => "spearman",
        TaskMetric::Accuracy | TaskMetric::AccuracyAndF1 => "accuracy",
    }
}

/// Each metric of `pred` against `gold` (in %): the model's predictions, or a baseline's.
fn metrics_of(task: GlueTask, pred: &[f64], gold: &[Label]) -> BTreeMap<String, f64> {
    let mut m = BTreeMap::new();
    if task.is_regression() {
        let g: Vec<f64> = gold
            .iter()
            .map(|l| if let Label::Score(s) = l { *s } else { 0.0 })
            .collect();
        m.insert("pearson".into(), 100.0 * pearson(pred, &g));
        m.insert("spearman".into(), 100.0 * spearman(pred, &g));
        return m;
    }
    let p: Vec<usize> = pred.iter().map(|&v| v as usize).collect();
    let g = gold_classes(gold);
    match task.spec().metric() {
        TaskMetric::Mcc => {
            m.insert("mcc".into(), 100.0 * matthews(&p, &g));
        }
        TaskMetric::AccuracyAndF1 => {
            m.insert("accuracy".into(), 100.0 * accuracy(&p, &g));
            m.insert("f1".into(), 100.0 * f1_binary(&p, &g));
        }
        _ => {
            m.insert("accuracy".into(), 100.0 * accuracy(&p, &g));
        }
    }
    m
}

fn gold_classes(gold: &[Label]) -> Vec<usize> {
    gold.iter()
        .map(|l| {
            if let Label::Class(c) = l {
                *c
            } else {
                usize::MAX
            }
        })
        .collect()
}

/// The baselines of `task` on `gold`, each scored by [`metrics_of`] as a model is: the
/// majority class predicted for every example (ties: the first class), and uniform guessing,
/// whose expected accuracy is 1 / the number of classes and whose expected correlation (MCC,
/// Spearman) is 0.
pub fn baselines(task: GlueTask, gold: &[Label]) -> Baselines {
    let metric = score_metric(task);
    if task.is_regression() {
        let constant = vec![0.0; gold.len()];
        return Baselines {
            majority: metrics_of(task, &constant, gold)[metric],
            majority_class: "a constant score".into(),
            chance: 0.0,
        };
    }
    let classes = task.labels().len().max(1);
    let mut counts = vec![0usize; classes];
    for c in gold_classes(gold) {
        if let Some(n) = counts.get_mut(c) {
            *n += 1;
        }
    }
    let top = counts
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(&a.0)))
        .map_or(0, |(c, _)| c);
    let constant = vec![top as f64; gold.len()];
    let chance = match metric {
        "accuracy" => 100.0 / classes as f64,
        _ => 0.0,
    };
    Baselines {
        majority: metrics_of(task, &constant, gold)[metric],
        majority_class: task.labels().get(top).copied().unwrap_or("?").to_string(),
        chance,
    }
}

/// Predictions: a class per example, or a score for STS-B.
pub fn score(task: GlueTask, pred: &[f64], gold: &[Label]) -> Scores {
    let metrics = metrics_of(task, pred, gold);
    let score = metrics[score_metric(task)];
    Scores {
        metrics,
        score,
        collapsed: collapse(task, pred, gold),
        baselines: Some(baselines(task, gold)),
        loss: None,
    }
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
    let (metric, needs) = match task.spec().metric() {
        TaskMetric::Mcc => ("MCC", "both classes"),
        TaskMetric::PearsonSpearman => ("Pearson and Spearman", "two different scores"),
        TaskMetric::Accuracy | TaskMetric::AccuracyAndF1 => return Ok(()),
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
    let collapsed = scores.iter().find_map(|s| s.collapsed.clone());
    let baselines = scores.first().and_then(|s| s.baselines.clone());
    let loss = scores.first().and_then(|s| s.loss);
    let mut metrics = BTreeMap::new();
    for (i, (s, file)) in scores.into_iter().zip(files).enumerate() {
        let stem = crate::tasks::hub_layout::glue_stem(file);
        for (k, v) in s.metrics {
            let key = if i == 0 { k } else { format!("{stem}/{k}") };
            metrics.insert(key, v);
        }
    }
    Scores {
        metrics,
        score,
        collapsed,
        baselines,
        loss,
    }
}
