//! Counterfactually-augmented IMDb sentiment (Kaushik et al. 2020): quoted TSV with a header,
//! `Sentiment\tText`, labels Negative / Positive (the `orig`, `new` or `combined` folder).

use std::path::Path;

use super::{Columns, SentenceTask, named};
use crate::Result;
use crate::tasks::examples::GlueExample;

pub struct CadSentiment;

impl SentenceTask for CadSentiment {
    fn name(&self) -> &'static str {
        "cad-sentiment"
    }
    fn dir_name(&self) -> &'static str {
        "CAD-sentiment"
    }
    fn columns(&self) -> Columns {
        named("Text", None, "Sentiment")
    }
    fn labels(&self) -> &'static [&'static str] {
        &crate::tasks::contrast::SENTIMENT
    }
    fn read_own_format(&self, path: &Path) -> Option<Result<Vec<GlueExample>>> {
        let columns = ["Text", "Sentiment"];
        let read = crate::tasks::task_formats::read_cad_examples(path, &columns, self.labels());
        Some(read)
    }
}
