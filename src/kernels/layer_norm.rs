//! LayerNorm over the last dimension, in one place: the facade model code calls, our fused
//! CPU kernel (forward and backward on the host) with its operation on burn's `flex` backend
//! and its backward step, and the composed reference (burn's module); LibTorch's call is
//! [`torch`] beside it.
//!
//! The formula:
//!
//! `μ = mean(x)`, `σ² = mean((x − μ)²)`, `r = 1 / √(σ² + ε)`, `x̂ = (x − μ) · r`,
//! `y = x̂ ⊙ γ + β`; with `g = ∂L/∂y` and `ĝ = g ⊙ γ`:
//!
//! `∂x = r · (ĝ − mean(ĝ) − x̂ · mean(ĝ ⊙ x̂))`, `∂γ = Σ_rows g ⊙ x̂`, `∂β = Σ_rows g`.
//!
//! burn composes this from about nine tensor operations, each a pass over memory with its own
//! backward. Here a row is read once forward (two sweeps over one row in cache) and once
//! backward. Rows are processed in parallel in fixed blocks; the parameter gradients are summed
//! per block and the blocks added in order, so the result does not depend on the thread count.

use std::mem::MaybeUninit;

use multiversion::multiversion;
use rayon::prelude::*;

use burn::prelude::*;

use super::select::{fused, torch};
use super::simd::{sum_map, two_dots};

#[cfg(feature = "tch")]
pub mod torch;

/// LayerNorm `ln` (made with `eps`) of `x`'s last dimension: our fused kernel, LibTorch's call,
/// or burn's module (the composed reference the kernels are checked against).
pub fn layer_norm<const D: usize>(ln: &burn::nn::LayerNorm, eps: f64, x: Tensor<D>) -> Tensor<D> {
    match &ln.beta {
        Some(beta) if fused(&x.device(), x.dtype()) => {
            fused_call(x, ln.gamma.val(), beta.val(), eps)
        }
        Some(beta) if torch(&x.device()) => torch_call(x, ln.gamma.val(), beta.val(), eps),
        _ => ln.forward(x),
    }
}

/// Our fused kernel as one burn operation. Only where [`fused`](super::fused) holds.
pub fn fused_call<const D: usize>(
    x: Tensor<D>,
    gamma: Tensor<1>,
    beta: Tensor<1>,
    eps: f64,
) -> Tensor<D> {
    Tensor::from_dispatch(extension_op!(
        "flex",
        flex_op::LayerNormOps,
        fused_layer_norm(
            x.into_dispatch(),
            gamma.into_dispatch(),
            beta.into_dispatch(),
            eps,
        )
    ))
}

/// LibTorch's `layer_norm` as one burn operation. Only where [`torch`](super::torch) holds.
pub fn torch_call<const D: usize>(
    x: Tensor<D>,
    gamma: Tensor<1>,
    beta: Tensor<1>,
    eps: f64,
) -> Tensor<D> {
    Tensor::from_dispatch(extension_op!(
        "tch",
        torch::TorchLayerNorm,
        torch_layer_norm(
            x.into_dispatch(),
            gamma.into_dispatch(),
            beta.into_dispatch(),
            eps,
        )
    ))
}

/// Rows per parallel task (also the unit of the deterministic γ/β gradient sums).
const BLOCK: usize = 32;

/// What the backward pass needs: `x̂` (as `x`) and `r` per row.
#[derive(Clone, Debug, Default)]
pub struct Saved {
    pub normalized: Vec<f32>,
    pub rstd: Vec<f32>,
}

