//! The `Backward` steps of the fused operations on `Autodiff<Flex>` ([`super::flex`]): each
//! takes the output's gradient and what its forward pass saved, and calls the host backward
//! kernel.

use burn::backend::Flex;
use burn::backend::TensorMetadata;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops};
use burn::backend::flex::FlexTensor;
use burn::tensor::Shape;

use super::attention::{self, Dims, DropMask};
use super::flex_tensors::{host, matrix, tensor, weight};
use super::gemm::Products;
use super::linear as linear_kernel;
use super::rows as rows_kernel;

#[derive(Debug)]
pub(super) struct AttentionStep;

#[derive(Clone, Debug)]
pub(super) struct AttentionState {
    pub(super) qkv: FlexTensor,
    pub(super) probs: FlexTensor,
    pub(super) dims: Dims,
    pub(super) dropout: Option<DropMask>,
    pub(super) products: Products,
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
pub(super) struct LinearStep;

#[derive(Clone, Debug)]
pub(super) struct LinearState {
    pub(super) x: FlexTensor,
    pub(super) w: FlexTensor,
    pub(super) transposed: bool,
    pub(super) products: Products,
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
        // ∂x = G Wᵀ and ∂w in w's own layout: xᵀ G, or (xᵀ G)ᵀ = Gᵀ x for a transposed weight.
        let w = weight(&s.w, s.transposed);
        let pair =
            linear_kernel::BackwardProducts::new(matrix(&s.x), g, w, s.transposed, s.products);
        let (dx, dw) = match (node_x.is_some(), node_w.is_some()) {
            // The same size: computed at once, on half the threads each.
            (true, true) => {
                let (dx, dw) = linear_kernel::grad_input_and_weight(pair);
                (Some(dx), Some(dw))
            }
            (dx, dw) => {
                let threads = rayon::current_num_threads();
                let dx = dx.then(|| linear_kernel::grad_input(g, w, threads, s.products));
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
            let db = linear_kernel::grad_bias(&host(&grad), out);
            grads.register::<Flex>(node.id, tensor(db, Shape::new([out])));
        }
    }
}

#[derive(Debug)]
pub(super) struct RowsStep;

#[derive(Clone, Debug)]
pub(super) struct RowsState {
    pub(super) ids: std::sync::Arc<Vec<usize>>,
    /// The table's shape `[rows, width]`.
    pub(super) table: Shape,
}

impl Backward<Flex, 1> for RowsStep {
    type State = RowsState;

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<Flex>(&ops.node);
        let [parent] = ops.parents;
        if let Some(node) = parent {
            let s = ops.state;
            let dt = rows_kernel::backward(&host(&grad), s.table[1], &s.ids, s.table[0]);
            grads.register::<Flex>(node.id, tensor(dt, s.table));
        }
    }
}
