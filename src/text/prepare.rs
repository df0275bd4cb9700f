//! `prepare`: corpus files → tokenized, packed examples → shards + manifest.
//!
//! Each line (paragraph) is split into sentences
//! ([`split_sentences`](super::sentences::split_sentences)) so that segments A and B hold
//! whole sentences. Paragraphs are tokenized in parallel; each document draws its packing
//! randomness from its own RNG seeded by (seed, document index), so the output is the same for a
//! given seed whatever the number of threads. The corpus is streamed: read, tokenized and packed a batch
//! at a time, each shard written when full, so memory does not grow with the corpus (a
//! trained vocabulary takes a first pass to count words).

use crate::io::PathQuery;
use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressStyle};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use super::corpus::{for_each_batch, list_inputs, paragraph_ids};
use super::examples::{Example, Packer, PackingConfig};
use super::shards::{
    FORMAT_VERSION, MANIFEST, Manifest, ShardInfo, ShardWriter, TripleData, encode_records,
};
use super::tokenizer::WordPieceTokenizer;
use crate::frame::Owned;
use crate::{Error, Result};

/// What `prepare` reads and writes (`Default`: no inputs, packed examples, `text` fields).
#[derive(Default)]
pub struct PrepareOptions {
    pub inputs: Vec<PathBuf>,
    /// `tokenizer.json` or `vocab.txt`; `None` with `train_vocab` set trains one.
    pub tokenizer: Option<PathBuf>,
    pub train_vocab: Option<usize>,
    pub max_seq_len: usize,
    pub out: PathBuf,
    pub seed: u64,
    pub examples_per_shard: usize,
    pub show_progress: bool,
    /// Records of another kind instead of packed examples (a step's own data, such as sentence
    /// triples: [`super::prepare_triples`]).
    pub records: Option<Box<dyn RecordMaker>>,
    /// The field of a `.jsonl` line that holds its document (`text` when `None`).
    pub text_field: Option<String>,
}

impl PrepareOptions {
    pub fn field(&self) -> &str {
        self.text_field
            .as_deref()
            .unwrap_or(super::corpus::TEXT_FIELD)
    }
}

/// A kind of record a training step needs instead of packed examples. It is written through this
/// module's door: the same input listing, tokenizer, folder claim and clean-up, shard writer and
/// manifest.
pub trait RecordMaker: Sync {
    /// Files it writes beside the shards (removed with them when `prepare` fails or was killed).
    fn own_files(&self) -> &'static [&'static str];
    /// Writes the shards (and its own files) into `prepared.opts.out`.
    fn write(&self, prepared: Preparing<'_>) -> Result<Written>;
}

/// What a [`RecordMaker`] writes with: the options, the input files, their tokenizer and the
/// progress bar over their bytes.
pub struct Preparing<'a> {
    pub opts: &'a PrepareOptions,
    pub files: &'a [PathBuf],
    pub tokenizer: &'a WordPieceTokenizer,
    pub bar: ProgressBar,
}

#[derive(Debug)]
pub struct PrepareReport {
    pub manifest: Manifest,
    pub seconds: f64,
    pub bytes: u64,
}

fn doc_rng(seed: u64, doc: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ doc)
}

/// Files `prepare` writes (`.*.tmp` aside, and the record maker's own); what a killed `prepare`
/// left of them is removed.
fn is_output(name: &str, own: &[&str]) -> bool {
    own.contains(&name)
        || (name.starts_with("shard-") && name.ends_with(".bin"))
        || name == "tokenizer.json"
        || name == MANIFEST
        || (name.starts_with('.') && name.ends_with(".tmp"))
}

fn remove_outputs(dir: &Path, own: &[&str]) {
    for name in crate::io::read::names(dir) {
        if is_output(&name, own) {
            let _ = crate::io::write::remove_file(&dir.join(name));
        }
    }
}

