//! Hard Correction with the model's own synonyms (`objective.hc_source = "self"`): the table is
//! rebuilt from the embeddings every `hc_refresh_every` steps, logged, saved with each
//! checkpoint and taken up again on resume; samples of the corrections reach `metrics.jsonl`
//! and TensorBoard's text tab.

use crate::common;
use common::{fails, losses, metrics, ok, pretrain_cmd, records, resume_cmd, shards};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use trueneg::tensorboard::{What, read_events};
use trueneg::text::SynonymTable;
use trueneg::text::WordPieceTokenizer;

/// A low threshold, every whole word and no quality gate, so that a tiny model's table is not
/// empty and Hard Correction acts (a tiny model predicts function words, which the default
/// leaves out).
const SELF: [&str; 10] = [
    "objective.kind=hc",
    "objective.hc_source=self",
    "objective.hc_refresh_every=4",
    "objective.hc_self_min_cosine=0.2",
    "objective.hc_self_words=all",
    "objective.hc_self_min_precision=0",
    "objective.hc_samples_every=3",
    "objective.hc_samples=5",
    "train.steps=16",
    "train.checkpoint_every=6",
];

fn self_run(run: &Path, extra: &[&str]) {
    let sets: Vec<&str> = SELF.iter().chain(extra).copied().collect();
    ok(pretrain_cmd(run, &sets).output().unwrap());
}

fn table_at(run: &Path, step: u64) -> SynonymTable {
    SynonymTable::load(&run.join(format!("checkpoints/step-{step:08}/synonyms.safetensors")))
        .unwrap()
}

/// The records without their timing.
fn timeless(run: &Path, name: &str) -> Vec<serde_json::Value> {
    let mut r = records(run, name);
    for v in &mut r {
        v.as_object_mut().unwrap().remove("seconds");
    }
    r
}

#[test]
fn the_self_table_is_refreshed_logged_saved_and_follows_its_rules() {
    let dir = tempfile::tempdir().unwrap();
    let stop = dir.path().join("stop.txt");
    std::fs::write(&stop, "the\nOf\n\n").unwrap();
    let run = dir.path().join("run");
    let stop_set = format!("objective.hc_self_stop_words={}", stop.display());
    self_run(&run, &[&stop_set]);

    // One refresh every 4 steps, each with its counts and its agreement with WordNet.
    let refreshes = records(&run, "synonym_refresh");
    let steps: Vec<u64> = refreshes
        .iter()
        .map(|r| r["step"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, [4, 8, 12, 16]);
    for r in &refreshes {
        let (words, pairs) = (r["words"].as_u64().unwrap(), r["pairs"].as_u64().unwrap());
        assert!(words > 0 && pairs >= words, "{r}");
        let mean = r["mean_list_length"].as_f64().unwrap();
        assert!((mean - pairs as f64 / words as f64).abs() < 1e-9, "{r}");
        for k in ["precision", "recall", "changed"] {
            let x = r[k].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&x), "{k}: {r}");
        }
    }
    // The step lines are all there, besides the records.
    assert_eq!(metrics(&run).len(), 16);

    // The table in use is saved with each checkpoint: the step-12 checkpoint holds the table
    // of the refresh after step 12 (not the one of step 8).
    let tok = WordPieceTokenizer::load(&shards().join("tokenizer.json")).unwrap();
    let t12 = table_at(&run, 12);
    assert_eq!(t12.source, "self:step-12");
    assert_eq!(t12.fingerprint, tok.fingerprint());
    assert_eq!(
        t12.entries() as u64,
        refreshes[2]["pairs"].as_u64().unwrap()
    );
    assert_ne!(t12, table_at(&run, 6));
    let candidates: std::collections::BTreeSet<u32> =
        trueneg::text::self_synonyms::all_whole_words(&tok, &["the".into(), "of".into()].into())
            .into_iter()
            .collect();
    let id = |w: &str| tok.inner.token_to_id(w).unwrap();
    for a in 0..t12.vocab_size() as u32 {
        for &b in t12.synonyms(a) {
            // Symmetric, whole words only (no special tokens, pieces, numbers or
            // punctuation), stop words left out.
            assert!(t12.synonyms(b).contains(&a), "{a} -> {b} one way only");
            assert!(
                candidates.contains(&a) && candidates.contains(&b),
                "{a} {b}"
            );
        }
    }
    assert!(t12.synonyms(id("the")).is_empty() && t12.synonyms(id("of")).is_empty());
    assert!(t12.synonyms(id("[CLS]")).is_empty());

    // Samples of the corrections, every 3 logged lines: at most 5, each in its sentence,
    // also in TensorBoard's text tab.
    let samples = records(&run, "corrections");
    let steps: Vec<u64> = samples
        .iter()
        .map(|r| r["step"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, [3, 6, 9, 12, 15]);
    let shown: usize = samples
        .iter()
        .map(|r| {
            let s = r["samples"].as_array().unwrap();
            assert!(s.len() <= 5 && s.len() as u64 <= r["corrected"].as_u64().unwrap());
            for x in s {
                assert!(x["context"].as_str().unwrap().contains('⟦'), "{x}");
                assert_ne!(x["gold"], x["predicted"]);
            }
            s.len()
        })
        .sum();
    assert!(shown > 0, "no correction shown: {samples:?}");
    let texts = tensorboard_texts(&run);
    assert_eq!(
        texts.keys().filter(|(tag, _)| tag == "corrections").count(),
        5
    );
    for r in &samples {
        let text = &texts[&("corrections".to_string(), r["step"].as_u64().unwrap())];
        let rows = r["samples"].as_array().unwrap().len();
        assert_eq!(text.contains("| context | gold |"), rows > 0, "{text}");
        assert_eq!(text.matches("⟦").count(), rows, "{text}");
    }
}

