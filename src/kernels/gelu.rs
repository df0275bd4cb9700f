//! GELU in its exact (erf) form, as transformers' `"gelu"`, in one place: the facade model code
//! calls, our fused CPU kernel with its operation on burn's `flex` backend and its backward
//! step, the composed reference (burn's `gelu`), and LibTorch's call ([`torch`]) beside it.
//!
//! The formula:
//!
//! `gelu(x) = x · Φ(x) = ½ · x · (1 + erf(x / √2))`, `gelu'(x) = Φ(x) + x · φ(x)`,
//! with `φ(x) = e^{−x²/2} / √(2π)`.
//!
//! burn's CPU kernels evaluate a scalar `erf` element by element in the forward pass and `erf`
//! and `exp` again in the backward pass. Where the fused kernels serve (f32 on the `flex`
//! backend) value and derivative are computed together in one vectorised parallel pass and the
//! backward pass is one multiply by the saved derivative; on LibTorch devices it is LibTorch's
//! `gelu` and `gelu_backward`; elsewhere burn's `gelu` ([`gelu()`] chooses).
//! `tests/suite/kernels.rs` checks the first two against an f64 reference (`tests/libtorch.rs` the
//! LibTorch one against burn's).
//!
//! The pass: `e = e^{−x²/2}` once, and
//! `erf(|u|) = 1 − t·P(t)·e^{−u²}` with `t = 1 / (1 + 0.3275911·|u|)` (Abramowitz & Stegun
//! 7.1.26, absolute error < 1.5e-7; `e^{−u²}` is the same `e` since `u = x/√2`).

use std::mem::MaybeUninit;

use multiversion::multiversion;
use rayon::prelude::*;

use burn::prelude::*;

use super::select::{fused, torch};
use super::simd::exp_non_positive;

#[cfg(feature = "tch")]
pub mod torch;

/// GELU in its exact (erf) form: our fused kernel, LibTorch's call, or burn's (the composed
/// reference the kernels are checked against).
pub fn gelu<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    if fused(&x.device(), x.dtype()) {
        fused_call(x)
    } else if torch(&x.device()) {
        torch_call(x)
    } else {
        burn::tensor::activation::gelu(x)
    }
}

/// Our fused kernel as one burn operation. Only where [`fused`](super::fused) holds.
pub fn fused_call<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    Tensor::from_dispatch(extension_op!(
        "flex",
        flex_op::GeluOps,
        fused_gelu(x.into_dispatch())
    ))
}

/// LibTorch's `gelu` as one burn operation. Only where [`torch`](super::torch) holds.
pub fn torch_call<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    Tensor::from_dispatch(extension_op!(
        "tch",
        torch::TorchGelu,
        torch_gelu(x.into_dispatch())
    ))
}

const CHUNK: usize = 1 << 14;

/// `g ⊙ d`: the GELU's backward pass from the saved derivative.
pub fn backward(grad: &[f32], derivative: &[f32]) -> Vec<f32> {
    assert_eq!(grad.len(), derivative.len(), "gelu: gradient shape");
    // SAFETY: the chunks cover the buffer, and `product` writes every element of its chunk
    // (the three buffers have the same length, so the zipped chunks do too).
    let (out, ()) = unsafe {
        super::buffers::filled_by(grad.len(), |out| {
            out.par_chunks_mut(CHUNK)
                .zip(grad.par_chunks(CHUNK).zip(derivative.par_chunks(CHUNK)))
                .for_each(|(out, (g, d))| product(out, g, d))
        })
    };
    out
}

/// `out = g ⊙ d`.
#[multiversion(targets = "simd")]
fn product(out: &mut [MaybeUninit<f32>], g: &[f32], d: &[f32]) {
    for ((o, g), d) in out.iter_mut().zip(g).zip(d) {
        o.write(g * d);
    }
}

