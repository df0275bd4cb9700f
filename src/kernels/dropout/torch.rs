//! Inverted dropout as one LibTorch call on burn's LibTorch backend (feature `tch`):
//! `native_dropout` (one kernel, a one-byte mask kept for the backward pass) and
//! `native_dropout_backward`.

#![allow(deprecated)] // burn marks its LibTorch backend deprecated; it is our fastest on GPUs.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::libtorch::TchTensor;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, LibTorch, backend_extension};

use super::super::libtorch::one_input;

#[backend_extension(LibTorch, Autodiff)]
pub trait TorchDropout: Backend {
    /// Inverted dropout with probability `p` (training only: callers check).
    fn torch_dropout(x: FloatTensor<Self>, p: f64) -> FloatTensor<Self>;
}

impl TorchDropout for LibTorch {
    fn torch_dropout(x: TchTensor, p: f64) -> TchTensor {
        TchTensor::new(x.tensor.native_dropout(p, true).0)
    }
}

impl<C: CheckpointStrategy> TorchDropout for Autodiff<LibTorch, C> {
    fn torch_dropout(x: FloatTensor<Self>, p: f64) -> FloatTensor<Self> {
        let guards = [x.node()];
        let (y, mask) = x.into_primitive().tensor.native_dropout(p, true);
        let y = TchTensor::new(y);
        match Step.prepare::<C>(guards).compute_bound().stateful() {
            OpsKind::Tracked(prep) => prep.finish((TchTensor::new(mask), 1.0 / (1.0 - p)), y),
            OpsKind::UnTracked(prep) => prep.finish(y),
        }
    }
}

/// The backward step: the incoming gradient through the kept mask.
#[derive(Debug)]
struct Step;

impl Backward<LibTorch, 1> for Step {
    /// The kept positions (bool) and the scale `1 / (1 − p)`.
    type State = (TchTensor, f64);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        one_input(ops, grads, |(mask, scale), grad| {
            tch::Tensor::native_dropout_backward(grad, &mask.tensor, *scale)
        });
    }
}
