//! Experiments over many runs: the paper's ablation (spec, run, report), the continued comparison
//! of two objectives, their bootstrap statistics and stage progress.

pub mod ablation;
pub mod ablation_report;
pub mod ablation_spec;
pub mod bootstrap;
pub mod compare_continued;
pub mod stages;
