//! Experiments over many runs: the paper's ablation (spec, run, report), the CLINE comparison,
//! their bootstrap statistics and stage progress.

pub mod ablation;
pub mod ablation_report;
pub mod ablation_spec;
pub mod bootstrap;
pub mod cline_compare;
pub mod stages;
