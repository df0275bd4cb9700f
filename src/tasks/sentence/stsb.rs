//! STS-B (Cer et al. 2017): how similar two sentences are, a score from 0 to 5 (regression:
//! one output scaled by 5, squared error). Scored by Spearman correlation, Pearson's beside it;
//! ELECTRA's recipe trains 10 epochs on both orders of each pair.

use super::{Columns, SentenceTask, TaskMetric, named};

pub struct Stsb;

impl SentenceTask for Stsb {
    fn name(&self) -> &'static str {
        "stsb"
    }
    fn dir_name(&self) -> &'static str {
        "STS-B"
    }
    fn columns(&self) -> Columns {
        named("sentence1", Some("sentence2"), "score")
    }
    fn hub_columns(&self) -> Option<(&'static str, Option<&'static str>)> {
        Some(("sentence1", Some("sentence2")))
    }
    fn labels(&self) -> &'static [&'static str] {
        &[]
    }
    fn is_regression(&self) -> bool {
        true
    }
    fn regression_scale(&self) -> f64 {
        5.0
    }
    fn is_unordered(&self) -> bool {
        true
    }
    fn trains_both_orders(&self) -> bool {
        true
    }
    fn default_epochs(&self) -> usize {
        10
    }
    fn metric(&self) -> TaskMetric {
        TaskMetric::PearsonSpearman
    }
}
