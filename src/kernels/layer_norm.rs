//! Layer normalisation over the last dimension on the host, forward and backward:
//!
//! `μ = mean(x)`, `σ² = mean((x − μ)²)`, `r = 1 / √(σ² + ε)`, `x̂ = (x − μ) · r`,
//! `y = x̂ ⊙ γ + β`; with `g = ∂L/∂y` and `ĝ = g ⊙ γ`:
//!
//! `∂x = r · (ĝ − mean(ĝ) − x̂ · mean(ĝ ⊙ x̂))`, `∂γ = Σ_rows g ⊙ x̂`, `∂β = Σ_rows g`.
//!
//! burn composes this from about nine tensor operations, each a pass over memory with its own
//! backward. Here a row is read once forward (two sweeps over one row in cache) and once
//! backward. Rows are processed in parallel in fixed blocks; the parameter gradients are summed
//! per block and the blocks added in order, so the result does not depend on the thread count.

use std::mem::MaybeUninit;

use multiversion::multiversion;
use rayon::prelude::*;

use super::simd::sum_map;

/// Rows per parallel task (also the unit of the deterministic γ/β gradient sums).
const BLOCK: usize = 32;

/// What the backward pass needs: `x̂` (as `x`) and `r` per row.
#[derive(Clone, Debug, Default)]
pub struct Saved {
    pub normalized: Vec<f32>,
    pub rstd: Vec<f32>,
}

/// `y` for rows of `gamma.len()` elements, and, when `keep`, `x̂` and `r`.
pub fn forward(x: &[f32], gamma: &[f32], beta: &[f32], eps: f64, keep: bool) -> (Vec<f32>, Saved) {
    let h = gamma.len();
    assert!(
        h > 0 && x.len().is_multiple_of(h),
        "layer norm: input width"
    );
    assert_eq!(beta.len(), h, "layer norm: beta width");
    let (n, rows) = (x.len(), x.len() / h);
    // SAFETY: the blocks cover each buffer, and `normalize_rows` writes every element of its
    // blocks (whole rows of `h`; the buffers are `x`'s length, so the zipped blocks match).
    unsafe {
        super::buffers::filled_by(n, |y| {
            if !keep {
                y.par_chunks_mut(BLOCK * h)
                    .zip(x.par_chunks(BLOCK * h))
                    .for_each(|(y, x)| normalize_rows(x, y, None, gamma, beta, eps));
                return Saved::default();
            }
            let mut rstd = vec![0f32; rows];
            let (normalized, ()) = super::buffers::filled_by(n, |xn| {
                y.par_chunks_mut(BLOCK * h)
                    .zip(xn.par_chunks_mut(BLOCK * h))
                    .zip(rstd.par_chunks_mut(BLOCK))
                    .zip(x.par_chunks(BLOCK * h))
                    .for_each(|(((y, xn), r), x)| {
                        normalize_rows(x, y, Some((xn, r)), gamma, beta, eps)
                    })
            });
            Saved { normalized, rstd }
        })
    }
}

/// `y` of a block of rows, and, when `keep` holds buffers, their `x̂` and `r`.
#[multiversion(targets("x86_64+avx2+fma"))]
fn normalize_rows(
    x: &[f32],
    y: &mut [MaybeUninit<f32>],
    mut keep: Option<(&mut [MaybeUninit<f32>], &mut [f32])>,
    gamma: &[f32],
    beta: &[f32],
    eps: f64,
) {
    let h = gamma.len();
    for (i, (y, x)) in y.chunks_exact_mut(h).zip(x.chunks_exact(h)).enumerate() {
        let mean = sum_map(x, |v| v) / h as f32;
        let var = sum_map(x, |v| (v - mean) * (v - mean)) / h as f32;
        let r = (1.0 / (var as f64 + eps).sqrt()) as f32;
        match keep.as_mut() {
            Some((xn, rstd)) => {
                rstd[i] = r;
                let xn = &mut xn[i * h..(i + 1) * h];
                for j in 0..h {
                    let n = (x[j] - mean) * r;
                    xn[j].write(n);
                    y[j].write(n * gamma[j] + beta[j]);
                }
            }
            None => {
                for j in 0..h {
                    y[j].write((x[j] - mean) * r * gamma[j] + beta[j]);
                }
            }
        }
    }
}

/// `(∂x, ∂γ, ∂β)` from `g = ∂L/∂y`.
pub fn backward(grad: &[f32], saved: &Saved, gamma: &[f32]) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let h = gamma.len();
    assert_eq!(
        grad.len(),
        saved.normalized.len(),
        "layer norm: gradient shape"
    );
    // Per block: ∂γ then ∂β partial sums.
    // SAFETY: the blocks cover the buffer, and `backward_rows` writes every element of its
    // block (whole rows; `grad` and `x̂` have the buffer's length, so the zipped blocks match).
    let (dx, partials) = unsafe {
        super::buffers::filled_by(grad.len(), |dx| {
            dx.par_chunks_mut(BLOCK * h)
                .zip(grad.par_chunks(BLOCK * h))
                .zip(saved.normalized.par_chunks(BLOCK * h))
                .zip(saved.rstd.par_chunks(BLOCK))
                .map(|(((dx, g), xn), r)| backward_rows(dx, g, xn, r, gamma))
                .collect::<Vec<Vec<f32>>>()
        })
    };
    let mut dgamma = vec![0f32; h];
    let mut dbeta = vec![0f32; h];
    for sums in &partials {
        for j in 0..h {
            dgamma[j] += sums[j];
            dbeta[j] += sums[h + j];
        }
    }
    (dx, dgamma, dbeta)
}

/// `∂x` of a block of rows, and the block's partial sums of `∂γ` then `∂β`.
#[multiversion(targets("x86_64+avx2+fma"))]
fn backward_rows(
    dx: &mut [MaybeUninit<f32>],
    g: &[f32],
    xn: &[f32],
    r: &[f32],
    gamma: &[f32],
) -> Vec<f32> {
    let h = gamma.len();
    let mut sums = vec![0f32; 2 * h];
    let (dgamma, dbeta) = sums.split_at_mut(h);
    for (((dx, g), xn), &r) in dx
        .chunks_exact_mut(h)
        .zip(g.chunks_exact(h))
        .zip(xn.chunks_exact(h))
        .zip(r)
    {
        let (mut m1, mut m2) = (0f32, 0f32);
        for j in 0..h {
            let gh = g[j] * gamma[j];
            m1 += gh;
            m2 += gh * xn[j];
            dgamma[j] += g[j] * xn[j];
            dbeta[j] += g[j];
        }
        let (m1, m2) = (m1 / h as f32, m2 / h as f32);
        for j in 0..h {
            dx[j].write(r * (g[j] * gamma[j] - m1 - xn[j] * m2));
        }
    }
    sums
}
