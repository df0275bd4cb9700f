//! The pre-training loop: masked batches → loss → gradients (accumulated) → global-norm clip →
//! AdamW with warmup + linear decay, with metrics, progress, checkpoints and exact resume.
//!
//! Every random draw of step s (masking, dropout, generator sampling) comes from RNGs seeded
//! by (seed, s), and the data position is saved in each checkpoint, so a resumed run repeats
//! the uninterrupted one.

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
use super::step::{StepLoss, Term, step_loss};
use crate::interop::tensors::TensorMap;
use crate::lexicon::SynonymTable;
use crate::objective::CorrectionCounts;
use crate::objective::hard_correction::MultiPiece;
use crate::text::batches::{BatchStream, DataPosition};
use crate::text::masking::mask_batch;
use crate::text::shards::ShardSet;
use crate::{Error, Result};

/// One line of `metrics.jsonl`.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize, PartialEq)]
pub struct StepMetrics {
    pub step: u64,
    pub loss: f64,
    pub mlm_loss: f64,
    /// ELECTRA only: the discriminator's replaced-token loss (before the weight λ).
    pub disc_loss: Option<f64>,
    /// ELECTRA only: accuracy of the discriminator over real tokens.
    pub disc_accuracy: Option<f64>,
    /// Word-level Soft Regularization term (before its weight).
    pub sr_loss: Option<f64>,
    /// Sentence-level Soft Regularization term (before its weight).
    pub sr_sent_loss: Option<f64>,
    /// CLINE: the replaced-token detection loss on x_syn and x_ant (before its weight).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtd_loss: Option<f64>,
    /// CLINE: detection accuracy over the labelled pieces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtd_accuracy: Option<f64>,
    /// CLINE: the contrast loss (before its weight).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contrast_loss: Option<f64>,
    /// CLINE: share of the examples where h_o is closer to h_syn than to h_ant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syn_closer: Option<f64>,
    /// CLINE: the weights of L_MLM, L_RTD, L_cts (exp(−s_i) when learned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_weights: Option<[f64; 3]>,
    pub lr: f64,
    pub grad_norm: f64,
    /// Masked positions. This and the Hard Correction counts below are totals over the steps
    /// since the previous line (the step itself with `train.log_every = 1`), so that
    /// mismatched / masked is a rate over the same positions.
    pub masked: usize,
    /// Hard Correction: masked positions whose prediction differs from the gold token.
    pub mismatched: Option<usize>,
    /// Hard Correction: mismatched positions dropped as synonyms.
    pub corrected: Option<usize>,
    /// Prediction-level ratio corrected / mismatched.
    pub corrected_ratio: Option<f64>,
    /// Iteration-level ratio: share of sequences with at least one correction.
    pub sequences_corrected_ratio: Option<f64>,
    pub tokens_per_s: f64,
}

/// The logged terms of one micro-step, over its replicas: each loss term is its mean over the
/// whole micro-batch (`Σ_r n_r·v_r / Σ_r n_r`), the objective and the right predictions are
/// summed.
#[derive(Default)]
struct MicroTerms {
    /// Per replica, its values on the device (read once) and the counts of its mean terms.
    reads: Vec<(Tensor<1>, [f64; 7])>,
    rtd_counted: usize,
    real_tokens: usize,
    corrections: Option<CorrectionCounts>,
}

/// The values of [`MicroTerms`] on the host, and their sums over a step's micro-steps.
#[derive(Default)]
struct StepTotals {
    loss: f64,
    mlm: f64,
    disc: f64,
    disc_correct: f64,
    sr: f64,
    sr_sent: f64,
    rtd: f64,
    rtd_correct: f64,
    contrast: f64,
    syn_closer: f64,
    /// CLINE's three weights (the latest micro-step's).
    weights: [f64; 3],
    real_tokens: usize,
    rtd_counted: usize,
}

impl StepTotals {
    /// Adds a micro-step's values.
    fn add(&mut self, v: StepTotals) {
        self.loss += v.loss;
        self.mlm += v.mlm;
        self.disc += v.disc;
        self.disc_correct += v.disc_correct;
        self.sr += v.sr;
        self.sr_sent += v.sr_sent;
        self.rtd += v.rtd;
        self.rtd_correct += v.rtd_correct;
        self.contrast += v.contrast;
        self.syn_closer += v.syn_closer;
        self.weights = v.weights;
        self.real_tokens += v.real_tokens;
        self.rtd_counted += v.rtd_counted;
    }
}

