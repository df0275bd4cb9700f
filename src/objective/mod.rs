//! Training objectives, one file each with its formula in its doc comment, and their registry.
//!
//! The masked-LM step (BERT's MLM, ELECTRA's generator and discriminator,
//! `train::steps::masked_lm`) computes `L_mlm` and, for ELECTRA, `λ·L_D`; a true-negative objective
//! is a [`Part`] of that step: it may weight the masked positions of `L_mlm` (Hard Correction), add
//! terms to the loss (Soft Regularization), relabel the discriminator's tokens, and report its own
//! counts. Its file holds its formula, its config keys, its terms and its metrics; the loop sums,
//! logs and plots them by name ([`terms`]). Adding one: see `docs/adding-an-objective.md`.

#[macro_use]
mod part_registry;

pub mod between;
pub mod contrastive;
pub mod kind;
pub mod mlm;
pub mod rtd;
pub mod terms;

// The registry of the masked-LM step's parts, one line each, in the order their terms join the
// loss (after `L_mlm`, before `λ·L_D`): `module::ConfigType => field,` (see `part_registry`).
parts! {
    hard_correction::HcConfig => hc,
    soft_regularization::SrConfig => sr,
    sentence_regularization::SrSentConfig => sr_sent,
}

pub use between::{Between, BetweenSteps, Record};
pub use contrastive::{ClineContrast, ClineLossConfig, ClineOri, ClineRtd, ClineWeights};
pub use kind::ObjectiveKind;
pub use mlm::{masked_cross_entropy, weighted_mean};
pub use part_registry::{BadValue, PartConfig};
pub use rtd::replaced_token_loss;
pub use terms::{Count, Counters, DeviceCounters, Logged, StepLoss, Term};

use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use burn::prelude::*;
use serde::{Deserialize, Serialize};

use crate::model::Inputs;
use crate::text::SynonymTable;
use crate::text::batches::Batch;
use crate::text::masking::Masked;
use crate::text::shards::ShardSet;
use crate::{Error, Result};

/// The paper's ablation: the baseline and its corrections (`ablation --objectives`' default).
pub const ABLATION_ROWS: &str = "baseline,hc,sr,sr-sent";

/// The `[objective]` section: the kind and every part's own keys (flattened: the section is
/// one flat table; [`ObjectiveConfig::check_section`] refuses keys no part knows).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ObjectiveConfig {
    pub kind: ObjectiveKind,
    /// The registered parts' keys.
    #[serde(flatten)]
    pub parts: PartsConfig,
    /// CLINE's step's keys.
    #[serde(flatten)]
    pub cline: ClineLossConfig,
}

impl ObjectiveConfig {
    /// The section's keys.
    pub fn keys() -> Vec<String> {
        crate::error::section_keys::<Self>()
    }

    /// Checks `section` (the TOML `[objective]` table) as the other sections are checked:
    /// a key no part knows is refused as serde's `deny_unknown_fields` would (`field
    /// `objective.x`: unknown field `x`, expected one of …`), and a bad value is named by its
    /// key (flattening alone would name only the section).
    pub fn check_section(
        section: &toml::Table,
    ) -> std::result::Result<(), crate::error::FieldError> {
        #[derive(Deserialize)]
        struct Kind {
            #[serde(default)]
            #[allow(dead_code)]
            kind: ObjectiveKind,
        }
        use crate::error::flat_part;
        let checks: Vec<crate::error::SectionPart> = [flat_part::<Kind> as _]
            .into_iter()
            .chain(PARTS.iter().map(|p| p.check))
            .chain([flat_part::<ClineLossConfig> as _])
            .collect();
        crate::error::check_flat_section("objective", section, &Self::keys(), &checks)
    }

    /// Checks every part's values: `Err((field, value, rule))` names the first bad one.
    pub fn validate(&self) -> std::result::Result<(), BadValue> {
        for part in self.parts.each() {
            part.validate()?;
        }
        self.cline.validate()
    }

    /// The paths among the values, to be made absolute with the rest of the config.
    pub fn paths_mut(&mut self) -> Vec<&mut Option<std::path::PathBuf>> {
        let mut out = Vec::new();
        for part in self.parts.each_mut() {
            out.extend(part.files_mut().into_iter().map(|(_, path, _)| path));
        }
        out
    }

