//! Text: tokenizer, corpus reading, example packing, memory-mapped shards, dynamic masking,
//! synonym tables projected onto a tokenizer's vocabulary (or built from a model's own
//! embeddings), and sentence pairs for classifiers.

pub mod ascii_chunk;
pub mod batches;
pub mod chunk_memo;
pub mod columnar;
pub mod corpus;
pub mod default_corpus;
pub mod embedding_synonyms;
pub mod examples;
pub mod marked_context;
pub mod masking;
pub mod multi_piece;
pub mod pairs;
pub mod prepare;
pub mod prepare_triples;
pub mod self_synonyms;
pub mod sentences;
pub mod shards;
pub mod shared_table;
pub mod synonym_table;
pub mod tokenizer;
pub mod triples;
pub mod vocab;

pub use synonym_table::{Coverage, SynonymTable, whole_words};
pub use tokenizer::WordPieceTokenizer;
