//! The fused kernels as burn operations on the `flex` backend: a backend extension
//! (`FusedOps`) implemented for `Flex` (forward only) and for `Autodiff<Flex>` (forward, then a
//! `Backward` step that calls the host backward kernel).

use std::borrow::Cow;

use burn::backend::TensorMetadata;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::flex::FlexTensor;
use burn::backend::tensor::{FloatTensor, IntTensor};
use burn::backend::{Autodiff, Backend, Flex, backend_extension};
use burn::prelude::*;
use burn::tensor::{DType, Shape};

use super::adamw::{self, AdamWStep};
use super::attention::{self, Dims, DropMask};
use super::cross_entropy as ce_kernel;
use super::gemm::{Products, View, in_halves};
use super::linear as linear_kernel;
use super::{gelu as gelu_kernel, layer_norm as ln_kernel};

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
    fn fused_layer_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        eps: f64,
    ) -> FloatTensor<Self>;
    fn fused_gelu(x: FloatTensor<Self>) -> FloatTensor<Self>;
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
}

/// A 2-D f32 tensor as a (possibly strided) matrix view, valid while `t` lives.
fn matrix(t: &FlexTensor) -> View {
    let layout = t.layout();
    let shape = layout.shape();
    let strides = layout.strides();
    assert!(
        shape.num_dims() == 2 && strides.iter().all(|&s| s >= 0),
        "linear: operands must be matrices"
    );
    let data = t.storage::<f32>();
    let start = layout.start_offset();
    let (rows, cols) = (shape[0], shape[1]);
    if rows > 0 && cols > 0 {
        let last = start + (rows - 1) * strides[0] as usize + (cols - 1) * strides[1] as usize;
        assert!(last < data.len(), "linear: view outside its buffer");
    }
    View {
        ptr: data[start..].as_ptr(),
        rows,
        cols,
        rs: strides[0],
        cs: strides[1],
    }
}

/// The `[in, out]` weight of a linear map stored as `w` (`[out, in]` when `transposed`).
fn weight(w: &FlexTensor, transposed: bool) -> View {
    if transposed { matrix(w).t() } else { matrix(w) }
}

/// Class indices of an integer tensor.
fn indices(t: &FlexTensor) -> Vec<usize> {
    let t = t.to_contiguous();
    match t.dtype() {
        DType::I64 => t.storage::<i64>().iter().map(|&i| i as usize).collect(),
        DType::I32 => t.storage::<i32>().iter().map(|&i| i as usize).collect(),
        other => panic!("cross-entropy: labels of dtype {other:?}"),
    }
}

/// The elements of `t`, writable in place (copied first when shared or strided).
fn host_mut(t: &mut FlexTensor) -> &mut [f32] {
    if t.as_slice::<f32>().is_none() || !t.is_unique() {
        *t = t.to_contiguous();
    }
    t.try_storage_mut::<f32>()
        .expect("a contiguous tensor of one owner")
}

/// The f32 elements of `t` in row-major order (borrowed when already contiguous).
fn host(t: &FlexTensor) -> Cow<'_, [f32]> {
    match t.as_slice::<f32>() {
        Some(s) => Cow::Borrowed(s),
        None => Cow::Owned(
            t.to_contiguous()
                .into_data()
                .try_into_vec::<f32>()
                .expect("fused kernels take f32 tensors"),
        ),
    }
}