    /// The files the values name, each with its key and kind, for the command's plan.
    pub fn input_files(&self) -> Vec<(&'static str, std::path::PathBuf, crate::frame::FileKind)> {
        let mut parts = self.parts.clone();
        let mut out = Vec::new();
        for part in parts.each_mut() {
            for (key, path, kind) in part.files_mut() {
                if let Some(p) = path {
                    out.push((key, p.clone(), kind));
                }
            }
        }
        out
    }
}

/// What a part may need to set itself up: the run's shards (its tokenizer), its folder, and a
/// synonym table given by the caller (the bench's synthetic one).
#[derive(Default)]
pub struct Setup<'a> {
    pub shards: Option<&'a ShardSet>,
    pub run: Option<&'a Path>,
    pub synonyms: Option<SynonymTable>,
    /// The run folder is another process's to write (a data-parallel job's ranks but 0):
    /// a part reads what is there and builds the rest in memory.
    pub read_only: bool,
}

/// A part's constructor: `None` when the config does not train with it.
pub type Build = fn(&ObjectiveConfig, &mut Setup) -> Result<Option<Box<dyn Part>>>;

/// What the masked-LM step hands its parts: one replica's micro-batch, its masking, the MLM
/// predictions and the model's shared embeddings and encoder. The predictions, positions and labels
/// are device tensors: a part works on the device and reads nothing back (the multi-piece rule of
/// Hard Correction, which spells words, is the exception: [`MlmStep::argmax_host`]).
pub struct MlmStep<'a> {
    pub batch: &'a Batch,
    pub masked: &'a Masked,
    pub inputs: &'a Inputs,
    /// The masked positions in the flattened batch, `[n]`.
    pub positions: Tensor<1, Int>,
    /// Gold tokens at the masked positions, `[n]`.
    pub labels: Tensor<1, Int>,
    /// The MLM model's argmax at the masked positions, `[n]` (no gradient).
    pub argmax: Tensor<1, Int>,
    /// ELECTRA: the generator's sampled replacements, `[n]`.
    pub sampled: Option<Tensor<1, Int>>,
    /// A fixed-shape step's slots that are masked positions (1) or padding (0), `[n]`
    /// (`Masked::padded`); `None`: every slot is a masked position. On a padding slot the
    /// argmax and the sample are the label, so that it changes no token and counts no
    /// mismatch; a part that averages over the slots weights them by this.
    pub valid: Option<Tensor<1>>,
    /// The token-embedding matrix the MLM head decodes with, [vocab, dim].
    pub words: Tensor<2>,
    /// The MLM model's encoder: inputs → hidden states [batch, len, hidden].
    pub encode: &'a dyn Fn(&Inputs) -> Tensor<3>,
    /// ELECTRA: the discriminator's encoder (set by the training step; `None` for BERT).
    pub discriminator_encode: Option<&'a dyn Fn(&Inputs) -> Tensor<3>>,
    /// The sequence of each masked position.
    pub rows: Vec<usize>,
    pub device: &'a Device,
    argmax_host: OnceCell<Vec<u32>>,
}

/// The device tensors of a step's masked positions: positions, gold labels, the argmax and
/// the sampled replacements.
pub struct Predictions {
    pub positions: Tensor<1, Int>,
    pub labels: Tensor<1, Int>,
    pub argmax: Tensor<1, Int>,
    pub sampled: Option<Tensor<1, Int>>,
    /// See [`MlmStep::valid`].
    pub valid: Option<Tensor<1>>,
}

impl<'a> MlmStep<'a> {
    pub fn new(
        batch: &'a Batch,
        masked: &'a Masked,
        inputs: &'a Inputs,
        p: Predictions,
        words: Tensor<2>,
        encode: &'a dyn Fn(&Inputs) -> Tensor<3>,
        device: &'a Device,
    ) -> Self {
        let rows = masked
            .positions
            .iter()
            .map(|&p| p / batch.len.max(1))
            .collect();
        Self {
            batch,
            masked,
            inputs,
            positions: p.positions,
            labels: p.labels,
            argmax: p.argmax,
            sampled: p.sampled,
            valid: p.valid,
            words,
            encode,
            discriminator_encode: None,
            rows,
            device,
            argmax_host: OnceCell::new(),
        }
    }

