//! The fine-tuning loop shared by every task: epochs over the training rows in a seeded order,
//! one optimizer update per batch, the training record written as it goes, the dev sets scored
//! when the plan says (each epoch by default), the best model kept and early stopping on
//! request.

use std::time::Instant;

use burn::prelude::*;
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

use super::eval_plan::Keep;
use super::recipe::{BatchLoss, FinetuneOptimizer, FinetuneOptions, progress_bar};
use super::record::{StepLine, TrainingRecord};
use super::scores::Scores;
use crate::model::params::ParamWalker;
use crate::train::optimizer::Grads;
use crate::{Error, Result};

/// A fine-tuning model: its parameters under transformers names.
pub trait Trainable {
    fn walk(&mut self, prefix: &str, w: &mut dyn ParamWalker);
}

/// What the fine-tuning loop trains: the model, the name prefix of its encoder's parameters
/// and its number of layers (the layer-wise learning-rate decay's).
pub struct Tuned<'a, M> {
    pub model: &'a mut M,
    pub prefix: &'a str,
    pub layers: usize,
}

/// The passes of one seed: `rows` examples shuffled by `seed`, with a progress bar or not.
pub struct Epochs {
    pub rows: usize,
    pub seed: u64,
    pub progress: bool,
}

/// The dev sets' scores of a model as it is.
pub type Evaluate<'a, M> = &'a mut dyn FnMut(&M) -> Result<Scores>;

/// What the loop reports to as it trains: the seed's record, and the scoring of the dev sets
/// (none: the loss is recorded, the dev sets are scored after training only).
pub struct Watch<'a, M> {
    pub record: &'a mut TrainingRecord,
    pub evaluate: Option<Evaluate<'a, M>>,
}

/// A model kept at an evaluation, with its update count and scores.
pub struct Kept<M> {
    pub model: M,
    pub step: u64,
    pub scores: Scores,
}

/// What training ended with: the training rate (the evaluations' time left out), the best
/// model when `--keep best`, the number of updates made, and whether early stopping ended it.
pub struct Trained<M> {
    pub examples_per_s: f64,
    pub best: Option<Kept<M>>,
    pub steps: u64,
    pub stopped_early: bool,
}

/// Training losses are recorded as their mean over this many updates (and at each epoch's end).
const LOG_EVERY: u64 = 10;

/// The fine-tuning loop: `opts.epochs` passes over `plan.rows` examples in a seeded random
/// order, batches of `opts.batch_size`, one [`FinetuneOptimizer`] update each. `loss_of` gives
/// the mean loss of a batch (indices into the rows).
pub fn train_epochs<M: Trainable + Clone>(
    tuned: Tuned<M>,
    opts: &FinetuneOptions,
    plan: Epochs,
    watch: Watch<M>,
    mut loss_of: impl FnMut(&M, &[usize]) -> Tensor<1>,
) -> Result<Trained<M>> {
    let Tuned {
        model,
        prefix,
        layers,
    } = tuned;
    let Epochs {
        rows,
        seed,
        progress,
    } = plan;
    let Watch { record, evaluate } = watch;
    let per_epoch = rows.div_ceil(opts.batch_size);
    let total = (per_epoch * opts.epochs) as u64;
    let mut evals = Evaluations {
        evaluate,
        keep: opts.keep,
        early_stop: opts.early_stop,
        best: None,
        best_score: None,
        since_best: 0,
        total,
        seconds: 0.0,
    };
    let mut opt = FinetuneOptimizer::new(opts, prefix, layers, total);
    let bar = progress_bar(
        total,
        "finetune {bar:30} {pos}/{len} steps  {msg}  eta {eta}",
        progress,
    );
    let start = Instant::now();
    let mut seen = 0usize;
    let mut step = 0u64;
    let mut losses = LossMeans::default();
    'epochs: for epoch in 0..opts.epochs {
        let mut order: Vec<usize> = (0..rows).collect();
        order.shuffle(&mut ChaCha8Rng::seed_from_u64(
            seed ^ ((epoch as u64 + 1) << 32),
        ));
        for (i, chunk) in order.chunks(opts.batch_size).enumerate() {
            if crate::stop::requested() {
                return Err(Error::Interrupted(format!(
                    "stopped by a signal at fine-tuning step {step} of {total}"
                )));
            }
            let batch = Slices {
                batch: chunk,
                count: opts.grad_accum,
                loss: opts.batch_loss,
            };
            let (value, grads) = finite(batch_grads(model, prefix, batch, &mut loss_of), step)?;
            let learning_rate = opt.lr();
            let grad_norm = opt.update(grads, |w| model.walk(prefix, w));
            step += 1;
            seen += chunk.len();
            losses.add(value);
            let epoch_end = i + 1 == per_epoch;
            let at = epoch as f64 + (i + 1) as f64 / per_epoch as f64;
            if step.is_multiple_of(LOG_EVERY) || epoch_end {
                record.step(&StepLine {
                    step,
                    epoch: at,
                    loss: losses.take_logged(),
                    learning_rate,
                    grad_norm,
                })?;
            }
            bar.set_message(format!(
                "loss {value:.4}  {:.0} ex/s",
                seen as f64 / start.elapsed().as_secs_f64().max(1e-9)
            ));
            bar.inc(1);
            if opts.eval_every.due(step, total, epoch_end) {
                let train_loss = losses.take_since_eval();
                let at = At {
                    step,
                    epoch: at,
                    train_loss,
                };
                if evals.after(model, record, at)? {
                    break 'epochs;
                }
            }
        }
    }
    bar.finish_and_clear();
    let training = start.elapsed().as_secs_f64() - evals.seconds;
    Ok(Trained {
        examples_per_s: seen as f64 / training.max(1e-9),
        best: evals.best,
        steps: step,
        stopped_early: step < total,
    })
}

