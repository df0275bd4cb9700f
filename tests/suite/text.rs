//! Corpus reading, packing, shards and masking, on the real WikiText-2 files.

use crate::common;
use common::{data, on_threads};

use std::io::Write;
use std::path::PathBuf;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use trueneg::text::batches::{Batch, BatchStream, DataPosition};
use trueneg::text::corpus::read_documents;
use trueneg::text::examples::{Example, PackingConfig, pack_document};
use trueneg::text::masking::{MaskingConfig, mask_batch};
use trueneg::text::prepare::{PrepareOptions, PrepareReport};
use trueneg::text::shards::{Manifest, ShardSet};
use trueneg::text::tokenizer::{SpecialIds, WordPieceTokenizer};

/// `prepare` inside the frame, with `opts.out` claimed as the command line claims it.
fn prepare(opts: &PrepareOptions) -> trueneg::Result<PrepareReport> {
    trueneg::frame::in_folder("prepare", &opts.out, |out| {
        trueneg::text::prepare::prepare(opts, out)
    })
}

fn prepare_opts(inputs: Vec<PathBuf>, out: PathBuf, vocab: usize) -> PrepareOptions {
    PrepareOptions {
        inputs,
        tokenizer: None,
        train_vocab: Some(vocab),
        max_seq_len: 128,
        out,
        seed: 7,
        examples_per_shard: 500,
        show_progress: false,
        records: None,
        text_field: None,
    }
}

#[test]
fn reads_real_wikitext_and_packs_electra_examples() {
    let docs = read_documents(&data("wikitext-2/wiki.valid.tokens")).unwrap();
    let lines: usize = docs.iter().map(|d| d.lines.len()).sum();
    assert!(lines > 1000, "{lines} non-empty lines");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("shards");
    let r = prepare(&prepare_opts(
        vec![data("wikitext-2/wiki.test.raw")],
        out.clone(),
        3000,
    ))
    .unwrap();
    let m = &r.manifest;
    assert!(m.examples > 1000, "{} examples", m.examples);
    assert!(m.shards.len() >= 3, "several shards");
    assert_eq!(m.token_bytes, 2);
    let single = m.single_segment_examples as f64 / m.examples as f64;
    assert!(
        (0.03..0.3).contains(&single),
        "single-segment share {single}"
    );

    let set = ShardSet::open(&out).unwrap();
    let s = m.special_ids;
    let mut full = 0;
    for i in 0..set.len() {
        let e = set.get(i);
        assert!(e.tokens.len() <= 128);
        assert_eq!(e.tokens[0], s.cls);
        assert_eq!(e.tokens[e.segment_a_len - 1], s.sep);
        assert_eq!(*e.tokens.last().unwrap(), s.sep);
        full += usize::from(e.tokens.len() == 128);
    }
    assert!(full * 2 > set.len(), "most examples fill max_seq_len");
    // Re-running into the same folder is refused and leaves the files alone.
    let before = std::fs::read(out.join("manifest.json")).unwrap();
    let err = prepare(&prepare_opts(
        vec![data("wikitext-2/wiki.test.raw")],
        out.clone(),
        3000,
    ))
    .unwrap_err();
    assert!(err.to_string().contains("already holds"), "{err}");
    assert_eq!(before, std::fs::read(out.join("manifest.json")).unwrap());
}

