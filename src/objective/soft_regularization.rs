//! Soft Regularization, word level (Zhang et al., AAAI 2023, §3.3).
//!
//! `L_reg = mean_k (1 − cos(E[y_k], E[p_k]))` over masked positions k, with `E` the (shared)
//! token-embedding matrix, `y_k` the gold token and `p_k = argmax z_k` the prediction (taken
//! without gradient; the gradient flows into both embedding rows). The cosine is
//! `a·b / sqrt(max(|a|²·|b|², ε²))` with ε = 1e-8, as torch's `cosine_similarity`.
//!
//! In the loss: `+ sr_weight · L_reg`, logged as `sr_loss` (before the weight).
//!
//! The paper's Eq. 4 *sums* the distances over an input's masked positions
//! (`objective.sr_reduction = "sum"`: the batch's sum over its sequences, the mean of the
//! per-sequence sums). The default, `"mean"`, averages them over the masked positions, as every
//! implementation of the masked-LM loss it is added to does (BERT's, ELECTRA's, transformers'),
//! so that `sr_weight` weighs the two terms alike whatever the batch size or masking rate; the
//! sum is that mean times the masked positions per sequence (about 19 at 128 tokens), and takes
//! a weight that much smaller for the same balance.

use burn::prelude::*;
use serde::{Deserialize, Serialize};

use super::{Count, MlmStep, ObjectiveConfig, Part, Setup, StepLoss, Term};
use crate::Result;

/// The part's name in [`super::ObjectiveKind`]'s registry.
pub const NAME: &str = "sr";

/// Word-level SR's key of the `[objective]` section.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SrConfig {
    /// Weight of word-level SR.
    pub sr_weight: f64,
    /// How the distances of the masked positions make the term (see the module's
    /// documentation).
    pub sr_reduction: SrReduction,
}

/// The reduction of word-level SR's distances over the masked positions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SrReduction {
    /// Their mean over the batch's masked positions (as the masked-LM loss).
    #[default]
    Mean,
    /// Their sum over each sequence's masked positions, the paper's Eq. 4, averaged over the
    /// batch's sequences.
    Sum,
}

impl Default for SrConfig {
    fn default() -> Self {
        Self {
            sr_weight: 1.0,
            sr_reduction: SrReduction::Mean,
        }
    }
}

impl super::PartConfig for SrConfig {
    fn term_labels() -> &'static [(&'static str, &'static str)] {
        &LABELS
    }

    fn validate(&self) -> std::result::Result<(), super::BadValue> {
        super::non_negative("objective.sr_weight", self.sr_weight)
    }
}

struct WordRegularization {
    weight: f64,
    reduction: SrReduction,
}

/// The part when the kind includes word-level SR.
pub fn build(cfg: &ObjectiveConfig, _: &mut Setup) -> Result<Option<Box<dyn Part>>> {
    Ok(cfg.kind.has(NAME).then(|| {
        Box::new(WordRegularization {
            weight: cfg.parts.sr.sr_weight,
            reduction: cfg.parts.sr.sr_reduction,
        }) as Box<dyn Part>
    }))
}

/// The logged name of the term, and how a reader calls it.
pub const TERM: &str = "sr_loss";
pub const LABELS: [(&str, &str); 1] = [(TERM, "Soft Regularization term")];

impl Part for WordRegularization {
    fn add_terms(&self, s: &MlmStep, loss: &mut StepLoss) {
        let distances = cosine_distances(s.words.clone(), s.argmax.clone(), s.labels.clone());
        let term = match self.reduction {
            SrReduction::Mean => Term::with(s.mean_over_masked(distances), s.masked_count()),
            SrReduction::Sum => {
                let total = match &s.valid {
                    Some(v) => (distances * v.clone()).sum(),
                    None => distances.sum(),
                };
                let rows = s.batch.batch.max(1) as f64;
                Term::with(total / rows, Count::Host(rows))
            }
        };
        loss.add(TERM, term, self.weight);
    }
}

/// `embeddings` `[vocab, dim]`; `predicted`, `gold` `[n]`. Returns a `[1]` tensor.
pub fn word_regularization(
    embeddings: Tensor<2>,
    predicted: Tensor<1, Int>,
    gold: Tensor<1, Int>,
) -> Tensor<1> {
    cosine_distances(embeddings, predicted, gold).mean()
}

/// `1 − cos(e(predicted_k), e(gold_k))` for each k: `[n]`.
pub fn cosine_distances(
    embeddings: Tensor<2>,
    predicted: Tensor<1, Int>,
    gold: Tensor<1, Int>,
) -> Tensor<1> {
    const EPS: f64 = 1e-8;
    // One gather of both row sets: its backward scatters into one [vocab, dim] buffer, not two.
    let [n] = predicted.dims();
    let rows = crate::kernels::select_rows(embeddings, Tensor::cat(vec![predicted, gold], 0));
    let a = rows.clone().slice(0..n);
    let b = rows.slice(n..2 * n);
    let dot = (a.clone() * b.clone()).sum_dim(1);
    let norms = (a.clone() * a).sum_dim(1) * (b.clone() * b).sum_dim(1);
    let cos = dot / norms.clamp_min(EPS * EPS).sqrt();
    cos.neg().add_scalar(1.0).reshape([n])
}
