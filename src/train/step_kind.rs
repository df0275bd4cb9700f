//! What a kind of training step declares before a run starts: the data it trains on, the heads
//! it adds beside the network (and how their parameters are named, decayed and exported), its
//! memory per row and whether it can be recorded. The model, the optimizer, the memory estimate
//! and `export` are given the run's kind (`train::steps::kind_of` picks it); none looks it up.

use burn::prelude::*;

use super::config::StepSettings;
use crate::model::EncoderConfig;
use crate::model::step_heads::StepHeads;
use crate::text::shards::DataKind;

/// What a kind of training step declares before a run starts (see the module documentation).
pub trait StepKind: Sync {
    /// The step's name in messages ("the masked-LM step").
    fn name(&self) -> &'static str;

    /// The data it trains on.
    fn data(&self) -> DataKind;

    /// The parameters it adds beside the network for a run of `settings` with encoder
    /// `encoder` (`None`: none).
    fn heads(
        &self,
        _settings: &StepSettings,
        _encoder: &EncoderConfig,
        _device: &Device,
    ) -> Option<Box<dyn StepHeads>> {
        None
    }

    /// The name prefix of its heads' parameters (`prefix.` begins each name): they are saved
    /// in checkpoints and left out of exports.
    fn heads_prefix(&self) -> Option<&'static str> {
        None
    }

    /// Whether tensor `name` belongs to its heads (kept in checkpoints, not exported).
    fn is_head_tensor(&self, name: &str) -> bool {
        under_prefix(self.heads_prefix(), name)
    }

    /// Its parameters (whole names) that take no weight decay, besides biases and LayerNorm
    /// (the optimizer is given them: `AdamW::sparing`).
    fn undecayed(&self) -> &'static [&'static str] {
        &[]
    }

    /// Sentences each row encodes (the memory estimate's activations multiply by it).
    fn sentences_per_row(&self) -> f64 {
        1.0
    }

    /// Whether the step has a fixed-shape form (`train.static_shapes`) that a CUDA graph can
    /// record (`train.cuda_graph`): [`TrainingStep::fixed`].
    fn recordable(&self) -> bool {
        false
    }
}

/// The registry of kinds (`train::steps::kind_of`), as code below it is handed it.
pub type StepKinds = fn(crate::objective::ObjectiveKind) -> &'static dyn StepKind;

/// Whether tensor `name` lies under `prefix` (`prefix.` begins it; `None`: no tensor does).
pub fn under_prefix(prefix: Option<&str>, name: &str) -> bool {
    prefix.is_some_and(|p| {
        name.strip_prefix(p)
            .is_some_and(|rest| rest.starts_with('.'))
    })
}
