//! ELECTRA's one-layer classification head (dropout, then one dense layer on `[CLS]`) written as
//! transformers' `ElectraClassificationHead` (dropout, dense, GELU, dropout, `out_proj`), so that
//! the recipe's default model exports.
//!
//! The head's `dense` becomes the identity plus a shift `s`, which puts every input of the GELU
//! where GELU is the identity to float precision; `out_proj` holds the trained layer, its bias
//! less the shift's contribution. The shift is bounded from the weights, not guessed: the
//! `[CLS]` state is the last layer's LayerNorm output, `γ·x̂ + β` with every `|x̂ᵢ| ≤ √H` (a
//! normalised vector of H values), so `hᵢ ≥ −(|γᵢ|·√H + |βᵢ|)`; with `s` that bound plus
//! `MARGIN`, every GELU input is at least `MARGIN`, where `GELU(x) = x·Φ(x)` differs from `x`
//! by under 1e-22·x. At inference (no dropout) the exported logits are trueneg's to float
//! rounding.

use std::collections::BTreeMap;
use std::path::Path;

use crate::interop::tensors::HostTensor;
use crate::{Error, Result};

/// The least GELU input after the shift.
const MARGIN: f64 = 10.0;

/// Replaces `classifier.weight` / `classifier.bias` (ELECTRA's head over `layers` layers of
/// width `hidden` under `prefix`) by `classifier.dense.*` and `classifier.out_proj.*`.
pub fn as_transformers_head(
    weights: &mut BTreeMap<String, HostTensor>,
    prefix: &str,
    layers: usize,
    hidden: usize,
    file: &Path,
) -> Result<()> {
    let mut take = |name: &str| {
        weights
            .remove(name)
            .ok_or_else(|| Error::Checkpoint(format!("{}: no tensor `{name}`", file.display())))
    };
    let w = take("classifier.weight")?;
    let b = take("classifier.bias")?;
    let norm = format!(
        "{prefix}.encoder.layer.{}.output.LayerNorm",
        layers.saturating_sub(1)
    );
    let gamma = weights.get(&format!("{norm}.weight"));
    let beta = weights.get(&format!("{norm}.bias"));
    let (Some(gamma), Some(beta)) = (gamma, beta) else {
        return Err(Error::Checkpoint(format!(
            "{}: no tensor `{norm}.weight` / `.bias` (the last layer's LayerNorm)",
            file.display()
        )));
    };
    let root = (hidden as f64).sqrt();
    let lowest = gamma
        .values
        .iter()
        .zip(&beta.values)
        .map(|(g, b)| g.abs() as f64 * root + b.abs() as f64)
        .fold(0.0, f64::max);
    let shift = (lowest + MARGIN).ceil();
    let mut identity = vec![0f32; hidden * hidden];
    for i in 0..hidden {
        identity[i * hidden + i] = 1.0;
    }
    let labels = b.values.len();
    let out_bias: Vec<f32> = (0..labels)
        .map(|l| {
            let row = &w.values[l * hidden..(l + 1) * hidden];
            let sum: f64 = row.iter().map(|&v| v as f64).sum();
            (b.values[l] as f64 - shift * sum) as f32
        })
        .collect();
    let tensor = |shape: Vec<usize>, values: Vec<f32>| HostTensor { shape, values };
    weights.insert(
        "classifier.dense.weight".into(),
        tensor(vec![hidden, hidden], identity),
    );
    weights.insert(
        "classifier.dense.bias".into(),
        tensor(vec![hidden], vec![shift as f32; hidden]),
    );
    weights.insert("classifier.out_proj.weight".into(), w);
    weights.insert(
        "classifier.out_proj.bias".into(),
        tensor(vec![labels], out_bias),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gelu(x: f64) -> f64 {
        0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2))
    }

    /// erf by its Maclaurin series (beyond |x| = 6, erf is ±1 to 1e-17).
    fn erf(x: f64) -> f64 {
        if x.abs() > 6.0 {
            return x.signum();
        }
        let (mut sum, mut term) = (0.0, x);
        for n in 0..200 {
            sum += term / (2 * n + 1) as f64;
            term *= -x * x / (n + 1) as f64;
        }
        2.0 / std::f64::consts::PI.sqrt() * sum
    }

    #[test]
    fn the_shifted_head_gives_the_one_layer_heads_logits_on_any_layer_norm_output() {
        let (hidden, labels) = (6, 3);
        let gamma: Vec<f32> = vec![1.0, 0.5, 2.0, 1.5, 0.8, 1.2];
        let beta: Vec<f32> = vec![0.1, -0.3, 0.0, 0.2, -1.0, 0.5];
        let w: Vec<f32> = (0..labels * hidden)
            .map(|i| ((i * 7 % 11) as f32 - 5.0) / 10.0)
            .collect();
        let b: Vec<f32> = vec![0.3, -0.2, 0.05];
        let mut m = BTreeMap::new();
        let t = |shape: Vec<usize>, values: Vec<f32>| HostTensor { shape, values };
        m.insert(
            "classifier.weight".into(),
            t(vec![labels, hidden], w.clone()),
        );
        m.insert("classifier.bias".into(), t(vec![labels], b.clone()));
        m.insert(
            "electra.encoder.layer.1.output.LayerNorm.weight".into(),
            t(vec![hidden], gamma.clone()),
        );
        m.insert(
            "electra.encoder.layer.1.output.LayerNorm.bias".into(),
            t(vec![hidden], beta.clone()),
        );
        as_transformers_head(&mut m, "electra", 2, hidden, Path::new("m")).unwrap();
        assert!(!m.contains_key("classifier.weight"));
        let d = &m["classifier.dense.bias"].values;
        let ow = &m["classifier.out_proj.weight"].values;
        let ob = &m["classifier.out_proj.bias"].values;
        // The extreme LayerNorm outputs: all the mass on one coordinate, either sign.
        let extreme = |k: usize, sign: f64| -> Vec<f64> {
            let n = hidden as f64;
            (0..hidden)
                .map(|i| {
                    let x = if i == k {
                        sign * (n - 1.0).sqrt()
                    } else {
                        -sign / (n - 1.0).sqrt()
                    };
                    gamma[i] as f64 * x + beta[i] as f64
                })
                .collect()
        };
        for k in 0..hidden {
            for sign in [1.0, -1.0] {
                let h = extreme(k, sign);
                for l in 0..labels {
                    let ours: f64 = (0..hidden)
                        .map(|i| w[l * hidden + i] as f64 * h[i])
                        .sum::<f64>()
                        + b[l] as f64;
                    let theirs: f64 = (0..hidden)
                        .map(|i| ow[l * hidden + i] as f64 * gelu(h[i] + d[i] as f64))
                        .sum::<f64>()
                        + ob[l] as f64;
                    assert!(
                        (ours - theirs).abs() < 1e-5,
                        "{k} {sign} {l}: {ours} {theirs}"
                    );
                }
            }
        }
    }
}
