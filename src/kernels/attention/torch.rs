//! Attention as one LibTorch call on burn's LibTorch backend (feature `tch`):
//! `scaled_dot_product_attention`. On CUDA that is the flash or memory-efficient kernels, which
//! keep only the output and the softmax's log-sum-exp, and draw the dropout mask inside the
//! kernel from LibTorch's generator (which `model::seed` seeds every step).
//!
//! Its backward pass is LibTorch's autograd over that one call (`libtorch::autograd`). The
//! kernels keep their output for the backward pass (they read it with the log-sum-exp); the
//! output handed to burn is detached from the graph and shares that memory, and the state keeps
//! a handle on it, so burn never reuses it in place.

#![allow(deprecated)] // burn marks its LibTorch backend deprecated; it is our fastest on GPUs.

use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::ops::{Backward, OpsKind};
use burn::backend::libtorch::TchTensor;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, LibTorch, backend_extension};

use super::super::libtorch::autograd::{Graph, GraphStep};
use super::super::libtorch::cast_to;

#[backend_extension(LibTorch, Autodiff)]
pub trait TorchAttention: Backend {
    /// The context `[batch, len, hidden]` from the packed projections `[batch, len, 3 · hidden]`
    /// and the additive key bias `[batch, len]`, used only when `padded` (without it
    /// LibTorch's flash kernels qualify).
    fn torch_attention(
        qkv: FloatTensor<Self>,
        key_bias: FloatTensor<Self>,
        padded: bool,
        heads: usize,
        dropout: f64,
    ) -> FloatTensor<Self>;
}

/// The context of `qkv` (see [`TorchAttention::torch_attention`]); `dropout` is applied only
/// where asked (the training forward pass).
fn context(
    qkv: &tch::Tensor,
    key_bias: Option<&tch::Tensor>,
    heads: usize,
    dropout: f64,
) -> tch::Tensor {
    let size = qkv.size();
    assert!(
        size.len() == 3 && heads > 0 && size[2] % (3 * heads as i64) == 0,
        "attention: qkv is not [batch, len, 3 · heads · head_dim]"
    );
    let (b, l, h) = (size[0], size[1], size[2] / 3);
    let dh = h / heads as i64;
    // [b, l, 3, heads, dh] → three [b, heads, l, dh] views.
    let split = qkv
        .reshape([b, l, 3, heads as i64, dh])
        .permute([2, 0, 3, 1, 4]);
    // One unbind, not three selects: its backward pass stacks the three gradients in one
    // kernel, where each select's would fill a zero tensor of the whole `qkv` and add them up.
    let [q, k, v]: [tch::Tensor; 3] = split.unbind(0).try_into().expect("three parts");
    // [b, len] → [b, 1, 1, len], broadcast over heads and queries, in the operands' dtype.
    let mask = key_bias.map(|m| {
        let m = m.reshape([b, 1, 1, l]);
        cast_to(&m, qkv.kind()).unwrap_or(m)
    });
    let ctx = tch::Tensor::scaled_dot_product_attention(
        &q,
        &k,
        &v,
        mask.as_ref(),
        dropout,
        false,
        None::<f64>,
        false,
    );
    ctx.permute([0, 2, 1, 3]).reshape([b, l, h])
}

impl TorchAttention for LibTorch {
    fn torch_attention(
        qkv: TchTensor,
        key_bias: TchTensor,
        padded: bool,
        heads: usize,
        dropout: f64,
    ) -> TchTensor {
        let bias = padded.then_some(&key_bias.tensor);
        let ctx = tch::no_grad(|| context(&qkv.tensor, bias, heads, dropout));
        TchTensor::new(ctx)
    }
}

impl<C: CheckpointStrategy> TorchAttention for Autodiff<LibTorch, C> {
    fn torch_attention(
        qkv: FloatTensor<Self>,
        key_bias: FloatTensor<Self>,
        padded: bool,
        heads: usize,
        dropout: f64,
    ) -> FloatTensor<Self> {
        let guards = [qkv.node()];
        let qkv = qkv.into_primitive();
        // The padding bias is a constant: no gradient flows to it.
        let bias = key_bias.into_primitive();
        match GraphStep.prepare::<C>(guards).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let (ctx, graph) = Graph::record(&[&qkv], true, |leaves| {
                    context(&leaves[0], padded.then_some(&bias.tensor), heads, dropout)
                });
                prep.finish(graph, ctx)
            }
            OpsKind::UnTracked(prep) => {
                prep.finish(LibTorch::torch_attention(qkv, bias, padded, heads, dropout))
            }
        }
    }
}
