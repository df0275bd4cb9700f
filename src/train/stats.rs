//! Hard Correction on a run's own masked predictions. The predictions are made as training
//! makes them: a corpus packed with the run's tokenizer and masked with the run's masking
//! (fixed seeds), a checkpoint's model (BERT's masked-LM head, or ELECTRA's generator), and the
//! run's own rule (`hc_prediction`: the argmax, or a sample of the predicted distribution),
//! each with its probability; [`verdicts`] says which positions Hard Correction drops. `stats`,
//! `inspect` and the samples a run shows of its corrections (`train::steps::correction_samples`)
//! read them.
//!
//! The statistics take the layout of the paper's Table 8 (which comes from its 200k-step
//! continued runs): for each checkpoint, how many masked predictions mismatch the gold token,
//! how many of those Hard Correction would drop as synonyms (prediction level), the share of
//! sequences with at least one correction (iteration level: the paper's 1.41 % and 7.07 % fit
//! one 128-token sequence per iteration, not a batch of 32; docs/pretraining.md gives the
//! arithmetic), and the share of batches with one (batch level). The same masked batches (and
//! samples) are used for every checkpoint (fixed seeds).

use crate::io::PathQuery;
use crate::objective::hard_correction::{CORRECTED, MISMATCHED};
use std::borrow::Cow;
use std::path::Path;

use burn::prelude::*;
use burn::tensor::activation::log_softmax;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::checkpoint;
use super::config::PretrainConfig;
use super::model::{Net, PretrainModel};
use super::step_kind::{StepKind, StepKinds};
use crate::interop::tensors::TensorMap;
use crate::kernels::device_ids;
use crate::model::Inputs;
use crate::objective::hard_correction::Prediction;
use crate::objective::hard_correction::{CorrectionCounts, correction_weights};
use crate::text::SynonymTable;
use crate::text::WordPieceTokenizer;
use crate::text::batches::Batch;
use crate::text::corpus::take_documents;
use crate::text::examples::{Example, PackingConfig, pack_document};
use crate::text::masking::{Masked, mask_batch};
use crate::text::shards::{DataKind, ShardSet};
use crate::text::synonym_table::IN_CHECKPOINT;
use crate::{Error, Result};

/// The names of the three levels, the same in every table, plot and log.
pub const PREDICTION_LEVEL: &str = "prediction level (corrected / mismatched)";
pub const ITERATION_LEVEL: &str = "iteration level (sequences with a correction; the paper's)";
pub const BATCH_LEVEL: &str = "batch level (batches with a correction)";

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CheckpointStats {
    pub step: u64,
    pub counts: CorrectionCounts,
    /// Corrected / mismatched predictions.
    pub prediction_level: f64,
    /// The share of sequences with at least one correction (the paper's iteration level).
    pub iteration_level: f64,
    /// The share of batches with at least one correction. (Required: a record written when
    /// `iteration_level` meant batches lacks it, and is measured again.)
    pub batch_level: f64,
    /// The batches measured.
    #[serde(default)]
    pub batches: usize,
}

/// What predicts the masked tokens of a run of `cfg`, in words.
fn predictor(cfg: &PretrainConfig) -> &'static str {
    match cfg.model.kind {
        super::config::ModelKind::Electra => "generator",
        super::config::ModelKind::Bert => "masked-LM model",
    }
}

/// The mismatched and corrected predictions of a run over all its logged steps (the sums of
/// `metrics.jsonl`'s window counts); `None` when the run logs no Hard Correction counts.
pub fn run_correction_totals(run: &Path) -> Result<Option<(u64, u64)>> {
    let mut totals: Option<(u64, u64)> = None;
    for v in super::metrics::step_lines(run)? {
        let count = |k: &str| v.get(k).and_then(serde_json::Value::as_u64);
        if let (Some(m), Some(c)) = (count(MISMATCHED), count(CORRECTED)) {
            let t = totals.get_or_insert((0, 0));
            t.0 += m;
            t.1 += c;
        }
    }
    Ok(totals)
}

/// The note for a run whose Hard Correction corrected (almost) nothing over its logged steps
/// (see [`few_corrections_note`]); `None` otherwise or without Hard Correction counts.
pub fn run_correction_note(run: &Path) -> Result<Option<String>> {
    let Some((m, c)) = run_correction_totals(run)? else {
        return Ok(None);
    };
    let cfg = PretrainConfig::of_run(run)?;
    Ok(few_corrections_note(m, c, predictor(&cfg)))
}

