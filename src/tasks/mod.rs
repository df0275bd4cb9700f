//! Downstream tasks: GLUE and SQuAD v1.1 readers, metrics.

pub mod ablation;
pub mod ablation_report;
pub mod ablation_spec;
pub mod attack;
pub mod bootstrap;
pub mod cline_compare;
pub mod contrast;
pub mod finetune;
pub mod glue;
pub mod hits;
pub mod metrics;
pub mod qa;
pub mod runner;
pub mod squad;
pub mod stages;
pub mod task;
pub mod task_formats;