#[test]
fn inspect_and_stats_judge_each_checkpoint_with_the_table_it_trained_with() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    self_run(&run, &[]);
    let corpus = common::shared("data/wikitext-2/wiki.test.raw");
    let inspect = |step: &str, extra: &[&str]| -> serde_json::Value {
        ok(common::bin()
            .args(["inspect", "--run"])
            .arg(&run)
            .arg("--corpus")
            .arg(&corpus)
            .args([
                "--batches",
                "2",
                "--batch-size",
                "8",
                "--step",
                step,
                "--force",
            ])
            .args(extra)
            .output()
            .unwrap());
        let json = run.join(format!("inspect-step-{step}.json"));
        serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap()
    };
    assert_eq!(inspect("12", &[])["lexicon"], "self:step-12");
    assert_eq!(inspect("6", &[])["lexicon"], "self:step-4");
    // Prepared shards (the run's own) are inspected as a text corpus is.
    ok(common::bin()
        .args(["inspect", "--run"])
        .arg(&run)
        .arg("--corpus")
        .arg(shards())
        .args(["--batches", "2", "--batch-size", "8", "--step", "16"])
        .output()
        .unwrap());
    let page = std::fs::read_to_string(run.join("inspect-step-16.md")).unwrap();
    assert!(
        page.contains("self:step-16") && page.contains("| all |"),
        "{page}"
    );
    // A table given on the command line judges every checkpoint.
    let wordnet = run.join("lexicon.safetensors");
    let given = inspect("12", &["--lexicon", wordnet.to_str().unwrap()]);
    assert!(
        given["lexicon"].as_str().unwrap().starts_with("wordnet:"),
        "{given}"
    );
    ok(common::bin()
        .args(["stats", "--checkpoints"])
        .arg(&run)
        .arg("--corpus")
        .arg(&corpus)
        .args(["--batches", "2", "--batch-size", "8"])
        .output()
        .unwrap());
    let stats: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("correction-stats.json")).unwrap())
            .unwrap();
    assert!(
        stats["lexicon"]
            .as_str()
            .unwrap()
            .contains("each checkpoint's own table"),
        "{}",
        stats["lexicon"]
    );
}

