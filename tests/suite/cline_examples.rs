//! CLINE example generation on real WordNet and real sentences (SST-2 dev).

use crate::common;
use common::data;

use std::path::Path;

use trueneg::lexicon::wordnet::WordNet;
use trueneg::tasks::glue::{GlueTask, read_glue};
use trueneg::text::WordPieceTokenizer;
use trueneg::text::triples::{AntKind, IGNORE, SynKind, TripleConfig, TripleGenerator};

fn wordnet() -> WordNet {
    WordNet::open(Path::new("/usr/share/wordnet")).unwrap()
}

fn sentences() -> Vec<String> {
    read_glue(GlueTask::named("sst2"), &data("glue/SST-2/dev.tsv"))
        .unwrap()
        .into_iter()
        .map(|e| e.text_a)
        .collect()
}

fn tokenizer(texts: &[String]) -> WordPieceTokenizer {
    WordPieceTokenizer::train(texts, 3000).unwrap()
}

#[test]
fn replacements_are_synonyms_and_antonyms_at_labelled_pieces() {
    let wn = wordnet();
    let texts = sentences();
    let tok = tokenizer(&texts);
    let vocab = TripleGenerator::vocabulary_of(&tok);
    let g = TripleGenerator::new(&wn, TripleConfig::default(), &vocab);
    let (mut syn_words, mut words, mut ant_antonyms, mut ant_total) = (0, 0, 0, 0);
    // Random x_ant words standing for an inflected noun / verb: (all, inflected themselves).
    let mut inflected_random = (0usize, 0usize);
    for (i, t) in texts.iter().take(300).enumerate() {
        let ex = g.example(t, 1, i as u64);
        assert_eq!(ex, g.example(t, 1, i as u64), "deterministic");
        words += trueneg::lexicon::words::tokens(t)
            .iter()
            .filter(|x| x.2)
            .count();
        syn_words += ex.syn_replaced.len();
        for r in &ex.syn_replaced {
            let old = &t[r.start..r.end];
            let new = r.new.to_lowercase();
            let ok = match r.kind {
                SynKind::Synonym => wn.same_pos_synonyms(old).contains(&new),
                SynKind::Hypernym => wn.hypernyms(old).contains(&new),
                SynKind::Inflection => wn.other_inflections(old).contains(&new),
            };
            assert!(ok, "{old} → {} ({:?})", r.new, r.kind);
            assert!(ex.candidates.contains(&(r.start, r.end)));
        }
        for r in &ex.ant_replaced {
            let old = &t[r.start..r.end];
            ant_total += 1;
            if r.kind == AntKind::Antonym {
                ant_antonyms += 1;
                // An antonym of the word's lemma, inflected like the word.
                let (_, lemma, _) = wn.dominant_pos(old).unwrap();
                let antonyms = wn.antonyms(&lemma);
                assert!(
                    wn.lemmas(&r.new.to_lowercase())
                        .iter()
                        .any(|(l, _, _)| antonyms.contains(l)),
                    "{old} → {}",
                    r.new
                );
            } else {
                let (pos, lemma, _) = wn.dominant_pos(old).unwrap();
                let new = r.new.to_lowercase();
                // A form of a lemma of the same part of speech ("roles" → "rages").
                let readings = wn.lemmas(&new);
                assert!(
                    readings
                        .iter()
                        .any(|(l, _, p)| *p == Some(pos)
                            || (p.is_none() && wn.pos_counts(l)[pos] > 0)),
                    "{old} → {}: same part of speech",
                    r.new
                );
                // An inflected noun or verb ("critics", "opened") gets an inflected word.
                if pos <= 1 && lemma != old.to_lowercase() {
                    inflected_random.0 += 1;
                    inflected_random.1 += usize::from(
                        readings
                            .iter()
                            .any(|(l, _, _)| *l != new && wn.pos_counts(l)[pos] > 0),
                    );
                }
            }
        }
        // Labels align with the pieces of the whole sentence.
        for (replaced_text, p) in [
            (
                &ex.syn,
                TripleGenerator::pieces(&tok, t, &ex.candidates, &ex.syn_replaced, 1),
            ),
            (
                &ex.ant,
                TripleGenerator::pieces(&tok, t, &ex.candidates, &ex.ant_replaced, 2),
            ),
        ] {
            assert_eq!(p.ids, tok.encode(replaced_text), "{replaced_text}");
            assert_eq!(p.ids.len(), p.labels.len());
        }
        let p = TripleGenerator::pieces(&tok, t, &ex.candidates, &ex.syn_replaced, 1);
        let ones = p.labels.iter().filter(|l| **l == 1).count();
        assert!(ones >= ex.syn_replaced.len());
        let p = TripleGenerator::pieces(&tok, t, &ex.candidates, &ex.ant_replaced, 2);
        assert!(p.labels.iter().all(|l| [0, 2, IGNORE].contains(l)));
    }
    let share = syn_words as f64 / words as f64;
    assert!(
        (0.15..=0.45).contains(&share),
        "x_syn replaces {share:.3} of the words (target 0.4, bounded by the candidates)"
    );
    assert!(
        ant_antonyms * 10 >= ant_total,
        "{ant_antonyms} of {ant_total} antonyms"
    );
    assert!(
        inflected_random.0 >= 20 && inflected_random.1 * 10 >= inflected_random.0 * 9,
        "random words inflected like the word: {inflected_random:?}"
    );
}