    /// The argmax on the host (read from the device once, when a part first asks: the
    /// multi-piece rule alone).
    pub fn argmax_host(&self) -> &[u32] {
        self.argmax_host
            .get_or_init(|| crate::kernels::host_ids(self.argmax.clone()))
    }

    /// The number of masked positions: known on the host, or a fixed-shape step's, counted on
    /// the device (its batch changes under a recorded step).
    pub fn masked_count(&self) -> Count {
        match &self.valid {
            Some(v) => Count::Device(Box::new(v.clone().sum())),
            None => Count::Host(self.masked.positions.len() as f64),
        }
    }

    /// The number of real tokens, as [`MlmStep::masked_count`] counts.
    pub fn real_tokens(&self) -> Count {
        match &self.valid {
            Some(_) => Count::Device(Box::new(self.attention_mask().float().sum())),
            None => Count::Host(self.batch.real_tokens() as f64),
        }
    }

    /// The mean of `values` `[n]` over the masked positions (padding slots aside).
    pub fn mean_over_masked(&self, values: Tensor<1>) -> Tensor<1> {
        match &self.valid {
            Some(v) => (values * v.clone()).sum() / v.clone().sum().clamp_min(1.0),
            None => values.mean(),
        }
    }

    /// The attention mask `[batch, len]` on the device (1 for real tokens), from the inputs.
    pub fn attention_mask(&self) -> Tensor<2, Int> {
        match &self.inputs.attention_mask {
            Some(mask) => mask.clone(),
            None => self.inputs.ids.ones_like(),
        }
    }

    /// The sequence of each masked position, `[n]`, on the device.
    pub fn rows_on_device(&self) -> Tensor<1, Int> {
        self.positions
            .clone()
            .div_scalar(self.batch.len.max(1) as i64)
    }

    /// The model's input ids with each masked position replaced by `predicted` (one per
    /// position, `[n]`), on the device: `[batch, len]`.
    pub fn filled(&self, predicted: Tensor<1, Int>) -> Tensor<2, Int> {
        let shape = [self.batch.batch, self.batch.len];
        let flat = self.inputs.ids.clone().reshape([shape[0] * shape[1]]);
        self.at_positions(flat, predicted).reshape(shape)
    }

    /// `values` `[n]` at the masked positions of a `[batch·len]` vector that is `base`
    /// elsewhere (on the device).
    pub fn at_positions(&self, base: Tensor<1, Int>, values: Tensor<1, Int>) -> Tensor<1, Int> {
        let now = base.clone().select(0, self.positions.clone());
        base.select_assign(
            0,
            self.positions.clone(),
            values - now,
            burn::tensor::IndexingUpdateOp::Add,
        )
    }
}

/// A part of the masked-LM step (see the module doc). Every method has a default that does
/// nothing.
pub trait Part: Send + Sync {
    /// Weights `w_k ∈ {0, 1}` of the masked positions in `L_mlm` (`[n]` on the device; `None`:
    /// all 1), and the counts this micro-batch adds (on the device).
    fn mlm_weights(&self, _s: &MlmStep) -> Option<(Tensor<1>, DeviceCounters)> {
        None
    }

    /// Adds this part's terms to `loss` (after `L_mlm`).
    fn add_terms(&self, _s: &MlmStep, _loss: &mut StepLoss) {}

    /// ELECTRA: adjusts the discriminator's targets `replaced` (1: the generator's sample
    /// differs from the original) and weights `weights` (1: in `L_D`) at the masked positions
    /// (`[n]` each, on the device) for the generator's `sampled` replacements.
    fn discriminator_labels(
        &self,
        _s: &MlmStep,
        _sampled: &Tensor<1, Int>,
        replaced: Tensor<1, Int>,
        weights: Tensor<1, Int>,
    ) -> (Tensor<1, Int>, Tensor<1, Int>) {
        (replaced, weights)
    }

    /// Whether [`Part::discriminator_labels`] may set weights to 0 (then `L_D`'s count is
    /// counted on the device).
    fn drops_discriminator_tokens(&self) -> bool {
        false
    }