#[test]
fn a_resumed_self_table_run_repeats_the_uninterrupted_run() {
    let dir = tempfile::tempdir().unwrap();
    let full = dir.path().join("full");
    // Every word's 50 nearest words: Hard Correction acts at most steps.
    let wide = ["objective.hc_self_min_cosine=-1", "objective.hc_self_k=50"];
    self_run(&full, &wide);
    // The same run stopped after the checkpoint of step 6 (between the refreshes of steps 4
    // and 8), then resumed.
    let cut = dir.path().join("cut");
    copy_tree(&full, &cut);
    for step in [12, 16] {
        std::fs::remove_dir_all(cut.join(format!("checkpoints/step-{step:08}"))).unwrap();
    }
    ok(resume_cmd(&cut).output().unwrap());
    assert_eq!(losses(&cut), losses(&full));
    let corrected = |run: &Path| -> Vec<f64> {
        metrics(run)
            .iter()
            .map(|m| m.value("corrected").unwrap())
            .collect()
    };
    assert_eq!(corrected(&cut), corrected(&full));
    assert!(corrected(&full)[6..].iter().any(|&c| c > 0.0));
    assert_eq!(
        timeless(&cut, "synonym_refresh"),
        timeless(&full, "synonym_refresh")
    );
    assert_eq!(records(&cut, "corrections"), records(&full, "corrections"));
    assert_eq!(table_at(&cut, 16), table_at(&full, 16));
    // The samples change nothing of the training: the same run without them has the same
    // curve.
    let quiet = dir.path().join("quiet");
    self_run(&quiet, &[wide[0], wide[1], "objective.hc_samples_every=0"]);
    assert!(records(&quiet, "corrections").is_empty());
    assert_eq!(losses(&quiet), losses(&full));
    // TensorBoard's text tab holds each sample once after the resume.
    assert_eq!(tensorboard_texts(&cut), tensorboard_texts(&full));
}

#[test]
fn self_table_settings_are_checked_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    for (set, field) in [
        ("objective.hc_refresh_every=0", "objective.hc_refresh_every"),
        (
            "objective.hc_self_min_cosine=1.5",
            "objective.hc_self_min_cosine",
        ),
        ("objective.hc_source=mine", "objective.hc_source"),
    ] {
        let run = dir.path().join("refused");
        let e = fails(
            pretrain_cmd(
                &run,
                &["objective.kind=hc", "objective.hc_source=self", set],
            )
            .output()
            .unwrap(),
        );
        assert!(e.contains(field) && e.lines().count() == 1, "{e}");
        assert!(!run.join("metrics.jsonl").exists());
    }
    let missing = dir.path().join("no-such-stop-list.txt");
    let e = fails(
        pretrain_cmd(
            &dir.path().join("r2"),
            &[
                "objective.kind=hc",
                "objective.hc_source=self",
                &format!("objective.hc_self_stop_words={}", missing.display()),
            ],
        )
        .output()
        .unwrap(),
    );
    assert!(e.contains("no-such-stop-list.txt"), "{e}");
}

/// (tag, step) → text of the run's TensorBoard events (the config's text left out).
fn tensorboard_texts(run: &Path) -> BTreeMap<(String, u64), String> {
    let mut out = BTreeMap::new();
    let files: Vec<PathBuf> = trueneg::tensorboard::event_files(run).unwrap();
    for f in files {
        for e in read_events(&std::fs::read(&f).unwrap()).unwrap() {
            let Some(What::Summary(s)) = e.what else {
                continue;
            };
            for v in s.value {
                if let Some(trueneg::tensorboard::Value::Tensor(t)) = v.value
                    && v.tag != "config"
                {
                    let text = String::from_utf8_lossy(&t.string_val[0]).to_string();
                    let old = out.insert((v.tag.clone(), e.step as u64), text);
                    assert!(old.is_none(), "{} at step {} twice", v.tag, e.step);
                }
            }
        }
    }
    out
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let target = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_tree(&p, &target);
        } else {
            std::fs::copy(&p, &target).unwrap();
        }
    }
}

