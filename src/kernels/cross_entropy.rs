//! The cross-entropy of rows of logits `[n, vocab]` against labels `[n]`, in one place: the
//! facade model code calls, our fused CPU kernel (forward and backward on the host) with its
//! operation on burn's `flex` backend and its backward step, the composed reference, and
//! LibTorch's call ([`torch`]) beside it.
//!
//! The kernel's formula:
//!
//! `lse = max(z) + ln Σ_j e^{z_j − max(z)}`, `nll = lse − z[y]`;
//! with `g = ∂L/∂nll` per row: `∂z_j = g · (e^{z_j − lse} − [j = y])`.
//!
//! One parallel pass per direction over the `[n, vocab]` logits (the MLM head's are
//! 304 × 30522 in the bench); only `lse` is kept for the backward pass, which recomputes the
//! probabilities from the logits. The forward pass also gives each row's argmax (the masked
//! LM's prediction, for its accuracy and the objectives), found beside the row's maximum, so
//! that the logits are not read once more for it.

use burn::prelude::*;
use burn::tensor::IndexingUpdateOp;
use burn::tensor::activation::softmax;
use std::mem::MaybeUninit;

use multiversion::multiversion;
use rayon::prelude::*;

use super::select::{fused, torch};
use super::simd::{exp_non_positive, max_lanes, sum_map};

#[cfg(feature = "tch")]
pub mod torch;

/// Per-row cross-entropy `lse(z) − z[y]` `[n]` of logits `[n, vocab]` against `labels` `[n]`:
/// our fused kernel, LibTorch's `log_softmax`, or burn's operations by the surrogate of
/// [`composed`].
pub fn cross_entropy(logits: Tensor<2>, labels: Tensor<1, Int>) -> Tensor<1> {
    if fused(&logits.device(), logits.dtype()) {
        fused_call(logits, labels).nll
    } else if torch(&logits.device()) {
        torch_call(logits, labels)
    } else {
        composed(logits, labels)
    }
}

/// A cross-entropy's per-row values and each row's prediction.
pub struct Scored {
    /// `lse(z) − z[y]` `[n]`, differentiable.
    pub nll: Tensor<1>,
    /// The index of each row's first maximum `[n]`, as `argmax` gives it (no gradient).
    pub argmax: Tensor<1, Int>,
}

/// [`cross_entropy`] and each row's argmax: from the fused kernel's one pass over the logits,
/// else by `argmax` beside the cross-entropy.
pub fn cross_entropy_and_argmax(logits: Tensor<2>, labels: Tensor<1, Int>) -> Scored {
    if fused(&logits.device(), logits.dtype()) {
        return fused_call(logits, labels);
    }
    let argmax = logits.clone().detach().argmax(1).squeeze_dim::<1>(1);
    Scored {
        nll: cross_entropy(logits, labels),
        argmax,
    }
}

/// Our fused kernel as one burn operation. Only where [`fused`](super::fused) holds.
pub fn fused_call(logits: Tensor<2>, labels: Tensor<1, Int>) -> Scored {
    let (nll, argmax) = extension_op!(
        "flex",
        flex_op::CrossEntropyOps,
        fused_cross_entropy(logits.into_dispatch(), labels.into_dispatch())
    );
    Scored {
        nll: Tensor::from_dispatch(nll),
        argmax: Tensor::from_dispatch(argmax),
    }
}

/// LibTorch's `log_softmax` and the label's entry, in f32, as one burn operation. Only where
/// [`torch`](super::torch) holds.
pub fn torch_call(logits: Tensor<2>, labels: Tensor<1, Int>) -> Tensor<1> {
    Tensor::from_dispatch(extension_op!(
        "tch",
        torch::TorchCrossEntropy,
        torch_cross_entropy(logits.into_dispatch(), labels.into_dispatch())
    ))
}

/// What the forward pass gives for each row.
pub struct Rows {
    /// `lse − z[y]`.
    pub nll: Vec<f32>,
    /// `lse`, which the backward pass reads.
    pub lse: Vec<f32>,
    /// The index of the row's first maximum.
    pub argmax: Vec<usize>,
}

/// One row's results, before they are gathered into [`Rows`].
struct Row {
    nll: f32,
    lse: f32,
    argmax: usize,
}

