//! Fused CPU kernels with their own backward passes: multi-head attention, the normalisation,
//! the activation, `Linear`, the MLM cross-entropy, row lookups (embeddings, gathers), and the
//! AdamW update. An operation moved to its own module (`layer_norm`, `gelu`) holds its facade, its kernel,
//! its `flex` operation and backward step, and its LibTorch call side by side; the others are
//! still laid out by layer (`fused_ops`, `flex`, `flex_steps`, `torch_calls`, `libtorch`).
//!
//! Under autodiff, burn composes these from many tensor operations, each a pass over memory
//! with its own backward node and fresh buffers. On the `flex` CPU backend each is one operation
//! here, forward and backward, registered with burn's backend-extension mechanism (`FusedOps`)
//! and its autodiff `Backward` steps. The model calls the wrappers below where [`fused`] says
//! yes; elsewhere (another backend, or a dtype other than f32) it composes burn's own operations
//! with the same formulas. `tests/suite/kernels.rs` checks every kernel against that composed version,
//! values and gradients (AdamW: `tests/suite/optimizer.rs`, against the composed multi-tensor update;
//! row lookups: `tests/suite/kernel_rows.rs`, bit for bit against burn's `select`).
//!
//! On burn's LibTorch backend (feature `tch`) the biased products, attention, the normalisation,
//! the activation, dropout and the cross-entropy are single LibTorch calls instead, each one burn operation with LibTorch's own
//! backward (`libtorch`, where [`torch`] says yes; `tests/libtorch.rs`).

// Without `flex` (`tch`) the wrappers below end in `unreachable!` (callers check [`fused`]
// ([`torch`]) first).
#![cfg_attr(
    any(not(feature = "flex"), not(feature = "tch")),
    allow(unreachable_code)
)]

#[macro_use]
mod macros;

pub mod adamw;
pub mod attention;
mod bf16_pack;
pub mod bf16_rate;
mod buffers;
pub mod cross_entropy;
pub mod cuda_graph;
pub mod dropout;
#[cfg(feature = "flex")]
mod flex;
#[cfg(feature = "flex")]
mod flex_steps;
#[cfg(feature = "flex")]
mod flex_tensors;
pub mod fused_ops;
pub mod gelu;
pub mod gemm;
pub mod gemm_bf16;
pub mod gemm_bf16_rounded;
mod gemm_f32;
pub mod grad_watch;
mod host;
pub mod layer_norm;
#[cfg(feature = "tch")]
mod libtorch;
pub mod linear;
pub mod op_count;
pub mod param_cast;
pub mod rows;
pub mod sampling;
mod select;
mod simd;
mod torch_calls;
pub mod views;

use burn::prelude::*;

pub use adamw::AdamWStep;
pub use attention::{Dims, DropMask};
pub use gelu::gelu;
pub use gemm::Products;
pub use host::host_reads;
pub(crate) use host::{count_read, device_ids, host_ids, on_host, read_floats};
pub use layer_norm::layer_norm;
#[cfg(feature = "tch")]
pub(crate) use libtorch::{cuda_index, tch_tensor};
pub use param_cast::cast as param_cast;
pub use select::{fused, set_composed, torch};
pub use torch_calls::{torch_attention, torch_cross_entropy, torch_dropout, torch_linear};

/// Multi-head self-attention's context `[batch, len, hidden]` from the packed projections `qkv`
/// `[batch, len, 3 · hidden]` (Q, K, V on each row) and the additive key bias `[batch, len]`
/// (`None`: nothing padded), with dropout `d` on the probabilities: our fused kernel, LibTorch's
/// call, or burn's operations (scores and softmax in f32, products in `qkv`'s dtype). Our
/// kernel's products multiply as `products` says.
pub fn attention(
    qkv: Tensor<3>,
    key_bias: Option<Tensor<2>>,
    heads: usize,
    d: &burn::nn::Dropout,
    products: Products,
) -> Tensor<3> {
    let device = qkv.device();
    let active = dropout::active(d, &device);
    if fused(&device, qkv.dtype()) {
        let [b, l, _] = qkv.dims();
        let key_bias = key_bias.unwrap_or_else(|| Tensor::zeros([b, l], &device));
        let mask = active.then(|| DropMask {
            p: d.prob,
            seed: dropout::next_call_seed(),
        });
        return fused_ops::attention(qkv, key_bias, heads, mask, products);
    }
    if torch(&device) {
        let p = if active { d.prob } else { 0.0 };
        return torch_attention(qkv, key_bias, heads, p);
    }
    attention::composed(qkv, key_bias, heads, d)
}

