//! The row lookup (embeddings, Soft Regularization's embedding rows, the masked positions'
//! hidden states): values and the table's gradient equal burn's `select` exactly, with
//! repeated indices and indices on both sides of the backward pass's row blocks, on any number
//! of threads.

use burn::prelude::*;
use trueneg::kernels;

use crate::common;
use common::{leaf, on_threads, random, vec_of};

/// Rows 0, 511, 512, 513 and the last lie on or beside the boundaries of the backward pass's
/// blocks; 7 and 512 come back several times, so their gradients are sums.
const IDS: [i64; 12] = [7, 0, 512, 1099, 511, 7, 513, 512, 7, 300, 512, 1];

fn case(fused: bool) -> (Vec<f32>, Vec<f32>) {
    let device = Device::flex().autodiff();
    let (rows, width) = (1100, 5);
    let table = leaf(random(&[rows, width], 3), [rows, width], &device);
    let ids = Tensor::<1, Int>::from_data(TensorData::new(IDS.to_vec(), [IDS.len()]), &device);
    let picked = if fused {
        kernels::select_rows::fused_call(table.clone(), ids)
    } else {
        table.clone().select(0, ids)
    };
    // Weights that differ per element, so that every row's gradient is a distinct sum.
    let w = Tensor::<2>::from_data(
        TensorData::new(random(&[IDS.len(), width], 4), [IDS.len(), width]),
        &device,
    );
    let grads = (picked.clone() * w).sum().backward();
    (vec_of(picked), vec_of(table.grad(&grads).unwrap()))
}

#[test]
fn selected_rows_and_their_gradient_equal_burns_select_bit_for_bit() {
    let (fused, composed) = (case(true), case(false));
    assert_eq!(fused.0, composed.0, "values");
    assert_eq!(fused.1, composed.1, "table gradient");
    // Eight distinct rows of width 5 have gradients; the other rows are zero.
    assert_eq!(fused.1.iter().filter(|&&g| g != 0.0).count(), 8 * 5);
}

#[test]
fn the_row_gradient_does_not_depend_on_the_thread_count() {
    assert_eq!(on_threads(1, || case(true)), on_threads(3, || case(true)));
}

#[test]
#[should_panic(expected = "index 4 outside a table of 4 rows")]
fn an_index_outside_the_table_is_refused() {
    kernels::select_rows::forward(&[0.0; 8], 2, &[1, 4]);
}
