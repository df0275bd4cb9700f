//! Multi-head self-attention in one place: the facade model code calls ([`attention()`]), our
//! fused host kernel ([`kernel`](mod@kernel), forward and backward) with its operation on burn's
//! `flex` backend and its backward step, the composed reference ([`composed`]), and LibTorch's
//! call ([`torch`]) beside it.

use burn::prelude::*;

use super::gemm::Products;
use super::select::{fused, torch};

mod kernel;
#[cfg(feature = "tch")]
pub mod torch;

pub use kernel::{Dims, DropMask, backward, forward};

/// Multi-head self-attention's context `[batch, len, hidden]` from the packed projections `qkv`
/// `[batch, len, 3 · hidden]` (Q, K, V on each row) and the additive key bias `[batch, len]`
/// (`None`: nothing padded), with dropout `d` on the probabilities: our fused kernel, LibTorch's
/// call, or burn's operations (scores and softmax in f32, products in `qkv`'s dtype). Our
/// kernel's products multiply as `products` says.
pub fn attention(
    qkv: Tensor<3>,
    key_bias: Option<Tensor<2>>,
    heads: usize,
    d: &burn::nn::Dropout,
    products: Products,
) -> Tensor<3> {
    let device = qkv.device();
    let active = super::dropout::active(d, &device);
    if fused(&device, qkv.dtype()) {
        let [b, l, _] = qkv.dims();
        let key_bias = key_bias.unwrap_or_else(|| Tensor::zeros([b, l], &device));
        let mask = active.then(|| DropMask {
            p: d.prob,
            seed: super::seeds::next_call(),
        });
        return fused_call(qkv, key_bias, heads, mask, products);
    }
    if torch(&device) {
        let p = if active { d.prob } else { 0.0 };
        return torch_call(qkv, key_bias, heads, p);
    }
    composed(qkv, key_bias, heads, d)
}

/// Our fused kernel as one burn operation, with the additive key bias `[batch, len]` and the
/// probabilities' dropout mask, if any. Only where [`fused`](super::fused) holds.
pub fn fused_call(
    qkv: Tensor<3>,
    key_bias: Tensor<2>,
    heads: usize,
    dropout: Option<DropMask>,
    products: Products,
) -> Tensor<3> {
    let (p, seed) = dropout.map_or((0.0, 0), |m| (m.p, m.seed));
    Tensor::from_dispatch(extension_op!(
        "flex",
        flex_op::AttentionOps,
        fused_attention(
            qkv.into_dispatch(),
            key_bias.into_dispatch(),
            heads,
            p,
            seed,
            products,
        )
    ))
}

/// LibTorch's `scaled_dot_product_attention` as one burn operation, with the additive key bias
/// `[batch, len]` (`None` without padding) and dropout `p` on the probabilities (0: none). Only
/// where [`torch`](super::torch) holds.
pub fn torch_call(qkv: Tensor<3>, key_bias: Option<Tensor<2>>, heads: usize, p: f64) -> Tensor<3> {
    let padded = key_bias.is_some();
    let [batch, len, _] = qkv.dims();
    // Unread without padding: an allocation, not a kernel filling it.
    let key_bias = key_bias.unwrap_or_else(|| Tensor::empty([batch, len], &qkv.device()));
    Tensor::from_dispatch(extension_op!(
        "tch",
        torch::TorchAttention,
        torch_attention(
            qkv.into_dispatch(),
            key_bias.into_dispatch(),
            padded,
            heads,
            p,
        )
    ))
}

/// The attention context from burn's operations, where neither our kernel nor LibTorch's call
/// serves: `softmax(Q Kᵀ / √d + b) V` per head, the scores, bias and softmax in f32, the
/// products (and the dropout on the probabilities) in `qkv`'s dtype.
pub(crate) fn composed(
    qkv: Tensor<3>,
    key_bias: Option<Tensor<2>>,
    heads: usize,
    d: &burn::nn::Dropout,
) -> Tensor<3> {
    use burn::tensor::FloatDType;
    let [b, l, h3] = qkv.dims();
    let h = h3 / 3;
    let dh = h / heads;
    let dtype = qkv.dtype();
    let part = |k: usize| {
        qkv.clone()
            .slice([0..b, 0..l, k * h..(k + 1) * h])
            .reshape([b, l, heads, dh])
            .swap_dims(1, 2)
    };
    let q = part(0).mul_scalar(1.0 / (dh as f64).sqrt());
    let mut scores = q.matmul(part(1).swap_dims(2, 3)).cast(FloatDType::F32);
    if let Some(bias) = key_bias {
        scores = scores + bias.reshape([b, 1, 1, l]);
    }
    let probs = burn::tensor::activation::softmax(scores, 3).cast(dtype);
    let probs = super::dropout::dropout(d, probs);
    probs.matmul(part(2)).swap_dims(1, 2).reshape([b, l, h])
}

