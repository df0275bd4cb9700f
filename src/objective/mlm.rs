//! Masked-LM cross-entropy over the masked positions only.
//!
//! `L_mlm = Σ_k w_k · (−log softmax(z_k)[y_k]) / Σ_k w_k`, with `z_k` the logits at masked
//! position k, `y_k` the gold token and `w_k ∈ {0, 1}` (1 for every position in plain MLM; Hard
//! Correction sets `w_k = 0` on corrected positions, which removes them from the normaliser too).
//! Without weights this is transformers' `CrossEntropyLoss` over labels ≠ −100.

use burn::prelude::*;
use burn::tensor::activation::log_softmax;

/// `logits` [n, vocab], `labels` [n]; `weights` [n] (0/1) or `None` for all ones.
/// Returns the mean loss as a [1] tensor; 0 when every weight is 0.
pub fn masked_cross_entropy(
    logits: Tensor<2>,
    labels: Tensor<1, Int>,
    weights: Option<Tensor<1>>,
) -> Tensor<1> {
    let [n, _] = logits.dims();
    let nll = log_softmax(logits, 1)
        .gather(1, labels.reshape([n, 1]))
        .reshape([n])
        .neg();
    match weights {
        None => nll.mean(),
        Some(w) => {
            let total = w.clone().sum().clamp_min(1.0);
            (nll * w).sum() / total
        }
    }
}
