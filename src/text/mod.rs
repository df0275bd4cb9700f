//! Text: tokenizer, corpus reading, example packing, memory-mapped shards, dynamic masking.

pub mod batches;
pub mod cline;
pub mod corpus;
pub mod default_corpus;
pub mod examples;
pub mod masking;
pub mod prepare;
pub mod shards;
pub mod tokenizer;
pub mod vocab;

pub use tokenizer::WordPieceTokenizer;
