//! The bf16 matrix products: the rounding to bf16, and the products against a float64
//! reference of the bf16-rounded operands, in every operand layout, with odd sizes,
//! accumulation and scaling, into row- and column-major destinations, the same on one thread
//! and two. Both kernels: `kernels::gemm_bf16` where the CPU has AVX-512 BF16 (Zen 4, Sapphire
//! Rapids and later; elsewhere the tests say so and skip it), and `kernels::gemm_bf16_rounded`
//! (the f32 crates on rounded operands) on every CPU.

use trueneg::kernels::gemm::{F32Crate, View, ViewMut};
use trueneg::kernels::gemm_bf16::{available, from_bf16, product_onto_rows, to_bf16};
use trueneg::kernels::{gemm_bf16, gemm_bf16_rounded};

/// A bf16 product's signature: `dst = [dst +] scale · a · b` on `threads` threads.
type Product = unsafe fn(ViewMut, View, View, bool, f32, usize);

/// The bf16 kernels this CPU runs, by name.
fn kernels() -> Vec<(&'static str, Product)> {
    // `gemm_bf16_rounded::product` through the f32 crate chosen for `a`, as `gemm::Route`
    // gives it for a whole product.
    let rounded: Product = |dst, a, b, accumulate, scale, threads| {
        let krate = F32Crate::for_left(&a);
        // SAFETY: the caller's.
        unsafe { gemm_bf16_rounded::product(dst, a, b, accumulate, scale, threads, krate) }
    };
    let mut all: Vec<(&'static str, Product)> = vec![("rounded", rounded)];
    if available() {
        all.push(("avx512-bf16", gemm_bf16::product));
    } else {
        println!("this CPU has no AVX-512 BF16: `gemm_bf16` is not checked here");
    }
    all
}

#[test]
fn rounding_to_bf16_is_to_nearest_even_and_keeps_nan_and_infinity() {
    let bits = |x: u32| to_bf16(f32::from_bits(x));
    assert_eq!(to_bf16(1.0), 0x3f80);
    assert_eq!(
        bits(0x3f80_8000),
        0x3f80,
        "a tie goes to the even neighbour"
    );
    assert_eq!(
        bits(0x3f81_8000),
        0x3f82,
        "a tie goes to the even neighbour"
    );
    assert_eq!(bits(0x3f80_8001), 0x3f81, "above the tie rounds up");
    assert_eq!(bits(0x3f80_7fff), 0x3f80, "below the tie rounds down");
    assert_eq!(to_bf16(f32::INFINITY), 0x7f80);
    assert_eq!(
        to_bf16(f32::MAX),
        0x7f80,
        "the largest float rounds to infinity"
    );
    assert!(
        from_bf16(bits(0x7f80_0001)).is_nan(),
        "a NaN with low payload stays a NaN"
    );
    assert!(from_bf16(to_bf16(f32::NAN)).is_nan());
    assert_eq!(from_bf16(to_bf16(-2.5)), -2.5);
}

/// A `rows × cols` operand over `data`: row-major, its transpose's storage, or every other
/// element of a row-major buffer twice as wide (neither stride 1).
fn view(data: &[f32], rows: usize, cols: usize, layout: u8) -> View {
    match layout {
        0 => View::rows(data, 0, rows, cols, cols),
        1 => View::rows(data, 0, cols, rows, rows).t(),
        _ => View {
            ptr: data.as_ptr(),
            rows,
            cols,
            rs: 2 * cols as isize,
            cs: 2,
        },
    }
}

/// `c` as an `m × n` destination stored column by column.
fn column_major(c: &mut [f32], m: usize, n: usize) -> ViewMut {
    assert_eq!(c.len(), m * n, "column-major destination size");
    ViewMut {
        ptr: c.as_mut_ptr(),
        rows: m,
        cols: n,
        rs: 1,
        cs: m as isize,
    }
}

/// `column` (an `m × n` matrix stored column by column) holds bit for bit what `rows` (stored
/// row by row) holds.
fn assert_transposed(column: &[f32], rows: &[f32], m: usize, n: usize, case: &str) {
    for i in 0..m {
        for j in 0..n {
            assert_eq!(
                column[j * m + i].to_bits(),
                rows[i * n + j].to_bits(),
                "{case}: a column-major destination at ({i}, {j})"
            );
        }
    }
}

fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7919 + seed * 104_729) % 2001) as f32 / 1000.0 - 1.0)
        .collect()
}

