//! `trueneg prepare`: text → shards.

use std::path::PathBuf;

use trueneg::text::prepare::{PrepareOptions, prepare};

use super::Ui;

#[derive(clap::Args)]
pub struct Args {
    /// Text files (.txt, one paragraph per line, blank line = document end), .jsonl with a
    /// `text` field, either gzipped, or directories of them.
    #[arg(long, required = true, num_args = 1..)]
    input: Vec<PathBuf>,
    /// tokenizer.json or BERT vocab.txt (exactly one of --tokenizer and --train-vocab).
    #[arg(
        long,
        conflicts_with = "train_vocab",
        required_unless_present = "train_vocab"
    )]
    tokenizer: Option<PathBuf>,
    /// Train an uncased WordPiece vocabulary of this size on the corpus instead.
    #[arg(long)]
    train_vocab: Option<usize>,
    /// Tokens per example, [CLS] and [SEP]s included.
    #[arg(long, default_value_t = 128)]
    max_seq_len: usize,
    /// A new (or empty) folder for the shards, tokenizer.json and manifest.json.
    #[arg(long)]
    out: PathBuf,
    /// Seed of the packing's random choices (same seed, same shards).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Examples per shard file.
    #[arg(long, default_value_t = 65536)]
    examples_per_shard: usize,
}

pub fn run(a: Args, ui: Ui) -> anyhow::Result<()> {
    let r = prepare(&PrepareOptions {
        inputs: a.input,
        tokenizer: a.tokenizer,
        train_vocab: a.train_vocab,
        max_seq_len: a.max_seq_len,
        out: a.out.clone(),
        seed: a.seed,
        examples_per_shard: a.examples_per_shard,
        show_progress: ui.bars(),
    })?;
    let m = &r.manifest;
    println!(
        "prepared {} examples ({} tokens, {} single-segment) in {} shards, vocab {}, {:.1} MB/s -> {}",
        m.examples,
        m.tokens,
        m.single_segment_examples,
        m.shards.len(),
        m.vocab_size,
        r.bytes as f64 / 1e6 / r.seconds.max(1e-9),
        a.out.display()
    );
    Ok(())
}
