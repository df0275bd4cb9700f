//! Matrix products in f32 through the crate faster for the shape: the `gemm` crate burn's CPU
//! backend uses, or `faer`'s own x86 kernels (see [`F32Crate::for_left`]). `kernels::gemm` picks between these
//! and the bf16 kernels; `kernels::gemm_bf16_rounded` multiplies its rounded operands here.

use super::views::{View, ViewMut};

/// Products whose left operand is row-major with at least this many rows go to `faer`'s
/// matrix product instead of the gemm crate's (see [`F32Crate::for_left`]).
pub const FAER_MIN_ROWS: usize = 1024;

/// Products whose left operand is transposed (not row-major) go to faer from this many rows:
/// the MLM decoder's `∂E = Gᵀ·x` (a row per vocabulary entry, the masked positions as inner
/// dimension), not the encoder's weight gradients `xᵀ·G` (256 or 1024 rows).
pub const FAER_MIN_ROWS_TRANSPOSED: usize = 4096;

/// Which crate's kernels multiply a product in f32 (see [`F32Crate::for_left`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum F32Crate {
    Faer,
    Gemm,
}

impl F32Crate {
    /// faer when the left operand `a` is row-major with at least [`FAER_MIN_ROWS`] rows, or
    /// transposed with at least [`FAER_MIN_ROWS_TRANSPOSED`], and the process has no
    /// address-space limit; the gemm crate otherwise. The rule follows which crate's kernels
    /// were faster on each shape of the bench step (the encoder's tall `x·W` and `G·Wᵀ`, the
    /// MLM decoder's `∂E = Gᵀ·x`: faer; the weight gradients `xᵀ·G` and the decoder's short,
    /// wide `x·Eᵀ`: gemm; BENCHMARKS.md). A part of a product (rows or columns of `dst` handed
    /// to another thread) is multiplied by the crate chosen for the whole, so that its sums are
    /// the whole product's.
    pub fn for_left(a: &View) -> Self {
        let min_rows = if a.cs == 1 {
            FAER_MIN_ROWS
        } else {
            FAER_MIN_ROWS_TRANSPOSED
        };
        // faer's x86 kernels keep a packing buffer of twice the L3 cache in each thread that
        // runs them, reserved whole though mostly never touched: 520 MiB a thread on a Xeon
        // with 260 MiB of L3. An address-space limit counts it, so under one every product
        // takes the gemm crate's kernels, which size their buffers to the product.
        if a.rows >= min_rows && !crate::memory::address_space_limited() {
            F32Crate::Faer
        } else {
            F32Crate::Gemm
        }
    }
}

/// `dst = [dst +] scale · a · b` on `threads` of rayon's threads (0 or 1: the calling thread),
/// through `krate`'s kernels. Both crates split a product over tiles of `dst`, never over the
/// inner dimension (results do not depend on the thread count), and neither reads `dst` when it
/// does not accumulate (both checked in `tests/suite/kernels.rs`).
pub(super) unsafe fn call(
    dst: ViewMut,
    a: View,
    b: View,
    accumulate: bool,
    scale: f32,
    threads: usize,
    krate: F32Crate,
) {
    assert_eq!(a.cols, b.rows, "inner dimensions");
    assert_eq!((dst.rows, dst.cols), (a.rows, b.cols), "output shape");
    if krate == F32Crate::Faer {
        use faer::mat::{MatMut, MatRef};
        let par = match threads {
            0 | 1 => faer::Par::Seq,
            n => faer::Par::rayon(n),
        };
        let accum = if accumulate {
            faer::Accum::Add
        } else {
            faer::Accum::Replace
        };
        // SAFETY: the caller's (views over valid memory, `dst` disjoint from `a` and `b`); the
        // strides are the views' own.
        unsafe {
            let a = MatRef::<f32>::from_raw_parts(a.ptr, a.rows, a.cols, a.rs, a.cs);
            let b = MatRef::<f32>::from_raw_parts(b.ptr, b.rows, b.cols, b.rs, b.cs);
            let dst =
                MatMut::<f32>::from_raw_parts_mut(dst.ptr, dst.rows, dst.cols, dst.rs, dst.cs);
            faer::linalg::matmul::matmul(dst, accum, a, b, scale, par);
        }
        return;
    }
    let parallelism = match threads {
        0 | 1 => gemm::Parallelism::None,
        n => gemm::Parallelism::Rayon(n),
    };
    // The gemm crate's convention: `dst = alpha · dst + beta · a · b`, `dst` read only when
    // accumulating.
    unsafe {
        gemm::gemm(
            dst.rows,
            dst.cols,
            a.cols,
            dst.ptr,
            dst.cs,
            dst.rs,
            accumulate,
            a.ptr,
            a.cs,
            a.rs,
            b.ptr,
            b.cs,
            b.rs,
            1.0,
            scale,
            false,
            false,
            false,
            parallelism,
        );
    }
}
