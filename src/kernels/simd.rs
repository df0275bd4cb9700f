//! Vectorisable reductions and `exp` of the CPU kernels: fixed-order partial sums and maxima
//! in SIMD lanes.

/// Lanes of the vectorised reductions below: independent partial results, so that the compiler
/// may keep them in one SIMD register (a single running sum must be added in order).
const LANES: usize = 8;

/// `Σ f(x)` over `xs`, in [`LANES`] partial sums (a fixed order: the same result every time).
///
/// `f` is mapped over a block of values first and the block then added lane by lane: written as
/// one loop, `acc[k] += f(c[k])` with a costly `f` (the MLM loss's `exp`) stayed scalar.
/// The additions are the same, in the same order.
#[inline(always)]
pub(crate) fn sum_map(xs: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    const BLOCK: usize = 8 * LANES;
    let mut acc = [0f32; LANES];
    let mut values = [0f32; BLOCK];
    let whole = xs.len() - xs.len() % LANES;
    for block in xs[..whole].chunks(BLOCK) {
        let values = &mut values[..block.len()];
        for (v, &x) in values.iter_mut().zip(block) {
            *v = f(x);
        }
        for c in values.chunks_exact(LANES) {
            for k in 0..LANES {
                acc[k] += c[k];
            }
        }
    }
    let rest: f32 = xs[whole..].iter().map(|&x| f(x)).sum();
    acc.iter().sum::<f32>() + rest
}

/// `Σ a·b` over two slices of one length, in [`LANES`] partial sums (a fixed order).
#[inline(always)]
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; LANES];
    let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let rest: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..LANES {
            acc[k] += x[k] * y[k];
        }
    }
    acc.iter().sum::<f32>() + rest
}

/// `(Σ a·b, Σ a·b·c)` over three slices of one length, each in [`LANES`] partial sums (a
/// fixed order), so that the loop vectorises where two running sums would stay scalar.
#[inline(always)]
pub(crate) fn two_dots(a: &[f32], b: &[f32], c: &[f32]) -> (f32, f32) {
    let (mut s1, mut s2) = ([0f32; LANES], [0f32; LANES]);
    let whole = a.len() - a.len() % LANES;
    for ((a, b), c) in a[..whole]
        .chunks_exact(LANES)
        .zip(b.chunks_exact(LANES))
        .zip(c.chunks_exact(LANES))
    {
        for k in 0..LANES {
            let ab = a[k] * b[k];
            s1[k] += ab;
            s2[k] += ab * c[k];
        }
    }
    let (mut r1, mut r2) = (0f32, 0f32);
    for j in whole..a.len() {
        let ab = a[j] * b[j];
        r1 += ab;
        r2 += ab * c[j];
    }
    (s1.iter().sum::<f32>() + r1, s2.iter().sum::<f32>() + r2)
}

/// `max(xs)` (`f32::MIN` when empty), in [`LANES`] partial maxima.
#[inline(always)]
pub(crate) fn max_lanes(xs: &[f32]) -> f32 {
    let mut acc = [f32::MIN; LANES];
    let chunks = xs.chunks_exact(LANES);
    let rest = chunks
        .remainder()
        .iter()
        .fold(f32::MIN, |m, &x| if x > m { x } else { m });
    for c in chunks {
        for k in 0..LANES {
            acc[k] = if c[k] > acc[k] { c[k] } else { acc[k] };
        }
    }
    acc.iter().fold(rest, |m, &x| if x > m { x } else { m })
}

/// `e^v` for `v ≤ 0` (exactly 0 below −87), branch-free so that loops over it vectorise:
/// Cody–Waite range reduction and a degree-6 polynomial, relative error < 2.6e-7.
#[inline(always)]
pub(crate) fn exp_non_positive(v: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    // Adding and subtracting 1.5 · 2²³ rounds to the nearest integer.
    const ROUND: f32 = 12_582_912.0;
    let clamped = v.max(-87.0);
    let shifted = clamped * LOG2E + ROUND;
    let k = shifted - ROUND;
    let r = (clamped - k * LN2_HI) - k * LN2_LO;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    // 2^k from the bits of `shifted` = 1.5 · 2²³ + k: its low bits hold k (two's complement), so
    // adding the exponent bias and shifting them into the exponent field gives 2^k (k ∈ [−126, 0]).
    // Unlike `k as i32`, whose saturating conversion stays scalar, this vectorises.
    let scale = f32::from_bits(shifted.to_bits().wrapping_add(127) << 23);
    if v < -87.0 { 0.0 } else { p * scale }
}

#[cfg(test)]
mod tests {
    use super::exp_non_positive;

    #[test]
    fn exp_non_positive_is_within_its_stated_error_over_the_whole_range() {
        // Every 1/4096 step of [−90, 0]: both sides of the underflow bound and each 2^k change.
        for i in 0..=90 * 4096 {
            let v = -(i as f32) / 4096.0;
            let got = exp_non_positive(v) as f64;
            if v < -87.0 {
                assert_eq!(got, 0.0, "e^{v}");
                continue;
            }
            let want = (v as f64).exp();
            assert!(
                (got - want).abs() <= 2.6e-7 * want,
                "e^{v}: {got} against {want}"
            );
        }
        assert_eq!(exp_non_positive(f32::NEG_INFINITY), 0.0);
    }
}