/// `y` for rows of `gamma.len()` elements, and, when `keep`, `x̂` and `r`.
pub fn forward(x: &[f32], gamma: &[f32], beta: &[f32], eps: f64, keep: bool) -> (Vec<f32>, Saved) {
    let h = gamma.len();
    assert!(
        h > 0 && x.len().is_multiple_of(h),
        "layer norm: input width"
    );
    assert_eq!(beta.len(), h, "layer norm: beta width");
    let (n, rows) = (x.len(), x.len() / h);
    // SAFETY: the blocks cover each buffer, and `normalize_rows` writes every element of its
    // blocks (whole rows of `h`; the buffers are `x`'s length, so the zipped blocks match).
    unsafe {
        super::buffers::filled_by(n, |y| {
            if !keep {
                y.par_chunks_mut(BLOCK * h)
                    .zip(x.par_chunks(BLOCK * h))
                    .for_each(|(y, x)| normalize_rows(x, y, None, gamma, beta, eps));
                return Saved::default();
            }
            let mut rstd = vec![0f32; rows];
            let (normalized, ()) = super::buffers::filled_by(n, |xn| {
                y.par_chunks_mut(BLOCK * h)
                    .zip(xn.par_chunks_mut(BLOCK * h))
                    .zip(rstd.par_chunks_mut(BLOCK))
                    .zip(x.par_chunks(BLOCK * h))
                    .for_each(|(((y, xn), r), x)| {
                        normalize_rows(x, y, Some((xn, r)), gamma, beta, eps)
                    })
            });
            Saved { normalized, rstd }
        })
    }
}

/// `y` of a block of rows, and, when `keep` holds buffers, their `x̂` and `r`.
#[multiversion(targets = "simd")]
fn normalize_rows(
    x: &[f32],
    y: &mut [MaybeUninit<f32>],
    mut keep: Option<(&mut [MaybeUninit<f32>], &mut [f32])>,
    gamma: &[f32],
    beta: &[f32],
    eps: f64,
) {
    let h = gamma.len();
    for (i, (y, x)) in y.chunks_exact_mut(h).zip(x.chunks_exact(h)).enumerate() {
        let mean = sum_map(x, |v| v) / h as f32;
        let var = sum_map(x, |v| (v - mean) * (v - mean)) / h as f32;
        let r = (1.0 / (var as f64 + eps).sqrt()) as f32;
        match keep.as_mut() {
            Some((xn, rstd)) => {
                rstd[i] = r;
                let xn = &mut xn[i * h..(i + 1) * h];
                for j in 0..h {
                    let n = (x[j] - mean) * r;
                    xn[j].write(n);
                    y[j].write(n * gamma[j] + beta[j]);
                }
            }
            None => {
                for j in 0..h {
                    y[j].write((x[j] - mean) * r * gamma[j] + beta[j]);
                }
            }
        }
    }
}

/// `(∂x, ∂γ, ∂β)` from `g = ∂L/∂y`.
pub fn backward(grad: &[f32], saved: &Saved, gamma: &[f32]) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let h = gamma.len();
    assert_eq!(
        grad.len(),
        saved.normalized.len(),
        "layer norm: gradient shape"
    );
    // Per block: ∂γ then ∂β partial sums.
    // SAFETY: the blocks cover the buffer, and `backward_rows` writes every element of its
    // block (whole rows; `grad` and `x̂` have the buffer's length, so the zipped blocks match).
    let (dx, partials) = unsafe {
        super::buffers::filled_by(grad.len(), |dx| {
            dx.par_chunks_mut(BLOCK * h)
                .zip(grad.par_chunks(BLOCK * h))
                .zip(saved.normalized.par_chunks(BLOCK * h))
                .zip(saved.rstd.par_chunks(BLOCK))
                .map(|(((dx, g), xn), r)| backward_rows(dx, g, xn, r, gamma))
                .collect::<Vec<Vec<f32>>>()
        })
    };
    let mut dgamma = vec![0f32; h];
    let mut dbeta = vec![0f32; h];
    for sums in &partials {
        for j in 0..h {
            dgamma[j] += sums[j];
            dbeta[j] += sums[h + j];
        }
    }
    (dx, dgamma, dbeta)
}

