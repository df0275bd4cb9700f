//! PERSPECTRUM stance (Chen et al. 2019) from its official JSON files: (claim, perspective) →
//! neg (undermine) / pos (support). A split is named as `<folder>/train`, `<folder>/dev`: the
//! claims of that split in the official files.

use std::path::Path;

use super::{Columns, SentenceTask, named};
use crate::Result;
use crate::tasks::examples::GlueExample;

pub struct Perspectrum;

impl SentenceTask for Perspectrum {
    fn name(&self) -> &'static str {
        "perspectrum"
    }
    fn dir_name(&self) -> &'static str {
        "PERSPECTRUM"
    }
    fn columns(&self) -> Columns {
        named("claim", Some("perspective"), "stance")
    }
    fn labels(&self) -> &'static [&'static str] {
        &["neg", "pos"]
    }
    fn train_file_name(&self) -> &'static str {
        "train"
    }
    fn dev_file_names(&self) -> &'static [&'static str] {
        &["dev"]
    }
    fn read_own_format(&self, path: &Path) -> Option<Result<Vec<GlueExample>>> {
        Some(crate::tasks::task_formats::read_perspectrum(path))
    }
}