/// The kernel as an operation of burn's `flex` backend, and its backward step on
/// `Autodiff<Flex>` (the probabilities kept, the mask drawn again from its seed).
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

    use super::super::flex_tensors::{host, tensor};
    use super::{Dims, DropMask, Products, backward, forward};

    /// `seed` is the dropout mask's seed, used when `dropout` > 0.
    #[backend_extension(Flex, Autodiff)]
    pub trait AttentionOps: Backend {
        /// The context `[batch, len, hidden]` from the packed projections
        /// `[batch, len, 3 · hidden]`.
        fn fused_attention(
            qkv: FloatTensor<Self>,
            key_bias: FloatTensor<Self>,
            heads: usize,
            dropout: f64,
            seed: u64,
            products: Products,
        ) -> FloatTensor<Self>;
    }

    fn dims_of(qkv: &FlexTensor, heads: usize) -> Dims {
        let shape = qkv.shape();
        let fits = |s: &Shape| s.num_dims() == 3 && heads > 0 && s[2].is_multiple_of(3 * heads);
        assert!(
            fits(&shape),
            "attention: qkv is not [batch, len, 3 · heads · head_dim]"
        );
        let [batch, len, packed] = [shape[0], shape[1], shape[2]];
        Dims {
            batch,
            len,
            heads,
            head_dim: packed / 3 / heads,
        }
    }

    /// The context's shape `[batch, len, hidden]`.
    fn context_shape(dims: Dims) -> Shape {
        Shape::new([dims.batch, dims.len, dims.hidden()])
    }

    fn drop_mask(p: f64, seed: u64) -> Option<DropMask> {
        (p > 0.0).then_some(DropMask { p, seed })
    }

    impl AttentionOps for Flex {
        fn fused_attention(
            qkv: FlexTensor,
            key_bias: FlexTensor,
            heads: usize,
            dropout: f64,
            seed: u64,
            products: Products,
        ) -> FlexTensor {
            let dims = dims_of(&qkv, heads);
            let mask = drop_mask(dropout, seed);
            let (ctx, _) = forward(&host(&qkv), &host(&key_bias), dims, mask, false, products);
            tensor(ctx, context_shape(dims))
        }
    }

    impl<C: CheckpointStrategy> AttentionOps for Autodiff<Flex, C> {
        fn fused_attention(
            qkv: FloatTensor<Self>,
            key_bias: FloatTensor<Self>,
            heads: usize,
            dropout: f64,
            seed: u64,
            products: Products,
        ) -> FloatTensor<Self> {
            let guards = [qkv.node()];
            let qkv = qkv.into_primitive();
            let bias = key_bias.into_primitive();
            match Step.prepare::<C>(guards).compute_bound().stateful() {
                OpsKind::Tracked(prep) => {
                    let dims = dims_of(&qkv, heads);
                    let dropout = drop_mask(dropout, seed);
                    let (ctx, probs) =
                        forward(&host(&qkv), &host(&bias), dims, dropout, true, products);
                    let heads = dims.batch * dims.heads;
                    let probs = tensor(probs, Shape::new([heads, dims.len, dims.len]));
                    let ctx = tensor(ctx, context_shape(dims));
                    let state = State {
                        qkv,
                        probs,
                        dims,
                        dropout,
                        products,
                    };
                    prep.finish(state, ctx)
                }
                OpsKind::UnTracked(prep) => prep.finish(Flex::fused_attention(
                    qkv, bias, heads, dropout, seed, products,
                )),
            }
        }
    }

    #[derive(Debug)]
    struct Step;

    /// What the backward pass reads: the projections, the kept probabilities, the mask's seed.
    #[derive(Clone, Debug)]
    struct State {
        qkv: FlexTensor,
        probs: FlexTensor,
        dims: Dims,
        dropout: Option<DropMask>,
        products: Products,
    }

    impl Backward<Flex, 1> for Step {
        type State = State;

        fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
            let grad = grads.consume::<Flex>(&ops.node);
            let s = ops.state;
            let [parent] = ops.parents;
            if let Some(node) = parent {
                let dqkv = backward(
                    &host(&grad),
                    &host(&s.qkv),
                    &host(&s.probs),
                    s.dims,
                    s.dropout,
                    s.products,
                );
                grads.register::<Flex>(node.id, tensor(dqkv, s.qkv.shape()));
            }
        }
    }
}
