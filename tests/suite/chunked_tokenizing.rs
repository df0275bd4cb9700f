//! Corpus text read a white-space-separated chunk at a time (`text::chunk_memo`) gives the ids
//! the `tokenizers` pipeline gives the whole text: on the shared corpora, on random text full of
//! the characters where BERT's normaliser and pre-tokeniser differ (control characters, every
//! kind of white space, accents, CJK, special-token strings), and for every pipeline a
//! `tokenizer.json` may hold (the pipelines that are not BERT's read the whole text). Words
//! counted for a vocabulary a chunk at a time are the whole texts' words.

use crate::common;
use common::data;

use std::path::Path;
use std::sync::OnceLock;

use proptest::prelude::*;
use serde_json::{Value, json};
use tokenizers::Tokenizer;
use trueneg::text::WordPieceTokenizer;
use trueneg::text::chunk_memo::ChunkMemo;

/// `tok`'s `tokenizers` pipeline reading special-token strings as text: the reference, which
/// tokenises each text whole.
fn reference(tok: &WordPieceTokenizer) -> Tokenizer {
    let mut t = tok.inner.clone();
    t.set_encode_special_tokens(true);
    t
}

/// The reference's ids of the whole text.
fn whole_ids(reference: &Tokenizer, text: &str) -> Vec<u32> {
    reference
        .encode_fast(text, false)
        .unwrap()
        .get_ids()
        .to_vec()
}

/// A tokenizer under test, its reference and whether it should read in chunks.
struct Pipeline {
    name: &'static str,
    tok: WordPieceTokenizer,
    reference: Tokenizer,
    chunked: bool,
}

fn pipeline(name: &'static str, tok: WordPieceTokenizer, chunked: bool) -> Pipeline {
    let reference = reference(&tok);
    Pipeline {
        name,
        tok,
        reference,
        chunked,
    }
}

/// The words of the whole text after BERT's uncased normaliser and pre-tokeniser.
fn whole_words(text: &str) -> Vec<String> {
    use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
    use tokenizers::{Normalizer, OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer};
    let normalizer = tokenizers::normalizers::BertNormalizer::new(true, true, None, true);
    let mut s = PreTokenizedString::from(text);
    s.normalize(|n| normalizer.normalize(n)).unwrap();
    BertPreTokenizer.pre_tokenize(&mut s).unwrap();
    s.get_splits(OffsetReferential::Original, OffsetType::Byte)
        .into_iter()
        .map(|(w, _, _)| w.to_string())
        .filter(|w| !w.is_empty())
        .collect()
}

/// Characters where a chunk could go wrong, and the words around them.
const PIECES: &[&str] = &[
    "the",
    "Main",
    "primary",
    "ÉTÉ",
    "café",
    "cafe\u{301}",
    "\u{301}",
    "naïve",
    "Straße",
    "İstanbul",
    "ΣΊΣΥΦΟΣ",
    "中国",
    "語",
    "日本語",
    "한국어",
    "1,000",
    "U.S.",
    "--",
    "'s",
    "(",
    ")",
    "#",
    "##",
    "[MASK]",
    "[CLS]",
    "[SEP]",
    "[mask]",
    "<br />",
    "\u{FFFD}",
    "\u{0}",
    "\u{1}",
    "\u{7}",
    "\u{7F}",
    "\u{200B}",
    "\u{FEFF}",
    "\u{AD}",
    " ",
    "  ",
    "\t",
    "\n",
    "\r",
    "\u{B}",
    "\u{C}",
    "\u{1C}",
    "\u{1F}",
    "\u{85}",
    "\u{A0}",
    "\u{1680}",
    "\u{2002}",
    "\u{2009}",
    "\u{2028}",
    "\u{2029}",
    "\u{202F}",
    "\u{205F}",
    "\u{3000}",
    "x\u{85}y",
    "a\u{B}b",
    "w\u{2009}v",
    "\u{1F600}",
];

/// A vocabulary trained on WikiText-2's test split and on the pieces above, so that their
/// characters have tokens of their own.
fn trained() -> &'static WordPieceTokenizer {
    static T: OnceLock<WordPieceTokenizer> = OnceLock::new();
    T.get_or_init(|| {
        let text = std::fs::read_to_string(data("wikitext-2/wiki.test.raw")).unwrap();
        let mut lines: Vec<String> = text.lines().take(2000).map(String::from).collect();
        lines.extend(PIECES.iter().map(|p| format!("{p} {p}{p} a{p}b")));
        WordPieceTokenizer::train(&lines, 1500).unwrap()
    })
}

/// `trained()` with its `tokenizer.json` changed by `edit`, loaded as a user's file is.
fn variant(dir: &Path, name: &str, edit: impl Fn(&mut Value)) -> WordPieceTokenizer {
    let mut v: Value = serde_json::from_str(&trained().to_json()).unwrap();
    edit(&mut v);
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, v.to_string()).unwrap();
    WordPieceTokenizer::load(&path).unwrap()
}

