//! Soft Regularization, word level (Zhang et al., AAAI 2023, §3.3).
//!
//! `L_reg = mean_k (1 − cos(E[y_k], E[p_k]))` over masked positions k, with `E` the (shared)
//! token-embedding matrix, `y_k` the gold token and `p_k = argmax z_k` the prediction (taken
//! without gradient; the gradient flows into both embedding rows). The cosine is
//! `a·b / sqrt(max(|a|²·|b|², ε²))` with ε = 1e-8, as torch's `cosine_similarity`.
//!
//! In the loss: `+ sr_weight · L_reg`, logged as `sr_loss` (before the weight), averaged over
//! the masked positions.

use burn::prelude::*;
use serde::{Deserialize, Serialize};

use super::{MlmStep, ObjectiveConfig, Part, Setup, StepLoss, Term};
use crate::Result;

/// The part's name in [`super::ObjectiveKind`]'s registry.
pub const NAME: &str = "sr";

/// Word-level SR's key of the `[objective]` section.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SrConfig {
    /// Weight of word-level SR.
    pub sr_weight: f64,
}

impl Default for SrConfig {
    fn default() -> Self {
        Self { sr_weight: 1.0 }
    }
}

impl SrConfig {
    pub fn validate(&self) -> std::result::Result<(), (String, String, String)> {
        super::non_negative("objective.sr_weight", self.sr_weight)
    }
}

struct WordRegularization {
    weight: f64,
}

/// The part when the kind includes word-level SR.
pub fn build(cfg: &ObjectiveConfig, _: &mut Setup) -> Result<Option<Box<dyn Part>>> {
    Ok(cfg.kind.has(NAME).then(|| {
        Box::new(WordRegularization {
            weight: cfg.sr.sr_weight,
        }) as Box<dyn Part>
    }))
}

/// The logged name of the term, and how a reader calls it.
pub const TERM: &str = "sr_loss";
pub const LABELS: [(&str, &str); 1] = [(TERM, "Soft Regularization term")];

impl Part for WordRegularization {
    fn add_terms(&self, s: &MlmStep, loss: &mut StepLoss) {
        let distances = cosine_distances(s.words.clone(), s.argmax.clone(), s.labels.clone());
        let term = Term::with(s.mean_over_masked(distances), s.masked_count());
        loss.add(TERM, term, self.weight);
    }
}

/// `embeddings` [vocab, dim]; `predicted`, `gold` [n]. Returns a [1] tensor.
pub fn word_regularization(
    embeddings: Tensor<2>,
    predicted: Tensor<1, Int>,
    gold: Tensor<1, Int>,
) -> Tensor<1> {
    cosine_distances(embeddings, predicted, gold).mean()
}

/// `1 − cos(e(predicted_k), e(gold_k))` for each k: [n].
pub fn cosine_distances(
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
    cos.neg().add_scalar(1.0).reshape([n])
}
