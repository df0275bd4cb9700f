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
///
/// A fixed-shape step's masking ([`Masked::padded`]) has the same number of slots in every
/// sequence: the masked positions, then padding slots, which `valid` marks.
#[derive(Clone, Debug, PartialEq)]
pub struct Masked {
    pub input_ids: Vec<u32>,
    pub positions: Vec<usize>,
    pub labels: Vec<u32>,
    /// Per slot, whether it is a masked position (`None`: every slot is).
    pub valid: Option<Vec<bool>>,
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
            valid: self.valid.as_ref().map(|v| v[first..end].to_vec()),
        }
    }

    /// The same masking with `slots` slots in each of `batch`'s sequences (at least as many as
    /// any sequence has masked positions): a fixed-shape step's, whose tensors have the same
    /// shapes every step (ELECTRA's `max_predictions_per_seq`). A padding slot points at a
    /// position of its sequence that is not masked (a real token where there is one), with
    /// that position's own token as its label, and is not `valid`: the step gives it weight 0
    /// and leaves its token as it is.
    pub fn padded(&self, batch: &Batch, slots: usize) -> Masked {
        let len = batch.len;
        let n = batch.batch * slots;
        let (mut positions, mut labels) = (Vec::with_capacity(n), Vec::with_capacity(n));
        let mut valid = Vec::with_capacity(n);
        let mut k = 0;
        for r in 0..batch.batch {
            let span = r * len..(r + 1) * len;
            let start = k;
            while k < self.positions.len() && self.positions[k] < span.end {
                k += 1;
            }
            let own = &self.positions[start..k];
            assert!(
                own.len() <= slots,
                "sequence {r} has {} masked positions, more than {slots} slots",
                own.len()
            );
            positions.extend_from_slice(own);
            labels.extend_from_slice(&self.labels[start..k]);
            valid.extend(std::iter::repeat_n(true, own.len()));
            if own.len() < slots {
                let free = |p: &usize| own.binary_search(p).is_err();
                let pad = span
                    .clone()
                    .find(|p| free(p) && batch.attention_mask[*p] == 1)
                    .or_else(|| span.clone().find(free))
                    .expect("a sequence with fewer masked positions than tokens has a free one");
                for _ in own.len()..slots {
                    positions.push(pad);
                    labels.push(batch.ids[pad]);
                    valid.push(false);
                }
            }
        }
        Masked {
            input_ids: self.input_ids.clone(),
            positions,
            labels,
            valid: Some(valid),
        }
    }

    /// The number of masked positions (padding slots aside).
    pub fn count(&self) -> usize {
        match &self.valid {
            Some(v) => v.iter().filter(|&&x| x).count(),
            None => self.positions.len(),
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
        valid: None,
    }
}
