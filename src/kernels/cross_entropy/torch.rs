//! The cross-entropy as one LibTorch call on burn's LibTorch backend (feature `tch`):
//! `log_softmax` and the label's entry. It keeps its log-softmax and not the logits, as
//! LibTorch's own `cross_entropy` does; its backward pass is `_log_softmax_backward_data` of
//! the label's one-hot row, from that log-softmax.

#![allow(deprecated)] // burn marks its LibTorch backend deprecated; it is our fastest on GPUs.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::libtorch::TchTensor;
use burn::backend::tensor::{FloatTensor, IntTensor};
use burn::backend::{Autodiff, Backend, LibTorch, backend_extension};
use tch::Kind;

use super::super::libtorch::{cast_to, one_input};

#[backend_extension(LibTorch, Autodiff)]
pub trait TorchCrossEntropy: Backend {
    /// Per-row `lse(z) − z[y]` `[n]` of logits `[n, vocab]`, in f32.
    fn torch_cross_entropy(logits: FloatTensor<Self>, labels: IntTensor<Self>)
    -> FloatTensor<Self>;
}

/// `lse(z) − z[y]` per row of `logits` `[n, vocab]` (f32), with what its backward pass reads:
/// the rows' log-softmax (f32) and the labels as a column index `[n, 1]`.
fn call(logits: &tch::Tensor, labels: &tch::Tensor) -> (tch::Tensor, Saved) {
    let index = labels.to_kind(Kind::Int64).unsqueeze(1);
    let log_softmax = logits.log_softmax(1, Kind::Float);
    let nll = log_softmax.gather(1, &index, false).squeeze_dim(1).neg();
    let saved = Saved {
        log_softmax: TchTensor::new(log_softmax),
        index: TchTensor::new(index),
        kind: logits.kind(),
    };
    (nll, saved)
}

impl TorchCrossEntropy for LibTorch {
    fn torch_cross_entropy(logits: TchTensor, labels: TchTensor) -> TchTensor {
        TchTensor::new(tch::no_grad(|| call(&logits.tensor, &labels.tensor).0))
    }
}

impl<C: CheckpointStrategy> TorchCrossEntropy for Autodiff<LibTorch, C> {
    fn torch_cross_entropy(
        logits: FloatTensor<Self>,
        labels: IntTensor<Self>,
    ) -> FloatTensor<Self> {
        let guards = [logits.node()];
        let logits = logits.into_primitive();
        match Step.prepare::<C>(guards).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let (nll, saved) = tch::no_grad(|| call(&logits.tensor, &labels.tensor));
                prep.finish(saved, TchTensor::new(nll))
            }
            OpsKind::UnTracked(prep) => prep.finish(LibTorch::torch_cross_entropy(logits, labels)),
        }
    }
}

/// What the backward pass reads: the rows' log-softmax `[n, vocab]` (f32), the labels as a
/// column index `[n, 1]` and the logits' kind.
#[derive(Clone, Debug)]
struct Saved {
    log_softmax: TchTensor,
    index: TchTensor,
    kind: Kind,
}

/// `∂z = ∂lsm − softmax(z) · Σ ∂lsm` with `∂lsm` = −∂nll at the label's column, 0 elsewhere.
#[derive(Debug)]
struct Step;

impl Backward<LibTorch, 1> for Step {
    type State = Saved;

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        one_input(ops, grads, |s, grad| {
            let lsm = &s.log_softmax.tensor;
            let cast = cast_to(grad, Kind::Float);
            let picked = cast.as_ref().unwrap_or(grad).neg().unsqueeze(1);
            let d_lsm = lsm.zeros_like().scatter(1, &s.index.tensor, &picked);
            let dz = tch::Tensor::internal_log_softmax_backward_data(&d_lsm, lsm, 1, Kind::Float);
            cast_to(&dz, s.kind).unwrap_or(dz)
        });
    }
}