impl MicroTerms {
    /// Adds a replica's loss terms and `objective`, its share of the micro-batch's objective.
    fn add(&mut self, l: StepLoss, objective: Tensor<1>) {
        let device = objective.device();
        let zero = || Tensor::<1>::zeros([1], &device);
        let c = l.cline.as_ref();
        let count = |t: Option<&Term>| t.map_or(0.0, |t| t.count);
        let counts = [
            l.mlm.count,
            count(l.disc.as_ref()),
            count(l.sr.as_ref()),
            count(l.sr_sent.as_ref()),
            count(c.map(|c| &c.rtd)),
            count(c.map(|c| &c.contrast)),
            count(c.map(|c| &c.syn_closer)),
        ];
        let value = |t: Option<&Term>| t.map(|t| t.value.clone());
        let mut terms: Vec<Tensor<1>> = [
            Some(objective),
            Some(l.mlm.value.clone()),
            value(l.disc.as_ref()),
            l.disc_correct,
            value(l.sr.as_ref()),
            value(l.sr_sent.as_ref()),
            value(c.map(|c| &c.rtd)),
            c.map(|c| c.rtd_correct.clone()),
            value(c.map(|c| &c.contrast)),
            value(c.map(|c| &c.syn_closer)),
        ]
        .map(|t| t.map(|t| t.inner().reshape([1])).unwrap_or_else(zero))
        .to_vec();
        terms.push(
            c.map(|c| c.weights.clone().inner())
                .unwrap_or_else(|| Tensor::zeros([3], &device)),
        );
        self.reads.push((Tensor::cat(terms, 0), counts));
        self.rtd_counted += c.map_or(0, |c| c.rtd_counted);
        self.real_tokens += l.real_tokens;
        if let Some(k) = l.corrections {
            self.corrections
                .get_or_insert_with(CorrectionCounts::default)
                .add(&k);
        }
    }