fn tensor(values: Vec<f32>, shape: Shape) -> FlexTensor {
    FlexTensor::from_data(TensorData::new(values, shape))
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

    fn fused_layer_norm(
        x: FlexTensor,
        gamma: FlexTensor,
        beta: FlexTensor,
        eps: f64,
    ) -> FlexTensor {
        let (y, _) = ln_kernel::forward(&host(&x), &host(&gamma), &host(&beta), eps, false);
        tensor(y, x.shape())
    }

    fn fused_gelu(x: FlexTensor) -> FlexTensor {
        let (y, _) = gelu_kernel::forward(&host(&x), false);
        tensor(y, x.shape())
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
}

#[derive(Debug)]
struct AttentionStep;

#[derive(Clone, Debug)]
struct AttentionState {
    qkv: FlexTensor,
    probs: FlexTensor,
    dims: Dims,
    dropout: Option<DropMask>,
    products: Products,
}

impl Backward<Flex, 1> for AttentionStep {
    type State = AttentionState;

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<Flex>(&ops.node);
        let s = ops.state;
        let [parent] = ops.parents;
        if let Some(node) = parent {
            let dqkv = attention::backward(
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

#[derive(Debug)]
struct LayerNormStep;

#[derive(Clone, Debug)]
struct LayerNormState {
    saved: std::sync::Arc<ln_kernel::Saved>,
    gamma: FlexTensor,
    shape: Shape,
}

impl Backward<Flex, 3> for LayerNormStep {
    type State = LayerNormState;

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<Flex>(&ops.node);
        let s = ops.state;
        let (dx, dgamma, dbeta) = ln_kernel::backward(&host(&grad), &s.saved, &host(&s.gamma));
        let width = Shape::new([dgamma.len()]);
        let outs = [
            tensor(dx, s.shape),
            tensor(dgamma, width.clone()),
            tensor(dbeta, width),
        ];
        for (parent, g) in ops.parents.into_iter().zip(outs) {
            if let Some(node) = parent {
                grads.register::<Flex>(node.id, g);
            }
        }
    }
}

#[derive(Debug)]
struct CrossEntropyStep;

#[derive(Clone, Debug)]
struct CrossEntropyState {
    logits: FlexTensor,
    labels: std::sync::Arc<Vec<usize>>,
    lse: std::sync::Arc<Vec<f32>>,
}

impl Backward<Flex, 1> for CrossEntropyStep {
    type State = CrossEntropyState;

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<Flex>(&ops.node);
        let [parent] = ops.parents;
        if let Some(node) = parent {
            let s = ops.state;
            let shape = s.logits.shape();
            let vocab = shape.num_elements() / s.labels.len().max(1);
            let dz = ce_kernel::backward(&host(&grad), &host(&s.logits), &s.labels, &s.lse, vocab);
            grads.register::<Flex>(node.id, tensor(dz, shape));
        }
    }
}

#[derive(Debug)]
struct LinearStep;

#[derive(Clone, Debug)]
struct LinearState {
    x: FlexTensor,
    w: FlexTensor,
    transposed: bool,
    products: Products,
}

impl Backward<Flex, 3> for LinearStep {
    type State = LinearState;

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
        // ∂x = G Wᵀ and ∂w (in w's own layout: xᵀ G, or (xᵀ G)ᵀ = Gᵀ x for a transposed
        // weight) are the same size: computed at once, on half the threads each.
        let (dx, dw) = in_halves(
            |threads| {
                node_x.is_some().then(|| {
                    let w = weight(&s.w, s.transposed);
                    linear_kernel::grad_input(g, w, threads, s.products)
                })
            },
            |threads| {
                node_w.is_some().then(|| {
                    if s.transposed {
                        linear_kernel::grad_weight(g, matrix(&s.x), threads, s.products)
                    } else {
                        linear_kernel::grad_weight(matrix(&s.x), g, threads, s.products)
                    }
                })
            },
        );
        if let (Some(node), Some(dx)) = (node_x, dx) {
            grads.register::<Flex>(node.id, tensor(dx, s.x.shape()));
        }
        if let (Some(node), Some(dw)) = (node_w, dw) {
            grads.register::<Flex>(node.id, tensor(dw, s.w.shape()));
        }
        if let Some(node) = node_b {
            let out = g.cols;
            let db = linear_kernel::grad_bias(&host(&grad), out);
            grads.register::<Flex>(node.id, tensor(db, Shape::new([out])));
        }
    }
}

#[derive(Debug)]
struct GeluStep;

impl Backward<Flex, 1> for GeluStep {
    type State = FlexTensor;

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<Flex>(&ops.node);
        let [parent] = ops.parents;
        if let Some(node) = parent {
            let dx = gelu_kernel::backward(&host(&grad), &host(&ops.state));
            grads.register::<Flex>(node.id, tensor(dx, grad.shape()));
        }
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

    fn fused_layer_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        eps: f64,
    ) -> FloatTensor<Self> {
        let guards = [x.node(), gamma.node(), beta.node()];
        let (x, gamma, beta) = (
            x.into_primitive(),
            gamma.into_primitive(),
            beta.into_primitive(),
        );
        match LayerNormStep
            .prepare::<C>(guards)
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let shape = x.shape();
                let (y, saved) =
                    ln_kernel::forward(&host(&x), &host(&gamma), &host(&beta), eps, true);
                let state = LayerNormState {
                    saved: std::sync::Arc::new(saved),
                    gamma,
                    shape: shape.clone(),
                };
                prep.finish(state, tensor(y, shape))
            }
            OpsKind::UnTracked(prep) => prep.finish(Flex::fused_layer_norm(x, gamma, beta, eps)),
        }
    }

    fn fused_gelu(x: FloatTensor<Self>) -> FloatTensor<Self> {
        let guards = [x.node()];
        let x = x.into_primitive();
        match GeluStep.prepare::<C>(guards).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let shape = x.shape();
                let (y, d) = gelu_kernel::forward(&host(&x), true);
                prep.finish(tensor(d, shape.clone()), tensor(y, shape))
            }
            OpsKind::UnTracked(prep) => prep.finish(Flex::fused_gelu(x)),
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
}
