//! The downstream tasks trueneg fine-tunes on: the GLUE tasks and the other sentence(-pair)
//! tasks with their label sets, files and ELECTRA's epochs, and the examples their readers give.

use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GlueTask {
    Cola,
    Sst2,
    Mrpc,
    Stsb,
    Qqp,
    Mnli,
    Qnli,
    Rte,
    /// Counterfactually-augmented IMDb sentiment (Kaushik et al. 2020): `Sentiment\tText`,
    /// quoted TSV, labels Negative / Positive (the `orig`, `new` or `combined` folder).
    #[serde(rename = "cad-sentiment")]
    CadSentiment,
    /// Counterfactually-augmented SNLI: `sentence1\tsentence2\tgold_label` (one of the folders
    /// `original/`, `revised_premise/`, …).
    #[serde(rename = "cad-nli")]
    CadNli,
    /// BoolQ (Clark et al. 2019) in its official JSONL: (question, passage) → FALSE / TRUE.
    Boolq,
    /// PERSPECTRUM stance (Chen et al. 2019) from its official JSON files: (claim, perspective)
    /// → neg (undermine) / pos (support).
    Perspectrum,
}

/// A label: a class index, or a real score (STS-B).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Label {
    Class(usize),
    Score(f64),
}

/// A SQuAD question with its paragraph and gold answers.
#[derive(Clone, Debug, PartialEq)]
pub struct SquadExample {
    /// The article's title (kept so that a transformed copy keeps every article).
    pub title: String,
    pub id: String,
    pub question: String,
    pub context: String,
    /// (answer text, character offset in `context`, as `answer_start` in the file).
    pub answers: Vec<(String, usize)>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct GlueExample {
    /// The row's id in the file (`index` column, else the line number).
    pub id: String,
    pub text_a: String,
    pub text_b: Option<String>,
    pub label: Option<Label>,
}

impl GlueTask {
    pub const ALL: [GlueTask; 8] = [
        Self::Cola,
        Self::Sst2,
        Self::Mrpc,
        Self::Stsb,
        Self::Qqp,
        Self::Mnli,
        Self::Qnli,
        Self::Rte,
    ];

    pub fn parse(name: &str) -> Option<Self> {
        Some(match name.to_lowercase().replace('-', "").as_str() {
            "cola" => Self::Cola,
            "sst2" => Self::Sst2,
            "mrpc" => Self::Mrpc,
            "stsb" => Self::Stsb,
            "qqp" => Self::Qqp,
            "mnli" => Self::Mnli,
            "qnli" => Self::Qnli,
            "rte" => Self::Rte,
            "cadsentiment" => Self::CadSentiment,
            "cadnli" => Self::CadNli,
            "boolq" => Self::Boolq,
            "perspectrum" => Self::Perspectrum,
            _ => return None,
        })
    }

    /// The folder name GLUE uses.
    /// The task's name for `--task` (`sst2`, `cad-nli`), which [`GlueTask::parse`] reads back;
    /// for GLUE's tasks also the Hub's configuration name (`nyu-mll/glue`'s `rte`).
    pub fn name(self) -> String {
        let name = self.dir_name().to_lowercase();
        if name.starts_with("cad") {
            name
        } else {
            name.replace('-', "")
        }
    }

    pub fn dir_name(self) -> &'static str {
        match self {
            Self::Cola => "CoLA",
            Self::Sst2 => "SST-2",
            Self::Mrpc => "MRPC",
            Self::Stsb => "STS-B",
            Self::Qqp => "QQP",
            Self::Mnli => "MNLI",
            Self::Qnli => "QNLI",
            Self::Rte => "RTE",
            Self::CadSentiment => "CAD-sentiment",
            Self::CadNli => "CAD-NLI",
            Self::Boolq => "BoolQ",
            Self::Perspectrum => "PERSPECTRUM",
        }
    }

