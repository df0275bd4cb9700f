//! WordPiece tokenizers through the `tokenizers` crate: a `tokenizer.json`, a BERT `vocab.txt`
//! (uncased BERT normalisation), or a vocabulary trained on the corpus.

use std::path::Path;

use sha2::{Digest, Sha256};
use tokenizers::models::wordpiece::WordPiece;
use tokenizers::normalizers::BertNormalizer;
use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
use tokenizers::processors::bert::BertProcessing;
use tokenizers::{AddedToken, Model, Tokenizer};

use super::ascii_chunk::AsciiChunk;
use super::chunk_memo::ChunkMemo;
use super::vocab::WordCounts;
use crate::{Error, Result};

/// The special tokens every BERT-style vocabulary has.
pub const SPECIAL_TOKENS: [&str; 5] = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];

/// Ids of the special tokens in a vocabulary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SpecialIds {
    pub pad: u32,
    pub unk: u32,
    pub cls: u32,
    pub sep: u32,
    pub mask: u32,
}

pub struct WordPieceTokenizer {
    pub inner: Tokenizer,
    pub special: SpecialIds,
    /// `inner` reading special-token strings as text ([`encode_text`](Self::encode_text)).
    as_text: Tokenizer,
    /// `as_text`'s ids of corpus chunks, where its ids are those of its chunks.
    chunks: Option<ChunkMemo>,
    /// Where `chunks` is: the pipeline's rules on an ASCII chunk's bytes.
    ascii: Option<AsciiChunk>,
}

fn tok_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Input(format!("{}: {e}", path.display()))
}

/// BERT's uncased normalisation (clean text, Chinese characters spaced, accents stripped,
/// lower case).
fn uncased() -> BertNormalizer {
    BertNormalizer::new(true, true, None, true)
}

fn bert_pipeline(model: WordPiece) -> Tokenizer {
    let mut t = Tokenizer::new(model);
    t.with_normalizer(Some(uncased()));
    t.with_pre_tokenizer(Some(BertPreTokenizer));
    t
}

impl WordPieceTokenizer {
    /// Loads `tokenizer.json` (any file ending in `.json`) or a WordPiece `vocab.txt`.
    pub fn load(path: &Path) -> Result<Self> {
        if !crate::io::read::exists(path) {
            return Err(Error::missing(path, "tokenizer file not found"));
        }
        let bytes = crate::io::read::read(path, crate::io::limit::TOKENIZER)?;
        let inner = if path.extension().is_some_and(|e| e == "json") {
            Tokenizer::from_bytes(&bytes).map_err(|e| tok_err(path, e))?
        } else {
            check_vocab_lines(path, &bytes)?;
            let vocab = WordPiece::read_bytes(&bytes).map_err(|e| tok_err(path, e))?;
            let wp = WordPiece::builder()
                .vocab(vocab)
                .build()
                .map_err(|e| tok_err(path, e))?;
            bert_pipeline(wp)
        };
        Self::from_tokenizer(inner, path)
    }

    /// Loads `path` and checks that it is the tokenizer whose fingerprint `expected` was
    /// recorded in `record` (a checkpoint's state, a fine-tuned model's `finetuned.json`): ids
    /// mean nothing with another vocabulary, even one of the same size.
    pub fn load_checked(path: &Path, expected: &str, record: &Path) -> Result<Self> {
        let t = Self::load(path)?;
        let found = t.fingerprint();
        if found != expected {
            return Err(Error::Input(format!(
                "{}: not the tokenizer {} records (fingerprint {}, recorded {}); put the original back",
                path.display(),
                record.display(),
                &found[..12.min(found.len())],
                &expected[..12.min(expected.len())]
            )));
        }
        Ok(t)
    }

