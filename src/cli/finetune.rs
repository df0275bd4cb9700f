//! `trueneg finetune`: a GLUE task or SQuAD, over seeds, with dev scores.

use std::path::PathBuf;

use trueneg::frame::{Claim, InputKind, OutputKind, Owned, Plan};

use trueneg::finetune::qa_features::QaOptions;
use trueneg::finetune::recipe::{
    BatchLoss, EvalEvery, FinetuneOptions, HeadKind, Keep, LayerDecayRule, Recipe, Schedule,
};
use trueneg::finetune::{seeds as runner, span as qa};
use trueneg::tasks::task::Task;

use super::Ui;

/// The tasks `--task` takes.
pub const TASKS: &str = "cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, cad-sentiment, cad-nli, boolq, perspectrum or squad";

#[derive(clap::Args)]
pub struct Args {
    /// cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, cad-sentiment, cad-nli, boolq, perspectrum
    /// or squad.
    #[arg(long)]
    task: String,
    /// The task's folder (GLUE: train.tsv, dev.tsv; MNLI: dev_matched.tsv, dev_mismatched.tsv;
    /// SQuAD: train-v1.1.json and dev-v1.1.json, or one JSON file split in two), or the folder
    /// holding it under the task's name (`--data glue/ --task rte` reads glue/RTE).
    #[arg(long)]
    data: PathBuf,
    /// A trueneg run folder, a transformers folder (a trueneg export or another), a Hub model id
    /// already in the local Hugging Face cache (`google/electra-small-discriminator`), or a
    /// fine-tuned model (`ft/rte/seed-1`): a head that fits the task's is kept, and continues.
    #[arg(long)]
    model: PathBuf,
    /// Comma-separated seeds; one fine-tuned model each.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    seeds: Vec<u64>,
    /// A new (or empty) folder for results, predictions and fine-tuned models [default:
    /// <model>/finetune/<TASK>, the task's GLUE folder name (`RTE`, `SST-2`, `SQuAD`), or
    /// <TASK>-2, -3, … when that is taken].
    #[arg(long)]
    out: Option<PathBuf>,
    /// The fine-tuning recipe: `electra` (google-research/electra: no Adam bias correction,
    /// lr·min(1, t/W)·(1 − t/T), layer-wise decay 0.8 as its code reads it, dropout + dense on
    /// [CLS], MRPC and STS-B in both orders) or `transformers` (the Trainer of run_glue /
    /// run_qa: torch AdamW, linear decay, no layer-wise decay, transformers' heads). The
    /// flags below override single settings.
    #[arg(long, default_value = "electra", value_parser = parse_recipe)]
    recipe: Recipe,
    /// Peak learning rate [electra: by the encoder's size, as ELECTRA's paper (Table 7): Small
    /// (hidden size up to 256) 3e-4 (its code's default is 1e-4), Base (up to 768) 1e-4, Large
    /// 5e-5; transformers: 2e-5, SQuAD 3e-5].
    #[arg(long)]
    lr: Option<f64>,
    /// Epochs [electra: 3, RTE and STS-B 10, SQuAD 2; transformers: 3, SQuAD 2].
    #[arg(long)]
    epochs: Option<usize>,
    /// Examples per step [electra: 32; transformers: 32, SQuAD 12].
    #[arg(long)]
    batch_size: Option<usize>,
    /// Tokens per example [128; SQuAD: electra 512, transformers 384].
    #[arg(long)]
    max_seq_len: Option<usize>,
    /// Layer-wise learning-rate decay, 1 = none [electra: 0.8, Large encoders 0.9 (its
    /// configure_finetuning.py); transformers: 1].
    #[arg(long)]
    layer_decay: Option<f64>,
    /// How a batch's loss is made of its examples' losses: `sum` (ELECTRA's run_finetuning.py)
    /// or `mean` (transformers'). The logged loss is the mean either way [electra: sum;
    /// transformers: mean].
    #[arg(long, value_parser = parse_batch_loss)]
    batch_loss: Option<BatchLoss>,
    /// How the decay maps depth to a factor: `electra` (google-research/electra's code as
    /// written: the top layer decay², the embeddings decay^(L+2)) or `shifted` (the top layer
    /// decay, the embeddings decay^(L+1)) [default: electra].
    #[arg(long, value_parser = parse_rule)]
    layer_decay_rule: Option<LayerDecayRule>,
    /// Fraction of the steps spent warming up [electra: 0.1; transformers: 0].
    #[arg(long)]
    warmup_fraction: Option<f64>,
    /// Schedule: `product` (ELECTRA's lr·min(1, t/W)·(1 − t/T)) or `linear` (transformers'
    /// warmup then linear decay) [electra: product; transformers: linear].
    #[arg(long, value_parser = parse_schedule)]
    schedule: Option<Schedule>,
    /// Decoupled weight decay, not on biases and LayerNorm [electra: 0.01; transformers: 0].
    #[arg(long)]
    weight_decay: Option<f64>,
    /// Adam's ε [electra: 1e-6; transformers: 1e-8].
    #[arg(long)]
    adam_eps: Option<f64>,
    /// Adam's bias correction [electra: false; transformers: true].
    #[arg(long)]
    bias_correction: Option<bool>,
    /// The head: `electra` (GLUE: dropout + dense on [CLS]; SQuAD: ELECTRA's joint head, the
    /// end conditioned on the start, beam decoding and an answerability classifier) or
    /// `transformers` (GLUE: ElectraClassificationHead, dense, GELU, dense; SQuAD: one
    /// qa_outputs layer). The head only: the optimizer, schedule and lengths stay the recipe's
    /// (`--recipe` changes those). Both GLUE heads export to transformers; ELECTRA's SQuAD head
    /// has no transformers class, and `export` refuses it. BERT backbones always take BERT's
    /// pooler for GLUE [electra: electra; transformers: transformers].
    #[arg(long, value_parser = parse_head)]
    head: Option<HeadKind>,
    /// The encoder's compute precision: `f32`, or `bf16` mixed precision (bf16 matrix
    /// products; f32 weights, updates, LayerNorm, softmax and losses), as pre-training's
    /// train.precision. It pays on a GPU (--device libtorch-cuda); on a CPU without fast bf16
    /// products it is slower than f32. `auto`: bf16 on a GPU and on a CPU whose bf16 products
    /// measure at least 1.2x its f32 products (Zen 4/5), f32 elsewhere (the log says which
    /// and why).
    #[arg(long, default_value = "f32", value_parser = super::precision)]
    precision: trueneg::model::Precision,
    /// Micro-batches per update (gradient accumulation): each batch runs as this many slices
    /// whose gradients are summed into one update, so the update is the batch's and the
    /// memory a slice's.
    #[arg(long, default_value_t = 1, value_parser = super::at_least(1))]
    grad_accum: usize,
    /// Train on at most this many examples (0 = all).
    #[arg(long, default_value_t = 0)]
    max_train_examples: usize,
    /// SQuAD: evaluate on at most this many questions (0 = all).
    #[arg(long, default_value_t = 0)]
    max_eval_examples: usize,
    /// SQuAD: tokens between the starts of two context windows.
    #[arg(long, default_value_t = 128, value_parser = super::at_least(1))]
    doc_stride: usize,
    /// Also train on the swapped sentence order; only for unordered pairs (MRPC, STS-B, QQP)
    /// [electra: MRPC and STS-B; transformers: none].
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    both_orders: Option<bool>,
    /// Device to train and predict on: cpu, or cuda / libtorch-cuda in a build with that
    /// feature.
    #[arg(long, default_value = "cpu")]
    device: String,
    /// When the dev sets are scored during training (each seed's metrics.jsonl, TensorBoard
    /// and loss.png): `epoch`, every N updates, or `end` (after training only) [default:
    /// epoch; SQuAD: end, its only choice].
    #[arg(long, value_parser = parse_eval_every)]
    eval_every: Option<EvalEvery>,
    /// The model each seed keeps, reports and exports: `last` (ELECTRA's; the papers'
    /// numbers) or `best` (the best dev task score among the evaluations during training).
    #[arg(long, default_value = "last", value_parser = parse_keep)]
    keep: Keep,
    /// Stop a seed after this many evaluations without a better dev task score (with
    /// `--keep best`, as transformers' EarlyStoppingCallback) [default: never].
    #[arg(long, value_parser = super::at_least(1))]
    early_stop: Option<usize>,
    /// The model weights' content fingerprint, computed once for the plan and the run.
    #[arg(skip)]
    weights: std::sync::OnceLock<String>,
}

