//! `prepare`: corpus files → tokenized, packed examples → shards + manifest.
//!
//! Each line (paragraph) is split into sentences ([`split_sentences`]) so that segments A and B
//! hold whole sentences. Paragraphs are tokenized in parallel; each document draws its packing
//! randomness from its own RNG seeded by (seed, document index), so the output is the same for a
//! given seed whatever the number of threads. The corpus is streamed: read, tokenized and packed a batch
//! at a time, each shard written when full, so memory does not grow with the corpus (a
//! trained vocabulary takes a first pass to count words; see [`SMALL_CORPUS`]).

use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressStyle};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use super::cline::{AntKind, ClineConfig, ClineGenerator, IGNORE, SynKind};
use super::corpus::{for_each_batch, list_inputs, paragraph_ids};
use super::examples::{Example, Packer, PackingConfig};
use super::sentences::split_sentences;
use super::shards::{
    ClineData, ClineRecord, FORMAT_VERSION, MANIFEST, Manifest, ShardInfo, ShardWriter,
    encode_cline_records, encode_records,
};
use super::tokenizer::WordPieceTokenizer;
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
    /// Write CLINE sentence triples instead of packed examples.
    pub cline: Option<ClineOptions>,
    /// The field of a `.jsonl` line that holds its document (`text` when `None`).
    pub text_field: Option<String>,
}

impl PrepareOptions {
    fn field(&self) -> &str {
        self.text_field
            .as_deref()
            .unwrap_or(super::corpus::TEXT_FIELD)
    }
}

/// `prepare --cline`: the generation settings and the WordNet database.
pub struct ClineOptions {
    pub config: ClineConfig,
    pub wordnet: PathBuf,
}

#[derive(Debug)]
pub struct PrepareReport {
    pub manifest: Manifest,
    pub seconds: f64,
    pub bytes: u64,
}

/// `prepare --cline` writes every 100th triple (at most 40) here, to be read by a person.
pub const CLINE_SAMPLES: &str = "samples.md";

