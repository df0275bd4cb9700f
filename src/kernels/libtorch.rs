//! Attention, the biased product and dropout as single LibTorch calls on burn's
//! LibTorch backend (feature `tch`; the `libtorch` and `libtorch-cuda` devices).
//!
//! burn's autodiff composes these from many tensor operations: on a GPU each is a kernel launch
//! with its own backward node, and attention keeps its `[batch, heads, len, len]` scores and
//! probabilities (several copies) for the backward pass. Here each is one burn operation whose
//! forward pass is one LibTorch call, and whose backward pass is LibTorch's own derivative of
//! that call:
//!
//! - attention: `scaled_dot_product_attention` (on CUDA the flash or memory-efficient kernels,
//!   which keep only the output and the softmax's log-sum-exp, and draw the dropout mask inside
//!   the kernel from LibTorch's generator, which `model::seed` seeds every step);
//! - the biased product `x W + b`: `addmm` (on CUDA cuBLASLt adds the bias in the product's
//!   epilogue), its backward pass the two products and the bias's row sum;
//! - dropout: `native_dropout` (one kernel, a one-byte mask kept) and `native_dropout_backward`;
//!
//! The backward pass of attention is LibTorch's autograd over that one call: the
//! call runs with LibTorch's gradient tracking on, its inputs as fresh leaves that share the
//! inputs' memory, and the burn node keeps the call's gradient edges (`csrc/autograd.cpp`):
//! LibTorch's backward node with what the call saved for it, not the output. The backward pass
//! runs LibTorch's engine from that node with burn's incoming gradient, so it launches the
//! call's own backward kernels and nothing else.
//! - Attention's kernels keep their output for the backward pass (the flash and
//!   memory-efficient kernels read it with the softmax's log-sum-exp); the output handed to
//!   burn is detached from the graph and shares that memory, and the state keeps a handle on
//!   it, so burn never reuses it in place.
//!
//! Every state holds handles on the inputs the backward pass reads, so burn never writes into
//! them in place. An operation with a module of its own (`kernels::<op>`) has its LibTorch call
//! in that module's `torch.rs`, on the helpers here (`cast_to`, `one_input`, `autograd`).
//!
//! `tests/libtorch.rs` checks each against burn's composed operations on the `libtorch` CPU
//! device, values and gradients.

#![allow(deprecated)] // burn marks its LibTorch backend deprecated; it is our fastest on GPUs.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::libtorch::TchTensor;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, DispatchDevice, LibTorch, backend_extension};
use burn::prelude::*;
use tch::Kind;

pub(super) mod autograd;
pub(super) mod casts;
use autograd::{Graph, GraphStep};

/// The operations (shapes as the wrappers in `kernels` say).
#[backend_extension(LibTorch, Autodiff)]
pub trait TorchOps: Backend {
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
    /// `x W + b` for `x` `[rows, in]`, `W` `[in, out]`, `b` `[out]`, all in one dtype.
    fn torch_linear(
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        b: FloatTensor<Self>,
    ) -> FloatTensor<Self>;
    /// Inverted dropout with probability `p` (training only: callers check).
    fn torch_dropout(x: FloatTensor<Self>, p: f64) -> FloatTensor<Self>;
    /// A parameter in the dtype `bf16 ? bf16 : f32`: its slice of the cast of the flat buffer
    /// it lives in (`kernels::param_cast`), else its own cast. The gradient is cast back.
    fn torch_param_cast(x: FloatTensor<Self>, bf16: bool) -> FloatTensor<Self>;
}

/// The attention context of `qkv` (see [`TorchOps::torch_attention`]); `dropout` is applied
/// only where asked (the training forward pass).
fn attention(
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

/// `t` in `kind`: `None` when it already is (no LibTorch call at all: `to_kind` would be one,
/// a cost in host time on every backward step), else the cast.
pub(super) fn cast_to(t: &tch::Tensor, kind: Kind) -> Option<tch::Tensor> {
    (t.kind() != kind).then(|| t.to_kind(kind))
}

impl TorchOps for LibTorch {
    fn torch_attention(
        qkv: TchTensor,
        key_bias: TchTensor,
        padded: bool,
        heads: usize,
        dropout: f64,
    ) -> TchTensor {
        let bias = padded.then_some(&key_bias.tensor);
        let ctx = tch::no_grad(|| attention(&qkv.tensor, bias, heads, dropout));
        TchTensor::new(ctx)
    }

    fn torch_linear(x: TchTensor, w: TchTensor, b: TchTensor) -> TchTensor {
        TchTensor::new(tch::no_grad(|| b.tensor.addmm(&x.tensor, &w.tensor)))
    }

    fn torch_dropout(x: TchTensor, p: f64) -> TchTensor {
        TchTensor::new(x.tensor.native_dropout(p, true).0)
    }

    fn torch_param_cast(x: TchTensor, bf16: bool) -> TchTensor {
        let kind = if bf16 { Kind::BFloat16 } else { Kind::Float };
        if x.tensor.kind() == kind {
            return x;
        }
        casts::cast_of(&x.tensor, kind).unwrap_or_else(|| TchTensor::new(x.tensor.to_kind(kind)))
    }
}

/// The backward step of a call with one input: registers `dx(state, ∂y)` as the input's
/// gradient when the input is tracked.
pub(super) fn one_input<S>(
    ops: Ops<S, 1>,
    grads: &mut Gradients,
    dx: impl FnOnce(&S, &tch::Tensor) -> tch::Tensor,
) {
    let grad = grads.consume::<LibTorch>(&ops.node);
    let [parent] = ops.parents;
    if let Some(node) = parent {
        grads.register::<LibTorch>(node.id, TchTensor::new(dx(&ops.state, &grad.tensor)));
    }
}

/// `∂x = ∂y Wᵀ`, `∂W = xᵀ ∂y`, `∂b = Σ_rows ∂y`, each only where a parent is tracked.
#[derive(Debug)]
struct LinearStep;

impl Backward<LibTorch, 3> for LinearStep {
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

/// The cast's backward pass: the gradient in the parameter's kind.
#[derive(Debug)]
struct ParamCastStep;

impl Backward<LibTorch, 1> for ParamCastStep {
    type State = Kind;

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        one_input(ops, grads, |kind, grad| {
            cast_to(grad, *kind).unwrap_or_else(|| grad.shallow_clone())
        });
    }
}

#[derive(Debug)]
struct DropoutStep;

impl Backward<LibTorch, 1> for DropoutStep {
    /// The kept positions (bool) and the scale `1 / (1 − p)`.
    type State = (TchTensor, f64);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        one_input(ops, grads, |(mask, scale), grad| {
            tch::Tensor::native_dropout_backward(grad, &mask.tensor, *scale)
        });
    }
}

