//! A synonym table from an embedding matrix whose rows are a tokenizer's ids: a checkpoint's
//! word embeddings (`lexicon build --checkpoint`) or a matrix a library user hands in (the
//! Python package's `SynonymTable.from_embeddings`). One set of rules and guards for both: the
//! self table's words and acceptance ([`SelfSynonyms`]), the matrix's rows checked against the
//! vocabulary, the settings checked, and the neighbour search's memory checked before it
//! starts.

use std::collections::BTreeSet;
use std::path::Path;

use burn::prelude::*;

use super::self_synonyms::{SelfSynonyms, agreement, candidate_ids};
use super::synonym_table::{SynonymTable, wordnet_table_from};
use super::tokenizer::WordPieceTokenizer;
use crate::{Error, Result};

/// How the table is built from a matrix.
#[derive(Clone)]
pub struct EmbeddingTable<'a> {
    /// The tokenizer whose ids the matrix's rows are.
    pub tokenizer: &'a WordPieceTokenizer,
    /// Neighbours kept per word (at least 1).
    pub k: usize,
    /// Least cosine (of the centred vectors) of a kept neighbour, in [−1, 1]; `None`: any.
    pub min_cosine: Option<f32>,
    /// Lower-case words left out on both sides.
    pub stop_words: BTreeSet<String>,
    /// WordNet, whose word list keeps the words it does not know out of the table (as in a
    /// run's self table); unread, every whole word is a candidate, with a note.
    pub wordnet_dir: &'a Path,
    /// Where the matrix came from (the table's `source`, and the error lines' subject).
    pub source: String,
}

impl EmbeddingTable<'_> {
    /// The table of `values`, a row-major `[rows, dim]` matrix.
    pub fn build(&self, values: Vec<f32>, [rows, dim]: [usize; 2]) -> Result<SynonymTable> {
        let bad = |what: String| Error::Input(format!("{}: {what}", self.source));
        if values.len() != rows * dim {
            return Err(bad(format!(
                "{} values, not the {rows} × {dim} of its shape",
                values.len()
            )));
        }
        if rows != self.tokenizer.vocab_size() {
            return Err(bad(format!(
                "{rows} embedding rows, the tokenizer has {} tokens",
                self.tokenizer.vocab_size()
            )));
        }
        if self.k == 0 {
            return Err(bad(
                "k (neighbours per word) is 0, expected at least 1".into()
            ));
        }
        if let Some(c) = self.min_cosine.filter(|c| !(-1.0..=1.0).contains(c)) {
            return Err(bad(format!("min_cosine {c} is outside [-1, 1]")));
        }
        let build = SelfSynonyms {
            k: self.k,
            threshold: self.min_cosine.unwrap_or(-1.0),
            stop_words: self.stop_words.clone(),
        };
        let wn = crate::lexicon::wordnet::WordNet::open(self.wordnet_dir)
            .inspect_err(|e| {
                eprintln!("note: every whole word is a candidate, WordNet unread: {e}")
            })
            .ok();
        let candidates = candidate_ids(self.tokenizer, &build.stop_words, wn.as_ref());
        crate::memory::check(
            crate::lexicon::embeddings::neighbours_bytes(candidates.len(), dim),
            &format!(
                "the neighbour search over {} words of {dim} dimensions",
                candidates.len()
            ),
            "build it on a machine with more memory",
        )?;
        let device = crate::device::host();
        let e = Tensor::<2>::from_data(TensorData::new(values, [rows, dim]), &device);
        Ok(build.build(e, &candidates, self.tokenizer, &self.source))
    }
}

/// The agreement of `table` with WordNet's table for the same tokenizer, on the words a self
/// table is defined on: the share of its pairs WordNet has (precision) and the share of
/// WordNet's pairs it has (recall), `None` where the set divided by is empty.
pub fn wordnet_agreement(
    table: &SynonymTable,
    tokenizer: &WordPieceTokenizer,
    wordnet_dir: &Path,
) -> Result<(Option<f64>, Option<f64>)> {
    let wn = crate::lexicon::wordnet::WordNet::open(wordnet_dir)?;
    let reference = wordnet_table_from(tokenizer, &wn, wordnet_dir);
    let words = candidate_ids(tokenizer, &BTreeSet::new(), Some(&wn));
    Ok(agreement(table, &reference, &words))
}
