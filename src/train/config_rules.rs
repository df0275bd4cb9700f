//! The range rules of the pre-training config's sections, checked together by
//! [`PretrainConfig::validate`] (defined here, with [`PretrainConfig::recordable`]): each names its key, its
//! value and the rule in words.

use super::config::ModelKind;
use super::config::{DataSection, ModelSection, PretrainConfig, TrainSection};
use super::optimizer::AdamWConfig;
use crate::device::{DeviceKind, DeviceName};
use crate::error::{Rule, below_one, count, non_negative, positive, rule, unit};
use crate::text::masking::MaskingConfig;
use crate::{Error, Result};

/// The `[model]` section's rules.
fn model_rules(md: &ModelSection) -> Vec<Rule> {
    let generator = md.generator(1);
    let (gen_hidden, gen_heads) = (generator.hidden_size, generator.num_attention_heads);
    let e = &md.encoder;
    let mut rules: Vec<Rule> = e.rules().into_iter().map(|r| r.under("model.")).collect();
    rules.extend([
        rule(
            "model.type_vocab_size",
            e.type_vocab_size,
            e.type_vocab_size >= 2,
            "must be >= 2 (examples have two segments)",
        ),
        rule(
            "model.generator_size",
            md.generator_size,
            md.generator_size > 0.0 && md.generator_size <= 1.0,
            "must be in (0, 1]",
        ),
        rule(
            "model.generator_size",
            md.generator_size,
            md.kind == ModelKind::Bert || rounds_to_nothing(md).is_none(),
            format!(
                "scales the generator's {} to nothing (it would be rounded up to 1); give a larger fraction",
                rounds_to_nothing(md).unwrap_or_default()
            ),
        ),
        rule(
            "model.generator_size",
            md.generator_size,
            md.kind == ModelKind::Bert || gen_hidden.is_multiple_of(gen_heads),
            format!(
                "gives a generator of {gen_hidden} hidden units and {gen_heads} heads, which do not divide"
            ),
        ),
    ]);
    rules
}

/// The first of the generator's sizes that `model.generator_size` scales below one half (which
/// rounds to zero).
fn rounds_to_nothing(md: &ModelSection) -> Option<String> {
    let e = &md.encoder;
    [
        ("hidden size", e.hidden_size),
        ("attention heads", e.num_attention_heads),
        ("intermediate size", e.intermediate_size),
    ]
    .into_iter()
    .find(|(_, x)| (*x as f64 * md.generator_size).round() < 1.0)
    .map(|(what, x)| format!("{what} ({x})"))
}

/// The `[data]` section's rules (its length against the model's positions).
fn data_rules(d: &DataSection, md: &ModelSection) -> Vec<Rule> {
    vec![
        count("data.batch_size", d.batch_size),
        rule(
            "data.max_seq_len",
            d.max_seq_len,
            (8..=md.encoder.max_position_embeddings).contains(&d.max_seq_len),
            format!(
                "must be in [8, model.max_position_embeddings = {}]",
                md.encoder.max_position_embeddings
            ),
        ),
        rule(
            "data.default_corpus_vocab",
            d.default_corpus_vocab,
            d.default_corpus_vocab >= 100,
            "must be >= 100",
        ),
    ]
}

/// The `[masking]` section's rules.
fn masking_rules(m: &MaskingConfig) -> Vec<Rule> {
    vec![
        rule(
            "masking.prob",
            m.prob,
            m.prob > 0.0 && m.prob <= 1.0,
            "must be in (0, 1]",
        ),
        unit("masking.mask_frac", m.mask_frac),
        rule(
            "masking.random_frac",
            m.random_frac,
            (0.0..=1.0).contains(&m.random_frac) && m.mask_frac + m.random_frac <= 1.0 + 1e-9,
            "must be in [0, 1], with masking.mask_frac + masking.random_frac <= 1",
        ),
        count("masking.max_predictions", m.max_predictions),
    ]
}

/// The `[optimizer]` section's rules.
fn optimizer_rules(o: &AdamWConfig) -> Vec<Rule> {
    vec![
        positive("optimizer.lr", o.lr),
        below_one("optimizer.beta1", o.beta1),
        below_one("optimizer.beta2", o.beta2),
        positive("optimizer.eps", o.eps),
        non_negative("optimizer.weight_decay", o.weight_decay),
        rule(
            "optimizer.max_grad_norm",
            o.max_grad_norm,
            o.max_grad_norm.is_finite() && o.max_grad_norm >= 0.0,
            "must be >= 0 (0 = no clipping)",
        ),
    ]
}

/// Device names as a config writes them: `["cpu", "cpu"]`.
fn shown(devices: &[DeviceName]) -> String {
    let names: Vec<String> = devices.iter().map(|d| d.to_string()).collect();
    format!("{names:?}")
}

