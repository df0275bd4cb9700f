//! GELU in its exact (erf) form, as transformers' `"gelu"`:
//!
//! `gelu(x) = x · Φ(x) = ½ · x · (1 + erf(x / √2))`, `gelu'(x) = Φ(x) + x · φ(x)`,
//! with `φ(x) = e^{−x²/2} / √(2π)`.
//!
//! burn's CPU kernels evaluate a scalar `erf` element by element in the forward pass and `erf` and
//! `exp` again in the backward pass; in a BERT step that was about a tenth of the time. Where the
//! fused kernels serve (f32 on the `flex` backend) value and derivative are computed together in
//! one vectorised parallel pass (`kernels::gelu`) and the backward pass is one multiply by the
//! saved derivative. On LibTorch devices it is LibTorch's `gelu` and `gelu_backward`. Other
//! devices use burn's `gelu`. `tests/kernels.rs` checks the first two against an f64 reference
//! (`tests/libtorch.rs` the LibTorch one against burn's).

use burn::prelude::*;
use burn::tensor::activation;

use crate::kernels;

/// GELU of `x`, with the gradient of the exact form.
pub fn gelu<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    if kernels::fused(&x.device(), x.dtype()) {
        kernels::gelu(x)
    } else if kernels::torch(&x.device()) {
        kernels::torch_gelu(x)
    } else {
        activation::gelu(x)
    }
}
