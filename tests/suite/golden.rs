//! Parity with transformers' own outputs and gradients (../shared/golden, see its README):
//! outputs and losses within 1e-4 absolute, gradients within 1e-3 relative, and three AdamW
//! steps of the tiny BERT. On the `flex` CPU backend, and with feature `tch` on LibTorch's CPU
//! device too (the LibTorch calls of `kernels::libtorch`).

use std::path::PathBuf;

use burn::prelude::*;
use burn::tensor::Gradients;
use trueneg::interop::read_hf_config;
use trueneg::interop::tensors::{HostTensor, Loader, TensorMap, read_safetensors};
use trueneg::model::{BertMlm, Electra, Inputs};
use trueneg::objective::soft_regularization::word_regularization;
use trueneg::objective::{masked_cross_entropy, replaced_token_loss};
use trueneg::train::optimizer::{AdamW, AdamWConfig, Grads, MultiTensor};

fn golden() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/golden")
}

fn device() -> Device {
    Device::flex().autodiff()
}

/// LibTorch's CPU device (feature `tch`), or the device `TRUENEG_LIBTORCH_DEVICE` names (on a
/// GPU machine: `libtorch-cuda`).
#[cfg(feature = "tch")]
fn libtorch() -> Device {
    let name = std::env::var("TRUENEG_LIBTORCH_DEVICE").unwrap_or("libtorch".into());
    trueneg::device::device_for(&name).unwrap().autodiff()
}

fn get<'a>(m: &'a TensorMap, k: &str) -> &'a HostTensor {
    m.tensors
        .get(k)
        .unwrap_or_else(|| panic!("golden key {k} missing"))
}

fn ints<const D: usize>(m: &TensorMap, k: &str, d: &Device) -> Tensor<D, Int> {
    let t = get(m, k);
    let v: Vec<i64> = t.values.iter().map(|x| *x as i64).collect();
    Tensor::from_data(TensorData::new(v, t.shape.clone()), d)
}

fn host<const D: usize>(t: Tensor<D>) -> HostTensor {
    HostTensor::from_tensor(t)
}

