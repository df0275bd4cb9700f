//! QQP: are two Quora questions duplicates? Scored by accuracy, F1 beside it.

use super::{Columns, SentenceTask, TaskMetric, named};

pub struct Qqp;

impl SentenceTask for Qqp {
    fn name(&self) -> &'static str {
        "qqp"
    }
    fn dir_name(&self) -> &'static str {
        "QQP"
    }
    fn columns(&self) -> Columns {
        named("question1", Some("question2"), "is_duplicate")
    }
    fn hub_columns(&self) -> Option<(&'static str, Option<&'static str>)> {
        Some(("question1", Some("question2")))
    }
    fn hub_label_names(&self) -> &'static [&'static str] {
        &["not_duplicate", "duplicate"]
    }
    fn is_unordered(&self) -> bool {
        true
    }
    fn metric(&self) -> TaskMetric {
        TaskMetric::AccuracyAndF1
    }
}