#[test]
fn prepare_is_deterministic_and_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let input = data("wikitext-2/wiki.test.raw");
    // Trained twice, on 3 threads and on 1, the vocabulary and the shards are byte-identical
    // for a given seed.
    let prepared = |threads: usize, out: &str| {
        on_threads(threads, || {
            prepare(&prepare_opts(
                vec![input.clone()],
                dir.path().join(out),
                2000,
            ))
        })
        .unwrap()
    };
    let first = prepared(3, "t");
    let again = prepared(1, "t2");
    assert_eq!(first.manifest.shards.len(), again.manifest.shards.len());
    for f in first
        .manifest
        .shards
        .iter()
        .map(|s| s.file.as_str())
        .chain(["tokenizer.json", "manifest.json"])
    {
        assert!(
            std::fs::read(dir.path().join("t").join(f)).unwrap()
                == std::fs::read(dir.path().join("t2").join(f)).unwrap(),
            "{f} differs between two runs"
        );
    }
    let mut o = prepare_opts(vec![input.clone()], dir.path().join("a"), 0);
    o.train_vocab = None;
    o.tokenizer = Some(dir.path().join("t/tokenizer.json"));
    let a = prepare(&o).unwrap();
    o.out = dir.path().join("b");
    let b = prepare(&o).unwrap();
    assert_eq!(
        a.manifest.tokenizer_fingerprint,
        first.manifest.tokenizer_fingerprint
    );
    assert_eq!(a.manifest.examples, b.manifest.examples);
    assert_eq!(
        a.manifest.tokenizer_fingerprint,
        b.manifest.tokenizer_fingerprint
    );
    for s in &a.manifest.shards {
        assert_eq!(
            std::fs::read(dir.path().join("a").join(&s.file)).unwrap(),
            std::fs::read(dir.path().join("b").join(&s.file)).unwrap()
        );
    }
    // Shard round trip: examples written = examples read.
    let examples = vec![
        Example {
            tokens: vec![2, 10, 11, 3, 12, 3],
            segment_a_len: 4,
        },
        Example {
            tokens: vec![2, 40000, 3],
            segment_a_len: 3,
        },
    ];
    for tb in [2usize, 4] {
        let ex: Vec<Example> = if tb == 2 {
            examples[..1].to_vec()
        } else {
            examples.clone()
        };
        let sub = dir.path().join(format!("rt{tb}"));
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(
            sub.join("shard-00000.bin"),
            trueneg::text::shards::encode_records(&ex, 8, tb),
        )
        .unwrap();
        let mut m: Manifest =
            serde_json::from_slice(&std::fs::read(dir.path().join("a/manifest.json")).unwrap())
                .unwrap();
        m.token_bytes = tb;
        m.max_seq_len = 8;
        m.examples = ex.len();
        m.shards = vec![trueneg::text::shards::ShardInfo {
            file: "shard-00000.bin".into(),
            examples: ex.len(),
        }];
        std::fs::write(
            sub.join("manifest.json"),
            serde_json::to_string(&m).unwrap(),
        )
        .unwrap();
        // A prepared folder keeps its tokenizer (checked against the manifest).
        std::fs::copy(
            dir.path().join("a/tokenizer.json"),
            sub.join("tokenizer.json"),
        )
        .unwrap();
        let set = ShardSet::open(&sub).unwrap();
        let back: Vec<Example> = (0..set.len()).map(|i| set.get(i)).collect();
        assert_eq!(back, ex);
    }
}

/// The deterministic trainer makes the vocabulary `tokenizers`' WordPiece trainer makes, up to
/// the order of equally frequent merges: the same alphabet, and nearly the same pieces.
#[test]
fn trained_vocabulary_matches_the_tokenizers_trainer() {
    use tokenizers::models::TrainerWrapper;
    use tokenizers::models::wordpiece::{WordPiece, WordPieceTrainer};
    let texts: Vec<String> = read_documents(&data("wikitext-2/wiki.test.raw"))
        .unwrap()
        .into_iter()
        .flat_map(|d| d.lines)
        .collect();
    let ours = WordPieceTokenizer::train(&texts, 3000).unwrap();
    let mut trainer: TrainerWrapper = WordPieceTrainer::builder()
        .vocab_size(3000)
        .min_frequency(2)
        .show_progress(false)
        .special_tokens(
            trueneg::text::tokenizer::SPECIAL_TOKENS
                .iter()
                .map(|s| tokenizers::AddedToken::from(*s, true))
                .collect(),
        )
        .build()
        .into();
    let mut theirs = tokenizers::Tokenizer::new(WordPiece::default());
    theirs.with_normalizer(Some(tokenizers::normalizers::BertNormalizer::new(
        true, true, None, true,
    )));
    theirs.with_pre_tokenizer(Some(tokenizers::pre_tokenizers::bert::BertPreTokenizer));
    theirs.train(&mut trainer, texts.iter()).unwrap();
    let a: std::collections::HashSet<String> = ours.inner.get_vocab(true).into_keys().collect();
    let b: std::collections::HashSet<String> = theirs.get_vocab(true).into_keys().collect();
    assert_eq!(a.len(), b.len());
    let shared = a.intersection(&b).count();
    eprintln!(
        "{shared} of {} pieces shared with tokenizers' trainer",
        a.len()
    );
    assert!(
        shared as f64 >= 0.99 * a.len() as f64,
        "{shared} of {} tokens shared",
        a.len()
    );
    for s in trueneg::text::tokenizer::SPECIAL_TOKENS {
        assert!(ours.inner.token_to_id(s).is_some());
    }
    assert_eq!(ours.special.pad, 0);
    // Same text, same pieces on ordinary words.
    let line = "the game was released in japan in 2011 .";
    assert_eq!(
        ours.inner.encode(line, false).unwrap().get_tokens(),
        theirs.encode(line, false).unwrap().get_tokens()
    );
}

