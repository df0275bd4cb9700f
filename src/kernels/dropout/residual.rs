//! A sublayer's dropout and residual connection as one operation: `r + dropout(h)`, the sum
//! that is normalised next in each encoder layer (transformers' `dropout(h) + r` in its
//! sublayers' outputs).
//!
//! Composed, that is three passes and an f32 mask kept for the backward pass: the mask is
//! written, multiplied into `h`, the product added to `r`; backward, the gradient is multiplied
//! by the mask. Here, on CPU devices, one parallel pass draws the mask, writes the sum and keeps
//! one byte per element (kept or dropped); the backward pass reads those bytes. The mask is the
//! one [`mask_values`](super::mask_values) draws for the same seed (the same chunks, streams
//! and rule), and each element is computed with the same f32 operations as the composed
//! `h · m + r`, so the values are the composed ones bit for bit
//! (`tests/suite/kernel_dropout_add.rs`).

use std::mem::MaybeUninit;

use burn::nn::Dropout;
use burn::prelude::*;
use burn::tensor::FloatDType;
use multiversion::multiversion;
use rayon::prelude::*;

use super::super::seeds::next_call;
use super::super::select::fused;
use super::{CHUNK, MaskRule, active, batch_words, dropout, philox};

/// `residual + dropout(d, h)`, the sum in f32 (the residual stream's dtype): our fused kernel
/// where it serves (training, f32 tensors of one shape on the `flex` backend), else the
/// composed operations.
pub fn dropout_add<const D: usize>(d: &Dropout, h: Tensor<D>, residual: Tensor<D>) -> Tensor<D> {
    let device = h.device();
    let served = active(d, &device)
        && fused(&device, h.dtype())
        && residual.dtype() == h.dtype()
        && residual.dims() == h.dims();
    if served {
        return fused_call(h, residual, d.prob, next_call());
    }
    dropout(d, h).cast(FloatDType::F32) + residual
}

/// Our fused kernel as one burn operation. Only where [`fused`] holds, for tensors of one
/// shape.
pub fn fused_call<const D: usize>(
    h: Tensor<D>,
    residual: Tensor<D>,
    p: f64,
    call_seed: u64,
) -> Tensor<D> {
    Tensor::from_dispatch(extension_op!(
        "flex",
        flex_op::DropoutAddOps,
        fused_dropout_add(h.into_dispatch(), residual.into_dispatch(), p, call_seed)
    ))
}

/// `r + dropout(h)` with the mask of `call_seed`, and which elements were kept (1) or dropped
/// (0), one byte each.
pub fn forward(h: &[f32], r: &[f32], p: f64, call_seed: u64) -> (Vec<f32>, Vec<u8>) {
    assert_eq!(h.len(), r.len(), "dropout_add: operands differ in length");
    let rule = MaskRule::new(p);
    let mut kept = Vec::with_capacity(h.len());
    // SAFETY: the chunks cover both buffers, and `sum_chunk` writes every element of its
    // chunk of each (the four slices of a chunk have one length).
    let (sum, ()) = unsafe {
        super::super::buffers::filled_by(h.len(), |out| {
            out.par_chunks_mut(CHUNK)
                .zip(kept.spare_capacity_mut()[..h.len()].par_chunks_mut(CHUNK))
                .zip(h.par_chunks(CHUNK).zip(r.par_chunks(CHUNK)))
                .enumerate()
                .for_each(|(i, ((out, kept), (h, r)))| {
                    sum_chunk(out, kept, h, r, rule, call_seed, i as u64)
                })
        })
    };
    // SAFETY: every byte was written above.
    unsafe { kept.set_len(h.len()) };
    (sum, kept)
}

/// `∂h = g · m` (m: 0 where dropped, else 1 / (1 − p)); `∂r` is `g` itself.
pub fn backward(g: &[f32], kept: &[u8], p: f64) -> Vec<f32> {
    assert_eq!(
        g.len(),
        kept.len(),
        "dropout_add: gradient and mask differ in length"
    );
    let scale = MaskRule::new(p).scale;
    // SAFETY: the chunks cover the buffer, and `masked_chunk` writes every element of each.
    let (dh, ()) = unsafe {
        super::super::buffers::filled_by(g.len(), |dh| {
            dh.par_chunks_mut(CHUNK)
                .zip(g.par_chunks(CHUNK).zip(kept.par_chunks(CHUNK)))
                .for_each(|(dh, (g, kept))| masked_chunk(dh, g, kept, scale))
        })
    };
    dh
}

