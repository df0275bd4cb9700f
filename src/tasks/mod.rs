//! Downstream data: the tasks (GLUE and the other sentence(-pair) tasks, SQuAD v1.1), their
//! readers, the contrast-set readers, and the official metrics.

pub mod contrast;
pub mod glue;
pub mod metrics;
pub mod squad;
pub mod task;
pub mod task_formats;
