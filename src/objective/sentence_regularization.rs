//! Soft Regularization, sentence level (Zhang et al., AAAI 2023, §3.3).
//!
//! The masked sentence is filled with the model's predictions (argmax, no gradient) → `s_p`; the
//! encoder maps `s_p` and the original sentence `s` to hidden states `H_p`, `H_s` [batch, len,
//! hidden]. Per token t, both hidden vectors are turned into distributions over the hidden
//! dimensions with a softmax, `P_t = softmax(H_p[t])`, `Q_t = softmax(H_s[t])`, and
//!
//! `L_sent = (1 / #real tokens) · Σ_t Σ_j P_t[j] · (log P_t[j] − log Q_t[j])`  (KL(P ‖ Q)),
//!
//! averaged over real (non-padding) tokens. Gradients flow through both encoder passes. For
//! ELECTRA the encoder is the generator's (the model whose predictions are regularised).

use burn::prelude::*;
use burn::tensor::activation::{log_softmax, softmax};

/// `h_pred`, `h_orig`: [batch, len, hidden]; `real`: [batch, len] 0/1. Returns a [1] tensor.
pub fn sentence_regularization(h_pred: Tensor<3>, h_orig: Tensor<3>, real: Tensor<2>) -> Tensor<1> {
    let log_p = log_softmax(h_pred.clone(), 2);
    let log_q = log_softmax(h_orig, 2);
    let p = softmax(h_pred, 2);
    let kl: Tensor<2> = (p * (log_p - log_q)).sum_dim(2).squeeze_dim(2);
    let total = real.clone().sum().clamp_min(1.0);
    (kl * real).sum() / total
}