/// Tokenizes and packs the corpus into `opts.out`, the folder `out` the command frame claimed:
/// new or empty, or left by an earlier `prepare` that did not finish (its partial shards are
/// removed first). On an error nothing written stays behind.
pub fn prepare(opts: &PrepareOptions, out: &Owned) -> Result<PrepareReport> {
    if opts.examples_per_shard == 0 || !(8..=u16::MAX as usize).contains(&opts.max_seq_len) {
        return Err(Error::Config(format!(
            "--examples-per-shard {} / --max-seq-len {}: need at least 1 example per shard and 8 to 65535 tokens per example",
            opts.examples_per_shard, opts.max_seq_len
        )));
    }
    if !out.is(&opts.out) {
        return Err(Error::Config(format!(
            "{}: not the folder claimed for prepare's output ({})",
            opts.out.display(),
            out.dir().display()
        )));
    }
    if opts.out.join(MANIFEST).is_present() {
        return Err(Error::Input(format!(
            "{}: already holds a prepared corpus; choose another --out (nothing was changed)",
            opts.out.display()
        )));
    }
    let own = opts.records.as_ref().map_or(&[][..], |r| r.own_files());
    if out.earlier() {
        remove_outputs(&opts.out, own);
    }
    if crate::io::lock::has_content(&opts.out) {
        return Err(Error::Input(format!(
            "{}: not empty and not a prepared corpus; choose a new or empty --out (nothing was changed)",
            opts.out.display()
        )));
    }
    let r = prepare_into(opts);
    if r.is_err() {
        remove_outputs(&opts.out, own);
    }
    r
}

/// The tokenizer given, or one trained on the corpus (its words counted a batch at a time).
fn tokenizer(opts: &PrepareOptions, files: &[PathBuf]) -> Result<WordPieceTokenizer> {
    match (&opts.tokenizer, opts.train_vocab) {
        (Some(p), None) => WordPieceTokenizer::load(p),
        (None, Some(n)) => {
            let bar = bytes_bar(opts, files, "vocabulary: counting words");
            let mut counts = WordPieceTokenizer::word_counts();
            let mut lines = 0usize;
            for_each_batch(files, opts.field(), |b| {
                let batch: Vec<String> = b.paragraphs.into_iter().map(|p| p.text).collect();
                bar.inc(b.file_bytes);
                lines += batch.len();
                counts.add(&batch)
            })?;
            bar.finish_and_clear();
            if lines == 0 {
                return Err(Error::Input(format!(
                    "{}: the corpus has no text",
                    input_list(files)
                )));
            }
            let t = WordPieceTokenizer::train_on(counts, n)?;
            let got = t.vocab_size();
            if got > n {
                tracing::warn!(
                    "--train-vocab {n}: the corpus has more characters than that: the vocabulary holds the 5 special tokens and every character (and its ## form), {got} tokens"
                );
            } else if got < n {
                tracing::warn!(
                    "--train-vocab {n}: the corpus gave {got} tokens only (no pair of pieces left that occurs twice); a larger corpus gives more"
                );
            }
            Ok(t)
        }
        _ => Err(Error::Config(
            "give exactly one of --tokenizer and --train-vocab".into(),
        )),
    }
}

/// A progress bar over the input files' bytes.
fn bytes_bar(opts: &PrepareOptions, files: &[PathBuf], what: &str) -> ProgressBar {
    if !opts.show_progress {
        return ProgressBar::hidden();
    }
    ProgressBar::new(input_bytes(files)).with_style(
        ProgressStyle::with_template(&format!(
            "{what} {{bar:40}} {{decimal_bytes}}/{{decimal_total_bytes}} {{decimal_bytes_per_sec}} eta {{eta}}"
        ))
        .expect("template"),
    )
}

fn prepare_into(opts: &PrepareOptions) -> Result<PrepareReport> {
    let start = std::time::Instant::now();
    let (files, skipped) = list_inputs(&opts.inputs)?;
    for note in skipped {
        tracing::warn!("{note}");
    }
    if files.is_empty() {
        return Err(Error::Input("no input files".into()));
    }
    let input_bytes = input_bytes(&files);
    let tokenizer = tokenizer(opts, &files)?;
    crate::io::write::folder(&opts.out)?;
    let bar = bytes_bar(opts, &files, "prepare");
    let written = match &opts.records {
        Some(maker) => maker.write(Preparing {
            opts,
            files: &files,
            tokenizer: &tokenizer,
            bar,
        })?,
        None => write_packed(opts, &files, &tokenizer, bar)?,
    };
    finish(
        opts,
        &tokenizer,
        &files,
        written,
        Took { start, input_bytes },
    )
}