/// The pipelines a `tokenizer.json` may hold.
fn pipelines() -> &'static Vec<Pipeline> {
    static P: OnceLock<Vec<Pipeline>> = OnceLock::new();
    P.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let vocab: String = {
            let mut v: Vec<(String, u32)> = trained().inner.get_vocab(true).into_iter().collect();
            v.sort_by_key(|(_, id)| *id);
            v.into_iter().map(|(t, _)| t + "\n").collect()
        };
        std::fs::write(d.join("vocab.txt"), vocab).unwrap();
        let bert_normaliser = |clean: bool, chinese: bool, accents: Value, lower: bool| {
            json!({"type": "BertNormalizer", "clean_text": clean, "handle_chinese_chars": chinese,
                   "strip_accents": accents, "lowercase": lower})
        };
        let added = |v: &mut Value, special: bool| {
            let id = v["model"]["vocab"].as_object().unwrap().len();
            v["added_tokens"]
                .as_array_mut()
                .unwrap()
                .push(json!({"id": id, "content": "zqxj",
                "single_word": false, "lstrip": false, "rstrip": false, "normalized": true,
                "special": special}));
        };
        vec![
            pipeline("uncased (trained)", variant(d, "uncased", |_| {}), true),
            pipeline(
                "uncased (vocab.txt)",
                WordPieceTokenizer::load(&d.join("vocab.txt")).unwrap(),
                true,
            ),
            pipeline(
                "cased, raw text kept",
                variant(d, "cased", |v| {
                    v["normalizer"] = bert_normaliser(false, false, json!(false), false)
                }),
                true,
            ),
            pipeline(
                "lower case, accents kept",
                variant(d, "accents", |v| {
                    v["normalizer"] = bert_normaliser(true, true, json!(false), true)
                }),
                true,
            ),
            pipeline(
                "no normaliser",
                variant(d, "none", |v| v["normalizer"] = Value::Null),
                true,
            ),
            pipeline(
                "a special token of its own",
                variant(d, "special", |v| added(v, true)),
                true,
            ),
            pipeline(
                "an added word",
                variant(d, "added", |v| added(v, false)),
                false,
            ),
            pipeline(
                "truncated",
                variant(d, "truncated", |v| {
                    v["truncation"] = json!({"direction": "Right", "max_length": 12,
                    "strategy": "LongestFirst", "stride": 0})
                }),
                false,
            ),
            pipeline(
                "white-space pre-tokeniser",
                variant(d, "whitespace", |v| {
                    v["pre_tokenizer"] = json!({"type": "Whitespace"})
                }),
                false,
            ),
            pipeline(
                "a normaliser sequence",
                variant(d, "sequence", |v| {
                    v["normalizer"] = json!({"type": "Sequence", "normalizers": [
                    {"type": "NFD"}, {"type": "Lowercase"}, {"type": "StripAccents"}]})
                }),
                false,
            ),
        ]
    })
}

fn assert_same_ids(text: &str) {
    for p in pipelines() {
        assert_eq!(p.tok.reads_in_chunks(), p.chunked, "{}", p.name);
        assert_eq!(
            p.tok.encode_text(text),
            whole_ids(&p.reference, text),
            "{}: {text:?}",
            p.name
        );
    }
}

#[test]
fn chunked_ids_equal_the_pipeline_on_the_shared_corpora() {
    let mut texts: Vec<String> = Vec::new();
    for f in ["wikitext-2/wiki.test.raw", "wikitext-2/wiki.valid.tokens"] {
        let text = std::fs::read_to_string(data(f)).unwrap();
        texts.extend(text.lines().map(String::from));
    }
    let tsv = std::fs::read_to_string(data("counterfactual/sentiment/combined/train.tsv")).unwrap();
    texts.extend(tsv.lines().map(String::from));
    let squad: Value =
        serde_json::from_str(&std::fs::read_to_string(data("squad-v1.1/dev-half-a.json")).unwrap())
            .unwrap();
    for article in squad["data"].as_array().unwrap() {
        for p in article["paragraphs"].as_array().unwrap() {
            texts.push(p["context"].as_str().unwrap().to_string());
        }
    }
    let non_ascii = texts.iter().filter(|t| !t.is_ascii()).count();
    assert!(
        texts.len() > 10_000 && non_ascii > 500,
        "{} texts, {non_ascii} non-ASCII",
        texts.len()
    );
    let tok = trained();
    assert!(tok.reads_in_chunks());
    let whole = reference(tok);
    for text in &texts {
        assert_eq!(tok.encode_text(text), whole_ids(&whole, text), "{text:?}");
    }
}

/// Any ASCII bytes, among runs of letters longer than a WordPiece word may be.
fn ascii_text() -> impl Strategy<Value = String> {
    let part = prop_oneof![
        proptest::collection::vec(0u8..0x80, 0..24),
        proptest::collection::vec(b'a'..=b'z', 95..106),
    ];
    proptest::collection::vec(part, 0..6)
        .prop_map(|parts| parts.concat().into_iter().map(char::from).collect())
}