#[test]
fn bf16_products_match_the_rounded_operands_in_every_layout() {
    for (name, product) in kernels() {
        products_match_the_rounded_operands(name, product);
    }
}

fn products_match_the_rounded_operands(name: &str, product: Product) {
    for (m, k, n) in [
        (37, 65, 45),
        (8, 1, 33),
        (29, 600, 70),
        (3, 2, 1),
        (40, 71, 64),
        // Wider than a column chunk: two chunks, the second partial.
        (17, 40, 1100),
        // More row blocks than are packed at once, on each thread, the last one partial;
        // two blocks of the inner dimension.
        (250, 530, 40),
    ] {
        for (la, lb) in [(0, 0), (1, 0), (0, 1), (1, 1), (2, 2)] {
            let a = values(m * k * 2, 1);
            let b = values(k * n * 2, 2);
            let (av, bv) = (view(&a, m, k, la), view(&b, k, n, lb));
            let get = |v: &View, r: usize, c: usize| unsafe {
                from_bf16(to_bf16(
                    *v.ptr.offset(r as isize * v.rs + c as isize * v.cs),
                )) as f64
            };
            let base = values(m * n, 3);
            let mut want = vec![0f64; m * n];
            for i in 0..m {
                for j in 0..n {
                    let s: f64 = (0..k).map(|p| get(&av, i, p) * get(&bv, p, j)).sum();
                    want[i * n + j] = base[i * n + j] as f64 + 0.5 * s;
                }
            }
            let mut got = Vec::new();
            for threads in [1, 2] {
                let mut c = base.clone();
                // SAFETY: the views cover their buffers; `c` is separate.
                unsafe {
                    product(
                        ViewMut::rows(&mut c, 0, m, n, n),
                        av,
                        bv,
                        true,
                        0.5,
                        threads,
                    )
                };
                got.push(c);
            }
            assert_eq!(
                got[0], got[1],
                "{name} {m}x{k}x{n}: one thread and two differ"
            );
            // A destination stored column by column gets the same sums.
            let mut c = vec![0f32; m * n];
            for i in 0..m {
                for j in 0..n {
                    c[j * m + i] = base[i * n + j];
                }
            }
            // SAFETY: the view covers `c`, which is separate from the operands.
            unsafe { product(column_major(&mut c, m, n), av, bv, true, 0.5, 2) };
            assert_transposed(&c, &got[0], m, n, &format!("{name} {m}x{k}x{n}"));
            for (g, w) in got[0].iter().zip(&want) {
                let tol = 1e-5 * (1.0 + w.abs()) * (k as f64).sqrt();
                assert!(
                    (*g as f64 - w).abs() <= tol,
                    "{name} {m}x{k}x{n} layouts {la}{lb}: {g} vs {w}"
                );
            }
            // Without accumulation `dst` is not read: NaNs there do not reach the result.
            let mut c = vec![f32::NAN; m * n];
            // SAFETY: as above.
            unsafe { product(ViewMut::rows(&mut c, 0, m, n, n), av, bv, false, 1.0, 2) };
            assert!(c.iter().all(|x| x.is_finite()), "{name} {m}x{k}x{n}");
        }
    }
}

