//! A synonym table from a model's own input embeddings.
//!
//! - **The words** ([`candidate_ids`]): whole-word vocabulary entries (no `##` pieces, no
//!   special tokens, letters only), leaving out function words (a closed-class list:
//!   determiners, pronouns, prepositions, conjunctions, auxiliaries, and number words), the
//!   user's stop list, and words WordNet does not know. A function word is what a model
//!   predicts when it knows little ("the" for "of"), so a table that held them would drop
//!   the commonest mistakes as "synonyms".
//! - **The acceptance** ([`SelfSynonyms::pairs`]): cosine similarity after removing the
//!   embeddings' common direction (the mean of the words' vectors: a young model's embeddings
//!   crowd together, so raw cosines are high for every pair), and a pair is kept only when
//!   each word is among the other's `k` nearest (mutual neighbours) with a centred cosine of
//!   at least `threshold`. Mutual pairs make the table symmetric, as WordNet's is.
//!
//! The neighbours are `lexicon::embeddings`' `nearest_rows`: batched products on the
//! embeddings' device, so a table can be rebuilt while a model trains.
//!
//! [`agreement`] compares two tables on the same words (the self table against WordNet's:
//! precision and recall of its pairs) and [`changed`] measures how much a table moved between
//! two builds.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Instant;

use burn::prelude::*;
use serde::{Deserialize, Serialize};

use super::WordPieceTokenizer;
use super::synonym_table::{SynonymTable, whole_words};
use crate::Result;
use crate::lexicon::embeddings::nearest_rows;

/// The quality gate's default: a table whose pairs are WordNet synonyms less than one time in
/// ten is mostly related words that are not synonyms (a young model's neighbours, antonyms,
/// co-hyponyms such as "war" / "battle" / "army"), which Hard Correction would drop as
/// synonyms. The table in use (WordNet's by default) stays until a rebuilt table passes it.
pub const SELF_MIN_PRECISION: f64 = 0.1;

/// The words the self table is defined on (`hc_self_words`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SelfWords {
    Content,
    All,
}

impl SelfWords {
    /// WordNet from `dir`, whose word list keeps the words it does not know out of a
    /// `content` table (none for `all`; none, with a warning, when it cannot be read).
    pub fn wordnet(self, dir: &Path) -> Option<crate::lexicon::wordnet::WordNet> {
        if self == Self::All {
            return None;
        }
        crate::lexicon::wordnet::WordNet::open(dir)
            .inspect_err(|e| {
                tracing::warn!("the self table takes every whole word, WordNet unread: {e}")
            })
            .ok()
    }

    /// The vocabulary ids the table is defined on: [`candidate_ids`] (`content`) or
    /// [`all_whole_words`] (`all`).
    pub fn ids(
        self,
        tokenizer: &WordPieceTokenizer,
        stop_words: &BTreeSet<String>,
        wordnet: Option<&crate::lexicon::wordnet::WordNet>,
    ) -> Vec<u32> {
        match self {
            Self::Content => candidate_ids(tokenizer, stop_words, wordnet),
            Self::All => all_whole_words(tokenizer, stop_words),
        }
    }
}

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

/// A function word (closed class, or a number word): never given a self synonym.
pub fn is_function_word(word: &str) -> bool {
    crate::lexicon::words::is_stop(word) || crate::lexicon::words::is_number_word(word)
}

/// Every whole word not in the stop list, function words included (`hc_self_words = "all"`).
pub fn all_whole_words(tokenizer: &WordPieceTokenizer, stop_words: &BTreeSet<String>) -> Vec<u32> {
    kept_words(tokenizer, |w| !stop_words.contains(w))
}

/// The ids of the whole words whose lower-case form `keep` keeps.
fn kept_words(tokenizer: &WordPieceTokenizer, keep: impl Fn(&str) -> bool) -> Vec<u32> {
    whole_words(tokenizer)
        .into_iter()
        .filter(|(t, _)| keep(&t.to_lowercase()))
        .map(|(_, id)| id)
        .collect()
}

