//! The two AdamW implementations (per tensor; multi-tensor over flat buffers) give the same
//! parameters, with weight-decay exclusions, per-parameter learning-rate scales and gradient
//! clipping, and their checkpointed state is interchangeable. (Parity of both with
//! transformers' AdamW is in tests/suite/golden.rs.)

use burn::prelude::*;
use trueneg::interop::Exporter;
use trueneg::model::{BertMlm, EncoderConfig, Inputs, Precision};
use trueneg::objective::masked_cross_entropy;
use trueneg::train::optimizer::{AdamW, AdamWConfig, Grads, MultiTensor};

fn device() -> Device {
    Device::flex().autodiff()
}

fn config() -> EncoderConfig {
    EncoderConfig {
        vocab_size: 60,
        embedding_size: 16,
        hidden_size: 16,
        num_hidden_layers: 2,
        num_attention_heads: 2,
        intermediate_size: 32,
        max_position_embeddings: 32,
        type_vocab_size: 2,
        layer_norm_eps: 1e-12,
        hidden_dropout_prob: 0.0,
        attention_probs_dropout_prob: 0.0,
        pad_token_id: 0,
        precision: Precision::F32,
    }
}

/// A model with its parameters materialised (burn initialises them lazily, on first use), so
/// that clones start from the same values.
fn model(d: &Device) -> BertMlm {
    trueneg::model::seed(d, 7);
    let mut m = BertMlm::new(&config(), d);
    params(&mut m);
    m
}

fn batch(step: usize, d: &Device) -> (Inputs, Tensor<1, Int>, Tensor<1, Int>) {
    let ids: Vec<i64> = (0..2 * 12)
        .map(|i| ((i * 7 + step * 13) % 55 + 5) as i64)
        .collect();
    let positions: Vec<i64> = vec![1, 4, 9, 13, 18, 22];
    let labels: Vec<i64> = positions.iter().map(|&p| ids[p as usize]).collect();
    let x = Inputs {
        ids: Tensor::from_data(TensorData::new(ids, [2, 12]), d),
        token_types: Tensor::zeros([2, 12], d),
        attention_mask: None,
    };
    (
        x,
        Tensor::from_data(TensorData::new(positions, [6]), d),
        Tensor::from_data(TensorData::new(labels, [6]), d),
    )
}

fn opt(multi_tensor: MultiTensor) -> AdamW {
    AdamW::new(AdamWConfig {
        lr: 1e-2,
        weight_decay: 0.1,
        decay_all: false,
        eps: 1e-6,
        max_grad_norm: 0.05,
        warmup_steps: 0,
        multi_tensor,
        ..Default::default()
    })
}

/// Layer-wise decay as fine-tuning uses it: layer 0 gets half the learning rate.
fn lr_scale(name: &str) -> f64 {
    if name.contains("layer.0.") { 0.5 } else { 1.0 }
}

/// Steps `from..to`, clipping as pre-training does; returns the clip norms.
fn train(m: &mut BertMlm, o: &mut AdamW, from: usize, to: usize, d: &Device) -> Vec<f64> {
    (from..to)
        .map(|step| {
            let (x, pos, labels) = batch(step, d);
            let loss = masked_cross_entropy(m.mlm_logits(&x, pos), labels, None);
            let mut g = Grads::collect(&loss.backward(), |w| m.walk(w));
            let norm = g.clip_global_norm(0.05).unwrap();
            o.update_scaled(1e-2, &lr_scale, &g, |w| m.walk(w));
            norm.into_scalar::<f32>() as f64
        })
        .collect()
}

fn params(m: &mut BertMlm) -> Vec<(String, Vec<f32>)> {
    let mut ex = Exporter::default();
    m.walk(&mut ex);
    ex.tensors.into_iter().map(|(k, t)| (k, t.values)).collect()
}

