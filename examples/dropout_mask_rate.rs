//! Mask values per second of the dropout kernel's generator (`kernels::dropout::fill_mask`,
//! Philox) on one thread, into a warm buffer of 2¹⁶ values, 256 streams a pass; best of five
//! passes is the figure to read.
//!
//!     cargo run --release --example dropout_mask_rate

use std::time::Instant;

const N: usize = 1 << 16;
const STREAMS: u64 = 256;

fn main() {
    let mut mask = vec![0f32; N];
    let mut best = f64::MAX;
    for _ in 0..5 {
        let start = Instant::now();
        for stream in 0..STREAMS {
            trueneg::kernels::dropout::fill_mask(&mut mask, 0.1, 42, stream);
        }
        best = best.min(start.elapsed().as_secs_f64());
    }
    let dropped = mask.iter().filter(|&&v| v == 0.0).count() as f64 / N as f64;
    println!(
        "{:.2} G mask values/s (best of 5; {:.3} of the last stream dropped at p = 0.1)",
        STREAMS as f64 * N as f64 / best / 1e9,
        dropped
    );
}