/// `∂x` of a block of rows, and the block's partial sums of `∂γ` then `∂β`.
#[multiversion(targets = "simd")]
fn backward_rows(
    dx: &mut [MaybeUninit<f32>],
    g: &[f32],
    xn: &[f32],
    r: &[f32],
    gamma: &[f32],
) -> Vec<f32> {
    let h = gamma.len();
    let mut sums = vec![0f32; 2 * h];
    let (dgamma, dbeta) = sums.split_at_mut(h);
    for (((dx, g), xn), &r) in dx
        .chunks_exact_mut(h)
        .zip(g.chunks_exact(h))
        .zip(xn.chunks_exact(h))
        .zip(r)
    {
        let (m1, m2) = two_dots(g, gamma, xn);
        for j in 0..h {
            dgamma[j] += g[j] * xn[j];
            dbeta[j] += g[j];
        }
        let (m1, m2) = (m1 / h as f32, m2 / h as f32);
        for j in 0..h {
            dx[j].write(r * (g[j] * gamma[j] - m1 - xn[j] * m2));
        }
    }
    sums
}

/// The kernel as an operation of burn's `flex` backend, and its backward step on
/// `Autodiff<Flex>`.
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
    use burn::tensor::Shape;

    use super::super::flex_tensors::{host, tensor};
    use super::{Saved, backward, forward};

    #[backend_extension(Flex, Autodiff)]
    pub trait LayerNormOps: Backend {
        fn fused_layer_norm(
            x: FloatTensor<Self>,
            gamma: FloatTensor<Self>,
            beta: FloatTensor<Self>,
            eps: f64,
        ) -> FloatTensor<Self>;
    }

    impl LayerNormOps for Flex {
        fn fused_layer_norm(
            x: FlexTensor,
            gamma: FlexTensor,
            beta: FlexTensor,
            eps: f64,
        ) -> FlexTensor {
            let (y, _) = forward(&host(&x), &host(&gamma), &host(&beta), eps, false);
            tensor(y, x.shape())
        }
    }

    impl<C: CheckpointStrategy> LayerNormOps for Autodiff<Flex, C> {
        fn fused_layer_norm(
            x: FloatTensor<Self>,
            gamma: FloatTensor<Self>,
            beta: FloatTensor<Self>,
            eps: f64,
        ) -> FloatTensor<Self> {
            let guards = [x.node(), gamma.node(), beta.node()];
            let (x, gamma, beta) = (
                x.into_primitive(),
                gamma.into_primitive(),
                beta.into_primitive(),
            );
            match Step.prepare::<C>(guards).compute_bound().stateful() {
                OpsKind::Tracked(prep) => {
                    let shape = x.shape();
                    let (y, saved) = forward(&host(&x), &host(&gamma), &host(&beta), eps, true);
                    let state = State {
                        saved: std::sync::Arc::new(saved),
                        gamma,
                        shape: shape.clone(),
                    };
                    prep.finish(state, tensor(y, shape))
                }
                OpsKind::UnTracked(prep) => {
                    prep.finish(Flex::fused_layer_norm(x, gamma, beta, eps))
                }
            }
        }
    }

    #[derive(Debug)]
    struct Step;

    /// What the backward pass reads: `x̂` and `r` per row, and `γ`.
    #[derive(Clone, Debug)]
    struct State {
        saved: std::sync::Arc<Saved>,
        gamma: FlexTensor,
        shape: Shape,
    }

    impl Backward<Flex, 3> for Step {
        type State = State;

        fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
            let grad = grads.consume::<Flex>(&ops.node);
            let s = ops.state;
            let (dx, dgamma, dbeta) = backward(&host(&grad), &s.saved, &host(&s.gamma));
            let width = Shape::new([dgamma.len()]);
            let outs = [
                tensor(dx, s.shape),
                tensor(dgamma, width.clone()),
                tensor(dbeta, width),
            ];
            for (parent, g) in ops.parents.into_iter().zip(outs) {
                if let Some(node) = parent {
                    grads.register::<Flex>(node.id, g);
                }
            }
        }
    }
}
