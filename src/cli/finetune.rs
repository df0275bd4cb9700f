//! `trueneg finetune`: a GLUE task or SQuAD, over seeds, with dev scores.

use std::path::PathBuf;

use trueneg::finetune::{classify as finetune, seeds as runner, span as qa};
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
    /// SQuAD: train-v1.1.json and dev-v1.1.json, or one JSON file split in two).
    #[arg(long)]
    data: PathBuf,
    /// A trueneg run folder or a transformers folder.
    #[arg(long)]
    model: PathBuf,
    /// Comma-separated seeds; one fine-tuned model each.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    seeds: Vec<u64>,
    /// A new (or empty) folder for results, predictions and fine-tuned models [default:
    /// <model>/finetune/<task>, or <task>-2, -3, … when that exists].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Peak learning rate [default: 1e-4, ELECTRA's recipe].
    #[arg(long)]
    lr: Option<f64>,
    /// Epochs [default: 3; RTE and STS-B 10; SQuAD 2].
    #[arg(long)]
    epochs: Option<usize>,
    /// Examples per step [default: 32].
    #[arg(long)]
    batch_size: Option<usize>,
    /// Tokens per example [default: 128; SQuAD 384].
    #[arg(long)]
    max_seq_len: Option<usize>,
    /// Layer-wise learning-rate decay [default: 0.8].
    #[arg(long)]
    layer_decay: Option<f64>,
    /// Train on at most this many examples (0 = all).
    #[arg(long, default_value_t = 0)]
    max_train_examples: usize,
    /// SQuAD: evaluate on at most this many questions (0 = all).
    #[arg(long, default_value_t = 0)]
    max_eval_examples: usize,
    /// SQuAD: tokens between the starts of two context windows.
    #[arg(long, default_value_t = 128)]
    doc_stride: usize,
    /// MRPC / QQP: also train on the swapped sentence order.
    #[arg(long)]
    both_orders: bool,
    /// Device to train and predict on: cpu, or cuda / libtorch-cuda in a build with that
    /// feature.
    #[arg(long, default_value = "cpu")]
    device: String,
}

/// Changes to ELECTRA's fine-tuning recipe taken by the experiment commands (`ablation`,
/// `cline-compare`).
#[derive(clap::Args)]
pub struct RecipeArgs {
    /// Fine-tuning epochs [default: ELECTRA's, 3; RTE and STS-B 10].
    #[arg(long)]
    pub epochs: Option<usize>,
    /// Fine-tuning peak learning rate [default: 1e-4; the ablation also uses it for SQuAD].
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
    pub fn apply(&self, o: &mut finetune::FinetuneOptions) {
        o.epochs = self.epochs.unwrap_or(o.epochs);
        o.lr = self.lr.unwrap_or(o.lr);
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

pub fn run(a: Args, ui: Ui) -> anyhow::Result<()> {
    let task = task(&a.task)?;
    let name = task.display_name();
    let mut opts = match task {
        Task::Squad => qa::squad_finetune_options(),
        Task::Classification(t) => finetune::FinetuneOptions::electra(t),
    };
    opts.lr = a.lr.unwrap_or(opts.lr);
    opts.epochs = a.epochs.unwrap_or(opts.epochs);
    opts.batch_size = a.batch_size.unwrap_or(opts.batch_size);
    opts.max_seq_len = a.max_seq_len.unwrap_or(opts.max_seq_len);
    opts.layer_decay = a.layer_decay.unwrap_or(opts.layer_decay);
    opts.max_train_examples = a.max_train_examples;
    opts.both_orders = a.both_orders;
    opts.device = a.device.clone();
    opts.validate()?;
    trueneg::device::device_for(&opts.device).map_err(|e| anyhow::anyhow!("--device: {e}"))?;
    if a.seeds.is_empty() {
        anyhow::bail!("--seeds: give at least one seed");
    }
    let pre = finetune::load_pretrained(&a.model)?;
    let (out, _lock) = runner::claim_out(a.out.as_deref(), &runner::default_out(&a.model, name))?;
    let mut report = |line: String| println!("{line}");
    let result = if let Some(glue) = task.classification() {
        runner::finetune_glue(
            glue,
            &pre,
            &a.data,
            &opts,
            &a.seeds,
            &out,
            ui.bars(),
            &mut report,
        )?
    } else {
        let (train, dev) =
            runner::squad_splits(&a.data, a.max_train_examples, a.max_eval_examples)?;
        let qa_opts = qa::QaOptions {
            max_seq_len: opts.max_seq_len,
            doc_stride: a.doc_stride,
            ..qa::QaOptions::default()
        };
        runner::finetune_qa(
            &pre,
            &train,
            &dev,
            &opts,
            &qa_opts,
            &a.seeds,
            &out,
            ui.bars(),
            &mut report,
        )?
    };
    print!("{}", runner::write_results(&out, &result)?);
    println!(
        "train {:.1} examples/s, evaluate {:.1} examples/s -> {}",
        result.train_examples_per_s,
        result.eval_examples_per_s,
        out.display()
    );
    Ok(())
}
