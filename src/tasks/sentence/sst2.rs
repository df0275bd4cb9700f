//! SST-2 (Socher et al. 2013): a movie-review sentence's sentiment, 0 negative / 1 positive.

use super::{Columns, SentenceTask, named};

pub struct Sst2;

impl SentenceTask for Sst2 {
    fn name(&self) -> &'static str {
        "sst2"
    }
    fn dir_name(&self) -> &'static str {
        "SST-2"
    }
    fn columns(&self) -> Columns {
        named("sentence", None, "label")
    }
    fn hub_columns(&self) -> Option<(&'static str, Option<&'static str>)> {
        Some(("sentence", None))
    }
    fn hub_label_names(&self) -> &'static [&'static str] {
        &["negative", "positive"]
    }
    fn read_as(&self) -> Option<&'static [&'static str]> {
        Some(&crate::tasks::contrast::SENTIMENT)
    }
}
