//! How much memory an encoder takes, estimated from its config before anything is allocated
//! (f64 throughout: a mistyped size must not overflow). The figures are floors: the
//! allocator's slack and transient copies come on top.
//!
//! - per parameter: the weights; in training also their gradient and AdamW's two moments;
//! - per encoder layer and row of length L, kept for the backward pass in training: about
//!   L·(10·H + 2·I) values for the projections, normalisations and feed-forward, and
//!   3·heads·L² for the attention scores, probabilities and dropout mask;
//! - the embeddings: L·(3·E + 2·H) values a row.

use super::config::EncoderConfig;

const F32: f64 = 4.0;

/// Parameters of one encoder with its embeddings (heads aside: they are small next to it).
pub fn parameters(e: &EncoderConfig) -> f64 {
    let [v, emb, h, i] = [
        e.vocab_size,
        e.embedding_size,
        e.hidden_size,
        e.intermediate_size,
    ]
    .map(|x| x as f64);
    let embeddings = (v + e.max_position_embeddings as f64 + e.type_vocab_size as f64) * emb
        + 2.0 * emb
        + if emb == h { 0.0 } else { emb * h + h };
    let layer = 4.0 * (h * h + h) + 2.0 * h * i + i + h + 4.0 * h;
    embeddings + e.num_hidden_layers as f64 * layer
}

/// Activation values one encoder keeps for the backward pass on `rows` rows of `len` tokens.
pub fn activations(e: &EncoderConfig, rows: f64, len: f64) -> f64 {
    let [emb, h, i, heads] = [
        e.embedding_size,
        e.hidden_size,
        e.intermediate_size,
        e.num_attention_heads,
    ]
    .map(|x| x as f64);
    let layer = rows * len * (10.0 * h + 2.0 * i) + 3.0 * rows * heads * len * len;
    rows * len * (3.0 * emb + 2.0 * h) + e.num_hidden_layers as f64 * layer
}

/// Bytes of the encoder's weights.
pub fn weights_bytes(e: &EncoderConfig) -> f64 {
    F32 * parameters(e)
}

/// Bytes a training step on `rows` rows of `len` tokens needs: weights, gradients, AdamW's
/// moments and the activations kept for the backward pass.
pub fn training_bytes(e: &EncoderConfig, rows: usize, len: usize) -> f64 {
    F32 * (4.0 * parameters(e) + activations(e, rows as f64, len as f64))
}

/// Bytes a forward pass on `rows` rows of `len` tokens needs: the weights and one layer's
/// values at a time.
pub fn inference_bytes(e: &EncoderConfig, rows: usize, len: usize) -> f64 {
    let one_layer = EncoderConfig {
        num_hidden_layers: 1,
        ..e.clone()
    };
    F32 * (parameters(e) + activations(&one_layer, rows as f64, len as f64))
}
