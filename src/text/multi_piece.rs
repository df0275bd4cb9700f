//! Hard Correction's multi-piece rule (an extension, `objective.hc_multi_piece`): a whole word
//! the vocabulary splits into several WordPieces, all of them masked, counts as corrected when
//! the predictions at its pieces, joined, spell a synonym of the gold word.

use super::WordPieceTokenizer;
use crate::lexicon::WordNet;

/// Word → its synonyms (WordNet), for words the vocabulary splits into pieces.
pub type WordSynonyms = Box<dyn Fn(&str) -> Vec<String> + Send + Sync>;

/// What the multi-piece rule needs: the vocabulary's token strings and word-level synonyms.
pub struct MultiPiece {
    pub tokens: Vec<String>,
    pub synonyms: WordSynonyms,
}

impl MultiPiece {
    /// The rule for `tokenizer`'s vocabulary, with `wordnet`'s synonyms.
    pub fn new(tokenizer: &WordPieceTokenizer, wordnet: WordNet) -> Self {
        let mut tokens = vec![String::new(); tokenizer.vocab_size()];
        for (t, id) in tokenizer.inner.get_vocab(true) {
            if let Some(slot) = tokens.get_mut(id as usize) {
                *slot = t;
            }
        }
        Self {
            tokens,
            synonyms: Box::new(move |w| wordnet.synonyms(w).into_iter().collect()),
        }
    }

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
