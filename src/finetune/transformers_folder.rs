//! A transformers sequence-classification folder (`ElectraForSequenceClassification`,
//! `BertForSequenceClassification`: trueneg's export or another's, such as run_glue's output)
//! read as a fine-tuned model, so that `evaluate` scores it as it scores its own.
//!
//! The task is the folder's `config.json` `finetuning_task`. The model's classes are matched to
//! the task's by their names in `id2label` (the task's own names, the Hub's GLUE names, or
//! `LABEL_i`), and the output layer's rows are put in the task's order: a model whose MNLI
//! classes come as (entailment, neutral, contradiction) predicts the task's classes.

use std::path::Path;

use burn::prelude::*;

use super::classifier_folder::load_finetuned;
use super::classify::{Classifier, ClsHead, FineTuned};
use super::export::hub_label_names;
use crate::interop::read_hf_config;
use crate::interop::tensors::{HostTensor, read_safetensors};
use crate::tasks::glue::GlueTask;
use crate::text::WordPieceTokenizer;
use crate::text::pairs::Truncation;
use crate::{Error, Result};

/// Tokens per example when the folder does not say (GLUE's 128, within the model's positions).
const MAX_LEN: usize = 128;

/// A fine-tuned classifier from `dir`: a trueneg fine-tuned folder (`finetuned.json`) or a
/// transformers sequence-classification folder; with its tokenizer and example length.
pub fn load_classifier(
    dir: &Path,
    device: &Device,
) -> Result<(FineTuned, WordPieceTokenizer, usize)> {
    if crate::io::read::exists(&dir.join("finetuned.json")) {
        return load_finetuned(dir, device);
    }
    let config_path = dir.join("config.json");
    let hf = read_hf_config(&config_path)?;
    let fields = &hf.task_fields;
    let task = super::span::transformers_task(fields, &config_path)?
        .classification()
        .ok_or_else(|| {
            Error::Input(format!(
                "{}: a question-answering folder; evaluate reads SQuAD models that trueneg fine-tuned (their seed-N folder)",
                dir.display()
            ))
        })?;
    super::pretrained::check_model_fits(&hf.encoder, &config_path)?;
    let head = match hf.model_type.as_str() {
        "electra" => ClsHead::ElectraTransformers,
        "bert" => ClsHead::BertPooler,
        other => {
            return Err(Error::Input(format!(
                "{}: model_type {other:?}; a classification folder of electra or bert is read",
                config_path.display()
            )));
        }
    };
    let weights_path = dir.join("model.safetensors");
    let mut weights = read_safetensors(&weights_path)?;
    let tokenizer = super::pretrained::folder_tokenizer(dir, &weights_path)?;
    if !task.is_regression() {
        let order = label_order(task, fields, &config_path)?;
        let layer = match head {
            ClsHead::ElectraTransformers => "classifier.out_proj",
            _ => "classifier",
        };
        for part in ["weight", "bias"] {
            let name = format!("{layer}.{part}");
            let t = weights.tensors.get_mut(&name).ok_or_else(|| {
                Error::Checkpoint(format!("{}: no tensor `{name}`", weights_path.display()))
            })?;
            *t = in_task_order(t, &order, &name, &weights_path)?;
        }
    }
    let mut model = Classifier::new(
        &hf.encoder.clone().without_dropout(),
        task.num_labels(),
        head,
        device,
    );
    super::folder::load_weights(&weights, device, |l| model.walk(&hf.model_type, l))?;
    // A trueneg export says how its examples were read; another folder is read as run_glue
    // reads it (128 tokens, longest first).
    let max_len = fields
        .get(crate::interop::hf_config::INPUT_LENGTH)
        .and_then(|v| v.as_u64())
        .map_or(MAX_LEN, |n| n as usize)
        .min(hf.encoder.max_position_embeddings);
    let truncation = fields
        .get(crate::interop::hf_config::TRUNCATION)
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or(Truncation::LongestFirst);
    Ok((
        FineTuned {
            model,
            task,
            prefix: hf.model_type,
            config: hf.encoder,
            regression_scale: 1.0,
            truncation,
        },
        tokenizer,
        max_len,
    ))
}

/// For each of the model's outputs, the task's class it is: by its `id2label` name (the task's
/// own, the Hub's GLUE name, or `LABEL_i`, case aside); the outputs in order without names.
fn label_order(
    task: GlueTask,
    fields: &serde_json::Map<String, serde_json::Value>,
    config: &Path,
) -> Result<Vec<usize>> {
    let n = task.num_labels();
    let Some(id2label) = fields.get("id2label").and_then(|v| v.as_object()) else {
        return Ok((0..n).collect());
    };
    if id2label.len() != n {
        return Err(Error::Input(format!(
            "{}: id2label has {} classes, {} has {n}",
            config.display(),
            id2label.len(),
            task.dir_name()
        )));
    }
    let ours = task.labels();
    let hub = hub_label_names(task);
    let mut order = vec![usize::MAX; n];
    for (i, slot) in order.iter_mut().enumerate() {
        let name = id2label
            .get(&i.to_string())
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_lowercase();
        let class = (0..n).find(|&j| {
            name == ours[j].to_lowercase() || name == hub[j] || name == format!("label_{j}")
        });
        *slot = class.ok_or_else(|| {
            Error::Input(format!(
                "{}: id2label class {i} is {name:?}, none of {}'s ({})",
                config.display(),
                task.dir_name(),
                hub.join(", ")
            ))
        })?;
    }
    let mut seen = order.clone();
    seen.sort();
    seen.dedup();
    if seen.len() != n {
        return Err(Error::Input(format!(
            "{}: id2label names one of {}'s classes twice",
            config.display(),
            task.dir_name()
        )));
    }
    Ok(order)
}

/// `t` (an output layer's weight, [classes, hidden], or bias, [classes]) with its rows in the
/// task's order: row `order[i]` is the model's row `i`.
fn in_task_order(t: &HostTensor, order: &[usize], name: &str, file: &Path) -> Result<HostTensor> {
    let rows = t.shape.first().copied().unwrap_or(0);
    if rows != order.len() {
        return Err(Error::Checkpoint(format!(
            "{}: `{name}` has {rows} rows for {} classes",
            file.display(),
            order.len()
        )));
    }
    let width = t.values.len() / rows.max(1);
    let mut values = vec![0f32; t.values.len()];
    for (i, &j) in order.iter().enumerate() {
        values[j * width..(j + 1) * width].copy_from_slice(&t.values[i * width..(i + 1) * width]);
    }
    Ok(HostTensor {
        values,
        shape: t.shape.clone(),
    })
}
