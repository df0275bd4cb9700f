//! A `Linear`'s two backward products at once, `∂x = G Wᵀ` and `∂W`, on two halves of rayon's
//! threads, `∂W` cut into parts that either half takes when it is free; and the bias's column
//! sums, taken by the half that ends first, rather than a parallel pass of their own after the
//! pair (alternating step by step in one process, a linear's backward took 7–11 % less a call:
//! 8.5–9.0 ms against 9.4–10.1, 4 runs, Emerald Rapids).
//!
//! The two products have the same work but not the same rate: on Zen 3 the weight gradients'
//! shapes run 20–30 % slower single-threaded than `G Wᵀ`, and on an Emerald Rapids the MLM
//! decoder's `∂E = Gᵀ·x` ran at half to two thirds of `G·E`'s rate, from one run to the next.
//! The `∂W` half starts with the first part (half of `∂W`); the other parts go one at a time to
//! whichever half is free, so a half that ends its product early takes `∂W`'s parts instead of
//! idling. (`∂x` cut into parts too, each half then helping with the other's product, idled
//! less but took 2–9 % longer a call: its parts pack the weight again, and faer multiplies a
//! part of `G`'s rows more slowly than all of them.)
//!
//! A product's sums do not depend on how its `dst` is cut: every kernel splits over tiles of
//! `dst`, never the inner dimension, and every part runs on the whole product's kernels
//! (`gemm::Route`); the bias's sums are `linear::grad_bias`'s blocks in its order.
//! `tests/suite/kernels.rs` checks the pair bit for bit against the two products whole, and the
//! sums against the bias's own pass.

use std::mem::MaybeUninit;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::super::buffers::filled_by;
use super::super::gemm::{Route, View, ViewMut, in_halves, part_into_on};
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
    let bias = BiasJob {
        g: bias_of,
        out: p.g.cols,
        taken: AtomicBool::new(false),
        db: Mutex::new(None),
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
                    bias.run();
                    dx
                },
                |threads| {
                    work.run(threads);
                    bias.run();
                },
            );
            dx
        })
    };
    let db = bias.db.into_inner().expect("no half panicked");
    Grads { dx, dw, db }
}

/// The bias's column sums, taken once by whichever half gets there first.
struct BiasJob<'g> {
    g: Option<&'g [f32]>,
    out: usize,
    taken: AtomicBool,
    db: Mutex<Option<Vec<f32>>>,
}

impl BiasJob<'_> {
    fn run(&self) {
        if let Some(g) = self.g
            && !self.taken.swap(true, Ordering::AcqRel)
        {
            let db = super::grad_bias_here(g, self.out);
            *self.db.lock().expect("no half panicked") = Some(db);
        }
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
            unsafe { part_into_on(part.dst, part.a, part.b, threads, self.product.route) }
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
