//! Masked-LM cross-entropy over the masked positions only.
//!
//! `L_mlm = Σ_k w_k · (−log softmax(z_k)[y_k]) / Σ_k w_k`, with `z_k` the logits at masked
//! position k, `y_k` the gold token and `w_k ∈ {0, 1}` (1 for every position in plain MLM; Hard
//! Correction sets `w_k = 0` on corrected positions, which removes them from the normaliser too).
//! Without weights this is transformers' `CrossEntropyLoss` over labels ≠ −100.
//!
//! How it is computed: the per-position loss is `lse(z) − z[y]` and its gradient `softmax(z) −
//! onehot(y)`. Composing log-softmax from autodiff primitives walks the [n, vocab] logits about a
//! dozen times and evaluates `exp` twice (forward and backward), single-threaded on the CPU
//! backends, and the gather of `z[y]` scatters its gradient into another [n, vocab] buffer.
//! Instead, outside the graph, `p = softmax(z)` (the backend's fused kernel), `lse = max(z) −
//! ln(max(p))` (no underflow: `max(p) ≥ 1/vocab`) and `q = p − onehot(y)`; the graph only holds
//! `s = Σ_j q_j z_j` (q constant): `nll = (s − detach(s)) + lse − z[y]` has the value
//! `lse − z[y]` and the gradient `q`, exactly the cross-entropy's.
//! On the `flex` CPU backend the per-position loss is one fused operation instead
//! (`kernels::cross_entropy`: one parallel pass forward, one backward); on LibTorch devices it is
//! LibTorch's `log_softmax` and the label's entry, differentiated by LibTorch
//! (`kernels::cross_entropy::torch_call`).
//! `tests/suite/objective_formulas.rs` checks value and gradient against the textbook formula.

use burn::prelude::*;

use crate::kernels;

/// The logged names of the masked-LM term and its accuracy (BERT's MLM, ELECTRA's generator).
pub const LOSS: &str = "mlm_loss";
pub const ACCURACY: &str = "mlm_accuracy";

/// How a reader calls them on a plot's axis.
pub const LABELS: [(&str, &str); 2] = [
    (LOSS, "masked-LM loss (generator's for ELECTRA)"),
    (ACCURACY, "masked-LM accuracy"),
];

/// `logits` `[n, vocab]`, `labels` `[n]`; `weights` `[n]` (0/1) or `None` for all ones.
/// Returns the mean loss as a `[1]` tensor; 0 when every weight is 0.
pub fn masked_cross_entropy(
    logits: Tensor<2>,
    labels: Tensor<1, Int>,
    weights: Option<Tensor<1>>,
) -> Tensor<1> {
    weighted_mean(kernels::cross_entropy(logits, labels), weights)
}

/// The mean of per-position losses `nll` `[n]` over the positions `weights` keeps (`None`:
/// all), as a `[1]` tensor; 0 when every weight is 0. [`masked_cross_entropy`] from
/// `kernels::cross_entropy`'s (or `cross_entropy_and_argmax`'s) per-position values.
pub fn weighted_mean(nll: Tensor<1>, weights: Option<Tensor<1>>) -> Tensor<1> {
    match weights {
        None => nll.mean(),
        Some(w) => {
            let total = w.clone().sum().clamp_min(1.0);
            (nll * w).sum() / total
        }
    }
}