fn parse_eval_every(s: &str) -> Result<EvalEvery, String> {
    EvalEvery::parse(s).ok_or_else(|| format!("expected {}", EvalEvery::NAMES))
}

fn parse_keep(s: &str) -> Result<Keep, String> {
    Keep::parse(s).ok_or_else(|| format!("expected {}", Keep::NAMES))
}

fn parse_recipe(s: &str) -> Result<Recipe, String> {
    Recipe::parse(s).ok_or_else(|| format!("expected {}", Recipe::NAMES))
}

fn parse_batch_loss(s: &str) -> Result<BatchLoss, String> {
    BatchLoss::parse(s).ok_or_else(|| format!("expected {}", BatchLoss::NAMES))
}

fn parse_rule(s: &str) -> Result<LayerDecayRule, String> {
    LayerDecayRule::parse(s).ok_or_else(|| format!("expected {}", LayerDecayRule::NAMES))
}

fn parse_schedule(s: &str) -> Result<Schedule, String> {
    match s {
        "product" => Ok(Schedule::Product),
        "linear" => Ok(Schedule::Linear),
        _ => Err("expected product or linear".into()),
    }
}

fn parse_head(s: &str) -> Result<HeadKind, String> {
    match s {
        "electra" => Ok(HeadKind::Electra),
        "transformers" => Ok(HeadKind::Transformers),
        _ => Err("expected electra or transformers".into()),
    }
}

