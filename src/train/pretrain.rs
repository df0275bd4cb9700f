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
use super::step::step_loss;
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
    let base_device = crate::device::device_for(&cfg.train.device)?;
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
        let mut grads = Grads::default();
        let (mut loss_sum, mut mlm_sum, mut disc_sum, mut correct, mut real, mut masked) =
            (0.0, 0.0, 0.0, 0.0, 0usize, 0usize);
        let (mut sr_sum, mut sr_sent_sum) = (0.0, 0.0);
        // CLINE: detection loss, right detections, labelled pieces, contrast, syn-closer share,
        // and the three weights.
        let (mut rtd_sum, mut rtd_right, mut rtd_counted) = (0.0, 0.0, 0usize);
        let (mut cts_sum, mut closer_sum, mut weights) = (0.0, 0.0, [0.0; 3]);
        for micro in 0..cfg.train.grad_accum {
            let step_seed = cfg.train.seed.wrapping_mul(1_000_003) ^ (step << 8) ^ micro as u64;
            crate::model::seed(&base_device, step_seed);
            let mut rng = ChaCha8Rng::seed_from_u64(step_seed);
            let (l, n_masked, n_tokens) = if cline {
                let cb = stream.next_cline_batch();
                let m = mask_batch(&cb.ori, &cfg.masking, &special, vocab, &mut rng);
                let l = cline_step_loss(&model, cfg, &cb, &m, &device);
                (l, m.positions.len(), cb.ori.batch * cb.ori.len)
            } else {
                let batch = stream.next_batch();
                let m = mask_batch(&batch, &cfg.masking, &special, vocab, &mut rng);
                let l = step_loss(
                    &model,
                    cfg,
                    table.as_ref(),
                    multi_piece.as_ref(),
                    &batch,
                    &m,
                    &device,
                );
                (l, m.positions.len(), batch.batch * batch.len)
            };
            masked += n_masked;
            real += l.real_tokens;
            let g = l.total.backward();
            grads.accumulate(Grads::collect(&g, |w| model.walk(w)));
            // Every loss term in one read (one device sync instead of one per term).
            let zero = || Tensor::<1>::zeros([1], &device);
            let c = l.cline.as_ref();
            let terms = [
                Some(l.total),
                Some(l.mlm),
                l.disc,
                l.disc_correct,
                l.sr,
                l.sr_sent,
                c.map(|c| c.rtd.clone()),
                c.map(|c| c.rtd_correct.clone()),
                c.map(|c| c.contrast.clone()),
                c.map(|c| c.syn_closer.clone()),
            ]
            .map(|t| t.map(|t| t.inner().reshape([1])).unwrap_or_else(zero));
            let mut terms = terms.to_vec();
            terms.push(
                c.map(|c| c.weights.clone().inner())
                    .unwrap_or_else(|| Tensor::zeros([3], &device)),
            );
            let v = Tensor::cat(terms, 0)
                .into_data()
                .convert::<f64>()
                .try_into_vec::<f64>()
                .expect("loss terms");
            loss_sum += v[0];
            mlm_sum += v[1];
            disc_sum += v[2];
            correct += v[3];
            sr_sum += v[4];
            sr_sent_sum += v[5];
            rtd_sum += v[6];
            rtd_right += v[7];
            cts_sum += v[8];
            closer_sum += v[9];
            weights = [v[10], v[11], v[12]];
            rtd_counted += c.map_or(0, |c| c.rtd_counted);
            if let Some(c) = l.corrections {
                window
                    .corrections
                    .get_or_insert_with(CorrectionCounts::default)
                    .add(&c);
            }
            rate_tokens += n_tokens;
        }
        let k = cfg.train.grad_accum as f64;
        if !loss_sum.is_finite() {
            let last_good = checkpoint::list(run)
                .pop()
                .map(|(_, p)| p.display().to_string());
            return Err(Error::Diverged(format!(
                "step {}: loss is {loss_sum} (not finite); stopped. Last good checkpoint: {}",
                step + 1,
                last_good.unwrap_or_else(|| "none".into())
            )));
        }
        if cfg.train.grad_accum > 1 {
            grads.scale(1.0 / k);
        }
        let grad_norm = grads.clip_global_norm(cfg.optimizer.max_grad_norm);
        let lr = scheduled_lr(cfg.optimizer.lr, step, cfg.optimizer.warmup_steps, total);
        opt.update(lr, &grads, |w| model.walk(w));
        let done = step + 1;
        window.masked += masked;
        window.steps += 1;

        let is_electra = model.is_electra();
        let metrics = StepMetrics {
            step: done,
            loss: loss_sum / k,
            mlm_loss: mlm_sum / k,
            disc_loss: (is_electra && !cline).then_some(disc_sum / k),
            disc_accuracy: (is_electra && !cline).then(|| correct / real.max(1) as f64),
            sr_loss: cfg
                .objective
                .kind
                .word_regularization()
                .then_some(sr_sum / k),
            sr_sent_loss: cfg
                .objective
                .kind
                .sentence_regularization()
                .then_some(sr_sent_sum / k),
            rtd_loss: cline.then_some(rtd_sum / k),
            rtd_accuracy: cline.then(|| rtd_right / rtd_counted.max(1) as f64),
            contrast_loss: cline.then_some(cts_sum / k),
            syn_closer: cline.then_some(closer_sum / k),
            loss_weights: cline.then_some(weights),
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
                &model.export(),
                &opt.state(),
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