/// Packed examples: each document's sentences packed into examples of up to `max_seq_len`
/// tokens, two segments where they fit.
fn write_packed(
    opts: &PrepareOptions,
    files: &[PathBuf],
    tokenizer: &WordPieceTokenizer,
    bar: ProgressBar,
) -> Result<Written> {
    let token_bytes = token_bytes(tokenizer);
    let mut shards = ShardWriter::new(&opts.out, opts.examples_per_shard, |c| {
        encode_records(c, opts.max_seq_len, token_bytes)
    });
    let s = tokenizer.special;
    let packing = PackingConfig::new(opts.max_seq_len, s.cls, s.sep);
    let (mut examples, mut tokens, mut single) = (0usize, 0u64, 0usize);
    let mut count = |made: &[Example]| {
        for ex in made {
            examples += 1;
            tokens += ex.tokens.len() as u64;
            single += usize::from(ex.segment_a_len == ex.tokens.len());
        }
    };
    // The document being packed: its index and packer.
    let mut current: Option<(u64, Packer<ChaCha8Rng>)> = None;
    for_each_batch(files, opts.field(), |b| {
        // Tokenized on all cores (rayon's collect keeps the order).
        let ids: Vec<Vec<Vec<u32>>> = b
            .paragraphs
            .par_iter()
            .map(|p| paragraph_ids(&p.text, tokenizer))
            .collect();
        let mut made = Vec::new();
        for (p, sentences) in b.paragraphs.iter().zip(ids) {
            if current.as_ref().is_none_or(|(doc, _)| *doc != p.doc) {
                let packer = Packer::new(packing, doc_rng(opts.seed, p.doc));
                made.extend(
                    current
                        .replace((p.doc, packer))
                        .and_then(|(_, k)| k.finish()),
                );
            }
            let (_, packer) = current.as_mut().expect("a document");
            made.extend(sentences.into_iter().filter_map(|s| packer.push(s)));
        }
        count(&made);
        bar.inc(b.file_bytes);
        shards.push(&made)
    })?;
    let last: Vec<Example> = current.and_then(|(_, k)| k.finish()).into_iter().collect();
    count(&last);
    shards.push(&last)?;
    let shards = shards.finish()?;
    bar.finish_and_clear();
    if examples == 0 {
        return Err(Error::Input(format!(
            "{}: the corpus has no text (empty input)",
            input_list(files)
        )));
    }
    Ok(Written {
        examples,
        tokens,
        single_segment_examples: single,
        shards,
        triples: None,
    })
}

/// The input files' size on disk.
fn input_bytes(files: &[PathBuf]) -> u64 {
    files
        .iter()
        .map(|f| crate::io::read::file_len(f).unwrap_or(0))
        .sum()
}

pub fn input_list(files: &[PathBuf]) -> String {
    files
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a `prepare` wrote: its counts, shards and, for sentence triples, how they were made.
pub struct Written {
    pub examples: usize,
    pub tokens: u64,
    pub single_segment_examples: usize,
    pub shards: Vec<ShardInfo>,
    pub triples: Option<TripleData>,
}

/// How long a `prepare` took: from `start`, over `input_bytes` of input.
struct Took {
    start: std::time::Instant,
    input_bytes: u64,
}

/// Saves the tokenizer, then the manifest (a folder with a manifest is complete).
fn finish(
    opts: &PrepareOptions,
    tokenizer: &WordPieceTokenizer,
    files: &[PathBuf],
    written: Written,
    took: Took,
) -> Result<PrepareReport> {
    tokenizer.save(&opts.out.join("tokenizer.json"))?;
    let manifest = Manifest {
        format_version: FORMAT_VERSION,
        max_seq_len: opts.max_seq_len,
        token_bytes: token_bytes(tokenizer),
        vocab_size: tokenizer.vocab_size(),
        tokenizer_fingerprint: tokenizer.fingerprint(),
        special_ids: tokenizer.special,
        seed: opts.seed,
        examples: written.examples,
        tokens: written.tokens,
        single_segment_examples: written.single_segment_examples,
        inputs: files.iter().map(|p| p.display().to_string()).collect(),
        shards: written.shards,
        triples: written.triples,
    };
    let json = serde_json::to_string_pretty(&manifest).expect("json") + "\n";
    crate::io::write_atomic(&opts.out.join(MANIFEST), json.as_bytes())?;
    Ok(PrepareReport {
        manifest,
        seconds: took.start.elapsed().as_secs_f64(),
        bytes: took.input_bytes,
    })
}

/// Bytes per token id in the shards: 2 below 65,536 tokens, else 4.
pub fn token_bytes(tokenizer: &WordPieceTokenizer) -> usize {
    if tokenizer.vocab_size() <= 1 << 16 {
        2
    } else {
        4
    }
}

/// The tokenizer saved next to the shards.
pub fn shard_tokenizer(dir: &Path) -> Result<WordPieceTokenizer> {
    WordPieceTokenizer::load(&dir.join("tokenizer.json"))
}