/// Rows `ids` `[n]` of `table` `[rows, width]`, `[n, width]` (embedding lookups, gathers of
/// positions): our kernel, whose backward builds the table's gradient on all threads (see
/// [`rows`](mod@rows)), or burn's `select`.
pub fn select_rows(table: Tensor<2>, ids: Tensor<1, Int>) -> Tensor<2> {
    if fused(&table.device(), table.dtype()) {
        fused_ops::select_rows(table, ids)
    } else {
        table.select(0, ids)
    }
}

/// `x W + b` for rows `x` `[rows, in]`, `W` `[in, out]`, in the operands' dtype (the caller casts
/// them): our fused kernel (its products multiplied as `products` says), LibTorch's `addmm`, or
/// burn's product and sum.
pub fn linear(x: Tensor<2>, w: Tensor<2>, b: Option<Tensor<1>>, products: Products) -> Tensor<2> {
    let dtype = burn::tensor::FloatDType::from(x.dtype());
    match b {
        Some(b) if fused(&x.device(), x.dtype()) => fused_ops::linear(x, w, b, products),
        Some(b) if torch(&x.device()) => torch_linear(x, w, param_cast(b, dtype)),
        Some(b) => x.matmul(w) + b.cast(dtype).unsqueeze::<2>(),
        None => x.matmul(w),
    }
}

/// `x Wᵀ + b` for `W` stored `[out, in]` (the MLM decoder's tied word embeddings): the product
/// in `x`'s dtype, the result in `b`'s (f32 logits). Our fused kernel (`W`'s gradient in its own
/// layout), or burn's product and sum.
pub fn linear_transposed(
    x: Tensor<2>,
    w: Tensor<2>,
    b: Tensor<1>,
    products: Products,
) -> Tensor<2> {
    if fused(&x.device(), x.dtype()) {
        return fused_ops::linear_transposed(x, w, b, products);
    }
    let dtype = burn::tensor::FloatDType::from(x.dtype());
    let y = x.matmul(param_cast(w, dtype).transpose());
    y.cast(burn::tensor::FloatDType::F32) + b.unsqueeze::<2>()
}

/// Per-row cross-entropy `lse(z) − z[y]` `[n]` of logits `[n, vocab]` against `labels` `[n]`:
/// our fused kernel, LibTorch's `log_softmax`, or burn's operations by the surrogate of
/// [`cross_entropy`](mod@cross_entropy).
pub fn cross_entropy(logits: Tensor<2>, labels: Tensor<1, Int>) -> Tensor<1> {
    if fused(&logits.device(), logits.dtype()) {
        fused_ops::cross_entropy(logits, labels)
    } else if torch(&logits.device()) {
        torch_cross_entropy(logits, labels)
    } else {
        cross_entropy::composed(logits, labels)
    }
}

/// One token id per row of `logits` `[rows, vocab]`, drawn from the row's softmax at
/// temperature 1 (detached: sampling has no gradient), as an integer tensor on the logits'
/// device (see [`sampling`](mod@sampling)): our kernel on the logits in place, the same kernel on
/// a host copy, or Gumbel-max on the device. The host draws take their seed from the dropout
/// masks' per-call seeds.
pub fn sample(logits: &Tensor<2>) -> Tensor<1, Int> {
    let logits = logits.clone().detach();
    if fused(&logits.device(), logits.dtype()) {
        return fused_ops::sample(logits, dropout::next_call_seed());
    }
    sampling::sample_copied_or_on_device(logits)
}

/// One AdamW update of parameter `p` with gradient `g` and moments `m`, `v` (plain tensors; see
/// [`adamw`](mod@adamw) for the formulas): the new `(p, m, v)`. Our fused kernel, or burn's
/// operations.
pub fn adamw(
    p: Tensor<1>,
    g: Tensor<1>,
    m: Tensor<1>,
    v: Tensor<1>,
    s: AdamWStep,
) -> (Tensor<1>, Tensor<1>, Tensor<1>) {
    if fused(&p.device(), p.dtype()) {
        return fused_ops::adamw(p, g, m, v, s);
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