/// One chunk of [`forward`]: stream `stream` of the Philox generator keyed with `call_seed`,
/// word `i` deciding element `i` as [`MaskRule`] says ([`batch_words`]).
#[multiversion(targets = "simd")]
fn sum_chunk(
    out: &mut [MaybeUninit<f32>],
    kept: &mut [MaybeUninit<u8>],
    h: &[f32],
    r: &[f32],
    rule: MaskRule,
    call_seed: u64,
    stream: u64,
) {
    let batches = out
        .chunks_mut(philox::BATCH)
        .zip(kept.chunks_mut(philox::BATCH))
        .zip(h.chunks(philox::BATCH).zip(r.chunks(philox::BATCH)));
    for (batch, ((out, kept), (h, r))) in batches.enumerate() {
        let words = batch_words(call_seed, stream, batch);
        for ((((o, k), &h), &r), &w) in out.iter_mut().zip(kept).zip(h).zip(r).zip(&words) {
            let keep = rule.keeps(w);
            o.write(h * if keep { rule.scale } else { 0.0 } + r);
            k.write(keep as u8);
        }
    }
}

/// One chunk of [`backward`].
#[multiversion(targets = "simd")]
fn masked_chunk(dh: &mut [MaybeUninit<f32>], g: &[f32], kept: &[u8], scale: f32) {
    for ((d, &g), &k) in dh.iter_mut().zip(g).zip(kept) {
        d.write(g * if k != 0 { scale } else { 0.0 });
    }
}

/// The kernel as an operation of burn's `flex` backend, and its backward step on
/// `Autodiff<Flex>` (the gradient passed to the residual as it is, and masked to `h`).
#[cfg(feature = "flex")]
mod flex_op {
    use std::sync::Arc;

    use burn::backend::TensorMetadata;
    use burn::backend::autodiff::checkpoint::base::Checkpointer;
    use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
    use burn::backend::autodiff::grads::Gradients;
    use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
    use burn::backend::flex::FlexTensor;
    use burn::backend::tensor::FloatTensor;
    use burn::backend::{Autodiff, Backend, Flex, backend_extension};

    use super::super::super::flex_tensors::{host, tensor};
    use super::{backward, forward};

    #[backend_extension(Flex, Autodiff)]
    pub trait DropoutAddOps: Backend {
        /// `residual + dropout(h)` with probability `p` and the mask of `call_seed`.
        fn fused_dropout_add(
            h: FloatTensor<Self>,
            residual: FloatTensor<Self>,
            p: f64,
            call_seed: u64,
        ) -> FloatTensor<Self>;
    }

    impl DropoutAddOps for Flex {
        fn fused_dropout_add(h: FlexTensor, r: FlexTensor, p: f64, seed: u64) -> FlexTensor {
            let (sum, _) = forward(&host(&h), &host(&r), p, seed);
            tensor(sum, h.shape())
        }
    }

    impl<C: CheckpointStrategy> DropoutAddOps for Autodiff<Flex, C> {
        fn fused_dropout_add(
            h: FloatTensor<Self>,
            residual: FloatTensor<Self>,
            p: f64,
            call_seed: u64,
        ) -> FloatTensor<Self> {
            let guards = [h.node(), residual.node()];
            let (h, r) = (h.into_primitive(), residual.into_primitive());
            let shape = h.shape();
            let (sum, kept) = forward(&host(&h), &host(&r), p, call_seed);
            let sum = tensor(sum, shape);
            match Step.prepare::<C>(guards).compute_bound().stateful() {
                OpsKind::Tracked(prep) => {
                    let kept = Arc::new(kept);
                    prep.finish(State { kept, p }, sum)
                }
                OpsKind::UnTracked(prep) => prep.finish(sum),
            }
        }
    }

    #[derive(Debug)]
    struct Step;

    /// What the backward pass reads: which elements were kept, and the probability.
    #[derive(Clone, Debug)]
    struct State {
        kept: Arc<Vec<u8>>,
        p: f64,
    }

    impl Backward<Flex, 2> for Step {
        type State = State;

        fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
            let grad = grads.consume::<Flex>(&ops.node);
            let [node_h, node_r] = ops.parents;
            if let Some(node) = node_h {
                let dh = backward(&host(&grad), &ops.state.kept, ops.state.p);
                grads.register::<Flex>(node.id, tensor(dh, grad.shape()));
            }
            if let Some(node) = node_r {
                grads.register::<Flex>(node.id, grad);
            }
        }
    }
}
