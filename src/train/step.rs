//! One pre-training micro-step: forward passes and the loss of the configured objective.
//!
//! BERT: `L = L_mlm` (+ SR / HC). ELECTRA: the generator predicts the masked tokens, samples
//! replacements (temperature 1, `kernels::sampling`), the discriminator detects them:
//! `L = L_G + λ·L_D`. The objective's parts (`crate::objective`) weight `L_mlm` / `L_G` (Hard
//! Correction), add their terms after it (Soft Regularization) and may relabel the
//! discriminator's targets.

use burn::prelude::*;

use super::config::PretrainConfig;
use super::model::{Net, PretrainModel};
use crate::kernels::device_ids;
use crate::model::Inputs;
use crate::objective::terms::add_device_counters;
use crate::objective::{
    DeviceCounters, Logged, MlmStep, Objective, Predictions, StepLoss, Term, masked_cross_entropy,
    replaced_token_loss,
};
use crate::text::batches::Batch;
use crate::text::masking::Masked;

pub(crate) fn ints1(values: impl Iterator<Item = i64>, device: &Device) -> Tensor<1, Int> {
    let v: Vec<i64> = values.collect();
    let n = v.len();
    Tensor::from_data(TensorData::new(v, [n]), device)
}

/// The model inputs of `batch` with token ids `ids` (the batch's own, or a corrupted copy).
pub(crate) fn inputs(batch: &Batch, ids: &[u32], device: &Device) -> Inputs {
    with_mask(batch, ids, !batch.is_dense(), device)
}

/// [`inputs`], with the attention mask uploaded even where every token is real (`mask`): a
/// fixed-shape step's inputs are the same tensors every step.
fn with_mask(batch: &Batch, ids: &[u32], mask: bool, device: &Device) -> Inputs {
    let shape = [batch.batch, batch.len];
    Inputs {
        ids: device_ids(ids, shape, device),
        token_types: device_ids(&batch.token_types, shape, device),
        attention_mask: mask.then(|| device_ids(&batch.attention_mask, shape, device)),
    }
}

/// What one training step reads and draws from, besides the model.
pub struct StepInputs<'a> {
    pub cfg: &'a PretrainConfig,
    pub objective: &'a Objective,
    pub special: crate::text::tokenizer::SpecialIds,
    pub vocab: usize,
}

/// The seed of micro-step `micro` of step `step`: its masking, and its replicas' dropout and
/// sampling (`Replicas::forward`).
pub fn micro_seed(cfg: &PretrainConfig, step: u64, micro: usize) -> u64 {
    cfg.train.seed.wrapping_mul(1_000_003) ^ (step << 8) ^ micro as u64
}

/// A masked micro-batch on the device: what the step uploads, and all it uploads.
#[derive(Clone)]
pub struct Uploaded {
    /// The model inputs (the masked ids).
    pub x: Inputs,
    /// The masked positions in the flattened batch, [n].
    pub positions: Tensor<1, Int>,
    /// The gold tokens there, [n].
    pub labels: Tensor<1, Int>,
    /// A fixed-shape step's: which slots are masked positions (1) or padding (0), [n]
    /// (`Masked::padded`).
    pub valid: Option<Tensor<1>>,
}

/// Uploads the masked micro-batch `batch`/`m` to `device`. A fixed-shape masking
/// (`Masked::padded`) uploads the attention mask always, and its slots' validity.
pub fn upload(batch: &Batch, m: &Masked, device: &Device) -> Uploaded {
    let fixed = m.valid.is_some();
    Uploaded {
        x: with_mask(batch, &m.input_ids, fixed || !batch.is_dense(), device),
        positions: ints1(m.positions.iter().map(|&p| p as i64), device),
        labels: ints1(m.labels.iter().map(|&l| l as i64), device),
        valid: m.valid.as_ref().map(|v| {
            let w: Vec<f32> = v.iter().map(|&x| x as u8 as f32).collect();
            Tensor::from_data(TensorData::new(w, [v.len()]), device)
        }),
    }
}

impl Uploaded {
    /// Copies `new` (the same shapes) into these tensors' memory, on LibTorch devices: how a
    /// recorded step's inputs change (`kernels::cuda_graph`).
    pub fn copy_from(&self, new: &Uploaded) {
        use crate::kernels::cuda_graph::copy_into;
        copy_into(&self.x.ids, &new.x.ids);
        copy_into(&self.x.token_types, &new.x.token_types);
        copy_into(&self.positions, &new.positions);
        copy_into(&self.labels, &new.labels);
        if let (Some(a), Some(b)) = (&self.x.attention_mask, &new.x.attention_mask) {
            copy_into(a, b);
        }
        if let (Some(a), Some(b)) = (&self.valid, &new.valid) {
            copy_into(a, b);
        }
    }
}

/// On padding slots (`valid` 0) the label instead of `predicted`.
fn label_on_padding(
    predicted: Tensor<1, Int>,
    labels: &Tensor<1, Int>,
    valid: &Tensor<1>,
) -> Tensor<1, Int> {
    let keep = valid.clone().int();
    labels.clone() + (predicted - labels.clone()) * keep
}

/// Forward pass and loss of one masked micro-batch: `L_mlm` (weighted by the objective's
/// parts), their terms, and for ELECTRA `λ·L_D`. After the masked batch is uploaded nothing is
/// read back: predictions, samples, weights, counts and logged values stay on the device.
pub fn step_loss(
    model: &PretrainModel,
    cfg: &PretrainConfig,
    objective: &Objective,
    batch: &Batch,
    m: &Masked,
    device: &Device,
) -> StepLoss {
    step_loss_uploaded(
        model,
        cfg,
        objective,
        batch,
        m,
        upload(batch, m, device),
        device,
    )
}

