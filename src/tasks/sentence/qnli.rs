//! QNLI (from SQuAD): does a sentence answer a question?

use super::{Columns, SentenceTask, named};

pub struct Qnli;

impl SentenceTask for Qnli {
    fn name(&self) -> &'static str {
        "qnli"
    }
    fn dir_name(&self) -> &'static str {
        "QNLI"
    }
    fn columns(&self) -> Columns {
        named("question", Some("sentence"), "label")
    }
    fn hub_columns(&self) -> Option<(&'static str, Option<&'static str>)> {
        Some(("question", Some("sentence")))
    }
    fn labels(&self) -> &'static [&'static str] {
        &["entailment", "not_entailment"]
    }
}
