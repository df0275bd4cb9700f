//! Sentence triples (the rules of Wang et al., ACL 2021): from a sentence x_ori, a sentence of the
//! same meaning x_syn and one of changed meaning x_ant, with per-WordPiece labels for the
//! replaced-token detection.
//!
//! **Candidates.** Words of the sentence ([`crate::lexicon::words::tokens`]) that are
//! alphabetic, three letters or longer, not stop words, not names or numbers
//! ([`is_name_or_number`]: capitalised inside a sentence, WordNet-only names such as
//! "California", runs of capitalised words, all-capitals words, number words), and that WordNet
//! knows as a noun, verb, adjective or adverb. Without a tagger the part of speech is the word's
//! dominant one in WordNet (most synsets over its lemmas).
//!
//! **x_syn.** Each chosen candidate becomes, at random, one of: a WordNet synonym of a
//! common-word synset of that part of speech, a single-word lemma of a direct hypernym, or
//! another inflection of the same lemma; synonyms and hypernyms are inflected like the word
//! (WordNet's exception lists, then the spelling rules). Multi-word lemmas are skipped.
//!
//! **x_ant.** Each chosen candidate becomes a WordNet antonym of one of its lemmas (the `!`
//! pointers); with `co_synonym_antonyms` (the authors' code) also an antonym of one of its
//! synonyms. A candidate without one becomes a random vocabulary word of the same part of
//! speech, inflected like the word ([`WordNet::inflect_as`]).
//!
//! **How many.** `syn_ratio` and `ant_ratio` of the sentence's words (the paper: about 40 % and
//! 20 %), at most `cap` of the candidates (the code: 50 %; 1 = no cap), at least one when the
//! sentence has a candidate.
//!
//! **Labels** (per WordPiece, every piece of a word the same): 0 a candidate left as it was,
//! 1 replaced in x_syn, 2 replaced in x_ant, [`IGNORE`] elsewhere. x_ori's pieces are those
//! of x_syn's and x_ant's labelled words where they were not replaced.
//!
//! Every draw comes from a generator seeded by (seed, sentence index): the same seed gives the
//! same examples, whatever the thread count.

use rand::SeedableRng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::tokenizer::WordPieceTokenizer;
use crate::lexicon::wordnet::WordNet;
use crate::lexicon::words::{
    apply_edits, in_compound, is_name_or_number, is_stop, match_case, tokens,
};

/// The label of a piece the detection loss ignores.
pub const IGNORE: i32 = -100;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TripleConfig {
    /// Share of a sentence's words replaced in x_syn (paper: 0.4).
    pub syn_ratio: f64,
    /// Share of a sentence's words replaced in x_ant (paper: 0.2).
    pub ant_ratio: f64,
    /// At most this share of the candidates is replaced (the authors' code: 0.5; 1 = no cap).
    pub cap: f64,
    /// Also take antonyms of the word's synonyms (the authors' code).
    pub co_synonym_antonyms: bool,
}

impl Default for TripleConfig {
    fn default() -> Self {
        Self {
            syn_ratio: 0.4,
            ant_ratio: 0.2,
            cap: 1.0,
            co_synonym_antonyms: false,
        }
    }
}

/// How a word of x_syn was replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SynKind {
    Synonym,
    Hypernym,
    Inflection,
}

/// How a word of x_ant was replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AntKind {
    Antonym,
    Random,
}

/// One replaced word: its byte range in x_ori and its new text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Replacement<K> {
    pub start: usize,
    pub end: usize,
    pub new: String,
    pub kind: K,
}

/// The three sentences of one example, as text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TripleExample {
    pub ori: String,
    pub syn: String,
    pub ant: String,
    /// Byte ranges in `ori` of every candidate word.
    pub candidates: Vec<(usize, usize)>,
    pub syn_replaced: Vec<Replacement<SynKind>>,
    pub ant_replaced: Vec<Replacement<AntKind>>,
}

