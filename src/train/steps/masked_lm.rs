//! The masked-LM step: forward passes and the loss of the configured objective on packed
//! examples.
//!
//! BERT: `L = L_mlm` (+ SR / HC). ELECTRA: the generator predicts the masked tokens, samples
//! replacements (temperature 1, `kernels::sampling`), the discriminator detects them:
//! `L = L_G + λ·L_D`. The objective's parts (`crate::objective`) weight `L_mlm` / `L_G` (Hard
//! Correction), add their terms after it (Soft Regularization) and may relabel the
//! discriminator's targets.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;

use burn::prelude::*;
use rand_chacha::ChaCha8Rng;

use super::correction_samples::CorrectionSamples;
use super::{MicroBatch, StepAt, StepKind, TrainingStep};
use crate::Result;
use crate::model::Inputs;
use crate::objective::terms::add_device_counters;
use crate::objective::{
    Between, BetweenSteps, Counters, DeviceCounters, Logged, MlmStep, Objective, Predictions,
    Setup, StepLoss, Term, replaced_token_loss, weighted_mean,
};
use crate::text::batches::Batch;
use crate::text::masking::{Masked, MaskingConfig, mask_batch};
use crate::text::shards::{DataKind, ShardSet};
use crate::text::tokenizer::SpecialIds;
use crate::train::config::StepSettings;
use crate::train::fixed_step::Pinned;
use crate::train::model::{Net, PretrainModel};
use crate::train::upload::{Uploaded, upload};

/// The masked-LM step's declarations: packed examples, no heads of its own, recordable.
pub struct Kind;

pub const KIND: Kind = Kind;

impl StepKind for Kind {
    fn name(&self) -> &'static str {
        "the masked-LM step"
    }

    fn data(&self) -> DataKind {
        DataKind::Packed
    }

    fn recordable(&self) -> bool {
        true
    }
}

/// How a step masks its sequences: the config's masking, the corpus's special ids and
/// vocabulary (the random replacements' range).
#[derive(Clone, Debug)]
pub struct MaskingContext {
    pub masking: MaskingConfig,
    pub special: SpecialIds,
    pub vocab: usize,
}

impl MaskingContext {
    /// `masking` with the special ids and vocabulary of `shards`' tokenizer.
    pub fn new(masking: &MaskingConfig, shards: &ShardSet) -> Self {
        Self {
            masking: masking.clone(),
            special: shards.manifest.special_ids,
            vocab: shards.manifest.vocab_size,
        }
    }

    /// The masking of `batch`, drawn from `rng`.
    pub fn mask(&self, batch: &Batch, rng: &mut ChaCha8Rng) -> Masked {
        mask_batch(batch, &self.masking, &self.special, self.vocab, rng)
    }
}

/// The masked-LM step of a run: its masking, the objective's parts and ELECTRA's
/// discriminator weight λ.
pub struct MaskedLmStep {
    pub context: MaskingContext,
    pub objective: Objective,
    pub disc_weight: f64,
    /// Samples of Hard Correction's decisions while the run trains.
    pub samples: Option<CorrectionSamples>,
}

/// A masked micro-batch of packed examples; `uploaded` holds its device tensors where a
/// fixed-shape step placed them already.
#[derive(Clone)]
pub struct MlmBatch {
    pub batch: Batch,
    pub masked: Masked,
    pub uploaded: Option<Uploaded>,
}

impl MicroBatch for MlmBatch {
    fn rows(&self) -> usize {
        self.batch.batch
    }

    fn masked(&self) -> usize {
        self.masked.positions.len()
    }

    fn tokens(&self) -> usize {
        self.batch.batch * self.batch.len
    }

    fn take_rows(&self, rows: Range<usize>) -> Self {
        Self {
            masked: self.masked.rows(self.batch.len, rows.clone()),
            batch: self.batch.rows(rows),
            uploaded: None,
        }
    }
}

impl MaskedLmStep {
    /// The step of a run of `settings`: its objective's parts set up with `setup`.
    pub fn build(
        settings: &StepSettings,
        context: MaskingContext,
        setup: &mut Setup,
    ) -> Result<Self> {
        let mut step = Self::new(
            context,
            Objective::build(&settings.objective, setup)?,
            settings.disc_weight,
        );
        step.samples = CorrectionSamples::of(&settings.objective);
        Ok(step)
    }

    pub fn new(context: MaskingContext, objective: Objective, disc_weight: f64) -> Self {
        Self {
            context,
            objective,
            disc_weight,
            samples: None,
        }
    }

    /// Forward pass and loss of the masked micro-batch `batch` / `m`: `L_mlm` (weighted by the
    /// objective's parts), their terms, and for ELECTRA `λ·L_D`. After the masked batch is
    /// uploaded nothing is read back: predictions, samples, weights, counts and logged values
    /// stay on the device.
    pub fn loss_of(
        &self,
        model: &PretrainModel,
        batch: &Batch,
        m: &Masked,
        device: &Device,
    ) -> StepLoss {
        self.loss_on_device(model, batch, m, upload(batch, m, device), device)
    }
}

