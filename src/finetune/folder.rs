//! A fine-tuned model's folder: `model.safetensors` (transformers names), `finetuned.json`
//! (what the task needs to use the model again, and the fingerprint of its tokenizer) and
//! `tokenizer.json`, checked against that fingerprint whenever the folder is read.

use std::path::Path;

use burn::prelude::*;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::interop::tensors::{Exporter, Loader, TensorMap, read_safetensors, write_safetensors};
use crate::model::params::ParamWalker;
use crate::text::WordPieceTokenizer;
use crate::{Error, Result};

/// Writes a fine-tuned model folder: `model.safetensors` (the parameters `walk` visits),
/// `finetuned.json` (`info`) and `tokenizer.json`.
pub(crate) fn write_model_folder<I: Serialize>(
    dir: &Path,
    walk: impl FnOnce(&mut dyn ParamWalker),
    info: &I,
    tokenizer: &WordPieceTokenizer,
) -> Result<()> {
    crate::io::write::folder(dir)?;
    let mut ex = Exporter::default();
    walk(&mut ex);
    write_safetensors(&dir.join("model.safetensors"), &ex.tensors, None)?;
    let mut record = serde_json::to_value(info).expect("json");
    if let Some(fields) = record.as_object_mut() {
        fields.insert(FINGERPRINT.into(), tokenizer.fingerprint().into());
    }
    crate::io::write_atomic(
        &dir.join("finetuned.json"),
        serde_json::to_string_pretty(&record)
            .expect("json")
            .as_bytes(),
    )?;
    tokenizer.save(&dir.join("tokenizer.json"))
}

/// Loads a fine-tuned model folder's `weights` into the parameters `walk` visits (every one must
/// be there).
pub(crate) fn load_weights(
    weights: &TensorMap,
    device: &Device,
    walk: impl FnOnce(&mut Loader),
) -> Result<()> {
    let mut loader = Loader::new(weights, device);
    walk(&mut loader);
    loader.finish().map(drop)
}

/// The `finetuned.json` of a fine-tuned model folder, parsed as `I`.
pub(crate) fn read_model_info<I: DeserializeOwned>(dir: &Path) -> Result<I> {
    use crate::io::folder_kind::{FolderKind, expect};
    expect(
        dir,
        &[FolderKind::Finetuned],
        "--model",
        "a fine-tuned model (finetuned.json)",
    )?;
    let path = dir.join("finetuned.json");
    serde_json::from_slice(&crate::io::read::read(&path, crate::io::limit::SMALL)?)
        .map_err(|e| Error::Input(format!("{}: {e}", path.display())))
}

/// The field of `finetuned.json` that records the tokenizer's fingerprint.
const FINGERPRINT: &str = "tokenizer_fingerprint";

/// The fine-tuned model folder's `tokenizer.json`, checked against the fingerprint its
/// `finetuned.json` records; a record without one is refused (the check is never skipped).
pub(crate) fn model_tokenizer(dir: &Path) -> Result<WordPieceTokenizer> {
    let record: serde_json::Value = read_model_info(dir)?;
    let path = dir.join("tokenizer.json");
    match record.get(FINGERPRINT).and_then(|f| f.as_str()) {
        Some(f) => WordPieceTokenizer::load_checked(&path, f, &dir.join("finetuned.json")),
        None => Err(Error::Input(format!(
            "{}: no field `{FINGERPRINT}`, so its tokenizer cannot be checked (written by an older trueneg?); fine-tune the model again",
            dir.join("finetuned.json").display()
        ))),
    }
}

/// Reads what [`write_model_folder`] wrote: the info, the weights and the tokenizer.
pub(crate) fn read_model_folder<I: DeserializeOwned>(
    dir: &Path,
) -> Result<(I, TensorMap, WordPieceTokenizer)> {
    let info = read_model_info(dir)?;
    crate::io::tensor_file::require_fingerprint(&dir.join("model.safetensors"))?;
    let weights = read_safetensors(&dir.join("model.safetensors"))?;
    let tokenizer = model_tokenizer(dir)?;
    Ok((info, weights, tokenizer))
}