impl Args {
    /// The recipe's options for `task` with this command's overrides.
    fn options(&self, task: Task) -> anyhow::Result<FinetuneOptions> {
        let mut o = match task {
            Task::Squad => FinetuneOptions::squad(self.recipe),
            Task::Classification(t) => FinetuneOptions::for_task(self.recipe, t),
        };
        o.choose_lr(self.lr);
        o.epochs = self.epochs.unwrap_or(o.epochs);
        o.batch_size = self.batch_size.unwrap_or(o.batch_size);
        o.max_seq_len = self.max_seq_len.unwrap_or(o.max_seq_len);
        o.choose_layer_decay(self.layer_decay);
        o.batch_loss = self.batch_loss.unwrap_or(o.batch_loss);
        o.layer_decay_rule = self.layer_decay_rule.unwrap_or(o.layer_decay_rule);
        o.warmup_fraction = self.warmup_fraction.unwrap_or(o.warmup_fraction);
        o.schedule = self.schedule.unwrap_or(o.schedule);
        o.weight_decay = self.weight_decay.unwrap_or(o.weight_decay);
        o.adam_eps = self.adam_eps.unwrap_or(o.adam_eps);
        o.bias_correction = self.bias_correction.unwrap_or(o.bias_correction);
        o.head = self.head.unwrap_or(o.head);
        o.both_orders = self.both_orders.unwrap_or(o.both_orders);
        o.max_train_examples = self.max_train_examples;
        // `auto` is recorded as what it chose (finetune.json); a bad --device is named below.
        o.precision = match self.device.parse::<trueneg::device::DeviceName>() {
            Ok(device) => self.precision.resolved(device),
            Err(_) => self.precision,
        };
        o.grad_accum = self.grad_accum;
        o.device = self.device.clone();
        o.keep = self.keep;
        o.early_stop = self.early_stop.unwrap_or(0);
        o.eval_every = match (task, self.eval_every) {
            (Task::Squad, None | Some(EvalEvery::End)) => EvalEvery::End,
            (Task::Squad, Some(_)) => {
                anyhow::bail!("--eval-every: SQuAD's dev set is scored after training only (end)")
            }
            (_, e) => e.unwrap_or(o.eval_every),
        };
        match task {
            Task::Classification(t) => o.validate_for(t)?,
            Task::Squad if o.both_orders => {
                anyhow::bail!("--both-orders: SQuAD's question and context cannot be swapped")
            }
            Task::Squad => o.validate()?,
        }
        Ok(o)
    }
}