    fn from_tokenizer(mut inner: Tokenizer, source: &Path) -> Result<Self> {
        // Ids must be 0..n: an id past the vocabulary's size would index past the embeddings.
        let vocab = inner.get_vocab(true);
        if let Some((tok, id)) = vocab.iter().find(|(_, id)| **id as usize >= vocab.len()) {
            return Err(Error::Input(format!(
                "{}: token `{tok}` has id {id} but the vocabulary has {} tokens (ids must be 0..{}, each once)",
                source.display(),
                vocab.len(),
                vocab.len()
            )));
        }
        let model = inner.get_model();
        let id = |tok: &str| {
            let id = inner.token_to_id(tok).ok_or_else(|| {
                Error::Input(format!(
                    "{}: vocabulary has no `{tok}` token",
                    source.display()
                ))
            })?;
            // An added token's id must not be another entry of the WordPiece vocabulary (nor
            // differ from the vocabulary's own id for it): text would then share its id.
            let clash = match (model.id_to_token(id), model.token_to_id(tok)) {
                (Some(other), _) if other != tok => Some(format!(
                    "the WordPiece vocabulary gives id {id} to `{}`",
                    crate::io::short(&other)
                )),
                (_, Some(own)) if own != id => {
                    Some(format!("the WordPiece vocabulary has it at id {own}"))
                }
                _ => None,
            };
            match clash {
                Some(why) => Err(Error::Input(format!(
                    "{}: `{tok}` has id {id} but {why}; a special token needs one id of its own",
                    source.display()
                ))),
                None => Ok(id),
            }
        };
        let special = SpecialIds {
            pad: id("[PAD]")?,
            unk: id("[UNK]")?,
            cls: id("[CLS]")?,
            sep: id("[SEP]")?,
            mask: id("[MASK]")?,
        };
        inner.with_post_processor(Some(BertProcessing::new(
            ("[SEP]".into(), special.sep),
            ("[CLS]".into(), special.cls),
        )));
        let mut as_text = inner.clone();
        as_text.set_encode_special_tokens(true);
        let chunks = ChunkMemo::for_pipeline(&as_text);
        let ascii = chunks
            .as_ref()
            .and_then(|_| AsciiChunk::for_normaliser(as_text.get_normalizer()));
        Ok(Self {
            inner,
            special,
            as_text,
            chunks,
            ascii,
        })
    }

    /// Trains an uncased WordPiece vocabulary of `vocab_size` on `texts` (deterministic: see
    /// [`super::vocab`]).
    pub fn train(texts: &[String], vocab_size: usize) -> Result<Self> {
        let mut counts = Self::word_counts();
        counts.add(texts)?;
        Self::train_on(counts, vocab_size)
    }

    /// Empty word counts under this tokenizer family's normalisation (BERT uncased), to fill a
    /// batch of texts at a time and train on with [`train_on`](Self::train_on).
    pub fn word_counts() -> WordCounts {
        WordCounts::new(uncased())
    }

    /// Trains an uncased WordPiece vocabulary of `vocab_size` on counted words.
    pub fn train_on(counts: WordCounts, vocab_size: usize) -> Result<Self> {
        Self::from_word_counts(&counts.sorted(), vocab_size)
    }