    /// The values this part logs from the counts of a logging window.
    fn window_metrics(&self, _counters: &Counters, _out: &mut BTreeMap<String, serde_json::Value>) {
    }

    /// What a progress line shows of a logging window's counts besides the loss terms.
    fn progress(&self, _counters: &Counters) -> Option<String> {
        None
    }

    /// Between two steps (see [`between`]): state of its own rebuilt from the model, and what
    /// it logs of that.
    fn between_steps(&self, _at: &Between) -> Result<BetweenSteps> {
        Ok(BetweenSteps::default())
    }

    /// The synonym table it decides with now (shown by samples of its decisions).
    fn synonyms(&self) -> Option<Arc<SynonymTable>> {
        None
    }

    /// Writes the state it rebuilds between steps into checkpoint folder `dir`, so that a
    /// resumed run goes on with the same state.
    fn save_state(&self, _dir: &Path) -> Result<()> {
        Ok(())
    }

    /// Takes up the state saved in checkpoint folder `dir` (`at`: the step resumed from and
    /// the model's weights loaded from it).
    fn restore_state(&self, _dir: &Path, _at: &Between) -> Result<()> {
        Ok(())
    }
}

/// A run's objective: the parts of its masked-LM step, built from its config.
#[derive(Default)]
pub struct Objective {
    pub parts: Vec<Box<dyn Part>>,
}

impl Objective {
    pub fn build(cfg: &ObjectiveConfig, setup: &mut Setup) -> Result<Self> {
        let mut parts = Vec::new();
        for row in PARTS {
            if let Some(p) = (row.build)(cfg, setup)? {
                parts.push(p);
            }
        }
        Ok(Self { parts })
    }

    /// Every part's note for a progress line on a logging window's `counters`, each after two
    /// spaces.
    pub fn progress(&self, counters: &Counters) -> String {
        self.parts
            .iter()
            .filter_map(|p| p.progress(counters))
            .map(|s| format!("  {s}"))
            .collect()
    }

    /// Every part's work between two steps.
    pub fn between_steps(&self, at: &Between) -> Result<BetweenSteps> {
        let mut out = BetweenSteps::default();
        for p in &self.parts {
            out.join(p.between_steps(at)?);
        }
        Ok(out)
    }

    /// The synonym table of the first part that decides with one.
    pub fn synonyms(&self) -> Option<Arc<SynonymTable>> {
        self.parts.iter().find_map(|p| p.synonyms())
    }

    /// Every part's state into checkpoint folder `dir`.
    pub fn save_state(&self, dir: &Path) -> Result<()> {
        self.parts.iter().try_for_each(|p| p.save_state(dir))
    }

    /// Every part's state from checkpoint folder `dir`.
    pub fn restore_state(&self, dir: &Path, at: &Between) -> Result<()> {
        self.parts.iter().try_for_each(|p| p.restore_state(dir, at))
    }

    /// Every part's values of a logging window's `counters`.
    pub fn window_metrics(&self, counters: &Counters) -> BTreeMap<String, serde_json::Value> {
        let mut out = BTreeMap::new();
        for p in &self.parts {
            p.window_metrics(counters, &mut out);
        }
        out
    }
}

/// How a reader calls each registered term on a plot's axis (`mlm_loss` → "masked-LM loss
/// (generator's for ELECTRA)"): the masked-LM step's own terms and the parts' (see
/// `plot::metric_label`).
pub fn term_labels() -> Vec<(&'static str, &'static str)> {
    let parts = PARTS.iter().flat_map(|p| (p.term_labels)().iter().copied());
    mlm::LABELS
        .into_iter()
        .chain(rtd::LABELS)
        .chain(parts)
        .collect()
}

/// A finite weight >= 0, as the config's other rules word it.
pub(crate) fn non_negative(
    field: &str,
    x: f64,
) -> std::result::Result<(), (String, String, String)> {
    if x.is_finite() && x >= 0.0 {
        Ok(())
    } else {
        Err((field.into(), x.to_string(), "must be >= 0".into()))
    }
}

/// The error of a part that needs what `setup` lacks.
pub(crate) fn missing(part: &str, what: &str) -> Error {
    Error::Config(format!("objective part `{part}` needs {what}"))
}
