//! `trueneg ablation`: the paper's ablation in one command (pre-training per objective and
//! seed, HC statistics, GLUE and SQuAD fine-tuning over seeds, robustness, report).

use std::path::PathBuf;

use trueneg::experiments::ablation::{AblationOptions, AblationSpec, ablation};

use trueneg::frame::{Claim, InputKind, OutputKind, Owned, Plan};

use super::Ui;

/// The tasks of the paper's Table 2 that ../shared holds.
const DEFAULT_TASKS: &str = "cola,sst2,mrpc,stsb,rte";

#[derive(clap::Args)]
pub struct Args {
    /// A preset (tiny, electra-small, electra-base, bert-base, electra-base-continue,
    /// bert-base-continue, hc-acting) or a TOML file for every run.
    #[arg(long)]
    config: String,
    /// Override a config value of every run, e.g. --set train.steps=600 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Comma-separated objectives (`objective.kind` names of the masked-LM step; baseline
    /// required) [default: the paper's ablation rows].
    #[arg(long, value_delimiter = ',', default_value = trueneg::objective::ABLATION_ROWS, hide_default_value = true)]
    objectives: Vec<String>,
    /// Comma-separated pre-training seeds.
    #[arg(long, value_delimiter = ',', default_value = "1,2,3")]
    pretrain_seeds: Vec<u64>,
    /// Device of every run, pre-training and fine-tuning (cpu, cuda, libtorch-cuda, … as built)
    /// [default: the config's train.device for pre-training, cpu for fine-tuning].
    #[arg(long)]
    device: Option<String>,
    /// Checkpoints per pre-training run; HC runs keep them all for the statistics.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    checkpoints: u64,
    /// The folder holding GLUE's task folders (CoLA/, SST-2/, MRPC/, STS-B/, RTE/, …).
    #[arg(long)]
    glue: Option<PathBuf>,
    /// Comma-separated GLUE tasks [default with --glue: cola,sst2,mrpc,stsb,rte].
    #[arg(long, value_delimiter = ',')]
    tasks: Option<Vec<String>>,
    /// Comma-separated fine-tuning seeds.
    #[arg(long, value_delimiter = ',', default_value = "1,2,3")]
    finetune_seeds: Vec<u64>,
    #[command(flatten)]
    recipe: super::finetune::RecipeArgs,
    /// SQuAD v1.1: a folder (train-v1.1.json, dev-v1.1.json) or one file split in two.
    #[arg(long)]
    squad: Option<PathBuf>,
    /// SQuAD questions to train on (0 = all; one file: the first N).
    #[arg(long, default_value_t = 0)]
    squad_train: usize,
    /// SQuAD dev questions to evaluate on (0 = all).
    #[arg(long, default_value_t = 0)]
    squad_eval: usize,
    /// SQuAD fine-tuning epochs [default: 2].
    #[arg(long)]
    squad_epochs: Option<usize>,
    /// SQuAD window length [default: 384, or the model's longest position when shorter].
    #[arg(long)]
    squad_max_seq_len: Option<usize>,
    /// Seed of the attacks' random choices.
    #[arg(long, default_value_t = 1)]
    attack_seed: u64,
    /// Text the HC statistics mask and predict (the paper: WikiText-2) [default: the embedded
    /// corpus when the config names no shards].
    #[arg(long)]
    stats_corpus: Option<PathBuf>,
    /// Batches of 32 sequences per checkpoint for the HC statistics.
    #[arg(long, default_value_t = 50, value_parser = super::at_least(1))]
    stats_batches: usize,
    /// Keep the fine-tuned models' weights (by default only scores and predictions stay).
    #[arg(long)]
    keep_models: bool,
    /// Folder of the experiment; an unfinished one continues where it stopped.
    #[arg(long)]
    out: PathBuf,
}

impl super::Command for Args {
    fn plan(&self) -> anyhow::Result<Plan> {
        super::set_owned_by(&self.set, "objective.kind", "--objectives")?;
        super::set_owned_by(&self.set, "train.seed", "--pretrain-seeds")?;
        Ok(Plan::new("ablation")
            .inputs(super::config_inputs(&self.config, &self.set)?)
            .input_if("--glue", self.glue.as_ref(), InputKind::TaskData)
            .input_if("--squad", self.squad.as_ref(), InputKind::TaskData)
            .input_if(
                "--stats-corpus",
                self.stats_corpus.as_ref(),
                InputKind::Corpus,
            )
            .output("--out", &self.out, OutputKind::Folder)
            .stops_at_safe_points(&trueneg::stop::kept_in(&self.out)))
    }

    fn run(self: Box<Self>, claim: &Claim, ui: Ui) -> anyhow::Result<()> {
        run(*self, claim.folder("--out"), ui)
    }
}

fn run(a: Args, out: &Owned, ui: Ui) -> anyhow::Result<()> {
    let objectives = a
        .objectives
        .iter()
        .map(|o| super::objective_kind(o).map_err(|e| anyhow::anyhow!("--objectives {e}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let tasks = match (&a.tasks, &a.glue) {
        (Some(t), _) => t.clone(),
        (None, Some(_)) => DEFAULT_TASKS.split(',').map(String::from).collect(),
        (None, None) => Vec::new(),
    }
    .iter()
    .filter(|t| !t.trim().is_empty())
    .map(|t| super::finetune::glue_task(t.trim()))
    .collect::<anyhow::Result<Vec<_>>>()?;
    let spec = AblationSpec {
        config: a.config,
        overrides: a.set,
        objectives,
        pretrain_seeds: a.pretrain_seeds,
        device: a.device,
        checkpoints: a.checkpoints,
        glue: a.glue,
        tasks,
        finetune_seeds: a.finetune_seeds,
        recipe: a.recipe.recipe,
        epochs: a.recipe.epochs,
        lr: a.recipe.lr,
        max_seq_len: a.recipe.max_seq_len,
        max_train_examples: a.recipe.max_train_examples,
        squad: a.squad,
        squad_train: a.squad_train,
        squad_eval: a.squad_eval,
        squad_epochs: a.squad_epochs,
        squad_max_seq_len: a.squad_max_seq_len,
        attack_seed: a.attack_seed,
        stats_corpus: a.stats_corpus,
        stats_batches: a.stats_batches,
    };
    let (_, md) = ablation(&AblationOptions {
        spec,
        out: out.clone(),
        keep_models: a.keep_models,
        progress: ui.progress,
    })
    .map_err(|e| trueneg::stop::continued_by_rerun(e, &a.out))?;
    print!("{md}");
    println!("wrote {}", a.out.join("report.md").display());
    Ok(())
}
