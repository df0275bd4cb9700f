//! A model's config checked against the weights it is said to describe, before they are used:
//! an edited `config.toml` (one layer fewer, another width) would otherwise export a
//! `config.json` that contradicts its weights, and transformers would drop what does not fit
//! without a word.

use std::collections::BTreeMap;

use super::tensors::HostTensor;
use crate::model::EncoderConfig;
use crate::{Error, Result};

/// Checks the encoder `e` against the shapes of the tensors `shapes` of the encoder whose
/// names start with `prefix` (`bert.`, `electra.`): the layer count, the hidden width, the
/// feed-forward width, the embedding width and the positions. `source` names the weights and
/// `config` the file the config came from.
pub fn check_encoder_shapes(
    e: &EncoderConfig,
    shapes: &BTreeMap<String, HostTensor>,
    prefix: &str,
    source: &str,
    config: &str,
) -> Result<()> {
    // Weights named otherwise (another model class's layout) are matched by their loader.
    if !shapes.keys().any(|k| k.starts_with(prefix)) {
        return Ok(());
    }
    let layer = format!("{prefix}encoder.layer.");
    let layers = shapes
        .keys()
        .filter_map(|k| {
            k.strip_prefix(&layer)?
                .split('.')
                .next()?
                .parse::<usize>()
                .ok()
        })
        .map(|i| i + 1)
        .max()
        .unwrap_or(0);
    let refuse = |field: &str, config_value: usize, weights_value: usize| {
        Err(Error::Checkpoint(format!(
            "{config}: field `{field}` is {config_value}, the weights of {source} have {weights_value}; the config must describe its weights (was it edited?)"
        )))
    };
    if layers != e.num_hidden_layers {
        return refuse("num_hidden_layers", e.num_hidden_layers, layers);
    }
    let shape = |name: &str| shapes.get(&format!("{prefix}{name}")).map(|t| &t.shape);
    if let Some(s) = shape("encoder.layer.0.attention.self.query.weight")
        && s.first() != Some(&e.hidden_size)
    {
        return refuse("hidden_size", e.hidden_size, s[0]);
    }
    if let Some(s) = shape("encoder.layer.0.intermediate.dense.weight")
        && s.first() != Some(&e.intermediate_size)
    {
        return refuse("intermediate_size", e.intermediate_size, s[0]);
    }
    if let Some(s) = shape("embeddings.word_embeddings.weight")
        && s.get(1) != Some(&e.embedding_size)
    {
        return refuse("embedding_size", e.embedding_size, s[1]);
    }
    if let Some(s) = shape("embeddings.position_embeddings.weight")
        && s.first() != Some(&e.max_position_embeddings)
    {
        return refuse("max_position_embeddings", e.max_position_embeddings, s[0]);
    }
    Ok(())
}
