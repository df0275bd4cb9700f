//! Fused CPU kernels with their own backward passes: multi-head attention, LayerNorm, GELU,
//! `Linear`, the MLM cross-entropy, and the AdamW update.
//!
//! Under autodiff, burn composes these from many tensor operations, each a pass over memory
//! with its own backward node and fresh buffers. On the `flex` CPU backend each is one operation
//! here, forward and backward, registered with burn's backend-extension mechanism (`FusedOps`)
//! and its autodiff `Backward` steps. The model calls the wrappers below where [`fused`] says
//! yes; elsewhere (another backend, or a dtype other than f32) it composes burn's own operations
//! with the same formulas. `tests/kernels.rs` checks every kernel against that composed version,
//! values and gradients (AdamW: `tests/optimizer.rs`, against the composed multi-tensor update).
//!
//! On burn's LibTorch backend (feature `tch`) the biased products, attention, LayerNorm, GELU,
//! dropout and the cross-entropy are single LibTorch calls instead, each one burn operation with LibTorch's own
//! backward ([`libtorch`](mod@libtorch), where [`torch`] says yes; `tests/libtorch.rs`).

// Without `flex` (`tch`) the wrappers below end in `unreachable!` (callers check [`fused`]
// ([`torch`]) first).
#![cfg_attr(
    any(not(feature = "flex"), not(feature = "tch")),
    allow(unreachable_code)
)]

pub mod adamw;
pub mod attention;
pub mod cross_entropy;
pub mod cuda_graph;
pub mod dropout;
#[cfg(feature = "flex")]
mod flex;
pub mod gelu;
pub mod gemm;
pub mod grad_watch;
pub mod layer_norm;
#[cfg(feature = "tch")]
mod libtorch;
pub mod linear;
pub mod op_count;
pub mod param_cast;
pub mod sampling;

use burn::backend::DispatchDevice;
use burn::prelude::*;
use burn::tensor::DType;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rayon::prelude::*;

pub use adamw::AdamWStep;
#[cfg(feature = "tch")]
pub(crate) use libtorch::{cuda_index, tch_tensor};
pub use param_cast::cast as param_cast;

pub use attention::{Dims, DropMask};

/// Set: the model composes burn's operations everywhere, as on a backend without kernels.
static COMPOSED: AtomicBool = AtomicBool::new(false);

/// Turns the fused kernels and the single LibTorch calls off (`true`) or on (`false`, the
/// default) for the whole process: the composed operations they are checked against, for
/// measuring what they bring (`bench --kernels composed`).
pub fn set_composed(composed: bool) {
    COMPOSED.store(composed, Ordering::Relaxed);
}

fn composed() -> bool {
    COMPOSED.load(Ordering::Relaxed)
}

/// Device→host reads made so far by this process (see [`host_reads`]).
static HOST_READS: AtomicU64 = AtomicU64::new(0);

/// How many times this process has read tensor values back to the host through trueneg's
/// read points: [`host_ids`], [`read_floats`] and `interop::tensors::HostTensor::from_tensor`
/// (every read of the training loop goes through one of them). On a GPU each is a wait for
/// the device; a training step between its batch upload and its logging window makes none
/// (`tests/host_reads.rs`). The fused CPU kernels, which work on host memory in place, are
/// not reads.
pub fn host_reads() -> u64 {
    HOST_READS.load(Ordering::Relaxed)
}

/// Counts one device→host read (see [`host_reads`]).
pub(crate) fn count_read() {
    HOST_READS.fetch_add(1, Ordering::Relaxed);
}

/// The values of a float tensor on the host as f64, in row-major order: one counted read.
pub(crate) fn read_floats<const D: usize>(t: Tensor<D>) -> Vec<f64> {
    count_read();
    t.into_data()
        .convert::<f64>()
        .try_into_vec::<f64>()
        .expect("float data")
}

/// Whether the fused kernels serve tensors of `dtype` on `device`: f32 on the `flex` backend.
pub fn fused(device: &Device, dtype: DType) -> bool {
    #[cfg(feature = "flex")]
    {
        dtype == DType::F32 && flex::is_flex(device) && !composed()
    }
    #[cfg(not(feature = "flex"))]
    {
        let _ = (device, dtype);
        false
    }
}

