//! Fine-tuning a pre-trained encoder: the recipes (ELECTRA's and transformers'),
//! classification / regression heads (GLUE) and span extraction (SQuAD), and one seed loop
//! for every task with its results tables.

pub mod classify;
pub mod recipe;
pub mod seeds;
pub mod span;
