//! The affine map of rows in one place: the facades model code calls ([`linear()`],
//! [`linear_transposed`]), our fused host kernel with its operation on burn's `flex` backend and
//! its backward step, the composed reference (burn's product and sum), and LibTorch's `addmm`
//! ([`torch`]) beside it. The kernel, forward and backward: `y = x W + b` for `x` `[rows, in]`,
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

use std::sync::atomic::{AtomicUsize, Ordering};

use burn::prelude::*;
use burn::tensor::FloatDType;

use super::gemm::{
    Products, Route, View, ViewMut, in_halves, part_into_on, product_new, product_onto_rows,
};
use super::select::{fused, torch};

#[cfg(feature = "tch")]
pub mod torch;

/// `x W + b` for rows `x` `[rows, in]`, `W` `[in, out]`, in the operands' dtype (the caller casts
/// them): our fused kernel (its products multiplied as `products` says), LibTorch's `addmm`, or
/// burn's product and sum.
pub fn linear(x: Tensor<2>, w: Tensor<2>, b: Option<Tensor<1>>, products: Products) -> Tensor<2> {
    let dtype = FloatDType::from(x.dtype());
    match b {
        Some(b) if fused(&x.device(), x.dtype()) => fused_call(x, w, b, false, products),
        Some(b) if torch(&x.device()) => torch_call(x, w, super::param_cast::cast(b, dtype)),
        Some(b) => x.matmul(w) + b.cast(dtype).unsqueeze::<2>(),
        None => x.matmul(w),
    }
}

/// `x Wᵀ + b` for `W` stored `[out, in]` (the MLM decoder's tied word embeddings): the product
/// in `x`'s dtype, the result in `b`'s (f32 logits). Our fused kernel (`W`'s gradient in its own
/// layout), or burn's product and sum.
pub fn linear_transposed(
    x: Tensor<2>,
    w: Tensor<2>,
    b: Tensor<1>,
    products: Products,
) -> Tensor<2> {
    if fused(&x.device(), x.dtype()) {
        return fused_call(x, w, b, true, products);
    }
    let dtype = FloatDType::from(x.dtype());
    let y = x.matmul(super::param_cast::cast(w, dtype).transpose());
    y.cast(FloatDType::F32) + b.unsqueeze::<2>()
}

/// Our fused kernel as one burn operation: `x W + b` for `W` `[in, out]` (may be a transposed
/// view), or, when `transposed`, `x Wᵀ + b` for `W` stored `[out, in]`, whose gradient then
/// comes back in `W`'s own layout, so that it adds to the embedding lookup's gradient without a
/// strided pass over it. Only where [`fused`](super::fused) holds.
pub fn fused_call(
    x: Tensor<2>,
    w: Tensor<2>,
    b: Tensor<1>,
    transposed: bool,
    products: Products,
) -> Tensor<2> {
    Tensor::from_dispatch(extension_op!(
        "flex",
        flex_op::LinearOps,
        fused_linear(
            x.into_dispatch(),
            w.into_dispatch(),
            b.into_dispatch(),
            transposed,
            products,
        )
    ))
}

/// LibTorch's `addmm` as one burn operation: `x W + b` for `x` `[rows, in]`, `W` `[in, out]`,
/// `b` `[out]`, all in one dtype. Only where [`torch`](super::torch) holds.
pub fn torch_call(x: Tensor<2>, w: Tensor<2>, b: Tensor<1>) -> Tensor<2> {
    Tensor::from_dispatch(extension_op!(
        "tch",
        torch::TorchLinear,
        torch_linear(x.into_dispatch(), w.into_dispatch(), b.into_dispatch())
    ))
}

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

