//! A fine-tuned model's folder: `model.safetensors` (transformers names), `finetuned.json`
//! (what the task needs to use the model again) and `tokenizer.json`.

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
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let mut ex = Exporter::default();
    walk(&mut ex);
    write_safetensors(&dir.join("model.safetensors"), &ex.tensors, None)?;
    crate::error::write_atomic(
        &dir.join("finetuned.json"),
        serde_json::to_string_pretty(info).expect("json").as_bytes(),
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
    let path = dir.join("finetuned.json");
    serde_json::from_slice(&crate::error::read(&path)?)
        .map_err(|e| Error::Input(format!("{}: {e}", path.display())))
}

/// Reads what [`write_model_folder`] wrote: the info, the weights and the tokenizer.
pub(crate) fn read_model_folder<I: DeserializeOwned>(
    dir: &Path,
) -> Result<(I, TensorMap, WordPieceTokenizer)> {
    let info = read_model_info(dir)?;
    let weights = read_safetensors(&dir.join("model.safetensors"))?;
    let tokenizer = WordPieceTokenizer::load(&dir.join("tokenizer.json"))?;
    Ok((info, weights, tokenizer))
}
