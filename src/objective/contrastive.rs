//! CLINE's losses (Wang et al., ACL 2021) on a batch of (x_ori, x_syn, x_ant) triples.
//!
//! **Contrast, `infonce`** (the paper), with h the `[CLS]` vectors and f(u, v) = exp(u·v):
//! `L_cts = mean_b −log f(o,s) / (f(o,s) + f(o,a)) = mean_b softplus(o·a − o·s)`,
//! softplus(d) = max(d, 0) + log(1 + e^{−|d|}) (stable for any d).
//!
//! **Contrast, `bce`** (the authors' code), with p the tanh pooler outputs and
//! x(u, v) = mean_d(u ⊙ v): the synonym pair is a positive, the antonym pair a negative,
//! `L_cts = mean_b [BCE(x(o,s), 1) + BCE(x(o,a), 0)] = mean_b [softplus(−x(o,s)) + softplus(x(o,a))]`.
//!
//! **Detection.** Labels per piece: 0 kept candidate, 1 replaced in x_syn, 2 replaced in
//! x_ant, −100 ignored. `binary` (the authors' code: the candidate pieces only): one logit z
//! per piece, `L_RTD = Σ_t m_t BCE(z_t, [y_t > 0]) / Σ_t m_t`, m_t = [y_t ≠ −100];
//! `binary-all` (the paper's Eq. 4, as ELECTRA's RTD): the same over every real token of x_syn
//! and x_ant, a token that is not a replaced piece labelled 0; `three-way` (the code): three
//! logits per piece, `L_RTD = Σ_t m_t CE(z_t, y_t) / Σ_t m_t`.
//!
//! **Weights.** `learned` (the paper's Eq. 7, as the code does it; the default): one parameter
//! s_i per term, `L = Σ_i exp(−s_i) L_i + max(s_i, 0)`, trained with the model. `fixed`:
//! L = λ1 L_MLM + λ2 L_RTD + λ3 L_cts.

use burn::prelude::*;
use burn::tensor::activation::{log_softmax, relu};
use serde::{Deserialize, Serialize};

/// CLINE's replaced-token detection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClineRtd {
    /// One logit per candidate piece: replaced or not (the authors' code).
    #[default]
    Binary,
    /// One logit per real token of x_syn and x_ant: replaced or not (the paper's Eq. 4).
    BinaryAll,
    /// Kept / synonym-side / antonym-side (the authors' code).
    ThreeWay,
}

/// CLINE's contrast loss.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClineContrast {
    /// [`infonce_contrast`] on `[CLS]` (the paper).
    #[default]
    Infonce,
    /// [`bce_contrast`] on the tanh pooler (the authors' code).
    Bce,
}

/// Which x_ori the contrast reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClineOri {
    /// The masked MLM input (the authors' code).
    #[default]
    Masked,
    /// The sentence as it is (one more sequence per example in the forward pass).
    Unmasked,
}

/// How CLINE's three losses are weighted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClineWeights {
    /// λ from `objective.cline_lambdas`.
    Fixed,
    /// [`learned_weighting`] (the paper's Eq. 7, as the authors' code does it).
    #[default]
    Learned,
}

/// CLINE's keys of the `[objective]` section.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClineLossConfig {
    /// CLINE detection: `binary` (candidate pieces, the authors' code), `binary-all` (every
    /// token, the paper's Eq. 4) or `three-way` (the code's three classes).
    pub cline_rtd: ClineRtd,
    /// CLINE contrast: `infonce` on `[CLS]` (the paper) or `bce` on the tanh pooler (the code).
    pub cline_contrast: ClineContrast,
    /// Which x_ori gives h_o: `masked` (the code: the MLM input) or `unmasked`.
    pub cline_ori: ClineOri,
    /// `learned` (the paper's Eq. 7: trained s_i) or `fixed` (λ from `cline_lambdas`).
    pub cline_weights: ClineWeights,
    /// λ1, λ2, λ3 of L = λ1 L_MLM + λ2 L_RTD + λ3 L_cts with fixed weights.
    pub cline_lambdas: [f64; 3],
}

