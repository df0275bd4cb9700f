//! The pre-training loop: masked batches → loss → gradients (accumulated) → global-norm clip →
//! AdamW with warmup + linear decay, with metrics, progress, checkpoints and exact resume.
//!
//! Every random draw of step s (masking, dropout, generator sampling) comes from RNGs seeded
//! by (seed, s), and the data position is saved in each checkpoint, so a resumed run repeats
//! the uninterrupted one.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use burn::prelude::*;
use indicatif::{ProgressBar, ProgressStyle};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::checkpoint::{self, TrainState, WindowTotals};
use super::cline_step::cline_step_loss;
use super::config::PretrainConfig;
use super::model::{PretrainModel, read_transformers_weights};
use super::optimizer::{AdamW, Grads, scheduled_lr};
use super::replicas::Replicas;
use super::step::step_loss;
use crate::interop::tensors::TensorMap;
use crate::objective::terms::{self, StepValues, add_counters};
use crate::objective::{Objective, Setup};
use crate::text::batches::{BatchStream, DataPosition};
use crate::text::masking::mask_batch;
use crate::text::shards::ShardSet;
use crate::{Error, Result};

/// One line of `metrics.jsonl`.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize, PartialEq)]
pub struct StepMetrics {
    pub step: u64,
    pub loss: f64,
    /// Every value the step and the objective log, by name: loss terms before their weights
    /// (`mlm_loss`, `disc_loss`, each objective's own), rates (`disc_accuracy`), and the
    /// objective's counts of the window; see `crate::objective`.
    #[serde(flatten)]
    pub terms: BTreeMap<String, serde_json::Value>,
    pub lr: f64,
    pub grad_norm: f64,
    /// Masked positions. This and the objective's counts are totals over the steps since the
    /// previous line (the step itself with `train.log_every = 1`), so that a count over
    /// `masked` is a rate over the same positions.
    pub masked: usize,
    pub tokens_per_s: f64,
}

impl StepMetrics {
    /// The logged value `name` (`mlm_loss`, `disc_loss`, …), when the run logs it.
    pub fn value(&self, name: &str) -> Option<f64> {
        self.terms.get(name).and_then(serde_json::Value::as_f64)
    }

    /// The logged vector `name` (the weights of a step's terms).
    pub fn vector(&self, name: &str) -> Option<Vec<f64>> {
        let v = self.terms.get(name)?.as_array()?;
        v.iter().map(serde_json::Value::as_f64).collect()
    }

    /// The masked-LM loss (BERT's MLM, ELECTRA's generator), which every run logs.
    pub fn mlm_loss(&self) -> f64 {
        self.value("mlm_loss").unwrap_or(f64::NAN)
    }

    /// `{sep}disc 0.1234` for every logged loss term but `mlm_loss` (its name without
    /// `_loss`), for progress lines and summaries.
    pub fn other_losses(&self, sep: &str) -> String {
        self.terms
            .iter()
            .filter(|(k, _)| k.ends_with("_loss") && k.as_str() != "mlm_loss")
            .filter_map(|(k, v)| {
                Some(format!(
                    "{sep}{} {:.4}",
                    k.trim_end_matches("_loss"),
                    v.as_f64()?
                ))
            })
            .collect()
    }
}

/// How a run reports progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// A progress bar (an interactive terminal).
    Bar,
    /// One plain `tracing` line per `train.log_every` (step, losses, tokens/s, ETA): for logs,
    /// CI, `nohup`, cluster jobs.
    Lines,
    Hidden,
}

pub struct RunOptions {
    pub run_dir: PathBuf,
    pub resume: bool,
    pub progress: Progress,
    /// Raised by a signal handler: the run finishes its step, writes a checkpoint and stops
    /// with [`Error::Interrupted`].
    pub stop: Option<&'static AtomicBool>,
}

/// Summary of a finished run.
pub struct RunSummary {
    pub steps: u64,
    /// `--resume` found the run already at `train.steps`: nothing was done.
    pub already_finished: bool,
    pub last: Option<StepMetrics>,
    pub run_dir: PathBuf,
}

