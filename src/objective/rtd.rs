//! ELECTRA's replaced-token detection loss (discriminator side).
//!
//! `L_D = Σ_t m_t · BCE(x_t, r_t) / Σ_t m_t`, with `x_t` the discriminator logit, `r_t = 1` when
//! the input token differs from the original (a generator sample equal to the original counts as
//! original), `m_t = 1` on real (non-padding) tokens, and the numerically stable
//! `BCE(x, r) = max(x, 0) − x·r + log(1 + e^{−|x|})`.

use burn::prelude::*;
use burn::tensor::activation::relu;

/// The logged names of the discriminator's term and its accuracy.
pub const LOSS: &str = "disc_loss";
pub const ACCURACY: &str = "disc_accuracy";

/// How a reader calls them on a plot's axis.
pub const LABELS: [(&str, &str); 2] = [
    (LOSS, "discriminator loss (replaced-token detection)"),
    (ACCURACY, "discriminator accuracy"),
];

/// `logits`, `replaced` (0/1) and `weights` (0/1) all `[batch, len]`. Returns a `[1]` tensor.
pub fn replaced_token_loss(
    logits: Tensor<2>,
    replaced: Tensor<2>,
    weights: Tensor<2>,
) -> Tensor<1> {
    let per = relu(logits.clone()) - logits.clone() * replaced + logits.abs().neg().exp().log1p();
    let total = weights.clone().sum().clamp_min(1.0);
    (per * weights).sum() / total
}