#[test]
fn a_bias_added_as_the_sums_are_stored_is_the_product_onto_bias_rows() {
    if !available() {
        println!("this CPU has no AVX-512 BF16: the products are not checked here");
        return;
    }
    // Narrow, two blocks of the inner dimension, and wider than a column chunk.
    for (m, k, n) in [(19, 33, 45), (30, 600, 70), (17, 40, 1100)] {
        for (la, lb) in [(0, 0), (1, 1), (2, 2)] {
            let a = values(m * k * 2, 4);
            let b = values(k * n * 2, 5);
            let bias = values(n, 6);
            let (av, bv) = (view(&a, m, k, la), view(&b, k, n, lb));
            let mut want: Vec<f32> = (0..m).flat_map(|_| bias.iter().copied()).collect();
            // SAFETY (both): the views cover their buffers; the destinations are separate.
            unsafe {
                gemm_bf16::product(ViewMut::rows(&mut want, 0, m, n, n), av, bv, true, 1.0, 2)
            };
            let mut got = vec![f32::NAN; m * n];
            unsafe { product_onto_rows(ViewMut::rows(&mut got, 0, m, n, n), av, bv, &bias, 2) };
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "{m}x{k}x{n} layouts {la}{lb}");
            // Into a column-major destination, through the kernel's buffered stores.
            let mut c = vec![f32::NAN; m * n];
            // SAFETY: the view covers `c`, which is separate from the operands.
            unsafe { product_onto_rows(column_major(&mut c, m, n), av, bv, &bias, 1) };
            assert_transposed(&c, &want, m, n, &format!("{m}x{k}x{n}"));
        }
    }
}

use crate::common;
use burn::prelude::*;
use common::{assert_close, leaf, random, vec_of};

/// `v` rounded to bf16 and back.
fn rounded(v: Vec<f32>) -> Vec<f32> {
    v.into_iter().map(|x| from_bf16(to_bf16(x))).collect()
}

#[test]
fn the_linear_kernel_with_bf16_products_is_the_f32_one_on_rounded_operands() {
    // On every CPU: through `gemm_bf16` where it has AVX-512 BF16, the rounded operands
    // otherwise.
    use trueneg::kernels::{Products, linear};
    let device = Device::flex().autodiff();
    let d_in = 40;
    // A weight [in, out], and one stored [out, in] (the MLM decoder's tied embeddings).
    for (rows, d_out, as_rows) in [(70, 33, false), (50, 300, true)] {
        let stored = if as_rows {
            [d_out, d_in]
        } else {
            [d_in, d_out]
        };
        let (xv, wv) = (random(&[rows, d_in], 1), random(&[d_in, d_out], 2));
        let (bv, gv) = (random(&[d_out], 3), random(&[rows, d_out], 4));
        let case = |bf16: bool| {
            let round = |v: &Vec<f32>| if bf16 { v.clone() } else { rounded(v.clone()) };
            let x = leaf(round(&xv), [rows, d_in], &device);
            let w = leaf(round(&wv), stored, &device);
            let b = leaf(bv.clone(), [d_out], &device);
            let g = Tensor::<2>::from_data(TensorData::new(round(&gv), [rows, d_out]), &device);
            let y = match (bf16, as_rows) {
                (true, true) => {
                    linear::fused_call(x.clone(), w.clone(), b.clone(), true, Products::Bf16)
                }
                (true, false) => {
                    linear::fused_call(x.clone(), w.clone(), b.clone(), false, Products::Bf16)
                }
                (false, true) => {
                    x.clone().matmul(w.clone().transpose()) + b.clone().unsqueeze::<2>()
                }
                (false, false) => x.clone().matmul(w.clone()) + b.clone().unsqueeze::<2>(),
            };
            let grads = (y.clone() * g).sum().backward();
            [
                vec_of(y),
                vec_of(x.grad(&grads).unwrap()),
                vec_of(w.grad(&grads).unwrap()),
                vec_of(b.grad(&grads).unwrap()),
            ]
        };
        let (got, mut want) = (case(true), case(false));
        // The bias gradient sums the gradient as it is: no product, nothing rounded.
        want[3] = (0..d_out)
            .map(|j| (0..rows).map(|i| gv[i * d_out + j]).sum())
            .collect();
        for (name, (g, w)) in ["y", "dx", "dw", "db"].iter().zip(got.iter().zip(&want)) {
            assert_close(
                &format!("{name} ({rows}x{d_out}, [out, in] {as_rows})"),
                g,
                w,
                1e-4,
            );
        }
    }
}
