//! `SynonymTable`: token id → sorted synonym token ids, projected onto one tokenizer's
//! vocabulary, symmetric, whole-word tokens only. Stored as safetensors (CSR: `offsets`,
//! `ids`, u32) with the tokenizer fingerprint in the metadata; loads in O(vocab + entries).

use crate::io::PathQuery;
use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use safetensors::{Dtype, SafeTensors, tensor::TensorView};
use serde::Serialize;

use super::tokenizer::WordPieceTokenizer;
use crate::{Error, Result};

/// The file of a checkpoint that holds the synonym table its run trained with at that step,
/// where the run rebuilds its table as it trains (`objective.hc_source = "self"`).
pub const IN_CHECKPOINT: &str = "synonyms.safetensors";

#[derive(Clone, Debug, PartialEq)]
pub struct SynonymTable {
    pub fingerprint: String,
    /// Where the synonyms came from (`wordnet:/usr/share/wordnet`, `embeddings:file`, …).
    pub source: String,
    offsets: Vec<u32>,
    ids: Vec<u32>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Coverage {
    pub vocab_size: usize,
    pub whole_words: usize,
    pub with_synonyms: usize,
    pub mean_list_length: f64,
}

/// Whole-word, alphabetic vocabulary tokens (no `##` pieces, no `[SPECIAL]`), lower-cased,
/// with their ids: the tokens a synonym table is defined on.
pub fn whole_words(tokenizer: &WordPieceTokenizer) -> Vec<(String, u32)> {
    let mut v: Vec<(String, u32)> = tokenizer
        .inner
        .get_vocab(true)
        .into_iter()
        .filter(|(t, _)| {
            !t.starts_with("##") && !t.starts_with('[') && t.chars().all(char::is_alphabetic)
        })
        .collect();
    v.sort_by_key(|(_, id)| *id);
    v
}

impl SynonymTable {
    /// Builds a table from `synonyms(word)` (lower case words) over the tokenizer's whole-word
    /// tokens; every case variant of a synonym in the vocabulary counts. Made symmetric.
    pub fn build(
        tokenizer: &WordPieceTokenizer,
        source: &str,
        synonyms: impl Fn(&str) -> BTreeSet<String> + Sync,
    ) -> Self {
        use rayon::prelude::*;
        let vocab = tokenizer.vocab_size();
        let words = whole_words(tokenizer);
        let mut by_lower: HashMap<String, Vec<u32>> = HashMap::new();
        for (t, id) in &words {
            by_lower.entry(t.to_lowercase()).or_default().push(*id);
        }
        let pairs: Vec<(u32, u32)> = words
            .par_iter()
            .flat_map_iter(|(t, id)| {
                let syn = synonyms(&t.to_lowercase());
                let mut out = Vec::new();
                for s in syn {
                    for &other in by_lower.get(&s).map(Vec::as_slice).unwrap_or(&[]) {
                        if other != *id {
                            out.push((*id, other));
                        }
                    }
                }
                out
            })
            .collect();
        Self::from_pairs(vocab, tokenizer.fingerprint(), source.to_string(), pairs)
    }

    /// A table from (a, b) pairs; each pair is added both ways.
    pub fn from_pairs(
        vocab: usize,
        fingerprint: String,
        source: String,
        pairs: Vec<(u32, u32)>,
    ) -> Self {
        let mut lists: Vec<BTreeSet<u32>> = vec![BTreeSet::new(); vocab];
        for (a, b) in pairs {
            if (a as usize) < vocab && (b as usize) < vocab && a != b {
                lists[a as usize].insert(b);
                lists[b as usize].insert(a);
            }
        }
        let mut offsets = Vec::with_capacity(vocab + 1);
        let mut ids = Vec::new();
        offsets.push(0);
        for l in lists {
            ids.extend(l);
            offsets.push(ids.len() as u32);
        }
        Self {
            fingerprint,
            source,
            offsets,
            ids,
        }
    }

