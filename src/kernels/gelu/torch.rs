//! GELU as one LibTorch call on burn's LibTorch backend (feature `tch`): `gelu` (exact erf
//! form), its backward pass `gelu_backward` from the kept input.

#![allow(deprecated)] // burn marks its LibTorch backend deprecated; it is our fastest on GPUs.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::libtorch::TchTensor;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, LibTorch, backend_extension};

use super::super::libtorch::{cast_to, one_input};

#[backend_extension(LibTorch, Autodiff)]
pub trait TorchGelu: Backend {
    fn torch_gelu(x: FloatTensor<Self>) -> FloatTensor<Self>;
}

impl TorchGelu for LibTorch {
    fn torch_gelu(x: TchTensor) -> TchTensor {
        TchTensor::new(x.tensor.gelu("none"))
    }
}

impl<C: CheckpointStrategy> TorchGelu for Autodiff<LibTorch, C> {
    fn torch_gelu(x: FloatTensor<Self>) -> FloatTensor<Self> {
        let guards = [x.node()];
        let x = x.into_primitive();
        let y = LibTorch::torch_gelu(x.clone());
        match Step.prepare::<C>(guards).compute_bound().stateful() {
            OpsKind::Tracked(prep) => prep.finish(x, y),
            OpsKind::UnTracked(prep) => prep.finish(y),
        }
    }
}

/// The backward step; its state is the input.
#[derive(Debug)]
struct Step;

impl Backward<LibTorch, 1> for Step {
    type State = TchTensor;

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        one_input(ops, grads, |x, grad| {
            let x = &x.tensor;
            let cast = cast_to(grad, x.kind());
            x.gelu_backward(cast.as_ref().unwrap_or(grad), "none")
        });
    }
}
