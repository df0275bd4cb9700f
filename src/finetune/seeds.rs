//! Fine-tuning over several seeds: one model per seed, each trained and then scored from what
//! was saved, gathered into a task's results (`results.rs`).

use crate::io::PathQuery;
use std::collections::BTreeMap;
use std::path::Path;

use crate::finetune::classifier_folder::{load_finetuned, save_finetuned};
use crate::finetune::classify::{DevSets, SeedTraining, finetune_one, read_task, score_dev};
use crate::finetune::eval_plan::EvalEvery;
use crate::finetune::pretrained::PretrainedEncoder;
use crate::finetune::qa_features::QaOptions;
use crate::finetune::recipe::FinetuneOptions;
use crate::finetune::record::{SeedTrained, TrainingRecord};
pub use crate::finetune::results::{
    ExampleCounts, Summary, TaskResult, results_table, summary, warnings, write_results,
};
use crate::finetune::scores::Scores;
use crate::finetune::span::{finetune_squad, load_qa, predict_squad, save_qa};
use crate::tasks::glue::GlueTask;
use crate::tasks::squad::{SquadExample, evaluate_squad};
use crate::tasks::task::Task;
use crate::{Error, Result};

/// One line per seed and dev file, for the caller to show.
pub type Report<'a, 'b> = &'a mut (dyn FnMut(String) + 'b);

/// The seeds of a fine-tuning run and where they go: one model per seed in `out/seed-N`,
/// progress bars or not, and the line each finished seed reports.
pub struct SeedPlan<'a, 'b, 'c> {
    pub seeds: &'a [u64],
    pub out: &'a Path,
    pub progress: bool,
    pub report: Report<'b, 'c>,
}

