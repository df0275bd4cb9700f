//! Rows of a table by index (the embedding lookups, Soft Regularization's embedding rows, the
//! masked positions' hidden states), forward and backward, on the host:
//!
//! `y[k] = T[ids[k]]`; `∂T[r] = Σ_{k: ids[k] = r} ∂y[k]`, the sum taken in increasing k.
//!
//! burn's backward zeroes a `[rows, width]` gradient on one thread, copies it once more into an
//! aligned buffer, and adds the `∂y` rows one after another: for the word embeddings (the whole
//! vocabulary; a run with Soft Regularization looks them up twice a step) two single-threaded
//! passes over the table while the other threads wait. Here every thread takes a block of the table's
//! rows, zeroes it and adds the `∂y` rows that fall in it, in increasing k: the same additions
//! in the same order, so the same values.

use std::mem::MaybeUninit;

use rayon::prelude::*;

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
    assert_eq!(grad.len(), ids.len() * width, "rows: gradient shape");
    check(rows * width, width, ids);
    // The positions by row, each row's in increasing k (a stable sort).
    let mut order: Vec<usize> = (0..ids.len()).collect();
    order.sort_by_key(|&k| ids[k]);
    let block = BLOCK_ROWS * width.max(1);
    let zero_and_add = |b: usize, out: &mut [MaybeUninit<f32>]| {
        out.fill(MaybeUninit::new(0.0));
        // SAFETY: just initialised, and `f32` has the layout of `MaybeUninit<f32>`.
        let out = unsafe { &mut *(out as *mut [MaybeUninit<f32>] as *mut [f32]) };
        let first = b * BLOCK_ROWS;
        let end = first + out.len() / width.max(1);
        let start = order.partition_point(|&k| ids[k] < first);
        for &k in order[start..].iter().take_while(|&&k| ids[k] < end) {
            let dst = &mut out[(ids[k] - first) * width..(ids[k] - first + 1) * width];
            for (d, &g) in dst.iter_mut().zip(&grad[k * width..(k + 1) * width]) {
                *d += g;
            }
        }
    };
    // SAFETY: `zero_and_add` writes every element of its block, and the blocks cover the
    // buffer.
    let (dt, ()) = unsafe {
        super::buffers::filled_by(rows * width, |dt| {
            dt.par_chunks_mut(block)
                .enumerate()
                .for_each(|(b, out)| zero_and_add(b, out))
        })
    };
    dt
}

fn check(table_len: usize, width: usize, ids: &[usize]) {
    let rows = table_len.checked_div(width).unwrap_or(0);
    if let Some(&bad) = ids.iter().find(|&&r| r >= rows) {
        panic!("rows: index {bad} outside a table of {rows} rows");
    }
}