    /// Reads the values (one device read per replica) and combines them.
    fn values(&self) -> StepTotals {
        let rows: Vec<(Vec<f64>, [f64; 7])> = self
            .reads
            .iter()
            .map(|(t, n)| {
                let v = t
                    .clone()
                    .into_data()
                    .convert::<f64>()
                    .try_into_vec::<f64>()
                    .expect("loss terms");
                (v, *n)
            })
            .collect();
        let sum = |i: usize| rows.iter().map(|(v, _)| v[i]).sum::<f64>();
        let mean = |i: usize, c: usize| {
            if rows.len() == 1 {
                return rows[0].0[i];
            }
            let n: f64 = rows.iter().map(|(_, n)| n[c]).sum();
            if n > 0.0 {
                rows.iter().map(|(v, k)| v[i] * k[c]).sum::<f64>() / n
            } else {
                0.0
            }
        };
        let w = &rows[0].0;
        StepTotals {
            loss: sum(0),
            mlm: mean(1, 0),
            disc: mean(2, 1),
            disc_correct: sum(3),
            sr: mean(4, 2),
            sr_sent: mean(5, 3),
            rtd: mean(6, 4),
            rtd_correct: sum(7),
            contrast: mean(8, 5),
            syn_closer: mean(9, 6),
            weights: [w[10], w[11], w[12]],
            real_tokens: self.real_tokens,
            rtd_counted: self.rtd_counted,
        }
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

/// The synonym table Hard Correction needs: `objective.lexicon`, else the WordNet table of the
/// run's tokenizer, built once into `<run>/lexicon.safetensors`.
fn load_lexicon(
    cfg: &PretrainConfig,
    shards: &ShardSet,
    run: &Path,
) -> Result<Option<SynonymTable>> {
    let o = &cfg.objective;
    if !o.kind.hard_correction()
        && o.hc_discriminator == crate::objective::DiscriminatorCorrection::Off
    {
        return Ok(None);
    }
    let fp = &shards.manifest.tokenizer_fingerprint;
    if let Some(p) = &o.lexicon {
        return SynonymTable::load_for(p, fp).map(Some);
    }
    let path = run.join("lexicon.safetensors");
    if path.exists() {
        return SynonymTable::load_for(&path, fp).map(Some);
    }
    let tokenizer = crate::text::prepare::shard_tokenizer(&shards.dir)?;
    let table = crate::lexicon::wordnet_table(
        &tokenizer,
        &crate::text::default_corpus::default_wordnet_dir(),
    )?;
    table.save(&path)?;
    Ok(Some(table))
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

    let table = load_lexicon(cfg, shards, run)?;
    let multi_piece = if cfg.objective.hc_multi_piece && table.is_some() {
        let tokenizer = crate::text::prepare::shard_tokenizer(&shards.dir)?;
        let mut tokens = vec![String::new(); tokenizer.vocab_size()];
        for (t, id) in tokenizer.inner.get_vocab(true) {
            if let Some(slot) = tokens.get_mut(id as usize) {
                *slot = t;
            }
        }
        let wn =
            crate::lexicon::WordNet::open(&crate::text::default_corpus::default_wordnet_dir())?;
        Some(MultiPiece {
            tokens,
            synonyms: Box::new(move |w| wn.synonyms(w).into_iter().collect()),
        })
    } else {
        None
    };
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
        let mut t = StepTotals::default();
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
                    step_loss(
                        model,
                        cfg,
                        table.as_ref(),
                        multi_piece.as_ref(),
                        &batch.rows(rows),
                        &m,
                        device,
                    )
                });
                (losses, m.positions.len(), batch.batch * batch.len)
            };
            masked += n_masked;
            let objectives = Replicas::objectives(&losses);
            let g = replicas.backward(&objectives);
            if grads.is_empty() {
                grads = g;
            } else {
                for (a, g) in grads.iter_mut().zip(g) {
                    a.accumulate(g);
                }
            }
            let mut terms = MicroTerms::default();
            for (l, o) in losses.into_iter().zip(objectives) {
                terms.add(l, o);
            }
            t.add(terms.values());
            if let Some(c) = terms.corrections {
                window
                    .corrections
                    .get_or_insert_with(CorrectionCounts::default)
                    .add(&c);
            }
            rate_tokens += n_tokens;
        }
        let k = cfg.train.grad_accum as f64;
        if !t.loss.is_finite() {
            let last_good = checkpoint::list(run)
                .pop()
                .map(|(_, p)| p.display().to_string());
            return Err(Error::Diverged(format!(
                "step {}: loss is {} (not finite); stopped. Last good checkpoint: {}",
                step + 1,
                t.loss,
                last_good.unwrap_or_else(|| "none".into())
            )));
        }
        let lr = scheduled_lr(cfg.optimizer.lr, step, cfg.optimizer.warmup_steps, total);
        let grad_norm =
            replicas.update(grads, cfg.train.grad_accum, cfg.optimizer.max_grad_norm, lr);
        let done = step + 1;
        window.masked += masked;
        window.steps += 1;

        let is_electra = replicas.models[0].is_electra();
        let metrics = StepMetrics {
            step: done,
            loss: t.loss / k,
            mlm_loss: t.mlm / k,
            disc_loss: (is_electra && !cline).then_some(t.disc / k),
            disc_accuracy: (is_electra && !cline)
                .then(|| t.disc_correct / t.real_tokens.max(1) as f64),
            sr_loss: cfg.objective.kind.word_regularization().then_some(t.sr / k),
            sr_sent_loss: cfg
                .objective
                .kind
                .sentence_regularization()
                .then_some(t.sr_sent / k),
            rtd_loss: cline.then_some(t.rtd / k),
            rtd_accuracy: cline.then(|| t.rtd_correct / t.rtd_counted.max(1) as f64),
            contrast_loss: cline.then_some(t.contrast / k),
            syn_closer: cline.then_some(t.syn_closer / k),
            loss_weights: cline.then_some(t.weights),
            lr,
            grad_norm,
            masked: window.masked,
            mismatched: window.corrections.map(|c| c.mismatched),
            corrected: window.corrections.map(|c| c.corrected),
            corrected_ratio: window
                .corrections
                .map(|c| c.corrected as f64 / c.mismatched.max(1) as f64),
            sequences_corrected_ratio: window
                .corrections
                .map(|c| c.sequences_corrected as f64 / c.sequences.max(1) as f64),
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
                    metrics.mlm_loss,
                    metrics
                        .disc_loss
                        .map(|d| format!("  disc {d:.4}"))
                        .or_else(|| metrics.contrast_loss.map(|c| format!(
                            "  rtd {:.4}  contrast {c:.4}  syn-closer {:.2}",
                            metrics.rtd_loss.unwrap_or(0.0),
                            metrics.syn_closer.unwrap_or(0.0)
                        )))
                        .unwrap_or_default(),
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
                window,
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
