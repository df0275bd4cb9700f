//! BERT's two sequence lengths in one run (`[phase2]`): the first steps at `data.max_seq_len`,
//! the last ones at a longer length on a second corpus prepared at that length, with one
//! model, one optimizer state and one learning-rate schedule over `train.steps`.
//!
//! BERT (Devlin et al., appendix A.2) trained 90 % of its steps on 128-token sequences and the
//! last 10 % on 512-token ones, so that the position embeddings beyond 128 are learnt; its
//! `max_predictions_per_seq` was 20, then 80. A phase is a view of the run's config
//! ([`PretrainConfig::in_phase`]): everything that depends on the length (the step's masking
//! slots, the fixed-shape step, the batch stream, the memory estimate) is built from it, so
//! nothing of the first phase's length reaches the second.
//!
//! A checkpoint records the fingerprint of the shards it was trained on, so `--resume` knows
//! which phase wrote it: one written by the first phase at or past the second's first step
//! starts the second corpus from its beginning.

use super::checkpoint::TrainState;
use super::config::PretrainConfig;
use crate::error::{Rule, count, rule};
use crate::text::batches::DataPosition;
use crate::text::shards::ShardSet;
use crate::{Error, Result};

/// Which phase of a run: the first (`data.max_seq_len`) or the second (`[phase2]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    First,
    Second,
}

impl PretrainConfig {
    /// The first step (0-based) of the second phase: `train.steps` when there is none.
    pub fn phase2_start(&self) -> u64 {
        match &self.phase2 {
            Some(p) => (self.train.steps as f64 * p.start_fraction).round() as u64,
            None => self.train.steps,
        }
    }

    /// The config `phase` trains with: for the second, the run's config with `[phase2]`'s
    /// length, masking slots and corpus in `[data]` and `[masking]`.
    pub fn in_phase(&self, phase: Phase) -> PretrainConfig {
        let mut cfg = self.clone();
        if let (Phase::Second, Some(p)) = (phase, &self.phase2) {
            cfg.data.max_seq_len = p.max_seq_len;
            cfg.masking.max_predictions = p.max_predictions;
            cfg.data.shards = p.shards.clone();
        }
        cfg
    }

    /// The phase that trains step `step` (0-based).
    pub fn phase_of(&self, step: u64) -> Phase {
        if step >= self.phase2_start() {
            Phase::Second
        } else {
            Phase::First
        }
    }

    /// The sequence lengths of the run in words, for its model card.
    pub fn lengths_described(&self) -> String {
        match &self.phase2 {
            None => format!("sequences of {} tokens", self.data.max_seq_len),
            Some(p) => format!(
                "sequences of {} tokens for the first {} steps, then of {} tokens (a second phase{})",
                self.data.max_seq_len,
                self.phase2_start(),
                p.max_seq_len,
                p.shards.as_ref().and_then(|d| d.file_name()).map_or_else(
                    String::new,
                    |n| format!(" on the shards `{}`", n.to_string_lossy())
                )
            ),
        }
    }

    /// The tokens of the first `steps` steps (padding included), each phase at its length.
    pub fn tokens_through(&self, steps: u64) -> f64 {
        let per_step = |len: usize| (self.data.batch_size * self.train.grad_accum * len) as f64;
        let first = steps.min(self.phase2_start());
        let second = steps - first;
        let second_len = self.phase2.as_ref().map_or(0, |p| p.max_seq_len);
        first as f64 * per_step(self.data.max_seq_len) + second as f64 * per_step(second_len)
    }
}

/// The `[phase2]` section's rules: a second phase of at least one step after a first of at
/// least one, at a length the model has positions for, on a corpus that can be found.
pub fn phase2_rules(cfg: &PretrainConfig) -> Vec<Rule> {
    let Some(p) = &cfg.phase2 else {
        return Vec::new();
    };
    let steps = cfg.train.steps;
    let start = cfg.phase2_start();
    let positions = cfg.model.encoder.max_position_embeddings;
    vec![
        rule(
            "phase2.start_fraction",
            p.start_fraction,
            p.start_fraction > 0.0 && p.start_fraction < 1.0 && start >= 1 && start < steps,
            format!(
                "must leave both phases at least one step: it starts the second at step {start} of train.steps = {steps}"
            ),
        ),
        rule(
            "phase2.max_seq_len",
            p.max_seq_len,
            (8..=positions).contains(&p.max_seq_len),
            format!("must be in [8, model.max_position_embeddings = {positions}]"),
        ),
        count("phase2.max_predictions", p.max_predictions),
        rule(
            "phase2.shards",
            "unset",
            p.shards.is_some() || cfg.data.shards.is_none(),
            format!(
                "must name the corpus of the second phase, since data.shards is set: prepare the same text at its length with the run's tokenizer (`trueneg prepare --input … --tokenizer <data.shards>/tokenizer.json --max-seq-len {} --out DIR`) and pass --set phase2.shards=DIR",
                p.max_seq_len
            ),
        ),
    ]
}