/// max |a - b| over all elements, after checking the shapes.
fn max_abs(a: &HostTensor, b: &HostTensor, what: &str) -> f32 {
    assert_eq!(a.shape, b.shape, "{what}: shape");
    a.values
        .iter()
        .zip(&b.values)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn assert_close(a: &HostTensor, b: &HostTensor, tol: f32, what: &str) {
    let d = max_abs(a, b, what);
    assert!(d <= tol, "{what}: max |diff| {d} > {tol}");
}

/// Relative error: max |a - b| / max |b| (the scale of the reference gradient). A gradient that
/// is zero in exact arithmetic (the attention key bias: softmax ignores a per-row constant) is
/// float noise of ~1e-9 in both implementations; it is compared with an absolute 1e-6.
fn assert_rel(a: &HostTensor, b: &HostTensor, tol: f32, what: &str) {
    let scale = b.values.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    let d = max_abs(a, b, what);
    if scale < 1e-6 {
        assert!(d <= 1e-6, "{what}: abs diff {d} on a ~zero gradient");
        return;
    }
    assert!(
        d / scale <= tol,
        "{what}: relative diff {} > {tol}",
        d / scale
    );
}

fn scalar(t: &HostTensor) -> f32 {
    t.values[0]
}

fn inputs(m: &TensorMap, ids_key: &str, d: &Device) -> Inputs {
    Inputs {
        ids: ints(m, ids_key, d),
        token_types: ints(m, "inputs.token_type_ids", d),
        attention_mask: Some(ints(m, "inputs.attention_mask", d)),
    }
}

/// Flat positions of the masked tokens and their labels.
fn masked(m: &TensorMap, d: &Device) -> (Tensor<1, Int>, Tensor<1, Int>) {
    let mask = get(m, "inputs.mlm_mask");
    let labels = get(m, "inputs.mlm_labels");
    let (mut pos, mut lab) = (vec![], vec![]);
    for (i, (&mk, &l)) in mask.values.iter().zip(&labels.values).enumerate() {
        if mk != 0.0 {
            pos.push(i as i64);
            lab.push(l as i64);
        }
    }
    let n = pos.len();
    (
        Tensor::from_data(TensorData::new(pos, [n]), d),
        Tensor::from_data(TensorData::new(lab, [n]), d),
    )
}

/// Every position of the fixture's batch, and its [batch, length] shape (read from the inputs,
/// so any fixture set `make_golden.py` writes fits).
fn all_positions(m: &TensorMap, d: &Device) -> (Tensor<1, Int>, [usize; 2]) {
    let shape = &get(m, "inputs.token_type_ids").shape;
    let (b, l) = (shape[0], shape[1]);
    (Tensor::arange(0..(b * l) as i64, d), [b, l])
}

/// The shapes of a fixture model, from its `config.json`.
fn config(folder: &str) -> trueneg::interop::hf_config::HfConfig {
    read_hf_config(&golden().join(folder).join("config.json")).unwrap()
}

/// How many golden tensors have this prefix (e.g. one gradient per parameter).
fn count(m: &TensorMap, prefix: &str) -> usize {
    m.tensors.keys().filter(|k| k.starts_with(prefix)).count()
}

/// How many parameter tensors a model has.
fn parameters(walk: impl FnOnce(&mut trueneg::interop::Exporter)) -> usize {
    let mut ex = trueneg::interop::Exporter::default();
    walk(&mut ex);
    ex.tensors.len()
}

fn load_bert(d: &Device) -> BertMlm {
    let cfg = read_hf_config(&golden().join("bert_tiny/config.json")).unwrap();
    let mut model = BertMlm::new(&cfg.encoder.without_dropout(), d);
    let weights = read_safetensors(&golden().join("bert_tiny/model.safetensors")).unwrap();
    let mut loader = Loader::new(&weights, d);
    model.walk(&mut loader);
    loader.finish().unwrap();
    model
}

/// The fixture's loss: MLM CE + mean masked (1 − cos(E[argmax], E[gold])).
fn bert_loss(
    model: &BertMlm,
    x: &Inputs,
    pos: Tensor<1, Int>,
    labels: Tensor<1, Int>,
) -> (Tensor<1>, Tensor<1>, Tensor<1>) {
    let logits = model.mlm_logits(x, pos);
    let pred = logits.clone().detach().argmax(1).squeeze_dim(1);
    let mlm = masked_cross_entropy(logits, labels.clone(), None);
    let reg = word_regularization(model.embeddings.word_matrix(), pred, labels);
    (mlm.clone() + reg.clone(), mlm, reg)
}

fn check_grads(
    grads: &Grads,
    golden: &TensorMap,
    prefix: &str,
    rename: impl Fn(&str) -> Option<String>,
) -> usize {
    let mut checked = 0;
    for name in grads.entries.keys() {
        let Some(g) = rename(name) else { continue };
        let key = format!("{prefix}{g}");
        let expected = get(golden, &key);
        assert_rel(&grads.host(name).unwrap(), expected, 1e-3, &key);
        checked += 1;
    }
    checked
}

#[test]
fn bert_outputs_losses_and_gradients_match_transformers() {
    bert_outputs_losses_and_gradients_match_transformers_on(device());
}

/// The LibTorch path: attention, LayerNorm, GELU and the cross-entropy as LibTorch calls.
#[cfg(feature = "tch")]
#[test]
fn bert_outputs_losses_and_gradients_match_transformers_on_libtorch() {
    bert_outputs_losses_and_gradients_match_transformers_on(libtorch());
}

fn bert_outputs_losses_and_gradients_match_transformers_on(d: Device) {
    let g = read_safetensors(&golden().join("bert_tiny_golden.safetensors")).unwrap();
    let model = load_bert(&d);
    let x = inputs(&g, "inputs.masked_input_ids", &d);
    let states = model.hidden_states(&x);
    let vocab = config("bert_tiny").encoder.vocab_size;
    assert_eq!(
        states.len(),
        config("bert_tiny").encoder.num_hidden_layers + 1
    );
    assert_eq!(states.len(), count(&g, "bert.hidden_states."));
    for (i, s) in states.iter().enumerate() {
        assert_close(
            &host(s.clone()),
            get(&g, &format!("bert.hidden_states.{i}")),
            1e-4,
            &format!("hidden {i}"),
        );
    }
    let (all, [b, l]) = all_positions(&g, &d);
    let logits = model.mlm_logits(&x, all).reshape([b, l, vocab]);
    assert_close(&host(logits), get(&g, "bert.logits"), 1e-4, "logits");

    let (pos, labels) = masked(&g, &d);
    let (loss, mlm, reg) = bert_loss(&model, &x, pos, labels);
    let l = |t: Tensor<1>| t.into_scalar::<f32>();
    assert!((l(mlm.clone()) - scalar(get(&g, "bert.mlm_loss"))).abs() < 1e-4);
    assert!((l(reg.clone()) - scalar(get(&g, "bert.reg_loss"))).abs() < 1e-4);
    assert!((l(loss.clone()) - scalar(get(&g, "bert.loss"))).abs() < 1e-4);

    let mut model = model;
    let grads: Gradients = loss.backward();
    let grads = Grads::collect(&grads, |w| model.walk(w));
    let n = check_grads(&grads, &g, "bert.grad.", |n| Some(n.to_string()));
    let names: Vec<&String> = grads.entries.keys().collect();
    assert_eq!(
        n,
        parameters(|e| model.walk(e)),
        "every parameter has a gradient: {names:?}"
    );
    assert_eq!(n, count(&g, "bert.grad."), "every golden gradient checked");
}

/// Both optimizer implementations (per tensor; multi-tensor over flat buffers) match.
#[test]
fn bert_three_adamw_steps_match_transformers() {
    for multi_tensor in [MultiTensor::Off, MultiTensor::On] {
        three_adamw_steps(device(), multi_tensor);
    }
}

#[cfg(feature = "tch")]
#[test]
fn bert_three_adamw_steps_match_transformers_on_libtorch() {
    for multi_tensor in [MultiTensor::Off, MultiTensor::On] {
        three_adamw_steps(libtorch(), multi_tensor);
    }
}

fn three_adamw_steps(d: Device, multi_tensor: MultiTensor) {
    let g = read_safetensors(&golden().join("bert_tiny_golden.safetensors")).unwrap();
    let mut model = load_bert(&d);
    let x = inputs(&g, "inputs.masked_input_ids", &d);
    let (pos, labels) = masked(&g, &d);
    let cfg = AdamWConfig {
        lr: 5e-4,
        weight_decay: 0.01,
        decay_all: true,
        eps: 1e-6,
        max_grad_norm: 0.0,
        warmup_steps: 0,
        multi_tensor,
        ..Default::default()
    };
    let mut opt = AdamW::new(cfg);
    let expected = get(&g, "bert.loss_per_step").values.clone();
    for want in expected.iter() {
        let (loss, _, _) = bert_loss(&model, &x, pos.clone(), labels.clone());
        let got: f32 = loss.clone().into_scalar::<f32>();
        assert!((got - want).abs() < 1e-4, "loss {got} vs {want}");
        let grads = Grads::collect(&loss.backward(), |w| model.walk(w));
        opt.update(5e-4, &grads, |w| model.walk(w));
    }
    let mut ex = trueneg::interop::Exporter::default();
    model.walk(&mut ex);
    assert_eq!(ex.tensors.len(), count(&g, "bert.after_3_adamw."));
    for (name, t) in &ex.tensors {
        assert_close(
            t,
            get(&g, &format!("bert.after_3_adamw.{name}")),
            1e-5,
            &format!("{name} ({multi_tensor:?})"),
        );
    }
}

fn load_electra(d: &Device) -> Electra {
    let gc = read_hf_config(&golden().join("electra_generator/config.json")).unwrap();
    let dc = read_hf_config(&golden().join("electra_discriminator/config.json")).unwrap();
    let mut model = Electra::new(
        &dc.encoder.without_dropout(),
        &gc.encoder.without_dropout(),
        d,
    );
    let disc = read_safetensors(&golden().join("electra_discriminator/model.safetensors")).unwrap();
    let gen_w = read_safetensors(&golden().join("electra_generator/model.safetensors")).unwrap();
    let mut merged = disc.clone();
    for (k, v) in gen_w.tensors {
        if !k.starts_with("electra.embeddings.") {
            merged.tensors.insert(format!("generator.{k}"), v);
        }
    }
    let mut loader = Loader::new(&merged, d);
    model.walk(&mut loader);
    loader.finish().unwrap();
    model
}

#[test]
fn electra_generator_matches_transformers() {
    electra_generator_matches_transformers_on(device());
}

/// The LibTorch path: attention, LayerNorm, GELU and the cross-entropy as LibTorch calls.
#[cfg(feature = "tch")]
#[test]
fn electra_generator_matches_transformers_on_libtorch() {
    electra_generator_matches_transformers_on(libtorch());
}

fn electra_generator_matches_transformers_on(d: Device) {
    let g = read_safetensors(&golden().join("electra_golden.safetensors")).unwrap();
    let model = load_electra(&d);
    let x = inputs(&g, "inputs.masked_input_ids", &d);
    let emb = model
        .embeddings
        .forward(x.ids.clone(), x.token_types.clone());
    assert_close(
        &host(emb),
        get(&g, "gen.embeddings_output"),
        1e-4,
        "gen embeddings",
    );
    let states = model.generator_hidden_states(&x);
    assert_eq!(
        states.len(),
        config("electra_generator").encoder.num_hidden_layers + 1
    );
    for (i, s) in states.iter().enumerate() {
        assert_close(
            &host(s.clone()),
            get(&g, &format!("gen.hidden_states.{i}")),
            1e-4,
            "gen hidden",
        );
    }
    let (all, [b, l]) = all_positions(&g, &d);
    let vocab = config("electra_generator").encoder.vocab_size;
    let logits = model.generator_logits(&x, all).reshape([b, l, vocab]);
    assert_close(
        &host(logits.clone()),
        get(&g, "gen.logits"),
        1e-4,
        "gen logits",
    );
    let argmax: Vec<i64> = logits
        .argmax(2)
        .into_data()
        .convert::<i64>()
        .try_into_vec::<i64>()
        .unwrap();
    let want: Vec<i64> = get(&g, "gen.argmax")
        .values
        .iter()
        .map(|v| *v as i64)
        .collect();
    assert_eq!(argmax, want);

    let (pos, labels) = masked(&g, &d);
    let loss = masked_cross_entropy(model.generator_logits(&x, pos), labels, None);
    let got: f32 = loss.clone().into_scalar::<f32>();
    assert!(
        (got - scalar(get(&g, "gen.loss"))).abs() < 1e-4,
        "gen loss {got}"
    );
    let mut model = model;
    let grads = Grads::collect(&loss.backward(), |w| model.walk(w));
    let n = check_grads(&grads, &g, "gen.grad.", |n| {
        if let Some(rest) = n.strip_prefix("generator.") {
            Some(rest.to_string())
        } else if n.starts_with("electra.embeddings.") {
            Some(n.to_string())
        } else {
            None
        }
    });
    assert_eq!(n, count(&g, "gen.grad."), "every golden gradient checked");
    // The generator's own parameters and the shared embeddings: all of them.
    let disc = read_safetensors(&golden().join("electra_discriminator/model.safetensors")).unwrap();
    let generator =
        parameters(|e| model.walk(e)) - count(&disc, "") + count(&disc, "electra.embeddings.");
    assert_eq!(n, generator);
}

#[test]
fn electra_discriminator_matches_transformers() {
    electra_discriminator_matches_transformers_on(device());
}

/// The LibTorch path: attention, LayerNorm, GELU and the cross-entropy as LibTorch calls.
#[cfg(feature = "tch")]
#[test]
fn electra_discriminator_matches_transformers_on_libtorch() {
    electra_discriminator_matches_transformers_on(libtorch());
}

fn electra_discriminator_matches_transformers_on(d: Device) {
    let g = read_safetensors(&golden().join("electra_golden.safetensors")).unwrap();
    let model = load_electra(&d);
    let x = inputs(&g, "disc.input_ids", &d);
    let emb = model
        .embeddings
        .forward(x.ids.clone(), x.token_types.clone());
    assert_close(
        &host(emb),
        get(&g, "disc.embeddings_output"),
        1e-4,
        "disc embeddings",
    );
    let states = model.discriminator_hidden_states(&x);
    assert_eq!(
        states.len(),
        config("electra_discriminator").encoder.num_hidden_layers + 1
    );
    for (i, s) in states.iter().enumerate() {
        assert_close(
            &host(s.clone()),
            get(&g, &format!("disc.hidden_states.{i}")),
            1e-4,
            "disc hidden",
        );
    }
    let logits = model.discriminator_logits(&x);
    assert_close(
        &host(logits.clone()),
        get(&g, "disc.logits"),
        1e-4,
        "disc logits",
    );

    let labels = ints::<2>(&g, "disc.labels", &d).float();
    let weights = ints::<2>(&g, "inputs.attention_mask", &d).float();
    let loss = replaced_token_loss(logits, labels, weights);
    let got: f32 = loss.clone().into_scalar::<f32>();
    assert!(
        (got - scalar(get(&g, "disc.loss"))).abs() < 1e-4,
        "disc loss {got}"
    );
    let total = scalar(get(&g, "gen.loss")) + 50.0 * got;
    assert!((total - scalar(get(&g, "electra.loss"))).abs() < 1e-3);

    let mut model = model;
    let grads = Grads::collect(&loss.backward(), |w| model.walk(w));
    let n = check_grads(&grads, &g, "disc.grad.", |n| {
        (!n.starts_with("generator.")).then(|| n.to_string())
    });
    assert_eq!(n, count(&g, "disc.grad."), "every golden gradient checked");
    let disc = read_safetensors(&golden().join("electra_discriminator/model.safetensors")).unwrap();
    assert_eq!(
        n,
        disc.tensors.len(),
        "every discriminator parameter has a gradient"
    );
}