/// What `stats` reports of a run beside its table.
pub struct StatsNotes {
    /// The run's `hc_prediction`: what its Hard Correction compares with the gold token.
    pub prediction: Prediction,
    pub notes: Vec<String>,
}

/// The run's prediction rule and the notes on `stats`' checkpoints of `run` (one read of its
/// config): too few checkpoints for Table 8's rows (with the run's `train.keep_checkpoints`),
/// and the few-corrections note over all of them.
pub fn stats_notes(run: &Path, stats: &[CheckpointStats]) -> Result<StatsNotes> {
    let cfg = PretrainConfig::of_run(run)?;
    let mut notes = Vec::new();
    if stats.len() < 3 {
        notes.push(format!(
            "{} checkpoint(s) measured: the run keeps {} (train.keep_checkpoints); a run that keeps more gives Table 8 more rows",
            stats.len(),
            cfg.train.keep_checkpoints
        ));
    }
    let (mismatched, corrected) = stats.iter().fold((0, 0), |(m, c), s| {
        (
            m + s.counts.mismatched as u64,
            c + s.counts.corrected as u64,
        )
    });
    notes.extend(few_corrections_note(mismatched, corrected, predictor(&cfg)));
    Ok(StatsNotes {
        prediction: cfg.objective.parts.hc.hc_prediction,
        notes,
    })
}

/// Refuses to replace a run's `correction-stats.json` made with another lexicon than `source`
/// (one that records none, from before the lexicon was recorded, may be replaced).
pub fn check_earlier_lexicon(run: &Path, source: &str) -> Result<()> {
    let path = run.join("correction-stats.json");
    let earlier: Option<serde_json::Value> = crate::io::read::read(&path, crate::io::limit::SMALL)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    match earlier.as_ref().and_then(|v| v["lexicon"].as_str()) {
        Some(l) if l != source => Err(Error::Input(format!(
            "{}: made with lexicon `{l}`, this call uses `{source}`; pass --force to replace \
             it, or keep both by copying it away first (nothing was changed)",
            path.display()
        ))),
        _ => Ok(()),
    }
}

/// The synonym table a checkpoint's predictions are judged with: the `lexicon` given by the
/// user where there is one; else the table the checkpoint trained with where it kept one (a
/// self-table run's `synonyms.safetensors`); else the run's (`lexicon.safetensors`, or
/// WordNet's).
pub struct JudgingTable {
    pub table: SynonymTable,
    /// `table` was given by the user (`--lexicon`): every checkpoint is judged with it.
    pub given: bool,
}

impl JudgingTable {
    /// The table of the checkpoint in `dir`.
    pub fn at(&self, dir: &Path) -> Result<Cow<'_, SynonymTable>> {
        let own = dir.join(IN_CHECKPOINT);
        if self.given || !own.is_present() {
            return Ok(Cow::Borrowed(&self.table));
        }
        Ok(Cow::Owned(SynonymTable::load_for(
            &own,
            &self.table.fingerprint,
        )?))
    }

    /// What the statistics of `run`'s checkpoints record as their lexicon.
    pub fn source(&self, run: &Path) -> String {
        let own = checkpoint::list(run)
            .iter()
            .any(|(_, d)| d.join(IN_CHECKPOINT).is_present());
        if own && !self.given {
            "each checkpoint's own table (objective.hc_source = \"self\")".into()
        } else {
            self.table.source.clone()
        }
    }
}

/// What a [`Probe`] reads: a run, a corpus, the lexicon that judges, and how many batches of
/// how many sequences, masked with which seed; `what` names the command in refusals.
pub struct ProbeRequest<'a> {
    pub run: &'a Path,
    pub corpus: &'a Path,
    pub tables: &'a JudgingTable,
    pub batch_size: usize,
    pub max_batches: usize,
    pub seed: u64,
    pub what: &'a str,
    /// The registry of step kinds (`train::steps::kind_of`), handed in by the caller above it.
    pub kinds: StepKinds,
}

/// A run's checkpoints read back on masked batches of a corpus, as training predicts: what
/// `stats` and `inspect` share. Opening it checks the lexicon against the run's tokenizer and
/// the model against host memory before anything is built.
pub struct Probe {
    cfg: PretrainConfig,
    /// The run's training step's kind (its model's heads).
    kind: &'static dyn StepKind,
    pub tokenizer: WordPieceTokenizer,
    pub batches: Vec<(Batch, Masked)>,
    pub device: Device,
}