/// A batch's loss and gradients when the loss is finite; update `step + 1` diverged otherwise.
fn finite(batch: (f32, Grads), step: u64) -> Result<(f32, Grads)> {
    if !batch.0.is_finite() {
        return Err(Error::Diverged(format!(
            "fine-tuning step {}: loss is {}",
            step + 1,
            batch.0
        )));
    }
    Ok(batch)
}

/// The training loss's running means: over the updates since the last logged line, and since
/// the last evaluation (shown beside its dev score).
#[derive(Default)]
struct LossMeans {
    logged: (f64, u64),
    since_eval: (f64, u64),
}

impl LossMeans {
    fn add(&mut self, value: f32) {
        for m in [&mut self.logged, &mut self.since_eval] {
            *m = (m.0 + value as f64, m.1 + 1);
        }
    }

    fn take_logged(&mut self) -> f64 {
        let (sum, n) = std::mem::take(&mut self.logged);
        sum / n.max(1) as f64
    }

    fn take_since_eval(&mut self) -> f64 {
        let (sum, n) = std::mem::take(&mut self.since_eval);
        sum / n.max(1) as f64
    }
}

/// A batch as [`batch_grads`] takes it: its rows, the number of micro-batches it is cut
/// into, and how its loss is made of its examples'.
pub struct Slices<'a> {
    pub batch: &'a [usize],
    pub count: usize,
    pub loss: BatchLoss,
}

/// A batch's mean loss per example and the gradients of its loss (the mean or the sum of its
/// examples' losses, as `slices.loss` says), the batch cut into `slices.count` micro-batches of
/// nearly equal size (gradient accumulation). `loss_of` gives a slice's mean loss; each is
/// weighted by its share of the batch (mean) or by its number of rows (sum), so the loss and
/// the gradients are the whole batch's however it is cut (dropout's draws aside). This is the
/// one place a batch loss is reduced.
pub fn batch_grads<M: Trainable>(
    model: &mut M,
    prefix: &str,
    slices: Slices,
    loss_of: &mut impl FnMut(&M, &[usize]) -> Tensor<1>,
) -> (f32, Grads) {
    let Slices {
        batch,
        count,
        loss: reduction,
    } = slices;
    let size = batch.len().div_ceil(count.max(1));
    let mut value = 0.0f32;
    let mut sum: Option<Grads> = None;
    for slice in batch.chunks(size) {
        let share = slice.len() as f64 / batch.len() as f64;
        let weight = match reduction {
            BatchLoss::Mean => share,
            BatchLoss::Sum => slice.len() as f64,
        };
        let mean = loss_of(model, slice);
        value += mean.clone().into_scalar::<f32>() * share as f32;
        let loss = mean.mul_scalar(weight);
        let grads = Grads::collect(&loss.backward(), |w| model.walk(prefix, w));
        match &mut sum {
            Some(s) => s.accumulate(grads),
            None => sum = Some(grads),
        }
    }
    (value, sum.expect("a batch holds rows"))
}

/// The evaluations during training: the dev scores at each, the best model kept, and the
/// count of evaluations since the best for early stopping.
struct Evaluations<'a, M> {
    evaluate: Option<Evaluate<'a, M>>,
    keep: Keep,
    early_stop: usize,
    best: Option<Kept<M>>,
    best_score: Option<f64>,
    since_best: usize,
    total: u64,
    /// Time spent scoring, left out of the training rate.
    seconds: f64,
}

/// Where an evaluation falls: after update `step`, at `epoch`, with the mean training loss
/// since the last one.
struct At {
    step: u64,
    epoch: f64,
    train_loss: f64,
}

impl<M: Clone> Evaluations<'_, M> {
    /// Scores `model` at `at` and records it; true when early stopping ends training.
    fn after(&mut self, model: &M, record: &mut TrainingRecord, at: At) -> Result<bool> {
        let At {
            step,
            epoch: at,
            train_loss,
        } = at;
        let Some(evaluate) = self.evaluate.as_mut() else {
            return Ok(false);
        };
        let start = Instant::now();
        let scores = evaluate(model)?;
        self.seconds += start.elapsed().as_secs_f64();
        record.eval(step, at, &scores)?;
        let dev_loss = scores
            .loss
            .map(|l| format!("dev loss {l:.4}, "))
            .unwrap_or_default();
        tracing::info!(
            "finetune step {step} (epoch {at:.2}): training loss {train_loss:.4}, {dev_loss}dev {}",
            scores.with_baselines("task score")
        );
        for why in scores.warnings() {
            tracing::warn!("finetune step {step}: {why}");
        }
        if self.best_score.is_none_or(|b| scores.score > b) {
            self.best_score = Some(scores.score);
            self.since_best = 0;
            if self.keep == Keep::Best {
                if let Some(why) = &scores.collapsed {
                    tracing::warn!(
                        "finetune step {step}: kept as the best model so far although it {why}"
                    );
                }
                self.best = Some(Kept {
                    model: model.clone(),
                    step,
                    scores,
                });
            }
            return Ok(false);
        }
        self.since_best += 1;
        let stop = self.early_stop > 0 && self.since_best >= self.early_stop;
        if stop {
            tracing::info!(
                "finetune: no better dev score in {} evaluations: stopped early at step {step} of {}",
                self.since_best,
                self.total
            );
        }
        Ok(stop)
    }
}
