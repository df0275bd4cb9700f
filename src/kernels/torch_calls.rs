//! Single LibTorch calls, one burn operation each with LibTorch's own backward; callable only
//! where [`torch`](super::select::torch) holds. Model code calls the facades in `kernels`, which choose.

use burn::prelude::*;

/// The attention context `[batch, len, hidden]` of the packed projections `qkv` `[batch, len,
/// 3 · hidden]`, as [`attention`](super::attention()) computes it, with the additive key bias
/// `[batch, len]` (`None` without padding) and dropout `p` on the probabilities (0: none).
/// Only where [`torch`](super::torch) holds.
pub fn torch_attention(
    qkv: Tensor<3>,
    key_bias: Option<Tensor<2>>,
    heads: usize,
    dropout: f64,
) -> Tensor<3> {
    let padded = key_bias.is_some();
    let [batch, len, _] = qkv.dims();
    // Unread without padding: an allocation, not a kernel filling it.
    let key_bias = key_bias.unwrap_or_else(|| Tensor::empty([batch, len], &qkv.device()));
    Tensor::from_dispatch(torch_op!(torch_attention(
        qkv.into_dispatch(),
        key_bias.into_dispatch(),
        padded,
        heads,
        dropout,
    )))
}

/// `x W + b` for rows `x` `[rows, in]`, `W` `[in, out]`, `b` `[out]` (one dtype): one LibTorch
/// `addmm`. Only where [`torch`](super::torch) holds.
pub fn torch_linear(x: Tensor<2>, w: Tensor<2>, b: Tensor<1>) -> Tensor<2> {
    Tensor::from_dispatch(torch_op!(torch_linear(
        x.into_dispatch(),
        w.into_dispatch(),
        b.into_dispatch(),
    )))
}

/// Inverted dropout with probability `p` in (0, 1): kept values scaled by `1 / (1 − p)`. For
/// training only. Only where [`torch`](super::torch) holds.
pub fn torch_dropout<const D: usize>(x: Tensor<D>, p: f64) -> Tensor<D> {
    Tensor::from_dispatch(torch_op!(torch_dropout(x.into_dispatch(), p)))
}
