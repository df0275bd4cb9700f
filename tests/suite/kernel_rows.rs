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

const WIDTH: usize = 5;

/// The table `[1100, WIDTH]` as a tracked leaf.
fn table(device: &Device) -> Tensor<2> {
    leaf(random(&[1100, WIDTH], 3), [1100, WIDTH], device)
}

/// Rows [`IDS`] of `table` (our kernel or burn's `select`), and the sum of their elements
/// times weights that differ per element, so that every row's gradient is a distinct sum.
fn looked_up(fused: bool, table: &Tensor<2>) -> (Tensor<2>, Tensor<1>) {
    let device = table.device();
    let ids = Tensor::<1, Int>::from_data(TensorData::new(IDS.to_vec(), [IDS.len()]), &device);
    let picked = if fused {
        kernels::select_rows::fused_call(table.clone(), ids)
    } else {
        table.clone().select(0, ids)
    };
    let w = Tensor::<2>::from_data(
        TensorData::new(random(&[IDS.len(), WIDTH], 4), [IDS.len(), WIDTH]),
        &device,
    );
    (picked.clone(), (picked * w).sum())
}

fn case(fused: bool) -> (Vec<f32>, Vec<f32>) {
    let table = table(&Device::flex().autodiff());
    let (picked, loss) = looked_up(fused, &table);
    let grads = loss.backward();
    (vec_of(picked), vec_of(table.grad(&grads).unwrap()))
}

#[test]
fn selected_rows_and_their_gradient_equal_burns_select_bit_for_bit() {
    let (fused, composed) = (case(true), case(false));
    assert_eq!(fused.0, composed.0, "values");
    assert_eq!(fused.1, composed.1, "table gradient");
    // Eight distinct rows of width 5 have gradients; the other rows are zero.
    assert_eq!(fused.1.iter().filter(|&&g| g != 0.0).count(), 8 * WIDTH);
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

/// The whole use's weights (its gradient for the table): thirds of `random`'s values, whose
/// 24 significant bits make the order of additions show (`random`'s own lie on a grid of
/// 2⁻²¹, on which sums of a few are exact).
fn whole_weights() -> Vec<f32> {
    random(&[1100, WIDTH], 5).iter().map(|x| x / 3.0).collect()
}

/// The table's gradient when it is also used whole (as the tied MLM decoder uses the word
/// embeddings), the whole use recorded after the lookup (its gradient is registered first on
/// the way back, and the lookup's rows are added onto it) or before it.
fn shared_case(fused: bool, whole_use_last: bool) -> Vec<f32> {
    let device = Device::flex().autodiff();
    let table = table(&device);
    let v = Tensor::<2>::from_data(TensorData::new(whole_weights(), [1100, WIDTH]), &device);
    let whole = || (table.clone() * v.clone()).sum();
    let first = (!whole_use_last).then(whole);
    let (_, looked_up) = looked_up(fused, &table);
    let loss = match first {
        Some(first) => first + looked_up,
        None => looked_up + whole(),
    };
    vec_of(table.grad(&loss.backward()).unwrap())
}

#[test]
fn rows_are_added_onto_a_gradient_the_table_already_has() {
    for whole_use_last in [true, false] {
        let (fused, composed) = (
            shared_case(true, whole_use_last),
            shared_case(false, whole_use_last),
        );
        // The same sums; a row looked up several times may differ in its last bit (its rows are
        // added onto the whole use's gradient one by one instead of summed first).
        common::assert_close("table gradient", &fused, &composed, 1e-6);
        let v = whole_weights();
        // Rows 7 and 512, each looked up three times: onto the whole use's gradient one by one
        // where that was registered first, else summed and then added (burn's order).
        let w = random(&[IDS.len(), WIDTH], 4);
        let mut orders_differ = false;
        for row in [7, 512] {
            let at: Vec<usize> = (0..IDS.len()).filter(|&k| IDS[k] == row).collect();
            let row = row as usize;
            for j in 0..WIDTH {
                let g: Vec<f32> = at.iter().map(|&k| w[k * WIDTH + j]).collect();
                let base = v[row * WIDTH + j];
                let one_by_one = g.iter().fold(base, |acc, &x| acc + x);
                let summed = base + g.iter().fold(0.0, |acc, &x| acc + x);
                let want = if whole_use_last { one_by_one } else { summed };
                assert_eq!(fused[row * WIDTH + j], want, "row {row}, column {j}");
                orders_differ |= one_by_one != summed;
            }
        }
        assert!(orders_differ, "the data cannot tell the two orders apart");
        let untouched = (0..1100).filter(|r| !IDS.contains(&(*r as i64)));
        for r in untouched {
            assert_eq!(
                fused[r * WIDTH..(r + 1) * WIDTH],
                v[r * WIDTH..(r + 1) * WIDTH],
                "row {r}"
            );
        }
    }
}