#[test]
fn names_numbers_and_stop_words_stay_and_the_cap_holds() {
    let wn = wordnet();
    let texts = sentences();
    let tok = tokenizer(&texts);
    let vocab = TripleGenerator::vocabulary_of(&tok);
    let cfg = TripleConfig {
        cap: 0.5,
        syn_ratio: 1.0,
        ant_ratio: 1.0,
        ..TripleConfig::default()
    };
    let g = TripleGenerator::new(&wn, cfg, &vocab);
    let t = "In 1999 the film opened in California, where eight critics in New York praised its quiet beauty.";
    for seed in 0..30 {
        let ex = g.example(t, seed, 0);
        for (a, b) in ex
            .syn_replaced
            .iter()
            .map(|r| (r.start, r.end))
            .chain(ex.ant_replaced.iter().map(|r| (r.start, r.end)))
        {
            let w = &t[a..b];
            assert!(
                ![
                    "In",
                    "1999",
                    "the",
                    "California",
                    "where",
                    "eight",
                    "New",
                    "York",
                    "its"
                ]
                .contains(&w),
                "seed {seed}: {w} replaced"
            );
        }
        assert!(ex.syn_replaced.len() * 2 <= ex.candidates.len());
        assert!(ex.ant_replaced.len() * 2 <= ex.candidates.len());
        assert!(!ex.candidates.is_empty());
    }
    assert_ne!(g.example(t, 1, 0), g.example(t, 2, 0), "the seed matters");
}

/// `trueneg hits` on a tiny run: triplets differ in one word (a synonym, an antonym), one
/// row per layer, shares in [0, 100]; at the embeddings the [CLS] vectors of the three
/// sentences are the same vector, so no triplet counts there and every triplet is a tie; the
/// maxima are over the encoder's layers 1…L.
#[test]
fn hits_reports_every_layer_on_synonym_antonym_triplets() {
    use common::{bin, ok, pretrain_cmd};
    let wn = wordnet();
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    ok(pretrain_cmd(&run, &["train.steps=2"]).output().unwrap());
    let out = dir.path().join("hits");
    let printed = ok(bin()
        .args(["hits", "--model"])
        .arg(&run)
        .arg("--sentences")
        .arg(data("glue/SST-2/dev.tsv"))
        .args(["--max", "40", "--out"])
        .arg(&out)
        .output()
        .unwrap());
    assert!(printed.contains("| max over layers 1–2 |"), "{printed}");
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("hits.json")).unwrap()).unwrap();
    let layers = v["report"]["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 3, "embeddings + 2 layers of the tiny preset");
    assert_eq!(layers[0]["cls"].as_f64(), Some(0.0));
    assert_eq!(layers[0]["cls_ties"].as_u64(), Some(40));
    for l in layers {
        for k in ["cls", "mean", "bertscore"] {
            assert!((0.0..=100.0).contains(&l[k].as_f64().unwrap()));
        }
        for k in ["cls_ties", "mean_ties", "bertscore_ties"] {
            assert!(l[k].as_u64().unwrap() <= 40);
        }
    }
    let r = &v["report"];
    for (max, k) in [
        ("max_cls", "cls"),
        ("max_mean", "mean"),
        ("max_bertscore", "bertscore"),
    ] {
        let want = layers[1..]
            .iter()
            .map(|l| l[k].as_f64().unwrap())
            .fold(0.0, f64::max);
        assert_eq!(
            r[max].as_f64(),
            Some(want),
            "{max}: the embeddings are not a layer"
        );
    }
    let triplets = v["triplets"].as_array().unwrap();
    assert_eq!(triplets.len(), 40);
    for t in triplets {
        let words = |k: &str| -> Vec<String> {
            t[k].as_str()
                .unwrap()
                .split_whitespace()
                .map(str::to_string)
                .collect()
        };
        let (o, s, a) = (words("ori"), words("syn"), words("ant"));
        assert_eq!((o.len(), s.len()), (a.len(), a.len()));
        let diff: Vec<usize> = (0..o.len()).filter(|&i| o[i] != s[i]).collect();
        assert_eq!(diff.len(), 1, "{t}");
        let i = diff[0];
        assert!(
            o.iter().zip(&a).filter(|(x, y)| x != y).count() == 1 && o[i] != a[i],
            "{t}"
        );
        assert!(
            wn.same_pos_synonyms(&o[i]).contains(&s[i].to_lowercase()),
            "{t}"
        );
    }
}

#[test]
fn bertscore_on_known_vectors() {
    use trueneg::eval::hits::bertscore;
    let v = |x: &[f32]| x.to_vec();
    // [CLS] and [SEP] (first and last) are left out.
    let cls = v(&[9.0, 9.0]);
    let a = vec![cls.clone(), v(&[1.0, 0.0]), v(&[0.0, 1.0]), cls.clone()];
    assert!((bertscore(&a, &a) - 1.0).abs() < 1e-12);
    // One token each, orthogonal: 0.
    let x = vec![cls.clone(), v(&[1.0, 0.0]), cls.clone()];
    let y = vec![cls.clone(), v(&[0.0, 2.0]), cls.clone()];
    assert!(bertscore(&x, &y).abs() < 1e-12);
    // x = {e1}, y = {e1, e2}: recall 1 (e1 found), precision (1 + 0) / 2 → F1 2/3.
    assert!((bertscore(&x, &a) - 2.0 / 3.0).abs() < 1e-12);
}
