//! Lexicons: WordNet synonyms, embedding neighbours, and their projection onto a tokenizer's
//! vocabulary as a [`SynonymTable`].

pub mod embeddings;
pub mod table;
pub mod wordnet;
pub mod words;

use std::path::Path;

pub use table::{Coverage, SynonymTable, whole_words};
pub use wordnet::WordNet;

use crate::Result;
use crate::text::WordPieceTokenizer;

/// The WordNet synonym table of a tokenizer.
pub fn wordnet_table(tokenizer: &WordPieceTokenizer, wordnet_dir: &Path) -> Result<SynonymTable> {
    let wn = WordNet::open(wordnet_dir)?;
    Ok(SynonymTable::build(
        tokenizer,
        &format!("wordnet:{}", wordnet_dir.display()),
        |w| wn.synonyms(w),
    ))
}

/// The top-k embedding-neighbour table of a tokenizer from word vectors.
pub fn embedding_table(
    tokenizer: &WordPieceTokenizer,
    vectors: &embeddings::WordVectors,
    k: usize,
    source: &str,
) -> SynonymTable {
    let map = embeddings::neighbour_map(vectors, k, &crate::device::host());
    SynonymTable::build(tokenizer, source, |w| {
        map.get(w)
            .map(|v| v.iter().cloned().collect())
            .unwrap_or_default()
    })
}
