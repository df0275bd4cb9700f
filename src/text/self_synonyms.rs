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
use std::path::Path;
use std::time::Instant;

use burn::prelude::*;
use serde::Serialize;

use super::WordPieceTokenizer;
use super::synonym_table::{SynonymTable, whole_words};
use crate::Result;
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

/// The words of a stop list file, one per line, lower-cased (blank lines left out).
pub fn read_stop_words(path: &Path) -> Result<BTreeSet<String>> {
    Ok(crate::io::read::read_text(path, crate::io::limit::SMALL)?
        .lines()
        .map(|l| l.trim().to_lowercase())
        .filter(|l| !l.is_empty())
        .collect())
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

/// A table rebuilt from a training model's embeddings every `every` steps.
pub struct Refresh {
    pub build: SelfSynonyms,
    /// The words the table is defined on ([`candidate_ids`]).
    pub candidates: Vec<u32>,
    /// The tokenizer's vocabulary size and fingerprint, which the tables are made for.
    pub vocab: usize,
    pub fingerprint: String,
    /// Steps between two refreshes.
    pub every: u64,
    /// The table its pairs are compared with (WordNet's), when there is one.
    pub reference: Option<SynonymTable>,
}

/// What a refresh logs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RefreshReport {
    /// Words with at least one synonym.
    pub words: usize,
    /// Synonym pairs, each direction counted (a table's entries).
    pub pairs: usize,
    pub mean_list_length: f64,
    /// The share of its pairs among the candidates that the reference has.
    pub precision: Option<f64>,
    /// The share of the reference's pairs among the candidates that it has.
    pub recall: Option<f64>,
    /// The share of the pairs of the table before or after that only one of them has.
    pub changed: f64,
    pub seconds: f64,
}

impl Refresh {
    /// Whether the table is rebuilt after step `done`.
    pub fn due(&self, done: u64) -> bool {
        self.every > 0 && done.is_multiple_of(self.every)
    }

    /// The table of `embeddings` ([vocab, dim]) named `source`, and how it compares with the
    /// reference and with `before`, the table it replaces.
    pub fn run(
        &self,
        embeddings: Tensor<2>,
        before: &SynonymTable,
        source: &str,
    ) -> (SynonymTable, RefreshReport) {
        let start = Instant::now();
        let pairs = self.build.pairs(embeddings, &self.candidates);
        let table = SynonymTable::from_pairs(
            self.vocab,
            self.fingerprint.clone(),
            source.to_string(),
            pairs,
        );
        let coverage = table.coverage(self.candidates.len());
        let (precision, recall) = match &self.reference {
            Some(r) => agreement(&table, r, &self.candidates),
            None => (None, None),
        };
        let report = RefreshReport {
            words: coverage.with_synonyms,
            pairs: table.entries(),
            mean_list_length: coverage.mean_list_length,
            precision,
            recall,
            changed: changed(before, &table),
            seconds: start.elapsed().as_secs_f64(),
        };
        (table, report)
    }
}
