//! GFLOP/s of the matrix products of the CPU bench step (bench spec: 16 × 128 tokens, hidden
//! 256, FFN 1024, 304 masked positions, vocabulary 30522), each in the operand layout the
//! `Linear` kernel uses forward (`x·W`) and backward (`G·Wᵀ`, `xᵀ·G`), through
//! `kernels::gemm::product_into` on rayon's threads. Best of `REPEATS` calls on warm buffers, so
//! an upper bound on what the step gets. `scripts/torch_product_rates.py` times the same shapes
//! with PyTorch's `torch.mm`.
//!
//! Then each layer's backward pair (`G·Wᵀ` and `xᵀ·G`, the same size) two ways: one after the
//! other on all threads, and both at once as the `Linear` kernel's backward runs them
//! (`kernels::linear::grad_input_and_weight`).
//!
//!     cargo run --release --example product_rates            # RAYON_NUM_THREADS=1 for one core

use std::time::Instant;

use trueneg::kernels::Products;
use trueneg::kernels::gemm::{ViewMut, product_into};
use trueneg::kernels::linear;

const REPEATS: usize = 8;

#[path = "common/product_shapes.rs"]
mod product_shapes;
use product_shapes::{SHAPES, operand};

fn main() {
    println!("threads={}", rayon::current_num_threads());
    let mut total_s = 0.0;
    let mut total_flop = 0.0;
    for (name, m, k, n, at, bt) in SHAPES {
        let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 * 0.1).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 * 0.1).collect();
        let mut c = vec![0f32; m * n];
        let mut best = f64::MAX;
        for _ in 0..REPEATS {
            let start = Instant::now();
            // Safety: the views cover exactly the three buffers, which nothing else touches.
            unsafe {
                product_into(
                    ViewMut::rows(&mut c, 0, m, n, n),
                    operand(&a, m, k, at),
                    operand(&b, k, n, bt),
                    false,
                    Products::F32,
                )
            };
            best = best.min(start.elapsed().as_secs_f64());
        }
        let flop = 2.0 * (m * k * n) as f64;
        total_s += best;
        total_flop += flop;
        println!(
            "{name:28} {m:5}x{k:5}x{n:5}  {:6.1} GFLOP/s",
            flop / best / 1e9
        );
    }
    println!("all shapes once: {:.1} GFLOP/s", total_flop / total_s / 1e9);
    // The backward pairs of the shapes' four layers (the MLM decoder's weight is `[out, in]`).
    for i in (0..SHAPES.len()).step_by(3) {
        let (name, rows, inp, out, _, transposed) = SHAPES[i];
        backward_pair(name, rows, inp, out, transposed);
    }
}

/// GFLOP/s of a `Linear`'s backward pair through the kernel's own functions (`∂x = G·Wᵀ`,
/// `∂W = xᵀ·G`, or `Gᵀ·x` for a `transposed` weight stored `[out, inp]`) for `x` `[rows, inp]`:
/// in turn on all threads (`kernels::linear::grad_input`, `BackwardProducts::grad_weight`), and
/// at once as the kernel's backward runs them (`kernels::linear::grad_input_and_weight`: half
/// the threads each, `∂W` in parts that whichever half is free takes). Best of `REPEATS`.
fn backward_pair(name: &str, rows: usize, inp: usize, out: usize, transposed: bool) {
    let x: Vec<f32> = (0..rows * inp).map(|i| (i % 7) as f32 * 0.1).collect();
    let g: Vec<f32> = (0..rows * out).map(|i| (i % 5) as f32 * 0.1).collect();
    let w: Vec<f32> = (0..inp * out).map(|i| (i % 3) as f32 * 0.1).collect();
    let (xv, gv) = (operand(&x, rows, inp, false), operand(&g, rows, out, false));
    // W as `[inp, out]`, whichever way it is stored.
    let wv = operand(&w, inp, out, transposed);
    let products = linear::BackwardProducts::new(xv, gv, wv, transposed, Products::F32);
    let all = rayon::current_num_threads();
    let (mut in_turn, mut at_once) = (f64::MAX, f64::MAX);
    for _ in 0..REPEATS {
        let start = Instant::now();
        let pair = (
            linear::grad_input(gv, wv, all, Products::F32),
            products.grad_weight(all),
        );
        in_turn = in_turn.min(start.elapsed().as_secs_f64());
        drop(pair);
        let start = Instant::now();
        let pair = linear::grad_input_and_weight(products);
        at_once = at_once.min(start.elapsed().as_secs_f64());
        drop(pair);
    }
    let flop = 4.0 * (rows * inp * out) as f64;
    println!(
        "{:28} backward pair: in turn {:6.1}, at once {:6.1} GFLOP/s",
        name.split(" x").next().unwrap_or(name),
        flop / in_turn / 1e9,
        flop / at_once / 1e9
    );
}