/// x_syn or x_ant as WordPiece ids with their detection labels.
#[derive(Clone, Debug, PartialEq)]
pub struct LabeledPieces {
    pub ids: Vec<u32>,
    pub labels: Vec<i32>,
    /// For each piece, the index of its word in x_ori ([`tokens`] order): the three sentences
    /// are cut at the same word.
    pub words: Vec<usize>,
}

impl LabeledPieces {
    /// The pieces of the words before word `n`.
    pub fn first_words(&self, n: usize) -> LabeledPieces {
        let k = self.words.partition_point(|&w| w < n);
        LabeledPieces {
            ids: self.ids[..k].to_vec(),
            labels: self.labels[..k].to_vec(),
            words: self.words[..k].to_vec(),
        }
    }
}

/// Makes sentence triples with one WordNet and one vocabulary.
pub struct TripleGenerator<'a> {
    pub wn: &'a WordNet,
    pub config: TripleConfig,
    /// Whole-word vocabulary entries per part of speech (noun, verb, adj, adv): x_ant's
    /// random replacements.
    by_pos: [Vec<String>; 4],
}

impl<'a> TripleGenerator<'a> {
    /// `vocabulary`: the words random replacements are drawn from (a tokenizer's whole-word
    /// tokens); each is filed under its dominant part of speech.
    pub fn new(wn: &'a WordNet, config: TripleConfig, vocabulary: &[String]) -> Self {
        let mut by_pos: [Vec<String>; 4] = Default::default();
        for w in vocabulary {
            if w.chars().count() > 2
                && w.chars().all(|c| c.is_ascii_lowercase())
                && !is_stop(w)
                && let Some((p, lemma, _)) = wn.dominant_pos(w)
                && lemma == *w
                && !wn.is_proper(w)
            {
                by_pos[p].push(w.clone());
            }
        }
        for v in &mut by_pos {
            v.sort();
            v.dedup();
        }
        Self { wn, config, by_pos }
    }

    /// The words of a tokenizer's vocabulary (no `##` pieces, no special tokens).
    pub fn vocabulary_of(tokenizer: &WordPieceTokenizer) -> Vec<String> {
        let mut v: Vec<String> = tokenizer
            .inner
            .get_vocab(false)
            .into_keys()
            .filter(|t| !t.starts_with("##") && !t.starts_with('['))
            .collect();
        v.sort();
        v
    }

    fn syn_options(&self, word: &str) -> Vec<(String, SynKind)> {
        let keep_case = |w: &str| match_case(word, w);
        let mut out: Vec<(String, SynKind)> = Vec::new();
        for s in self.wn.same_pos_synonyms(word) {
            out.push((keep_case(&s), SynKind::Synonym));
        }
        for h in self.wn.hypernyms(word) {
            out.push((keep_case(&h), SynKind::Hypernym));
        }
        for i in self.wn.other_inflections(word) {
            out.push((keep_case(&i), SynKind::Inflection));
        }
        let lower = word.to_lowercase();
        out.retain(|(w, _)| w.to_lowercase() != lower && w.chars().all(char::is_alphabetic));
        out
    }

    /// How many of `words` words (with `candidates` candidates) one side replaces.
    fn count(&self, ratio: f64, words: usize, candidates: usize) -> usize {
        if candidates == 0 {
            return 0;
        }
        let n = (ratio * words as f64).round() as usize;
        let cap = (self.config.cap * candidates as f64).floor() as usize;
        n.min(cap).clamp(1, candidates)
    }

