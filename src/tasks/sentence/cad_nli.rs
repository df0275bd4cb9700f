//! Counterfactually-augmented SNLI (Kaushik et al. 2020): quoted TSV with a header,
//! `sentence1\tsentence2\tgold_label` (one of the folders `original/`, `revised_premise/`, …).

use std::path::Path;

use super::{Columns, SentenceTask, named};
use crate::Result;
use crate::tasks::examples::GlueExample;

pub struct CadNli;

impl SentenceTask for CadNli {
    fn name(&self) -> &'static str {
        "cad-nli"
    }
    fn dir_name(&self) -> &'static str {
        "CAD-NLI"
    }
    fn columns(&self) -> Columns {
        named("sentence1", Some("sentence2"), "gold_label")
    }
    fn labels(&self) -> &'static [&'static str] {
        &["contradiction", "entailment", "neutral"]
    }
    fn read_own_format(&self, path: &Path) -> Option<Result<Vec<GlueExample>>> {
        let columns = ["sentence1", "sentence2", "gold_label"];
        let read = crate::tasks::task_formats::read_cad_examples(path, &columns, self.labels());
        Some(read)
    }
}
