//! One draw per row of logits from `softmax(z)` (temperature 1) by inverting the row's
//! cumulative distribution: with `w_j = e^{z_j − max(z)}`, `W = Σ_j w_j` and `u ~ U[0, 1)`, the
//! draw is the first `j` with `Σ_{i ≤ j} w_i > u · W`.
//!
//! It draws from the same distribution as Gumbel-max (`argmax_j z_j − ln(−ln u_j)`), with one
//! `exp` per logit and one random number per row instead of a uniform, two logarithms and a
//! comparison per logit. The row's weights are summed in blocks of `BLOCK` (running sums in
//! f64), the block holding `u · W` is found from the block sums, and only that block is walked
//! element by element. Row `r` takes its number from stream `r` of a ChaCha8 generator seeded
//! with `seed`, so the draws depend neither on the thread count nor on the other rows.
//!
//! The ELECTRA generator's replacement tokens: one draw per masked position from the
//! generator's `softmax(z)` at temperature 1, as the official ELECTRA code samples them.
//!
//! On host devices each row is sampled by inverting its cumulative distribution
//! ([`sample_rows`]), on the logits in place where the fused kernels run, seeded from the
//! per-call seeds ([`seeds`](super::seeds): a resumed run draws the same tokens). Elsewhere (CUDA,
//! LibTorch) the draw stays on the device, by Gumbel-max: `argmax_j z_j − ln(−ln u_j)` with
//! `u_j ~ U(0, 1)` from burn's device RNG; the indices stay there too.

use burn::prelude::*;
use burn::tensor::Distribution;
use multiversion::multiversion;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use super::seeds::next_call;
use super::select::fused;
use super::simd::{exp_non_positive, max_lanes, sum_map};

/// Logits per block of the row's running sum.
const BLOCK: usize = 64;

/// One token id per row of `logits` `[rows, vocab]`, drawn from the row's softmax at
/// temperature 1 (detached: sampling has no gradient), as an integer tensor on the logits'
/// device: our kernel on the logits in place, the same kernel on a host copy, or Gumbel-max on
/// the device.
pub fn sample(logits: &Tensor<2>) -> Tensor<1, Int> {
    let logits = logits.clone().detach();
    if fused(&logits.device(), logits.dtype()) {
        return fused_call(logits, next_call());
    }
    sample_copied_or_on_device(logits)
}

/// One draw per row of `logits` `[rows, vocab]` with the sampler's `seed`, the kernel reading
/// the logits in place, as one burn operation. Only where [`fused`](super::fused) holds.
pub fn fused_call(logits: Tensor<2>, seed: u64) -> Tensor<1, Int> {
    let ids = logits.device().settings().int_dtype;
    Tensor::from_dispatch(extension_op!(
        "flex",
        flex_op::SamplingOps,
        fused_sample(logits.into_dispatch(), seed, ids)
    ))
}

/// One token id per row of the detached `logits` `[rows, vocab]` where the fused kernels do not
/// run: the kernel on a host copy of the logits (other dtypes, other host backends), or
/// Gumbel-max on the device.
fn sample_copied_or_on_device(logits: Tensor<2>) -> Tensor<1, Int> {
    let device = logits.device();
    if super::host::on_host(&device) {
        let [rows, vocab] = logits.dims();
        let z = logits
            .into_data()
            .convert::<f32>()
            .try_into_vec::<f32>()
            .expect("f32 logits");
        let ids = sample_rows(&z, vocab, next_call());
        return super::host::device_ids(&ids, [rows], &device);
    }
    let u = logits.random_like(Distribution::Uniform(1e-9, 1.0));
    let gumbel = u.log().neg().log().neg();
    (logits + gumbel).argmax(1).squeeze_dim::<1>(1)
}