/// The fine-tuning recipe of the experiment commands and their changes to it.
#[derive(clap::Args)]
pub struct RecipeArgs {
    /// Fine-tuning recipe: `electra` (google-research/electra's) or `transformers` (the
    /// Trainer's); see `finetune --help`.
    #[arg(long, default_value = "electra", value_parser = parse_recipe)]
    pub recipe: Recipe,
    /// Fine-tuning epochs [default: ELECTRA's, 3; RTE and STS-B 10].
    #[arg(long)]
    pub epochs: Option<usize>,
    /// Fine-tuning peak learning rate [default: the recipe's; ELECTRA's by the encoder's size,
    /// Small 3e-4, Base 1e-4, Large 5e-5; the ablation also uses it for SQuAD].
    #[arg(long)]
    pub lr: Option<f64>,
    /// Fine-tuning tokens per example [default: 128].
    #[arg(long)]
    pub max_seq_len: Option<usize>,
    /// Fine-tune each task on at most this many examples (0 = all).
    #[arg(long, default_value_t = 0)]
    pub max_train_examples: usize,
}

impl RecipeArgs {
    /// The recipe's options for `task` with these changes.
    pub fn options(&self, task: trueneg::tasks::glue::GlueTask) -> FinetuneOptions {
        let mut o = FinetuneOptions::for_task(self.recipe, task);
        self.apply(&mut o);
        o
    }

    pub fn apply(&self, o: &mut FinetuneOptions) {
        o.epochs = self.epochs.unwrap_or(o.epochs);
        o.choose_lr(self.lr);
        o.max_seq_len = self.max_seq_len.unwrap_or(o.max_seq_len);
        o.max_train_examples = self.max_train_examples;
    }
}

pub fn glue_task(name: &str) -> anyhow::Result<trueneg::tasks::glue::GlueTask> {
    trueneg::tasks::glue::GlueTask::parse(name)
        .ok_or_else(|| anyhow::anyhow!("--task {name}: expected {TASKS}"))
}

/// `--task`: `squad` or a GLUE task's name.
pub fn task(name: &str) -> anyhow::Result<Task> {
    Task::parse(name).ok_or_else(|| anyhow::anyhow!("--task {name}: expected {TASKS}"))
}

impl Args {
    /// The content fingerprint of `--model`'s weights, kept in the field `weights` once known.
    fn weights(&self) -> anyhow::Result<String> {
        if let Some(w) = self.weights.get() {
            return Ok(w.clone());
        }
        let w = trueneg::finetune::pretrained::weights_fingerprint(&self.model)?;
        Ok(self.weights.get_or_init(|| w).clone())
    }

    /// The task's data folder: `--data`, or its folder for the task (`--data glue/` holds
    /// `glue/RTE/`).
    fn data(&self, task: Task) -> PathBuf {
        match task.classification() {
            Some(t) => t.folder(&self.data),
            None => self.data.clone(),
        }
    }

    /// What decides the results and comes from the command line, with the content fingerprint
    /// of the model's weights: a run stopped before its results continues under the same
    /// command, on the same weights only. (`None` before the model is known to be one: the
    /// frame then refuses it.)
    fn identity(&self, task: Task, weights: Option<String>) -> anyhow::Result<serde_json::Value> {
        Ok(serde_json::json!({
            "task": task.display_name(),
            "model": std::path::absolute(&self.model)?,
            "data": std::path::absolute(self.data(task))?,
            "seeds": self.seeds,
            "max_train_examples": self.max_train_examples,
            "max_eval_examples": self.max_eval_examples,
            "doc_stride": self.doc_stride,
            (trueneg::finetune::out_folder::WEIGHTS): weights,
        }))
    }
}

