//! Evaluation of fine-tuned and pre-trained models: predictions and submissions on dev files,
//! contrast consistency, and CLINE's Hits.

pub mod evaluate;
pub mod hits;