/// WikiText-2's test lines (accents, non-Latin words) and lines with special-token literals,
/// odd white space and characters the normaliser removes.
fn tricky_wikitext_lines() -> Vec<String> {
    let mut texts: Vec<String> = read_documents(&data("wikitext-2/wiki.test.raw"))
        .unwrap()
        .into_iter()
        .flat_map(|d| d.lines)
        .collect();
    texts.extend(
        [
            "A [MASK] is here. Then [SEP] and [cls] follow.",
            "Caf\u{e9} na\u{ef}ve \u{5317}\u{4eac} r\u{e9}sum\u{e9}.\u{a0}Next one\u{200b}here.",
            "Tabs\tand\u{c}form feeds.\u{c}Then\u{85}more   spaces .",
        ]
        .map(String::from),
    );
    texts
}

#[test]
fn a_vocabulary_counted_in_batches_is_the_one_counted_at_once() {
    // `prepare --train-vocab` counts words a batch at a time, then tokenizes in a second pass:
    // the vocabulary must not depend on the batches, and the shards must be those of `prepare
    // --tokenizer` with the vocabulary it trained. Real text (WikiText-2's test split, with its
    // accents and non-Latin words), plus lines with special-token literals, odd white space and
    // characters the normaliser removes.
    let texts = tricky_wikitext_lines();
    let whole = WordPieceTokenizer::train(&texts, 3000).unwrap();
    let mut counts = WordPieceTokenizer::word_counts();
    for batch in texts.chunks(997) {
        counts.add(batch).unwrap();
    }
    let batched = WordPieceTokenizer::train_on(counts, 3000).unwrap();
    assert_eq!(whole.to_json(), batched.to_json(), "the same vocabulary");
    assert_eq!(whole.vocab_size(), 3000);

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let corpus = dir.join("corpus.txt");
    std::fs::write(&corpus, texts.join("\n") + "\n").unwrap();
    let trained = prepare(&prepare_opts(
        vec![corpus.clone()],
        dir.join("trained"),
        3000,
    ))
    .unwrap();
    let mut given = prepare_opts(vec![corpus], dir.join("given"), 0);
    (given.train_vocab, given.tokenizer) = (None, Some(dir.join("trained/tokenizer.json")));
    let given = prepare(&given).unwrap();
    assert_eq!(trained.manifest.examples, given.manifest.examples);
    assert!(trained.manifest.examples > 1000);
    for s in &trained.manifest.shards {
        let a = std::fs::read(dir.join("trained").join(&s.file)).unwrap();
        let b = std::fs::read(dir.join("given").join(&s.file)).unwrap();
        assert!(a == b, "{}: the shards differ", s.file);
    }
}

#[test]
fn a_file_without_blank_lines_is_read_in_bounded_batches() {
    // One document the size of the file: `prepare` must still read it a batch at a time.
    use trueneg::text::corpus::CorpusReader;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let path = dir.join("one.txt");
    let line = "The quick brown fox jumps over the lazy dog. It was not amused.";
    std::fs::write(&path, format!("{line}\n").repeat(5000)).unwrap();
    let mut r = CorpusReader::open(&path).unwrap();
    let mut batches = 0;
    loop {
        let b = r.next_batch(16 * 1024).unwrap();
        if b.is_empty() {
            break;
        }
        batches += 1;
        assert!(b.len() <= 16 * 1024 / line.len() + 1, "{} lines", b.len());
        assert!(b.iter().all(|p| p.doc == 0 && p.text == line));
    }
    assert_eq!(batches, (5000 * line.len()).div_ceil(16 * 1024));
    assert_eq!(r.documents(), 1);
    assert_eq!(r.bytes_read(), std::fs::metadata(&path).unwrap().len());
    let docs = read_documents(&path).unwrap();
    assert_eq!((docs.len(), docs[0].lines.len()), (1, 5000));
}

#[test]
fn paragraphs_split_into_sentences() {
    use trueneg::text::sentences::split_sentences;
    let p = "Mr. Smith met J. R. Tolkien in 1950. It rained! Did it? \"Yes.\" The end";
    assert_eq!(
        split_sentences(p),
        vec![
            "Mr. Smith met J. R. Tolkien in 1950.",
            "It rained!",
            "Did it?",
            "\"Yes.\"",
            "The end"
        ]
    );
    assert_eq!(split_sentences("no end mark"), vec!["no end mark"]);
    assert_eq!(
        split_sentences("version 2.5 is out. ok"),
        vec!["version 2.5 is out. ok"]
    );
}