impl Probe {
    pub fn open(r: &ProbeRequest) -> Result<Self> {
        let cfg = PretrainConfig::of_run(r.run)?;
        let tokenizer = super::run::run_tokenizer(r.run)?;
        if r.tables.table.fingerprint != tokenizer.fingerprint() {
            return Err(Error::Input(format!(
                "{}: the lexicon was built for another tokenizer",
                r.run.display()
            )));
        }
        check_fits(&cfg, tokenizer.vocab_size(), r.batch_size, r.what)?;
        let batches = masked_batches(
            &cfg,
            &tokenizer,
            r.corpus,
            r.batch_size,
            r.max_batches,
            r.seed,
        )?;
        let device = crate::device::open(&cfg.replica_devices()[0])?;
        Ok(Self {
            kind: (r.kinds)(cfg.objective.kind),
            cfg,
            tokenizer,
            batches,
            device,
        })
    }

    /// The run's `hc_prediction`: what Hard Correction compares with the gold token.
    pub fn rule(&self) -> Prediction {
        self.cfg.objective.parts.hc.hc_prediction
    }

    /// The run's model with the weights of the checkpoint in `dir`.
    pub fn model_at(&self, dir: &Path) -> Result<PretrainModel> {
        let kind = self.kind;
        checkpoint_model(
            &self.cfg,
            kind,
            self.tokenizer.vocab_size(),
            dir,
            &self.device,
        )
    }
}

/// Statistics of every checkpoint of `run` on up to `max_batches` batches of `corpus`.
pub fn correction_stats(
    run: &Path,
    corpus: &Path,
    tables: &JudgingTable,
    max_batches: usize,
    batch_size: usize,
    kinds: StepKinds,
) -> Result<Vec<CheckpointStats>> {
    let probe = Probe::open(&ProbeRequest {
        kinds,
        run,
        corpus,
        tables,
        batch_size,
        max_batches,
        seed: 12345,
        what: "statistics",
    })?;
    let mut out = Vec::new();
    for (step, dir) in checkpoint::list(run) {
        let model = probe.model_at(&dir)?;
        let table = tables.at(&dir)?;
        let mut counts = CorrectionCounts::default();
        let mut corrected_batches = 0usize;
        let mut draws = ChaCha8Rng::seed_from_u64(54321);
        for (b, m) in &probe.batches {
            let pred = predict_masked(&model, probe.rule(), b, m, &probe.device, &mut draws).ids;
            let (_, c) = verdicts(b, m, &pred, &table);
            corrected_batches += usize::from(c.corrected > 0);
            counts.add(&c);
        }
        out.push(CheckpointStats {
            step,
            prediction_level: counts.corrected as f64 / counts.mismatched.max(1) as f64,
            iteration_level: counts.sequences_corrected as f64 / counts.sequences.max(1) as f64,
            batch_level: corrected_batches as f64 / probe.batches.len().max(1) as f64,
            batches: probe.batches.len(),
            counts,
        });
    }
    if out.is_empty() {
        return Err(Error::Checkpoint(format!(
            "{}: no checkpoints",
            run.display()
        )));
    }
    Ok(out)
}

/// The statistics as a Markdown table (the layout of the paper's Table 8, with the batch
/// level beside its iteration level).
pub fn stats_table(stats: &[CheckpointStats]) -> String {
    let mut s = format!(
        "| step | masked | mismatched | corrected | {PREDICTION_LEVEL} | {ITERATION_LEVEL} | {BATCH_LEVEL} |\n|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in stats {
        s += &format!(
            "| {} | {} | {} | {} | {:.2} % | {:.2} % | {:.2} % |\n",
            r.step,
            r.counts.masked,
            r.counts.mismatched,
            r.counts.corrected,
            100.0 * r.prediction_level,
            100.0 * r.iteration_level,
            100.0 * r.batch_level
        );
    }
    s
}