/// Calls operation `op` of the backend extension `ext` through burn's dispatch backend in a
/// build with cargo feature `feature`; without it the arguments are dropped and the call is
/// unreachable (callers check [`fused`] or [`torch`] first).
macro_rules! extension_op {
    ($feature:literal, $ext:path, $op:ident($($arg:expr),* $(,)?)) => {{
        #[cfg(feature = $feature)]
        {
            <burn::backend::Dispatch as $ext>::$op($($arg),*)
        }
        #[cfg(not(feature = $feature))]
        {
            $(let _ = $arg;)*
            unreachable!(concat!("this operation needs cargo feature ", $feature))
        }
    }};
}

/// Calls a `FusedOps` operation (only reached where [`fused`] holds).
macro_rules! fused_op {
    ($($call:tt)*) => {
        extension_op!("flex", flex::FusedOps, $($call)*)
    };
}

/// Calls a `TorchOps` operation (only reached where [`torch`] holds).
macro_rules! torch_op {
    ($($call:tt)*) => {
        extension_op!("tch", libtorch::TorchOps, $($call)*)
    };
}

/// Whether the biased products, attention, LayerNorm, GELU, dropout and the cross-entropy run as
/// single LibTorch calls on `device` (any float dtype): the LibTorch backend's devices, in a
/// build with feature `tch`.
pub fn torch(device: &Device) -> bool {
    #[cfg(feature = "tch")]
    {
        libtorch::is_libtorch(device) && !composed()
    }
    #[cfg(not(feature = "tch"))]
    {
        let _ = device;
        false
    }
}

/// The attention context `[batch, len, hidden]` of the packed projections `qkv` `[batch, len,
/// 3 · hidden]`, as [`attention`] computes it, with the additive key bias `[batch, len]` (`None`
/// without padding) and dropout `p` on the probabilities (0: none). Only where [`torch`] holds.
pub fn torch_attention(
    qkv: Tensor<3>,
    key_bias: Option<Tensor<2>>,
    heads: usize,
    dropout: f64,
) -> Tensor<3> {
    let padded = key_bias.is_some();
    let [batch, len, _] = qkv.dims();
    // Unread without padding: an allocation, not a kernel filling it.
    let key_bias = key_bias.unwrap_or_else(|| Tensor::empty([batch, len], &qkv.device()));
    Tensor::from_dispatch(torch_op!(torch_attention(
        qkv.into_dispatch(),
        key_bias.into_dispatch(),
        padded,
        heads,
        dropout,
    )))
}

/// `x W + b` for rows `x` `[rows, in]`, `W` `[in, out]`, `b` `[out]` (one dtype): one LibTorch
/// `addmm`. Only where [`torch`] holds.
pub fn torch_linear(x: Tensor<2>, w: Tensor<2>, b: Tensor<1>) -> Tensor<2> {
    Tensor::from_dispatch(torch_op!(torch_linear(
        x.into_dispatch(),
        w.into_dispatch(),
        b.into_dispatch(),
    )))
}

/// LayerNorm of the last dimension. Only where [`torch`] holds.
pub fn torch_layer_norm<const D: usize>(
    x: Tensor<D>,
    gamma: Tensor<1>,
    beta: Tensor<1>,
    eps: f64,
) -> Tensor<D> {
    Tensor::from_dispatch(torch_op!(torch_layer_norm(
        x.into_dispatch(),
        gamma.into_dispatch(),
        beta.into_dispatch(),
        eps,
    )))
}

/// GELU, exact erf form. Only where [`torch`] holds.
pub fn torch_gelu<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    Tensor::from_dispatch(torch_op!(torch_gelu(x.into_dispatch())))
}

/// Inverted dropout with probability `p` in (0, 1): kept values scaled by `1 / (1 − p)`. For
/// training only. Only where [`torch`] holds.
pub fn torch_dropout<const D: usize>(x: Tensor<D>, p: f64) -> Tensor<D> {
    Tensor::from_dispatch(torch_op!(torch_dropout(x.into_dispatch(), p)))
}

/// Per-row `lse(z) − z[y]` `[n]` of logits `[n, vocab]`, in f32. Only where [`torch`] holds.
pub fn torch_cross_entropy(logits: Tensor<2>, labels: Tensor<1, Int>) -> Tensor<1> {
    Tensor::from_dispatch(torch_op!(torch_cross_entropy(
        logits.into_dispatch(),
        labels.into_dispatch(),
    )))
}

/// Our fused CPU kernels' operations, one each; callable only where [`fused`] holds. Model code
/// calls the facades below, which choose.
pub mod fused_ops {
    use super::*;

