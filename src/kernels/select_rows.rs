//! Rows of a table by index (the embedding lookups, Soft Regularization's embedding rows, the
//! masked positions' hidden states) in one place: the facade model code calls
//! ([`select_rows`]), our host kernel with its operation on burn's `flex` backend and its
//! backward step, and the composed reference (burn's `select`, checked bit for bit in
//! `tests/suite/kernel_rows.rs`). The kernel, forward and backward:
//!
//! `y[k] = T[ids[k]]`; `∂T[r] = Σ_{k: ids[k] = r} ∂y[k]`, the sum taken in increasing k.
//!
//! burn's backward zeroes a `[rows, width]` gradient on one thread, copies it once more into an
//! aligned buffer, and adds the `∂y` rows one after another: for the word embeddings (the whole
//! vocabulary; a run with Soft Regularization looks them up twice a step) two single-threaded
//! passes over the table while the other threads wait, and then a third and fourth when the
//! table's gradient from its other use (the tied MLM decoder's `∂E`) is added to it. Here every
//! thread takes a block of the table's rows and adds the `∂y` rows that fall in it, in
//! increasing k: onto the gradient already registered for the table where there is one (so
//! `∂E` is added to as it stands, and nothing of the vocabulary's size is zeroed or added),
//! and onto zeros otherwise, which gives burn's values bit for bit.

use std::mem::MaybeUninit;

use burn::prelude::*;
use rayon::prelude::*;

use super::select::fused;

/// Rows `ids` `[n]` of `table` `[rows, width]`, `[n, width]` (embedding lookups, gathers of
/// positions): our kernel, whose backward pass builds the table's gradient on all threads, or
/// burn's `select`.
pub fn select_rows(table: Tensor<2>, ids: Tensor<1, Int>) -> Tensor<2> {
    if fused(&table.device(), table.dtype()) {
        fused_call(table, ids)
    } else {
        table.select(0, ids)
    }
}

/// Our kernel as one burn operation. Only where [`fused`](super::fused) holds.
pub fn fused_call(table: Tensor<2>, ids: Tensor<1, Int>) -> Tensor<2> {
    Tensor::from_dispatch(extension_op!(
        "flex",
        flex_op::RowsOps,
        fused_rows(table.into_dispatch(), ids.into_dispatch())
    ))
}

/// Table rows per parallel block of the backward pass.
const BLOCK_ROWS: usize = 512;

/// `ids.len()` rows of `width` from `table` (`[rows, width]`, row-major).
pub fn forward(table: &[f32], width: usize, ids: &[usize]) -> Vec<f32> {
    check(table.len(), width, ids);
    // SAFETY: each output row is written whole from its table row (both `width` long).
    let (y, ()) = unsafe {
        super::buffers::filled_by(ids.len() * width, |y| {
            y.par_chunks_mut(width.max(1))
                .zip(ids.par_iter())
                .for_each(|(dst, &r)| {
                    for (d, &x) in dst.iter_mut().zip(&table[r * width..(r + 1) * width]) {
                        d.write(x);
                    }
                })
        })
    };
    y
}

/// `∂T` `[rows, width]` from `∂y` `[ids.len(), width]`.
pub fn backward(grad: &[f32], width: usize, ids: &[usize], rows: usize) -> Vec<f32> {
    // SAFETY: every block is zeroed before `add_rows` reads it, and the blocks cover the buffer.
    let (dt, ()) = unsafe {
        super::buffers::filled_by(rows * width, |dt| {
            dt.par_chunks_mut(BLOCK_ROWS * width.max(1))
                .for_each(|out| out.fill(MaybeUninit::new(0.0)));
            // SAFETY: just initialised, and `f32` has the layout of `MaybeUninit<f32>`.
            let dt = &mut *(dt as *mut [MaybeUninit<f32>] as *mut [f32]);
            add_rows(grad, width, ids, dt);
        })
    };
    dt
}

/// Adds `∂y` `[ids.len(), width]` onto `dt`, a table's gradient `[rows, width]` that another
/// use of the table has already registered (the tied MLM decoder's `∂E`): the table's rows
/// are summed in place instead of into a zeroed table added to it afterwards. Each row gets
/// its `∂y` rows in increasing k.
pub fn add_rows(grad: &[f32], width: usize, ids: &[usize], dt: &mut [f32]) {
    assert_eq!(grad.len(), ids.len() * width, "rows: gradient shape");
    check(dt.len(), width, ids);
    // The positions by row, each row's in increasing k (a stable sort).
    let mut order: Vec<usize> = (0..ids.len()).collect();
    order.sort_by_key(|&k| ids[k]);
    let block = BLOCK_ROWS * width.max(1);
    dt.par_chunks_mut(block).enumerate().for_each(|(b, out)| {
        let first = b * BLOCK_ROWS;
        let end = first + out.len() / width.max(1);
        let start = order.partition_point(|&k| ids[k] < first);
        for &k in order[start..].iter().take_while(|&&k| ids[k] < end) {
            let dst = &mut out[(ids[k] - first) * width..(ids[k] - first + 1) * width];
            for (d, &g) in dst.iter_mut().zip(&grad[k * width..(k + 1) * width]) {
                *d += g;
            }
        }
    });
}

