//! Shards for a run without `data.shards`: the embedded default corpus (WordNet glosses),
//! with a WordPiece vocabulary trained on it, prepared once into `<run>/data`.

use std::path::{Path, PathBuf};

use super::config::DataSection;
use crate::Result;
use crate::frame::Owned;
use crate::text::default_corpus::{default_wordnet_dir, write_wordnet_glosses};
use crate::text::prepare::{PrepareOptions, prepare};
use crate::text::shards::MANIFEST;

/// Where a run without `data.shards` keeps the default corpus's shards.
pub fn default_shards_dir(run: &Path) -> PathBuf {
    run.join("data")
}

/// The default corpus's shards in `run` (prepared on first use) for the data section `data`,
/// shuffled by `seed`.
pub fn ensure_default_shards(
    run: &Owned,
    data_section: &DataSection,
    seed: u64,
    progress: bool,
) -> Result<PathBuf> {
    let data = default_shards_dir(run.dir());
    if data.join(MANIFEST).exists() {
        return Ok(data);
    }
    let corpus = run.dir().join("corpus").join("wordnet-glosses.txt");
    write_wordnet_glosses(&default_wordnet_dir(), &corpus)?;
    prepare(
        &PrepareOptions {
            inputs: vec![corpus],
            tokenizer: None,
            train_vocab: Some(data_section.default_corpus_vocab),
            max_seq_len: data_section.max_seq_len,
            out: data.clone(),
            seed,
            examples_per_shard: 65536,
            show_progress: progress,
            ..PrepareOptions::default()
        },
        &run.child("data")?,
    )?;
    Ok(data)
}