fn assert_same(a: &[(String, Vec<f32>)], b: &[(String, Vec<f32>)], tol: f32) {
    assert_eq!(a.len(), b.len());
    for ((na, va), (nb, vb)) in a.iter().zip(b) {
        assert_eq!(na, nb);
        let d = va
            .iter()
            .zip(vb)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f32::max);
        assert!(d <= tol, "{na}: max |diff| {d} > {tol}");
    }
}

#[test]
fn multi_tensor_update_equals_per_tensor() {
    let d = device();
    let mut a = model(&d);
    let start = params(&mut a);
    let mut b = a.clone();
    assert_same(&start, &params(&mut b), 0.0);
    let (mut oa, mut ob) = (opt(MultiTensor::Off), opt(MultiTensor::On));
    let na = train(&mut a, &mut oa, 0, 6, &d);
    let nb = train(&mut b, &mut ob, 0, 6, &d);
    assert!(na[0] > 0.05, "clipping is exercised: norm {}", na[0]);
    for (x, y) in na.iter().zip(&nb) {
        assert!((x - y).abs() <= 1e-5 * x, "grad norms {x} vs {y}");
    }
    let (pa, pb) = (params(&mut a), params(&mut b));
    assert_same(&pa, &pb, 1e-6);
    // The parameters moved, LayerNorm and biases without decay, so equality is not vacuous.
    let moved = start
        .iter()
        .zip(&pa)
        .filter(|((_, s), (_, p))| s != p)
        .count();
    assert_eq!(moved, pa.len(), "every parameter was updated");
}

#[test]
fn optimizer_state_moves_between_implementations() {
    let d = device();
    // Reference: 5 uninterrupted multi-tensor steps.
    let mut m = model(&d);
    let mut reference = m.clone();
    let mut o = opt(MultiTensor::On);
    train(&mut reference, &mut o, 0, 5, &d);

    // 3 multi-tensor steps, state saved, 2 per-tensor steps from the loaded state, and back.
    let mut o1 = opt(MultiTensor::On);
    train(&mut m, &mut o1, 0, 3, &d);
    let state = o1.state();
    assert_eq!(
        state.len(),
        2 * params(&mut m).len(),
        "m and v of every parameter"
    );
    let mut o2 = opt(MultiTensor::Off);
    o2.load_state(3, &state, &d).unwrap();
    train(&mut m, &mut o2, 3, 4, &d);
    let mut o3 = opt(MultiTensor::On);
    o3.load_state(4, &o2.state(), &d).unwrap();
    train(&mut m, &mut o3, 4, 5, &d);
    assert_same(&params(&mut reference), &params(&mut m), 1e-6);
}

/// A staged update (`AdamW::stage`, what a recorded CUDA-graph step runs: step factors in a
/// device tensor, parameters and moments written back into the same buffers) gives the
/// parameters of the ordinary multi-tensor update, step after step. LibTorch's CPU device
/// (the write-back is a LibTorch copy).
#[cfg(feature = "tch")]
#[test]
fn a_staged_update_equals_the_ordinary_one() {
    let d = trueneg::device::device_for("libtorch").unwrap().autodiff();
    let mut a = model(&d);
    let start = params(&mut a);
    let mut b = a.clone();
    let (mut oa, mut ob) = (opt(MultiTensor::On), opt(MultiTensor::On));
    train(&mut a, &mut oa, 0, 1, &d);
    // From the second step on, b's updates are staged.
    train(&mut b, &mut ob, 0, 1, &d);
    for step in 1..6 {
        train(&mut a, &mut oa, step, step + 1, &d);
        ob.stage(1e-2, &d);
        train(&mut b, &mut ob, step, step + 1, &d);
    }
    assert_eq!((oa.step, ob.step), (6, 6));
    let (pa, pb) = (params(&mut a), params(&mut b));
    assert_same(&pa, &pb, 1e-6);
    assert!(start.iter().zip(&pb).all(|((_, s), (_, p))| s != p));
}
