//! What Hard Correction corrects, shown while a run trains: every `train.log_every ×
//! objective.hc_samples_every` steps, a batch of the run's training examples (drawn and masked
//! with draws seeded by the run's seed and the step) is predicted by the model as it is now,
//! by the run's rule (`hc_prediction`), and up to `hc_samples` of the predictions the synonym
//! table in use drops are shown in their sentence. The record `corrections` holds them in
//! `metrics.jsonl` (gold, prediction, probability, context) and as a Markdown table in
//! TensorBoard's text tab, with the batch's counts.
//!
//! The batch is predicted outside the training step (without dropout, on the evaluation copy of
//! the model): it changes no draw of the training, and a recorded step is not disturbed.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use rand::SeedableRng;
use rand::seq::index::sample;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::StepAt;
use crate::Result;
use crate::objective::{ObjectiveConfig, Record};
use crate::text::batches::Batch;
use crate::text::marked_context::{around_mark, cell, word_and_context};
use crate::text::masking::Masked;
use crate::text::{SynonymTable, WordPieceTokenizer};
use crate::train::stats::{predict_masked, verdicts};

/// Sequences predicted for one sample.
const ROWS: usize = 32;

/// Words shown either side of a corrected position.
const AROUND: usize = 10;

/// The record's name in `metrics.jsonl` and TensorBoard.
pub const NAME: &str = "corrections";

/// The samples of a run (see the module documentation).
pub struct CorrectionSamples {
    objective: ObjectiveConfig,
    tokenizer: OnceLock<WordPieceTokenizer>,
}

/// One corrected prediction.
#[derive(Clone, Debug, Serialize)]
pub struct Sample {
    pub gold: String,
    pub predicted: String,
    pub probability: f32,
    pub context: String,
}

impl CorrectionSamples {
    /// The samples of a run of `objective`, when it corrects predictions and shows them.
    pub fn of(objective: &ObjectiveConfig) -> Option<Self> {
        let hc = &objective.parts.hc;
        let shown = objective.kind.reports_corrections() && hc.hc_samples_every > 0;
        (shown && hc.hc_samples > 0).then(|| Self {
            objective: objective.clone(),
            tokenizer: OnceLock::new(),
        })
    }

    /// Whether a sample is shown after step `done` of a run logging every `log_every` steps.
    pub fn due(&self, done: u64, log_every: u64) -> bool {
        done.is_multiple_of(log_every.max(1) * self.objective.parts.hc.hc_samples_every)
    }

    /// The draws of the sample after step `at.done`: which examples, their masking and the
    /// sampled predictions.
    pub fn draws(&self, at: &StepAt) -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(at.seed ^ at.done.rotate_left(32) ^ 0x5a)
    }

    /// The examples of the sample: up to 32 of the run's, sorted.
    pub fn indices(&self, examples: usize, draws: &mut ChaCha8Rng) -> Vec<usize> {
        let mut indices = sample(draws, examples, ROWS.min(examples)).into_vec();
        indices.sort_unstable();
        indices
    }

    /// The sample after step `at.done` on batch `b` masked as `m` (drawn with `draws`), with
    /// `table` (the synonym table in use).
    pub fn record(
        &self,
        at: &StepAt,
        b: &Batch,
        m: &Masked,
        table: &SynonymTable,
        draws: &mut ChaCha8Rng,
    ) -> Result<Record> {
        let tokenizer = match self.tokenizer.get() {
            Some(t) => t,
            None => {
                let t = crate::text::prepare::shard_tokenizer(&at.shards.dir)?;
                self.tokenizer.get_or_init(|| t)
            }
        };
        let model = at.model.valid();
        let device = at.device.clone();
        let rule = self.objective.parts.hc.hc_prediction;
        let predicted = predict_masked(&model, rule, b, m, &device, draws);
        let (weights, counts) = verdicts(b, m, &predicted.ids, table);
        let piece = |id: u32| tokenizer.inner.id_to_token(id).unwrap_or_default();
        let mut samples = Vec::new();
        for (k, _) in weights.iter().enumerate().filter(|(_, w)| **w == 0.0) {
            if samples.len() == self.objective.parts.hc.hc_samples {
                break;
            }
            let p = m.positions[k];
            let row = p / b.len;
            let ids = &b.ids[row * b.len..(row + 1) * b.len];
            let (_, context) = word_and_context(tokenizer, ids, p % b.len);
            samples.push(Sample {
                gold: piece(m.labels[k]),
                predicted: piece(predicted.ids[k]),
                probability: predicted.probability[k],
                context: around_mark(&context, AROUND),
            });
        }
        let mut values = BTreeMap::new();
        values.insert("mismatched".into(), counts.mismatched.into());
        values.insert("corrected".into(), counts.corrected.into());
        values.insert("masked".into(), counts.masked.into());
        values.insert(
            "samples".into(),
            serde_json::to_value(&samples).expect("json"),
        );
        Ok(Record {
            name: NAME,
            text: Some(page(&samples, counts.corrected, counts.mismatched, table)),
            note: format!(
                "corrections in a sample of {} sequences: {} of {} mismatched predictions",
                b.batch, counts.corrected, counts.mismatched
            ),
            warning: false,
            values,
        })
    }
}

/// The Markdown shown in TensorBoard.
fn page(samples: &[Sample], corrected: usize, mismatched: usize, table: &SynonymTable) -> String {
    let mut md = format!(
        "{corrected} of {mismatched} mismatched predictions corrected (synonym table: {}).\n\n",
        table.source
    );
    if samples.is_empty() {
        return md;
    }
    md += "| context | gold | prediction | p |\n|---|---|---|---:|\n";
    for s in samples {
        md += &format!(
            "| {} | {} | {} | {:.3} |\n",
            cell(&s.context),
            cell(&s.gold),
            cell(&s.predicted),
            s.probability
        );
    }
    md
}