/// The share of Hard Correction's drops at the run's last checkpoint, over the quick start's
/// corpus (`inspect`'s corrected pairs), that have a function word as gold or prediction,
/// and the number of drops.
fn function_word_drops(run: &Path) -> (f64, u64) {
    ok(common::bin()
        .args(["inspect", "--quiet", "--run"])
        .arg(run)
        .arg("--corpus")
        .arg(common::data("wikitext-2/wiki.test.raw"))
        .output()
        .unwrap());
    let page = std::fs::read_dir(run)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.extension().is_some_and(|x| x == "json")
                && p.to_string_lossy().contains("inspect-step-")
        })
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(page).unwrap()).unwrap();
    let (mut function, mut all) = (0, 0);
    for p in v["corrected_pairs"].as_array().unwrap() {
        let n = p[2].as_u64().unwrap();
        let (gold, pred) = (p[0].as_str().unwrap(), p[1].as_str().unwrap());
        all += n;
        if trueneg::text::self_synonyms::is_function_word(gold)
            || trueneg::text::self_synonyms::is_function_word(pred)
        {
            function += n;
        }
    }
    (function as f64 / all.max(1) as f64, all)
}

/// The quick start's corpus and preset (`tiny`, 200 steps, the table rebuilt every 50): with
/// the quality gate off so that the self table is used, at most 10 % of the positions Hard
/// Correction drops have a function word as gold or prediction; the same run over every whole
/// word (function words included) drops mostly "to" → "the", so the
/// check can fail.
#[test]
fn the_self_table_drops_no_function_word_where_every_whole_word_would() {
    let dir = tempfile::tempdir().unwrap();
    let mut shares = Vec::new();
    for words in ["content", "all"] {
        let run = dir.path().join(words);
        ok(common::bin()
            .args(["pretrain", "--quiet", "--config", "tiny", "--run"])
            .arg(&run)
            .arg("--set")
            .arg(format!("data.shards={}", shards().display()))
            .args([
                "--set",
                "objective.kind=hc",
                "--set",
                "objective.hc_source=self",
            ])
            .args(["--set", "objective.hc_refresh_every=50"])
            .args(["--set", "objective.hc_self_min_precision=0"])
            .args(["--set", &format!("objective.hc_self_words={words}")])
            .output()
            .unwrap());
        shares.push(function_word_drops(&run));
    }
    let ((content, _), (all, dropped)) = (shares[0], shares[1]);
    assert!(content <= 0.10, "{:.1} % of the drops", 100.0 * content);
    assert!(all > 0.5 && dropped > 20, "{all} of {dropped}");
}

/// With the default quality gate, a tiny model's table (no pair a WordNet synonym) is never
/// used: each refresh is recorded with `accepted` 0 (also a TensorBoard scalar) and a warning,
/// and the checkpoints keep WordNet's table.
#[test]
fn a_self_table_below_the_quality_gate_is_not_used_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let out = pretrain_cmd(
        &run,
        &[
            "objective.kind=hc",
            "objective.hc_source=self",
            "objective.hc_refresh_every=4",
        ],
    )
    .output()
    .unwrap();
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{said}");
    let refreshes = records(&run, "synonym_refresh");
    assert_eq!(refreshes.len(), 3, "{refreshes:?}");
    for r in &refreshes {
        assert_eq!(r["accepted"], 0, "{r}");
        assert!(r["precision"].as_f64().is_none_or(|p| p < 0.1), "{r}");
    }
    assert!(
        said.contains("WARN") && said.contains("below the quality gate"),
        "{said}"
    );
    assert!(table_at(&run, 12).source.starts_with("wordnet"));
    let mut tags = std::collections::BTreeSet::new();
    for f in trueneg::tensorboard::event_files(&run).unwrap() {
        for e in read_events(&std::fs::read(&f).unwrap()).unwrap() {
            if let Some(What::Summary(s)) = e.what {
                tags.extend(s.value.into_iter().map(|v| v.tag));
            }
        }
    }
    assert!(tags.contains("synonym_refresh/accepted"), "{tags:?}");
}
