//! A `Linear`'s two backward products at once, `∂x = G Wᵀ` and `∂W`, on two halves of rayon's
//! threads, `∂W` cut into parts that either half takes when it is free; and the bias's column
//! sums, taken by the half that ends first, in time it would otherwise idle, rather than a
//! parallel pass of their own after the pair (BENCHMARKS.md has the timings).
//!
//! The two products have the same work but not the same rate: the weight gradients' shapes
//! run slower single-threaded than `G Wᵀ` on some CPUs, faster on others, and the MLM decoder's
//! `∂E = Gᵀ·x` varies from one run to the next. The `∂W` half starts with the first part (half
//! of `∂W`); the other parts go one at a time to whichever half is free, so a half that ends
//! its product early takes `∂W`'s parts instead of idling. `∂x` stays whole: its parts would
//! pack the weight again, and faer multiplies a part of `G`'s rows more slowly than all of them
//! (measured and not kept, in BENCHMARKS.md).
//!
//! A product's sums do not depend on how its `dst` is cut: every kernel splits over tiles of
//! `dst`, never the inner dimension, and every part runs on the whole product's kernels
//! (`gemm::Route`); the bias's sums are `linear::grad_bias`'s blocks in its order.
//! `tests/suite/kernels.rs` checks the pair bit for bit against the two products whole, and the
//! sums against the bias's own pass.

use std::mem::MaybeUninit;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::super::buffers::filled_by;
use super::super::gemm::{Route, View, ViewMut, in_halves, product_into_on};
use super::{BackwardProducts, grad_input};

/// `(∂x, ∂W)` of `p` at once, on two halves of rayon's threads (see the module's doc).
pub fn grad_input_and_weight(p: BackwardProducts) -> (Vec<f32>, Vec<f32>) {
    let Grads { dx, dw, .. } = pair(p, None);
    (dx, dw)
}

/// `(∂x, ∂W, ∂b)` of `p` and its contiguous output gradient `g` (`p`'s `G`): the pair, and the
/// bias's column sums (`linear::grad_bias`'s values) by the half that ends first, in time a
/// half would otherwise idle, instead of a pass of their own after the pair.
pub fn grad_input_weight_and_bias(
    p: BackwardProducts,
    g: &[f32],
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let Grads { dx, dw, db } = pair(p, Some(g));
    (dx, dw, db.expect("the bias's sums are taken by one half"))
}

/// What [`pair`] computes.
struct Grads {
    dx: Vec<f32>,
    dw: Vec<f32>,
    db: Option<Vec<f32>>,
}

/// The pair, and the column sums of `bias_of` when given, on two halves of the threads.
fn pair(p: BackwardProducts, bias_of: Option<&[f32]>) -> Grads {
    let dw = Product::new(p.a, p.b, p.products);
    let out = p.g.cols;
    // The bias's sums, by the first half to get there (the other waits for them, if it comes
    // while they are summed).
    let db = OnceLock::new();
    let sum_bias = || {
        if let Some(g) = bias_of {
            db.get_or_init(|| super::grad_bias_here(g, out));
        }
    };
    // SAFETY: the operands are the caller's views, only read; the parts of the fresh `dst` are
    // disjoint and cover it, and each is written whole by one product that does not read it,
    // once.
    let (dw, dx) = unsafe {
        filled_by(dw.len(), |dst| {
            let work = Work::new(dw, dst);
            let (dx, ()) = in_halves(
                |threads| {
                    let dx = grad_input(p.g, p.w, threads, p.products);
                    work.run(threads);
                    sum_bias();
                    dx
                },
                |threads| {
                    work.run(threads);
                    sum_bias();
                },
            );
            dx
        })
    };
    Grads {
        dx,
        dw,
        db: db.into_inner(),
    }
}

/// A product `a · b` and the kernels that multiply it whole.
#[derive(Clone, Copy)]
struct Product {
    a: View,
    b: View,
    route: Route,
}

impl Product {
    fn new(a: View, b: View, products: super::Products) -> Self {
        Self {
            a,
            b,
            route: Route::new(&a, products),
        }
    }

    /// Elements of its `dst`.
    fn len(&self) -> usize {
        self.a.rows * self.b.cols
    }
}

