//! Soft Regularization, sentence level (Zhang et al., AAAI 2023, §3.3).
//!
//! The masked sentence is filled with the model's predictions (argmax, no gradient) → `s_p`; the
//! encoder maps `s_p` and the original sentence `s` to hidden states `H_p`, `H_s` [batch, len,
//! hidden]. Per token t, both hidden vectors are turned into distributions over the hidden
//! dimensions with a softmax, `P_t = softmax(H_p[t])`, `Q_t = softmax(H_s[t])`, and
//!
//! `L_sent = (1 / #real tokens) · Σ_t Σ_j P_t[j] · (log P_t[j] − log Q_t[j])`  (KL(P ‖ Q)),
//!
//! averaged over real (non-padding) tokens.
//!
//! Two readings the paper leaves open, as keys:
//! - `sr_sent_target`: `fixed` (the default) stops the gradient into `H_s`: the paper calls
//!   `Q` the *expected* distribution, a target the prediction-filled sentence is pulled
//!   toward, as in knowledge distillation; `free` lets the gradient flow through both passes
//!   (the KL then also moves the original sentence's states toward the filled one's).
//! - `sr_sent_encoder` (ELECTRA): `generator` (the default: the model whose predictions fill
//!   `s_p`, as for word-level SR) or `discriminator` (the encoder that is kept after
//!   pre-training and fine-tuned). BERT has one encoder.
//!
//! In the loss: `+ sr_sent_weight · L_sent`, logged as `sr_sent_loss` (before the weight).

use burn::prelude::*;
use burn::tensor::activation::{log_softmax, softmax};
use serde::{Deserialize, Serialize};

use super::{MlmStep, ObjectiveConfig, Part, Setup, StepLoss, Term};
use crate::Result;
use crate::model::Inputs;

/// The logged name of the term.
pub const TERM: &str = "sr_sent_loss";

/// The part's name in [`super::ObjectiveKind`]'s registry.
pub const NAME: &str = "sr-sent";

/// Sentence-level SR's key of the `[objective]` section.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SrSentConfig {
    /// Weight of sentence-level SR.
    pub sr_sent_weight: f64,
    /// `fixed`: no gradient into the original sentence's states (the target); `free`: both.
    pub sr_sent_target: SentTarget,
    /// ELECTRA: the encoder regularised, `generator` or `discriminator`.
    pub sr_sent_encoder: SentEncoder,
}

impl Default for SrSentConfig {
    fn default() -> Self {
        Self {
            sr_sent_weight: 1.0,
            sr_sent_target: SentTarget::Fixed,
            sr_sent_encoder: SentEncoder::Generator,
        }
    }
}

/// Whether the original sentence's hidden states take gradient (see the module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SentTarget {
    #[default]
    Fixed,
    Free,
}

/// Which of ELECTRA's encoders sentence-level SR reads (see the module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SentEncoder {
    #[default]
    Generator,
    Discriminator,
}

impl super::PartConfig for SrSentConfig {
    fn term_labels() -> &'static [(&'static str, &'static str)] {
        &[(TERM, "sentence-level Soft Regularization term")]
    }

    fn validate(&self) -> std::result::Result<(), super::BadValue> {
        super::non_negative("objective.sr_sent_weight", self.sr_sent_weight)
    }
}

struct SentenceRegularization {
    weight: f64,
    target: SentTarget,
    encoder: SentEncoder,
}

/// The part when the kind includes sentence-level SR.
pub fn build(cfg: &ObjectiveConfig, _: &mut Setup) -> Result<Option<Box<dyn Part>>> {
    Ok(cfg.kind.has(NAME).then(|| {
        Box::new(SentenceRegularization {
            weight: cfg.parts.sr_sent.sr_sent_weight,
            target: cfg.parts.sr_sent.sr_sent_target,
            encoder: cfg.parts.sr_sent.sr_sent_encoder,
        }) as Box<dyn Part>
    }))
}

impl Part for SentenceRegularization {
    fn add_terms(&self, s: &MlmStep, loss: &mut StepLoss) {
        // s_p: the masked positions filled with the argmax.
        let xp = Inputs {
            ids: s.filled(s.argmax.clone()),
            ..s.inputs.clone()
        };
        let xs = Inputs {
            ids: s.filled(s.labels.clone()),
            ..s.inputs.clone()
        };
        let real = s.attention_mask().float();
        let encode = match (self.encoder, s.discriminator_encode) {
            (SentEncoder::Discriminator, Some(d)) => d,
            _ => s.encode,
        };
        let h_orig = match self.target {
            SentTarget::Fixed => encode(&xs).detach(),
            SentTarget::Free => encode(&xs),
        };
        let value = sentence_regularization(encode(&xp), h_orig, real);
        let term = Term::with(value, s.real_tokens());
        loss.add(TERM, term, self.weight);
    }
}

/// `h_pred`, `h_orig`: `[batch, len, hidden]`; `real`: `[batch, len]` 0/1. Returns a `[1]` tensor.
pub fn sentence_regularization(h_pred: Tensor<3>, h_orig: Tensor<3>, real: Tensor<2>) -> Tensor<1> {
    let log_p = log_softmax(h_pred.clone(), 2);
    let log_q = log_softmax(h_orig, 2);
    let p = softmax(h_pred, 2);
    let kl: Tensor<2> = (p * (log_p - log_q)).sum_dim(2).squeeze_dim(2);
    let total = real.clone().sum().clamp_min(1.0);
    (kl * real).sum() / total
}
