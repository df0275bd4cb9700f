//! The fused kernels as burn operations on the `flex` backend: a backend extension
//! (`FusedOps`) implemented for `Flex` (forward only) and for `Autodiff<Flex>` (forward, then a
//! `Backward` step that calls the host backward kernel).

use burn::backend::TensorMetadata;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::ops::{Backward, OpsKind};
use burn::backend::flex::FlexTensor;
use burn::backend::tensor::{FloatTensor, IntTensor};
use burn::backend::{Autodiff, Backend, Flex, backend_extension};
use burn::tensor::{DType, IntDType, Shape, TensorData};

use super::attention::{self, Dims, DropMask};
use super::flex_steps::{
    AttentionState, AttentionStep, LinearState, LinearStep, RowsState, RowsStep,
};
use super::flex_tensors::{host, indices, matrix, table_width, tensor, weight};
use super::gemm::Products;
use super::linear as linear_kernel;
use super::rows as rows_kernel;
use super::sampling;

/// The fused operations. `seed` is the attention dropout's mask seed, used when `dropout` > 0.
#[backend_extension(Flex, Autodiff)]
pub trait FusedOps: Backend {
    /// The context `[batch, len, hidden]` from the packed projections `[batch, len, 3 · hidden]`.
    fn fused_attention(
        qkv: FloatTensor<Self>,
        key_bias: FloatTensor<Self>,
        heads: usize,
        dropout: f64,
        seed: u64,
        products: Products,
    ) -> FloatTensor<Self>;
    /// Rows `ids` `[n]` of `table` `[rows, width]`: `[n, width]`.
    fn fused_rows(table: FloatTensor<Self>, ids: IntTensor<Self>) -> FloatTensor<Self>;
    /// `x·w + b`, or `x·wᵀ + b` when `transposed` (`w` stored `[out, in]`).
    fn fused_linear(
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        b: FloatTensor<Self>,
        transposed: bool,
        products: Products,
    ) -> FloatTensor<Self>;
    /// One draw per row of `logits` `[rows, vocab]` from the row's softmax (see
    /// [`sampling`](mod@super::sampling)), read in place: ids `[rows]` of dtype `ids`. Not
    /// differentiable.
    fn fused_sample(logits: FloatTensor<Self>, seed: u64, ids: IntDType) -> IntTensor<Self>;
}

fn attention_dims(qkv: &FlexTensor, heads: usize) -> Dims {
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

impl FusedOps for Flex {
    fn fused_attention(
        qkv: FlexTensor,
        key_bias: FlexTensor,
        heads: usize,
        dropout: f64,
        seed: u64,
        products: Products,
    ) -> FlexTensor {
        let dims = attention_dims(&qkv, heads);
        let (ctx, _) = attention::forward(
            &host(&qkv),
            &host(&key_bias),
            dims,
            drop_mask(dropout, seed),
            false,
            products,
        );
        tensor(ctx, context_shape(dims))
    }

    fn fused_rows(table: FlexTensor, ids: FlexTensor) -> FlexTensor {
        let (ids, width) = (indices(&ids), table_width(&table));
        let y = rows_kernel::forward(&host(&table), width, &ids);
        tensor(y, Shape::new([ids.len(), width]))
    }

    fn fused_linear(
        x: FlexTensor,
        w: FlexTensor,
        b: FlexTensor,
        transposed: bool,
        products: Products,
    ) -> FlexTensor {
        let w = weight(&w, transposed);
        let y = linear_kernel::forward(matrix(&x), w, &host(&b), products);
        tensor(y, Shape::new([x.shape()[0], w.cols]))
    }

    fn fused_sample(logits: FlexTensor, seed: u64, ids: IntDType) -> FlexTensor {
        let shape = logits.shape();
        assert_eq!(
            shape.num_dims(),
            2,
            "sampling: logits are not [rows, vocab]"
        );
        let drawn = sampling::sample_rows(&host(&logits), shape[1], seed);
        let drawn: Vec<i64> = drawn.into_iter().map(i64::from).collect();
        let data = TensorData::new(drawn, [shape[0]]).convert_dtype(DType::from(ids));
        FlexTensor::from_data(data)
    }
}

impl<C: CheckpointStrategy> FusedOps for Autodiff<Flex, C> {
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
        match AttentionStep
            .prepare::<C>(guards)
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let dims = attention_dims(&qkv, heads);
                let dropout = drop_mask(dropout, seed);
                let (ctx, probs) =
                    attention::forward(&host(&qkv), &host(&bias), dims, dropout, true, products);
                let heads = dims.batch * dims.heads;
                let probs = tensor(probs, Shape::new([heads, dims.len, dims.len]));
                let ctx = tensor(ctx, context_shape(dims));
                let state = AttentionState {
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

    fn fused_rows(table: FloatTensor<Self>, ids: IntTensor<Self>) -> FloatTensor<Self> {
        let guards = [table.node()];
        let table = table.into_primitive();
        let (ids, width) = (indices(&ids), table_width(&table));
        let y = tensor(
            rows_kernel::forward(&host(&table), width, &ids),
            Shape::new([ids.len(), width]),
        );
        match RowsStep.prepare::<C>(guards).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let state = RowsState {
                    ids: std::sync::Arc::new(ids),
                    table: table.shape(),
                };
                prep.finish(state, y)
            }
            OpsKind::UnTracked(prep) => prep.finish(y),
        }
    }

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
        match LinearStep.prepare::<C>(guards).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let state = LinearState {
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

    fn fused_sample(logits: FloatTensor<Self>, seed: u64, ids: IntDType) -> IntTensor<Self> {
        Flex::fused_sample(logits.into_primitive(), seed, ids)
    }
}
