//! GELU in its exact (erf) form, as transformers' `"gelu"`:
//!
//! `gelu(x) = x · Φ(x) = ½ · x · (1 + erf(x / √2))`, `gelu'(x) = Φ(x) + x · φ(x)`,
//! with `φ(x) = e^{−x²/2} / √(2π)`.
//!
//! burn's CPU kernels evaluate a scalar `erf` element by element in the forward pass and `erf` and
//! `exp` again in the backward pass; in a BERT step that was about a tenth of the time. On CPU
//! devices this module computes value and derivative together in one parallel pass that the
//! compiler vectorises: `e = e^{−x²/2}` once (Cody–Waite range reduction and a degree-6
//! polynomial, relative error < 2e-7), and `erf(|u|) = 1 − t·P(t)·e^{−u²}` with
//! `t = 1 / (1 + 0.3275911·|u|)` (Abramowitz & Stegun 7.1.26, absolute error < 1.5e-7; `e^{−u²}`
//! is the same `e` since `u = x/√2`). The autodiff graph then only holds `y + d ⊙ (x − x̄)`, with
//! `y`, `d` the computed value and derivative and `x̄` the value of `x` outside the graph: its value
//! is `y` (the bracket is exactly zero) and its gradient `d`, the GELU's. Other devices use burn's
//! `gelu`. `tests/kernels.rs` checks both against an f64 reference.

use burn::prelude::*;
use burn::tensor::activation;
use rayon::prelude::*;

use super::on_host;

const CHUNK: usize = 1 << 14;

/// GELU of `x`, with the gradient of the exact form.
pub fn gelu<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    let device = x.device();
    if !on_host(&device) {
        return activation::gelu(x);
    }
    let shape = x.shape();
    let values = x.clone().inner();
    let Ok(host) = values.clone().into_data().try_into_vec::<f32>() else {
        return activation::gelu(x);
    };
    let tracked = x.is_tracked();
    let (y, d) = gelu_host(&host, tracked);
    let y = Tensor::<D>::from_data(TensorData::new(y, shape.clone()), &device);
    if !tracked {
        return y;
    }
    let d = Tensor::<D>::from_data(TensorData::new(d, shape), &device);
    y + d * (x - values)
}

/// Value and (when `derivative`) derivative of the GELU at every element of `x`.
pub fn gelu_host(x: &[f32], derivative: bool) -> (Vec<f32>, Vec<f32>) {
    let mut y = vec![0f32; x.len()];
    let mut d = vec![0f32; if derivative { x.len() } else { 0 }];
    if derivative {
        y.par_chunks_mut(CHUNK)
            .zip(d.par_chunks_mut(CHUNK))
            .zip(x.par_chunks(CHUNK))
            .for_each(|((y, d), x)| {
                for ((y, d), &x) in y.iter_mut().zip(d.iter_mut()).zip(x) {
                    (*y, *d) = gelu_and_derivative(x);
                }
            });
    } else {
        y.par_chunks_mut(CHUNK)
            .zip(x.par_chunks(CHUNK))
            .for_each(|(y, x)| {
                for (y, &x) in y.iter_mut().zip(x) {
                    *y = gelu_and_derivative(x).0;
                }
            });
    }
    (y, d)
}

#[inline(always)]
fn gelu_and_derivative(x: f32) -> (f32, f32) {
    const P: f32 = 0.327_591_1;
    const A: [f32; 5] = [
        0.254_829_6,
        -0.284_496_74,
        1.421_413_8,
        -1.453_152,
        1.061_405_4,
    ];
    const INV_SQRT_2PI: f32 = 0.398_942_3;
    let e = exp_non_positive(-0.5 * x * x);
    let t = 1.0 / (1.0 + P * x.abs() * std::f32::consts::FRAC_1_SQRT_2);
    let poly = t * (A[0] + t * (A[1] + t * (A[2] + t * (A[3] + t * A[4]))));
    let erf = (1.0 - poly * e).copysign(x);
    let cdf = 0.5 * (1.0 + erf);
    (x * cdf, cdf + x * e * INV_SQRT_2PI)
}

/// `e^v` for `v ≤ 0` (0 below −87), branch-free so that loops over it vectorise.
#[inline(always)]
fn exp_non_positive(v: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    // Adding and subtracting 1.5 · 2²³ rounds to the nearest integer.
    const ROUND: f32 = 12_582_912.0;
    let v = v.max(-87.0);
    let k = (v * LOG2E + ROUND) - ROUND;
    let r = (v - k * LN2_HI) - k * LN2_LO;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    let scale = f32::from_bits(((k as i32 + 127) as u32) << 23);
    p * scale
}
