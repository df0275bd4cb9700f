//! Fine-tuning a pre-trained encoder: the encoder it starts from, the recipes (ELECTRA's and
//! transformers'), classification / regression heads (GLUE) and span extraction (SQuAD), the
//! fine-tuned model's folder and its transformers export, and one seed loop for every task with
//! its results tables.

pub mod classifier_folder;
pub mod classify;
pub mod eval_plan;
pub mod export;
pub mod folder;
pub mod joint_span;
pub mod linear_head;
pub mod out_folder;
pub mod pretrained;
pub mod qa_features;
pub mod recipe;
pub mod record;
pub mod results;
pub mod scores;
pub mod seeds;
pub mod span;
pub mod span_decode;
pub mod train_loop;
pub mod transformers_folder;
