//! Strided matrix products: single-threaded for the many small products that a kernel runs in
//! parallel itself (one per head), on rayon's threads for the large products of a layer's
//! weights. Each product goes to the faster of two crates for its shape (`gemm_f32::call`): the
//! `gemm` crate burn's CPU backend uses, or `faer`'s own x86 kernels.

use super::gemm_f32::call;
pub use super::gemm_f32::{F32Crate, FAER_MIN_ROWS, FAER_MIN_ROWS_TRANSPOSED};
pub use super::views::{View, ViewMut};

/// How a product multiplies: in f32, or with its operands rounded to bf16 and f32 sums
/// (`kernels::gemm_bf16` on CPUs with AVX-512 BF16, `kernels::gemm_bf16_rounded` on others).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Products {
    #[default]
    F32,
    Bf16,
}

impl Products {
    /// Whether a product of left operand `a` runs in bf16: asked for, and `a` is row-major or
    /// transposed (the weight gradients `xᵀ·G`); other strides stay f32. On every CPU: where
    /// it has no AVX-512 BF16 the operands are rounded first (`gemm_bf16_rounded`).
    fn in_bf16(self, a: &View) -> bool {
        self == Products::Bf16 && (a.cs == 1 || a.rs == 1)
    }
}

/// The kernels that multiply a product, chosen once from its whole left operand and how it
/// multiplies ([`Route::new`]): a part of the product (rows or columns of `dst` that another
/// thread takes) runs on the whole product's kernels, so its sums are the whole product's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// The f32 crates.
    F32(F32Crate),
    /// `kernels::gemm_bf16`, on CPUs with AVX-512 BF16.
    Bf16,
    /// The f32 crates on operands rounded to bf16 (`kernels::gemm_bf16_rounded`).
    Bf16Rounded(F32Crate),
}

impl Route {
    /// The route of a product of left operand `a`, multiplied as `products` says: the one
    /// place that picks the bf16 kernel ([`Products::in_bf16`]; where the CPU has no AVX-512
    /// BF16, the f32 crates on operands rounded to bf16) or the f32 crates.
    pub fn new(a: &View, products: Products) -> Self {
        let krate = F32Crate::for_left(a);
        if !products.in_bf16(a) {
            Route::F32(krate)
        } else if super::gemm_bf16::available() {
            Route::Bf16
        } else {
            Route::Bf16Rounded(krate)
        }
    }
}

/// `dst = a · b` (`accumulate`: `dst += a · b`), on all of rayon's threads, multiplied as
/// `products` says: for the large products of a layer's weights (the split is over rows and
/// columns of `dst`, never over the inner dimension, so the result does not depend on the
/// thread count).
///
/// # Safety
/// As [`product`].
pub unsafe fn product_into(dst: ViewMut, a: View, b: View, accumulate: bool, products: Products) {
    let threads = rayon::current_num_threads();
    // SAFETY: the caller's.
    unsafe {
        multiply(
            dst,
            a,
            b,
            accumulate,
            1.0,
            threads,
            Route::new(&a, products),
        )
    }
}

/// `dst = [dst +] scale · a · b` on `threads` of rayon's threads, through `route`'s kernels.
///
/// # Safety
/// As [`product`].
unsafe fn multiply(
    dst: ViewMut,
    a: View,
    b: View,
    accumulate: bool,
    scale: f32,
    threads: usize,
    route: Route,
) {
    // SAFETY: the caller's; `Route::Bf16` only where the CPU has the instructions.
    unsafe {
        match route {
            Route::F32(krate) => call(dst, a, b, accumulate, scale, threads, krate),
            Route::Bf16 => super::gemm_bf16::product(dst, a, b, accumulate, scale, threads),
            Route::Bf16Rounded(krate) => {
                super::gemm_bf16_rounded::product(dst, a, b, accumulate, scale, threads, krate)
            }
        }
    }
}

/// `dst = a · b` on `threads` of rayon's threads (one: the calling thread), through `route`'s
/// kernels; `dst` is not read. A part of a product (rows or columns of its `dst`, with the
/// operands' matching rows or columns) takes the whole product's route, `Route::new` of the
/// whole left operand, so that its sums are the whole product's.
///
/// # Safety
/// As [`product`].
pub unsafe fn product_into_on(dst: ViewMut, a: View, b: View, threads: usize, route: Route) {
    // SAFETY: the caller's.
    unsafe { multiply(dst, a, b, false, 1.0, threads, route) }
}

