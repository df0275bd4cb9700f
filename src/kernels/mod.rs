//! Fused CPU kernels with their own backward passes, one module per operation: multi-head
//! attention, the normalisation, the activation, the affine map of rows, dropout, the MLM loss,
//! row lookups (embeddings, gathers), sampling, the parameters' casts and the optimizer's
//! update. Each module holds side by side the facade model code calls, its host kernel, its
//! operation on burn's `flex` backend with its backward step, the composed reference, and its
//! LibTorch call (`<op>/torch.rs`). Below the operations sit the shared pieces: the strided
//! products (`gemm*`, `bf16_pack`), SIMD helpers, buffers, the per-call seeds, and the backend
//! glue (`flex_tensors`, `libtorch`, `macros`, `select`).
//!
//! Under autodiff, burn composes these from many tensor operations, each a pass over memory
//! with its own backward node and fresh buffers. On the `flex` CPU backend each is one operation
//! here, forward and backward, registered with burn's backend-extension mechanism (a trait per
//! operation) and its autodiff `Backward` step. A facade calls our kernel where [`fused`] says
//! yes, a single LibTorch call where [`torch`] says yes (feature `tch`, LibTorch's own
//! backward), and elsewhere (another backend, or a dtype other than f32) composes burn's own
//! operations with the same formulas. `tests/suite/kernels.rs` checks every kernel against that
//! composed version, values and gradients (the optimizer's update: `tests/suite/optimizer.rs`,
//! against the composed multi-tensor update; row lookups: `tests/suite/kernel_rows.rs`, bit for
//! bit against burn's `select`); `tests/libtorch.rs` checks the LibTorch calls.

// Without `flex` (`tch`) the calls of an operation end in `unreachable!` (callers check
// [`fused`] ([`torch`]) first).
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
mod flex_tensors;
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
pub mod sampling;
pub mod seeds;
mod select;
pub mod select_rows;
mod simd;
pub mod trial;
pub mod views;

pub use adamw::{AdamWStep, adamw};
pub use attention::{Dims, DropMask, attention};
pub use cross_entropy::{cross_entropy, cross_entropy_and_argmax};
pub use gelu::gelu;
pub use gemm::Products;
pub use host::host_reads;
pub(crate) use host::{count_read, device_ids, host_ids, on_host, read_floats};
pub use layer_norm::layer_norm;
#[cfg(feature = "tch")]
pub(crate) use libtorch::{cuda_index, tch_tensor};
pub use linear::{linear, linear_transposed};
pub use param_cast::cast as param_cast;
pub use sampling::sample;
pub use select::{fused, set_composed, torch};
pub use select_rows::select_rows;
