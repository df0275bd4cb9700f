//! CoLA (Warstadt et al. 2019): is a sentence acceptable English? Its files have no header
//! (`source`, `label`, `author's label`, `sentence`); scored by Matthews correlation.

use super::{Col, Columns, SentenceTask, TaskMetric};

pub struct Cola;

impl SentenceTask for Cola {
    fn name(&self) -> &'static str {
        "cola"
    }
    fn dir_name(&self) -> &'static str {
        "CoLA"
    }
    fn columns(&self) -> Columns {
        Columns {
            text_a: Col::Pos(3),
            text_b: None,
            label: Col::Pos(1),
        }
    }
    fn hub_columns(&self) -> Option<(&'static str, Option<&'static str>)> {
        Some(("sentence", None))
    }
    fn hub_label_names(&self) -> &'static [&'static str] {
        &["unacceptable", "acceptable"]
    }
    fn metric(&self) -> TaskMetric {
        TaskMetric::Mcc
    }
}
