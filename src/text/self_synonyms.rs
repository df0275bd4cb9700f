//! A synonym table from a model's own input embeddings: for each whole-word vocabulary entry
//! (no `##` pieces, no special tokens, letters only: no punctuation or numbers), its `k` most
//! cosine-similar whole words whose cosine is at least `threshold`, leaving out a stop list;
//! made symmetric, as WordNet's table is. The neighbours are `lexicon::embeddings`'
//! `nearest_rows`: batched products on the embeddings' device, so a table can be rebuilt while
//! a model trains.
//!
//! [`agreement`] compares two tables on the same words (the self table against WordNet's:
//! precision and recall of its pairs) and [`changed`] measures how much a table moved between
//! two builds.

use std::collections::BTreeSet;

use burn::prelude::*;

use super::WordPieceTokenizer;
use super::synonym_table::{SynonymTable, whole_words};
use crate::lexicon::embeddings::nearest_rows;

/// How the table is built.
#[derive(Clone, Debug)]
pub struct SelfSynonyms {
    /// Neighbours kept per word (before the table is made symmetric).
    pub k: usize,
    /// Least cosine similarity of a kept neighbour.
    pub threshold: f32,
    /// Lower-case words left out on both sides.
    pub stop_words: BTreeSet<String>,
}

/// The vocabulary ids the table is defined on: whole words not in the stop list.
pub fn candidate_ids(tokenizer: &WordPieceTokenizer, stop_words: &BTreeSet<String>) -> Vec<u32> {
    whole_words(tokenizer)
        .into_iter()
        .filter(|(t, _)| !stop_words.contains(&t.to_lowercase()))
        .map(|(_, id)| id)
        .collect()
}

impl SelfSynonyms {
    /// The table of `embeddings` ([vocab, dim], on any device) over `candidates` (vocabulary
    /// ids, see [`candidate_ids`]), for `tokenizer`'s vocabulary.
    pub fn build(
        &self,
        embeddings: Tensor<2>,
        candidates: &[u32],
        tokenizer: &WordPieceTokenizer,
        source: &str,
    ) -> SynonymTable {
        let pairs = self.pairs(embeddings, candidates);
        SynonymTable::from_pairs(
            tokenizer.vocab_size(),
            tokenizer.fingerprint(),
            source.to_string(),
            pairs,
        )
    }

    /// The kept (word, neighbour) pairs, in vocabulary ids.
    pub fn pairs(&self, embeddings: Tensor<2>, candidates: &[u32]) -> Vec<(u32, u32)> {
        let n = candidates.len();
        if n < 2 || self.k == 0 {
            return Vec::new();
        }
        let device = embeddings.device();
        let ids: Vec<i64> = candidates.iter().map(|&i| i64::from(i)).collect();
        let ids = Tensor::<1, Int>::from_data(TensorData::new(ids, [n]), &device);
        let rows = embeddings.select(0, ids);
        nearest_rows(rows, self.k)
            .into_iter()
            .enumerate()
            .flat_map(|(me, row)| {
                row.into_iter()
                    .filter(|&(_, v)| v >= self.threshold)
                    .map(move |(j, _)| (candidates[me], candidates[j]))
            })
            .collect()
    }
}

/// The directed pairs (a, b) of `table` with both ends in `words`.
fn pairs_within(table: &SynonymTable, words: &BTreeSet<u32>) -> BTreeSet<(u32, u32)> {
    words
        .iter()
        .flat_map(|&a| {
            table
                .synonyms(a)
                .iter()
                .filter(|b| words.contains(b))
                .map(move |&b| (a, b))
        })
        .collect()
}

/// Precision and recall of `table`'s pairs against `reference`'s, both restricted to
/// `words`: the share of its pairs the reference has, and the share of the reference's pairs
/// it has (`None` where the set divided by is empty).
pub fn agreement(
    table: &SynonymTable,
    reference: &SynonymTable,
    words: &[u32],
) -> (Option<f64>, Option<f64>) {
    let words: BTreeSet<u32> = words.iter().copied().collect();
    let ours = pairs_within(table, &words);
    let theirs = pairs_within(reference, &words);
    let both = ours.intersection(&theirs).count() as f64;
    let share = |d: usize| (d > 0).then(|| both / d as f64);
    (share(ours.len()), share(theirs.len()))
}

/// How much `now` differs from `before`: the share of the pairs of either that only one has
/// (0 the same table, 1 nothing in common).
pub fn changed(before: &SynonymTable, now: &SynonymTable) -> f64 {
    let all = |t: &SynonymTable| -> BTreeSet<(u32, u32)> {
        (0..t.vocab_size() as u32)
            .flat_map(|a| t.synonyms(a).iter().map(move |&b| (a, b)))
            .collect()
    };
    let (a, b) = (all(before), all(now));
    let union = a.union(&b).count();
    if union == 0 {
        return 0.0;
    }
    a.symmetric_difference(&b).count() as f64 / union as f64
}