/// `h:mm:ss` for an ETA.
fn clock(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// Truncates `metrics.jsonl` to the lines with step ≤ `step` (after a resume).
fn truncate_metrics(path: &Path, step: u64) -> Result<()> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(());
    };
    let kept: String = text
        .lines()
        .filter(|l| serde_json::from_str::<StepMetrics>(l).is_ok_and(|m| m.step <= step))
        .map(|l| format!("{l}\n"))
        .collect();
    crate::error::write_atomic(path, kept.as_bytes())
}

/// Loads the newest checkpoint that reads back whole into `model` and `opt`. A damaged one
/// (truncated tensors, bad JSON) is reported and skipped for the one before it; a checkpoint of
/// another tokenizer is an error.
fn resume_point(
    run: &Path,
    shards: &ShardSet,
    model: &mut PretrainModel,
    opt: &mut AdamW,
    device: &Device,
) -> Result<Option<TrainState>> {
    let mut damaged = None;
    for (step, dir) in checkpoint::list(run).into_iter().rev() {
        let ck = match checkpoint::load(&dir) {
            Ok(ck) => ck,
            Err(e) => {
                tracing::warn!("skipping a damaged checkpoint: {e}");
                damaged = Some(e);
                continue;
            }
        };
        if ck.state.tokenizer_fingerprint != shards.manifest.tokenizer_fingerprint {
            return Err(Error::Checkpoint(format!(
                "{}: written with another tokenizer than {}",
                dir.display(),
                shards.dir.display()
            )));
        }
        let map = TensorMap {
            tensors: ck.model,
            source: dir.join("model.safetensors"),
        };
        match model
            .load(&map, device)
            .and_then(|()| opt.load_state(step, &ck.optimizer, device))
        {
            Ok(()) => return Ok(Some(ck.state)),
            Err(e) => {
                tracing::warn!("skipping a damaged checkpoint: {e}");
                damaged = Some(e);
            }
        }
    }
    damaged.map_or(Ok(None), Err)
}