impl super::Command for Args {
    fn plan(&self) -> anyhow::Result<Plan> {
        let task = task(&self.task)?;
        let opts = self.options(task)?;
        trueneg::device::device_for(&opts.device).map_err(|e| anyhow::anyhow!("--device: {e}"))?;
        trueneg::experiments::bootstrap::check_seeds("--seeds", &self.seeds)?;
        let out = trueneg::finetune::out_folder::choose_out(
            self.out.as_deref(),
            &trueneg::finetune::out_folder::default_out(&self.model, task.display_name()),
            &self.identity(task, self.weights().ok())?,
        );
        Ok(Plan::new("finetune")
            .input("--model", &self.model, InputKind::FinetuneStart)
            .input("--data", &self.data(task), InputKind::TaskData)
            .output("--out", &out, OutputKind::Folder)
            .stops_at_safe_points(
                "the seeds that finished are kept: the same command continues with the others",
            ))
    }

    fn run(self: Box<Self>, claim: &Claim, ui: Ui) -> anyhow::Result<()> {
        run(*self, claim.folder("--out"), ui)
    }
}

fn run(a: Args, out: &Owned, ui: Ui) -> anyhow::Result<()> {
    let task = task(&a.task)?;
    let mut opts = a.options(task)?;
    let pre = trueneg::finetune::pretrained::load_pretrained(&a.model)?;
    // The recipe's length, when not asked for, fits the model's positions.
    let positions = pre.config.max_position_embeddings;
    if a.max_seq_len.is_none() && opts.max_seq_len > positions {
        eprintln!(
            "note: the recipe's {} tokens exceed the model's {positions} positions: sequences (SQuAD: windows) of {positions} tokens; --max-seq-len chooses",
            opts.max_seq_len
        );
        opts.max_seq_len = positions;
    }
    opts.check_model(&pre.config)?;
    // The rate the seeds train with (ELECTRA's by the encoder's size), recorded as such.
    let (opts, _) = opts.for_encoder(&pre.config);
    let weights = a.weights()?;
    let mut settings = a.identity(task, Some(weights))?;
    settings["options"] = serde_json::to_value(&opts)?;
    let claimed = trueneg::finetune::out_folder::claim_out(out, &settings)?;
    let out = claimed.dir.clone();
    match tune(&a, task, &pre, &opts, &out, ui) {
        Ok(()) => Ok(()),
        Err(e) => {
            claimed.forget_unstarted();
            Err(e)
        }
    }
}

/// Fine-tunes and scores every seed of `task` into `out`, and writes the results.
fn tune(
    a: &Args,
    task: Task,
    pre: &trueneg::finetune::pretrained::PretrainedEncoder,
    opts: &trueneg::finetune::recipe::FinetuneOptions,
    out: &std::path::Path,
    ui: Ui,
) -> anyhow::Result<()> {
    let mut report = |line: String| println!("{line}");
    let result = if let Some(glue) = task.classification() {
        runner::finetune_glue(
            glue,
            pre,
            &a.data(task),
            opts,
            runner::SeedPlan {
                seeds: &a.seeds,
                out,
                progress: ui.bars(),
                report: &mut report,
            },
        )?
    } else {
        let (train, dev) =
            runner::squad_splits(&a.data(task), a.max_train_examples, a.max_eval_examples)?;
        if qa::SpanHeadKind::of(opts.head) == qa::SpanHeadKind::ElectraJoint {
            eprintln!(
                "note: SQuAD under --head electra trains ELECTRA's joint start-to-end head, which transformers has no class for: `export` will refuse these models (--head transformers trains one that exports)"
            );
        }
        let qa_opts = QaOptions {
            max_seq_len: opts.max_seq_len,
            doc_stride: a.doc_stride,
            ..QaOptions::default()
        };
        runner::finetune_qa(
            pre,
            &train,
            &dev,
            opts,
            &qa_opts,
            runner::SeedPlan {
                seeds: &a.seeds,
                out,
                progress: ui.bars(),
                report: &mut report,
            },
        )?
    };
    print!("{}", runner::write_results(out, &result)?);
    println!(
        "train {:.1} examples/s, evaluate {:.1} examples/s -> {}",
        result.train_examples_per_s,
        result.eval_examples_per_s,
        out.display()
    );
    Ok(())
}
