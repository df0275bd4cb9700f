//! Soft Regularization, word level (Zhang et al., AAAI 2023, §3.3).
//!
//! `L_reg = mean_k (1 − cos(E[y_k], E[p_k]))` over masked positions k, with `E` the (shared)
//! token-embedding matrix, `y_k` the gold token and `p_k = argmax z_k` the prediction (taken
//! without gradient; the gradient flows into both embedding rows). The cosine is
//! `a·b / sqrt(max(|a|²·|b|², ε²))` with ε = 1e-8, as torch's `cosine_similarity`.

use burn::prelude::*;

/// `embeddings` [vocab, dim]; `predicted`, `gold` [n]. Returns a [1] tensor.
pub fn word_regularization(
    embeddings: Tensor<2>,
    predicted: Tensor<1, Int>,
    gold: Tensor<1, Int>,
) -> Tensor<1> {
    const EPS: f64 = 1e-8;
    // One gather of both row sets: its backward scatters into one [vocab, dim] buffer, not two.
    let [n] = predicted.dims();
    let rows = embeddings.select(0, Tensor::cat(vec![predicted, gold], 0));
    let a = rows.clone().slice(0..n);
    let b = rows.slice(n..2 * n);
    let dot = (a.clone() * b.clone()).sum_dim(1);
    let norms = (a.clone() * a).sum_dim(1) * (b.clone() * b).sum_dim(1);
    let cos = dot / norms.clamp_min(EPS * EPS).sqrt();
    cos.neg().add_scalar(1.0).mean()
}