/// One index in `0..vocab` per row of `z` (`[rows, vocab]`, row-major), drawn from the row's
/// softmax. A row whose weights are all zero or not finite draws its largest logit's index.
pub fn sample_rows(z: &[f32], vocab: usize, seed: u64) -> Vec<u32> {
    assert!(vocab > 0, "sampling: empty vocabulary");
    assert_eq!(z.len() % vocab, 0, "sampling: logits shape");
    z.par_chunks(vocab)
        .enumerate()
        .map(|(r, row)| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            rng.set_stream(r as u64);
            // 53 random bits: u in [0, 1).
            let u = (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
            draw(row, u) as u32
        })
        .collect()
}

/// The first index whose running weight exceeds `u · W` (see the module doc).
#[multiversion(targets = "simd")]
fn draw(row: &[f32], u: f64) -> usize {
    let max = max_lanes(row);
    // Written out at each use (not one closure), so that the block sums inline and vectorise.
    let sums: Vec<f64> = row
        .chunks(BLOCK)
        .map(|block| sum_map(block, |x| exp_non_positive(x - max)) as f64)
        .collect();
    let total: f64 = sums.iter().sum();
    if !(total > 0.0 && total.is_finite()) {
        return argmax(row);
    }
    let target = u * total;
    let mut before = 0.0;
    for (b, &s) in sums.iter().enumerate() {
        if before + s > target {
            let start = b * BLOCK;
            let block = &row[start..(start + BLOCK).min(row.len())];
            let mut run = before;
            let mut last = None;
            for (j, &x) in block.iter().enumerate() {
                let w = exp_non_positive(x - max) as f64;
                if w > 0.0 {
                    last = Some(j);
                }
                run += w;
                if run > target && w > 0.0 {
                    return start + j;
                }
            }
            // The element-wise sum rounded below the block's own: its last weighted element.
            if let Some(j) = last {
                return start + j;
            }
        }
        before += s;
    }
    // `u · W` at the very top of the rounding: the last weighted element of the row.
    row.iter()
        .rposition(|&x| exp_non_positive(x - max) > 0.0)
        .unwrap_or_else(|| argmax(row))
}

fn argmax(row: &[f32]) -> usize {
    row.iter()
        .enumerate()
        .fold(
            (0, f32::NEG_INFINITY),
            |(i, m), (j, &x)| {
                if x > m { (j, x) } else { (i, m) }
            },
        )
        .0
}

/// The kernel as an operation of burn's `flex` backend (not differentiable: the autodiff
/// backend's operation is the inner one's).
#[cfg(feature = "flex")]
mod flex_op {
    use burn::backend::TensorMetadata;
    use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
    use burn::backend::flex::FlexTensor;
    use burn::backend::tensor::{FloatTensor, IntTensor};
    use burn::backend::{Autodiff, Backend, Flex, backend_extension};
    use burn::tensor::{DType, IntDType, TensorData};

    use super::super::flex_tensors::host;

    #[backend_extension(Flex, Autodiff)]
    pub trait SamplingOps: Backend {
        /// One draw per row of `logits` `[rows, vocab]` from the row's softmax, read in place:
        /// ids `[rows]` of dtype `ids`.
        fn fused_sample(logits: FloatTensor<Self>, seed: u64, ids: IntDType) -> IntTensor<Self>;
    }

    impl SamplingOps for Flex {
        fn fused_sample(logits: FlexTensor, seed: u64, ids: IntDType) -> FlexTensor {
            let shape = logits.shape();
            assert_eq!(
                shape.num_dims(),
                2,
                "sampling: logits are not [rows, vocab]"
            );
            let drawn = super::sample_rows(&host(&logits), shape[1], seed);
            let drawn: Vec<i64> = drawn.into_iter().map(i64::from).collect();
            let data = TensorData::new(drawn, [shape[0]]).convert_dtype(DType::from(ids));
            FlexTensor::from_data(data)
        }
    }

    impl<C: CheckpointStrategy> SamplingOps for Autodiff<Flex, C> {
        fn fused_sample(logits: FloatTensor<Self>, seed: u64, ids: IntDType) -> IntTensor<Self> {
            Flex::fused_sample(logits.into_primitive(), seed, ids)
        }
    }
}
