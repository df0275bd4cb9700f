//! Shards for a run without `data.shards`: the embedded default corpus (WordNet glosses),
//! with a WordPiece vocabulary trained on it, prepared once into `<run>/data`, and, for a run
//! with a second phase (`[phase2]`), again at that phase's length with the same vocabulary
//! into `<run>/data-phase2`.

use crate::io::PathQuery;
use std::path::{Path, PathBuf};

use super::config::PretrainConfig;
use crate::Result;
use crate::frame::Owned;
use crate::text::default_corpus::{default_wordnet_dir, write_wordnet_glosses};
use crate::text::prepare::{PrepareOptions, prepare};
use crate::text::shards::MANIFEST;

/// Where a run without `data.shards` keeps the default corpus's shards.
pub fn default_shards_dir(run: &Path) -> PathBuf {
    run.join("data")
}

/// Where the default corpus prepared for the second phase lies: beside the first phase's
/// shards `first` (`<run>/data-phase2`).
pub fn phase2_shards_dir(first: &Path) -> PathBuf {
    first.with_file_name("data-phase2")
}

/// The default corpus's shards in `run` for `cfg` (prepared on first use, shuffled by
/// `train.seed`), and the second phase's beside them when `cfg` has one without
/// `phase2.shards`.
pub fn ensure_default_shards(run: &Owned, cfg: &PretrainConfig, progress: bool) -> Result<PathBuf> {
    let data = default_shards_dir(run.dir());
    let corpus = run.dir().join("corpus").join("wordnet-glosses.txt");
    let prepared = |out: &Path, len: usize, tokenizer: Option<PathBuf>| -> Result<()> {
        if out.join(MANIFEST).is_present() {
            return Ok(());
        }
        if !corpus.is_present() {
            write_wordnet_glosses(&default_wordnet_dir(), &corpus)?;
        }
        let train_vocab = tokenizer.is_none().then_some(cfg.data.default_corpus_vocab);
        let folder = out.file_name().expect("a folder name").to_os_string();
        prepare(
            &PrepareOptions {
                inputs: vec![corpus.clone()],
                tokenizer,
                train_vocab,
                max_seq_len: len,
                out: out.to_path_buf(),
                seed: cfg.train.seed,
                examples_per_shard: 65536,
                show_progress: progress,
                ..PrepareOptions::default()
            },
            &run.child(folder)?,
        )
        .map(|_| ())
    };
    prepared(&data, cfg.data.max_seq_len, None)?;
    if let Some(p) = cfg.phase2.as_ref().filter(|p| p.shards.is_none()) {
        let tokenizer = data.join("tokenizer.json");
        prepared(&phase2_shards_dir(&data), p.max_seq_len, Some(tokenizer))?;
    }
    Ok(data)
}