/// [`step_loss`] of a micro-batch already on the device (`up`, [`upload`]): nothing is
/// uploaded or read back, as a recorded step (CUDA graph) requires.
pub fn step_loss_uploaded(
    model: &PretrainModel,
    cfg: &PretrainConfig,
    objective: &Objective,
    batch: &Batch,
    m: &Masked,
    up: Uploaded,
    device: &Device,
) -> StepLoss {
    let Uploaded {
        x,
        positions,
        labels,
        valid,
    } = up;

    let (logits, words) = match &model.net {
        Net::Bert(b) => (
            b.mlm_logits(&x, positions.clone()),
            b.embeddings.word_matrix(),
        ),
        Net::Electra(e) => (
            e.generator_logits(&x, positions.clone()),
            e.embeddings.word_matrix(),
        ),
    };
    let mut argmax = logits.clone().detach().argmax(1).squeeze_dim::<1>(1);
    // ELECTRA's `masked_lm_accuracy`: the top prediction is the gold token.
    let hits = argmax.clone().equal(labels.clone()).float();
    let mlm_hits = match &valid {
        Some(v) => (hits * v.clone()).sum(),
        None => hits.sum(),
    };
    let mut sampled = match &model.net {
        Net::Electra(_) => Some(crate::kernels::sampling::sample(&logits)),
        Net::Bert(_) => None,
    };
    if let Some(v) = &valid {
        argmax = label_on_padding(argmax, &labels, v);
        sampled = sampled.map(|x| label_on_padding(x, &labels, v));
    }
    let encode = |x: &Inputs| model.net.mlm_encode(x);
    let discriminator = |x: &Inputs| model.net.encode(x);
    let predictions = Predictions {
        positions,
        labels: labels.clone(),
        argmax,
        sampled,
        valid: valid.clone(),
    };
    let mut s = MlmStep::new(batch, m, &x, predictions, words, &encode, device);
    s.discriminator_encode =
        matches!(model.net, Net::Electra(_)).then_some(&discriminator as &dyn Fn(&Inputs) -> _);

    // A position is kept when every part that weights the positions keeps it (and a padding
    // slot never is).
    let mut weights: Option<Tensor<1>> = valid;
    let mut counters = DeviceCounters::new();
    for p in &objective.parts {
        if let Some((w, c)) = p.mlm_weights(&s) {
            add_device_counters(&mut counters, c);
            weights = Some(match weights {
                Some(all) => all * w,
                None => w,
            });
        }
    }
    // The loss averages over the positions kept (weight 1), a count the device holds.
    let mlm = match weights {
        Some(w) => {
            let kept = w.clone().sum();
            Term::counted(masked_cross_entropy(logits, labels, Some(w)), kept)
        }
        None => Term::new(
            masked_cross_entropy(logits, labels, None),
            m.positions.len(),
        ),
    };
    let mut loss = StepLoss::new("mlm_loss", mlm);
    loss.counters = counters;
    loss.log(
        "mlm_accuracy",
        Logged::Rate {
            hits: mlm_hits,
            of: s.masked_count(),
        },
    );
    for p in &objective.parts {
        p.add_terms(&s, &mut loss);
    }

    if let Net::Electra(e) = &model.net {
        discriminator_loss(e, cfg, objective, &s, &mut loss);
    }
    loss
}

/// ELECTRA's discriminator on the generator's sampled tokens: `λ·L_D` joins `loss`, with its
/// accuracy over the real tokens. The objective's parts may relabel the targets. Inputs,
/// targets and weights are built on the device from the samples.
fn discriminator_loss(
    e: &crate::model::electra::Electra,
    cfg: &PretrainConfig,
    objective: &Objective,
    s: &MlmStep,
    loss: &mut StepLoss,
) {
    let batch = s.batch;
    let sampled = s.sampled.clone().expect("ELECTRA samples replacements");
    let shape = [batch.batch, batch.len];
    let n = batch.batch * batch.len;
    let mut replaced = sampled.clone().not_equal(s.labels.clone()).int();
    let mut kept = replaced.ones_like();
    let mut drops = false;
    for p in &objective.parts {
        (replaced, kept) = p.discriminator_labels(s, &sampled, replaced, kept);
        drops |= p.drops_discriminator_tokens();
    }
    let dx = Inputs {
        ids: s.filled(sampled),
        ..s.inputs.clone()
    };
    let d_logits = e.discriminator_logits(&dx);
    let mask = s.attention_mask().reshape([n]);
    if let Some(v) = &s.valid {
        // A padding slot keeps its token's own weight (its sample is its label: no change).
        let own = mask.clone().select(0, s.positions.clone());
        kept = own.clone() + (kept - own) * v.clone().int();
    }
    let target = s
        .at_positions(mask.zeros_like(), replaced)
        .reshape(shape)
        .float();
    let w = s.at_positions(mask, kept).reshape(shape).float();
    let correct = (d_logits
        .clone()
        .detach()
        .greater_elem(0.0)
        .float()
        .equal(target.clone())
        .float()
        * w.clone())
    .sum();
    let value = replaced_token_loss(d_logits, target, w.clone());
    // Without a part that drops tokens the count is the real tokens, known on the host (but
    // for a fixed-shape step, whose batch changes under a recorded step).
    let disc = if drops || s.valid.is_some() {
        Term::counted(value, w.sum())
    } else {
        Term::new(value, batch.real_tokens())
    };
    loss.add("disc_loss", disc, cfg.train.disc_weight);
    loss.log(
        "disc_accuracy",
        Logged::Rate {
            hits: correct,
            of: s.real_tokens(),
        },
    );
}
