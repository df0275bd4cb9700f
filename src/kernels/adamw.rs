//! One AdamW update of one parameter, in one place: the facade the optimizer calls, the
//! composed reference (burn's operations), and our fused kernel with its operation on burn's
//! `flex` backend. The kernel works on the host, in a single parallel pass over p, g, m, v
//! (the per-tensor path of `train::optimizer` issues about a dozen tensor operations for it,
//! each a pass over memory into a fresh buffer). The same f32 operations in the same order:
//!
//! `m ← β1·m + ((1−β1)·f)·g`, `v ← β2·v + ((1−β2)·f²)·g²` (f: the gradient scale factor),
//! `p ← p·(1 − lr·wd)`, `p ← p − (m / (√v / √(1−β2^t) + ε)) · (lr / (1−β1^t))`.

use burn::prelude::*;
use multiversion::multiversion;
use rayon::prelude::*;

use super::select::fused;

/// One AdamW update of parameter `p` with gradient `g` and moments `m`, `v` (plain tensors;
/// the formulas above): the new `(p, m, v)`. Our fused kernel, or burn's operations (the
/// composed reference).
pub fn adamw(
    p: Tensor<1>,
    g: Tensor<1>,
    m: Tensor<1>,
    v: Tensor<1>,
    s: AdamWStep,
) -> (Tensor<1>, Tensor<1>, Tensor<1>) {
    if fused(&p.device(), p.dtype()) {
        return fused_call(p, g, m, v, s);
    }
    let f = s.grad_factor;
    let m = m.mul_scalar(s.beta1) + g.clone().mul_scalar((1.0 - s.beta1) * f);
    let v = v.mul_scalar(s.beta2) + g.square().mul_scalar((1.0 - s.beta2) * f * f);
    let p = if s.weight_decay != 0.0 {
        p.mul_scalar(1.0 - s.lr * s.weight_decay)
    } else {
        p
    };
    let denom = v.clone().sqrt().div_scalar(s.bc2_sqrt).add_scalar(s.eps);
    let p = p - (m.clone() / denom).mul_scalar(s.lr / s.bc1);
    (p, m, v)
}

/// Our fused kernel as one burn operation: the new `(p, m, v)`. Only where
/// [`fused`](super::fused) holds; plain tensors only.
pub fn fused_call(
    p: Tensor<1>,
    g: Tensor<1>,
    m: Tensor<1>,
    v: Tensor<1>,
    step: AdamWStep,
) -> (Tensor<1>, Tensor<1>, Tensor<1>) {
    let (p, m, v) = extension_op!(
        "flex",
        flex_op::AdamWOps,
        fused_adamw(
            p.into_dispatch(),
            g.into_dispatch(),
            m.into_dispatch(),
            v.into_dispatch(),
            step,
        )
    );
    (
        Tensor::from_dispatch(p),
        Tensor::from_dispatch(m),
        Tensor::from_dispatch(v),
    )
}

/// The constants of one update (`bc1` = 1 − β1^t, `bc2_sqrt` = √(1 − β2^t)).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamWStep {
    pub lr: f64,
    pub weight_decay: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub bc1: f64,
    pub bc2_sqrt: f64,
    pub grad_factor: f64,
}

const CHUNK: usize = 1 << 14;

/// Updates `p`, `m` and `v` in place.
pub fn update(p: &mut [f32], g: &[f32], m: &mut [f32], v: &mut [f32], s: &AdamWStep) {
    let n = p.len();
    assert!(
        g.len() == n && m.len() == n && v.len() == n,
        "adamw: parameter, gradient and moments differ in length"
    );
    let f = s.grad_factor;
    let (b1, b2) = (s.beta1 as f32, s.beta2 as f32);
    let (g1, g2) = (
        ((1.0 - s.beta1) * f) as f32,
        ((1.0 - s.beta2) * f * f) as f32,
    );
    let keep = (s.weight_decay != 0.0).then_some((1.0 - s.lr * s.weight_decay) as f32);
    let (bc2, eps, step) = (s.bc2_sqrt as f32, s.eps as f32, (s.lr / s.bc1) as f32);
    p.par_chunks_mut(CHUNK)
        .zip(g.par_chunks(CHUNK))
        .zip(m.par_chunks_mut(CHUNK).zip(v.par_chunks_mut(CHUNK)))
        .for_each(|((p, g), (m, v))| {
            update_chunk(p, g, m, v, [b1, b2, g1, g2, bc2, eps, step], keep)
        });
}

/// The update of one chunk; `c` = `[β1, β2, (1−β1)·f, (1−β2)·f², √(1−β2^t), ε, lr / (1−β1^t)]`,
/// `keep` = `1 − lr·wd` when weight decay applies.
#[multiversion(targets = "simd")]
fn update_chunk(
    p: &mut [f32],
    g: &[f32],
    m: &mut [f32],
    v: &mut [f32],
    c: [f32; 7],
    keep: Option<f32>,
) {
    let [b1, b2, g1, g2, bc2, eps, step] = c;
    for (((p, &g), m), v) in p.iter_mut().zip(g).zip(m).zip(v) {
        *m = *m * b1 + g * g1;
        *v = *v * b2 + g * g * g2;
        let decayed = keep.map_or(*p, |k| *p * k);
        *p = decayed - (*m / (v.sqrt() / bc2 + eps)) * step;
    }
}

/// The kernel as an operation of burn's `flex` backend (not differentiable: the optimizer
/// updates the parameters' inner tensors).
#[cfg(feature = "flex")]
mod flex_op {
    use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
    use burn::backend::flex::FlexTensor;
    use burn::backend::tensor::FloatTensor;
    use burn::backend::{Autodiff, Backend, Flex, backend_extension};

    use super::super::flex_tensors::{host, host_mut};
    use super::{AdamWStep, update};

    #[backend_extension(Flex, Autodiff)]
    pub trait AdamWOps: Backend {
        /// The optimizer's update: new (parameter, m, v).
        fn fused_adamw(
            param: FloatTensor<Self>,
            grad: FloatTensor<Self>,
            m: FloatTensor<Self>,
            v: FloatTensor<Self>,
            step: AdamWStep,
        ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>);
    }

    impl AdamWOps for Flex {
        /// All three written in place where unique (the optimizer hands the parameter over
        /// alone), else copied first (`host_mut`).
        fn fused_adamw(
            mut param: FlexTensor,
            grad: FlexTensor,
            mut m: FlexTensor,
            mut v: FlexTensor,
            step: AdamWStep,
        ) -> (FlexTensor, FlexTensor, FlexTensor) {
            update(
                host_mut(&mut param),
                &host(&grad),
                host_mut(&mut m),
                host_mut(&mut v),
                &step,
            );
            (param, m, v)
        }
    }

    impl<C: CheckpointStrategy> AdamWOps for Autodiff<Flex, C> {
        fn fused_adamw(
            _: FloatTensor<Self>,
            _: FloatTensor<Self>,
            _: FloatTensor<Self>,
            _: FloatTensor<Self>,
            _: AdamWStep,
        ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
            unreachable!("the optimizer updates the parameters' inner (non-autodiff) tensors")
        }
    }
}
