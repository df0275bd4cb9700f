//! Dynamic masking, drawn anew every step.
//!
//! For each sequence, `n = min(max_predictions, max(1, round(prob · #candidates)))` positions are
//! drawn uniformly without replacement among the real, non-special tokens. Each chosen position
//! becomes `[MASK]` with probability `mask_frac`, a random regular token with probability
//! `random_frac`, and stays unchanged otherwise (ELECTRA: 0.85 / 0 / 0.15; BERT: 0.8 / 0.1 / 0.1).
//! Labels are the original tokens at the chosen positions.

use rand::Rng;
use rand::seq::index::sample;
use serde::{Deserialize, Serialize};

use super::batches::Batch;
use super::tokenizer::SpecialIds;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MaskingConfig {
    pub prob: f64,
    pub mask_frac: f64,
    pub random_frac: f64,
    pub max_predictions: usize,
}

impl Default for MaskingConfig {
    fn default() -> Self {
        Self {
            prob: 0.15,
            mask_frac: 0.85,
            random_frac: 0.0,
            max_predictions: 19,
        }
    }
}

/// A masked batch: the corrupted ids, and per masked position its flat index `b * len + t`
/// (ascending) and gold label.
#[derive(Clone, Debug, PartialEq)]
pub struct Masked {
    pub input_ids: Vec<u32>,
    pub positions: Vec<usize>,
    pub labels: Vec<u32>,
}

impl Masked {
    /// The masking of rows `rows` of a batch of sequences of `len` tokens, in that share's own
    /// flat indices (a data-parallel replica's share).
    pub fn rows(&self, len: usize, rows: std::ops::Range<usize>) -> Masked {
        let span = rows.start * len..rows.end * len;
        let first = self.positions.partition_point(|&p| p < span.start);
        let end = self.positions.partition_point(|&p| p < span.end);
        Masked {
            input_ids: self.input_ids[span.clone()].to_vec(),
            positions: self.positions[first..end]
                .iter()
                .map(|&p| p - span.start)
                .collect(),
            labels: self.labels[first..end].to_vec(),
        }
    }
}

/// Masks `batch`; real tokens that are not special tokens are candidates (and random fillers).
pub fn mask_batch(
    batch: &Batch,
    cfg: &MaskingConfig,
    special: &SpecialIds,
    vocab_size: usize,
    rng: &mut impl Rng,
) -> Masked {
    let specials = [
        special.pad,
        special.unk,
        special.cls,
        special.sep,
        special.mask,
    ];
    let mut input_ids = batch.ids.clone();
    let mut positions = Vec::new();
    let mut labels = Vec::new();
    for r in 0..batch.batch {
        let row = r * batch.len;
        let candidates: Vec<usize> = (0..batch.len)
            .filter(|&t| {
                batch.attention_mask[row + t] == 1 && !specials.contains(&batch.ids[row + t])
            })
            .collect();
        if candidates.is_empty() {
            continue;
        }
        let n = ((cfg.prob * candidates.len() as f64).round() as usize)
            .max(1)
            .min(cfg.max_predictions)
            .min(candidates.len());
        let mut chosen: Vec<usize> = sample(rng, candidates.len(), n)
            .into_iter()
            .map(|i| candidates[i])
            .collect();
        chosen.sort_unstable();
        for t in chosen {
            let at = row + t;
            positions.push(at);
            labels.push(batch.ids[at]);
            let u: f64 = rng.random();
            if u < cfg.mask_frac {
                input_ids[at] = special.mask;
            } else if u < cfg.mask_frac + cfg.random_frac {
                input_ids[at] = loop {
                    let c = rng.random_range(0..vocab_size as u32);
                    if !specials.contains(&c) {
                        break c;
                    }
                };
            }
        }
    }
    Masked {
        input_ids,
        positions,
        labels,
    }
}
