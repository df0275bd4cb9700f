//! The glue under the operations' LibTorch calls on burn's LibTorch backend (feature `tch`; the
//! `libtorch` and `libtorch-cuda` devices): each operation's call sits in its own module's
//! `torch.rs` (`kernels::<op>::torch`), on the helpers here.
//!
//! burn's autodiff composes an operation from many tensor operations: on a GPU each is a kernel
//! launch with its own backward node, and some keep several copies of their intermediates for
//! the backward pass. An operation's call is one burn operation whose forward pass is one
//! LibTorch call, and whose backward pass is LibTorch's own derivative of that call: written
//! out in the burn backward step where it is one or two calls, else LibTorch's autograd over
//! the call ([`autograd`]: the call runs with LibTorch's gradient tracking on, its inputs as
//! fresh leaves that share the inputs' memory, and the burn node keeps the call's gradient
//! edges (`csrc/autograd.cpp`), LibTorch's backward node with what the call saved for it, not
//! the output; the backward pass runs LibTorch's engine from that node with burn's incoming
//! gradient, so it launches the call's own backward kernels and nothing else).
//!
//! Every state holds handles on the inputs the backward pass reads, so burn never writes into
//! them in place. `tests/libtorch.rs` checks each call against burn's composed operations on
//! the `libtorch` CPU device, values and gradients.

#![allow(deprecated)] // burn marks its LibTorch backend deprecated; it is our fastest on GPUs.

use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::Ops;
use burn::backend::libtorch::TchTensor;
use burn::backend::{DispatchDevice, LibTorch};
use burn::prelude::*;
use tch::Kind;

pub(super) mod autograd;

/// `t` in `kind`: `None` when it already is (no LibTorch call at all: `to_kind` would be one,
/// a cost in host time on every backward step), else the cast.
pub(in crate::kernels) fn cast_to(t: &tch::Tensor, kind: Kind) -> Option<tch::Tensor> {
    (t.kind() != kind).then(|| t.to_kind(kind))
}

/// The backward step of a call with one input: registers `dx(state, ∂y)` as the input's
/// gradient when the input is tracked.
pub(in crate::kernels) fn one_input<S>(
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