fn check(table_len: usize, width: usize, ids: &[usize]) {
    let rows = table_len.checked_div(width).unwrap_or(0);
    if let Some(&bad) = ids.iter().find(|&&r| r >= rows) {
        panic!("rows: index {bad} outside a table of {rows} rows");
    }
}

/// The kernel as an operation of burn's `flex` backend, and its backward step on
/// `Autodiff<Flex>` (the ids kept, not the table).
#[cfg(feature = "flex")]
mod flex_op {
    use std::sync::Arc;

    use burn::backend::TensorMetadata;
    use burn::backend::autodiff::checkpoint::base::Checkpointer;
    use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
    use burn::backend::autodiff::grads::Gradients;
    use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
    use burn::backend::flex::FlexTensor;
    use burn::backend::ops::FloatTensorOps;
    use burn::backend::tensor::{FloatTensor, IntTensor};
    use burn::backend::{Autodiff, Backend, Flex, backend_extension};
    use burn::tensor::Shape;

    use burn::tensor::DType;

    use super::super::flex_tensors::{host, host_mut, indices, tensor};
    use super::{add_rows, backward, forward};

    #[backend_extension(Flex, Autodiff)]
    pub trait RowsOps: Backend {
        /// Rows `ids` `[n]` of `table` `[rows, width]`: `[n, width]`.
        fn fused_rows(table: FloatTensor<Self>, ids: IntTensor<Self>) -> FloatTensor<Self>;
    }

    /// The row width of a `[rows, width]` table.
    fn table_width(t: &FlexTensor) -> usize {
        let shape = t.shape();
        assert_eq!(shape.num_dims(), 2, "rows: the table is not a matrix");
        shape[1]
    }

    impl RowsOps for Flex {
        fn fused_rows(table: FlexTensor, ids: FlexTensor) -> FlexTensor {
            let (ids, width) = (indices(&ids), table_width(&table));
            let y = forward(&host(&table), width, &ids);
            tensor(y, Shape::new([ids.len(), width]))
        }
    }

    impl<C: CheckpointStrategy> RowsOps for Autodiff<Flex, C> {
        fn fused_rows(table: FloatTensor<Self>, ids: IntTensor<Self>) -> FloatTensor<Self> {
            let guards = [table.node()];
            let tracked = table.clone();
            let table = table.into_primitive();
            let (ids, width) = (indices(&ids), table_width(&table));
            let y = tensor(
                forward(&host(&table), width, &ids),
                Shape::new([ids.len(), width]),
            );
            match Step.prepare::<C>(guards).compute_bound().stateful() {
                OpsKind::Tracked(prep) => {
                    let state = State {
                        ids: Arc::new(ids),
                        table: tracked,
                    };
                    prep.finish(state, y)
                }
                OpsKind::UnTracked(prep) => prep.finish(y),
            }
        }
    }

    #[derive(Debug)]
    struct Step;

    #[derive(Clone, Debug)]
    struct State {
        ids: Arc<Vec<usize>>,
        /// The table as the graph holds it: its shape, and the key of a gradient another use
        /// of it has already registered.
        table: FloatTensor<Autodiff<Flex>>,
    }

    impl Backward<Flex, 1> for Step {
        type State = State;

        /// Where the table already has a gradient (the tied decoder's, registered first on the
        /// way back), the rows are added onto it in place; otherwise into a zeroed table. burn
        /// would add a zeroed table's worth of rows onto the earlier gradient: two more passes
        /// over the whole vocabulary.
        fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
            let grad = grads.consume::<Flex>(&ops.node);
            let [parent] = ops.parents;
            if let Some(node) = parent {
                let s = ops.state;
                let shape = s.table.shape();
                let width = shape[1];
                let dt = match grads.remove::<Flex>(&s.table) {
                    Some(mut dt) if dt.dtype() == DType::F32 && dt.shape() == shape => {
                        add_rows(&host(&grad), width, &s.ids, host_mut(&mut dt));
                        dt
                    }
                    earlier => {
                        let dt = tensor(backward(&host(&grad), width, &s.ids, shape[0]), shape);
                        match earlier {
                            Some(earlier) => Flex::float_add(dt, earlier),
                            None => dt,
                        }
                    }
                };
                grads.register::<Flex>(node.id, dt);
            }
        }
    }
}