/// Replacements as `old → new (kind)`, comma-separated.
fn replacement_list<K: std::fmt::Debug>(ori: &str, r: &[super::cline::Replacement<K>]) -> String {
    r.iter()
        .map(|r| {
            let kind = format!("{:?}", r.kind).to_lowercase();
            format!("{} → {} ({kind})", &ori[r.start..r.end], r.new)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// One triple as Markdown: the three sentences and each replacement with its kind.
fn sample_md(n: usize, ex: &super::cline::ClineExample) -> String {
    format!(
        "**{n}.** {}\n\n- x_syn: {}\n  - {}\n- x_ant: {}\n  - {}\n\n",
        ex.ori,
        ex.syn,
        replacement_list(&ex.ori, &ex.syn_replaced),
        ex.ant,
        replacement_list(&ex.ori, &ex.ant_replaced)
    )
}

fn doc_rng(seed: u64, doc: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ doc)
}

/// Files `prepare` writes (`.*.tmp` aside); what a killed `prepare` left of them is removed.
fn is_output(name: &str) -> bool {
    (name.starts_with("shard-") && name.ends_with(".bin"))
        || name == "tokenizer.json"
        || name == MANIFEST
        || name == CLINE_SAMPLES
        || (name.starts_with('.') && name.ends_with(".tmp"))
}

fn remove_outputs(dir: &Path) {
    for name in crate::io::read::names(dir) {
        if is_output(&name) {
            let _ = crate::io::write::remove_file(&dir.join(name));
        }
    }
}

/// Tokenizes and packs the corpus into `opts.out`, which must be new or empty (a folder left by
/// a killed `prepare` counts as empty: its partial shards are removed). One process at a time
/// per folder; on an error nothing written stays behind.
pub fn prepare(opts: &PrepareOptions) -> Result<PrepareReport> {
    if opts.examples_per_shard == 0 || !(8..=u16::MAX as usize).contains(&opts.max_seq_len) {
        return Err(Error::Config(format!(
            "--examples-per-shard {} / --max-seq-len {}: need at least 1 example per shard and 8 to 65535 tokens per example",
            opts.examples_per_shard, opts.max_seq_len
        )));
    }
    if opts.out.join(MANIFEST).exists() {
        return Err(Error::Input(format!(
            "{}: already holds a prepared corpus; choose another --out (nothing was changed)",
            opts.out.display()
        )));
    }
    let existed = opts.out.exists();
    let lock = crate::io::lock::FolderLock::acquire(&opts.out, "trueneg prepare")?;
    if lock.stale.is_some() {
        remove_outputs(&opts.out);
    }
    if crate::io::lock::has_content(&opts.out) {
        return Err(Error::Input(format!(
            "{}: not empty and not a prepared corpus; choose a new or empty --out (nothing was changed)",
            opts.out.display()
        )));
    }
    let r = prepare_into(opts);
    if r.is_err() {
        remove_outputs(&opts.out);
        drop(lock);
        if !existed {
            crate::io::write::remove_empty_folder(&opts.out);
        }
    }
    r
}

/// Up to this many bytes of input, `--train-vocab` keeps the corpus in memory between the
/// counting pass and packing, and takes each sentence's ids from the counting pass's
/// normalisation (one pass of the normaliser instead of two); larger corpora are read twice.
const SMALL_CORPUS: u64 = 16 << 20;

/// Each paragraph's sentences as token ids, in corpus order, when the vocabulary training made
/// them.
type Ids = Option<Vec<Vec<Vec<u32>>>>;

/// The tokenizer given, or one trained on the corpus (its words counted a batch at a time).
fn tokenizer(opts: &PrepareOptions, files: &[PathBuf]) -> Result<(WordPieceTokenizer, Ids)> {
    match (&opts.tokenizer, opts.train_vocab) {
        (Some(p), None) => Ok((WordPieceTokenizer::load(p)?, None)),
        (None, Some(n)) => {
            let bar = bytes_bar(opts, files, "vocabulary: counting words");
            let small = input_bytes(files) <= SMALL_CORPUS && opts.cline.is_none();
            let mut counts = WordPieceTokenizer::word_counts();
            let (mut texts, mut lines) = (Vec::new(), 0usize);
            for_each_batch(files, opts.field(), |b| {
                let batch: Vec<String> = b.paragraphs.into_iter().map(|p| p.text).collect();
                bar.inc(b.file_bytes);
                lines += batch.len();
                if small {
                    texts.extend(batch);
                    return Ok(());
                }
                counts.add(&batch)
            })?;
            bar.finish_and_clear();
            if lines == 0 {
                return Err(Error::Input(format!(
                    "{}: the corpus has no text",
                    input_list(files)
                )));
            }
            let (t, ids) = if small {
                let (t, ids) = WordPieceTokenizer::train_with_ids(&texts, n)?;
                (t, Some(ids))
            } else {
                (WordPieceTokenizer::train_on(counts, n)?, None)
            };
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
            Ok((t, ids))
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
    let total_bytes = input_bytes(&files);
    let (tokenizer, trained_ids) = tokenizer(opts, &files)?;
    crate::io::write::folder(&opts.out)?;
    let bar = bytes_bar(opts, &files, "prepare");
    if let Some(c) = &opts.cline {
        return prepare_cline(opts, c, &tokenizer, &files, bar, start, total_bytes);
    }
    let token_bytes = token_bytes(&tokenizer);
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
    let mut trained_ids = trained_ids.map(Vec::into_iter);
    for_each_batch(&files, opts.field(), |b| {
        // Tokenized on all cores (rayon's collect keeps the order), or taken from the training.
        let ids: Vec<Vec<Vec<u32>>> = match &mut trained_ids {
            Some(trained) => trained.by_ref().take(b.paragraphs.len()).collect(),
            None => b
                .paragraphs
                .par_iter()
                .map(|p| paragraph_ids(&p.text, &tokenizer))
                .collect(),
        };
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
            input_list(&files)
        )));
    }
    let written = Written {
        examples,
        tokens,
        single_segment_examples: single,
        shards,
        cline: None,
        start,
        input_bytes: total_bytes,
    };
    finish(opts, &tokenizer, &files, written)
}

/// One sentence → its CLINE record, or `None` when a side has no word to replace. The three
/// sentences are cut to `max_len − 2` pieces and framed by `[CLS]` … `[SEP]`.
fn cline_record(
    generator: &ClineGenerator,
    tokenizer: &WordPieceTokenizer,
    sentence: &str,
    seed: u64,
    index: u64,
    max_len: usize,
) -> Option<(ClineRecord, super::cline::ClineExample, bool)> {
    let ex = generator.example(sentence, seed, index);
    if ex.syn_replaced.is_empty() || ex.ant_replaced.is_empty() {
        return None;
    }
    let none: &[super::cline::Replacement<SynKind>] = &[];
    let ori = ClineGenerator::pieces(tokenizer, &ex.ori, &ex.candidates, none, 0);
    let syn = ClineGenerator::pieces(tokenizer, &ex.ori, &ex.candidates, &ex.syn_replaced, 1);
    let ant = ClineGenerator::pieces(tokenizer, &ex.ori, &ex.candidates, &ex.ant_replaced, 2);
    let s = tokenizer.special;
    let keep = max_len - 2;
    // Too long: all three are cut after the same words, the most that fit on every side.
    let truncated = [&ori, &syn, &ant].iter().any(|p| p.ids.len() > keep);
    let (ori, syn, ant) = if truncated {
        let fits =
            |p: &super::cline::LabeledPieces| p.words.get(keep).copied().unwrap_or(usize::MAX);
        let n = fits(&ori).min(fits(&syn)).min(fits(&ant));
        (ori.first_words(n), syn.first_words(n), ant.first_words(n))
    } else {
        (ori, syn, ant)
    };
    let frame = |ids: &[u32]| {
        let mut v = vec![s.cls];
        v.extend_from_slice(ids);
        v.push(s.sep);
        v
    };
    let frame_labels = |labels: &[i32]| {
        let mut v = vec![IGNORE as i8];
        v.extend(labels.iter().map(|&l| l as i8));
        v.push(IGNORE as i8);
        v
    };
    let record = ClineRecord {
        ori: frame(&ori.ids),
        syn: frame(&syn.ids),
        ant: frame(&ant.ids),
        syn_labels: frame_labels(&syn.labels),
        ant_labels: frame_labels(&ant.labels),
    };
    // A side whose replaced words were all cut off has nothing to detect.
    let kept = |l: &[i8], label: i8| l.contains(&label);
    (kept(&record.syn_labels, 1) && kept(&record.ant_labels, 2)).then_some((record, ex, truncated))
}

/// `prepare --cline`: every sentence of the corpus (its lines split by [`split_sentences`])
/// becomes one (x_ori, x_syn, x_ant) record; sentence `i` draws from an RNG seeded by
/// (seed, i), so the output is the same whatever the number of threads.
fn prepare_cline(
    opts: &PrepareOptions,
    c: &ClineOptions,
    tokenizer: &WordPieceTokenizer,
    files: &[PathBuf],
    bar: ProgressBar,
    start: std::time::Instant,
    total_bytes: u64,
) -> Result<PrepareReport> {
    check_cline_config(&c.config)?;
    let wn = crate::lexicon::wordnet::WordNet::open(&c.wordnet)?;
    let generator = ClineGenerator::new(
        &wn,
        c.config.clone(),
        &ClineGenerator::vocabulary_of(tokenizer),
    );
    let token_bytes = token_bytes(tokenizer);
    let mut data = ClineData {
        config: c.config.clone(),
        sentences: 0,
        skipped: 0,
        syn_synonyms: 0,
        syn_hypernyms: 0,
        syn_inflections: 0,
        ant_antonyms: 0,
        ant_random: 0,
        truncated: 0,
    };
    let mut samples: Vec<String> = Vec::new();
    let mut shards = ShardWriter::new(&opts.out, opts.examples_per_shard, |c| {
        encode_cline_records(c, opts.max_seq_len, token_bytes)
    });
    let (mut examples, mut tokens) = (0usize, 0u64);
    for_each_batch(files, opts.field(), |b| {
        let sentences: Vec<&str> = b
            .paragraphs
            .iter()
            .flat_map(|p| split_sentences(&p.text))
            .collect();
        let first = data.sentences as u64;
        let made: Vec<_> = sentences
            .par_iter()
            .enumerate()
            .map(|(i, s)| {
                cline_record(
                    &generator,
                    tokenizer,
                    s,
                    opts.seed,
                    first + i as u64,
                    opts.max_seq_len,
                )
            })
            .collect();
        data.sentences += sentences.len();
        let mut records = Vec::new();
        for m in made {
            let Some((record, ex, truncated)) = m else {
                data.skipped += 1;
                continue;
            };
            if examples.is_multiple_of(100) && samples.len() < 40 {
                samples.push(sample_md(examples, &ex));
            }
            count_replacements(&mut data, &ex, truncated);
            examples += 1;
            tokens += record.ori.len() as u64;
            records.push(record);
        }
        bar.inc(b.file_bytes);
        shards.push(&records)
    })?;
    let shards = shards.finish()?;
    bar.finish_and_clear();
    if examples == 0 {
        return Err(Error::Input(format!(
            "{}: no sentence has a word to replace by a synonym and one by an antonym or random word",
            input_list(files)
        )));
    }
    let header = format!(
        "# CLINE triples: samples\n\nEvery 100th triple of {} (triple number in bold), as text before tokenization.\n\n",
        input_list(files)
    );
    crate::io::write_atomic(
        &opts.out.join(CLINE_SAMPLES),
        (header + &samples.concat()).as_bytes(),
    )?;
    let written = Written {
        examples,
        tokens,
        single_segment_examples: examples,
        shards,
        cline: Some(data),
        start,
        input_bytes: total_bytes,
    };
    finish(opts, tokenizer, files, written)
}

/// The CLINE ratios and cap are shares.
fn check_cline_config(cc: &ClineConfig) -> Result<()> {
    for (flag, v, ok) in [
        (
            "--syn-ratio",
            cc.syn_ratio,
            (0.0..=1.0).contains(&cc.syn_ratio),
        ),
        (
            "--ant-ratio",
            cc.ant_ratio,
            (0.0..=1.0).contains(&cc.ant_ratio),
        ),
        ("--cap", cc.cap, cc.cap > 0.0 && cc.cap <= 1.0),
    ] {
        if !ok {
            return Err(Error::Config(format!(
                "{flag} {v} must be in {}",
                if flag == "--cap" { "(0, 1]" } else { "[0, 1]" }
            )));
        }
    }
    Ok(())
}

/// Adds one triple's replacements, by kind, to the counts.
fn count_replacements(data: &mut ClineData, ex: &super::cline::ClineExample, truncated: bool) {
    for r in &ex.syn_replaced {
        match r.kind {
            SynKind::Synonym => data.syn_synonyms += 1,
            SynKind::Hypernym => data.syn_hypernyms += 1,
            SynKind::Inflection => data.syn_inflections += 1,
        }
    }
    for r in &ex.ant_replaced {
        match r.kind {
            AntKind::Antonym => data.ant_antonyms += 1,
            AntKind::Random => data.ant_random += 1,
        }
    }
    data.truncated += usize::from(truncated);
}

/// The input files' size on disk.
fn input_bytes(files: &[PathBuf]) -> u64 {
    files
        .iter()
        .map(|f| f.metadata().map(|m| m.len()).unwrap_or(0))
        .sum()
}

fn input_list(files: &[PathBuf]) -> String {
    files
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a `prepare` wrote and how long it took: its counts, shards and triples' data, from
/// `start`, over `input_bytes` of input.
struct Written {
    examples: usize,
    tokens: u64,
    single_segment_examples: usize,
    shards: Vec<ShardInfo>,
    cline: Option<ClineData>,
    start: std::time::Instant,
    input_bytes: u64,
}

/// Saves the tokenizer, then the manifest (a folder with a manifest is complete).
fn finish(
    opts: &PrepareOptions,
    tokenizer: &WordPieceTokenizer,
    files: &[PathBuf],
    written: Written,
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
        cline: written.cline,
    };
    let json = serde_json::to_string_pretty(&manifest).expect("json") + "\n";
    crate::io::write_atomic(&opts.out.join(MANIFEST), json.as_bytes())?;
    Ok(PrepareReport {
        manifest,
        seconds: written.start.elapsed().as_secs_f64(),
        bytes: written.input_bytes,
    })
}

/// Bytes per token id in the shards: 2 below 65,536 tokens, else 4.
fn token_bytes(tokenizer: &WordPieceTokenizer) -> usize {
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
