//! The synonym table a model finds in its own embeddings (`text::self_synonyms`): on embeddings
//! whose neighbours are known, the kept pairs are exactly the close whole words, made
//! symmetric, with special tokens, pieces, punctuation, numbers and stop words left out; the
//! same embeddings give the same table; agreement and change against another table are their
//! shares of pairs. On a tiny trained run's embeddings the table has the same properties.

use crate::common;

use std::collections::BTreeSet;

use burn::prelude::*;
use trueneg::text::self_synonyms::{SelfSynonyms, agreement, candidate_ids, changed};
use trueneg::text::{SynonymTable, WordPieceTokenizer};

const WORDS: [&str; 17] = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "big", "large", "huge", "small", "tiny", "the",
    ",", "42", "##s", "dog", "cat", "a",
];

fn tokenizer(dir: &std::path::Path) -> WordPieceTokenizer {
    let path = dir.join("vocab.txt");
    std::fs::write(&path, WORDS.join("\n")).unwrap();
    WordPieceTokenizer::load(&path).unwrap()
}

/// Directions: big, large and huge near one axis; small and tiny near another; dog and cat at
/// cosine 0.6; "the", the specials, ",", "42" and "##s" exactly on big's axis; "a" alone.
fn embeddings(device: &Device) -> Tensor<2> {
    let row = |w: &str| -> [f32; 4] {
        match w {
            "large" => [1.0, 0.1, 0.0, 0.0],
            "huge" => [1.0, 0.0, 0.1, 0.0],
            "small" => [0.0, 1.0, 0.0, 0.0],
            "tiny" => [0.05, 1.0, 0.0, 0.0],
            "dog" => [0.0, 0.0, 1.0, 0.0],
            "cat" => [0.0, 0.0, 0.6, 0.8],
            "a" => [0.0, 0.0, -1.0, 0.0],
            _ => [1.0, 0.0, 0.0, 0.0],
        }
    };
    let v: Vec<f32> = WORDS.iter().flat_map(|w| row(w)).collect();
    Tensor::from_data(TensorData::new(v, [WORDS.len(), 4]), device)
}

fn all_pairs(t: &SynonymTable) -> BTreeSet<(u32, u32)> {
    (0..t.vocab_size() as u32)
        .flat_map(|a| t.synonyms(a).iter().map(move |&b| (a, b)))
        .collect()
}

fn is_symmetric(t: &SynonymTable) -> bool {
    all_pairs(t).iter().all(|&(a, b)| t.are_synonyms(b, a))
}

#[test]
fn the_self_table_keeps_close_whole_words_both_ways_and_leaves_out_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let tok = tokenizer(dir.path());
    let device = Device::flex();
    let id = |w: &str| tok.inner.token_to_id(w).unwrap();
    let stop: BTreeSet<String> = ["the".to_string()].into();
    let candidates = candidate_ids(&tok, &stop, None);
    // "the" is in the stop list and a function word; "a" is a function word.
    for w in ["[CLS]", ",", "42", "##s", "the", "a"] {
        assert!(!candidates.contains(&id(w)), "{w} is no candidate");
    }
    let build = SelfSynonyms {
        k: 2,
        threshold: 0.8,
        stop_words: stop,
    };
    let table = build.build(embeddings(&device), &candidates, &tok, "self");
    let want: BTreeSet<(u32, u32)> = [
        ("big", "large"),
        ("big", "huge"),
        ("large", "huge"),
        ("small", "tiny"),
    ]
    .iter()
    .flat_map(|&(a, b)| [(id(a), id(b)), (id(b), id(a))])
    .collect();
    assert_eq!(all_pairs(&table), want);
    assert!(is_symmetric(&table));
    // Below the threshold (dog–cat 0.6) nothing; with a lower one, dog and cat.
    let looser = SelfSynonyms {
        threshold: 0.5,
        ..build.clone()
    };
    let t2 = looser.build(embeddings(&device), &candidates, &tok, "self");
    assert!(t2.are_synonyms(id("dog"), id("cat")));
    // The same embeddings, the same table.
    let again = build.build(embeddings(&device), &candidates, &tok, "self");
    assert_eq!(all_pairs(&again), all_pairs(&table));
    // Against a reference with big–large and dog–cat: 2 of our 8 pairs are its, 2 of its 4
    // ours.
    let reference = SynonymTable::from_pairs(
        tok.vocab_size(),
        tok.fingerprint(),
        "reference".into(),
        vec![(id("big"), id("large")), (id("dog"), id("cat"))],
    );
    let (p, r) = agreement(&table, &reference, &candidates);
    assert_eq!((p, r), (Some(2.0 / 8.0), Some(2.0 / 4.0)));
    assert_eq!(changed(&table, &again), 0.0);
    // 10 pairs in either, 2 in both: 8 / 10 differ.
    assert!((changed(&table, &reference) - 0.8).abs() < 1e-12);
}

