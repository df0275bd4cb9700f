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

use super::adamw::{self, AdamWStep};
use super::attention::{self, Dims, DropMask};
use super::cross_entropy as ce_kernel;
use super::flex_steps::{
    AttentionState, AttentionStep, CrossEntropyState, CrossEntropyStep, LinearState, LinearStep,
    RowsState, RowsStep,
};
use super::flex_tensors::{host, host_mut, indices, matrix, table_width, tensor, weight};
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
    fn fused_cross_entropy(logits: FloatTensor<Self>, labels: IntTensor<Self>)
    -> FloatTensor<Self>;
    /// `x·w + b`, or `x·wᵀ + b` when `transposed` (`w` stored `[out, in]`).
    fn fused_linear(
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        b: FloatTensor<Self>,
        transposed: bool,
        products: Products,
    ) -> FloatTensor<Self>;
    /// The optimizer's update: new (parameter, m, v). Not differentiable.
    fn fused_adamw(
        param: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        m: FloatTensor<Self>,
        v: FloatTensor<Self>,
        step: AdamWStep,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>);
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

    fn fused_cross_entropy(logits: FlexTensor, labels: FlexTensor) -> FlexTensor {
        let n = labels.shape().num_elements();
        let vocab = logits.shape().num_elements() / n.max(1);
        let (nll, _) = ce_kernel::forward(&host(&logits), &indices(&labels), vocab);
        tensor(nll, Shape::new([n]))
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

    fn fused_adamw(
        param: FlexTensor,
        grad: FlexTensor,
        mut m: FlexTensor,
        mut v: FlexTensor,
        step: AdamWStep,
    ) -> (FlexTensor, FlexTensor, FlexTensor) {
        let p = adamw::update(
            &host(&param),
            &host(&grad),
            host_mut(&mut m),
            host_mut(&mut v),
            &step,
        );
        (tensor(p, param.shape()), m, v)
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

    fn fused_cross_entropy(
        logits: FloatTensor<Self>,
        labels: IntTensor<Self>,
    ) -> FloatTensor<Self> {
        let guards = [logits.node()];
        let logits = logits.into_primitive();
        let labels = indices(&labels);
        let n = labels.len();
        let vocab = logits.shape().num_elements() / n.max(1);
        let (nll, lse) = ce_kernel::forward(&host(&logits), &labels, vocab);
        let nll = tensor(nll, Shape::new([n]));
        match CrossEntropyStep
            .prepare::<C>(guards)
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let state = CrossEntropyState {
                    logits,
                    labels: std::sync::Arc::new(labels),
                    lse: std::sync::Arc::new(lse),
                };
                prep.finish(state, nll)
            }
            OpsKind::UnTracked(prep) => prep.finish(nll),
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

    fn fused_adamw(
        _: FloatTensor<Self>,
        _: FloatTensor<Self>,
        _: FloatTensor<Self>,
        _: FloatTensor<Self>,
        _: AdamWStep,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        unreachable!("the optimizer updates the parameters' inner (non-autodiff) tensors")
    }

    fn fused_sample(logits: FloatTensor<Self>, seed: u64, ids: IntDType) -> IntTensor<Self> {
        Flex::fused_sample(logits.into_primitive(), seed, ids)
    }
}