/// A product cut into [`Parts`] over its fresh `dst`, and the next part to take.
struct Work {
    product: Product,
    parts: Parts,
    dst: ViewMut,
    next: AtomicUsize,
}

impl Work {
    fn new(product: Product, dst: &mut [MaybeUninit<f32>]) -> Self {
        let (rows, cols) = (product.a.rows, product.b.cols);
        Self {
            product,
            parts: Parts::of(rows, cols),
            dst: ViewMut::uninit(dst, rows, cols),
            next: AtomicUsize::new(0),
        }
    }

    /// Takes parts, one at a time, on `threads` threads, until none is left (the first taken
    /// is the first part, the largest, as the `∂W` half starts with it).
    ///
    /// # Safety
    /// The product's views are valid for their extents and `dst` is written by this work's
    /// parts alone.
    unsafe fn run(&self, threads: usize) {
        loop {
            let i = self.next.fetch_add(1, Ordering::AcqRel);
            if i >= self.parts.count() {
                return;
            }
            let part = self.parts.cut(i, self.dst, self.product);
            // SAFETY: the caller's; part `i` is this call's alone (the counter hands each out
            // once).
            unsafe { product_into_on(part.dst, part.a, part.b, threads, self.product.route) }
        }
    }
}

/// How `∂W` is cut: across its rows where its left operand is the larger (more rows than
/// columns: the MLM decoder's `∂E = Gᵀ·x` of 30522 rows, the FFN's second weight, 1024 rows
/// against 256 columns), else across its columns. A part reads
/// all of the other operand again, and the smaller one costs least: a part of `∂E`'s columns
/// would pack all of `Gᵀ`, the logits' gradient (37 MB in the bench), again. The first part is
/// half of that side; the rest are eighths, in whole [`SHARED_STEP`]s, the last taking what
/// remains.
///
/// The gemm crate blocks the inner dimension of a product of at most [`GEMM_SMALL`] ×
/// [`GEMM_SMALL`] otherwise than a larger one's (`gemm_common::gemm`: by 512, not by its cache
/// sizes), so where the side not cut is that small, no part is cut that small either: each part
/// then sums as the whole product does.
#[derive(Clone, Copy)]
struct Parts {
    by_rows: bool,
    length: usize,
    first: usize,
    step: usize,
    /// Parts after the first.
    rest: usize,
}

impl Parts {
    /// The parts of a `[rows, cols]` `dst`.
    fn of(rows: usize, cols: usize) -> Self {
        let by_rows = rows > cols;
        let (length, other) = if by_rows { (rows, cols) } else { (cols, rows) };
        let least = if other <= GEMM_SMALL {
            GEMM_SMALL + SHARED_STEP
        } else {
            SHARED_STEP
        };
        let whole_steps = |n: usize| (n / SHARED_STEP * SHARED_STEP).max(least);
        let step = whole_steps(length / 8);
        let first = whole_steps(length / 2).min(length);
        let rest = (length - first) / step;
        Self {
            by_rows,
            length,
            // Too little left for a part: the first takes it.
            first: if rest == 0 { length } else { first },
            step,
            rest,
        }
    }

    /// How many parts.
    fn count(self) -> usize {
        1 + self.rest
    }

    /// Part `i` of `product`, whose `dst` is `dst`.
    fn cut(self, i: usize, dst: ViewMut, product: Product) -> Part {
        let Product { a, b, .. } = product;
        let (start, end) = match i {
            0 => (0, self.first),
            i => {
                let start = self.first + (i - 1) * self.step;
                let end = if i == self.rest {
                    self.length
                } else {
                    start + self.step
                };
                (start, end)
            }
        };
        let len = end - start;
        if self.by_rows {
            Part {
                dst: dst.row_range(start, len),
                a: a.row_range(start, len),
                b,
            }
        } else {
            Part {
                dst: dst.columns(start, len),
                a,
                b: b.columns(start, len),
            }
        }
    }
}

/// Rows or columns of a product's `dst` with the operands that make them.
struct Part {
    dst: ViewMut,
    a: View,
    b: View,
}

/// The parts past the first come in multiples of this many rows or columns.
pub const SHARED_STEP: usize = 16;

/// The gemm crate's largest "small" product side (see [`Parts`]).
const GEMM_SMALL: usize = 64;