impl Default for ClineLossConfig {
    fn default() -> Self {
        Self {
            cline_rtd: ClineRtd::Binary,
            cline_contrast: ClineContrast::Infonce,
            cline_ori: ClineOri::Masked,
            cline_weights: ClineWeights::Learned,
            cline_lambdas: [1.0, 1.0, 1.0],
        }
    }
}

impl ClineLossConfig {
    pub fn validate(&self) -> std::result::Result<(), (String, String, String)> {
        let l = &self.cline_lambdas;
        if l.iter().all(|l| l.is_finite() && *l >= 0.0) && l.iter().any(|l| *l > 0.0) {
            Ok(())
        } else {
            Err((
                "objective.cline_lambdas".into(),
                format!("{l:?}"),
                "must be three finite weights >= 0, not all 0".into(),
            ))
        }
    }
}

/// softplus(x) = log(1 + e^x), stable for large |x|.
fn softplus<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    relu(x.clone()) + x.abs().neg().exp().log1p()
}

/// Row-wise dot products of two `[batch, dim]` matrices: `[batch]`.
fn dots(a: Tensor<2>, b: Tensor<2>) -> Tensor<1> {
    (a * b).sum_dim(1).squeeze_dim(1)
}

/// The paper's contrast loss on `[CLS]` vectors `o`, `s`, `a` (`[batch, dim]`); a `[1]` tensor.
pub fn infonce_contrast(o: Tensor<2>, s: Tensor<2>, a: Tensor<2>) -> Tensor<1> {
    let d = dots(o.clone(), a) - dots(o, s);
    softplus(d).mean()
}

/// The code's contrast loss on pooled vectors `o`, `s`, `a` (`[batch, dim]`); a `[1]` tensor.
pub fn bce_contrast(o: Tensor<2>, s: Tensor<2>, a: Tensor<2>) -> Tensor<1> {
    let dim = o.dims()[1] as f64;
    let xs = dots(o.clone(), s) / dim;
    let xa = dots(o, a) / dim;
    (softplus(xs.neg()) + softplus(xa)).mean()
}

/// Share of the batch where o·s > o·a (the metric logged as `syn_closer`).
pub fn syn_closer(o: Tensor<2>, s: Tensor<2>, a: Tensor<2>) -> Tensor<1> {
    let d = dots(o.clone(), s) - dots(o, a);
    d.greater_elem(0.0).float().mean()
}

/// Binary detection: `logits` [batch, len], `labels` [batch, len] (0 / 1 / 2 / −100).
pub fn binary_detection_loss(logits: Tensor<2>, labels: Tensor<2, Int>) -> Tensor<1> {
    let mask = labels.clone().not_equal_elem(-100).float();
    let target = labels.greater_elem(0).float();
    let per = relu(logits.clone()) - logits.clone() * target + logits.abs().neg().exp().log1p();
    (per * mask.clone()).sum() / mask.sum().clamp_min(1.0)
}

/// Three-way detection: `logits` [batch, len, 3], `labels` [batch, len] (0 / 1 / 2 / −100).
pub fn three_way_detection_loss(logits: Tensor<3>, labels: Tensor<2, Int>) -> Tensor<1> {
    let mask = labels.clone().not_equal_elem(-100);
    let safe = labels.mask_fill(mask.clone().bool_not(), 0);
    let logp = log_softmax(logits, 2);
    let picked = logp.gather(2, safe.unsqueeze_dim(2)).squeeze_dim(2);
    let m = mask.float();
    (picked.neg() * m.clone()).sum() / m.sum().clamp_min(1.0)
}

/// The learned weighting: `Σ_i exp(−s_i) L_i + max(s_i, 0)` for losses `l` and parameters
/// `s` (both `[n]`).
pub fn learned_weighting(l: Tensor<1>, s: Tensor<1>) -> Tensor<1> {
    (learned_coefficients(s.clone()) * l).sum() + learned_regulariser(s)
}

/// The weights `exp(−s_i)` of the losses in [`learned_weighting`].
pub fn learned_coefficients(s: Tensor<1>) -> Tensor<1> {
    s.neg().exp()
}

/// The part of [`learned_weighting`] that depends on no loss: `Σ_i max(s_i, 0)`.
pub fn learned_regulariser(s: Tensor<1>) -> Tensor<1> {
    relu(s).sum()
}
