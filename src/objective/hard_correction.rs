//! Hard Correction (Zhang et al., AAAI 2023, §3.2).
//!
//! At a masked position k with gold token `y_k` and prediction `p_k` (the argmax of the MLM
//! logits by default, or the generator's sample), the position is *corrected* when
//! `p_k ≠ y_k` and `p_k ∈ V[y_k]` (the synonym table, symmetric). Corrected positions get weight
//! `I_k = 0` in `L_cor = −Σ_k I_k · log p(y_k | s') / Σ_k I_k` — they leave the loss and its
//! normaliser (see [`super::mlm`]).
//!
//! Multi-piece extension (`multi_piece`, off by default): when a whole word is split into
//! several WordPieces that are all masked, the word counts as corrected when the predictions at
//! its pieces, joined, spell a synonym of the gold word; every piece of it is then dropped.

use serde::{Deserialize, Serialize};

use crate::lexicon::SynonymTable;

/// Which prediction Hard Correction compares with the gold token.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Prediction {
    #[default]
    Argmax,
    Sampled,
}

/// Counts of one batch, for the statistics in `metrics.jsonl`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorrectionCounts {
    pub masked: usize,
    /// Masked positions whose prediction differs from the gold token.
    pub mismatched: usize,
    /// Mismatched positions whose prediction is a synonym of the gold token.
    pub corrected: usize,
    pub sequences: usize,
    /// Sequences with at least one corrected position.
    pub sequences_corrected: usize,
}

impl CorrectionCounts {
    pub fn add(&mut self, o: &CorrectionCounts) {
        self.masked += o.masked;
        self.mismatched += o.mismatched;
        self.corrected += o.corrected;
        self.sequences += o.sequences;
        self.sequences_corrected += o.sequences_corrected;
    }
}

/// Per masked position the weight `I_k` (1 = keep, 0 = corrected), and the counts.
/// `rows[k]` is the sequence of position k; `batch` the number of sequences.
pub fn correction_weights(
    predicted: &[u32],
    gold: &[u32],
    rows: &[usize],
    batch: usize,
    table: &SynonymTable,
) -> (Vec<f32>, CorrectionCounts) {
    let mut weights = vec![1.0; gold.len()];
    let mut c = CorrectionCounts {
        masked: gold.len(),
        sequences: batch,
        ..Default::default()
    };
    let mut hit = vec![false; batch];
    for k in 0..gold.len() {
        if predicted[k] != gold[k] {
            c.mismatched += 1;
            if table.are_synonyms(gold[k], predicted[k]) {
                c.corrected += 1;
                weights[k] = 0.0;
                hit[rows[k]] = true;
            }
        }
    }
    c.sequences_corrected = hit.iter().filter(|&&h| h).count();
    (weights, c)
}

/// Word → its synonyms (WordNet), for words the vocabulary splits into pieces.
pub type WordSynonyms = Box<dyn Fn(&str) -> Vec<String> + Send + Sync>;

/// What the multi-piece rule needs: the vocabulary's token strings and word-level synonyms.
pub struct MultiPiece {
    pub tokens: Vec<String>,
    pub synonyms: WordSynonyms,
}

impl MultiPiece {
    /// Joins WordPiece tokens into a word (`##` pieces glued to the previous one).
    pub fn spell(&self, ids: &[u32]) -> String {
        ids.iter()
            .map(|&i| {
                let t = self
                    .tokens
                    .get(i as usize)
                    .map(String::as_str)
                    .unwrap_or("");
                t.strip_prefix("##").unwrap_or(t)
            })
            .collect()
    }

    fn is_piece(&self, id: u32) -> bool {
        self.tokens
            .get(id as usize)
            .is_some_and(|t| t.starts_with("##"))
    }

    /// Whole words split into several pieces, all of them masked: per word the indices into the
    /// masked positions. `ids` are the original batch ids, `len` the row length, `positions`
    /// the sorted flat masked positions.
    pub fn masked_words(&self, ids: &[u32], len: usize, positions: &[usize]) -> Vec<Vec<usize>> {
        let mut out = Vec::new();
        let mut k = 0;
        while k < positions.len() {
            let p = positions[k];
            let mut word = vec![k];
            if !self.is_piece(ids[p]) {
                while k + word.len() < positions.len() {
                    let q = positions[k + word.len()];
                    let prev = positions[k + word.len() - 1];
                    if q == prev + 1 && !q.is_multiple_of(len) && self.is_piece(ids[q]) {
                        word.push(k + word.len());
                    } else {
                        break;
                    }
                }
                let after = positions[k + word.len() - 1] + 1;
                let complete =
                    after.is_multiple_of(len) || after >= ids.len() || !self.is_piece(ids[after]);
                if word.len() > 1 && complete {
                    out.push(word.clone());
                }
            }
            k += word.len();
        }
        out
    }

    /// Applies the rule: a masked multi-piece word whose predicted pieces spell a synonym of it
    /// is corrected (all its pieces get weight 0). Returns how many positions were added.
    pub fn correct(
        &self,
        words: &[Vec<usize>],
        predicted: &[u32],
        gold: &[u32],
        weights: &mut [f32],
    ) -> usize {
        let mut extra = 0;
        for pieces in words {
            let pred: Vec<u32> = pieces.iter().map(|&k| predicted[k]).collect();
            let gold_ids: Vec<u32> = pieces.iter().map(|&k| gold[k]).collect();
            if pred == gold_ids {
                continue;
            }
            let (p, g) = (self.spell(&pred), self.spell(&gold_ids));
            if (self.synonyms)(&g).contains(&p) {
                for &k in pieces {
                    if weights[k] != 0.0 {
                        weights[k] = 0.0;
                        extra += 1;
                    }
                }
            }
        }
        extra
    }
}
