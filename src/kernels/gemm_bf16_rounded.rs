//! bf16 products on CPUs without AVX-512 BF16: each operand rounded to bf16 (round to nearest
//! even, kept as the f32 value of the bf16) into a compact copy, which the f32 crates then
//! multiply (`gemm_f32::call`, by the crate chosen for the product's shape).
//!
//! The product of two bf16 values is exact in f32, so this is the arithmetic of
//! `kernels::gemm_bf16` — bf16 operands, f32 sums — up to the order of the sums: a run with
//! `--precision bf16` computes the same thing on every CPU, at about f32 speed where the CPU has
//! no bf16 instructions (the rounded copy is the cost).

use std::mem::MaybeUninit;

use multiversion::multiversion;
use rayon::prelude::*;

use super::bf16_pack::{from_bf16, to_bf16};
use super::buffers::{PARALLEL_FILL, filled_by};
use super::gemm_f32::F32Crate;
use super::views::{View, ViewMut};

/// `dst = [dst +] scale · a · b` with `a` and `b` rounded to bf16 and f32 sums, on `threads` of
/// rayon's threads through `krate`'s kernels: `kernels::gemm_bf16::product`'s arithmetic on any
/// CPU. `gemm::Route` gives the crate chosen for the whole product (a part of it multiplies
/// through the whole's); the rounded copies keep the operands' layouts (row- or column-major),
/// so the crate chosen for `a` is the one chosen for its copy.
///
/// # Safety
/// Every view points at memory valid for its extent, and `dst` overlaps neither `a` nor `b`
/// and is not written by another thread meanwhile.
pub unsafe fn product(
    dst: ViewMut,
    a: View,
    b: View,
    accumulate: bool,
    scale: f32,
    threads: usize,
    krate: F32Crate,
) {
    // SAFETY: the caller's; the rounded copies live through the product.
    unsafe {
        with_rounded(&a, threads, |a| {
            with_rounded(&b, threads, |b| {
                super::gemm_f32::call(dst, a, b, accumulate, scale, threads, krate)
            })
        })
    }
}

/// `f(v')`, `v'` a view of `v`'s values rounded to bf16 in a buffer of its own: row-major, or
/// column-major where `v`'s columns are contiguous (so that the copy reads `v` in order), the
/// copy written once (not zeroed first) on `threads` of rayon's threads when it is large.
///
/// # Safety
/// `v` points at memory valid for its extent, not written meanwhile.
unsafe fn with_rounded<R>(v: &View, threads: usize, f: impl FnOnce(View) -> R) -> R {
    let by_columns = v.rs == 1 && v.cs != 1;
    // The copy's lines: `v`'s rows, or its columns where they are contiguous.
    let (lines, len, line_stride, step) = if by_columns {
        (v.cols, v.rows, v.cs, v.rs)
    } else {
        (v.rows, v.cols, v.rs, v.cs)
    };
    let width = len.max(1);
    let fill = |first: usize, out: &mut [MaybeUninit<f32>]| {
        for (i, line) in out.chunks_mut(width).enumerate() {
            let from = (first + i) as isize * line_stride;
            // SAFETY: the caller's; line `first + i` of `v` holds `len` values `step` apart.
            unsafe { round_line(v.ptr.offset(from), step, line) };
        }
    };
    // Whole lines per task, about PARALLEL_FILL values.
    let per = (PARALLEL_FILL / width).max(1);
    // SAFETY: the tasks' chunks are whole lines and cover the buffer; `round_line` writes each
    // line whole.
    let (copy, ()) = unsafe {
        filled_by(lines * len, |copy| {
            if threads > 1 && lines * len > PARALLEL_FILL {
                copy.par_chunks_mut(per * width)
                    .enumerate()
                    .for_each(|(c, out)| fill(c * per, out));
            } else {
                copy.chunks_mut(per * width)
                    .enumerate()
                    .for_each(|(c, out)| fill(c * per, out));
            }
        })
    };
    let view = if by_columns {
        View::rows(&copy, 0, v.cols, v.rows, v.rows).t()
    } else {
        View::rows(&copy, 0, v.rows, v.cols, v.cols)
    };
    f(view)
}

/// `out[j]` = the value `step · j` after `from`, rounded to bf16 (every element written).
///
/// # Safety
/// `from` points at `out.len()` values `step` apart.
unsafe fn round_line(from: *const f32, step: isize, out: &mut [MaybeUninit<f32>]) {
    if step == 1 {
        // SAFETY: the caller's: the values are contiguous.
        let line = unsafe { std::slice::from_raw_parts(from, out.len()) };
        round_contiguous(line, out);
        return;
    }
    for (j, o) in out.iter_mut().enumerate() {
        // SAFETY: the caller's.
        o.write(from_bf16(to_bf16(unsafe {
            *from.offset(j as isize * step)
        })));
    }
}

/// `out[j]` = `line[j]` rounded to bf16 (a loop the compiler vectorises).
#[multiversion(targets = "simd")]
fn round_contiguous(line: &[f32], out: &mut [MaybeUninit<f32>]) {
    for (o, &x) in out.iter_mut().zip(line) {
        o.write(from_bf16(to_bf16(x)));
    }
}
