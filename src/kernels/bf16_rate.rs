//! Whether bf16 products pay on this CPU: their rate against the f32 products', measured once
//! per process at one of the encoder's shapes.
//!
//! AVX-512 BF16 alone does not make bf16 faster. On AMD Zen 4 and Zen 5 `vdpbf16ps` runs at
//! about twice the f32 FMA rate; on Intel's Sapphire and Emerald Rapids without AMX it issues
//! on one port where FMA issues on two, so bf16 products run at ~0.6× f32's (BENCHMARKS.md:
//! PyTorch's oneDNN shows the same). `--precision auto` asks this, not the CPU flag.

use std::sync::OnceLock;
use std::time::Instant;

use super::Products;
use super::gemm::{View, ViewMut, product_into};
use super::gemm_bf16;

/// bf16 must run at least this much faster than f32 to be chosen: below it, the measurement's
/// noise and the step's f32 work outside the products leave no gain worth the rounding.
pub const PAYS_FROM: f64 = 1.2;

/// The shape timed: the FFN's first product of the CPU bench step, `[2048, 256] · [256, 1024]`
/// (about 1 GFLOP: a few milliseconds each way).
const M: usize = 2048;
const K: usize = 256;
const N: usize = 1024;

/// Alternating pairs timed; the best time of each side counts.
const PAIRS: usize = 4;

/// bf16's product rate over f32's on this CPU (`None`: no AVX-512 BF16, so no bf16 kernel),
/// measured on the first call and remembered.
pub fn speedup() -> Option<f64> {
    static MEASURED: OnceLock<Option<f64>> = OnceLock::new();
    *MEASURED.get_or_init(|| gemm_bf16::available().then(measure))
}

fn measure() -> f64 {
    let a: Vec<f32> = (0..M * K)
        .map(|i| ((i * 7919) % 1000) as f32 / 1e3 - 0.5)
        .collect();
    let b: Vec<f32> = (0..K * N)
        .map(|i| ((i * 104729) % 1000) as f32 / 1e3 - 0.5)
        .collect();
    let mut c = vec![0f32; M * N];
    let (mut f32_best, mut bf16_best) = (f64::MAX, f64::MAX);
    // The first pair warms the thread pool and the caches, and is not counted.
    for pair in 0..=PAIRS {
        for products in [Products::F32, Products::Bf16] {
            let (x, y) = (View::rows(&a, 0, M, K, K), View::rows(&b, 0, K, N, N));
            let start = Instant::now();
            // SAFETY: the views cover exactly their buffers, which nothing else touches; the
            // bf16 kernel runs only where `available` said the CPU has its instructions.
            unsafe { product_into(ViewMut::rows(&mut c, 0, M, N, N), x, y, false, products) };
            let took = start.elapsed().as_secs_f64();
            let best = match products {
                Products::F32 => &mut f32_best,
                Products::Bf16 => &mut bf16_best,
            };
            if pair > 0 {
                *best = best.min(took);
            }
        }
    }
    f32_best / bf16_best.max(f64::MIN_POSITIVE)
}

/// Whether bf16 products at `speedup` × f32's rate pay ([`PAYS_FROM`]).
pub fn pays(speedup: f64) -> bool {
    speedup >= PAYS_FROM
}