/// `a · b` as a fresh row-major `[a.rows, b.cols]` buffer, on `threads` threads, multiplied as
/// `products` says, not zeroed first (the bf16 kernel writes every element of a product that
/// does not accumulate too): the gemm crate (0.19) does not read the destination of a product that does not
/// accumulate (`read_dst = false` sets its α to zero, and each of its paths then writes
/// `β · a · b`, or zeros when the inner dimension is empty, without loading `dst`), nor does
/// faer (0.24) with `Accum::Replace`. `tests/suite/kernels.rs` checks that on NaN-filled
/// destinations for each of those paths, through both crates.
///
/// # Safety
/// `a` and `b` must point at memory valid for their extents, not written meanwhile.
pub unsafe fn product_new(a: View, b: View, threads: usize, products: Products) -> Vec<f32> {
    let (rows, cols) = (a.rows, b.cols);
    // SAFETY: the product writes every element of its own fresh destination (above).
    let (v, ()) = unsafe {
        super::buffers::filled_by(rows * cols, |dst| {
            let dst = ViewMut::uninit(dst, rows, cols);
            multiply(dst, a, b, false, 1.0, threads, Route::new(&a, products))
        })
    };
    v
}

/// `bias + a · b` (`bias` added to every row) as a fresh row-major `[a.rows, b.cols]` buffer,
/// on all of rayon's threads, multiplied as `products` says: the bf16 kernel adds the bias as
/// it stores its sums (the buffer is written once); the f32 crates accumulate onto rows filled
/// with it first.
///
/// # Safety
/// As [`product_new`].
pub unsafe fn product_onto_rows(a: View, b: View, bias: &[f32], products: Products) -> Vec<f32> {
    let (rows, cols) = (a.rows, b.cols);
    assert_eq!(bias.len(), cols, "bias width");
    let threads = rayon::current_num_threads();
    let route = Route::new(&a, products);
    if route == Route::Bf16 {
        // SAFETY: the bf16 kernel writes every element of a product onto a bias row (the
        // buffer is not read); the CPU has the instructions.
        let (v, ()) = unsafe {
            super::buffers::filled_by(rows * cols, |dst| {
                let dst = ViewMut::uninit(dst, rows, cols);
                super::gemm_bf16::product_onto_rows(dst, a, b, bias, threads)
            })
        };
        return v;
    }
    let mut y = super::buffers::repeated_rows(bias, rows);
    let dst = ViewMut::rows(&mut y, 0, rows, cols, cols);
    // SAFETY: the caller's; `y` holds rows × cols elements and is only this call's.
    unsafe { multiply(dst, a, b, true, 1.0, threads, route) };
    y
}

/// Two independent jobs at once, each given its share of rayon's threads (`first(n)` and
/// `second(n)` run with `n` threads each; on one thread, one after the other).
///
/// Two products of equal size each on half the threads beat the two in turn on all of them:
/// a multi-threaded product meets its threads twice per block of the inner dimension (packing,
/// then the tiles), and on two threads each of those meetings waits for the slower one.
pub fn in_halves<A: Send, B: Send>(
    first: impl FnOnce(usize) -> A + Send,
    second: impl FnOnce(usize) -> B + Send,
) -> (A, B) {
    let threads = rayon::current_num_threads();
    if threads < 2 {
        return (first(1), second(1));
    }
    let half = threads / 2;
    rayon::join(|| first(half), || second(threads - half))
}

/// `dst = scale · a · b` on the calling thread, multiplied as `products` says (the per-head
/// products a kernel runs in parallel itself, one per head).
///
/// # Safety
/// As [`product`].
pub unsafe fn product_as(dst: ViewMut, a: View, b: View, scale: f32, products: Products) {
    // SAFETY: the caller's.
    unsafe { multiply(dst, a, b, false, scale, 1, Route::new(&a, products)) }
}

/// `dst = scale · a · b`, single-threaded.
///
/// # Safety
/// Every view must point at memory valid for its extent, and `dst` must not overlap `a` or `b`
/// nor be written by another thread meanwhile.
pub unsafe fn product(dst: ViewMut, a: View, b: View, scale: f32) {
    let krate = F32Crate::for_left(&a);
    unsafe { call(dst, a, b, false, scale, 1, krate) }
}
