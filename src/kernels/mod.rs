//! Fused CPU kernels with their own backward passes: multi-head attention, the normalisation,
//! the activation, `Linear`, the MLM loss, row lookups (embeddings, gathers), and the
//! optimizer's update. An operation moved to its own module (`layer_norm`, `gelu`, the loss, the
//! optimizer's update) holds its facade, its kernel,
//! its `flex` operation and backward step, and its LibTorch call side by side; the others are
//! still laid out by layer (`fused_ops`, `flex`, `flex_steps`, `torch_calls`, `libtorch`).
//!
//! Under autodiff, burn composes these from many tensor operations, each a pass over memory
//! with its own backward node and fresh buffers. On the `flex` CPU backend each is one operation
//! here, forward and backward, registered with burn's backend-extension mechanism (`FusedOps`)
//! and its autodiff `Backward` steps. The model calls the wrappers below where [`fused`] says
//! yes; elsewhere (another backend, or a dtype other than f32) it composes burn's own operations
//! with the same formulas. `tests/suite/kernels.rs` checks every kernel against that composed version,
//! values and gradients (the optimizer's update: `tests/suite/optimizer.rs`, against the composed multi-tensor update;
//! row lookups: `tests/suite/kernel_rows.rs`, bit for bit against burn's `select`).
//!
//! On burn's LibTorch backend (feature `tch`) the biased products, attention, the normalisation,
//! the activation, dropout and the MLM loss are single LibTorch calls instead, each one burn operation with LibTorch's own
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

pub use adamw::{AdamWStep, adamw};
pub use attention::{Dims, DropMask};
pub use cross_entropy::cross_entropy;
pub use gelu::gelu;
pub use gemm::Products;
pub use host::host_reads;
pub(crate) use host::{count_read, device_ids, host_ids, on_host, read_floats};
pub use layer_norm::layer_norm;
#[cfg(feature = "tch")]
pub(crate) use libtorch::{cuda_index, tch_tensor};
pub use param_cast::cast as param_cast;
pub use select::{fused, set_composed, torch};
pub use torch_calls::{torch_attention, torch_dropout, torch_linear};

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