    /// The tokenizer of the vocabulary trained on `words` (word, count).
    fn from_word_counts(words: &[(String, u64)], vocab_size: usize) -> Result<Self> {
        let tokens = super::vocab::train_wordpiece(words, &SPECIAL_TOKENS, vocab_size, 2);
        let vocab: ahash::AHashMap<String, u32> = tokens
            .into_iter()
            .enumerate()
            .map(|(i, t)| (t, i as u32))
            .collect();
        let model = WordPiece::builder()
            .vocab(vocab)
            .unk_token("[UNK]".into())
            .continuing_subword_prefix(super::vocab::CONTINUATION.into())
            .build()
            .map_err(|e| Error::Input(format!("training the vocabulary: {e}")))?;
        let mut t = bert_pipeline(model);
        t.add_special_tokens(
            &SPECIAL_TOKENS
                .iter()
                .map(|s| AddedToken::from(*s, true))
                .collect::<Vec<_>>(),
        );
        Self::from_tokenizer(t, Path::new("<trained vocabulary>"))
    }

    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// Token ids without special tokens.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        ids(&self.inner, text)
    }

    /// As [`encode`](Self::encode), for raw corpus text: a special token's string written in
    /// the text (`[MASK]`, `[CLS]`, …) is text, tokenised as the words and punctuation it is
    /// made of, never a special id in the middle of a sequence. (Task inputs keep transformers'
    /// reading through [`encode`](Self::encode).) A BERT pipeline's ids are those of the
    /// text's white-space-separated chunks, each tokenised once per thread ([`ChunkMemo`]).
    pub fn encode_text(&self, text: &str) -> Vec<u32> {
        match &self.chunks {
            Some(memo) => memo.ids(text, |chunk| self.chunk_ids(chunk)),
            None => ids(&self.as_text, text),
        }
    }

    /// One chunk's ids: by the byte rules where it is ASCII, else through the pipeline.
    fn chunk_ids(&self, chunk: &str) -> Vec<u32> {
        self.ascii
            .and_then(|a| a.ids(chunk, self.as_text.get_model()))
            .unwrap_or_else(|| ids(&self.as_text, chunk))
    }

    /// Whether [`encode_text`](Self::encode_text) reads a chunk at a time.
    pub fn reads_in_chunks(&self) -> bool {
        self.chunks.is_some()
    }

    /// How many of this tokenizer's tokens have another id, or none, in `other` (and the
    /// difference in size): 0 when the two map every token to the same id.
    pub fn vocab_differences(&self, other: &Self) -> usize {
        let (ours, theirs) = (self.inner.get_vocab(true), other.inner.get_vocab(true));
        ours.iter()
            .filter(|(t, id)| theirs.get(*t) != Some(id))
            .count()
            + theirs.len().saturating_sub(ours.len())
    }

    /// The tokenizer serialised as `tokenizer.json`.
    pub fn to_json(&self) -> String {
        self.inner.to_string(true).expect("tokenizer serialises")
    }

    /// sha256 of the vocabulary (token → id, sorted by id) and the normaliser's JSON: two
    /// tokenizers with the same fingerprint produce the same ids.
    pub fn fingerprint(&self) -> String {
        let mut vocab: Vec<(String, u32)> = self.inner.get_vocab(true).into_iter().collect();
        vocab.sort_by_key(|(_, id)| *id);
        let mut h = Sha256::new();
        for (tok, id) in vocab {
            h.update(tok.as_bytes());
            h.update(id.to_le_bytes());
        }
        if let Some(n) = self.inner.get_normalizer() {
            h.update(serde_json::to_string(n).unwrap_or_default().as_bytes());
        }
        format!("{:x}", h.finalize())
    }

    pub fn save(&self, path: &Path) -> Result<()> {
        crate::io::write_atomic(path, self.to_json().as_bytes())
    }
}

/// `t`'s ids of `text`, without special tokens added.
fn ids(t: &Tokenizer, text: &str) -> Vec<u32> {
    t.encode_fast(text, false)
        .map(|e| e.get_ids().to_vec())
        .unwrap_or_default()
}

/// The first `tokenizer.json` or `vocab.txt` in `dirs` (each folder's `tokenizer.json` before
/// its `vocab.txt`), as a model folder keeps its tokenizer.
pub fn tokenizer_in(dirs: &[&Path]) -> Option<std::path::PathBuf> {
    dirs.iter()
        .flat_map(|d| ["tokenizer.json", "vocab.txt"].map(|n| d.join(n)))
        .find(|p| crate::io::read::exists(p))
}

/// A BERT `vocab.txt` names each token once: a repeated line would give two ids to one token
/// and leave an id past the vocabulary's size.
fn check_vocab_lines(path: &Path, bytes: &[u8]) -> Result<()> {
    let text = String::from_utf8_lossy(bytes);
    let mut seen = std::collections::HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let token = line.trim_end_matches('\r');
        if let Some(first) = seen.insert(token, i + 1) {
            return Err(Error::Input(format!(
                "{}:{}: `{token}` repeats line {first}; each token must appear once",
                path.display(),
                i + 1
            )));
        }
    }
    Ok(())
}