/// Per row: `nll`, `lse` and the argmax.
pub fn forward(z: &[f32], labels: &[usize], vocab: usize) -> Rows {
    check(z, labels, vocab);
    let rows: Vec<Row> = z
        .par_chunks(vocab)
        .zip(labels.par_iter())
        .map(|(row, &y)| {
            let (lse, argmax) = lse_and_argmax(row);
            Row {
                nll: lse - row[y],
                lse,
                argmax,
            }
        })
        .collect();
    Rows {
        nll: rows.iter().map(|r| r.nll).collect(),
        lse: rows.iter().map(|r| r.lse).collect(),
        argmax: rows.iter().map(|r| r.argmax).collect(),
    }
}

/// [`backward`] written over the logits, which become `∂z`: no second `[n, vocab]` buffer
/// (the backward pass's, where nothing else holds the logits any more).
pub fn backward_in_place(grad: &[f32], z: &mut [f32], labels: &[usize], lse: &[f32], vocab: usize) {
    check(z, labels, vocab);
    z.par_chunks_mut(vocab)
        .zip(labels.par_iter().zip(lse).zip(grad))
        .for_each(|(row, ((&y, &lse), &g))| {
            scaled_probabilities_in_place(row, lse, g);
            row[y] -= g;
        });
}

/// `∂z` from the per-row output gradient `grad`.
pub fn backward(grad: &[f32], z: &[f32], labels: &[usize], lse: &[f32], vocab: usize) -> Vec<f32> {
    check(z, labels, vocab);
    // SAFETY: the rows cover the buffer, and `scaled_probabilities` writes every element of
    // its row (`z` has the buffer's length), before `d[y]` is read.
    let (dz, ()) = unsafe {
        super::buffers::filled_by(z.len(), |dz| {
            dz.par_chunks_mut(vocab)
                .zip(z.par_chunks(vocab))
                .zip(labels.par_iter().zip(lse).zip(grad))
                .for_each(|((d, row), ((&y, &lse), &g))| {
                    scaled_probabilities(d, row, lse, g);
                    let p = d[y].assume_init();
                    d[y].write(p - g);
                })
        })
    };
    dz
}

/// `max(z) + ln Σ_j e^{z_j − max(z)}` of one row, and the index of its first maximum (of its
/// first NaN, if one comes before: burn's `argmax`'s rule). The row is read from memory once;
/// the two passes after the maximum's find it in the cache.
#[multiversion(targets = "simd")]
fn lse_and_argmax(row: &[f32]) -> (f32, usize) {
    let max = max_lanes(row);
    let lse = max + sum_map(row, |x| exp_non_positive(x - max)).ln();
    (lse, first_at(row, max))
}

/// The index of the first element of `row` that equals `max` or is NaN (0 when none does).
/// Blocks are tested whole, a test that vectorises, and only the block that holds it is
/// searched element by element.
#[inline(always)]
fn first_at(row: &[f32], max: f32) -> usize {
    const BLOCK: usize = 64;
    let hit = |v: f32| v == max || v.is_nan();
    row.chunks(BLOCK)
        .enumerate()
        .find(|(_, block)| block.iter().fold(false, |found, &v| found | hit(v)))
        .and_then(|(b, block)| block.iter().position(|&v| hit(v)).map(|i| b * BLOCK + i))
        .unwrap_or(0)
}

/// `d_j = g · e^{z_j − lse}` of one row.
#[multiversion(targets = "simd")]
fn scaled_probabilities(d: &mut [MaybeUninit<f32>], row: &[f32], lse: f32, g: f32) {
    for (d, &x) in d.iter_mut().zip(row) {
        d.write(g * exp_non_positive(x - lse));
    }
}

/// [`scaled_probabilities`] written over the row.
#[multiversion(targets = "simd")]
fn scaled_probabilities_in_place(row: &mut [f32], lse: f32, g: f32) {
    for x in row.iter_mut() {
        *x = g * exp_non_positive(*x - lse);
    }
}

fn check(z: &[f32], labels: &[usize], vocab: usize) {
    assert_eq!(z.len(), labels.len() * vocab, "cross-entropy: logits shape");
    if let Some(&bad) = labels.iter().find(|&&y| y >= vocab) {
        panic!("cross-entropy: label {bad} outside a vocabulary of {vocab}");
    }
}

