//! Models: the shared encoder, BERT masked-LM, ELECTRA generator + discriminator, and heads.

pub mod activation;
pub mod bert;
pub mod config;
pub mod dropout;
pub mod electra;
pub mod encoder;
pub mod heads;
pub mod params;
pub mod precision;
pub mod sampling;

pub use bert::BertMlm;
pub use config::EncoderConfig;
pub use dropout::seed;
pub use electra::Electra;
pub use precision::Precision;

use burn::backend::DispatchDevice;
use burn::prelude::*;

/// The values of an integer tensor (token ids, argmax indices) on the host, in row-major order.
pub(crate) fn host_ids<const D: usize>(t: Tensor<D, Int>) -> Vec<u32> {
    t.into_data()
        .convert::<i64>()
        .try_into_vec::<i64>()
        .expect("ids")
        .into_iter()
        .map(|v| v as u32)
        .collect()
}

/// Whether tensors on `device` live in host memory: the CPU fast paths (dropout masks, GELU)
/// are taken there; other devices use burn's own kernels and sampling.
#[allow(unreachable_patterns)]
pub(crate) fn on_host(device: &Device) -> bool {
    match device.clone().inner().as_dispatch() {
        #[cfg(feature = "flex")]
        DispatchDevice::Flex(_) => true,
        #[cfg(feature = "ndarray")]
        DispatchDevice::NdArray(_) => true,
        _ => false,
    }
}

/// One batch of encoder inputs, all [batch, len].
#[derive(Clone, Debug)]
pub struct Inputs {
    pub ids: Tensor<2, Int>,
    pub token_types: Tensor<2, Int>,
    /// 1 on real tokens, 0 on padding; `None` when nothing is padded (saves the mask add).
    pub attention_mask: Option<Tensor<2, Int>>,
}
