//! Fine-tuning a pre-trained encoder: classification / regression heads (GLUE) and span
//! extraction (SQuAD), ELECTRA's recipe, and one seed loop for every task with its results
//! tables.

pub mod classify;
pub mod seeds;
pub mod span;
