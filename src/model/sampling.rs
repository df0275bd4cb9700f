//! The ELECTRA generator's replacement tokens: one draw per masked position from the
//! generator's `softmax(z)` at temperature 1, as the official ELECTRA code samples them.
//!
//! On host devices the logits are read once and each row is sampled by inverting its cumulative
//! distribution ([`kernels::sampling`](crate::kernels::sampling)), seeded from the same per-call
//! seeds as the dropout masks (so a resumed run draws the same tokens). Elsewhere (CUDA,
//! LibTorch) the draw stays on the device, by Gumbel-max: `argmax_j z_j − ln(−ln u_j)` with
//! `u_j ~ U(0, 1)` from burn's device RNG, and only the indices are read back.

use burn::prelude::*;
use burn::tensor::Distribution;

use super::{dropout, on_host};

/// One token id per row of `logits` `[rows, vocab]` (detached: sampling has no gradient).
pub fn sample(logits: &Tensor<2>) -> Vec<u32> {
    let logits = logits.clone().detach();
    if on_host(&logits.device()) {
        let [_, vocab] = logits.dims();
        let z = logits
            .into_data()
            .convert::<f32>()
            .try_into_vec::<f32>()
            .expect("f32 logits");
        return crate::kernels::sampling::sample_rows(&z, vocab, dropout::next_call_seed());
    }
    let u = logits.random_like(Distribution::Uniform(1e-9, 1.0));
    let gumbel = u.log().neg().log().neg();
    super::host_ids((logits + gumbel).argmax(1))
}
