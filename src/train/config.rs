//! Pre-training configuration: TOML presets (embedded), files, and `--set key=value` overrides.
//! Unknown keys are errors that name the key and the file.

use crate::device::DeviceName;
use crate::io::PathQuery;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::optimizer::AdamWConfig;
use crate::model::EncoderConfig;
use crate::objective::ObjectiveConfig;
use crate::text::masking::MaskingConfig;
use crate::{Error, Result};

/// Whether `source` names a preset rather than a file.
pub fn is_preset(source: &str) -> bool {
    PRESETS.iter().any(|(n, _)| *n == source)
}

pub const PRESETS: [(&str, &str); 7] = [
    ("tiny", include_str!("../../configs/tiny.toml")),
    (
        "electra-small",
        include_str!("../../configs/electra-small.toml"),
    ),
    (
        "electra-base",
        include_str!("../../configs/electra-base.toml"),
    ),
    ("bert-base", include_str!("../../configs/bert-base.toml")),
    (
        "electra-base-continue",
        include_str!("../../configs/electra-base-continue.toml"),
    ),
    (
        "bert-base-continue",
        include_str!("../../configs/bert-base-continue.toml"),
    ),
    ("hc-acting", include_str!("../../configs/hc-acting.toml")),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
    Bert,
    Electra,
}

/// The `[model]` section: the kind, the encoder's shape (the keys of [`EncoderConfig`],
/// flattened: [`ModelSection::check_section`] refuses unknown keys), the generator's size and
/// the weights to start from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ModelSection {
    pub kind: ModelKind,
    #[serde(flatten)]
    pub encoder: EncoderConfig,
    /// ELECTRA: generator hidden size, heads and FFN as a fraction of the discriminator's.
    pub generator_size: f64,
    /// A transformers directory (BERT), or a directory with `generator/` and
    /// `discriminator/` (ELECTRA), to continue pre-training from.
    pub init_from: Option<PathBuf>,
}

impl Default for ModelSection {
    fn default() -> Self {
        Self {
            kind: ModelKind::Electra,
            encoder: EncoderConfig::default(),
            generator_size: 0.25,
            init_from: None,
        }
    }
}

impl ModelSection {
    /// Checks the TOML `[model]` table as `deny_unknown_fields` would (see
    /// [`crate::error::check_flat_section`]).
    pub fn check_section(
        section: &toml::Table,
    ) -> std::result::Result<(), crate::error::FieldError> {
        #[derive(Deserialize)]
        #[allow(dead_code)]
        struct Own {
            #[serde(default)]
            kind: Option<ModelKind>,
            #[serde(default)]
            generator_size: Option<f64>,
            #[serde(default)]
            init_from: Option<PathBuf>,
        }
        use crate::error::flat_part;
        let known = crate::error::section_keys::<Self>();
        crate::error::check_flat_section(
            "model",
            section,
            &known,
            &[flat_part::<Own>, flat_part::<EncoderConfig>],
        )
    }

    /// The discriminator's (or BERT's) encoder with `vocab_size` tokens.
    pub fn encoder(&self, vocab_size: usize) -> EncoderConfig {
        EncoderConfig {
            vocab_size,
            ..self.encoder.clone()
        }
    }

    /// The generator: same embeddings and depth, width scaled by `generator_size`.
    pub fn generator(&self, vocab_size: usize) -> EncoderConfig {
        let r = self.generator_size;
        let scale = |x: usize| ((x as f64 * r).round() as usize).max(1);
        let mut g = self.encoder(vocab_size);
        g.hidden_size = scale(g.hidden_size);
        g.num_attention_heads = scale(g.num_attention_heads);
        g.intermediate_size = scale(g.intermediate_size);
        g
    }

