//! The ablation's settings and results: [`AblationSpec`] (everything that decides its numbers,
//! saved as `experiment.json`) and [`RunResults`] (every score measured on one run), shared by
//! the experiment ([`super::ablation`]) and its report ([`super::ablation_report`]).

use crate::io::PathQuery;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::attack::AttackKind;
use crate::experiments::bootstrap::check_seeds;
use crate::finetune::recipe::FinetuneOptions;
use crate::finetune::scores::Scores;
use crate::finetune::seeds::TaskResult;
use crate::objective::ObjectiveKind;
use crate::tasks::glue::GlueTask;
use crate::train::pretrain::Progress;
use crate::train::stats::CheckpointStats;
use crate::{Error, Result};

/// Everything that decides an ablation's numbers; saved as `experiment.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AblationSpec {
    /// A preset name or a TOML file, and `--set` overrides for every run.
    pub config: String,
    pub overrides: Vec<String>,
    /// The objectives; `baseline` is the reference of every paired difference.
    pub objectives: Vec<ObjectiveKind>,
    pub pretrain_seeds: Vec<u64>,
    /// Device of pre-training (`train.device`) and fine-tuning; `None`: the config's for
    /// pre-training, the CPU for fine-tuning.
    pub device: Option<String>,
    /// Checkpoints written per run (HC runs keep them all for the Table 8 statistics).
    pub checkpoints: u64,
    /// The folder holding GLUE's task folders (`CoLA/`, `SST-2/`, …).
    pub glue: Option<PathBuf>,
    pub tasks: Vec<GlueTask>,
    pub finetune_seeds: Vec<u64>,
    /// The fine-tuning recipe (specs written before it existed: ELECTRA's).
    #[serde(default)]
    pub recipe: crate::finetune::recipe::Recipe,
    /// Fine-tuning epochs (`None`: ELECTRA's recipe per task), peak learning rate, tokens per
    /// example, training examples per task (0 = all).
    pub epochs: Option<usize>,
    pub lr: Option<f64>,
    pub max_seq_len: Option<usize>,
    pub max_train_examples: usize,
    /// SQuAD v1.1: a folder with train/dev files or one file split in two; questions to train
    /// on and to evaluate on; epochs and window length (`None`: 2, and 384 or the model's
    /// longest position).
    pub squad: Option<PathBuf>,
    pub squad_train: usize,
    pub squad_eval: usize,
    pub squad_epochs: Option<usize>,
    pub squad_max_seq_len: Option<usize>,
    /// Seed of the attacks' random choices.
    pub attack_seed: u64,
    /// Text the Table 8 statistics mask and predict (`None`: the embedded corpus); batches per
    /// checkpoint.
    pub stats_corpus: Option<PathBuf>,
    pub stats_batches: usize,
}

pub struct AblationOptions {
    pub spec: AblationSpec,
    /// The experiment's folder, claimed by the command frame.
    pub out: crate::frame::Owned,
    /// Keep the fine-tuned models (`finetune/<tag>/<TASK>/seed-N/`); by default only their
    /// scores and predictions stay.
    pub keep_models: bool,
    pub progress: Progress,
}

/// One (objective, pre-training seed): its run and every score measured on it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunResults {
    pub objective: ObjectiveKind,
    pub pretrain_seed: u64,
    pub run: PathBuf,
    /// One per task, scores in fine-tuning seed order.
    pub glue: Vec<TaskResult>,
    pub squad: Option<SquadRobustness>,
    /// Table 8 statistics (HC runs).
    pub stats: Option<Vec<CheckpointStats>>,
}

/// SQuAD scores of one pre-trained model over the fine-tuning seeds: the original dev
/// questions and each attack's transformed copy.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SquadRobustness {
    pub ori: TaskResult,
    pub attacks: Vec<AttackScores>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AttackScores {
    pub attack: String,
    /// One per fine-tuning seed.
    pub per_seed: Vec<Scores>,
}

pub const ATTACKS: [AttackKind; 2] = [AttackKind::SwapSynWordnet, AttackKind::AddSentDiverse];

