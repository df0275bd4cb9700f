//! Correction statistics over a run's checkpoints, in the layout of the paper's Table 8 (which
//! comes from its 200k-step continued runs): for each checkpoint, how many masked predictions
//! mismatch the gold token, how many of those Hard Correction would drop as synonyms
//! (prediction level), the share of iterations — batches — with at least one correction
//! (iteration level, the paper's), and the share of sequences with one (sequence level). The
//! predictions are the run's own rule: the argmax, or a sample of the predicted distribution
//! for a run trained with `hc_prediction = "sampled"`. The same masked batches (and samples)
//! are used for every checkpoint (fixed seeds).

use crate::objective::hard_correction::{CORRECTED, MISMATCHED};
use std::path::Path;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::checkpoint;
use super::config::PretrainConfig;
use super::predict_masked::{check_fits, checkpoint_model, masked_batches, predict_masked};
use crate::objective::hard_correction::few_corrections_note;
use crate::objective::{CorrectionCounts, correction_weights};
use crate::text::SynonymTable;
use crate::{Error, Result};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CheckpointStats {
    pub step: u64,
    pub counts: CorrectionCounts,
    pub prediction_level: f64,
    /// The share of batches (training iterations) with at least one correction.
    pub iteration_level: f64,
    /// The share of sequences with at least one correction.
    #[serde(default)]
    pub sequence_level: f64,
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
    let path = run.join("metrics.jsonl");
    let text = crate::io::read::read_text(&path, crate::io::limit::DATA)?;
    let mut totals: Option<(u64, u64)> = None;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| Error::Input(format!("{}: {e}", path.display())))?;
        if let (Some(m), Some(c)) = (v[MISMATCHED].as_u64(), v[CORRECTED].as_u64()) {
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

/// The same note for `stats`' checkpoints of a run of `cfg`, over all of them.
pub fn stats_correction_note(cfg: &PretrainConfig, stats: &[CheckpointStats]) -> Option<String> {
    let (mismatched, corrected) = stats.iter().fold((0, 0), |(m, c), s| {
        (
            m + s.counts.mismatched as u64,
            c + s.counts.corrected as u64,
        )
    });
    few_corrections_note(mismatched, corrected, predictor(cfg))
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

/// Statistics of every checkpoint of `run` on up to `max_batches` batches of `corpus`.
pub fn correction_stats(
    run: &Path,
    corpus: &Path,
    table: &SynonymTable,
    max_batches: usize,
    batch_size: usize,
) -> Result<Vec<CheckpointStats>> {
    let cfg = PretrainConfig::of_run(run)?;
    let tokenizer = super::run::run_tokenizer(run)?;
    if table.fingerprint != tokenizer.fingerprint() {
        return Err(Error::Input(format!(
            "{}: the lexicon was built for another tokenizer",
            run.display()
        )));
    }
    let vocab = tokenizer.vocab_size();
    check_fits(&cfg, vocab, batch_size, "statistics")?;
    let batches = masked_batches(&cfg, &tokenizer, corpus, batch_size, max_batches, 12345)?;
    let device = crate::device::open(&cfg.replica_devices()[0])?;
    let rule = cfg.objective.hc.hc_prediction;
    let mut out = Vec::new();
    for (step, dir) in checkpoint::list(run) {
        let model = checkpoint_model(&cfg, vocab, &dir, &device)?;
        let mut counts = CorrectionCounts::default();
        let mut corrected_batches = 0usize;
        let mut draws = ChaCha8Rng::seed_from_u64(54321);
        for (b, m) in &batches {
            let pred = predict_masked(&model, rule, b, m, &device, &mut draws).ids;
            let rows: Vec<usize> = m.positions.iter().map(|&p| p / b.len).collect();
            let (_, c) = correction_weights(&pred, &m.labels, &rows, b.batch, table);
            corrected_batches += usize::from(c.corrected > 0);
            counts.add(&c);
        }
        out.push(CheckpointStats {
            step,
            prediction_level: counts.corrected as f64 / counts.mismatched.max(1) as f64,
            iteration_level: corrected_batches as f64 / batches.len().max(1) as f64,
            sequence_level: counts.sequences_corrected as f64 / counts.sequences.max(1) as f64,
            batches: batches.len(),
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

/// The statistics as a Markdown table (the layout of the paper's Table 8, with the sequence
/// level beside its iteration level).
pub fn stats_table(stats: &[CheckpointStats]) -> String {
    let mut s = String::from(
        "| step | masked | mismatched | corrected | prediction level (corrected / mismatched) | iteration level (batches with a correction; the paper's) | sequence level (sequences with a correction) |\n|---:|---:|---:|---:|---:|---:|---:|\n",
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
            100.0 * r.sequence_level
        );
    }
    s
}