#[test]
fn a_trained_runs_embeddings_give_a_symmetric_deterministic_table_of_whole_words() {
    let dir = tempfile::tempdir().unwrap();
    let run = common::pretrained_tiny(dir.path());
    let tok = WordPieceTokenizer::load(&run.join("tokenizer.json")).unwrap();
    let checkpoints = trueneg::train::checkpoint::list(&run);
    let (_, last) = checkpoints.last().unwrap();
    let weights =
        trueneg::interop::tensors::read_safetensors(&last.join("model.safetensors")).unwrap();
    let e = &weights.tensors["electra.embeddings.word_embeddings.weight"];
    let device = Device::flex();
    let emb = || {
        Tensor::<2>::from_data(
            TensorData::new(e.values.clone(), [e.shape[0], e.shape[1]]),
            &device,
        )
    };
    let candidates = candidate_ids(&tok, &BTreeSet::new(), None);
    let build = SelfSynonyms {
        k: 5,
        threshold: 0.3,
        stop_words: BTreeSet::new(),
    };
    let table = build.build(emb(), &candidates, &tok, "self");
    let pairs = all_pairs(&table);
    assert!(pairs.len() > 100, "{} pairs", pairs.len());
    assert!(is_symmetric(&table));
    let words: BTreeSet<u32> = candidates.iter().copied().collect();
    assert!(
        pairs
            .iter()
            .all(|(a, b)| words.contains(a) && words.contains(b))
    );
    let again = build.build(emb(), &candidates, &tok, "self");
    assert_eq!(all_pairs(&again), pairs);
}

/// `lexicon build --checkpoint` builds the self table from a run's checkpoint: symmetric,
/// whole words only, no stop word, every kept pair at the asked cosine or above, and a higher
/// floor keeps fewer pairs.
#[test]
fn lexicon_build_from_a_checkpoint_is_the_self_table() {
    let dir = tempfile::tempdir().unwrap();
    let run = common::pretrained_tiny(dir.path());
    let (_, last) = trueneg::train::checkpoint::list(&run).pop().unwrap();
    let stop = dir.path().join("stop.txt");
    std::fs::write(&stop, "the\nof\n").unwrap();
    let build = |out: &str, min: &str| {
        let out = dir.path().join(out);
        common::ok(
            common::bin()
                .args(["lexicon", "build", "--tokenizer"])
                .arg(run.join("tokenizer.json"))
                .arg("--checkpoint")
                .arg(last.join("model.safetensors"))
                .args(["--top-k", "5", "--min-cosine", min, "--stop-words"])
                .arg(&stop)
                .arg("--out")
                .arg(&out)
                .output()
                .unwrap(),
        );
        SynonymTable::load(&out).unwrap()
    };
    let any = build("any.lex", "-1");
    let close = build("close.lex", "0.5");
    // The same command again replaces the table it wrote (a script can be run again); a file
    // it did not write stays.
    assert_eq!(all_pairs(&build("close.lex", "0.5")), all_pairs(&close));
    let foreign = dir.path().join("foreign.lex");
    std::fs::write(&foreign, "mine").unwrap();
    let e = common::fails(
        common::bin()
            .args(["lexicon", "build", "--tokenizer"])
            .arg(run.join("tokenizer.json"))
            .arg("--out")
            .arg(&foreign)
            .output()
            .unwrap(),
    );
    assert!(e.contains("did not write it"), "{e}");
    assert_eq!(std::fs::read_to_string(&foreign).unwrap(), "mine");
    let tok = WordPieceTokenizer::load(&run.join("tokenizer.json")).unwrap();
    let words: BTreeSet<u32> = candidate_ids(&tok, &BTreeSet::new(), None)
        .into_iter()
        .collect();
    for t in [&any, &close] {
        assert!(is_symmetric(t));
        let pairs = all_pairs(t);
        assert!(
            pairs
                .iter()
                .all(|(a, b)| words.contains(a) && words.contains(b))
        );
        for w in ["the", "of"] {
            let id = tok.inner.token_to_id(w).unwrap();
            assert!(t.synonyms(id).is_empty(), "{w} is a stop word");
        }
    }
    let (n_any, n_close) = (all_pairs(&any).len(), all_pairs(&close).len());
    assert!(n_close < n_any && n_any > 100, "{n_close} vs {n_any}");
    assert!(close.source.starts_with("checkpoint:"));
}

/// The self table's words by default: content words WordNet knows; never a function word
/// (closed class or number), a word WordNet does not know, or a stop-list word.
#[test]
fn the_self_tables_words_are_content_words_wordnet_knows() {
    let dir = tempfile::tempdir().unwrap();
    let words = [
        "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "war", "battle", "wars", "the", "of", "was",
        "three", "their", "xyzzyq", "ship",
    ];
    let path = dir.path().join("vocab.txt");
    std::fs::write(&path, words.join("\n")).unwrap();
    let tok = WordPieceTokenizer::load(&path).unwrap();
    let wn = trueneg::lexicon::wordnet::WordNet::open(std::path::Path::new("/usr/share/wordnet"))
        .unwrap();
    let stop: BTreeSet<String> = ["ship".to_string()].into();
    let kept: BTreeSet<&str> = candidate_ids(&tok, &stop, Some(&wn))
        .into_iter()
        .map(|id| words[id as usize])
        .collect();
    assert_eq!(kept, ["battle", "war", "wars"].into());
    // Without WordNet, an unknown word stays; function words never do.
    let kept: BTreeSet<&str> = candidate_ids(&tok, &stop, None)
        .into_iter()
        .map(|id| words[id as usize])
        .collect();
    assert_eq!(kept, ["battle", "war", "wars", "xyzzyq"].into());
}