#[test]
fn packing_follows_electra_rules() {
    let cfg = PackingConfig::new(16, 2, 3);
    let lines: Vec<Vec<u32>> = (0..40).map(|i| vec![100 + i; 5]).collect();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let ex = pack_document(&lines, &cfg, &mut rng);
    assert!(ex.len() >= 10);
    for e in &ex {
        assert!(e.tokens.len() <= 16);
        assert_eq!(e.tokens[0], 2);
        assert_eq!(e.tokens[e.segment_a_len - 1], 3);
    }
}

#[test]
fn bad_corpus_input_gives_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.txt");
    let mut f = std::fs::File::create(&bad).unwrap();
    f.write_all(b"fine line\nbroken \xff\xfe bytes\n").unwrap();
    let e = read_documents(&bad).unwrap_err().to_string();
    assert!(e.contains("bad.txt:2") && e.contains("UTF-8"), "{e}");
    assert!(!e.contains('\n'));

    let jsonl = dir.path().join("x.jsonl");
    std::fs::write(&jsonl, "{\"text\": \"a b\"}\n{\"title\": 1}\n").unwrap();
    let e = read_documents(&jsonl).unwrap_err().to_string();
    assert!(e.contains("x.jsonl:2") && e.contains("text"), "{e}");

    let empty = dir.path().join("empty.txt");
    std::fs::write(&empty, "\n\n").unwrap();
    let vocab = dir.path().join("vocab.txt");
    std::fs::write(&vocab, "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n").unwrap();
    let mut o = prepare_opts(vec![empty], dir.path().join("out"), 0);
    o.train_vocab = None;
    o.tokenizer = Some(vocab);
    let e = prepare(&o).unwrap_err().to_string();
    assert!(e.contains("empty.txt") && e.contains("no text"), "{e}");

    let o = prepare_opts(
        vec![dir.path().join("missing.txt")],
        dir.path().join("out2"),
        100,
    );
    let e = prepare(&o).unwrap_err().to_string();
    assert!(
        e.contains("missing.txt") && e.contains("no such file"),
        "{e}"
    );
}

#[test]
fn gzipped_jsonl_corpus_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.jsonl.gz");
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&p).unwrap(),
        flate2::Compression::default(),
    );
    gz.write_all(b"{\"text\": \"first line\\nsecond line\"}\n{\"text\": \"another doc\"}\n")
        .unwrap();
    gz.finish().unwrap();
    let docs = read_documents(&p).unwrap();
    assert_eq!(docs.len(), 2);
    assert_eq!(docs[0].lines, vec!["first line", "second line"]);
}

#[test]
fn vocab_txt_tokenizer_is_uncased_wordpiece() {
    let dir = tempfile::tempdir().unwrap();
    let vocab = dir.path().join("vocab.txt");
    std::fs::write(
        &vocab,
        "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\nplay\n##ing\n,\n",
    )
    .unwrap();
    let t = WordPieceTokenizer::load(&vocab).unwrap();
    assert_eq!(
        t.special,
        SpecialIds {
            pad: 0,
            unk: 1,
            cls: 2,
            sep: 3,
            mask: 4
        }
    );
    assert_eq!(t.encode("The Playing, zzz"), vec![5, 6, 7, 8, 1]);
}

