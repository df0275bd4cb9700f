//! Output buffers of the CPU kernels: written whole from uninitialised memory, or repeated
//! rows, large ones by all of rayon's threads.

use std::mem::MaybeUninit;

use rayon::prelude::*;

/// Buffers of at least this many elements are filled by all of rayon's threads.
pub(crate) const PARALLEL_FILL: usize = 1 << 16;

/// A fresh `n`-element buffer written by `write`, which gets it uninitialised, and whatever
/// `write` returns. For the kernels' outputs, which they write whole (element-wise loops, and
/// products that do not accumulate: see `gemm::product_new`): zeroing them first would be a
/// memory-bound pass of its own over every output.
///
/// # Safety
/// `write` must initialise every one of the `n` elements.
pub(crate) unsafe fn filled_by<R>(
    n: usize,
    write: impl FnOnce(&mut [MaybeUninit<f32>]) -> R,
) -> (Vec<f32>, R) {
    let mut v = Vec::with_capacity(n);
    let r = write(&mut v.spare_capacity_mut()[..n]);
    // SAFETY: `write` initialised the first `n` elements (the caller's promise).
    unsafe { v.set_len(n) };
    (v, r)
}

/// `rows` copies of `row`, one after another (the bias rows a product accumulates onto),
/// written in parallel when large.
pub(crate) fn repeated_rows(row: &[f32], rows: usize) -> Vec<f32> {
    let n = rows * row.len();
    if n < PARALLEL_FILL || row.is_empty() {
        return row.repeat(rows);
    }
    // SAFETY: the blocks are whole rows (a multiple of `row.len()` elements, the last one too,
    // since `n` is) and cover the buffer; each of their rows is written whole.
    let (v, ()) = unsafe {
        filled_by(n, |v| {
            v.par_chunks_mut(row.len() * 64).for_each(|block| {
                for dst in block.chunks_exact_mut(row.len()) {
                    for (d, &x) in dst.iter_mut().zip(row) {
                        d.write(x);
                    }
                }
            })
        })
    };
    v
}
