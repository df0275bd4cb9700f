//! The sentence(-pair) tasks, one file each, and their registry.
//!
//! A task is one type implementing [`SentenceTask`]: its name and folder, its files and how they
//! are read (GLUE's TSV columns, the Hub's Parquet columns, or a reader of its own format), its
//! head (its labels, or one score), its loss's scale, its metric and the names an exported
//! model gives its classes. Every method but the names and the columns has a default: a task
//! declares where it differs. Its registry line in `tasks! { … }` below declares the module
//! and adds the task to `--task`, to files' `task` fields and to the readers' hints. Adding one:
//! `docs/adding-a-task.md`.

use std::path::Path;

use crate::Result;
use crate::tasks::examples::GlueExample;

#[macro_use]
mod registry;

// The registry: `module::Type,` per task, in the order help texts and tables list them (GLUE's
// eight first).
tasks! {
    cola::Cola,
    sst2::Sst2,
    mrpc::Mrpc,
    stsb::Stsb,
    qqp::Qqp,
    mnli::Mnli,
    qnli::Qnli,
    rte::Rte,
    cad_sentiment::CadSentiment,
    cad_nli::CadNli,
    boolq::Boolq,
    perspectrum::Perspectrum,
}

/// A column of a task's TSV file: by header name, or by position in a file without a header
/// (CoLA).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Col {
    Name(&'static str),
    Pos(usize),
}

/// The columns of text A, text B (sentence-pair tasks) and the label.
#[derive(Clone, Copy, Debug)]
pub struct Columns {
    pub text_a: Col,
    pub text_b: Option<Col>,
    pub label: Col,
}

/// The columns named `a`, `b` (when the task has a second text) and `label` of a file with a
/// header.
pub const fn named(a: &'static str, b: Option<&'static str>, label: &'static str) -> Columns {
    Columns {
        text_a: Col::Name(a),
        text_b: match b {
            Some(b) => Some(Col::Name(b)),
            None => None,
        },
        label: Col::Name(label),
    }
}

/// How a task is scored, as ELECTRA and the GLUE papers report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskMetric {
    Accuracy,
    /// Accuracy, with the positive class's F1 beside it (MRPC, QQP).
    AccuracyAndF1,
    /// Matthews correlation (CoLA).
    Mcc,
    /// Spearman correlation, with Pearson's beside it (STS-B).
    PearsonSpearman,
}

/// A sentence(-pair) classification or regression task (see the module doc).
pub trait SentenceTask: Sync {
    /// Its name for `--task` and in files (`sst2`, `cad-nli`); for GLUE's tasks also the
    /// Hub's configuration name (`nyu-mll/glue`'s `rte`).
    fn name(&self) -> &'static str;

    /// Its folder name in GLUE's layout and its name in tables (`SST-2`).
    fn dir_name(&self) -> &'static str;

    /// The columns of its TSV files (and the fields its own format's reader names in errors).
    fn columns(&self) -> Columns;

    /// Label names in class-index order (empty for a regression task).
    fn labels(&self) -> &'static [&'static str] {
        &["0", "1"]
    }

    /// The names an exported model gives its classes: readable names where the files use
    /// 0 / 1 (the Hub's GLUE names), else the labels.
    fn hub_label_names(&self) -> &'static [&'static str] {
        self.labels()
    }

    /// What the labels of another labelling mean for a model of this task, where its own
    /// files use 0 / 1: SST-2's classes are the sentiment contrast sets' Negative / Positive.
    fn read_as(&self) -> Option<&'static [&'static str]> {
        None
    }

    /// A real score (one output, squared error) instead of classes.
    fn is_regression(&self) -> bool {
        false
    }

    /// The factor the regression head's output is scaled by (STS-B's 0–5 scores).
    fn regression_scale(&self) -> f64 {
        1.0
    }

    /// Sentence pairs whose order carries no meaning (paraphrase and similarity).
    fn is_unordered(&self) -> bool {
        false
    }

    /// ELECTRA's recipe trains on both orders of each pair (MRPC, STS-B).
    fn trains_both_orders(&self) -> bool {
        false
    }

    /// Epochs in ELECTRA's recipe.
    fn default_epochs(&self) -> usize {
        3
    }

    fn metric(&self) -> TaskMetric {
        TaskMetric::Accuracy
    }

    /// The Hub's Parquet text columns, for GLUE's tasks (`None`: not one of them).
    fn hub_columns(&self) -> Option<(&'static str, Option<&'static str>)> {
        None
    }

    /// The Hub dataset and configuration a model of this task names in its card.
    fn hub_dataset(&self) -> Option<(&'static str, &'static str)> {
        self.hub_columns().map(|_| ("nyu-mll/glue", self.name()))
    }

    /// The training file's name in its folder.
    fn train_file_name(&self) -> &'static str {
        "train.tsv"
    }

    /// The dev files' names in its folder (MNLI has matched and mismatched).
    fn dev_file_names(&self) -> &'static [&'static str] {
        &["dev.tsv"]
    }

    /// The Hub's dev splits, in the order of [`SentenceTask::dev_file_names`].
    fn hub_dev_splits(&self) -> &'static [&'static str] {
        &["validation"]
    }

    /// A file of its own format read whole (`None`: GLUE's TSV, streamed).
    fn read_own_format(&self, _path: &Path) -> Option<Result<Vec<GlueExample>>> {
        None
    }
}
