//! Models: the shared encoder, BERT masked-LM, ELECTRA generator + discriminator, and heads.

pub mod bert;
pub mod config;
pub mod electra;
pub mod encoder;
pub mod footprint;
pub mod heads;
pub mod params;
pub mod precision;
pub mod step_heads;

pub(crate) use crate::kernels::host_ids;
pub use crate::kernels::seeds::seed;
pub use bert::BertMlm;
pub use config::EncoderConfig;
pub use electra::Electra;
pub use precision::Precision;

use burn::prelude::*;

/// One batch of encoder inputs, all [batch, len].
#[derive(Clone, Debug)]
pub struct Inputs {
    pub ids: Tensor<2, Int>,
    pub token_types: Tensor<2, Int>,
    /// 1 on real tokens, 0 on padding; `None` when nothing is padded (saves the mask add).
    pub attention_mask: Option<Tensor<2, Int>>,
}