fn metrics_line(m: &BTreeMap<String, f64>) -> String {
    m.iter()
        .map(|(k, v)| format!("{k} {v:.2}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every metric, then the task score beside its baselines.
fn scores_line(task: GlueTask, s: &Scores) -> String {
    let metric = crate::finetune::scores::score_metric(task);
    let others: BTreeMap<String, f64> = s
        .metrics
        .iter()
        .filter(|(k, _)| k.as_str() != metric)
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    let main = s.with_baselines(metric);
    if others.is_empty() {
        main
    } else {
        format!("{main}; {}", metrics_line(&others))
    }
}

/// One task as the seed loop runs it: trained once per seed into a folder of its own, then
/// scored from what was saved there.
pub trait SeedRun {
    /// The task's name in tables and progress lines.
    fn name(&self) -> &'static str;
    /// Trains with `seed` and saves the model into `dir` with its training record.
    fn train(&self, seed: u64, dir: &Path) -> Result<SeedTrained>;
    /// Scores the model saved in `dir` on the dev data (one progress line per dev file);
    /// returns the scores and prediction examples/s.
    fn score(&self, seed: u64, dir: &Path, report: Report) -> Result<(Scores, f64)>;
    /// The settings every seed trains with.
    fn options(&self) -> &FinetuneOptions;
    /// The examples each seed trains and is scored on.
    fn examples(&self) -> ExampleCounts;
    /// The pre-trained encoder every seed starts from.
    fn encoder(&self) -> &PretrainedEncoder;
}

/// The seed loop of every task: trains and scores `run` once per seed (models in
/// `out/seed-N`), with the training and prediction rates averaged over the seeds.
pub fn run_seeds(
    run: &dyn SeedRun,
    seeds: &[u64],
    out: &Path,
    report: Report,
) -> Result<TaskResult> {
    let mut per_seed = Vec::new();
    let (mut train_rate, mut eval_rate) = (0.0, 0.0);
    for &seed in seeds {
        let dir = out.join(format!("seed-{seed}"));
        let trained = train_once(run, seed, &dir).map_err(|e| match e {
            Error::Interrupted(why) => Error::Interrupted(format!(
                "{why} (seed {seed}); the finished seeds are kept in {}: the same command continues",
                out.display()
            )),
            e => e,
        })?;
        if trained.kept_step != trained.steps || trained.stopped_early {
            report(format!(
                "{} seed {seed}: kept the model of update {} of {}{}",
                run.name(),
                trained.kept_step,
                trained.steps,
                if trained.stopped_early {
                    " (stopped early: no better dev score)"
                } else {
                    ""
                }
            ));
        }
        train_rate += trained.train_examples_per_s / seeds.len() as f64;
        let (s, rate) = run.score(seed, &dir, report)?;
        eval_rate += rate / seeds.len() as f64;
        for why in s.warnings() {
            report(format!("{} seed {seed}: warning: {why}", run.name()));
        }
        per_seed.push(s);
    }
    let mut result = TaskResult::new(run.name(), seeds, per_seed, (train_rate, eval_rate));
    result.options = Some(run.options().clone());
    result.examples = Some(run.examples());
    result.model = Some(run.encoder().source.clone());
    Ok(result)
}

/// A seed folder's record that its model is complete (`training.json`).
pub(crate) const TRAINED: &str = "training.json";

/// Trains seed `seed` into `dir` unless an earlier, stopped call finished it.
fn train_once(run: &dyn SeedRun, seed: u64, dir: &Path) -> Result<SeedTrained> {
    let record = dir.join(TRAINED);
    if let Ok(t) = crate::io::read_json::<SeedTrained>(&record) {
        return Ok(t);
    }
    let trained = run.train(seed, dir)?;
    crate::io::write_json(&record, &trained)?;
    Ok(trained)
}

/// The record of a seed's training in `dir`, its settings `opts` shown in TensorBoard.
fn new_record(dir: &Path, opts: &FinetuneOptions) -> Result<TrainingRecord> {
    TrainingRecord::create(dir, &serde_json::to_value(opts).expect("json"))
}

/// A classification / regression task's run: its train examples and dev files.
struct GlueRun<'a> {
    task: GlueTask,
    pre: &'a PretrainedEncoder,
    train: Vec<crate::tasks::glue::GlueExample>,
    dev: DevSets,
    opts: &'a FinetuneOptions,
    device: burn::prelude::Device,
    progress: bool,
}

impl SeedRun for GlueRun<'_> {
    fn name(&self) -> &'static str {
        self.task.dir_name()
    }

    fn train(&self, seed: u64, dir: &Path) -> Result<SeedTrained> {
        let mut record = new_record(dir, self.opts)?;
        let scored = self.opts.eval_every != EvalEvery::End;
        let mut m = finetune_one(SeedTraining {
            task: self.task,
            pre: self.pre,
            train: &self.train,
            opts: self.opts,
            seed,
            progress: self.progress,
            record: &mut record,
            dev: scored.then_some(&self.dev),
        })?;
        record.finish()?;
        save_finetuned(
            &mut m.model,
            &self.pre.tokenizer,
            self.opts.max_seq_len,
            dir,
        )?;
        Ok(SeedTrained {
            train_examples_per_s: m.examples_per_s,
            steps: m.steps,
            kept_step: m.kept_step,
            stopped_early: m.stopped_early,
        })
    }

    fn score(&self, seed: u64, dir: &Path, report: Report) -> Result<(Scores, f64)> {
        let (ft, tok, max_len) = load_finetuned(dir, &self.device)?;
        let d = score_dev(&ft, &tok, &self.dev, max_len, self.progress)?;
        for ((file, _), s) in self.dev.iter().zip(&d.per_file) {
            report(format!(
                "{} seed {seed} {}: {}",
                self.task.dir_name(),
                file.display(),
                scores_line(self.task, s)
            ));
        }
        Ok((d.merged, d.examples_per_s))
    }

    fn options(&self) -> &FinetuneOptions {
        self.opts
    }

    fn encoder(&self) -> &PretrainedEncoder {
        self.pre
    }

    fn examples(&self) -> ExampleCounts {
        let used: Vec<_> =
            crate::finetune::classify::training_examples(&self.train, self.opts).collect();
        let swapped = used.iter().filter(|e| e.text_b.is_some()).count();
        ExampleCounts {
            train: used.len(),
            train_rows: used.len() + if self.opts.both_orders { swapped } else { 0 },
            dev: self.dev.iter().map(|(_, ex)| ex.len()).sum(),
        }
    }
}

