//! Deterministic WordPiece vocabulary training.
//!
//! The algorithm is the one of `tokenizers`' `WordPieceTrainer` (BPE merges over the corpus'
//! words, continuation pieces prefixed with `##`, merges below a minimum count never made), but
//! that trainer walks its word counts in hash-map order: the ids of the `##c` pieces, and through
//! them which of two equally frequent pairs is merged first, change from run to run. Here every
//! order is fixed: words in byte order, the alphabet by code point, and ties between equally
//! frequent pairs broken by the smaller pair of ids. Two runs on the same text give the same
//! vocabulary, id for id, whatever the thread count.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

use ahash::AHashMap;
use rayon::prelude::*;
use tokenizers::normalizers::BertNormalizer;
use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
use tokenizers::{Normalizer, OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer};

use super::ascii_chunk::AsciiChunk;
use crate::{Error, Result};

/// The prefix of a piece that continues a word.
pub const CONTINUATION: &str = "##";

type Pair = (u32, u32);

/// Word counts after BERT's normalisation and pre-tokenisation, gathered a batch of texts at a
/// time (the normalised corpus is never held whole).
pub struct WordCounts {
    counts: AHashMap<String, u64>,
    normalizer: BertNormalizer,
    /// Distinct words dropped to keep the counts bounded ([`MAX_WORDS`]).
    dropped: usize,
}

/// The most distinct words counted at once: past it, the rarest are dropped (about 100 bytes
/// each here, and several times that in training), so that a corpus of any number of distinct
/// words (random strings, identifiers) trains in bounded memory. Natural text stays far below.
pub const MAX_WORDS: usize = 1 << 20;

impl WordCounts {
    pub fn new(normalizer: BertNormalizer) -> Self {
        Self {
            counts: AHashMap::new(),
            normalizer,
            dropped: 0,
        }
    }

    /// Counts the words of `texts` on all cores. The texts' white-space-separated chunks are
    /// counted first, and each distinct chunk is normalised once: a chunk's words are those
    /// the whole text has there ([`super::chunk_memo`]).
    pub fn add(&mut self, texts: &[String]) -> Result<()> {
        let normalizer = &self.normalizer;
        let chunks: Vec<(&str, u64)> = texts
            .par_iter()
            .fold(AHashMap::<&str, u64>::new, |mut counts, text| {
                for chunk in super::chunk_memo::chunks(text) {
                    *counts.entry(chunk).or_default() += 1;
                }
                counts
            })
            .reduce(AHashMap::new, merge_counts)
            .into_iter()
            .collect();
        let batch = chunks
            .par_iter()
            .try_fold(AHashMap::<String, u64>::new, |mut counts, &(chunk, n)| {
                each_word(chunk, normalizer, |w| match counts.get_mut(w) {
                    Some(c) => *c += n,
                    None if !w.is_empty() => drop(counts.insert(w.to_string(), n)),
                    None => {}
                })?;
                Ok::<_, Error>(counts)
            })
            .try_reduce(AHashMap::new, |a, b| Ok(merge_counts(a, b)))?;
        self.counts = merge_counts(std::mem::take(&mut self.counts), batch);
        if self.counts.len() > MAX_WORDS {
            self.drop_rarest();
        }
        Ok(())
    }

    /// Drops the words of the lowest counts until at most three quarters of [`MAX_WORDS`]
    /// are left, and says so once.
    fn drop_rarest(&mut self) {
        let mut per_count = std::collections::BTreeMap::<u64, usize>::new();
        for &c in self.counts.values() {
            *per_count.entry(c).or_default() += 1;
        }
        let (mut left, mut below) = (self.counts.len(), 0);
        for (&c, &n) in &per_count {
            if left <= MAX_WORDS * 3 / 4 {
                break;
            }
            left -= n;
            below = c;
        }
        let before = self.counts.len();
        self.counts.retain(|_, c| *c > below);
        if self.dropped == 0 {
            tracing::warn!(
                "vocabulary training: over {MAX_WORDS} distinct words; the rarest (counts up to {below} so far) are dropped to keep memory bounded"
            );
        }
        self.dropped += before - self.counts.len();
    }

    /// How many distinct words were dropped to keep the counts bounded.
    pub fn dropped(&self) -> usize {
        self.dropped
    }

    /// (word, count) sorted by word.
    pub fn sorted(self) -> Vec<(String, u64)> {
        let mut words: Vec<(String, u64)> = self.counts.into_iter().collect();
        words.sort_unstable();
        words
    }
}

/// Calls `f` on each word of `text` after BERT's uncased normalisation and pre-tokenisation:
/// by the byte rules where `text` is ASCII ([`AsciiChunk`]), else through `tokenizers`.
fn each_word(text: &str, normalizer: &BertNormalizer, mut f: impl FnMut(&str)) -> Result<()> {
    if AsciiChunk::for_bert(normalizer).words(text, &mut f) {
        return Ok(());
    }
    let mut s = PreTokenizedString::from(text);
    s.normalize(|n| normalizer.normalize(n))
        .and_then(|()| BertPreTokenizer.pre_tokenize(&mut s))
        .map_err(|e| Error::Input(format!("training the vocabulary: {e}")))?;
    for (w, _, _) in s.get_splits(OffsetReferential::Original, OffsetType::Byte) {
        f(w);
    }
    Ok(())
}

