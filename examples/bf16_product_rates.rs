//! GFLOP/s of the CPU bench step's matrix products in f32 (`kernels::gemm`) and with bf16
//! operands and f32 sums (`kernels::gemm_bf16`, on CPUs with AVX-512 BF16), the two alternating,
//! best of `REPEATS` calls on warm buffers, with the largest difference between the two results
//! relative to the largest f32 value.
//!
//!     cargo run --release --example bf16_product_rates

use std::time::Instant;

use trueneg::kernels::Products::F32;
use trueneg::kernels::gemm::{ViewMut, product_into};
use trueneg::kernels::gemm_bf16;

const REPEATS: usize = 8;

#[path = "common/product_shapes.rs"]
mod product_shapes;
use product_shapes::{SHAPES, operand};

fn main() {
    if !gemm_bf16::available() {
        println!("this CPU has no AVX-512 BF16");
        return;
    }
    let threads = rayon::current_num_threads();
    println!("threads={threads}");
    let (mut f32_s, mut bf16_s, mut flops) = (0.0, 0.0, 0.0);
    // The encoder's nine shapes, then the MLM decoder's three.
    for (name, m, k, n, at, bt) in SHAPES {
        let a: Vec<f32> = (0..m * k)
            .map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5)
            .collect();
        let b: Vec<f32> = (0..k * n)
            .map(|i| ((i * 104729) % 1000) as f32 / 1000.0 - 0.5)
            .collect();
        let (mut c32, mut c16) = (vec![0f32; m * n], vec![0f32; m * n]);
        let (mut best32, mut best16) = (f64::MAX, f64::MAX);
        for _ in 0..REPEATS {
            let (x, y) = (operand(&a, m, k, at), operand(&b, k, n, bt));
            let start = Instant::now();
            // Safety: the views cover exactly the buffers, which nothing else touches.
            unsafe { product_into(ViewMut::rows(&mut c32, 0, m, n, n), x, y, false, F32) };
            best32 = best32.min(start.elapsed().as_secs_f64());
            let start = Instant::now();
            // Safety: as above; the CPU has the instructions (checked).
            unsafe {
                gemm_bf16::product(
                    ViewMut::rows(&mut c16, 0, m, n, n),
                    x,
                    y,
                    false,
                    1.0,
                    threads,
                )
            };
            best16 = best16.min(start.elapsed().as_secs_f64());
        }
        let flop = 2.0 * (m * k * n) as f64;
        let top = c32.iter().fold(0f32, |t, x| t.max(x.abs()));
        let diff = c32
            .iter()
            .zip(&c16)
            .fold(0f32, |t, (x, y)| t.max((x - y).abs()));
        (f32_s, bf16_s, flops) = (f32_s + best32, bf16_s + best16, flops + flop);
        println!(
            "{name:28} {m:5}x{k:5}x{n:5}  f32 {:6.1}  bf16 {:6.1} GFLOP/s  ({:.2}x, max diff {:.1e} of {top:.1})",
            flop / best32 / 1e9,
            flop / best16 / 1e9,
            best32 / best16,
            diff / top
        );
    }
    println!(
        "all shapes once: f32 {:.1}, bf16 {:.1} GFLOP/s",
        flops / f32_s / 1e9,
        flops / bf16_s / 1e9
    );
}
