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

use burn::prelude::*;
use burn::tensor::FloatDType;

use super::gemm::{Products, View, product_new, product_onto_rows};
use super::select::{fused, torch};

mod pair;
#[cfg(feature = "tch")]
pub mod torch;

pub use pair::{SHARED_STEP, grad_input_and_weight, grad_input_weight_and_bias};

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

/// `Σ_rows G` `[out]` of a contiguous `[rows, out]` gradient.
pub fn grad_bias(g: &[f32], out: usize) -> Vec<f32> {
    let partials: Vec<Vec<f32>> = g
        .par_chunks(BLOCK * out)
        .map(|block| column_sums(block, out))
        .collect();
    sum_blocks(&partials, out)
}

/// [`grad_bias`] on the calling thread alone: the same blocks, summed in the same order, so
/// the same values.
fn grad_bias_here(g: &[f32], out: usize) -> Vec<f32> {
    let partials: Vec<Vec<f32>> = g
        .chunks(BLOCK * out)
        .map(|block| column_sums(block, out))
        .collect();
    sum_blocks(&partials, out)
}

/// The blocks' column sums added in order.
fn sum_blocks(partials: &[Vec<f32>], out: usize) -> Vec<f32> {
    let mut db = vec![0f32; out];
    for sums in partials {
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
            let out = g.cols;
            let (dx, dw, db) = match (node_x.is_some(), node_w.is_some(), node_b.is_some()) {
                // The same size: computed at once, on half the threads each, the bias's sums
                // by the half that ends first.
                (true, true, true) => {
                    let (dx, dw, db) = super::grad_input_weight_and_bias(pair, &host(&grad));
                    (Some(dx), Some(dw), Some(db))
                }
                (true, true, false) => {
                    let (dx, dw) = super::grad_input_and_weight(pair);
                    (Some(dx), Some(dw), None)
                }
                (dx, dw, db) => {
                    let threads = rayon::current_num_threads();
                    let dx = dx.then(|| super::grad_input(g, w, threads, s.products));
                    let dw = dw.then(|| pair.grad_weight(threads));
                    (dx, dw, db.then(|| super::grad_bias(&host(&grad), out)))
                }
            };
            if let (Some(node), Some(dx)) = (node_x, dx) {
                grads.register::<Flex>(node.id, tensor(dx, s.x.shape()));
            }
            if let (Some(node), Some(dw)) = (node_w, dw) {
                grads.register::<Flex>(node.id, tensor(dw, s.w.shape()));
            }
            if let (Some(node), Some(db)) = (node_b, db) {
                grads.register::<Flex>(node.id, tensor(db, Shape::new([out])));
            }
        }
    }
}