    /// Multi-head attention context `[batch, len, hidden]` from the packed projections `qkv`
    /// `[batch, len, 3 · hidden]` (Q, K, V on each row: the one product of the three
    /// projections) and the additive key bias `[batch, len]` (see
    /// [`attention`](mod@super::attention)). Only where [`fused`] holds.
    pub fn attention(
        qkv: Tensor<3>,
        key_bias: Tensor<2>,
        heads: usize,
        dropout: Option<DropMask>,
    ) -> Tensor<3> {
        let (p, seed) = dropout.map_or((0.0, 0), |m| (m.p, m.seed));
        Tensor::from_dispatch(fused_op!(fused_attention(
            qkv.into_dispatch(),
            key_bias.into_dispatch(),
            heads,
            p,
            seed,
        )))
    }

    /// LayerNorm of the last dimension (see [`layer_norm`](mod@super::layer_norm)). Only where
    /// [`fused`] holds.
    pub fn layer_norm<const D: usize>(
        x: Tensor<D>,
        gamma: Tensor<1>,
        beta: Tensor<1>,
        eps: f64,
    ) -> Tensor<D> {
        Tensor::from_dispatch(fused_op!(fused_layer_norm(
            x.into_dispatch(),
            gamma.into_dispatch(),
            beta.into_dispatch(),
            eps,
        )))
    }

    /// GELU (exact erf form, see [`gelu`](mod@gelu)). Only where [`fused`] holds.
    pub fn gelu<const D: usize>(x: Tensor<D>) -> Tensor<D> {
        Tensor::from_dispatch(fused_op!(fused_gelu(x.into_dispatch())))
    }

    /// `x W + b` for rows `x` `[rows, in]`, `W` `[in, out]` (may be a transposed view), `b`
    /// `[out]` (see [`linear`](mod@super::linear)). Only where [`fused`] holds.
    pub fn linear(x: Tensor<2>, w: Tensor<2>, b: Tensor<1>) -> Tensor<2> {
        Tensor::from_dispatch(fused_op!(fused_linear(
            x.into_dispatch(),
            w.into_dispatch(),
            b.into_dispatch(),
            false,
        )))
    }

    /// `x Wᵀ + b` for `W` stored `[out, in]` (the MLM decoder's tied word embeddings). The same
    /// as [`linear`] with `W.transpose()`, but `W`'s gradient comes back in `W`'s own layout, so
    /// that it adds to the embedding lookup's gradient without a strided pass over it. Only where
    /// [`fused`] holds.
    pub fn linear_transposed(x: Tensor<2>, w: Tensor<2>, b: Tensor<1>) -> Tensor<2> {
        Tensor::from_dispatch(fused_op!(fused_linear(
            x.into_dispatch(),
            w.into_dispatch(),
            b.into_dispatch(),
            true,
        )))
    }

    /// Per-row cross-entropy `lse(z) − z[y]` `[n]` of logits `[n, vocab]` against `labels`
    /// `[n]` (see [`cross_entropy`](mod@super::cross_entropy)). Only where [`fused`] holds.
    pub fn cross_entropy(logits: Tensor<2>, labels: Tensor<1, Int>) -> Tensor<1> {
        Tensor::from_dispatch(fused_op!(fused_cross_entropy(
            logits.into_dispatch(),
            labels.into_dispatch(),
        )))
    }

    /// One AdamW update of parameter `p` with gradient `g` and moments `m`, `v` (see
    /// [`adamw`](mod@adamw)): the new `(p, m, v)`. Only where [`fused`] holds; plain tensors
    /// only.
    pub fn adamw(
        p: Tensor<1>,
        g: Tensor<1>,
        m: Tensor<1>,
        v: Tensor<1>,
        step: AdamWStep,
    ) -> (Tensor<1>, Tensor<1>, Tensor<1>) {
        let (p, m, v) = fused_op!(fused_adamw(
            p.into_dispatch(),
            g.into_dispatch(),
            m.into_dispatch(),
            v.into_dispatch(),
            step,
        ));
        (
            Tensor::from_dispatch(p),
            Tensor::from_dispatch(m),
            Tensor::from_dispatch(v),
        )
    }
}

