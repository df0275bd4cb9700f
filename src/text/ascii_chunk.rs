//! BERT's pipeline on one ASCII chunk, done on its bytes: the ids the whole `tokenizers`
//! pipeline gives (and the words vocabulary training counts), without its normalised copy with
//! alignments, its added-token scan and its pre-token bookkeeping (most of the pipeline's time
//! on a chunk; the WordPiece search stays the model's own).
//!
//! On ASCII text every step of BERT's pipeline is a rule on single bytes:
//! - the BERT normaliser's cleaning removes the control characters (U+0000–U+001F, U+007F;
//!   tab, line feed and carriage return never occur inside a chunk); its Chinese-character
//!   spacing and accent stripping change nothing; its lower case is ASCII's;
//! - the BERT pre-tokeniser drops white space (U+0009–U+000D, U+0020: the two a chunk can hold,
//!   U+000B and U+000C, when nothing cleaned them) and isolates each ASCII punctuation mark;
//! - the model reads each remaining piece on its own.
//!
//! A chunk with any other byte goes through the whole pipeline (`None`), as does one with a
//! piece the model refuses: errors stay the pipeline's.

use tokenizers::{Model, ModelWrapper, NormalizerWrapper, normalizers::BertNormalizer};

/// The BERT normaliser's settings that act on ASCII (none without a normaliser).
#[derive(Clone, Copy, Debug)]
pub struct AsciiChunk {
    clean_text: bool,
    lowercase: bool,
}

impl AsciiChunk {
    /// The byte rules for `normaliser` (BERT's, or none), else `None`.
    pub fn for_normaliser(normaliser: Option<&NormalizerWrapper>) -> Option<Self> {
        match normaliser {
            None => Some(Self {
                clean_text: false,
                lowercase: false,
            }),
            Some(NormalizerWrapper::BertNormalizer(bert)) => Some(Self::for_bert(bert)),
            Some(_) => None,
        }
    }

    /// The rules of BERT's `normaliser` (word counting's is always BERT's).
    pub fn for_bert(normaliser: &BertNormalizer) -> Self {
        Self {
            clean_text: normaliser.clean_text,
            lowercase: normaliser.lowercase,
        }
    }

    /// `model`'s ids of `chunk` after BERT's normaliser and pre-tokeniser, or `None` where the
    /// chunk is not ASCII or the model refuses a piece of it.
    pub fn ids(&self, chunk: &str, model: &ModelWrapper) -> Option<Vec<u32>> {
        let text = self.normalised(chunk)?;
        let mut ids = Vec::with_capacity(text.len() / 3 + 1);
        for piece in pieces(&text) {
            let tokens = model.tokenize(piece).ok()?;
            ids.extend(tokens.iter().map(|t| t.id));
        }
        Some(ids)
    }

    /// Calls `f` on each word of `chunk` after BERT's normaliser and pre-tokeniser; `false`
    /// (and no call) where the chunk is not ASCII.
    pub fn words(&self, chunk: &str, f: impl FnMut(&str)) -> bool {
        match self.normalised(chunk) {
            Some(text) => {
                pieces(&text).for_each(f);
                true
            }
            None => false,
        }
    }

    /// `chunk` after the normaliser, where it is ASCII.
    fn normalised(&self, chunk: &str) -> Option<String> {
        if !chunk.is_ascii() {
            return None;
        }
        let kept = chunk
            .bytes()
            .filter(|b| !(self.clean_text && (*b < 0x20 || *b == 0x7f)))
            .map(|b| {
                if self.lowercase {
                    b.to_ascii_lowercase()
                } else {
                    b
                }
            })
            .collect();
        // Only ASCII bytes were kept: always valid UTF-8.
        String::from_utf8(kept).ok()
    }
}

/// The BERT pre-tokeniser's pieces of ASCII `text`: the runs between white space, each
/// punctuation mark a piece of its own.
fn pieces(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| c.is_ascii_whitespace() || c == '\u{b}')
        .flat_map(punctuation_isolated)
}

/// `run` cut before and after each ASCII punctuation mark.
fn punctuation_isolated(run: &str) -> impl Iterator<Item = &str> {
    let mut rest = run;
    std::iter::from_fn(move || {
        let cut = match rest.bytes().position(|b| b.is_ascii_punctuation()) {
            _ if rest.is_empty() => return None,
            Some(0) => 1,
            Some(at) => at,
            None => rest.len(),
        };
        let (piece, tail) = rest.split_at(cut);
        rest = tail;
        Some(piece)
    })
}

#[cfg(test)]
mod tests {
    use super::pieces;

    #[test]
    fn pieces_drop_white_space_and_isolate_punctuation() {
        let text = "a,b\u{b}\u{c}..cd\u{b}";
        assert_eq!(
            pieces(text).collect::<Vec<_>>(),
            ["a", ",", "b", ".", ".", "cd"]
        );
        assert_eq!(pieces("").count(), 0);
        assert_eq!(pieces("\u{c}").count(), 0);
    }
}
