//! A fine-tuned classifier's folder (`seed-N`): its weights under transformers' names, its
//! tokenizer, and `finetuned.json` saying the task, the encoder, the head and how examples
//! were read; written after training and read back to score, export or continue.

use std::path::Path;

use burn::prelude::*;
use serde::{Deserialize, Serialize};

use super::classify::{Classifier, ClsHead, FineTuned};
use super::folder::{load_weights, read_model_folder, write_model_folder};
use crate::Result;
use crate::model::EncoderConfig;
use crate::tasks::glue::GlueTask;
use crate::text::WordPieceTokenizer;
use crate::text::pairs::Truncation;

/// What `save_finetuned` writes next to the weights.
#[derive(Serialize, Deserialize)]
pub struct FineTunedInfo {
    pub task: GlueTask,
    pub prefix: String,
    pub config: EncoderConfig,
    pub max_seq_len: usize,
    /// Folders written before heads were chosen hold ELECTRA's one-layer head.
    #[serde(default = "linear_head")]
    pub head: ClsHead,
    #[serde(default = "super::recipe::one")]
    pub regression_scale: f64,
    /// Folders written before the rule was recorded were cut greedily.
    #[serde(default)]
    pub truncation: Truncation,
}

fn linear_head() -> ClsHead {
    ClsHead::Linear
}

pub fn save_finetuned(
    m: &mut FineTuned,
    tokenizer: &WordPieceTokenizer,
    max_seq_len: usize,
    dir: &Path,
) -> Result<()> {
    let info = FineTunedInfo {
        task: m.task,
        prefix: m.prefix.clone(),
        config: m.config.clone(),
        max_seq_len,
        head: m.model.kind,
        regression_scale: m.regression_scale,
        truncation: m.truncation,
    };
    write_model_folder(dir, |w| m.model.walk(&info.prefix, w), &info, tokenizer)
}

pub fn load_finetuned(
    dir: &Path,
    device: &Device,
) -> Result<(FineTuned, WordPieceTokenizer, usize)> {
    let (info, weights, tokenizer) = read_model_folder::<FineTunedInfo>(dir)?;
    super::pretrained::check_model_fits(&info.config, &dir.join("finetuned.json"))?;
    let mut model = Classifier::new(
        &info.config.clone().without_dropout(),
        info.task.num_labels(),
        info.head,
        device,
    );
    load_weights(&weights, device, |l| model.walk(&info.prefix, l))?;
    Ok((
        FineTuned {
            model,
            task: info.task,
            prefix: info.prefix,
            config: info.config,
            regression_scale: info.regression_scale,
            truncation: info.truncation,
        },
        tokenizer,
        info.max_seq_len,
    ))
}