/// Multi-head self-attention's context `[batch, len, hidden]` from the packed projections `qkv`
/// `[batch, len, 3 · hidden]` (Q, K, V on each row) and the additive key bias `[batch, len]`
/// (`None`: nothing padded), with dropout `d` on the probabilities: our fused kernel, LibTorch's
/// call, or burn's operations (scores and softmax in f32, products in `qkv`'s dtype).
pub fn attention(
    qkv: Tensor<3>,
    key_bias: Option<Tensor<2>>,
    heads: usize,
    d: &burn::nn::Dropout,
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
        return fused_ops::attention(qkv, key_bias, heads, mask);
    }
    if torch(&device) {
        let p = if active { d.prob } else { 0.0 };
        return torch_attention(qkv, key_bias, heads, p);
    }
    attention::composed(qkv, key_bias, heads, d)
}

/// LayerNorm `ln` (made with `eps`) of `x`'s last dimension: our fused kernel, LibTorch's call,
/// or burn's module.
pub fn layer_norm<const D: usize>(ln: &burn::nn::LayerNorm, eps: f64, x: Tensor<D>) -> Tensor<D> {
    match &ln.beta {
        Some(beta) if fused(&x.device(), x.dtype()) => {
            fused_ops::layer_norm(x, ln.gamma.val(), beta.val(), eps)
        }
        Some(beta) if torch(&x.device()) => torch_layer_norm(x, ln.gamma.val(), beta.val(), eps),
        _ => ln.forward(x),
    }
}

/// GELU in its exact (erf) form: our fused kernel, LibTorch's call, or burn's.
pub fn gelu<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    if fused(&x.device(), x.dtype()) {
        fused_ops::gelu(x)
    } else if torch(&x.device()) {
        torch_gelu(x)
    } else {
        burn::tensor::activation::gelu(x)
    }
}

/// `x W + b` for rows `x` `[rows, in]`, `W` `[in, out]`, in the operands' dtype (the caller casts
/// them): our fused kernel, LibTorch's `addmm`, or burn's product and sum.
pub fn linear(x: Tensor<2>, w: Tensor<2>, b: Option<Tensor<1>>) -> Tensor<2> {
    let dtype = burn::tensor::FloatDType::from(x.dtype());
    match b {
        Some(b) if fused(&x.device(), x.dtype()) => fused_ops::linear(x, w, b),
        Some(b) if torch(&x.device()) => torch_linear(x, w, param_cast(b, dtype)),
        Some(b) => x.matmul(w) + b.cast(dtype).unsqueeze::<2>(),
        None => x.matmul(w),
    }
}