/// Refuses fine-tuning whose step cannot fit in memory (a micro-batch of
/// [`FinetuneOptions::micro_batch`] rows, at most the `rows` examples there are, of
/// `opts.max_seq_len` tokens), before any training.
fn check_training_fits(pre: &PretrainedEncoder, opts: &FinetuneOptions, rows: usize) -> Result<()> {
    let batch = opts.micro_batch().min(rows.max(1));
    crate::memory::check(
        crate::model::footprint::training_bytes(&pre.config, batch, opts.max_seq_len),
        &format!(
            "fine-tuning with batches of {batch} × {} tokens (model {} × {} layers)",
            opts.max_seq_len, pre.config.hidden_size, pre.config.num_hidden_layers
        ),
        "lower --batch-size or --max-seq-len, or raise --grad-accum",
    )
}

/// Fine-tunes a GLUE task once per seed of `plan`, scores the dev file(s).
pub fn finetune_glue(
    task: GlueTask,
    pre: &PretrainedEncoder,
    data: &Path,
    opts: &FinetuneOptions,
    plan: SeedPlan,
) -> Result<TaskResult> {
    let (train, dev) = read_task(task, data)?;
    let (opts, note) = opts.for_encoder(&pre.config);
    let opts = &opts;
    check_training_fits(pre, opts, train.len())?;
    note.inspect(|n| tracing::info!("{n}"));
    let run = GlueRun {
        task,
        pre,
        train,
        dev,
        opts,
        device: crate::device::device_for(&opts.device)?,
        progress: plan.progress,
    };
    run_seeds(&run, plan.seeds, plan.out, plan.report)
}

/// SQuAD data: a folder with `train-v1.1.json` and `dev-v1.1.json`, or one file used for both
/// (its first `max_train` questions to train, the rest to evaluate, so they never overlap), or
/// a folder holding just one `.json` file (that file).
pub fn squad_splits(
    data: &Path,
    max_train: usize,
    max_eval: usize,
) -> Result<(Vec<SquadExample>, Vec<SquadExample>)> {
    use crate::tasks::hub_layout::{split_files, squad_folder};
    use crate::tasks::squad::read_squad;
    // The Hub's Parquet layout: `train-*.parquet` and `validation-*.parquet` (in `plain_text/`).
    let hub = data.is_folder().then(|| squad_folder(data));
    if let Some(dir) = &hub
        && let (Some(t), Some(d)) = (
            split_files(dir, "train").first(),
            split_files(dir, "validation").first(),
        )
    {
        let (mut train, mut dev) = (read_squad(t)?, read_squad(d)?);
        if max_train > 0 {
            train.truncate(max_train);
        }
        if max_eval > 0 {
            dev.truncate(max_eval);
        }
        return Ok((train, dev));
    }
    // A folder without the standard pair but with one SQuAD file is that file.
    if data.is_folder()
        && !data.join("train-v1.1.json").is_present()
        && let [file] = crate::tasks::squad::json_files(data)?.as_slice()
    {
        return squad_splits(file, max_train, max_eval);
    }
    let (mut train, mut dev) = if data.is_folder() {
        (
            read_squad(&data.join("train-v1.1.json"))?,
            read_squad(&data.join("dev-v1.1.json"))?,
        )
    } else {
        let all = read_squad(data)?;
        if max_train == 0 || max_train >= all.len() {
            return Err(Error::Input(format!(
                "{}: a single SQuAD file is split into train and dev; pass --max-train-examples below its {} questions",
                data.display(),
                all.len()
            )));
        }
        let dev = all[max_train..].to_vec();
        let mut train = all;
        train.truncate(max_train);
        (train, dev)
    };
    if max_train > 0 {
        train.truncate(max_train);
    }
    if max_eval > 0 {
        dev.truncate(max_eval);
    }
    Ok((train, dev))
}

