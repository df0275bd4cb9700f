//! Inverted dropout, y = x ⊙ m / (1 − p) with m ~ Bernoulli(1 − p) per element, as
//! `torch.nn.Dropout` (active only while training on an autodiff device).
//!
//! burn's own `Dropout` draws the mask element by element from one host RNG on a single thread
//! and then multiplies twice (by the mask, then by 1 / (1 − p)). Here, on CPU devices, the mask
//! already holds 0 or 1 / (1 − p), is filled in parallel (fixed chunks, each a Philox stream of
//! one per-call seed ([`philox`]), so the result does not depend on the thread count) and
//! applied with one multiply. On LibTorch devices it is LibTorch's `native_dropout` (one
//! kernel, a one-byte mask kept for the backward pass; its generator is the one
//! [`seed`](super::seeds::seed) seeds; [`torch`]).
//! burn's CUDA backend keeps burn's on-device draws, which cost no host transfer.
//! Each mask's seed is the next per-call seed ([`seeds`](super::seeds)).

use std::mem::MaybeUninit;

use burn::nn::Dropout;
use burn::prelude::*;
use multiversion::multiversion;
use rayon::prelude::*;

use super::host::on_host;
use super::seeds::next_call;

pub mod philox;
pub mod residual;
#[cfg(feature = "tch")]
pub mod torch;

pub use residual::dropout_add;

/// Elements per independently seeded chunk of a mask.
const CHUNK: usize = 1 << 14;

/// How a word of the generator decides an element: dropped when it falls below p · 2³²; a kept
/// element is scaled by 1 / (1 − p).
#[derive(Clone, Copy, Debug)]
struct MaskRule {
    scale: f32,
    threshold: u32,
}

impl MaskRule {
    fn new(p: f64) -> Self {
        MaskRule {
            scale: (1.0 / (1.0 - p)) as f32,
            threshold: (p * 4_294_967_296.0).min(u32::MAX as f64) as u32,
        }
    }

    #[inline(always)]
    fn keeps(self, word: u32) -> bool {
        word >= self.threshold
    }
}

/// Words `batch · BATCH ..` of a chunk's stream, the ones that decide its elements from
/// `batch · BATCH` on (element `i` of a chunk takes word `i` of its stream): the batch's blocks
/// of the Philox stream start at `batch · LANES`.
#[inline(always)]
fn batch_words(call_seed: u64, stream: u64, batch: usize) -> [u32; philox::BATCH] {
    philox::words(call_seed, stream, (batch * philox::LANES) as u64)
}

/// Applies `d` (its probability and its training flag) to `x`.
pub fn dropout<const D: usize>(d: &Dropout, x: Tensor<D>) -> Tensor<D> {
    let device = x.device();
    if !active(d, &device) {
        return x;
    }
    if super::select::torch(&device) {
        return torch_call(x, d.prob);
    }
    if !on_host(&device) {
        return d.forward(x);
    }
    let shape = x.shape();
    let mask = mask_values(shape.num_elements(), d.prob, next_call());
    // The mask in x's dtype (bf16 activations under mixed precision).
    let dtype = burn::tensor::FloatDType::from(x.dtype());
    x * Tensor::<D>::from_data(TensorData::new(mask, shape), &device).cast(dtype)
}

/// Whether `d` drops anything on `device`: training, on an autodiff device, with p > 0.
pub(crate) fn active(d: &Dropout, device: &Device) -> bool {
    d.training.is_enabled() && device.is_autodiff() && d.prob > 0.0
}

/// LibTorch's inverted dropout with probability `p` in (0, 1) as one burn operation, kept
/// values scaled by `1 / (1 − p)`. For training only. Only where [`torch`](super::torch)
/// holds.
pub fn torch_call<const D: usize>(x: Tensor<D>, p: f64) -> Tensor<D> {
    Tensor::from_dispatch(extension_op!(
        "tch",
        torch::TorchDropout,
        torch_dropout(x.into_dispatch(), p)
    ))
}

/// `n` mask values: 0 with probability `p`, else 1 / (1 − p). The buffer is written once, by
/// the mask itself (not zeroed first).
pub fn mask_values(n: usize, p: f64, call_seed: u64) -> Vec<f32> {
    // SAFETY: the chunks cover the buffer, and `fill_mask_into` writes every element of each.
    let (mask, ()) = unsafe {
        super::buffers::filled_by(n, |out| {
            out.par_chunks_mut(CHUNK)
                .enumerate()
                .for_each(|(i, chunk)| fill_mask_into(chunk, p, call_seed, i as u64))
        })
    };
    mask
}

/// Fills `out` with mask values (0 with probability `p`, else 1 / (1 − p)) from stream `stream`
/// of the Philox generator keyed with `call_seed`: the same arguments give the same values.
pub fn fill_mask(out: &mut [f32], p: f64, call_seed: u64, stream: u64) {
    // SAFETY: `f32` and `MaybeUninit<f32>` have one layout, and only `f32` values are written.
    let out = unsafe { &mut *(out as *mut [f32] as *mut [MaybeUninit<f32>]) };
    fill_mask_into(out, p, call_seed, stream);
}

/// [`fill_mask`] into a buffer that may be uninitialised: every element of `out` is written.
/// Word `i` of the stream decides element `i` ([`MaskRule`]).
#[multiversion(targets = "simd")]
fn fill_mask_into(out: &mut [MaybeUninit<f32>], p: f64, call_seed: u64, stream: u64) {
    let rule = MaskRule::new(p);
    for (batch, chunk) in out.chunks_mut(philox::BATCH).enumerate() {
        let words = batch_words(call_seed, stream, batch);
        for (v, &w) in chunk.iter_mut().zip(words.iter()) {
            v.write(if rule.keeps(w) { rule.scale } else { 0.0 });
        }
    }
}