impl AblationSpec {
    /// Checks the settings before any work: the error names the option.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Config(m));
        if !self.objectives.contains(&ObjectiveKind::BASELINE) {
            return bad(
                "--objectives: include baseline (the reference of every paired difference)".into(),
            );
        }
        if let Some(k) = self
            .objectives
            .iter()
            .find(|k| k.data() == crate::text::shards::DataKind::Triples)
        {
            return bad(format!(
                "--objectives: {} trains on sentence triples, not on the ablation's packed corpus; compare it with `trueneg compare-continued`",
                k.name()
            ));
        }
        for (name, repeated) in [
            ("--objectives", has_repeat(&self.objectives)),
            ("--tasks", has_repeat(&self.tasks)),
        ] {
            if repeated {
                return bad(format!("{name}: a value is given twice"));
            }
        }
        check_seeds("--pretrain-seeds", &self.pretrain_seeds)?;
        check_seeds("--finetune-seeds", &self.finetune_seeds)?;
        if self.tasks.is_empty() && self.squad.is_none() {
            return bad("nothing to fine-tune: give --tasks with --glue, or --squad".into());
        }
        if !self.tasks.is_empty() && self.glue.is_none() {
            return bad("--tasks needs --glue (the folder holding CoLA/, SST-2/, …)".into());
        }
        if let Some(t) = self.tasks.iter().find(|t| !t.is_glue()) {
            return bad(format!("--tasks: {} is not a GLUE task", t.dir_name()));
        }
        if self.checkpoints == 0 {
            return bad("--checkpoints: must be > 0".into());
        }
        if self.stats_batches == 0 {
            return bad("--stats-batches: must be > 0".into());
        }
        for o in &self.overrides {
            let key = o.split_once('=').map(|(k, _)| k.trim()).unwrap_or(o);
            if matches!(
                key,
                "objective.kind"
                    | "train.seed"
                    | "train.checkpoint_every"
                    | "train.keep_checkpoints"
            ) {
                return bad(format!(
                    "--set {o}: the ablation sets {key} itself (see --objectives, --pretrain-seeds, --checkpoints)"
                ));
            }
        }
        if let Some(g) = &self.glue {
            for t in &self.tasks {
                let f = t.train_file(&g.join(t.dir_name()));
                if !f.is_present() {
                    return Err(Error::missing(&f, "no such file"));
                }
            }
        }
        for t in &self.tasks {
            self.glue_options(*t).validate_for(*t)?;
        }
        Ok(())
    }

    /// ELECTRA's fine-tuning recipe for `task` with this experiment's changes.
    pub fn glue_options(&self, task: GlueTask) -> FinetuneOptions {
        let mut o = FinetuneOptions::for_task(self.recipe, task);
        o.epochs = self.epochs.unwrap_or(o.epochs);
        o.choose_lr(self.lr);
        o.max_seq_len = self.max_seq_len.unwrap_or(o.max_seq_len);
        o.max_train_examples = self.max_train_examples;
        o.device = self.device.clone().unwrap_or_else(|| "cpu".into());
        o
    }

    /// The recipe's SQuAD options with this experiment's changes, windows of at most 384
    /// tokens within the model's `positions` unless the spec says.
    pub fn squad_options(&self, positions: usize) -> FinetuneOptions {
        let mut o = FinetuneOptions::squad(self.recipe);
        o.max_seq_len = self.squad_max_seq_len.unwrap_or(384.min(positions));
        o.epochs = self.squad_epochs.unwrap_or(o.epochs);
        o.choose_lr(self.lr);
        o.device = self.device.clone().unwrap_or_else(|| "cpu".into());
        o
    }

    /// Run folder name of one (objective, pre-training seed).
    pub fn tag(kind: ObjectiveKind, seed: u64) -> String {
        format!("{}-seed{seed}", kind.name())
    }
}

fn has_repeat<T: PartialEq>(v: &[T]) -> bool {
    v.iter().enumerate().any(|(i, x)| v[..i].contains(x))
}
