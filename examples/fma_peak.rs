//! The CPU's f32 fused multiply-add peak: twelve independent vector accumulators per thread
//! (enough to cover the FMA units' latency), on one thread and on every thread at once, best of
//! `REPEATS`. The bound that no f32 matrix product, ours or PyTorch's, can pass: BENCHMARKS.md
//! sets the step's rate and the products' rates against it.
//!
//!     cargo run --release --example fma_peak            # RAYON_NUM_THREADS=N for N threads

use std::time::Instant;

use rayon::prelude::*;

const REPEATS: usize = 5;
/// Vector FMAs per accumulator per timed pass.
const ROUNDS: usize = 20_000_000;

fn main() {
    let Some(Kernel { name, lanes, run }) = kernel() else {
        println!("this CPU has no AVX2 + FMA");
        return;
    };
    let threads = rayon::current_num_threads();
    let flop_per_thread = (ROUNDS * 12 * lanes * 2) as f64;
    let best = |threads: usize| {
        (0..REPEATS)
            .map(|_| {
                let start = Instant::now();
                let sums: f32 = (0..threads).into_par_iter().map(|_| run(ROUNDS)).sum();
                std::hint::black_box(sums);
                flop_per_thread * threads as f64 / start.elapsed().as_secs_f64() / 1e9
            })
            .fold(0.0, f64::max)
    };
    let one = best(1);
    let all = best(threads);
    println!("{name}, {lanes} f32 lanes, 12 accumulators");
    println!("1 thread: {one:.1} GFLOP/s");
    println!(
        "{threads} threads: {all:.1} GFLOP/s ({:.1} per thread)",
        all / threads as f64
    );
}

/// An FMA loop: its instruction set, its f32 lanes, and the loop (`n` rounds).
struct Kernel {
    name: &'static str,
    lanes: usize,
    run: fn(usize) -> f32,
}

/// The widest FMA kernel this CPU runs.
fn kernel() -> Option<Kernel> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return Some(Kernel {
                name: "AVX-512",
                lanes: 16,
                // SAFETY: the CPU has AVX-512F (checked above).
                run: |n| unsafe { x86::fma_avx512(n) },
            });
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            return Some(Kernel {
                name: "AVX2 + FMA",
                lanes: 8,
                // SAFETY: the CPU has AVX2 and FMA (checked above).
                run: |n| unsafe { x86::fma_avx2(n) },
            });
        }
    }
    None
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// `n` rounds of 12 independent `acc = acc · b + c`; the lanes' sum, so that nothing is
    /// optimised away.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn fma_avx2(n: usize) -> f32 {
        let (b, c) = (_mm256_set1_ps(0.999_999), _mm256_set1_ps(1e-7));
        let mut acc = [_mm256_set1_ps(1.0); 12];
        for _ in 0..n {
            for a in acc.iter_mut() {
                *a = _mm256_fmadd_ps(*a, b, c);
            }
        }
        let mut lanes = [0f32; 8];
        let total = acc
            .iter()
            .fold(_mm256_setzero_ps(), |s, &a| _mm256_add_ps(s, a));
        // SAFETY: `lanes` holds 8 floats.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), total) };
        lanes.iter().sum()
    }

    /// As [`fma_avx2`], 16 lanes wide.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn fma_avx512(n: usize) -> f32 {
        let (b, c) = (_mm512_set1_ps(0.999_999), _mm512_set1_ps(1e-7));
        let mut acc = [_mm512_set1_ps(1.0); 12];
        for _ in 0..n {
            for a in acc.iter_mut() {
                *a = _mm512_fmadd_ps(*a, b, c);
            }
        }
        _mm512_reduce_add_ps(
            acc.iter()
                .fold(_mm512_setzero_ps(), |s, &a| _mm512_add_ps(s, a)),
        )
    }
}
