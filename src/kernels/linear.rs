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

use std::sync::atomic::{AtomicBool, Ordering};

use super::gemm::{
    Products, View, ViewMut, in_halves, product_into_on, product_new, product_onto_rows,
};

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

/// The operands of a `Linear`'s backward products: `∂x = G Wᵀ` from `g` and `w` (`[in, out]`
/// as a view, however it is stored), and `∂W = a · b` in the weight's own layout (`xᵀ G`, or
/// `Gᵀ x` for a weight stored `[out, in]`).
#[derive(Clone, Copy)]
pub struct BackwardProducts {
    g: View,
    w: View,
    a: View,
    b: View,
    products: Products,
}

impl BackwardProducts {
    /// The products of a layer of input `x` `[rows, in]`, output gradient `g` `[rows, out]`
    /// and weight `w` viewed `[in, out]`, stored `[out, in]` when `transposed`.
    pub fn new(x: View, g: View, w: View, transposed: bool, products: Products) -> Self {
        let (a, b) = if transposed { (g.t(), x) } else { (x.t(), g) };
        Self {
            g,
            w,
            a,
            b,
            products,
        }
    }

    /// `∂W` alone, on `threads` threads.
    pub fn grad_weight(&self, threads: usize) -> Vec<f32> {
        // Safety: the operands are the caller's views, only read.
        unsafe { product_new(self.a, self.b, threads, self.products) }
    }
}

/// `(∂x, ∂W)` at once, each on half of rayon's threads (`gemm::in_halves`), with the last
/// eighth of `∂W`'s columns (a multiple of [`SHARED_COLUMNS_STEP`]) left to whichever half
/// finishes first: the two products have the same work but not the same rate (Zen 3: the
/// weight gradients' shapes run 20–30 % slower single-threaded than `G Wᵀ`), and the half that
/// waited would idle. A product's sums do not depend on how `dst`'s columns are split (every
/// kernel splits over tiles of `dst`, never the inner dimension; `tests/suite/kernels.rs` checks the
/// pair bit for bit against the two products whole).
pub fn grad_input_and_weight(p: BackwardProducts) -> (Vec<f32>, Vec<f32>) {
    let (rows, cols) = (p.a.rows, p.b.cols);
    let shared = cols / 8 / SHARED_COLUMNS_STEP * SHARED_COLUMNS_STEP;
    let own = cols - shared;
    let taken = AtomicBool::new(false);
    // SAFETY (the products): the operands are the caller's views, only read; the two column
    // ranges of the fresh `dst` are disjoint, each written whole by one product, once.
    let (dw, dx) = unsafe {
        super::buffers::filled_by(rows * cols, |dst| {
            let dst = ViewMut::uninit(dst, rows, cols);
            let shared_part = |threads| {
                if shared > 0 && !taken.swap(true, Ordering::AcqRel) {
                    let (d, b) = (dst.columns(own, shared), p.b.columns(own, shared));
                    product_into_on(d, p.a, b, threads, p.products);
                }
            };
            let (dx, ()) = in_halves(
                |threads| {
                    let dx = grad_input(p.g, p.w, threads, p.products);
                    shared_part(threads);
                    dx
                },
                |threads| {
                    let (d, b) = (dst.columns(0, own), p.b.columns(0, own));
                    product_into_on(d, p.a, b, threads, p.products);
                    shared_part(threads);
                },
            );
            dx
        })
    };
    (dx, dw)
}

/// The columns of `∂W` left to either half come in multiples of this many.
pub const SHARED_COLUMNS_STEP: usize = 16;

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
