//! `prepare --triples`: the corpus's sentences → (original, synonym, antonym) sentence triples →
//! shards + manifest, through the same reading, tokenizer, shard writer and manifest as packed
//! examples ([`super::prepare`]); the triples themselves come from [`super::triples`].

use std::path::PathBuf;

use rayon::prelude::*;

use super::corpus::for_each_batch;
use super::prepare::{Preparing, RecordMaker, Written, input_list, token_bytes};
use super::sentences::split_sentences;
use super::shards::{ShardWriter, TripleData, TripleRecord, encode_triples};
use super::tokenizer::WordPieceTokenizer;
use super::triples::{
    AntKind, IGNORE, LabeledPieces, Replacement, SynKind, TripleConfig, TripleExample,
    TripleGenerator,
};
use crate::{Error, Result};

/// `prepare --triples`: the generation settings and the WordNet database.
pub struct TripleMaker {
    pub config: TripleConfig,
    pub wordnet: PathBuf,
}

impl RecordMaker for TripleMaker {
    fn own_files(&self) -> &'static [&'static str] {
        &[SAMPLES]
    }

    fn write(&self, prepared: Preparing<'_>) -> Result<Written> {
        write_triples(self, prepared)
    }
}

/// `prepare --triples` writes every 100th triple (at most 40) here, to be read by a person.
pub const SAMPLES: &str = "samples.md";

/// Replacements as `old → new (kind)`, comma-separated.
fn replacement_list<K: std::fmt::Debug>(ori: &str, r: &[Replacement<K>]) -> String {
    r.iter()
        .map(|r| {
            let kind = format!("{:?}", r.kind).to_lowercase();
            format!("{} → {} ({kind})", &ori[r.start..r.end], r.new)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// One triple as Markdown: the three sentences and each replacement with its kind.
fn sample_md(n: usize, ex: &TripleExample) -> String {
    format!(
        "**{n}.** {}\n\n- x_syn: {}\n  - {}\n- x_ant: {}\n  - {}\n\n",
        ex.ori,
        ex.syn,
        replacement_list(&ex.ori, &ex.syn_replaced),
        ex.ant,
        replacement_list(&ex.ori, &ex.ant_replaced)
    )
}

/// One sentence → its triple record, or `None` when a side has no word to replace. The three
/// sentences are cut to `max_len − 2` pieces and framed by `[CLS]` … `[SEP]`.
fn triple_record(
    generator: &TripleGenerator,
    tokenizer: &WordPieceTokenizer,
    sentence: &str,
    seed: u64,
    index: u64,
    max_len: usize,
) -> Option<(TripleRecord, TripleExample, bool)> {
    let ex = generator.example(sentence, seed, index);
    if ex.syn_replaced.is_empty() || ex.ant_replaced.is_empty() {
        return None;
    }
    let none: &[Replacement<SynKind>] = &[];
    let ori = TripleGenerator::pieces(tokenizer, &ex.ori, &ex.candidates, none, 0);
    let syn = TripleGenerator::pieces(tokenizer, &ex.ori, &ex.candidates, &ex.syn_replaced, 1);
    let ant = TripleGenerator::pieces(tokenizer, &ex.ori, &ex.candidates, &ex.ant_replaced, 2);
    let s = tokenizer.special;
    let keep = max_len - 2;
    // Too long: all three are cut after the same words, the most that fit on every side.
    let truncated = [&ori, &syn, &ant].iter().any(|p| p.ids.len() > keep);
    let (ori, syn, ant) = if truncated {
        let fits = |p: &LabeledPieces| p.words.get(keep).copied().unwrap_or(usize::MAX);
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
    let record = TripleRecord {
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

/// `prepare --triples`: every sentence of the corpus (its lines split by [`split_sentences`])
/// becomes one (x_ori, x_syn, x_ant) record; sentence `i` draws from an RNG seeded by
/// (seed, i), so the output is the same whatever the number of threads.
fn write_triples(c: &TripleMaker, prepared: Preparing<'_>) -> Result<Written> {
    let Preparing {
        opts,
        files,
        tokenizer,
        bar,
    } = prepared;
    check_triple_config(&c.config)?;
    let wn = crate::lexicon::wordnet::WordNet::open(&c.wordnet)?;
    let generator = TripleGenerator::new(
        &wn,
        c.config.clone(),
        &TripleGenerator::vocabulary_of(tokenizer),
    );
    let token_bytes = token_bytes(tokenizer);
    let mut data = TripleData {
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
        encode_triples(c, opts.max_seq_len, token_bytes)
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
                triple_record(
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
        "# Sentence triples: samples\n\nEvery 100th triple of {} (triple number in bold), as text before tokenization.\n\n",
        input_list(files)
    );
    crate::io::write_atomic(
        &opts.out.join(SAMPLES),
        (header + &samples.concat()).as_bytes(),
    )?;
    Ok(Written {
        examples,
        tokens,
        single_segment_examples: examples,
        shards,
        triples: Some(data),
    })
}

/// The replaced shares and cap are shares.
fn check_triple_config(cc: &TripleConfig) -> Result<()> {
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
fn count_replacements(data: &mut TripleData, ex: &TripleExample, truncated: bool) {
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
