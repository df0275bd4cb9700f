//! Evaluation of fine-tuned and pre-trained models: predictions and submissions on dev files,
//! contrast consistency, Hits on synonym / antonym triplets, and what Hard Correction corrects in a
//! pre-trained checkpoint.

pub mod evaluate;
pub mod hits;
pub mod inspect;