/// The vocabulary ids the table is defined on: whole words that are not function words, not
/// in the stop list, and known to `wordnet` as a word or an inflection of one (every whole
/// word when WordNet is not at hand).
pub fn candidate_ids(
    tokenizer: &WordPieceTokenizer,
    stop_words: &BTreeSet<String>,
    wordnet: Option<&crate::lexicon::wordnet::WordNet>,
) -> Vec<u32> {
    kept_words(tokenizer, |w| {
        !is_function_word(w)
            && !stop_words.contains(w)
            && wordnet.is_none_or(|wn| !wn.lemmas(w).is_empty())
    })
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

    /// The kept (word, neighbour) pairs, in vocabulary ids: mutual `k` nearest neighbours by
    /// the cosine of the centred vectors, at least `threshold` (see the module's text).
    pub fn pairs(&self, embeddings: Tensor<2>, candidates: &[u32]) -> Vec<(u32, u32)> {
        let n = candidates.len();
        if n < 2 || self.k == 0 {
            return Vec::new();
        }
        let device = embeddings.device();
        let ids: Vec<i64> = candidates.iter().map(|&i| i64::from(i)).collect();
        let ids = Tensor::<1, Int>::from_data(TensorData::new(ids, [n]), &device);
        let rows = embeddings.select(0, ids);
        let centred = rows.clone() - rows.mean_dim(0);
        let near = nearest_rows(centred, self.k);
        let neighbours: Vec<BTreeSet<usize>> = near
            .iter()
            .map(|row| row.iter().map(|&(j, _)| j).collect())
            .collect();
        near.iter()
            .enumerate()
            .flat_map(|(me, row)| {
                let neighbours = &neighbours;
                row.iter()
                    .filter(move |&&(j, v)| v >= self.threshold && neighbours[j].contains(&me))
                    .map(move |&(j, _)| (candidates[me], candidates[j]))
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
    /// The least precision against the reference for a rebuilt table to be used (0: every
    /// table is used); below it, the table in use stays.
    pub min_precision: f64,
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
    /// 1 when the rebuilt table replaced the one in use, 0 when it failed the quality gate.
    pub accepted: u8,
}

impl RefreshReport {
    /// The refresh's log line: what was built, its agreement with WordNet, and, when it failed
    /// the gate `min_precision`, that the table in use (`kept`) stays.
    pub fn note(&self, min_precision: f64, kept: &str) -> String {
        let against = match (self.precision, self.recall) {
            (Some(p), Some(c)) => format!(
                ", against WordNet precision {:.1} % recall {:.1} %",
                100.0 * p,
                100.0 * c
            ),
            _ => String::new(),
        };
        let built = format!(
            "synonym table rebuilt from the embeddings: {} words, {} pairs, mean list {:.2}, {:.1} % changed{against}",
            self.words,
            self.pairs,
            self.mean_list_length,
            100.0 * self.changed,
        );
        if self.accepted == 1 {
            return built;
        }
        format!(
            "{built}; below the quality gate (objective.hc_self_min_precision = {:.1} % of its pairs WordNet synonyms): Hard Correction keeps the table in use ({kept})",
            100.0 * min_precision
        )
    }
}

impl Refresh {
    /// Whether the table is rebuilt after step `done`.
    pub fn due(&self, done: u64) -> bool {
        self.every > 0 && done.is_multiple_of(self.every)
    }

    /// Whether a table of `precision` against the reference passes the quality gate: with a
    /// gate and a reference, its precision must reach `min_precision` (a table without pairs
    /// has none, and fails).
    pub fn passes(&self, precision: Option<f64>) -> bool {
        if self.min_precision <= 0.0 || self.reference.is_none() {
            return true;
        }
        precision.is_some_and(|p| p >= self.min_precision)
    }

    /// The table of `embeddings` ([vocab, dim]) named `source`, and how it compares with the
    /// reference and with `before`, the table in use (`accepted` says whether the new table
    /// passes [`Refresh::passes`]; the caller keeps `before` when it does not).
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
            accepted: u8::from(self.passes(precision)),
        };
        (table, report)
    }
}
