//! MNLI (Williams et al. 2018): does a premise entail, contradict or leave open a hypothesis?
//! Two dev sets: matched (the training genres) and mismatched.

use super::{Columns, SentenceTask, named};

pub struct Mnli;

impl SentenceTask for Mnli {
    fn name(&self) -> &'static str {
        "mnli"
    }
    fn dir_name(&self) -> &'static str {
        "MNLI"
    }
    fn columns(&self) -> Columns {
        named("sentence1", Some("sentence2"), "gold_label")
    }
    fn hub_columns(&self) -> Option<(&'static str, Option<&'static str>)> {
        Some(("premise", Some("hypothesis")))
    }
    fn labels(&self) -> &'static [&'static str] {
        &["contradiction", "entailment", "neutral"]
    }
    fn dev_file_names(&self) -> &'static [&'static str] {
        &["dev_matched.tsv", "dev_mismatched.tsv"]
    }
    fn hub_dev_splits(&self) -> &'static [&'static str] {
        &["validation_matched", "validation_mismatched"]
    }
}
