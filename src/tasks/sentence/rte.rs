//! RTE: does one text entail another? Small: ELECTRA's recipe trains it 10 epochs.

use super::{Columns, SentenceTask, named};

pub struct Rte;

impl SentenceTask for Rte {
    fn name(&self) -> &'static str {
        "rte"
    }
    fn dir_name(&self) -> &'static str {
        "RTE"
    }
    fn columns(&self) -> Columns {
        named("sentence1", Some("sentence2"), "label")
    }
    fn hub_columns(&self) -> Option<(&'static str, Option<&'static str>)> {
        Some(("sentence1", Some("sentence2")))
    }
    fn labels(&self) -> &'static [&'static str] {
        &["entailment", "not_entailment"]
    }
    fn default_epochs(&self) -> usize {
        10
    }
}