/// Per position `lse(z) − z[y]` `[n]` from burn's operations, by the surrogate of
/// `objective::mlm`'s doc: the graph holds only `s = Σ_j q_j z_j` with `q = softmax(z) −
/// onehot(y)` constant, so the value is `lse − z[y]` and the gradient `q`.
pub(crate) fn composed(logits: Tensor<2>, labels: Tensor<1, Int>) -> Tensor<1> {
    let [n, _] = logits.dims();
    let device = logits.device();
    let labels = labels.reshape([n, 1]);
    let values = logits.clone().inner();
    let gold = values.clone().gather(1, labels.clone());
    let p = softmax(values.clone(), 1);
    let lse = values.max_dim(1) - p.clone().max_dim(1).log();
    let minus_one = Tensor::<2>::full([n, 1], -1.0, &device).inner();
    let q = p.scatter(1, labels, minus_one, IndexingUpdateOp::Add);
    let s = (logits * q).sum_dim(1);
    (s.clone() - s.detach() + lse - gold).reshape([n])
}

/// The kernel as an operation of burn's `flex` backend, and its backward step on
/// `Autodiff<Flex>` (the probabilities recomputed from the logits and `lse`).
#[cfg(feature = "flex")]
mod flex_op {
    use burn::backend::TensorMetadata;
    use burn::backend::autodiff::checkpoint::base::Checkpointer;
    use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
    use burn::backend::autodiff::grads::Gradients;
    use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
    use burn::backend::flex::FlexTensor;
    use burn::backend::tensor::{FloatTensor, IntTensor};
    use burn::backend::{Autodiff, Backend, Flex, backend_extension};
    use burn::tensor::Shape;

    use super::super::flex_tensors::{host, host_mut, index_tensor, indices, tensor};
    use super::{backward, backward_in_place, forward};

    #[backend_extension(Flex, Autodiff)]
    pub trait CrossEntropyOps: Backend {
        /// Per row: `lse(z) − z[y]`, and the argmax (not differentiable).
        fn fused_cross_entropy(
            logits: FloatTensor<Self>,
            labels: IntTensor<Self>,
        ) -> (FloatTensor<Self>, IntTensor<Self>);
    }

    impl CrossEntropyOps for Flex {
        fn fused_cross_entropy(logits: FlexTensor, labels: FlexTensor) -> (FlexTensor, FlexTensor) {
            let n = labels.shape().num_elements();
            let vocab = logits.shape().num_elements() / n.max(1);
            let rows = forward(&host(&logits), &indices(&labels), vocab);
            let shape = Shape::new([n]);
            (
                tensor(rows.nll, shape.clone()),
                index_tensor(rows.argmax, shape, labels.dtype()),
            )
        }
    }

    impl<C: CheckpointStrategy> CrossEntropyOps for Autodiff<Flex, C> {
        fn fused_cross_entropy(
            logits: FloatTensor<Self>,
            labels: IntTensor<Self>,
        ) -> (FloatTensor<Self>, IntTensor<Self>) {
            let guards = [logits.node()];
            let logits = logits.into_primitive();
            let dtype = labels.dtype();
            let labels = indices(&labels);
            let n = labels.len();
            let vocab = logits.shape().num_elements() / n.max(1);
            let rows = forward(&host(&logits), &labels, vocab);
            let shape = Shape::new([n]);
            let nll = tensor(rows.nll, shape.clone());
            let argmax = index_tensor(rows.argmax, shape, dtype);
            let nll = match Step.prepare::<C>(guards).compute_bound().stateful() {
                OpsKind::Tracked(prep) => {
                    let state = State {
                        logits,
                        labels: std::sync::Arc::new(labels),
                        lse: std::sync::Arc::new(rows.lse),
                    };
                    prep.finish(state, nll)
                }
                OpsKind::UnTracked(prep) => prep.finish(nll),
            };
            (nll, argmax)
        }
    }

    #[derive(Debug)]
    struct Step;

    /// What the backward pass reads: the logits, the labels and each row's `lse`.
    #[derive(Clone, Debug)]
    struct State {
        logits: FlexTensor,
        labels: std::sync::Arc<Vec<usize>>,
        lse: std::sync::Arc<Vec<f32>>,
    }

    impl Backward<Flex, 1> for Step {
        type State = State;

        fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
            let grad = grads.consume::<Flex>(&ops.node);
            let [parent] = ops.parents;
            if let Some(node) = parent {
                let s = ops.state;
                let shape = s.logits.shape();
                let vocab = shape.num_elements() / s.labels.len().max(1);
                let grad = host(&grad);
                let dz = if s.logits.is_unique() {
                    let mut z = s.logits;
                    backward_in_place(&grad, host_mut(&mut z), &s.labels, &s.lse, vocab);
                    z
                } else {
                    let dz = backward(&grad, &host(&s.logits), &s.labels, &s.lse, vocab);
                    tensor(dz, shape)
                };
                grads.register::<Flex>(node.id, dz);
            }
        }
    }
}