fn masking_stats(cfg: &MaskingConfig) -> (f64, f64, f64, f64) {
    let special = SpecialIds {
        pad: 0,
        unk: 1,
        cls: 2,
        sep: 3,
        mask: 4,
    };
    let examples: Vec<Example> = (0..64)
        .map(|i| {
            let n = 20 + i % 100;
            let mut t = vec![2];
            t.extend((0..n).map(|k| 10 + ((k * 7 + i) % 900) as u32));
            t.push(3);
            Example {
                segment_a_len: t.len(),
                tokens: t,
            }
        })
        .collect();
    let batch = Batch::from_examples(&examples, 0);
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let (mut masked, mut candidates, mut as_mask, mut kept) = (0usize, 0usize, 0usize, 0usize);
    for _ in 0..50 {
        let m = mask_batch(&batch, cfg, &special, 1000, &mut rng);
        for (&p, &l) in m.positions.iter().zip(&m.labels) {
            assert_eq!(batch.ids[p], l);
            assert!(![0, 1, 2, 3, 4].contains(&l), "special token masked");
            if m.input_ids[p] == 4 {
                as_mask += 1
            } else if m.input_ids[p] == l {
                kept += 1
            }
        }
        let per_row: Vec<usize> = (0..batch.batch)
            .map(|r| m.positions.iter().filter(|&&p| p / batch.len == r).count())
            .collect();
        assert!(per_row.iter().all(|&n| n <= cfg.max_predictions));
        masked += m.positions.len();
        candidates += examples.iter().map(|e| e.tokens.len() - 2).sum::<usize>();
    }
    let random = masked - as_mask - kept;
    (
        masked as f64 / candidates as f64,
        as_mask as f64 / masked as f64,
        random as f64 / masked as f64,
        kept as f64 / masked as f64,
    )
}

#[test]
fn masking_statistics_follow_the_config() {
    let bert = MaskingConfig {
        prob: 0.15,
        mask_frac: 0.8,
        random_frac: 0.1,
        max_predictions: 1000,
    };
    let (rate, m, r, k) = masking_stats(&bert);
    assert!((rate - 0.15).abs() < 0.01, "rate {rate}");
    assert!(
        (m - 0.8).abs() < 0.02 && (r - 0.1).abs() < 0.02 && (k - 0.1).abs() < 0.02,
        "{m} {r} {k}"
    );
    let electra = MaskingConfig {
        max_predictions: 19,
        ..MaskingConfig::default()
    };
    let (_, m, r, k) = masking_stats(&electra);
    assert!(
        (m - 0.85).abs() < 0.02 && r == 0.0 && (k - 0.15).abs() < 0.02,
        "{m} {r} {k}"
    );
}

#[test]
fn batch_stream_resumes_at_a_saved_position() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s");
    prepare(&prepare_opts(
        vec![data("wikitext-2/wiki.test.raw")],
        out.clone(),
        2000,
    ))
    .unwrap();
    let set = ShardSet::open(&out).unwrap();
    let mut a = BatchStream::new(&set, 5, 64, DataPosition::default());
    let all: Vec<Batch> = (0..60).map(|_| a.next_batch().unwrap()).collect();
    assert!(a.position.epoch >= 1, "wrapped into a second epoch");
    let mut b = BatchStream::new(&set, 5, 64, DataPosition::default());
    for _ in 0..37 {
        b.next_batch().unwrap();
    }
    let mut c = BatchStream::new(&set, 5, 64, b.position);
    for want in &all[37..] {
        assert_eq!(&c.next_batch().unwrap(), want);
    }
}

/// `prepare --text-field`: a `datasets`-style JSONL whose documents sit under another field
/// gives the same shards as the plain text of those documents.
#[test]
fn jsonl_documents_are_read_from_the_chosen_field() {
    let dir = tempfile::tempdir().unwrap();
    let docs = read_documents(&data("wikitext-2/wiki.valid.tokens")).unwrap();
    let docs = &docs[..40];
    let (mut jsonl, mut txt) = (String::new(), String::new());
    for d in docs {
        let text = d.lines.join("\n");
        jsonl.push_str(&serde_json::json!({"id": 1, "content": text}).to_string());
        jsonl.push('\n');
        txt.push_str(&text);
        txt.push_str("\n\n");
    }
    let (j, t) = (dir.path().join("c.jsonl"), dir.path().join("c.txt"));
    std::fs::write(&j, jsonl).unwrap();
    std::fs::write(&t, txt).unwrap();
    let run = |input: &PathBuf, out: &str, field: Option<&str>| {
        let mut c = common::bin();
        c.args([
            "prepare",
            "--train-vocab",
            "300",
            "--max-seq-len",
            "32",
            "--input",
        ])
        .arg(input)
        .arg("--out")
        .arg(dir.path().join(out));
        if let Some(f) = field {
            c.args(["--text-field", f]);
        }
        c.output().unwrap()
    };
    let e = common::fails(run(&j, "plain", None));
    assert!(
        e.contains("c.jsonl:1: no string field `text` (choose the field with --text-field)"),
        "{e}"
    );
    common::ok(run(&j, "json", Some("content")));
    common::ok(run(&t, "txt", None));
    let shard = |out: &str| std::fs::read(dir.path().join(out).join("shard-00000.bin")).unwrap();
    assert_eq!(shard("json"), shard("txt"));
}