pub fn pretrain(cfg: &PretrainConfig, shards: &ShardSet, opts: &RunOptions) -> Result<RunSummary> {
    let run = &opts.run_dir;
    let vocab = shards.manifest.vocab_size;
    if cfg.model.vocab_size != 0 && cfg.model.vocab_size != vocab {
        return Err(Error::Config(format!(
            "field `model.vocab_size` is {}, but the tokenizer of {} has {vocab} tokens",
            cfg.model.vocab_size,
            shards.dir.display()
        )));
    }
    if shards.manifest.max_seq_len > cfg.model.max_position_embeddings {
        return Err(Error::Config(format!(
            "{}: examples of {} tokens exceed model.max_position_embeddings = {}",
            shards.dir.display(),
            shards.manifest.max_seq_len,
            cfg.model.max_position_embeddings
        )));
    }
    if shards.manifest.max_seq_len != cfg.data.max_seq_len {
        return Err(Error::Config(format!(
            "field `data.max_seq_len` is {}, but the examples of {} have {} tokens; set it to {} or prepare the corpus again",
            cfg.data.max_seq_len,
            shards.dir.display(),
            shards.manifest.max_seq_len,
            shards.manifest.max_seq_len
        )));
    }
    let cline = cfg.objective.kind == crate::objective::ObjectiveKind::Cline;
    if cline != shards.is_cline() {
        return Err(Error::Config(if cline {
            format!(
                "field `objective.kind` is \"cline\", but {} holds packed examples; make sentence triples with `trueneg prepare --cline`",
                shards.dir.display()
            )
        } else {
            format!(
                "{} holds CLINE sentence triples (`prepare --cline`); they train only with objective.kind = \"cline\"",
                shards.dir.display()
            )
        }));
    }
    let names = cfg.replica_devices();
    let base_devices = crate::device::devices_for(&names)?;
    let base_device = base_devices[0].clone();
    let device = base_device.clone().autodiff();
    // The initial weights follow `train.seed`: runs of one seed start from the same weights
    // whatever their objective (the ablation's pairing).
    crate::model::seed(&base_device, cfg.train.seed);
    let mut model = PretrainModel::new(cfg, vocab, &device);
    let mut opt = AdamW::new(cfg.optimizer.clone());
    let mut position = DataPosition::default();
    let metrics_path = run.join("metrics.jsonl");

    let mut start_step = 0;
    let mut window = WindowTotals::default();
    let resumed = if opts.resume {
        checkpoint::clean_leftovers(run)?;
        resume_point(run, shards, &mut model, &mut opt, &device)?
    } else {
        if checkpoint::list(run).last().is_some() || metrics_path.exists() {
            return Err(Error::Config(format!(
                "{}: holds an earlier run; pass --resume to continue it or choose another run directory",
                run.display()
            )));
        }
        None
    };
    match resumed {
        Some(ck) => {
            if ck.step >= cfg.train.steps {
                return Ok(RunSummary {
                    steps: ck.step,
                    already_finished: true,
                    last: None,
                    run_dir: run.clone(),
                });
            }
            position = ck.data;
            start_step = ck.step;
            window = ck.window;
        }
        None => {
            if opts.resume {
                tracing::warn!("{}: no checkpoint yet; starting from step 0", run.display());
            }
            if let Some(init) = &cfg.model.init_from {
                let weights =
                    read_transformers_weights(init, cfg.model.kind, &cfg.model.encoder(vocab))?;
                model.load_init(&weights, &device)?;
            }
        }
    }
    if opts.resume {
        truncate_metrics(&metrics_path, start_step)?;
    }
    std::fs::create_dir_all(run).map_err(|e| Error::io(run, e))?;
    crate::error::write_atomic(&run.join("config.toml"), cfg.to_toml().as_bytes())?;
    let tokenizer = shards.dir.join("tokenizer.json");
    if tokenizer.exists() {
        crate::error::write_atomic(
            &run.join("tokenizer.json"),
            &crate::error::read(&tokenizer)?,
        )?;
    }

    let objective = Objective::build(
        &cfg.objective,
        &mut Setup {
            shards: Some(shards),
            run: Some(run),
            synonyms: None,
        },
    )?;
    let mut stream = BatchStream::new(shards, cfg.train.seed, cfg.data.batch_size, position);
    // An explicit `train.devices` list of CUDA devices goes through burn's distributed data
    // parallel (NCCL) even with one device: that is how a one-GPU machine checks the path.
    let collective = !cfg.train.devices.is_empty() && crate::device::has_collectives(&names[0]);
    let mut replicas = Replicas::new(model, opt, base_devices, collective)?;
    let mut metrics_file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&metrics_path)
        .map_err(|e| Error::io(&metrics_path, e))?;

    let total = cfg.train.steps;
    let bar = if opts.progress == Progress::Bar {
        ProgressBar::new(total)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("pretrain {bar:30} {pos}/{len} steps  {msg}  eta {eta}")
            .expect("template"),
    );
    bar.set_position(start_step);
    let special = shards.manifest.special_ids;
    let mut last = None;
    // tokens/s: over the steps of this process since the previous line.
    let mut rate_tokens = 0usize;
    let mut rate_start = Instant::now();
    let run_start = Instant::now();

    for step in start_step..total {
        let mut grads: Vec<Grads> = Vec::new();
        let mut t = StepValues::default();
        let mut masked = 0usize;
        for micro in 0..cfg.train.grad_accum {
            let step_seed = cfg.train.seed.wrapping_mul(1_000_003) ^ (step << 8) ^ micro as u64;
            let mut rng = ChaCha8Rng::seed_from_u64(step_seed);
            // The whole micro-batch is masked as one; each replica takes its rows.
            let (losses, n_masked, n_tokens) = if cline {
                let cb = stream.next_cline_batch();
                let m = mask_batch(&cb.ori, &cfg.masking, &special, vocab, &mut rng);
                let len = cb.ori.len;
                let losses = replicas.forward(step_seed, cb.ori.batch, |model, device, rows| {
                    let m = m.rows(len, rows.clone());
                    cline_step_loss(model, cfg, &cb.rows(rows), &m, device)
                });
                (losses, m.positions.len(), cb.ori.batch * cb.ori.len)
            } else {
                let batch = stream.next_batch();
                let m = mask_batch(&batch, &cfg.masking, &special, vocab, &mut rng);
                let losses = replicas.forward(step_seed, batch.batch, |model, device, rows| {
                    let m = m.rows(batch.len, rows.clone());
                    step_loss(model, cfg, &objective, &batch.rows(rows), &m, device)
                });
                (losses, m.positions.len(), batch.batch * batch.len)
            };
            masked += n_masked;
            let objectives = terms::objectives(&losses);
            let g = replicas.backward(&objectives);
            if grads.is_empty() {
                grads = g;
            } else {
                for (a, g) in grads.iter_mut().zip(g) {
                    a.accumulate(g);
                }
            }
            t.add(terms::combine(&losses, &objectives));
            rate_tokens += n_tokens;
        }
        let loss = t.mean_loss();
        if !loss.is_finite() {
            let last_good = checkpoint::list(run)
                .pop()
                .map(|(_, p)| p.display().to_string());
            return Err(Error::Diverged(format!(
                "step {}: loss is {} (not finite); stopped. Last good checkpoint: {}",
                step + 1,
                loss,
                last_good.unwrap_or_else(|| "none".into())
            )));
        }
        let lr = scheduled_lr(cfg.optimizer.lr, step, cfg.optimizer.warmup_steps, total);
        let grad_norm =
            replicas.update(grads, cfg.train.grad_accum, cfg.optimizer.max_grad_norm, lr);
        let done = step + 1;
        window.masked += masked;
        window.steps += 1;
        add_counters(&mut window.counters, &t.counters);

        let mut logged = t.logged_values();
        logged.extend(objective.window_metrics(&window.counters));
        let metrics = StepMetrics {
            step: done,
            loss,
            terms: logged,
            lr,
            grad_norm,
            masked: window.masked,
            tokens_per_s: rate_tokens as f64 / rate_start.elapsed().as_secs_f64().max(1e-9),
        };
        let stopping = opts.stop.is_some_and(|s| s.load(Ordering::SeqCst));
        if done % cfg.train.log_every == 0 || done == total {
            let line = serde_json::to_string(&metrics).expect("json");
            writeln!(metrics_file, "{line}").map_err(|e| Error::io(&metrics_path, e))?;
            metrics_file
                .flush()
                .map_err(|e| Error::io(&metrics_path, e))?;
            if opts.progress == Progress::Lines {
                let per_step = run_start.elapsed().as_secs_f64() / (done - start_step) as f64;
                tracing::info!(
                    "step {done}/{total}  loss {:.4}  mlm {:.4}{}  lr {:.3e}  {:.0} tok/s  eta {}",
                    metrics.loss,
                    metrics.mlm_loss(),
                    metrics.other_losses("  "),
                    lr,
                    metrics.tokens_per_s,
                    clock((total - done) as f64 * per_step)
                );
            }
            rate_tokens = 0;
            rate_start = Instant::now();
            window = WindowTotals::default();
        }
        bar.set_message(format!(
            "loss {:.4}  {:.0} tok/s",
            metrics.loss, metrics.tokens_per_s
        ));
        bar.inc(1);
        if done % cfg.train.checkpoint_every == 0 || done == total || stopping {
            let state = TrainState {
                step: done,
                data: stream.position,
                tokenizer_fingerprint: shards.manifest.tokenizer_fingerprint.clone(),
                window: window.clone(),
            };
            let dir = checkpoint::save(
                run,
                &state,
                &replicas.models[0].export(),
                &replicas.opts[0].state(),
                cfg.train.keep_checkpoints,
            )?;
            if stopping && done < total {
                bar.abandon();
                return Err(Error::Interrupted(format!(
                    "stopped by a signal after step {done} of {total}; checkpoint {}; continue with `trueneg pretrain --resume {}`",
                    dir.display(),
                    run.display()
                )));
            }
        }
        last = Some(metrics);
    }
    bar.finish_and_clear();
    crate::plot::run_loss_plot(run)?;
    Ok(RunSummary {
        already_finished: false,
        steps: total,
        last,
        run_dir: run.clone(),
    })
}