/// `(∂x, ∂W)` at once, each on half of rayon's threads (`gemm::in_halves`). `∂W` is cut into
/// parts ([`Parts`]): its half starts with the first, the larger; the rest go one at a time to
/// whichever half is free, so the two halves end within about one part of each other. The two
/// products have the same work but not the same rate (Zen 3: the weight gradients' shapes run
/// 20–30 % slower single-threaded than `G Wᵀ`; the MLM decoder's `∂E = Gᵀ·x` from half to two
/// thirds of `G·E`'s rate, from one run to the next), and the half that waited would idle. A
/// product's sums do not depend on how `dst` is cut (every kernel splits over tiles of `dst`,
/// never the inner dimension, and every part runs on the whole product's kernels,
/// `gemm::Route`; `tests/suite/kernels.rs` checks the pair bit for bit against the two
/// products whole).
pub fn grad_input_and_weight(p: BackwardProducts) -> (Vec<f32>, Vec<f32>) {
    let (rows, cols) = (p.a.rows, p.b.cols);
    let parts = Parts::of(rows, cols);
    let route = Route::new(&p.a, p.products);
    // The next part to take; the first is the ∂W half's own.
    let next = AtomicUsize::new(1);
    // SAFETY (the products): the operands are the caller's views, only read; the parts of the
    // fresh `dst` are disjoint, each written whole by one product, once.
    let (dw, dx) = unsafe {
        super::buffers::filled_by(rows * cols, |dst| {
            let dst = ViewMut::uninit(dst, rows, cols);
            let take_parts = |threads| loop {
                let i = next.fetch_add(1, Ordering::AcqRel);
                if i >= parts.count() {
                    break;
                }
                parts.part(i, dst, p.a, p.b).run(threads, route);
            };
            let (dx, ()) = in_halves(
                |threads| {
                    let dx = grad_input(p.g, p.w, threads, p.products);
                    take_parts(threads);
                    dx
                },
                |threads| {
                    parts.part(0, dst, p.a, p.b).run(threads, route);
                    take_parts(threads);
                },
            );
            dx
        })
    };
    (dx, dw)
}

/// How `∂W` is cut for the pair: across its rows where its left operand is the larger (more
/// rows than columns: the MLM decoder's `∂E = Gᵀ·x`, 30522 rows, and the FFN's second weight,
/// 1024 rows against 256 columns), else across its columns; a part reads all of the other
/// operand again, and the smaller one costs least (a part of `∂E`'s columns would pack all of
/// `Gᵀ`, the logits' gradient, 37 MB in the bench, again). The first part is half of that side;
/// the rest are eighths, in whole [`SHARED_STEP`]s.
#[derive(Clone, Copy)]
struct Parts {
    by_rows: bool,
    length: usize,
    first: usize,
    step: usize,
}

impl Parts {
    /// The parts of a `[rows, cols]` `∂W`.
    fn of(rows: usize, cols: usize) -> Self {
        let by_rows = rows > cols;
        let length = if by_rows { rows } else { cols };
        let whole_steps = |n: usize| (n / SHARED_STEP * SHARED_STEP).max(SHARED_STEP);
        Self {
            by_rows,
            length,
            first: whole_steps(length / 2).min(length),
            step: whole_steps(length / 8),
        }
    }

    /// How many parts.
    fn count(self) -> usize {
        1 + (self.length - self.first).div_ceil(self.step)
    }

