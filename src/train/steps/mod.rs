//! The training step as the unit of extension: what a step declares, what it does, and the
//! registry that picks a run's step from its objective.
//!
//! A step is two things:
//! - a [`StepKind`], what it declares before a run starts: the data it trains on, the heads it
//!   adds beside the network (and how their parameters are named, decayed and exported), its
//!   memory per row and whether it can be recorded as a CUDA graph. The model, the optimizer,
//!   the memory estimate, the config rules and `export` ask the run's kind, never which it is;
//! - a [`TrainingStep`], what it does each micro-step: read and mask its micro-batch, compute
//!   its loss, and report its own metrics. The one micro-step loop (`train::micro_steps`), the
//!   recorded step (`train::fixed_step`) and the held-out evaluation run any of them.
//!
//! The masked-LM step ([`masked_lm`]: BERT's MLM, ELECTRA's generator and discriminator, with
//! the objective's parts) trains on packed examples; the step on sentence triples
//! ([`cline`]) has heads and data of its own. Adding a step: a file here with both
//! implementations and its row in `KINDS` and [`with_step`] (`docs/adding-an-objective.md`).

pub mod cline;
pub mod correction_samples;
pub mod masked_lm;
pub mod triples;

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;

use burn::prelude::*;
use rand_chacha::ChaCha8Rng;

use super::config::StepSettings;
use super::model::PretrainModel;
pub use super::step_kind::StepKind;
use crate::Result;
use crate::objective::{BetweenSteps, Counters, ObjectiveKind, Setup, StepLoss};
use crate::text::shards::{DataKind, ShardSet};

/// Every kind of step.
const KINDS: [&dyn StepKind; 2] = [&masked_lm::KIND, &cline::KIND];

/// The step a run of objective `objective` trains with: the one for the data it trains on.
pub fn kind_of(objective: ObjectiveKind) -> &'static dyn StepKind {
    let data = objective.data();
    *KINDS
        .iter()
        .find(|k| k.data() == data)
        .expect("every kind of data has its step")
}

/// A micro-batch a step has read and masked: what the loop splits among replicas.
pub trait MicroBatch {
    /// Its rows (sequences or triples).
    fn rows(&self) -> usize;

    /// Its masked positions.
    fn masked(&self) -> usize;

    /// Its tokens, padding included (the throughput's count).
    fn tokens(&self) -> usize;

    /// Rows `rows` of it (a data-parallel replica's share).
    fn take_rows(&self, rows: Range<usize>) -> Self;
}

/// What a step is given between two training steps, outside the recorded work of a step.
pub struct StepAt<'a> {
    /// The step just done (1-based; on a resume, the step resumed from).
    pub done: u64,
    /// Replica 0's model as it is now.
    pub model: &'a PretrainModel,
    /// The device of its evaluation copy (`PretrainModel::valid`).
    pub device: &'a Device,
    pub shards: &'a ShardSet,
    /// The run's seed and steps between two logged lines (`train.seed`, `train.log_every`).
    pub seed: u64,
    pub log_every: u64,
    /// This process writes the run's files (rank 0 of a job): it alone shows samples.
    pub main: bool,
}

/// What a training step does each micro-step (see the module documentation).
pub trait TrainingStep {
    type Batch: MicroBatch;

    /// What it declares.
    fn kind(&self) -> &'static dyn StepKind;

    /// Reads examples `indices` of `shards` and masks them with `rng`.
    fn batch(
        &self,
        shards: &ShardSet,
        indices: &[usize],
        rng: &mut ChaCha8Rng,
    ) -> Result<Self::Batch>;

    /// Forward pass and loss of `batch` on one replica's `model`.
    fn loss(&self, model: &PretrainModel, batch: &Self::Batch, device: &Device) -> StepLoss;

    /// The fixed-shape form of `batch` (this process's rows), its device tensors in `pinned`'s
    /// memory: what a recorded step replays on. `None` where the step has none
    /// ([`StepKind::recordable`]).
    fn fixed(
        &self,
        _batch: Self::Batch,
        _pinned: &mut super::fixed_step::Pinned,
        _device: &Device,
    ) -> Option<Self::Batch> {
        None
    }

    /// The values it logs from the counts of a logging window.
    fn window_metrics(&self, _counters: &Counters) -> BTreeMap<String, serde_json::Value> {
        BTreeMap::new()
    }

    /// What a progress line shows of a logging window's counts besides the loss terms (each
    /// note after two spaces).
    fn progress(&self, _counters: &Counters) -> String {
        String::new()
    }

    /// Between two steps: state of its own rebuilt from the model, samples of what it does,
    /// and their records (`objective::between`).
    fn between_steps(&self, _at: &StepAt) -> Result<BetweenSteps> {
        Ok(BetweenSteps::default())
    }

    /// Writes that state into checkpoint folder `dir`.
    fn save_state(&self, _dir: &Path) -> Result<()> {
        Ok(())
    }

    /// Takes up the state saved in checkpoint folder `dir` on a resume from step `at.done`.
    fn restore_state(&self, _dir: &Path, _at: &StepAt) -> Result<()> {
        Ok(())
    }
}

/// Work that runs with a run's training step, whichever it is.
pub trait WithStep {
    type Output;

    fn run<S: TrainingStep>(self, step: S) -> Result<Self::Output>;
}

/// Builds the training step of a run of `settings` (the objective's parts set up with
/// `setup`; the corpus's special ids and vocabulary from `shards`) and runs `work` with it.
pub fn with_step<W: WithStep>(
    settings: &StepSettings,
    shards: &ShardSet,
    setup: &mut Setup,
    work: W,
) -> Result<W::Output> {
    let context = masked_lm::MaskingContext::new(&settings.masking, shards);
    match kind_of(settings.objective.kind).data() {
        DataKind::Packed => work.run(masked_lm::MaskedLmStep::build(settings, context, setup)?),
        DataKind::Triples => work.run(cline::TripleStep::new(settings, context)),
    }
}
