//! Corpus text tokenised a white-space-separated chunk at a time, each distinct chunk once per
//! thread (through the `tokenizers` pipeline, or its rules on an ASCII chunk's bytes:
//! [`super::ascii_chunk`]) and its ids remembered.
//!
//! Natural text repeats its words: most chunks of a corpus were seen a few lines before, and
//! looking their ids up costs a hash where the pipeline costs a normalised copy with
//! alignments, a pre-tokenised split and a WordPiece search. The ids are the pipeline's own:
//! for BERT's pipeline the ids of a text are the ids of its chunks one after the other, because
//! every step of it works within white space:
//! - the BERT normaliser maps each character on its own (control characters removed, white
//!   space made a space, CJK characters spaced, accents stripped after a canonical
//!   decomposition that never reorders across white space, which is a starter; lower case);
//! - the BERT pre-tokeniser splits at white space (and isolates punctuation inside a chunk);
//! - WordPiece reads one pre-token at a time;
//! - the added tokens, all special, are read as text (`encode_special_tokens`), so none spans
//!   or joins chunks; and no truncation or padding cuts the whole.
//!
//! A chunk ends only at characters both the normaliser and the pre-tokeniser treat as white
//! space: space, tab, line feed, carriage return, and non-ASCII white space other than U+0085
//! (a control character, which the normaliser removes rather than making a space). The other
//! ASCII white space (U+000B, U+000C) is a control character too: it stays inside its chunk,
//! and the pipeline reads it there as it would in the whole.

use std::cell::RefCell;

use ahash::AHashMap;
use thread_local::ThreadLocal;
use tokenizers::{
    AddedToken, ModelWrapper, NormalizerWrapper, PreTokenizerWrapper, Tokenizer,
    normalizers::BertNormalizer,
};

/// Bytes of chunks and ids one thread remembers before it starts afresh (a bounded memory
/// whatever the corpus; a corpus's common words come back within a few lines).
const MEMO_BYTES: usize = 16 << 20;

/// Chunks longer than this are tokenised each time, not remembered (they are rarely words).
const LONGEST_REMEMBERED: usize = 64;

/// What one remembered chunk costs beyond its text and ids: the table's entry and the two
/// allocations' headers.
const ENTRY_BYTES: usize = 64;

/// Each thread's remembered chunks, up to `limit` bytes a thread.
pub struct ChunkMemo {
    threads: ThreadLocal<RefCell<Memo>>,
    limit: usize,
}

#[derive(Default)]
struct Memo {
    ids: AHashMap<Box<str>, Box<[u32]>>,
    bytes: usize,
}

impl ChunkMemo {
    /// A memo for `tokenizer` where its ids are those of its chunks one after the other (BERT's
    /// pipeline reading special tokens as text; see the module's text), else `None`.
    pub fn for_pipeline(tokenizer: &Tokenizer) -> Option<Self> {
        let bert_normaliser = matches!(
            tokenizer.get_normalizer(),
            None | Some(NormalizerWrapper::BertNormalizer(BertNormalizer { .. }))
        );
        let bert_pre_tokeniser = matches!(
            tokenizer.get_pre_tokenizer(),
            Some(PreTokenizerWrapper::BertPreTokenizer(_))
        );
        let wordpiece = matches!(tokenizer.get_model(), ModelWrapper::WordPiece(_));
        let added_read_as_text = tokenizer.get_encode_special_tokens()
            && tokenizer
                .get_added_tokens_decoder()
                .values()
                .all(|t: &AddedToken| t.special);
        let whole = tokenizer.get_truncation().is_none() && tokenizer.get_padding().is_none();
        (bert_normaliser && bert_pre_tokeniser && wordpiece && added_read_as_text && whole)
            .then(|| Self::with_limit(MEMO_BYTES))
    }

    /// A memo that starts afresh when a thread's chunks and ids reach `bytes`.
    pub fn with_limit(bytes: usize) -> Self {
        Self {
            threads: ThreadLocal::new(),
            limit: bytes,
        }
    }

    /// The ids of `text`: each chunk's remembered ids, or `encode`'s for a chunk not seen yet.
    pub fn ids(&self, text: &str, encode: impl Fn(&str) -> Vec<u32>) -> Vec<u32> {
        let mut memo = self.threads.get_or_default().borrow_mut();
        let mut out = Vec::with_capacity(text.len() / 4);
        for chunk in chunks(text) {
            match memo.ids.get(chunk) {
                Some(ids) => out.extend_from_slice(ids),
                None => {
                    let ids = encode(chunk);
                    out.extend_from_slice(&ids);
                    memo.remember(chunk, ids, self.limit);
                }
            }
        }
        out
    }

    /// Chunks remembered by the calling thread (for tests of the bound).
    pub fn remembered(&self) -> usize {
        self.threads.get().map_or(0, |m| m.borrow().ids.len())
    }
}

impl Memo {
    fn remember(&mut self, chunk: &str, ids: Vec<u32>, limit: usize) {
        if chunk.len() > LONGEST_REMEMBERED {
            return;
        }
        let cost = chunk.len() + 4 * ids.len() + ENTRY_BYTES;
        if self.bytes + cost > limit {
            self.ids.clear();
            self.bytes = 0;
        }
        self.bytes += cost;
        self.ids.insert(chunk.into(), ids.into_boxed_slice());
    }
}

/// The chunks of `text`: what lies between white space at which both the BERT normaliser and
/// pre-tokeniser split (see the module's text).
pub fn chunks(text: &str) -> impl Iterator<Item = &str> {
    text.split(ends_chunk).filter(|c| !c.is_empty())
}

/// Whether `c` is white space at which both the BERT normaliser and pre-tokeniser split: text
/// cut there tokenises as the whole does (a long line is cut only there).
pub fn ends_chunk(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r') || (!c.is_ascii() && c != '\u{85}' && c.is_whitespace())
}