    /// Label names in class-index order (empty for the regression task).
    pub fn labels(self) -> &'static [&'static str] {
        match self {
            Self::Stsb => &[],
            Self::Mnli | Self::CadNli => &["contradiction", "entailment", "neutral"],
            Self::CadSentiment => &crate::tasks::contrast::SENTIMENT,
            Self::Boolq => &["FALSE", "TRUE"],
            Self::Perspectrum => &["neg", "pos"],
            Self::Qnli | Self::Rte => &["entailment", "not_entailment"],
            _ => &["0", "1"],
        }
    }

    pub fn num_labels(self) -> usize {
        self.labels().len().max(1)
    }

    pub fn is_regression(self) -> bool {
        self == Self::Stsb
    }

    /// Sentence pairs whose order carries no meaning (paraphrase and similarity: MRPC, STS-B,
    /// QQP): training on (B, A) too is sound. Entailment, question answering and stance pairs
    /// are directional.
    pub fn is_unordered(self) -> bool {
        matches!(self, Self::Mrpc | Self::Stsb | Self::Qqp)
    }

    /// The training file in the task's folder. PERSPECTRUM's splits are named as
    /// `<folder>/train`, `<folder>/dev` (the claims of that split in the official files).
    pub fn train_file(self, dir: &Path) -> PathBuf {
        if let Some(f) = self.hub_split(dir, "train") {
            return f;
        }
        match self {
            Self::Boolq => dir.join("train.jsonl"),
            Self::Perspectrum => dir.join("train"),
            _ => dir.join("train.tsv"),
        }
    }

    /// The first file of `split` where `dir` is in the Hub's Parquet layout (GLUE's tasks,
    /// without GLUE's own `train.tsv`): `train-00000-of-00001.parquet`.
    fn hub_split(self, dir: &Path, split: &str) -> Option<PathBuf> {
        if !self.is_glue() || crate::io::read::exists(&dir.join("train.tsv")) {
            return None;
        }
        super::hub_layout::split_files(dir, split)
            .into_iter()
            .next()
    }

    /// The task's folder given `data`: `data` itself, or, when `data` holds none of the
    /// task's files but a folder named for the task (GLUE's `RTE`, `SST-2`, or the Hub's
    /// `rte`, `sst2`, any case), that folder: `--data glue/ --task rte` reads `glue/RTE`.
    pub fn folder(self, data: &Path) -> PathBuf {
        let holds = |d: &Path| {
            crate::io::read::exists(&self.train_file(d))
                || self.dev_files(d).iter().any(|f| crate::io::read::exists(f))
        };
        if holds(data) {
            return data.to_path_buf();
        }
        let plain = |n: &str| n.to_lowercase().replace(['-', '_'], "");
        let want = plain(self.dir_name());
        crate::io::read::names(data)
            .into_iter()
            .map(|n| data.join(n))
            .find(|d| {
                d.file_name()
                    .is_some_and(|n| plain(&n.to_string_lossy()) == want)
                    && crate::io::read::is_folder(d)
            })
            .unwrap_or_else(|| data.to_path_buf())
    }

    /// The dev files: MNLI has matched and mismatched.
    pub fn dev_files(self, dir: &Path) -> Vec<PathBuf> {
        let hub: Vec<PathBuf> = match self {
            Self::Mnli => ["validation_matched", "validation_mismatched"]
                .iter()
                .filter_map(|s| self.hub_split(dir, s))
                .collect(),
            _ => self.hub_split(dir, "validation").into_iter().collect(),
        };
        if !hub.is_empty() {
            return hub;
        }
        match self {
            Self::Mnli => vec![dir.join("dev_matched.tsv"), dir.join("dev_mismatched.tsv")],
            Self::Boolq => vec![dir.join("dev.jsonl")],
            Self::Perspectrum => vec![dir.join("dev")],
            _ => vec![dir.join("dev.tsv")],
        }
    }

    /// GLUE's own tab-separated tasks (the others have readers of their own formats).
    pub fn is_glue(self) -> bool {
        !matches!(
            self,
            Self::CadSentiment | Self::CadNli | Self::Boolq | Self::Perspectrum
        )
    }

    /// Number of epochs in ELECTRA's recipe (10 for the small RTE and STS-B, else 3).
    pub fn default_epochs(self) -> usize {
        if matches!(self, Self::Rte | Self::Stsb) {
            10
        } else {
            3
        }
    }
}

/// A downstream task: a sentence(-pair) classification or regression task ([`GlueTask`]), or
/// SQuAD v1.1 span extraction. In files (`finetuned.json`'s `task`) it is the task's name:
/// `squad`, or the [`GlueTask`]'s (`cola`, `sst2`, …).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Task {
    Classification(GlueTask),
    /// SQuAD v1.1: an answer span of the context.
    Squad,
}

impl Task {
    /// A task from its command-line name: `squad` (any case) or a [`GlueTask`]'s.
    pub fn parse(name: &str) -> Option<Self> {
        if name.eq_ignore_ascii_case("squad") {
            return Some(Self::Squad);
        }
        GlueTask::parse(name).map(Self::Classification)
    }

    /// The name tables and folders use: `SQuAD`, or GLUE's folder name (`CoLA`, …).
    pub fn display_name(self) -> &'static str {
        match self {
            Self::Squad => "SQuAD",
            Self::Classification(t) => t.dir_name(),
        }
    }

    /// The classification task, when it is one.
    pub fn classification(self) -> Option<GlueTask> {
        match self {
            Self::Classification(t) => Some(t),
            Self::Squad => None,
        }
    }
}

impl From<Task> for String {
    fn from(t: Task) -> String {
        match t {
            Task::Squad => "squad".into(),
            Task::Classification(g) => match serde_json::to_value(g) {
                Ok(serde_json::Value::String(s)) => s,
                _ => unreachable!("a GLUE task serialises as its name"),
            },
        }
    }
}

impl TryFrom<String> for Task {
    type Error = String;
    fn try_from(s: String) -> std::result::Result<Self, String> {
        if s == "squad" {
            return Ok(Task::Squad);
        }
        serde_json::from_value::<GlueTask>(serde_json::Value::String(s.clone()))
            .map(Task::Classification)
            .map_err(|_| format!("unknown task `{s}`"))
    }
}
