//! Affine map of rows on the host, forward and backward: `y = x W + b` for `x` `[rows, in]`,
//! `W` `[in, out]`, `b` `[out]`; with `G = ∂L/∂y`: `∂x = G Wᵀ`, `∂W = xᵀ G`, `∂b = Σ_rows G`.
//!
//! burn composes a `Linear` as a matrix product into a zero-filled buffer that is then copied
//! into an aligned one, plus a broadcast add of the bias (and, backward, a reduction for the
//! bias gradient). Here the product's sums are stored onto the bias (the bf16 kernel adds `b`
//! as it stores them; the f32 crates accumulate onto rows filled with `b`); operands may be
//! strided views (the MLM decoder's weight is the transposed word-embedding matrix), so
//! nothing is copied.

use multiversion::multiversion;
use rayon::prelude::*;

use super::gemm::{Products, View, product_new, product_onto_rows};

/// Rows per parallel task of the bias gradient (fixed, so sums do not depend on threads).
const BLOCK: usize = 64;

/// `x W + b` as a `[rows, out]` buffer, the product multiplied as `products` says.
pub fn forward(x: View, w: View, b: &[f32], products: Products) -> Vec<f32> {
    assert_eq!(b.len(), w.cols, "linear: bias width");
    // Safety: the operands are the caller's views, only read.
    unsafe { product_onto_rows(x, w, b, products) }
}

/// `G Wᵀ` `[rows, in]`, on `threads` threads, multiplied as `products` says.
pub fn grad_input(g: View, w: View, threads: usize, products: Products) -> Vec<f32> {
    // Safety: the operands are the caller's views, only read.
    unsafe { product_new(g, w.t(), threads, products) }
}

/// `xᵀ G` `[in, out]`, on `threads` threads, multiplied as `products` says.
pub fn grad_weight(x: View, g: View, threads: usize, products: Products) -> Vec<f32> {
    // Safety: as in `grad_input`.
    unsafe { product_new(x.t(), g, threads, products) }
}

/// `Σ_rows G` `[out]` of a contiguous `[rows, out]` gradient.
pub fn grad_bias(g: &[f32], out: usize) -> Vec<f32> {
    let partials: Vec<Vec<f32>> = g
        .par_chunks(BLOCK * out)
        .map(|block| column_sums(block, out))
        .collect();
    let mut db = vec![0f32; out];
    for sums in &partials {
        for (d, s) in db.iter_mut().zip(sums) {
            *d += s;
        }
    }
    db
}

/// Sums of the columns of a contiguous block of rows `out` wide.
#[multiversion(targets("x86_64+avx2+fma"))]
fn column_sums(block: &[f32], out: usize) -> Vec<f32> {
    let mut sums = vec![0f32; out];
    for row in block.chunks_exact(out) {
        for (s, &v) in sums.iter_mut().zip(row) {
            *s += v;
        }
    }
    sums
}