/// The first `limit` examples of `corpus`: a text corpus packed with the run's tokenizer (seed
/// 0), or a folder of shards `prepare` wrote with that tokenizer, read as they are.
pub fn corpus_examples(
    corpus: &Path,
    tokenizer: &WordPieceTokenizer,
    max_len: usize,
    limit: usize,
) -> Result<Vec<Example>> {
    if crate::io::read::exists(&corpus.join(crate::text::shards::MANIFEST)) {
        return shard_examples(corpus, tokenizer, max_len, limit);
    }
    let s = tokenizer.special;
    let cfg = PackingConfig::new(max_len, s.cls, s.sep);
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let mut out = Vec::new();
    // Only as much text as the examples need is read: a document's piece of 32 bytes per token
    // wanted gives them all.
    let piece = (limit * max_len).saturating_mul(32).max(1 << 20);
    take_documents(&[corpus.to_path_buf()], piece, |d| {
        out.extend(pack_document(&d.sentence_ids(tokenizer), &cfg, &mut rng));
        out.len() < limit
    })?;
    if out.is_empty() {
        return Err(Error::Input(format!(
            "{}: the corpus has no text",
            corpus.display()
        )));
    }
    out.truncate(limit);
    Ok(out)
}

/// The first `limit` examples of the shards in `dir`, which must hold packed examples of at
/// most `max_len` tokens made with `tokenizer`.
fn shard_examples(
    dir: &Path,
    tokenizer: &WordPieceTokenizer,
    max_len: usize,
    limit: usize,
) -> Result<Vec<Example>> {
    let shards = ShardSet::open(dir)?;
    let m = &shards.manifest;
    let refuse = |why: String| Err(Error::Input(format!("{}: {why}", dir.display())));
    if m.tokenizer_fingerprint != tokenizer.fingerprint() {
        return refuse("prepared with another tokenizer than the run's".into());
    }
    if shards.holds_triples() {
        return refuse(format!(
            "holds {}; give packed examples or a text",
            DataKind::Triples.describe()
        ));
    }
    if m.max_seq_len > max_len {
        return refuse(format!(
            "examples of {} tokens, the run's are at most {max_len}",
            m.max_seq_len
        ));
    }
    let indices: Vec<usize> = (0..shards.len().min(limit)).collect();
    if indices.is_empty() {
        return refuse("holds no examples".into());
    }
    shards.examples(&indices)
}

/// Up to `max_batches` batches of `batch_size` sequences of `corpus`, masked as the run masks
/// (seeded by `seed`).
fn masked_batches(
    cfg: &PretrainConfig,
    tokenizer: &WordPieceTokenizer,
    corpus: &Path,
    batch_size: usize,
    max_batches: usize,
    seed: u64,
) -> Result<Vec<(Batch, Masked)>> {
    let limit = batch_size.saturating_mul(max_batches);
    let examples = corpus_examples(corpus, tokenizer, cfg.data.max_seq_len, limit)?;
    let vocab = tokenizer.vocab_size();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    Ok(examples
        .chunks(batch_size)
        .take(max_batches)
        .map(|c| {
            let b = Batch::from_examples(c, tokenizer.special.pad);
            let m = mask_batch(&b, &cfg.masking, &tokenizer.special, vocab, &mut rng);
            (b, m)
        })
        .collect())
}

/// Refuses `what` (a command's predictions) whose model and batches of `batch_size` cannot
/// fit in host memory, before the model is built (the forward pass, one checkpoint at a time).
fn check_fits(cfg: &PretrainConfig, vocab: usize, batch_size: usize, what: &str) -> Result<()> {
    if cfg.replica_devices().iter().any(|d| d.kind.is_gpu()) {
        return Ok(());
    }
    let len = cfg.data.max_seq_len;
    let need: f64 = (cfg.model.encoders(vocab).iter())
        .map(|e| crate::model::footprint::inference_bytes(e, batch_size, len))
        .sum();
    crate::memory::check(
        need,
        &format!("{what} at --batch-size {batch_size} × {len} tokens"),
        "lower --batch-size",
    )
}

/// The run's model (its step's heads from `kind`) with the weights of the checkpoint in `dir`.
fn checkpoint_model(
    cfg: &PretrainConfig,
    kind: &dyn StepKind,
    vocab: usize,
    dir: &Path,
    device: &Device,
) -> Result<PretrainModel> {
    let ck = super::checkpoint::load(dir)?;
    let run = dir.parent().and_then(Path::parent).unwrap_or(dir);
    super::run::check_weights(cfg, vocab, &ck.model, &dir.join("model.safetensors"), run)?;
    let mut model = PretrainModel::of(&cfg.model_shape(vocab), &cfg.step_settings(), kind, device);
    model.load(
        &TensorMap {
            tensors: ck.model,
            source: dir.join("model.safetensors"),
        },
        device,
    )?;
    Ok(model)
}

