//! Cross-entropy of rows of logits on the host, forward and backward:
//!
//! `lse = max(z) + ln Σ_j e^{z_j − max(z)}`, `nll = lse − z[y]`;
//! with `g = ∂L/∂nll` per row: `∂z_j = g · (e^{z_j − lse} − [j = y])`.
//!
//! One parallel pass per direction over the `[n, vocab]` logits (the MLM head's are
//! 304 × 30522 in the bench); only `lse` is kept for the backward pass, which recomputes the
//! probabilities from the logits.

use burn::prelude::*;
use burn::tensor::IndexingUpdateOp;
use burn::tensor::activation::softmax;
use std::mem::MaybeUninit;

use multiversion::multiversion;
use rayon::prelude::*;

use super::simd::{exp_non_positive, max_lanes, sum_map};

/// Per row: `(nll, lse)`.
pub fn forward(z: &[f32], labels: &[usize], vocab: usize) -> (Vec<f32>, Vec<f32>) {
    check(z, labels, vocab);
    z.par_chunks(vocab)
        .zip(labels.par_iter())
        .map(|(row, &y)| {
            let lse = log_sum_exp(row);
            (lse - row[y], lse)
        })
        .unzip()
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

/// `max(z) + ln Σ_j e^{z_j − max(z)}` of one row.
#[multiversion(targets("x86_64+avx2+fma"))]
fn log_sum_exp(row: &[f32]) -> f32 {
    let max = max_lanes(row);
    max + sum_map(row, |x| exp_non_positive(x - max)).ln()
}

/// `d_j = g · e^{z_j − lse}` of one row.
#[multiversion(targets("x86_64+avx2+fma"))]
fn scaled_probabilities(d: &mut [MaybeUninit<f32>], row: &[f32], lse: f32, g: f32) {
    for (d, &x) in d.iter_mut().zip(row) {
        d.write(g * exp_non_positive(x - lse));
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