fn merge_counts<K: Eq + std::hash::Hash>(
    mut a: AHashMap<K, u64>,
    b: AHashMap<K, u64>,
) -> AHashMap<K, u64> {
    for (w, c) in b {
        *a.entry(w).or_default() += c;
    }
    a
}

/// Pair counts of one word's symbols.
fn pairs_of(symbols: &[u32]) -> impl Iterator<Item = Pair> + '_ {
    symbols.windows(2).map(|w| (w[0], w[1]))
}

/// Trains a vocabulary of at most `vocab_size` tokens: `special` first, then every character
/// of the corpus (and its `##` form where it continues a word), then the merged pieces in merge
/// order. Returns the tokens in id order.
pub fn train_wordpiece(
    words: &[(String, u64)],
    special: &[&str],
    vocab_size: usize,
    min_frequency: u64,
) -> Vec<String> {
    let mut tokens: Vec<String> = special.iter().map(|s| s.to_string()).collect();
    let mut ids: HashMap<String, u32> = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), i as u32))
        .collect();
    let mut add = |t: String, tokens: &mut Vec<String>| -> u32 {
        *ids.entry(t.clone()).or_insert_with(|| {
            tokens.push(t);
            tokens.len() as u32 - 1
        })
    };
    let mut alphabet: Vec<char> = words
        .iter()
        .flat_map(|(w, _)| w.chars())
        .collect::<HashSet<char>>()
        .into_iter()
        .collect();
    alphabet.sort_unstable();
    for c in alphabet {
        add(c.to_string(), &mut tokens);
    }
    let mut symbols: Vec<Vec<u32>> = words
        .iter()
        .map(|(w, _)| {
            w.chars()
                .enumerate()
                .map(|(i, c)| {
                    let piece = if i == 0 {
                        c.to_string()
                    } else {
                        format!("{CONTINUATION}{c}")
                    };
                    add(piece, &mut tokens)
                })
                .collect()
        })
        .collect();
    let counts: Vec<i64> = words.iter().map(|(_, c)| *c as i64).collect();

    let mut pair_counts: HashMap<Pair, i64> = HashMap::new();
    let mut where_: HashMap<Pair, HashSet<usize>> = HashMap::new();
    for (i, s) in symbols.iter().enumerate() {
        for p in pairs_of(s) {
            *pair_counts.entry(p).or_default() += counts[i];
            where_.entry(p).or_default().insert(i);
        }
    }
    // Most frequent first; among equals the smaller pair of ids.
    let mut queue: BinaryHeap<(i64, Reverse<Pair>)> =
        pair_counts.iter().map(|(p, c)| (*c, Reverse(*p))).collect();
    while tokens.len() < vocab_size {
        let Some((count, Reverse(pair))) = queue.pop() else {
            break;
        };
        let current = pair_counts.get(&pair).copied().unwrap_or(0);
        if count != current {
            if current > 0 {
                queue.push((current, Reverse(pair)));
            }
            continue;
        }
        if count < 1 || (count as u64) < min_frequency {
            break;
        }
        let b = tokens[pair.1 as usize]
            .strip_prefix(CONTINUATION)
            .unwrap_or(&tokens[pair.1 as usize]);
        let merged = format!("{}{b}", tokens[pair.0 as usize]);
        let new = add(merged, &mut tokens);
        let mut touched: Vec<usize> = where_
            .remove(&pair)
            .unwrap_or_default()
            .into_iter()
            .collect();
        touched.sort_unstable();
        let mut changed: HashSet<Pair> = HashSet::new();
        for w in touched {
            let old = &symbols[w];
            let next = merge_pair(old, pair, new);
            if next.len() == old.len() {
                continue;
            }
            for p in pairs_of(old) {
                *pair_counts.get_mut(&p).expect("counted pair") -= counts[w];
                changed.insert(p);
            }
            for p in pairs_of(&next) {
                *pair_counts.entry(p).or_default() += counts[w];
                where_.entry(p).or_default().insert(w);
                changed.insert(p);
            }
            symbols[w] = next;
        }
        pair_counts.remove(&pair);
        requeue(changed, &mut pair_counts, &mut where_, &mut queue);
    }
    tokens
}

/// `symbols` with each occurrence of `pair` replaced by `new`, left to right.
fn merge_pair(symbols: &[u32], pair: Pair, new: u32) -> Vec<u32> {
    let mut next = Vec::with_capacity(symbols.len());
    let mut i = 0;
    while i < symbols.len() {
        if i + 1 < symbols.len() && (symbols[i], symbols[i + 1]) == pair {
            next.push(new);
            i += 2;
        } else {
            next.push(symbols[i]);
            i += 1;
        }
    }
    next
}

/// Puts the pairs whose count changed back in the queue (in pair order, for determinism) and
/// forgets those that no longer occur.
fn requeue(
    changed: HashSet<Pair>,
    pair_counts: &mut HashMap<Pair, i64>,
    where_: &mut HashMap<Pair, HashSet<usize>>,
    queue: &mut BinaryHeap<(i64, Reverse<Pair>)>,
) {
    let mut changed: Vec<Pair> = changed.into_iter().collect();
    changed.sort_unstable();
    for p in changed {
        match pair_counts.get(&p).copied() {
            Some(c) if c > 0 => queue.push((c, Reverse(p))),
            _ => {
                pair_counts.remove(&p);
                where_.remove(&p);
            }
        }
    }
}
