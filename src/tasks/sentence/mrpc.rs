//! MRPC (Dolan & Brockett 2005): are two sentences paraphrases? Scored by accuracy, F1 beside
//! it; ELECTRA's recipe trains on both orders of each pair.

use super::{Columns, SentenceTask, TaskMetric, named};

pub struct Mrpc;

impl SentenceTask for Mrpc {
    fn name(&self) -> &'static str {
        "mrpc"
    }
    fn dir_name(&self) -> &'static str {
        "MRPC"
    }
    fn columns(&self) -> Columns {
        named("#1 String", Some("#2 String"), "Quality")
    }
    fn hub_columns(&self) -> Option<(&'static str, Option<&'static str>)> {
        Some(("sentence1", Some("sentence2")))
    }
    fn hub_label_names(&self) -> &'static [&'static str] {
        &["not_equivalent", "equivalent"]
    }
    fn is_unordered(&self) -> bool {
        true
    }
    fn trains_both_orders(&self) -> bool {
        true
    }
    fn metric(&self) -> TaskMetric {
        TaskMetric::AccuracyAndF1
    }
}