    /// Part `i` of the product `dst = a · b`.
    fn part(self, i: usize, dst: ViewMut, a: View, b: View) -> Part {
        let (start, len) = if i == 0 {
            (0, self.first)
        } else {
            let start = self.first + (i - 1) * self.step;
            (start, self.step.min(self.length - start))
        };
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
#[derive(Clone, Copy)]
struct Part {
    dst: ViewMut,
    a: View,
    b: View,
}

impl Part {
    /// `dst = a · b` on `threads` threads through the whole product's `route`.
    ///
    /// # Safety
    /// The views are valid for their extents; nothing else writes `dst` meanwhile.
    unsafe fn run(self, threads: usize, route: Route) {
        // SAFETY: the caller's.
        unsafe { part_into_on(self.dst, self.a, self.b, threads, route) }
    }
}

/// The parts of `∂W` past the first come in multiples of this many rows or columns.
pub const SHARED_STEP: usize = 16;

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
#[multiversion(targets = "simd")]
fn column_sums(block: &[f32], out: usize) -> Vec<f32> {
    let mut sums = vec![0f32; out];
    for row in block.chunks_exact(out) {
        for (s, &v) in sums.iter_mut().zip(row) {
            *s += v;
        }
    }
    sums
}

/// The kernel as an operation of burn's `flex` backend, and its backward step on
/// `Autodiff<Flex>` (both products at once where both are tracked).
#[cfg(feature = "flex")]
mod flex_op {
    use burn::backend::TensorMetadata;
    use burn::backend::autodiff::checkpoint::base::Checkpointer;
    use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
    use burn::backend::autodiff::grads::Gradients;
    use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
    use burn::backend::flex::FlexTensor;
    use burn::backend::tensor::FloatTensor;
    use burn::backend::{Autodiff, Backend, Flex, backend_extension};
    use burn::tensor::Shape;

    use super::super::flex_tensors::{host, matrix, tensor};
    use super::{BackwardProducts, Products, View};

    #[backend_extension(Flex, Autodiff)]
    pub trait LinearOps: Backend {
        /// `x·w + b`, or `x·wᵀ + b` when `transposed` (`w` stored `[out, in]`).
        fn fused_linear(
            x: FloatTensor<Self>,
            w: FloatTensor<Self>,
            b: FloatTensor<Self>,
            transposed: bool,
            products: Products,
        ) -> FloatTensor<Self>;
    }

    /// The `[in, out]` weight stored as `w` (`[out, in]` when `transposed`).
    fn weight(w: &FlexTensor, transposed: bool) -> View {
        if transposed { matrix(w).t() } else { matrix(w) }
    }

    impl LinearOps for Flex {
        fn fused_linear(
            x: FlexTensor,
            w: FlexTensor,
            b: FlexTensor,
            transposed: bool,
            products: Products,
        ) -> FlexTensor {
            let w = weight(&w, transposed);
            let y = super::forward(matrix(&x), w, &host(&b), products);
            tensor(y, Shape::new([x.shape()[0], w.cols]))
        }
    }

    impl<C: CheckpointStrategy> LinearOps for Autodiff<Flex, C> {
        fn fused_linear(
            x: FloatTensor<Self>,
            w: FloatTensor<Self>,
            b: FloatTensor<Self>,
            transposed: bool,
            products: Products,
        ) -> FloatTensor<Self> {
            let guards = [x.node(), w.node(), b.node()];
            let (x, w, b) = (x.into_primitive(), w.into_primitive(), b.into_primitive());
            let y = Flex::fused_linear(x.clone(), w.clone(), b, transposed, products);
            match Step.prepare::<C>(guards).compute_bound().stateful() {
                OpsKind::Tracked(prep) => {
                    let state = State {
                        x,
                        w,
                        transposed,
                        products,
                    };
                    prep.finish(state, y)
                }
                OpsKind::UnTracked(prep) => prep.finish(y),
            }
        }
    }

    #[derive(Debug)]
    struct Step;

    /// What the backward pass reads: the input and the weight as stored.
    #[derive(Clone, Debug)]
    struct State {
        x: FlexTensor,
        w: FlexTensor,
        transposed: bool,
        products: Products,
    }

    impl Backward<Flex, 3> for Step {
        type State = State;

        fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
            let grad = grads.consume::<Flex>(&ops.node);
            let grad = if grad.as_slice::<f32>().is_some() {
                grad
            } else {
                grad.to_contiguous()
            };
            let s = ops.state;
            let [node_x, node_w, node_b] = ops.parents;
            let g = matrix(&grad);
            // ∂x = G Wᵀ and ∂w in w's own layout: xᵀ G, or (xᵀ G)ᵀ = Gᵀ x for a transposed
            // weight.
            let w = weight(&s.w, s.transposed);
            let pair = BackwardProducts::new(matrix(&s.x), g, w, s.transposed, s.products);
            let (dx, dw) = match (node_x.is_some(), node_w.is_some()) {
                // The same size: computed at once, on half the threads each.
                (true, true) => {
                    let (dx, dw) = super::grad_input_and_weight(pair);
                    (Some(dx), Some(dw))
                }
                (dx, dw) => {
                    let threads = rayon::current_num_threads();
                    let dx = dx.then(|| super::grad_input(g, w, threads, s.products));
                    (dx, dw.then(|| pair.grad_weight(threads)))
                }
            };
            if let (Some(node), Some(dx)) = (node_x, dx) {
                grads.register::<Flex>(node.id, tensor(dx, s.x.shape()));
            }
            if let (Some(node), Some(dw)) = (node_w, dw) {
                grads.register::<Flex>(node.id, tensor(dw, s.w.shape()));
            }
            if let Some(node) = node_b {
                let out = g.cols;
                let db = super::grad_bias(&host(&grad), out);
                grads.register::<Flex>(node.id, tensor(db, Shape::new([out])));
            }
        }
    }
}
