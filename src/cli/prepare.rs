//! `trueneg prepare`: text → shards.

use std::path::PathBuf;

use trueneg::text::prepare::{PrepareOptions, RecordMaker, prepare};
use trueneg::text::prepare_triples::TripleMaker;
use trueneg::text::triples::TripleConfig;

use trueneg::frame::{Claim, FileKind, InputKind, OutputKind, Owned, Plan};

use super::Ui;

#[derive(clap::Args)]
pub struct Args {
    /// Text files (.txt, one paragraph per line, blank line = document end), .jsonl with a
    /// text field (--text-field), either gzipped, Parquet (.parquet) or Arrow IPC
    /// (.arrow, .feather; a Hugging Face `datasets` cache file) with that text column, or
    /// directories of them.
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
    /// At least 100 (the specials and the corpus's characters come first).
    #[arg(long, value_parser = super::at_least(100))]
    train_vocab: Option<usize>,
    /// Tokens per example, [CLS] and [SEP]s included (at least 8).
    #[arg(long, default_value_t = 128, value_parser = super::at_least(8))]
    max_seq_len: usize,
    /// A new (or empty) folder for the shards, tokenizer.json and manifest.json.
    #[arg(long)]
    out: PathBuf,
    /// The field of a `.jsonl` line that holds its document (as the `datasets` library names
    /// it: `text`, `content`, …).
    #[arg(long, default_value = "text", value_name = "FIELD")]
    text_field: String,
    /// Seed of the packing's random choices (same seed, same shards).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Examples per shard file.
    #[arg(long, default_value_t = 65536, value_parser = super::at_least(1))]
    examples_per_shard: usize,
    /// One (original, synonym, antonym) sentence triple per sentence instead of packed
    /// examples, for an objective whose step trains on sentence triples.
    #[arg(long)]
    triples: bool,
    /// Triples: share of a sentence's words replaced in the synonym sentence.
    #[arg(long, default_value_t = TripleConfig::default().syn_ratio, requires = "triples", value_parser = super::replaced_share)]
    syn_ratio: f64,
    /// Triples: share of a sentence's words replaced in the antonym sentence.
    #[arg(long, default_value_t = TripleConfig::default().ant_ratio, requires = "triples", value_parser = super::replaced_share)]
    ant_ratio: f64,
    /// Triples: at most this share of the candidate words is replaced (the authors' code: 0.5).
    #[arg(long, default_value_t = TripleConfig::default().cap, requires = "triples", value_parser = super::replaced_share)]
    cap: f64,
    /// Triples: also take antonyms of a word's synonyms (the authors' code).
    #[arg(long, requires = "triples")]
    co_synonym_antonyms: bool,
    /// Triples: WordNet database folder [default: /usr/share/wordnet].
    #[arg(long, requires = "triples")]
    wordnet: Option<PathBuf>,
}

impl super::Command for Args {
    fn plan(&self) -> anyhow::Result<Plan> {
        let mut plan = Plan::new("prepare");
        for input in &self.input {
            plan = plan.input("--input", input, InputKind::TextCorpus);
        }
        Ok(plan
            .input_if(
                "--tokenizer",
                self.tokenizer.as_ref(),
                InputKind::File(FileKind::Tokenizer),
            )
            .input_if("--wordnet", self.wordnet.as_ref(), InputKind::WordNet)
            .output("--out", &self.out, OutputKind::Folder)
            .stops_at_once(&format!(
                "run the same command again (it first clears what this one left in {})",
                self.out.display()
            )))
    }

    fn run(self: Box<Self>, claim: &Claim, ui: Ui) -> anyhow::Result<()> {
        run(*self, claim.folder("--out"), ui)
    }
}

fn run(a: Args, out: &Owned, ui: Ui) -> anyhow::Result<()> {
    let r = prepare(
        &PrepareOptions {
            inputs: a.input,
            tokenizer: a.tokenizer,
            train_vocab: a.train_vocab,
            max_seq_len: a.max_seq_len,
            out: a.out.clone(),
            seed: a.seed,
            examples_per_shard: a.examples_per_shard,
            show_progress: ui.bars(),
            text_field: Some(a.text_field.clone()),
            records: a.triples.then(|| {
                Box::new(TripleMaker {
                    config: TripleConfig {
                        syn_ratio: a.syn_ratio,
                        ant_ratio: a.ant_ratio,
                        cap: a.cap,
                        co_synonym_antonyms: a.co_synonym_antonyms,
                    },
                    wordnet: super::wordnet_dir(&a.wordnet),
                }) as Box<dyn RecordMaker>
            }),
        },
        out,
    )?;
    let m = &r.manifest;
    if let Some(c) = &m.triples {
        println!(
            "prepared {} sentence triples from {} sentences ({} skipped: nothing to replace; {} cut to {} tokens), {:.0} sentences/s -> {}",
            m.examples,
            c.sentences,
            c.skipped,
            c.truncated,
            m.max_seq_len,
            c.sentences as f64 / r.seconds.max(1e-9),
            a.out.display()
        );
        println!(
            "  x_syn: {} synonyms, {} hypernyms, {} inflections; x_ant: {} antonyms, {} random words",
            c.syn_synonyms, c.syn_hypernyms, c.syn_inflections, c.ant_antonyms, c.ant_random
        );
        return Ok(());
    }
    println!("read {} files: {}", m.inputs.len(), m.inputs.join(", "));
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