/// Vocabulary training counts the words BERT's normaliser and pre-tokeniser find in the texts.
fn assert_same_words(texts: &[String]) {
    let mut expected = std::collections::BTreeMap::<String, u64>::new();
    for t in texts {
        for w in whole_words(t) {
            *expected.entry(w).or_default() += 1;
        }
    }
    let mut counts = WordPieceTokenizer::word_counts();
    counts.add(texts).unwrap();
    assert_eq!(counts.sorted(), expected.into_iter().collect::<Vec<_>>());
}

fn tricky_text() -> impl Strategy<Value = String> {
    proptest::collection::vec(proptest::sample::select(PIECES), 0..24).prop_map(|p| p.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn chunked_ids_equal_the_pipeline_on_tricky_text(text in tricky_text()) {
        assert_same_ids(&text);
    }

    #[test]
    fn words_counted_by_chunk_equal_the_whole_texts_words(texts in proptest::collection::vec(tricky_text(), 1..6)) {
        assert_same_words(&texts);
    }

    #[test]
    fn chunked_ids_equal_the_pipeline_on_any_text(chars in proptest::collection::vec(any::<char>(), 0..40)) {
        assert_same_ids(&chars.into_iter().collect::<String>());
    }

    /// ASCII chunks take the byte rules (`text::ascii_chunk`): every ASCII byte, and words past
    /// WordPiece's 100 characters (one `[UNK]`).
    #[test]
    fn chunked_ids_equal_the_pipeline_on_any_ascii_text(text in ascii_text()) {
        assert_same_ids(&text);
    }

    #[test]
    fn words_counted_in_ascii_text_equal_the_whole_texts_words(texts in proptest::collection::vec(ascii_text(), 1..4)) {
        assert_same_words(&texts);
    }
}

#[test]
fn the_memo_stays_within_its_bound() {
    let whole = reference(trained());
    let memo = ChunkMemo::with_limit(4096);
    let text: String = (0..5000).map(|i| format!("w{i} ")).collect();
    let ids = memo.ids(&text, |chunk| whole_ids(&whole, chunk));
    assert_eq!(ids, whole_ids(&whole, &text));
    let kept = memo.remembered();
    assert!(kept > 0 && kept < 4096 / 64, "{kept} chunks remembered");
    // A chunk seen again is taken from the memo: `encode` is not asked for it.
    let again = memo.ids("w4999 w4999", |_| panic!("w4999 was remembered"));
    assert_eq!(again, whole_ids(&whole, "w4999 w4999"));
}

/// The ids of a text file's one long line, read as the corpus reader cuts it (pieces of about
/// 1 MiB), one piece after the other, against the reference's ids of the whole line.
fn ids_of_long_line(line: &str) -> (Vec<u32>, Vec<u32>, usize) {
    let tok = WordPieceTokenizer::load(&common::shards().join("tokenizer.json")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("one-line.txt");
    std::fs::write(&path, format!("{line}\n")).unwrap();
    let mut reader = trueneg::text::corpus::CorpusReader::open(&path).unwrap();
    let pieces = reader.next_batch(1 << 30).unwrap();
    let reference = reference(&tok);
    let cut: Vec<u32> = pieces
        .iter()
        .flat_map(|p| whole_ids(&reference, &p.text))
        .collect();
    (cut, whole_ids(&reference, line), pieces.len())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 6,
        ..ProptestConfig::default()
    })]

    /// A line over 1 MiB is cut only at white space where the tokenizer itself splits: never
    /// at a form feed or vertical tab (control characters the normaliser removes, joining the
    /// words beside them), never inside a word. So the pieces' ids are the whole line's, for
    /// words separated by every kind of white space.
    #[test]
    fn a_long_line_is_cut_only_where_the_tokenizer_splits(
        seps in proptest::collection::vec(0usize..7, 64),
        words in proptest::collection::vec(0usize..PIECES.len(), 64),
    ) {
        const SEPS: [&str; 7] = [" ", "\u{c}", "\u{b}", "\t", "\u{a0}", "\u{3000}", "\u{c} "];
        // A text file's one line: no NUL, no line end.
        let usable: Vec<&str> = PIECES
            .iter()
            .copied()
            .filter(|p| !p.contains(['\0', '\n', '\r']))
            .collect();
        let mut line = String::new();
        let mut i = 0;
        while line.len() < (1 << 20) + 300_000 {
            line += usable[words[i % 64] % usable.len()];
            line += SEPS[seps[(i * 7 + i / 64) % 64]];
            i += 1;
        }
        let (cut, whole, pieces) = ids_of_long_line(line.trim());
        prop_assert!(pieces >= 2, "{pieces} pieces");
        prop_assert!(cut == whole, "ids differ across the cut");
    }
}

/// A 1.5 MiB run whose only white space is form feeds (which the tokenizer removes) is one
/// word to the tokenizer: it is read whole, not cut between characters.
#[test]
fn a_long_run_without_a_split_is_read_whole() {
    let run = "abc\u{c}".repeat(400_000);
    let line = format!("before {run} after");
    let (cut, whole, pieces) = ids_of_long_line(&line);
    assert_eq!(cut, whole);
    assert!(pieces <= 2, "{pieces} pieces");
}
