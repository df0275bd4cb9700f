//! A parameter's cast as one burn operation on burn's LibTorch backend (feature `tch`): its
//! slice of the registered flat buffer's cast ([`flat_casts`](super::flat_casts)), else its
//! own `to_kind`; the backward pass casts the gradient back to the parameter's kind.

#![allow(deprecated)] // burn marks its LibTorch backend deprecated; it is our fastest on GPUs.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::libtorch::TchTensor;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, LibTorch, backend_extension};
use tch::Kind;

use super::super::libtorch::{cast_to, one_input};
use super::flat_casts;

#[backend_extension(LibTorch, Autodiff)]
pub trait TorchParamCast: Backend {
    /// A parameter in the dtype `bf16 ? bf16 : f32`. The gradient is cast back.
    fn torch_param_cast(x: FloatTensor<Self>, bf16: bool) -> FloatTensor<Self>;
}

impl TorchParamCast for LibTorch {
    fn torch_param_cast(x: TchTensor, bf16: bool) -> TchTensor {
        let kind = if bf16 { Kind::BFloat16 } else { Kind::Float };
        if x.tensor.kind() == kind {
            return x;
        }
        flat_casts::cast_of(&x.tensor, kind)
            .unwrap_or_else(|| TchTensor::new(x.tensor.to_kind(kind)))
    }
}

impl<C: CheckpointStrategy> TorchParamCast for Autodiff<LibTorch, C> {
    fn torch_param_cast(x: FloatTensor<Self>, bf16: bool) -> FloatTensor<Self> {
        let guards = [x.node()];
        let x = x.into_primitive();
        let kind = x.tensor.kind();
        let y = LibTorch::torch_param_cast(x, bf16);
        match Step.prepare::<C>(guards).compute_bound().stateful() {
            OpsKind::Tracked(prep) => prep.finish(kind, y),
            OpsKind::UnTracked(prep) => prep.finish(y),
        }
    }
}

/// The cast's backward pass: the gradient in the parameter's kind.
#[derive(Debug)]
struct Step;

impl Backward<LibTorch, 1> for Step {
    type State = Kind;

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        one_input(ops, grads, |kind, grad| {
            cast_to(grad, *kind).unwrap_or_else(|| grad.shallow_clone())
        });
    }
}
