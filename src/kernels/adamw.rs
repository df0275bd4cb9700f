//! One AdamW update of one parameter on the host, in a single parallel pass over p, g, m, v
//! (the per-tensor path of `train::optimizer` issues about a dozen tensor operations for it,
//! each a pass over memory into a fresh buffer). The same f32 operations in the same order:
//!
//! `m ← β1·m + ((1−β1)·f)·g`, `v ← β2·v + ((1−β2)·f²)·g²` (f: the gradient scale factor),
//! `p ← p·(1 − lr·wd)`, `p ← p − (m / (√v / √(1−β2^t) + ε)) · (lr / (1−β1^t))`.

use std::mem::MaybeUninit;

use multiversion::multiversion;
use rayon::prelude::*;

/// The constants of one update (`bc1` = 1 − β1^t, `bc2_sqrt` = √(1 − β2^t)).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamWStep {
    pub lr: f64,
    pub weight_decay: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub bc1: f64,
    pub bc2_sqrt: f64,
    pub grad_factor: f64,
}

const CHUNK: usize = 1 << 14;

/// Updates `m` and `v` in place and returns the new parameter values.
pub fn update(p: &[f32], g: &[f32], m: &mut [f32], v: &mut [f32], s: &AdamWStep) -> Vec<f32> {
    let n = p.len();
    assert!(
        g.len() == n && m.len() == n && v.len() == n,
        "adamw: parameter, gradient and moments differ in length"
    );
    let f = s.grad_factor;
    let (b1, b2) = (s.beta1 as f32, s.beta2 as f32);
    let (g1, g2) = (
        ((1.0 - s.beta1) * f) as f32,
        ((1.0 - s.beta2) * f * f) as f32,
    );
    let keep = (s.weight_decay != 0.0).then_some((1.0 - s.lr * s.weight_decay) as f32);
    let (bc2, eps, step) = (s.bc2_sqrt as f32, s.eps as f32, (s.lr / s.bc1) as f32);
    // SAFETY: the chunks cover the buffer, and `update_chunk` writes every element of its
    // chunk (all five buffers are `n` long, so the zipped chunks have the same lengths).
    let (out, ()) = unsafe {
        super::buffers::filled_by(n, |out| {
            out.par_chunks_mut(CHUNK)
                .zip(p.par_chunks(CHUNK))
                .zip(g.par_chunks(CHUNK))
                .zip(m.par_chunks_mut(CHUNK).zip(v.par_chunks_mut(CHUNK)))
                .for_each(|(((out, p), g), (m, v))| {
                    update_chunk(out, p, g, m, v, [b1, b2, g1, g2, bc2, eps, step], keep)
                })
        })
    };
    out
}

/// The update of one chunk; `c` = `[β1, β2, (1−β1)·f, (1−β2)·f², √(1−β2^t), ε, lr / (1−β1^t)]`,
/// `keep` = `1 − lr·wd` when weight decay applies.
#[multiversion(targets("x86_64+avx2+fma"))]
fn update_chunk(
    out: &mut [MaybeUninit<f32>],
    p: &[f32],
    g: &[f32],
    m: &mut [f32],
    v: &mut [f32],
    c: [f32; 7],
    keep: Option<f32>,
) {
    let [b1, b2, g1, g2, bc2, eps, step] = c;
    for ((((o, &p), &g), m), v) in out.iter_mut().zip(p).zip(g).zip(m).zip(v) {
        *m = *m * b1 + g * g1;
        *v = *v * b2 + g * g * g2;
        let p = keep.map_or(p, |k| p * k);
        o.write(p - (*m / (v.sqrt() / bc2 + eps)) * step);
    }
}