    /// The example for sentence number `index` of a corpus, with `seed`.
    pub fn example(&self, text: &str, seed: u64, index: u64) -> TripleExample {
        let mut rng = ChaCha8Rng::seed_from_u64(seed.wrapping_mul(0xA076_1D64_78BD_642F) ^ index);
        let toks = tokens(text);
        let words = toks.iter().filter(|t| t.2).count();
        let candidates: Vec<usize> = (0..toks.len())
            .filter(|&i| {
                let (a, b, is_word) = toks[i];
                let w = &text[a..b];
                is_word
                    && w.chars().count() > 2
                    && w.chars().all(char::is_alphabetic)
                    && !is_stop(w)
                    && !is_name_or_number(text, &toks, i, self.wn)
                    && !in_compound(text, a, b)
                    // A lower-cased name ("hitchcock" in SST-2's lower-cased text).
                    && self
                        .wn
                        .dominant_pos(w)
                        .is_some_and(|(_, lemma, _)| !self.wn.is_proper(&lemma))
            })
            .collect();

        // x_syn: among the candidates that have a same-meaning replacement.
        let mut with_syn: Vec<(usize, Vec<(String, SynKind)>)> = candidates
            .iter()
            .map(|&i| (i, self.syn_options(&text[toks[i].0..toks[i].1])))
            .filter(|(_, o)| !o.is_empty())
            .collect();
        with_syn.shuffle(&mut rng);
        with_syn.truncate(self.count(self.config.syn_ratio, words, candidates.len()));
        let mut syn_replaced: Vec<Replacement<SynKind>> = with_syn
            .into_iter()
            .map(|(i, options)| {
                let (new, kind) = options.choose(&mut rng).expect("non-empty").clone();
                Replacement {
                    start: toks[i].0,
                    end: toks[i].1,
                    new,
                    kind,
                }
            })
            .collect();
        syn_replaced.sort_by_key(|r| r.start);

        // x_ant: any candidate; an antonym, else a random word of the same part of speech.
        let mut chosen = candidates.clone();
        chosen.shuffle(&mut rng);
        chosen.truncate(self.count(self.config.ant_ratio, words, candidates.len()));
        let mut ant_replaced: Vec<Replacement<AntKind>> = chosen
            .into_iter()
            .filter_map(|i| {
                let w = &text[toks[i].0..toks[i].1];
                let ants = self
                    .wn
                    .same_pos_antonyms(w, self.config.co_synonym_antonyms);
                let (new, kind) = if let Some(a) = ants.choose(&mut rng) {
                    (a.clone(), AntKind::Antonym)
                } else {
                    let (p, _, _) = self.wn.dominant_pos(w)?;
                    let pool: Vec<&String> = self.by_pos[p]
                        .iter()
                        .filter(|v| **v != w.to_lowercase())
                        .collect();
                    let lemma = *pool.choose(&mut rng)?;
                    (self.wn.inflect_as(w, lemma), AntKind::Random)
                };
                Some(Replacement {
                    start: toks[i].0,
                    end: toks[i].1,
                    new: match_case(w, &new),
                    kind,
                })
            })
            .collect();
        ant_replaced.sort_by_key(|r| r.start);
        TripleExample {
            ori: text.to_string(),
            syn: apply_edits(
                text,
                syn_replaced
                    .iter()
                    .map(|r| (r.start, r.end, r.new.as_str())),
            ),
            ant: apply_edits(
                text,
                ant_replaced
                    .iter()
                    .map(|r| (r.start, r.end, r.new.as_str())),
            ),
            candidates: candidates.iter().map(|&i| (toks[i].0, toks[i].1)).collect(),
            syn_replaced,
            ant_replaced,
        }
    }

    /// x_syn (`label` 1) or x_ant (`label` 2) of an example as WordPiece ids with labels:
    /// every piece of a replaced word `label`, of a kept candidate 0, [`IGNORE`] elsewhere.
    pub fn pieces<K>(
        tokenizer: &WordPieceTokenizer,
        ori: &str,
        candidates: &[(usize, usize)],
        replaced: &[Replacement<K>],
        label: i32,
    ) -> LabeledPieces {
        let mut ids = Vec::new();
        let mut labels = Vec::new();
        let mut words = Vec::new();
        for (w, (a, b, _)) in tokens(ori).into_iter().enumerate() {
            let (text, l) = match replaced.iter().find(|r| r.start == a) {
                Some(r) => (r.new.as_str(), label),
                None if candidates.contains(&(a, b)) => (&ori[a..b], 0),
                None => (&ori[a..b], IGNORE),
            };
            for id in tokenizer.encode_text(text) {
                ids.push(id);
                labels.push(l);
                words.push(w);
            }
        }
        LabeledPieces { ids, labels, words }
    }
}
