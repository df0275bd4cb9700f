//! The downstream tasks trueneg fine-tunes on: the GLUE tasks and the other sentence(-pair)
//! tasks (a handle on each task's type in `sentence/`) and SQuAD.

use std::path::{Path, PathBuf};

pub use super::examples::{GlueExample, Label, SquadExample};
use super::sentence::TASKS;

/// The tasks library users registered in this process ([`GlueTask::register`]).
static ADDED: std::sync::RwLock<Vec<&'static dyn SentenceTask>> =
    std::sync::RwLock::new(Vec::new());
pub use super::sentence::{SentenceTask, TaskMetric};

/// A sentence(-pair) classification or regression task: a handle on its one type
/// ([`SentenceTask`], one file each under `tasks/sentence/`). In files and on the command line
/// it is the task's name (`sst2`, `cad-nli`).
#[derive(Clone, Copy)]
pub struct GlueTask(&'static dyn SentenceTask);

impl GlueTask {
    /// Every task: the registry's, in its order, then those a library user registered
    /// ([`GlueTask::register`]).
    pub fn all() -> impl Iterator<Item = GlueTask> {
        let added = ADDED.read().unwrap_or_else(|e| e.into_inner()).clone();
        TASKS.iter().copied().chain(added).map(GlueTask)
    }

    /// Adds a task of a library user's own (one not in `tasks::sentence`'s registry) for this
    /// process, so that `--task`, files and readers know it as the registry's; refused when its
    /// name (or its folder name) is taken.
    pub fn register(spec: &'static dyn SentenceTask) -> crate::Result<Self> {
        // Checked and added under one lock, so two threads cannot add the same name.
        let mut added = ADDED.write().unwrap_or_else(|e| e.into_inner());
        let taken = TASKS
            .iter()
            .chain(added.iter())
            .find(|t| plain(t.name()) == plain(spec.name()) || t.dir_name() == spec.dir_name());
        if let Some(t) = taken {
            return Err(crate::Error::Config(format!(
                "task `{}` ({}): the name is taken by task `{}` ({})",
                spec.name(),
                spec.dir_name(),
                t.name(),
                t.dir_name()
            )));
        }
        added.push(spec);
        Ok(Self(spec))
    }

    /// GLUE's eight tasks (those read from GLUE's or the Hub's layout).
    pub fn glue() -> Vec<GlueTask> {
        Self::all().filter(|t| t.is_glue()).collect()
    }

    /// The task named `name` (`sst2`, `SST-2`, `cad_nli`: any case, with or without `-` and
    /// `_`).
    pub fn parse(name: &str) -> Option<Self> {
        Self::all().find(|t| plain(t.name()) == plain(name))
    }

    /// The task whose name in files is exactly `name` (`cad-nli`).
    fn exact(name: &str) -> Option<Self> {
        Self::all().find(|t| t.name() == name)
    }

    /// The registered task named `name`, for code that works with one task (compare-continued
    /// fine-tunes on `cad-sentiment`).
    pub fn named(name: &str) -> Self {
        Self::parse(name).unwrap_or_else(|| panic!("task `{name}` is registered"))
    }

    /// Its definition: everything the readers, the head, the loss, the metric and the export
    /// ask of it.
    pub fn spec(self) -> &'static dyn SentenceTask {
        self.0
    }

    /// The task's name for `--task` (`sst2`, `cad-nli`), which [`GlueTask::parse`] reads back;
    /// for GLUE's tasks also the Hub's configuration name (`nyu-mll/glue`'s `rte`).
    pub fn name(self) -> &'static str {
        self.0.name()
    }

    /// The folder name GLUE uses, and its name in tables.
    pub fn dir_name(self) -> &'static str {
        self.0.dir_name()
    }

    /// Label names in class-index order (empty for the regression task).
    pub fn labels(self) -> &'static [&'static str] {
        self.0.labels()
    }

    pub fn num_labels(self) -> usize {
        self.labels().len().max(1)
    }

    pub fn is_regression(self) -> bool {
        self.0.is_regression()
    }

    /// Sentence pairs whose order carries no meaning (paraphrase and similarity: MRPC, STS-B,
    /// QQP): training on (B, A) too is sound. Entailment, question answering and stance pairs
    /// are directional.
    pub fn is_unordered(self) -> bool {
        self.0.is_unordered()
    }

    /// The training file in the task's folder (the Hub's first Parquet file of `train` where
    /// the folder is in the Hub's layout).
    pub fn train_file(self, dir: &Path) -> PathBuf {
        match self.hub_split(dir, "train") {
            Some(f) => f,
            None => dir.join(self.0.train_file_name()),
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
        let hub: Vec<PathBuf> = self
            .0
            .hub_dev_splits()
            .iter()
            .filter_map(|s| self.hub_split(dir, s))
            .collect();
        if !hub.is_empty() {
            return hub;
        }
        self.0
            .dev_file_names()
            .iter()
            .map(|n| dir.join(n))
            .collect()
    }

    /// GLUE's own tasks (read from GLUE's TSV or the Hub's Parquet layout); the others have
    /// readers of their own formats.
    pub fn is_glue(self) -> bool {
        self.0.hub_columns().is_some()
    }

    /// Number of epochs in ELECTRA's recipe (10 for the small RTE and STS-B, else 3).
    pub fn default_epochs(self) -> usize {
        self.0.default_epochs()
    }
}

impl PartialEq for GlueTask {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

impl Eq for GlueTask {}

impl std::fmt::Debug for GlueTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.dir_name())
    }
}

impl serde::Serialize for GlueTask {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for GlueTask {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Self::exact(&name).ok_or_else(|| {
            let names: Vec<&str> = Self::all().map(|t| t.name()).collect();
            serde::de::Error::custom(format!(
                "unknown task `{name}`, expected one of {}",
                names.join(", ")
            ))
        })
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
            Task::Classification(g) => g.name().to_string(),
        }
    }
}

impl TryFrom<String> for Task {
    type Error = String;
    fn try_from(s: String) -> std::result::Result<Self, String> {
        if s == "squad" {
            return Ok(Task::Squad);
        }
        GlueTask::exact(&s)
            .map(Task::Classification)
            .ok_or_else(|| format!("unknown task `{s}`"))
    }
}

/// A task or folder name as names are compared: lower case, without `-` and `_` (`SST-2`,
/// `sst2` and `Sst_2` are one name).
fn plain(name: &str) -> String {
    name.to_lowercase().replace(['-', '_'], "")
}
