//! Word knowledge: WordNet synonyms, inflection, embedding neighbours. Their projection onto a
//! tokenizer's vocabulary is [`crate::text::synonym_table`].

pub mod embeddings;
pub mod wordnet;
pub mod wordnet_files;
pub mod words;

pub use wordnet::WordNet;
