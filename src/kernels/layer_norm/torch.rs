//! LayerNorm as one LibTorch call on burn's LibTorch backend (feature `tch`): `layer_norm`
//! (statistics in f32). Its backward pass is LibTorch's autograd over that call
//! (`libtorch::autograd`), whose node keeps the input, weight, bias and the rows' mean and
//! reciprocal deviation, not the output: the f32 output is not held until the backward pass
//! (under bf16 the next product keeps a bf16 copy of it, so nothing else does).

#![allow(deprecated)] // burn marks its LibTorch backend deprecated; it is our fastest on GPUs.

use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::ops::{Backward, OpsKind};
use burn::backend::libtorch::TchTensor;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, LibTorch, backend_extension};

use super::super::libtorch::autograd::{Graph, GraphStep};

#[backend_extension(LibTorch, Autodiff)]
pub trait TorchLayerNorm: Backend {
    fn torch_layer_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        eps: f64,
    ) -> FloatTensor<Self>;
}

fn call(x: &tch::Tensor, gamma: &tch::Tensor, beta: &tch::Tensor, eps: f64) -> tch::Tensor {
    let width = *x.size().last().expect("layer_norm of a scalar");
    x.layer_norm([width], Some(gamma), Some(beta), eps, true)
}

impl TorchLayerNorm for LibTorch {
    fn torch_layer_norm(x: TchTensor, gamma: TchTensor, beta: TchTensor, eps: f64) -> TchTensor {
        TchTensor::new(tch::no_grad(|| {
            call(&x.tensor, &gamma.tensor, &beta.tensor, eps)
        }))
    }
}

impl<C: CheckpointStrategy> TorchLayerNorm for Autodiff<LibTorch, C> {
    fn torch_layer_norm(
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
        match GraphStep.prepare::<C>(guards).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let (y, graph) = Graph::record(&[&x, &gamma, &beta], false, |l| {
                    call(&l[0], &l[1], &l[2], eps)
                });
                prep.finish(graph, y)
            }
            OpsKind::UnTracked(prep) => {
                prep.finish(LibTorch::torch_layer_norm(x, gamma, beta, eps))
            }
        }
    }
}