impl<C: CheckpointStrategy> TorchOps for Autodiff<LibTorch, C> {
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
                    attention(&leaves[0], padded.then_some(&bias.tensor), heads, dropout)
                });
                prep.finish(graph, ctx)
            }
            OpsKind::UnTracked(prep) => {
                prep.finish(LibTorch::torch_attention(qkv, bias, padded, heads, dropout))
            }
        }
    }

    fn torch_linear(
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        b: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        let guards = [x.node(), w.node(), b.node()];
        let (x, w, b) = (x.into_primitive(), w.into_primitive(), b.into_primitive());
        let y = LibTorch::torch_linear(x.clone(), w.clone(), b);
        match LinearStep.prepare::<C>(guards).compute_bound().stateful() {
            OpsKind::Tracked(prep) => prep.finish((x, w), y),
            OpsKind::UnTracked(prep) => prep.finish(y),
        }
    }

    fn torch_dropout(x: FloatTensor<Self>, p: f64) -> FloatTensor<Self> {
        let guards = [x.node()];
        let (y, mask) = x.into_primitive().tensor.native_dropout(p, true);
        let y = TchTensor::new(y);
        match DropoutStep.prepare::<C>(guards).compute_bound().stateful() {
            OpsKind::Tracked(prep) => prep.finish((TchTensor::new(mask), 1.0 / (1.0 - p)), y),
            OpsKind::UnTracked(prep) => prep.finish(y),
        }
    }

    fn torch_param_cast(x: FloatTensor<Self>, bf16: bool) -> FloatTensor<Self> {
        let guards = [x.node()];
        let x = x.into_primitive();
        let kind = x.tensor.kind();
        let y = LibTorch::torch_param_cast(x, bf16);
        match ParamCastStep
            .prepare::<C>(guards)
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish(kind, y),
            OpsKind::UnTracked(prep) => prep.finish(y),
        }
    }
}

/// The LibTorch tensor under `t`: a handle on the same memory (None on other backends).
pub(crate) fn tch_tensor<const D: usize, K: burn::tensor::kind::Basic>(
    t: &Tensor<D, K>,
) -> Option<tch::Tensor> {
    use burn::backend::{BackendTensor, DispatchTensorKind};
    fn find(kind: &DispatchTensorKind) -> Option<tch::Tensor> {
        match kind {
            DispatchTensorKind::LibTorch(
                BackendTensor::Float(x) | BackendTensor::Int(x) | BackendTensor::Bool(x),
            ) => Some(x.tensor.shallow_clone()),
            DispatchTensorKind::LibTorch(BackendTensor::Autodiff(x)) => {
                Some(x.primitive().tensor.shallow_clone())
            }
            DispatchTensorKind::Autodiff(inner) => find(inner),
            _ => None,
        }
    }
    find(&t.clone().into_dispatch().kind)
}

/// Copies `src` into `dst`'s memory, in place (LibTorch tensors of one shape).
pub(crate) fn copy_into<const D: usize, K: burn::tensor::kind::Basic>(
    dst: &Tensor<D, K>,
    src: &Tensor<D, K>,
) {
    let (Some(mut d), Some(s)) = (tch_tensor(dst), tch_tensor(src)) else {
        panic!("copy_into: not LibTorch tensors");
    };
    tch::no_grad(|| d.copy_(&s));
}

/// The index of a `libtorch-cuda` device (None for other devices).
pub(crate) fn cuda_index(device: &Device) -> Option<usize> {
    match device.clone().inner().as_dispatch() {
        DispatchDevice::LibTorch(burn::backend::libtorch::LibTorchDevice::Cuda(i)) => Some(*i),
        _ => None,
    }
}
