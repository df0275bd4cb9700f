//! Training objectives, one small file each, formula in its doc comment.

pub mod contrastive;
pub mod hard_correction;
pub mod mlm;
pub mod rtd;
pub mod sentence_regularization;
pub mod soft_regularization;

pub use contrastive::{ClineContrast, ClineOri, ClineRtd, ClineWeights};
pub use hard_correction::{CorrectionCounts, Prediction, correction_weights};
pub use mlm::masked_cross_entropy;
pub use rtd::replaced_token_loss;
pub use sentence_regularization::sentence_regularization;
pub use soft_regularization::word_regularization;

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Which true-negative objective a run trains with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ObjectiveKind {
    #[default]
    #[serde(rename = "baseline")]
    Baseline,
    #[serde(rename = "hc")]
    Hc,
    #[serde(rename = "sr")]
    Sr,
    #[serde(rename = "sr-sent")]
    SrSent,
    #[serde(rename = "hc+sr")]
    HcSr,
    /// CLINE (Wang et al., 2021): MLM + detection + contrast on synonym / antonym sentences
    /// (needs a corpus from `prepare --cline`).
    #[serde(rename = "cline")]
    Cline,
}

impl ObjectiveKind {
    pub const ALL: [Self; 6] = [
        Self::Baseline,
        Self::Hc,
        Self::Sr,
        Self::SrSent,
        Self::HcSr,
        Self::Cline,
    ];
    /// The config name (`objective.kind`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Baseline => "baseline",
            Self::Hc => "hc",
            Self::Sr => "sr",
            Self::SrSent => "sr-sent",
            Self::HcSr => "hc+sr",
            Self::Cline => "cline",
        }
    }
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }
    pub fn hard_correction(self) -> bool {
        matches!(self, Self::Hc | Self::HcSr)
    }
    pub fn word_regularization(self) -> bool {
        matches!(self, Self::Sr | Self::HcSr)
    }
    pub fn sentence_regularization(self) -> bool {
        matches!(self, Self::SrSent)
    }
}

/// HC on ELECTRA's discriminator (our extension): a sampled replacement that is a synonym of
/// the original is labelled "original" (`relabel`) or left out of L_D (`ignore`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DiscriminatorCorrection {
    #[default]
    Off,
    Relabel,
    Ignore,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ObjectiveConfig {
    pub kind: ObjectiveKind,
    /// Weight of word-level SR.
    pub sr_weight: f64,
    /// Weight of sentence-level SR.
    pub sr_sent_weight: f64,
    /// HC compares the gold token with the argmax (paper) or the generator's sample.
    pub hc_prediction: Prediction,
    pub hc_discriminator: DiscriminatorCorrection,
    /// Count multi-piece words whose predicted pieces spell a synonym (extension, off).
    pub hc_multi_piece: bool,
    /// Synonym table file (`trueneg lexicon build`); unset = WordNet table built for the run.
    pub lexicon: Option<PathBuf>,
    /// CLINE detection: `binary` (the paper) or `three-way` (the authors' code).
    pub cline_rtd: ClineRtd,
    /// CLINE contrast: `infonce` on [CLS] (the paper) or `bce` on the tanh pooler (the code).
    pub cline_contrast: ClineContrast,
    /// Which x_ori gives h_o: `masked` (the code: the MLM input) or `unmasked`.
    pub cline_ori: ClineOri,
    /// `fixed` (λ from `cline_lambdas`) or `learned` (the code's s_i).
    pub cline_weights: ClineWeights,
    /// λ1, λ2, λ3 of L = λ1 L_MLM + λ2 L_RTD + λ3 L_cts with fixed weights.
    pub cline_lambdas: [f64; 3],
}

impl Default for ObjectiveConfig {
    fn default() -> Self {
        Self {
            kind: ObjectiveKind::Baseline,
            sr_weight: 1.0,
            sr_sent_weight: 1.0,
            hc_prediction: Prediction::Argmax,
            hc_discriminator: DiscriminatorCorrection::Off,
            hc_multi_piece: false,
            lexicon: None,
            cline_rtd: ClineRtd::Binary,
            cline_contrast: ClineContrast::Infonce,
            cline_ori: ClineOri::Masked,
            cline_weights: ClineWeights::Fixed,
            cline_lambdas: [1.0, 1.0, 1.0],
        }
    }
}