    /// Every encoder the model has: BERT's one; ELECTRA's discriminator and generator.
    pub fn encoders(&self, vocab_size: usize) -> Vec<EncoderConfig> {
        let mut all = vec![self.encoder(vocab_size)];
        if self.kind == ModelKind::Electra {
            all.push(self.generator(vocab_size));
        }
        all
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DataSection {
    /// Directory written by `trueneg prepare`; empty = the embedded default corpus.
    pub shards: Option<PathBuf>,
    pub batch_size: usize,
    pub max_seq_len: usize,
    /// Vocabulary size trained for the embedded default corpus.
    pub default_corpus_vocab: usize,
    /// Held-out shards (`prepare` with the run's tokenizer) for `train.eval_every`.
    pub eval_shards: Option<PathBuf>,
}

impl Default for DataSection {
    fn default() -> Self {
        Self {
            shards: None,
            batch_size: 128,
            max_seq_len: 128,
            default_corpus_vocab: 8000,
            eval_shards: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrainSection {
    pub steps: u64,
    pub grad_accum: usize,
    pub seed: u64,
    /// λ in L = L_G + λ·L_D (ELECTRA).
    pub disc_weight: f64,
    pub checkpoint_every: u64,
    pub keep_checkpoints: usize,
    pub log_every: u64,
    /// Evaluate on `data.eval_shards` every this many steps (0 = never); a multiple of
    /// `log_every`, its figures go on that step's line (`train::heldout`).
    pub eval_every: u64,
    /// Held-out batches of `data.batch_size` examples each evaluation reads.
    pub eval_batches: usize,
    /// The device of a one-device run: `cpu` (the default CPU backend), `cuda[:i]` (feature
    /// `cuda`), `libtorch`, `libtorch-cuda[:i]` (feature `tch`).
    pub device: DeviceName,
    /// Host replicas for testing data parallelism in one process, e.g. `["cpu", "cpu"]`
    /// (`--devices cpu,cpu`), one after another. When set it takes the place of `train.device`.
    /// `data.batch_size` stays the global batch: each replica takes `batch_size / len` of its
    /// rows (see `train::replicas`). Several GPUs train as one process each (`crate::dist`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceName>,
    /// `f32`, or `bf16` mixed precision (bf16 matrix products and activations, f32 weights,
    /// optimizer state, softmax, LayerNorm and losses; see `model::precision`).
    pub precision: crate::model::Precision,
    /// Fixed-shape steps (`train::fixed_step`): masking padded to `masking.max_predictions`
    /// slots per sequence (weight 0 on the padding), every count on the device, and the batch,
    /// parameters and optimizer moments kept in the same device memory from step to step. The
    /// same training as without (the curve agrees to f32 rounding, dropout and sampling aside);
    /// what a recorded step needs.
    #[serde(skip_serializing_if = "is_false")]
    pub static_shapes: bool,
    /// Record the training step (forward, backward, AdamW) once as a CUDA graph, replay it after
    /// (implies `static_shapes`); unset: wherever it can (`PretrainConfig::records`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cuda_graph: Option<bool>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Default for TrainSection {
    fn default() -> Self {
        Self {
            steps: 1000,
            grad_accum: 1,
            seed: 1,
            disc_weight: 50.0,
            checkpoint_every: 1000,
            keep_checkpoints: 3,
            log_every: 10,
            eval_every: 0,
            eval_batches: 16,
            device: DeviceName::CPU,
            devices: Vec::new(),
            precision: crate::model::Precision::F32,
            static_shapes: false,
            cuda_graph: None,
        }
    }
}

/// The `[phase2]` section: when BERT's second sequence length begins and what it trains on
/// (`train::phases`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Phase2Section {
    /// The share of `train.steps` trained before the second phase (BERT: 0.9).
    pub start_fraction: f64,
    /// The second phase's sequence length (BERT: 512).
    pub max_seq_len: usize,
    /// The second phase's `masking.max_predictions` (BERT: 80 at 512 tokens).
    pub max_predictions: usize,
    /// A corpus `prepare` wrote at `max_seq_len` tokens with the run's tokenizer. Unset: the
    /// embedded default corpus prepared at that length (only when `data.shards` is unset).
    pub shards: Option<PathBuf>,
}

impl Default for Phase2Section {
    fn default() -> Self {
        Self {
            start_fraction: 0.9,
            max_seq_len: 512,
            max_predictions: 80,
            shards: None,
        }
    }
}

/// A network's shape: the `[model]` section, the precision it computes in and the vocabulary.
pub struct ModelShape<'a> {
    pub model: &'a ModelSection,
    pub precision: crate::model::Precision,
    pub vocab: usize,
}

/// The part of a config a training step reads (`train::steps`), built once from it.
#[derive(Clone, Debug)]
pub struct StepSettings {
    pub model: ModelKind,
    pub masking: MaskingConfig,
    pub objective: ObjectiveConfig,
    /// ELECTRA's discriminator weight λ (`train.disc_weight`).
    pub disc_weight: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PretrainConfig {
    pub model: ModelSection,
    pub data: DataSection,
    pub masking: MaskingConfig,
    pub optimizer: AdamWConfig,
    pub objective: ObjectiveConfig,
    pub train: TrainSection,
    /// BERT's second sequence length for the last steps (`train::phases`); unset: one length.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase2: Option<Phase2Section>,
}

/// Parses `value` as TOML if it can (numbers, booleans, arrays), else as a plain string.
fn parse_value(value: &str) -> toml::Value {
    toml::from_str::<toml::Table>(&format!("v = {value}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(value.to_string()))
}

impl ModelSection {
    /// The `[model]` section of the run config `config_toml` (a run folder's `config.toml`).
    pub fn read(config_toml: &Path) -> Result<Self> {
        Ok(PretrainConfig::load_file(config_toml, &[])?.model)
    }
}

impl PretrainConfig {
    /// The config of a trueneg run folder (its `config.toml`); a folder of another kind is
    /// named as what it is (a transformers folder, a missing folder).
    pub fn of_run(run: &Path) -> Result<Self> {
        let path = run.join("config.toml");
        if !path.is_present() {
            let what = if !run.is_present() {
                "no such folder".to_string()
            } else if run.join("config.json").is_present()
                || run.join("discriminator/config.json").is_present()
            {
                "a transformers folder (config.json), not a trueneg run".to_string()
            } else if run.join("manifest.json").is_present() {
                "a prepared corpus (manifest.json), not a trueneg run".to_string()
            } else {
                "not a trueneg run folder".to_string()
            };
            return Err(Error::Input(format!(
                "{}: {what}; expected a run folder (config.toml, checkpoints/) as `pretrain --run` makes it",
                run.display()
            )));
        }
        Self::load_file(&path, &[])
    }

    /// Loads a preset name (`tiny`, `electra-small`, …) or a TOML file, then applies
    /// `key=value` overrides (`train.steps=100`).
    pub fn load(source: &str, overrides: &[String]) -> Result<Self> {
        match PRESETS.iter().find(|(n, _)| *n == source) {
            Some((n, t)) => Self::from_text(t, &format!("preset `{n}`"), overrides),
            None if Path::new(source).is_present() => Self::load_file(Path::new(source), overrides),
            None => {
                let names: Vec<&str> = PRESETS.iter().map(|(n, _)| *n).collect();
                Err(Error::Config(format!(
                    "{source}: no such config file or preset (presets: {})",
                    names.join(", ")
                )))
            }
        }
    }

    /// Loads a TOML file (any path, UTF-8 or not), then applies `key=value` overrides.
    pub fn load_file(path: &Path, overrides: &[String]) -> Result<Self> {
        let bytes = crate::io::read::read(path, crate::io::limit::SMALL)?;
        let text = String::from_utf8(bytes)
            .map_err(|e| Error::Config(format!("{}: not UTF-8 text ({e})", path.display())))?;
        Self::from_text(&text, &path.display().to_string(), overrides)
    }

    /// Parses TOML `text` read from `origin` (a file or preset, for errors) with `overrides`.
    fn from_text(text: &str, origin: &str, overrides: &[String]) -> Result<Self> {
        let mut table: toml::Table = toml::from_str(text).map_err(|e| {
            // The line and column of the syntax error, as an editor shows them.
            let at = e.span().map_or(String::new(), |r| {
                let before = &text[..r.start.min(text.len())];
                let line = before.matches('\n').count() + 1;
                let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
                format!(":{line}:{col}")
            });
            Error::Config(format!("{origin}{at}: {}", e.message().trim()))
        })?;
        for o in overrides {
            let (key, value) = o
                .split_once('=')
                .ok_or_else(|| Error::Config(format!("--set {o}: expected key=value")))?;
            let parts: Vec<&str> = key.trim().split('.').collect();
            if parts.iter().any(|p| p.trim().is_empty()) {
                return Err(Error::Config(format!(
                    "--set {o}: expected section.key=value (such as train.steps=100), with no empty name"
                )));
            }
            let mut t = &mut table;
            for p in &parts[..parts.len() - 1] {
                t = t
                    .entry(p.to_string())
                    .or_insert_with(|| toml::Value::Table(Default::default()))
                    .as_table_mut()
                    .ok_or_else(|| Error::Config(format!("--set {o}: `{p}` is not a section")))?;
            }
            let name = parts[parts.len() - 1].to_string();
            // `key=` with no value removes the key, the preset's or file's value included: the
            // built-in default applies (an optional path is unset).
            if value.trim().is_empty() {
                t.remove(&name);
            } else {
                t.insert(name, parse_value(value.trim()));
            }
        }
        // The `[model]` and `[objective]` sections are flattened from their parts' keys: their
        // unknown keys are refused here, as `deny_unknown_fields` refuses the other sections'.
        type Check = fn(&toml::Table) -> std::result::Result<(), crate::error::FieldError>;
        let checks: [(&str, Check); 2] = [
            ("model", ModelSection::check_section),
            ("objective", ObjectiveConfig::check_section),
        ];
        for (name, check) in checks {
            if let Some(section) = table.get(name).and_then(toml::Value::as_table) {
                check(section)
                    .map_err(|(field, msg)| field_error(origin, overrides, &field, &msg))?;
            }
        }
        let mut cfg: PretrainConfig = serde_path_to_error::deserialize(toml::Value::Table(table))
            .map_err(|e| {
            let field = e.path().to_string();
            let msg = e.into_inner().message().to_string();
            field_error(origin, overrides, &field, &msg)
        })?;
        cfg.validate(origin)?;
        // `auto` is recorded as what it chose (`config.toml`, the model card).
        let device = cfg.replica_devices()[0];
        cfg.train.precision = cfg.train.precision.resolved(device);
        Ok(cfg)
    }

    /// Makes the config's paths (`data.shards`, `model.init_from`, `objective.lexicon`)
    /// absolute, so that a run resumes from any working directory; a `model.init_from` that is
    /// a transformers id becomes its snapshot folder in the Hugging Face cache.
    pub fn absolute_paths(&mut self) -> Result<()> {
        if let Some(init) = &mut self.model.init_from {
            // A transformers id in the Hugging Face cache: its snapshot (commit) is recorded.
            *init = crate::interop::hub_cache::model_dir(init)?;
        }
        let phase2 = self.phase2.as_mut().map(|p| &mut p.shards);
        let mut paths = vec![
            &mut self.data.shards,
            &mut self.data.eval_shards,
            &mut self.model.init_from,
        ];
        paths.extend(phase2);
        paths.extend(self.objective.paths_mut());
        for p in paths.into_iter().flatten() {
            if p.is_relative() {
                *p = crate::io::read::canonical(&*p)
                    .or_else(|_| std::path::absolute(&*p))
                    .map_err(|e| Error::io(&*p, e))?;
            }
        }
        Ok(())
    }

    /// The paths the config names, each with its key and the kind it must be: declared in the
    /// command's plan, so that a wrong one is refused before any work.
    pub fn inputs(&self) -> Vec<crate::frame::plan::Input> {
        use crate::frame::InputKind;
        let mut out = Vec::new();
        let mut add = |flag: &str, path: &Option<PathBuf>, kind: InputKind| {
            if let Some(p) = path {
                out.push(crate::frame::plan::Input {
                    flag: flag.into(),
                    path: p.clone(),
                    kind,
                });
            }
        };
        add("data.shards", &self.data.shards, InputKind::PreparedCorpus);
        add(
            "data.eval_shards",
            &self.data.eval_shards,
            InputKind::PreparedCorpus,
        );
        if let Some(p) = &self.phase2 {
            add("phase2.shards", &p.shards, InputKind::PreparedCorpus);
        }
        add("model.init_from", &self.model.init_from, InputKind::Encoder);
        for (key, path, kind) in self.objective.input_files() {
            add(key, &Some(path.clone()), InputKind::File(kind));
        }
        out
    }

    /// The shape of the run's network with a vocabulary of `vocab`.
    pub fn model_shape(&self, vocab: usize) -> ModelShape<'_> {
        ModelShape {
            model: &self.model,
            precision: self.train.precision,
            vocab,
        }
    }

    /// What the run's training step reads of it (`train::steps`).
    pub fn step_settings(&self) -> StepSettings {
        StepSettings {
            model: self.model.kind,
            masking: self.masking.clone(),
            objective: self.objective.clone(),
            disc_weight: self.train.disc_weight,
        }
    }

    /// The devices of the run's replicas: `train.devices`, else `[train.device]`.
    pub fn replica_devices(&self) -> Vec<DeviceName> {
        if self.train.devices.is_empty() {
            vec![self.train.device]
        } else {
            self.train.devices.clone()
        }
    }

    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("config serialises")
    }
}

/// The error of a bad `field` (`train.stepz`): blamed on the `--set` that wrote it when one did,
/// else on `origin` (the preset or file); an unknown name gets the closest known one.
fn field_error(origin: &str, overrides: &[String], field: &str, msg: &str) -> Error {
    let set = overrides
        .iter()
        .find(|o| o.split_once('=').is_some_and(|(k, _)| k.trim() == field));
    let origin = match set {
        Some(o) => format!("--set {o}"),
        None => origin.to_string(),
    };
    let suggestion = closest_known(msg, field.rsplit('.').next().unwrap_or(field))
        .map(|k| format!(" (did you mean `{k}`?)"))
        .unwrap_or_default();
    Error::Config(format!("{origin}: field `{field}`: {msg}{suggestion}"))
}

/// Among the names an "unknown field `x`, expected one of `a`, `b`" message lists, the one
/// closest to `name` by edit distance, when it is within two edits.
fn closest_known(msg: &str, name: &str) -> Option<String> {
    let listed = msg.split_once("expected")?.1;
    crate::error::nearest(name, listed.split('`').skip(1).step_by(2)).map(str::to_string)
}
