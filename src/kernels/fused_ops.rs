//! Our fused CPU kernels' operations, one each; callable only where [`fused`](super::fused)
//! holds. Model code calls the facades below, which choose.

use burn::prelude::*;

use super::attention::DropMask;
use super::gemm::Products;

/// Multi-head attention context `[batch, len, hidden]` from the packed projections `qkv`
/// `[batch, len, 3 · hidden]` (Q, K, V on each row: the one product of the three
/// projections) and the additive key bias `[batch, len]` (see
/// [`attention`](mod@super::attention)), its products multiplied as `products` says. Only
/// where [`fused`](super::fused) holds.
pub fn attention(
    qkv: Tensor<3>,
    key_bias: Tensor<2>,
    heads: usize,
    dropout: Option<DropMask>,
    products: Products,
) -> Tensor<3> {
    let (p, seed) = dropout.map_or((0.0, 0), |m| (m.p, m.seed));
    Tensor::from_dispatch(fused_op!(fused_attention(
        qkv.into_dispatch(),
        key_bias.into_dispatch(),
        heads,
        p,
        seed,
        products,
    )))
}

/// Rows `ids` `[n]` of `table` `[rows, width]` (see [`rows`](mod@super::rows)). Only where
/// [`fused`](super::fused) holds.
pub fn select_rows(table: Tensor<2>, ids: Tensor<1, Int>) -> Tensor<2> {
    Tensor::from_dispatch(fused_op!(fused_rows(
        table.into_dispatch(),
        ids.into_dispatch(),
    )))
}

/// `x W + b` for rows `x` `[rows, in]`, `W` `[in, out]` (may be a transposed view), `b`
/// `[out]` (see [`linear`](mod@super::linear)). Only where [`fused`](super::fused) holds.
pub fn linear(x: Tensor<2>, w: Tensor<2>, b: Tensor<1>, products: Products) -> Tensor<2> {
    Tensor::from_dispatch(fused_op!(fused_linear(
        x.into_dispatch(),
        w.into_dispatch(),
        b.into_dispatch(),
        false,
        products,
    )))
}

/// `x Wᵀ + b` for `W` stored `[out, in]` (the MLM decoder's tied word embeddings). The same
/// as [`linear`] with `W.transpose()`, but `W`'s gradient comes back in `W`'s own layout, so
/// that it adds to the embedding lookup's gradient without a strided pass over it. Only where
/// [`fused`](super::fused) holds.
pub fn linear_transposed(
    x: Tensor<2>,
    w: Tensor<2>,
    b: Tensor<1>,
    products: Products,
) -> Tensor<2> {
    Tensor::from_dispatch(fused_op!(fused_linear(
        x.into_dispatch(),
        w.into_dispatch(),
        b.into_dispatch(),
        true,
        products,
    )))
}

/// One draw per row of `logits` `[rows, vocab]` from its softmax, with the sampler's `seed`
/// (see [`sampling`](mod@super::sampling)): the kernel reads the logits in place. Only where
/// [`fused`](super::fused) holds.
pub fn sample(logits: Tensor<2>, seed: u64) -> Tensor<1, Int> {
    let ids = logits.device().settings().int_dtype;
    Tensor::from_dispatch(fused_op!(fused_sample(logits.into_dispatch(), seed, ids)))
}