    pub fn vocab_size(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Synonyms of token `id`, sorted.
    pub fn synonyms(&self, id: u32) -> &[u32] {
        let i = id as usize;
        if i + 1 >= self.offsets.len() {
            return &[];
        }
        &self.ids[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    /// Its entries: every (token, synonym) pair, each direction counted.
    pub fn entries(&self) -> usize {
        self.ids.len()
    }

    /// True when `a` and `b` are different tokens and synonyms.
    pub fn are_synonyms(&self, a: u32, b: u32) -> bool {
        a != b && self.synonyms(a).binary_search(&b).is_ok()
    }

    pub fn coverage(&self, whole_words: usize) -> Coverage {
        let with = (0..self.vocab_size())
            .filter(|&i| !self.synonyms(i as u32).is_empty())
            .count();
        Coverage {
            vocab_size: self.vocab_size(),
            whole_words,
            with_synonyms: with,
            mean_list_length: if with == 0 {
                0.0
            } else {
                self.ids.len() as f64 / with as f64
            },
        }
    }

    /// Writes the table atomically; refuses to overwrite an existing file.
    pub fn save(&self, path: &Path) -> Result<()> {
        if path.is_present() {
            return Err(Error::Input(format!(
                "{}: already exists; choose another --out (nothing was changed)",
                path.display()
            )));
        }
        let o: Vec<u8> = self.offsets.iter().flat_map(|v| v.to_le_bytes()).collect();
        let i: Vec<u8> = self.ids.iter().flat_map(|v| v.to_le_bytes()).collect();
        let views = vec![
            (
                "offsets",
                TensorView::new(Dtype::U32, vec![self.offsets.len()], &o).expect("view"),
            ),
            (
                "ids",
                TensorView::new(Dtype::U32, vec![self.ids.len()], &i).expect("view"),
            ),
        ];
        let meta = HashMap::from([
            ("fingerprint".to_string(), self.fingerprint.clone()),
            ("source".to_string(), self.source.clone()),
            ("format".to_string(), "trueneg-synonyms-1".to_string()),
        ]);
        let bytes = safetensors::serialize(views, Some(meta))
            .map_err(|e| Error::Input(format!("{}: {e}", path.display())))?;
        crate::io::write_atomic(path, &crate::io::tensor_file::finish_for_writing(bytes))
    }

    pub fn load(path: &Path) -> Result<Self> {
        let bytes = crate::io::read::read(path, crate::io::limit::DATA)?;
        let bad =
            |why: String| Error::Input(format!("{}: not a synonym table ({why})", path.display()));
        let (_, meta) = SafeTensors::read_metadata(&bytes).map_err(|e| bad(e.to_string()))?;
        let st = SafeTensors::deserialize(&bytes).map_err(|e| bad(e.to_string()))?;
        let md = safetensors::tensor::Metadata::metadata(&meta)
            .clone()
            .unwrap_or_default();
        let u32s = |name: &str| -> Result<Vec<u32>> {
            let t = st.tensor(name).map_err(|e| bad(e.to_string()))?;
            if t.dtype() != Dtype::U32 {
                return Err(bad(format!("`{name}` is not u32")));
            }
            Ok(t.data()
                .chunks_exact(4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect())
        };
        let offsets = u32s("offsets")?;
        let ids = u32s("ids")?;
        if offsets.is_empty() || *offsets.last().unwrap() as usize != ids.len() {
            return Err(bad("offsets do not match ids".into()));
        }
        // Damaged bytes would index past the lists or the vocabulary ~100 steps into training:
        // every list must start where the previous one ends, every id be a token.
        if offsets[0] != 0 {
            return Err(bad(format!("offsets start at {}, not 0", offsets[0])));
        }
        if let Some(t) = offsets.windows(2).position(|w| w[1] < w[0]) {
            return Err(bad(format!(
                "offsets decrease at token {t} ({} > {})",
                offsets[t],
                offsets[t + 1]
            )));
        }
        let vocab = offsets.len() - 1;
        if let Some(&id) = ids.iter().find(|&&id| id as usize >= vocab) {
            return Err(bad(format!(
                "synonym id {id}, the table covers {vocab} tokens"
            )));
        }
        Ok(Self {
            fingerprint: md.get("fingerprint").cloned().unwrap_or_default(),
            source: md.get("source").cloned().unwrap_or_default(),
            offsets,
            ids,
        })
    }

    /// Loads a table and checks it was built for `tokenizer`.
    pub fn load_for(path: &Path, tokenizer_fingerprint: &str) -> Result<Self> {
        let t = Self::load(path)?;
        if t.fingerprint != tokenizer_fingerprint {
            return Err(Error::Input(format!(
                "{}: built for another tokenizer (fingerprint {}…, the run's is {}…); rebuild it with `trueneg lexicon build`",
                path.display(),
                &t.fingerprint.get(..12).unwrap_or(""),
                &tokenizer_fingerprint.get(..12).unwrap_or("")
            )));
        }
        Ok(t)
    }
}

/// The WordNet synonym table of a tokenizer.
pub fn wordnet_table(tokenizer: &WordPieceTokenizer, wordnet_dir: &Path) -> Result<SynonymTable> {
    let wn = crate::lexicon::WordNet::open(wordnet_dir)?;
    Ok(wordnet_table_from(tokenizer, &wn, wordnet_dir))
}

/// The synonym table of a tokenizer from `wn`, opened from `wordnet_dir` (its source).
pub fn wordnet_table_from(
    tokenizer: &WordPieceTokenizer,
    wn: &crate::lexicon::WordNet,
    wordnet_dir: &Path,
) -> SynonymTable {
    SynonymTable::build(
        tokenizer,
        &format!("wordnet:{}", wordnet_dir.display()),
        |w| wn.synonyms(w),
    )
}

/// The top-k embedding-neighbour table of a tokenizer from word vectors.
pub fn embedding_table(
    tokenizer: &WordPieceTokenizer,
    vectors: &crate::lexicon::embeddings::WordVectors,
    k: usize,
    source: &str,
) -> crate::Result<SynonymTable> {
    let map = crate::lexicon::embeddings::neighbour_map(vectors, k, &crate::device::host())?;
    Ok(SynonymTable::build(tokenizer, source, |w| {
        map.get(w)
            .map(|v| v.iter().cloned().collect())
            .unwrap_or_default()
    }))
}