/// `x Wᵀ + b` for `W` stored `[out, in]` (the MLM decoder's tied word embeddings): the product
/// in `x`'s dtype, the result in `b`'s (f32 logits). Our fused kernel (`W`'s gradient in its own
/// layout), or burn's product and sum.
pub fn linear_transposed(x: Tensor<2>, w: Tensor<2>, b: Tensor<1>) -> Tensor<2> {
    if fused(&x.device(), x.dtype()) {
        return fused_ops::linear_transposed(x, w, b);
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

/// Buffers of at least this many elements are filled by all of rayon's threads.
const PARALLEL_FILL: usize = 1 << 16;

/// `n` zeros (the dropout masks' buffers; the kernels' outputs are written whole instead, see
/// [`filled_by`]). Large ones are written by all of rayon's threads (`vec![0; n]` zeroes on the
/// calling thread while the others wait).
pub(crate) fn zeros(n: usize) -> Vec<f32> {
    if n < PARALLEL_FILL {
        return vec![0f32; n];
    }
    let mut v = Vec::with_capacity(n);
    v.par_extend(rayon::iter::repeat_n(0f32, n));
    v
}

/// A fresh `n`-element buffer written by `write`, which gets it uninitialised, and whatever
/// `write` returns. For the kernels' outputs, which they write whole (element-wise loops, and
/// products that do not accumulate: see `gemm::product_new`): zeroing them first was a
/// memory-bound pass of its own over every output.
///
/// # Safety
/// `write` must initialise every one of the `n` elements.
pub(crate) unsafe fn filled_by<R>(
    n: usize,
    write: impl FnOnce(&mut [MaybeUninit<f32>]) -> R,
) -> (Vec<f32>, R) {
    let mut v = Vec::with_capacity(n);
    let r = write(&mut v.spare_capacity_mut()[..n]);
    // SAFETY: `write` initialised the first `n` elements (the caller's promise).
    unsafe { v.set_len(n) };
    (v, r)
}

/// `rows` copies of `row`, one after another (the bias rows a product accumulates onto),
/// written in parallel when large.
pub(crate) fn repeated_rows(row: &[f32], rows: usize) -> Vec<f32> {
    let n = rows * row.len();
    if n < PARALLEL_FILL || row.is_empty() {
        return row.repeat(rows);
    }
    // SAFETY: the blocks are whole rows (a multiple of `row.len()` elements, the last one too,
    // since `n` is) and cover the buffer; each of their rows is written whole.
    let (v, ()) = unsafe {
        filled_by(n, |v| {
            v.par_chunks_mut(row.len() * 64).for_each(|block| {
                for dst in block.chunks_exact_mut(row.len()) {
                    for (d, &x) in dst.iter_mut().zip(row) {
                        d.write(x);
                    }
                }
            })
        })
    };
    v
}

/// Lanes of the vectorised reductions below: independent partial results, so that the compiler
/// may keep them in one SIMD register (a single running sum must be added in order).
const LANES: usize = 8;

/// `Σ f(x)` over `xs`, in [`LANES`] partial sums (a fixed order: the same result every time).
///
/// `f` is mapped over a block of values first and the block then added lane by lane: written as
/// one loop, `acc[k] += f(c[k])` with a costly `f` (the cross-entropy's `exp`) stayed scalar.
/// The additions are the same, in the same order.
#[inline(always)]
pub(crate) fn sum_map(xs: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    const BLOCK: usize = 8 * LANES;
    let mut acc = [0f32; LANES];
    let mut values = [0f32; BLOCK];
    let whole = xs.len() - xs.len() % LANES;
    for block in xs[..whole].chunks(BLOCK) {
        let values = &mut values[..block.len()];
        for (v, &x) in values.iter_mut().zip(block) {
            *v = f(x);
        }
        for c in values.chunks_exact(LANES) {
            for k in 0..LANES {
                acc[k] += c[k];
            }
        }
    }
    let rest: f32 = xs[whole..].iter().map(|&x| f(x)).sum();
    acc.iter().sum::<f32>() + rest
}

/// `max(xs)` (`f32::MIN` when empty), in [`LANES`] partial maxima.
#[inline(always)]
pub(crate) fn max_lanes(xs: &[f32]) -> f32 {
    let mut acc = [f32::MIN; LANES];
    let chunks = xs.chunks_exact(LANES);
    let rest = chunks
        .remainder()
        .iter()
        .fold(f32::MIN, |m, &x| if x > m { x } else { m });
    for c in chunks {
        for k in 0..LANES {
            acc[k] = if c[k] > acc[k] { c[k] } else { acc[k] };
        }
    }
    acc.iter().fold(rest, |m, &x| if x > m { x } else { m })
}

/// `e^v` for `v ≤ 0` (exactly 0 below −87), branch-free so that loops over it vectorise:
/// Cody–Waite range reduction and a degree-6 polynomial, relative error < 2e-7.
#[inline(always)]
pub(crate) fn exp_non_positive(v: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    // Adding and subtracting 1.5 · 2²³ rounds to the nearest integer.
    const ROUND: f32 = 12_582_912.0;
    let clamped = v.max(-87.0);
    let k = (clamped * LOG2E + ROUND) - ROUND;
    let r = (clamped - k * LN2_HI) - k * LN2_LO;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    let scale = f32::from_bits(((k as i32 + 127) as u32) << 23);
    if v < -87.0 { 0.0 } else { p * scale }
}

/// The values of an integer tensor (token ids, argmax indices) on the host, in row-major order.
pub(crate) fn host_ids<const D: usize>(t: Tensor<D, Int>) -> Vec<u32> {
    count_read();
    t.into_data()
        .convert::<i64>()
        .try_into_vec::<i64>()
        .expect("ids")
        .into_iter()
        .map(|v| v as u32)
        .collect()
}

/// Token ids (or other small integers) `values` as an integer tensor of `shape` on `device`.
pub(crate) fn device_ids<const D: usize>(
    values: &[u32],
    shape: [usize; D],
    device: &Device,
) -> Tensor<D, Int> {
    let v: Vec<i64> = values.iter().map(|&x| x as i64).collect();
    Tensor::from_data(TensorData::new(v, shape), device)
}

/// Whether tensors on `device` live in host memory: the CPU fast paths (dropout masks, GELU)
/// are taken there; other devices use burn's own kernels and sampling.
#[allow(unreachable_patterns)]
pub(crate) fn on_host(device: &Device) -> bool {
    match device.clone().inner().as_dispatch() {
        #[cfg(feature = "flex")]
        DispatchDevice::Flex(_) => true,
        #[cfg(feature = "ndarray")]
        DispatchDevice::NdArray(_) => true,
        _ => false,
    }
}