/// Hard Correction's verdict on `predicted` at the masked positions of `b`: per position its
/// loss weight (0: dropped as a synonym of the gold token), and the batch's counts.
pub fn verdicts(
    b: &Batch,
    m: &Masked,
    predicted: &[u32],
    table: &SynonymTable,
) -> (Vec<f32>, CorrectionCounts) {
    let rows: Vec<usize> = m.positions.iter().map(|&p| p / b.len).collect();
    correction_weights(predicted, &m.labels, &rows, b.batch, table)
}

/// The predictions at a batch's masked positions, in their order.
pub struct Predicted {
    pub ids: Vec<u32>,
    /// The probability the model gives each prediction.
    pub probability: Vec<f32>,
}

/// Predicts every masked position of `b` by `rule` (samples drawn from `draws`).
pub fn predict_masked(
    model: &PretrainModel,
    rule: Prediction,
    b: &Batch,
    m: &Masked,
    device: &Device,
    draws: &mut ChaCha8Rng,
) -> Predicted {
    let shape = [b.batch, b.len];
    let x = Inputs {
        ids: device_ids(&m.input_ids, shape, device),
        token_types: device_ids(&b.token_types, shape, device),
        attention_mask: Some(device_ids(&b.attention_mask, shape, device)),
    };
    let n = m.positions.len();
    let positions: Vec<i64> = m.positions.iter().map(|&p| p as i64).collect();
    let pos = Tensor::<1, Int>::from_data(TensorData::new(positions, [n]), device);
    let logits = match &model.net {
        Net::Bert(bm) => bm.mlm_logits(&x, pos),
        Net::Electra(e) => e.generator_logits(&x, pos),
    };
    let ids = match rule {
        Prediction::Argmax => crate::model::host_ids(logits.clone().argmax(1)),
        Prediction::Sampled => sample(logits.clone(), draws),
    };
    let chosen: Vec<i64> = ids.iter().map(|&i| i as i64).collect();
    let chosen = Tensor::<1, Int>::from_data(TensorData::new(chosen, [n]), device).reshape([n, 1]);
    let probability = crate::kernels::read_floats(log_softmax(logits, 1).gather(1, chosen))
        .into_iter()
        .map(|l| l.exp() as f32)
        .collect();
    Predicted { ids, probability }
}

/// A token drawn from each row of `logits` [n, vocab] (softmax at temperature 1, as the
/// generator samples in training).
fn sample(logits: Tensor<2>, rng: &mut ChaCha8Rng) -> Vec<u32> {
    use rand::Rng;
    let [n, vocab] = logits.dims();
    let values = crate::kernels::read_floats(logits);
    (0..n)
        .map(|i| {
            let row = &values[i * vocab..(i + 1) * vocab];
            let top = row.iter().copied().fold(f64::MIN, f64::max);
            let weights: Vec<f64> = row.iter().map(|&z| (z - top).exp()).collect();
            let mut u = rng.random::<f64>() * weights.iter().sum::<f64>();
            for (j, w) in weights.iter().enumerate() {
                u -= w;
                if u <= 0.0 {
                    return j as u32;
                }
            }
            (vocab - 1) as u32
        })
        .collect()
}

/// Below this share of the mismatched predictions corrected, Hard Correction has in effect done
/// nothing (0.01 %; the paper's Table 8 reports 1–2 % at 1M steps).
pub const FEW_CORRECTIONS: f64 = 1e-4;

/// A note when Hard Correction corrected (almost) nothing of `mismatched` predictions, with
/// the usual reason, so that a small run is not read as a broken objective.
/// `predictor` names what predicts the masked tokens: ELECTRA's generator, or BERT's masked-LM
/// model.
pub fn few_corrections_note(mismatched: u64, corrected: u64, predictor: &str) -> Option<String> {
    let share = corrected as f64 / mismatched.max(1) as f64;
    (mismatched > 0 && share < FEW_CORRECTIONS).then(|| {
        format!(
            "Hard Correction corrected {corrected} of {mismatched} mismatched predictions ({:.3} %, under {} %): a {predictor} this early or this small predicts mostly function words and punctuation, which have no WordNet synonyms; corrections come once it predicts content words (the paper's Table 8, measured on runs continued for 200k steps: 1–2 % of mismatches). `trueneg stats` on later checkpoints shows the rate; `lexicon build` prints the table's coverage",
            100.0 * share,
            100.0 * FEW_CORRECTIONS
        )
    })
}
