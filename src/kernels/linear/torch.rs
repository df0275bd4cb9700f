//! The affine map as one LibTorch call on burn's LibTorch backend (feature `tch`): `addmm` (on
//! CUDA cuBLASLt adds the bias in the product's epilogue); its backward pass the two products
//! and the bias's row sum.

#![allow(deprecated)] // burn marks its LibTorch backend deprecated; it is our fastest on GPUs.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::libtorch::TchTensor;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, LibTorch, backend_extension};

use super::super::libtorch::cast_to;

#[backend_extension(LibTorch, Autodiff)]
pub trait TorchLinear: Backend {
    /// `x W + b` for `x` `[rows, in]`, `W` `[in, out]`, `b` `[out]`, all in one dtype.
    fn torch_linear(
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        b: FloatTensor<Self>,
    ) -> FloatTensor<Self>;
}

impl TorchLinear for LibTorch {
    fn torch_linear(x: TchTensor, w: TchTensor, b: TchTensor) -> TchTensor {
        TchTensor::new(tch::no_grad(|| b.tensor.addmm(&x.tensor, &w.tensor)))
    }
}

impl<C: CheckpointStrategy> TorchLinear for Autodiff<LibTorch, C> {
    fn torch_linear(
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        b: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        let guards = [x.node(), w.node(), b.node()];
        let (x, w, b) = (x.into_primitive(), w.into_primitive(), b.into_primitive());
        let y = LibTorch::torch_linear(x.clone(), w.clone(), b);
        match Step.prepare::<C>(guards).compute_bound().stateful() {
            OpsKind::Tracked(prep) => prep.finish((x, w), y),
            OpsKind::UnTracked(prep) => prep.finish(y),
        }
    }
}

/// `∂x = ∂y Wᵀ`, `∂W = xᵀ ∂y`, `∂b = Σ_rows ∂y`, each only where a parent is tracked.
#[derive(Debug)]
struct Step;

impl Backward<LibTorch, 3> for Step {
    /// `x` and `W`.
    type State = (TchTensor, TchTensor);

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<LibTorch>(&ops.node);
        let [px, pw, pb] = ops.parents;
        let (x, w) = (&ops.state.0.tensor, &ops.state.1.tensor);
        let cast = cast_to(&grad.tensor, x.kind());
        let g = cast.as_ref().unwrap_or(&grad.tensor);
        if let Some(node) = px {
            grads.register::<LibTorch>(node.id, TchTensor::new(g.mm(&w.transpose(0, 1))));
        }
        if let Some(node) = pw {
            grads.register::<LibTorch>(node.id, TchTensor::new(x.transpose(0, 1).mm(g)));
        }
        if let Some(node) = pb {
            let db = g.sum_dim_intlist(0, false, g.kind());
            grads.register::<LibTorch>(node.id, TchTensor::new(db));
        }
    }
}