impl TrainingStep for MaskedLmStep {
    type Batch = MlmBatch;

    fn kind(&self) -> &'static dyn StepKind {
        &KIND
    }

    fn batch(
        &self,
        shards: &ShardSet,
        indices: &[usize],
        rng: &mut ChaCha8Rng,
    ) -> Result<MlmBatch> {
        let examples = shards.examples(indices)?;
        let batch = Batch::from_examples(&examples, shards.manifest.special_ids.pad);
        let masked = self.context.mask(&batch, rng);
        Ok(MlmBatch {
            batch,
            masked,
            uploaded: None,
        })
    }

    fn loss(&self, model: &PretrainModel, b: &MlmBatch, device: &Device) -> StepLoss {
        let up = match &b.uploaded {
            Some(up) => up.clone(),
            None => upload(&b.batch, &b.masked, device),
        };
        self.loss_on_device(model, &b.batch, &b.masked, up, device)
    }

    fn fixed(&self, b: MlmBatch, pinned: &mut Pinned, device: &Device) -> Option<MlmBatch> {
        let masked = b.masked.padded(&b.batch, pinned.slots);
        let up = pinned.inputs_for(upload(&b.batch, &masked, device));
        Some(MlmBatch {
            batch: b.batch,
            masked,
            uploaded: Some(up),
        })
    }

    fn window_metrics(&self, counters: &Counters) -> BTreeMap<String, serde_json::Value> {
        self.objective.window_metrics(counters)
    }

    fn progress(&self, counters: &Counters) -> String {
        self.objective.progress(counters)
    }

    fn between_steps(&self, at: &StepAt) -> Result<BetweenSteps> {
        let words = || at.model.word_matrix();
        let between = Between {
            done: at.done,
            words: &words,
        };
        let mut out = self.objective.between_steps(&between)?;
        let due = self
            .samples
            .as_ref()
            .filter(|s| at.main && s.due(at.done, at.log_every));
        if let (Some(s), Some(table)) = (due, self.objective.synonyms()) {
            let mut draws = s.draws(at);
            let indices = s.indices(at.shards.len(), &mut draws);
            let b = self.batch(at.shards, &indices, &mut draws)?;
            out.records
                .push(s.record(at, &b.batch, &b.masked, &table, &mut draws)?);
        }
        Ok(out)
    }

    fn save_state(&self, dir: &Path) -> Result<()> {
        self.objective.save_state(dir)
    }

    fn restore_state(&self, dir: &Path, at: &StepAt) -> Result<()> {
        let words = || at.model.word_matrix();
        let between = Between {
            done: at.done,
            words: &words,
        };
        self.objective.restore_state(dir, &between)
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

impl MaskedLmStep {
    /// [`MaskedLmStep::loss_of`] a masked micro-batch already on the device (`up`, [`upload`]):
    /// nothing is uploaded or read back, as a recorded step (CUDA graph) requires.
    pub fn loss_on_device(
        &self,
        model: &PretrainModel,
        batch: &Batch,
        m: &Masked,
        up: Uploaded,
        device: &Device,
    ) -> StepLoss {
        let objective = &self.objective;
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
        // The per-position loss and the top prediction from one pass over the logits.
        let scored = crate::kernels::cross_entropy_and_argmax(logits.clone(), labels.clone());
        let mut argmax = scored.argmax;
        // ELECTRA's `masked_lm_accuracy`: the top prediction is the gold token.
        let hits = argmax.clone().equal(labels.clone()).float();
        let mlm_hits = match &valid {
            Some(v) => (hits * v.clone()).sum(),
            None => hits.sum(),
        };
        let mut sampled = match &model.net {
            Net::Electra(_) => Some(crate::kernels::sample(&logits)),
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
                Term::counted(weighted_mean(scored.nll, Some(w)), kept)
            }
            None => Term::new(weighted_mean(scored.nll, None), m.positions.len()),
        };
        let mut loss = StepLoss::new(crate::objective::mlm::LOSS, mlm);
        loss.counters = counters;
        loss.log(
            crate::objective::mlm::ACCURACY,
            Logged::Rate {
                hits: mlm_hits,
                of: s.masked_count(),
            },
        );
        for p in &objective.parts {
            p.add_terms(&s, &mut loss);
        }

        if let Net::Electra(e) = &model.net {
            discriminator_loss(e, self, &s, &mut loss);
        }
        loss
    }
}

/// ELECTRA's discriminator on the generator's sampled tokens: `λ·L_D` joins `loss`, with its
/// accuracy over the real tokens. The objective's parts may relabel the targets. Inputs,
/// targets and weights are built on the device from the samples.
fn discriminator_loss(
    e: &crate::model::electra::Electra,
    step: &MaskedLmStep,
    s: &MlmStep,
    loss: &mut StepLoss,
) {
    let objective = &step.objective;
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
    loss.add(crate::objective::rtd::LOSS, disc, step.disc_weight);
    loss.log(
        crate::objective::rtd::ACCURACY,
        Logged::Rate {
            hits: correct,
            of: s.real_tokens(),
        },
    );
}