/// The `[train]` section's rules, and the global batch against the number of devices.
fn train_rules(t: &TrainSection, d: &DataSection, replicas: usize) -> Vec<Rule> {
    vec![
        count("train.steps", t.steps as usize),
        count("train.grad_accum", t.grad_accum),
        non_negative("train.disc_weight", t.disc_weight),
        count("train.checkpoint_every", t.checkpoint_every as usize),
        count("train.log_every", t.log_every as usize),
        count("train.eval_batches", t.eval_batches),
        rule(
            "train.eval_every",
            t.eval_every.to_string(),
            t.eval_every.is_multiple_of(t.log_every.max(1)),
            format!("must be a multiple of train.log_every = {}", t.log_every),
        ),
        rule(
            "train.eval_every",
            t.eval_every.to_string(),
            t.eval_every == 0 || d.eval_shards.is_some(),
            "needs data.eval_shards (a folder `prepare` wrote with the run's tokenizer)",
        ),
        rule(
            "train.devices",
            shown(&t.devices),
            t.devices.is_empty() || t.device == DeviceName::CPU || t.devices[0] == t.device,
            format!(
                "takes the place of train.device = \"{}\"; set one of them",
                t.device
            ),
        ),
        rule(
            "data.batch_size",
            d.batch_size,
            d.batch_size.is_multiple_of(replicas),
            format!(
                "must be divisible by the number of devices ({replicas}): each replica takes an equal share of the global batch"
            ),
        ),
    ]
}

/// What the fixed-shape and recorded (`records`) steps (`train::fixed_step`) need of a config.
fn fixed_step_rules(cfg: &PretrainConfig, records: bool) -> Vec<Rule> {
    let t = &cfg.train;
    let key = if records {
        "train.cuda_graph"
    } else {
        "train.static_shapes"
    };
    let device = t.devices.first().unwrap_or(&t.device);
    let libtorch_cuda = device.kind == DeviceKind::LibTorchCuda;
    let on = |ok: bool| !(t.static_shapes || records) || ok;
    let step = super::steps::kind_of(cfg.objective.kind);
    vec![
        rule(
            key,
            "true",
            on(step.recordable()),
            format!(
                "needs a step with a fixed-shape form; objective.kind = {:?} trains {}, which has none (set it to false)",
                cfg.objective.kind.name(),
                step.name()
            ),
        ),
        rule(
            key,
            "true",
            on(!cfg.objective.parts.hc.hc_multi_piece),
            "needs every count on the device; objective.hc_multi_piece spells words on the host (set one of them to false)",
        ),
        rule(
            key,
            "true",
            on(t.devices.len() <= 1),
            "trains one replica per process; host replicas (train.devices) are for testing the unrecorded step",
        ),
        rule(
            "train.cuda_graph",
            "true",
            !records || libtorch_cuda,
            format!(
                "records on a libtorch-cuda device, not on \"{device}\" (train.static_shapes runs the same fixed-shape step anywhere)"
            ),
        ),
        rule(
            "train.cuda_graph",
            "true",
            !records || t.grad_accum == 1,
            format!(
                "records one micro-step per step, but train.grad_accum = {}; set it to 1 (a larger data.batch_size, or train.cuda_graph = false)",
                t.grad_accum
            ),
        ),
    ]
}

impl PretrainConfig {
    /// Whether the recorded step can train this config (what `train.cuda_graph = true` needs).
    pub fn recordable(&self) -> bool {
        fixed_step_rules(self, true).iter().all(|r| r.ok)
    }

    /// Whether a run records its step as a CUDA graph (`train.cuda_graph`): as set, or, unset,
    /// wherever this build can record (`kernels::cuda_graph::available`) and the recorded step
    /// can run (see [`PretrainConfig::records_where`]).
    pub fn records(&self) -> bool {
        self.records_where(crate::kernels::cuda_graph::available())
    }

    /// [`PretrainConfig::records`] for a build that can record CUDA graphs or not (`graphs`):
    /// unset, where the recorded step can train the config ([`PretrainConfig::recordable`]:
    /// one `libtorch-cuda` device, a step with a fixed-shape form and every count on the
    /// device, no gradient accumulation; and, `FixedStep::new`, a world of one process).
    pub fn records_where(&self, graphs: bool) -> bool {
        self.train
            .cuda_graph
            .unwrap_or_else(|| graphs && self.recordable())
    }

    /// What the run asks of its fixed-shape step (`train::fixed_step`).
    pub fn fixed_plan(&self) -> crate::train::fixed_step::FixedPlan {
        crate::train::fixed_step::FixedPlan {
            static_shapes: self.train.static_shapes,
            records: self.records(),
            asked: self.train.cuda_graph.is_some(),
            slots: self.masking.max_predictions.min(self.data.max_seq_len),
        }
    }

    /// What the micro-step loop takes from the config.
    pub fn loop_settings(&self) -> crate::train::micro_steps::LoopSettings {
        crate::train::micro_steps::LoopSettings {
            seed: self.train.seed,
            grad_accum: self.train.grad_accum,
            max_grad_norm: self.optimizer.max_grad_norm,
        }
    }

    /// Checks every value against its range; the error names the first bad field, its value
    /// and the rule.
    pub fn validate(&self, origin: &str) -> Result<()> {
        let rules = model_rules(&self.model)
            .into_iter()
            .chain(data_rules(&self.data, &self.model))
            .chain(masking_rules(&self.masking))
            .chain(optimizer_rules(&self.optimizer))
            .chain(train_rules(
                &self.train,
                &self.data,
                self.replica_devices().len(),
            ))
            .chain(super::phases::phase2_rules(self))
            .chain(fixed_step_rules(self, self.train.cuda_graph == Some(true)));
        let bad = match rules.into_iter().find(|r| !r.ok) {
            Some(r) => Some((r.field.to_string(), r.value, r.why)),
            None => self.objective.validate().err(),
        };
        match bad {
            Some((field, value, why)) => Err(Error::Config(format!(
                "{origin}: field `{field}` = {value} {why}"
            ))),
            None => Ok(()),
        }
    }
}