/// SQuAD's run: its train and dev questions.
struct SquadRun<'a> {
    pre: &'a PretrainedEncoder,
    train: &'a [SquadExample],
    dev: &'a [SquadExample],
    opts: &'a FinetuneOptions,
    qa: &'a QaOptions,
    device: burn::prelude::Device,
    progress: bool,
}

impl SeedRun for SquadRun<'_> {
    fn name(&self) -> &'static str {
        Task::Squad.display_name()
    }

    fn train(&self, seed: u64, dir: &Path) -> Result<SeedTrained> {
        let mut record = new_record(dir, self.opts)?;
        let (mut m, trained) = finetune_squad(
            self.pre,
            self.train,
            self.opts,
            self.qa,
            seed,
            self.progress,
            &mut record,
        )?;
        record.finish()?;
        save_qa(&mut m, &self.pre.tokenizer, dir)?;
        Ok(trained)
    }

    /// Also writes `predictions.json` (`{id: answer}`) next to the model.
    fn score(&self, seed: u64, dir: &Path, report: Report) -> Result<(Scores, f64)> {
        let (m, tok) = load_qa(dir, &self.device)?;
        let (answers, rate) = predict_squad(&m, &tok, self.dev, &self.device, self.progress)?;
        write_predictions(&dir.join("predictions.json"), &answers)?;
        let s = squad_scores(self.dev, &answers);
        report(format!("SQuAD seed {seed}: {}", metrics_line(&s.metrics)));
        Ok((s, rate))
    }

    fn options(&self) -> &FinetuneOptions {
        self.opts
    }

    fn encoder(&self) -> &PretrainedEncoder {
        self.pre
    }

    fn examples(&self) -> ExampleCounts {
        let train = match self.opts.max_train_examples {
            0 => self.train.len(),
            n => n.min(self.train.len()),
        };
        ExampleCounts {
            train,
            train_rows: train,
            dev: self.dev.len(),
        }
    }
}

/// Fine-tunes SQuAD v1.1 once per seed, evaluates EM / F1 and writes `predictions.json`
/// (`{id: answer}`) next to each model.
pub fn finetune_qa(
    pre: &PretrainedEncoder,
    train: &[SquadExample],
    dev: &[SquadExample],
    opts: &FinetuneOptions,
    qa: &QaOptions,
    plan: SeedPlan,
) -> Result<TaskResult> {
    let (opts, note) = opts.for_encoder(&pre.config);
    let opts = &opts;
    check_training_fits(pre, opts, train.len())?;
    note.inspect(|n| tracing::info!("{n}"));
    let run = SquadRun {
        pre,
        train,
        dev,
        opts,
        qa,
        device: crate::device::device_for(&opts.device)?,
        progress: plan.progress,
    };
    run_seeds(&run, plan.seeds, plan.out, plan.report)
}

/// EM and F1 (in %), the score being F1.
pub fn squad_scores(
    dev: &[SquadExample],
    answers: &std::collections::HashMap<String, String>,
) -> Scores {
    let (em, f1) = evaluate_squad(dev, answers);
    Scores {
        metrics: [("em".to_string(), em), ("f1".to_string(), f1)].into(),
        score: f1,
        ..Scores::default()
    }
}

/// SQuAD's prediction file: `{id: answer}`, ids sorted.
pub fn write_predictions(
    path: &Path,
    answers: &std::collections::HashMap<String, String>,
) -> Result<()> {
    let sorted: BTreeMap<&String, &String> = answers.iter().collect();
    crate::io::write_atomic(
        path,
        serde_json::to_string_pretty(&sorted)
            .expect("json")
            .as_bytes(),
    )
}