/// The corpora of a run's phases: the first's, and the second's when the run has one.
pub struct PhaseShards<'a> {
    pub first: &'a ShardSet,
    pub second: Option<ShardSet>,
}

impl<'a> PhaseShards<'a> {
    /// The run's corpora: `first` (the run's shards), and the second phase's, opened from
    /// `phase2.shards` or, for the embedded default corpus, beside `first`
    /// ([`super::default_data::phase2_shards_dir`]). A second corpus of another tokenizer is
    /// refused.
    pub fn open(cfg: &PretrainConfig, first: &'a ShardSet) -> Result<Self> {
        let Some(p) = &cfg.phase2 else {
            return Ok(Self {
                first,
                second: None,
            });
        };
        let dir = match &p.shards {
            Some(d) => d.clone(),
            None => super::default_data::phase2_shards_dir(&first.dir),
        };
        let second = ShardSet::open(&dir)
            .map_err(|e| Error::Config(format!("field `phase2.shards`: {e}")))?;
        if second.manifest.content_fingerprint() == first.manifest.content_fingerprint() {
            return Err(Error::Config(format!(
                "field `phase2.shards`: {} holds the first phase's corpus ({}); the second phase trains on the text prepared at phase2.max_seq_len = {}",
                dir.display(),
                first.dir.display(),
                p.max_seq_len
            )));
        }
        if second.manifest.tokenizer_fingerprint != first.manifest.tokenizer_fingerprint {
            return Err(Error::Config(format!(
                "field `phase2.shards`: {} was prepared with another tokenizer than {}; prepare it with theirs (`prepare --tokenizer {}`)",
                dir.display(),
                first.dir.display(),
                first.dir.join("tokenizer.json").display()
            )));
        }
        Ok(Self {
            first,
            second: Some(second),
        })
    }

    /// The corpus `phase` trains on.
    pub fn of(&self, phase: Phase) -> &ShardSet {
        match (phase, &self.second) {
            (Phase::Second, Some(s)) => s,
            _ => self.first,
        }
    }

    /// The run's phases, the first first.
    pub fn phases(&self) -> Vec<Phase> {
        let mut phases = vec![Phase::First];
        phases.extend(self.second.as_ref().map(|_| Phase::Second));
        phases
    }

    /// Every corpus of the run, the first phase's first.
    pub fn all(&self) -> Vec<&ShardSet> {
        self.phases().into_iter().map(|p| self.of(p)).collect()
    }

    /// The phase whose corpus a checkpoint's `state` was trained on (by its shards'
    /// fingerprint, which differ between the phases; a checkpoint that records none is the
    /// first phase's).
    pub fn wrote(&self, state: &TrainState) -> Phase {
        let second = self
            .second
            .as_ref()
            .map(|s| s.manifest.content_fingerprint());
        if second.is_some() && state.shards_fingerprint == second {
            Phase::Second
        } else {
            Phase::First
        }
    }
}

/// Where a run continues: in the phase of step `state.step` (0-based, the next to train),
/// the first phase's state carried into the second from the second corpus's start. A
/// checkpoint of the second phase before the second phase's first step (`train.steps` or
/// `phase2.start_fraction` changed since) continues in the second phase, which is said.
pub fn continue_in(
    cfg: &PretrainConfig,
    shards: &PhaseShards,
    mut state: TrainState,
) -> (Phase, TrainState) {
    let wrote = shards.wrote(&state);
    let due = cfg.phase_of(state.step);
    match (wrote, due) {
        (Phase::First, Phase::Second) => {
            let second = shards.of(Phase::Second);
            state.data = DataPosition::default();
            state.shards_fingerprint = Some(second.manifest.content_fingerprint());
            (Phase::Second, state)
        }
        (Phase::Second, Phase::First) => {
            tracing::warn!(
                "the checkpoint at step {} was trained in the second phase, which now begins at step {}: the run goes on in the second phase (train.steps or phase2.start_fraction changed since it began)",
                state.step,
                cfg.phase2_start()
            );
            (Phase::Second, state)
        }
        (phase, _) => (phase, state),
    }
}