/// Value and (when `derivative`) derivative of the GELU at every element of `x`.
pub fn forward(x: &[f32], derivative: bool) -> (Vec<f32>, Vec<f32>) {
    let n = x.len();
    // SAFETY: the chunks cover each buffer, and both functions write every element of their
    // chunks (all buffers are `n` long, so the zipped chunks have the same lengths).
    unsafe {
        if derivative {
            super::buffers::filled_by(n, |y| {
                super::buffers::filled_by(n, |d| {
                    y.par_chunks_mut(CHUNK)
                        .zip(d.par_chunks_mut(CHUNK))
                        .zip(x.par_chunks(CHUNK))
                        .for_each(|((y, d), x)| values_and_derivatives(y, d, x))
                })
                .0
            })
        } else {
            let (y, ()) = super::buffers::filled_by(n, |y| {
                y.par_chunks_mut(CHUNK)
                    .zip(x.par_chunks(CHUNK))
                    .for_each(|(y, x)| values(y, x))
            });
            (y, Vec::new())
        }
    }
}

#[multiversion(targets = "simd")]
fn values_and_derivatives(y: &mut [MaybeUninit<f32>], d: &mut [MaybeUninit<f32>], x: &[f32]) {
    for ((y, d), &x) in y.iter_mut().zip(d.iter_mut()).zip(x) {
        let (value, derivative) = gelu_and_derivative(x);
        y.write(value);
        d.write(derivative);
    }
}

#[multiversion(targets = "simd")]
fn values(y: &mut [MaybeUninit<f32>], x: &[f32]) {
    for (y, &x) in y.iter_mut().zip(x) {
        y.write(gelu_and_derivative(x).0);
    }
}

#[inline(always)]
fn gelu_and_derivative(x: f32) -> (f32, f32) {
    const P: f32 = 0.327_591_1;
    const A: [f32; 5] = [
        0.254_829_6,
        -0.284_496_74,
        1.421_413_8,
        -1.453_152,
        1.061_405_4,
    ];
    const INV_SQRT_2PI: f32 = 0.398_942_3;
    let e = exp_non_positive(-0.5 * x * x);
    let t = 1.0 / (1.0 + P * x.abs() * std::f32::consts::FRAC_1_SQRT_2);
    let poly = t * (A[0] + t * (A[1] + t * (A[2] + t * (A[3] + t * A[4]))));
    let erf = (1.0 - poly * e).copysign(x);
    let cdf = 0.5 * (1.0 + erf);
    (x * cdf, cdf + x * e * INV_SQRT_2PI)
}

/// The kernel as an operation of burn's `flex` backend, and its backward step on
/// `Autodiff<Flex>` (one multiply by the saved derivative).
#[cfg(feature = "flex")]
mod flex_op {
    use burn::backend::TensorMetadata;
    use burn::backend::autodiff::checkpoint::base::Checkpointer;
    use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
    use burn::backend::autodiff::grads::Gradients;
    use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
    use burn::backend::flex::FlexTensor;
    use burn::backend::tensor::FloatTensor;
    use burn::backend::{Autodiff, Backend, Flex, backend_extension};

    use super::super::flex_tensors::{host, tensor};
    use super::{backward, forward};

    #[backend_extension(Flex, Autodiff)]
    pub trait GeluOps: Backend {
        fn fused_gelu(x: FloatTensor<Self>) -> FloatTensor<Self>;
    }

    impl GeluOps for Flex {
        fn fused_gelu(x: FlexTensor) -> FlexTensor {
            let (y, _) = forward(&host(&x), false);
            tensor(y, x.shape())
        }
    }

    impl<C: CheckpointStrategy> GeluOps for Autodiff<Flex, C> {
        fn fused_gelu(x: FloatTensor<Self>) -> FloatTensor<Self> {
            let guards = [x.node()];
            let x = x.into_primitive();
            match Step.prepare::<C>(guards).compute_bound().stateful() {
                OpsKind::Tracked(prep) => {
                    let shape = x.shape();
                    let (y, d) = forward(&host(&x), true);
                    prep.finish(tensor(d, shape.clone()), tensor(y, shape))
                }
                OpsKind::UnTracked(prep) => prep.finish(Flex::fused_gelu(x)),
            }
        }
    }

    /// The backward step; its state is the saved derivative.
    #[derive(Debug)]
    struct Step;

    impl Backward<Flex, 1> for Step {
        type State = FlexTensor;

        fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
            let grad = grads.consume::<Flex>(&ops.node);
            let [parent] = ops.parents;
            if let Some(node) = parent {
                let dx = backward(&host(&grad), &host(&ops.state));
                grads.register::<Flex>(node.id, tensor(dx, grad.shape()));
            }
        }
    }
}
