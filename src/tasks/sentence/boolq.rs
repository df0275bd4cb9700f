//! BoolQ (Clark et al. 2019) in its official JSONL: (question, passage) → FALSE / TRUE.

use std::path::Path;

use super::{Columns, SentenceTask, named};
use crate::Result;
use crate::tasks::examples::GlueExample;

pub struct Boolq;

impl SentenceTask for Boolq {
    fn name(&self) -> &'static str {
        "boolq"
    }
    fn dir_name(&self) -> &'static str {
        "BoolQ"
    }
    fn columns(&self) -> Columns {
        named("question", Some("passage"), "answer")
    }
    fn labels(&self) -> &'static [&'static str] {
        &["FALSE", "TRUE"]
    }
    fn hub_dataset(&self) -> Option<(&'static str, &'static str)> {
        Some(("google/boolq", "default"))
    }
    fn train_file_name(&self) -> &'static str {
        "train.jsonl"
    }
    fn dev_file_names(&self) -> &'static [&'static str] {
        &["dev.jsonl"]
    }
    fn read_own_format(&self, path: &Path) -> Option<Result<Vec<GlueExample>>> {
        Some(crate::tasks::task_formats::read_boolq(path))
    }
}
