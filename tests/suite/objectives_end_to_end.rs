//! End to end on WikiText-2 with the tiny preset: baseline, hc, sr and sr-sent from the same
//! seed all finish; Hard Correction's statistics are logged and non-zero; the loss curves are
//! plotted side by side; the correction statistics command writes its table and plot.

use crate::common;
use common::{bin, metrics, ok};

use std::path::{Path, PathBuf};

fn is_png(p: &Path) -> bool {
    std::fs::read(p)
        .map(|b| b.starts_with(b"\x89PNG\r\n\x1a\n") && b.len() > 1000)
        .unwrap_or(false)
}

fn run(dir: &Path, shards: &Path, name: &str, sets: &[&str]) -> PathBuf {
    let r = dir.join(name);
    let mut c = bin();
    c.args(["pretrain", "--config", "tiny", "--run"]).arg(&r);
    c.arg("--set")
        .arg(format!("data.shards={}", shards.display()));
    for s in [
        "train.steps=40",
        "train.log_every=1",
        "train.checkpoint_every=20",
        "train.keep_checkpoints=10",
        "data.batch_size=8",
    ]
    .iter()
    .chain(sets)
    {
        c.args(["--set", s]);
    }
    ok(c.output().unwrap());
    r
}

#[test]
fn all_objectives_train_and_hard_correction_reports_corrections() {
    let dir = tempfile::tempdir().unwrap();
    let shards = dir.path().join("wiki");
    ok(bin()
        .args([
            "prepare",
            "--input",
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../shared/data/wikitext-2/wiki.test.raw"
            ),
        ])
        .args(["--train-vocab", "3000", "--max-seq-len", "64", "--out"])
        .arg(&shards)
        .output()
        .unwrap());

    let mut runs = Vec::new();
    for kind in ["baseline", "hc", "sr", "sr-sent"] {
        let r = run(
            dir.path(),
            &shards,
            kind,
            &[&format!("objective.kind={kind}")],
        );
        let m = metrics(&r);
        assert_eq!(m.len(), 40, "{kind}");
        assert!(m.iter().all(|x| x.loss.is_finite()), "{kind}");
        assert_eq!(m[0].value("sr_loss").is_some(), kind == "sr", "{kind}");
        assert_eq!(
            m[0].value("sr_sent_loss").is_some(),
            kind == "sr-sent",
            "{kind}"
        );
        assert_eq!(m[0].value("mismatched").is_some(), kind == "hc", "{kind}");
        if kind == "sr" {
            assert!(
                m.iter().all(
                    |x| x.value("sr_loss").unwrap() > 0.0 && x.value("sr_loss").unwrap() <= 2.0
                )
            );
        }
        if kind == "sr-sent" {
            assert!(m.iter().all(|x| x.value("sr_sent_loss").unwrap() >= 0.0));
        }
        runs.push(r);
    }
    // Sentence-level SR's readings: the target's gradient stopped (the default) or not gives
    // the same first loss and then other parameters; on the discriminator's encoder another
    // loss from the start.
    let sent = |name: &str, extra: &str| {
        let r = run(
            dir.path(),
            &shards,
            name,
            &["objective.kind=sr-sent", "train.steps=3", extra],
        );
        metrics(&r)
            .iter()
            .map(|x| x.value("sr_sent_loss").unwrap())
            .collect::<Vec<f64>>()
    };
    let fixed = sent("sent-fixed", "objective.sr_sent_target=fixed");
    let free = sent("sent-free", "objective.sr_sent_target=free");
    let disc = sent("sent-disc", "objective.sr_sent_encoder=discriminator");
    assert_eq!(fixed[0], free[0]);
    assert_ne!(
        fixed[2], free[2],
        "the gradient into the target changes training"
    );
    assert_ne!(fixed[0], disc[0], "another encoder, another loss");
    assert!(disc.iter().all(|v| v.is_finite() && *v >= 0.0));
    // Word-level SR summed over each sequence's masked positions (the paper's Eq. 4): on the
    // same first step, the mean times the masked positions per sequence (8 in the batch).
    let first = |name: &str, reduction: &str| {
        let r = run(
            dir.path(),
            &shards,
            name,
            &["objective.kind=sr", "train.steps=1", reduction],
        );
        metrics(&r)[0].clone()
    };
    let mean = first("sr-mean", "objective.sr_reduction=mean");
    let sum = first("sr-sum", "objective.sr_reduction=sum");
    let per_sequence = mean.masked as f64 / 8.0;
    common::close_to(
        sum.value("sr_loss").unwrap(),
        mean.value("sr_loss").unwrap() * per_sequence,
        1e-4 * per_sequence,
        "sum = mean × masked per sequence",
    );

    // Same seed, same data: the first step's MLM loss is the same for every objective.
    let first: Vec<f64> = runs.iter().map(|r| metrics(r)[0].mlm_loss()).collect();
    assert!(
        first.iter().all(|l| (l - first[0]).abs() < 1e-9),
        "{first:?}"
    );
    // HC changes the training signal only where it corrects; SR always does.
    let last = |r: &PathBuf| metrics(r).last().unwrap().mlm_loss();
    assert_ne!(last(&runs[0]), last(&runs[2]));

    // Loss curves side by side.
    let png = dir.path().join("baseline").join("loss-curves.png");
    let mut c = bin();
    c.args(["compare", "--out"])
        .arg(&png)
        .arg("--runs")
        .args(&runs);
    ok(c.output().unwrap());
    assert!(is_png(&png));
    // A term only some runs log: the others are left out of the plot, each with a note.
    let sr = dir.path().join("baseline").join("sr-curves.png");
    let out = bin()
        .args(["compare", "--metric", "sr_loss", "--out"])
        .arg(&sr)
        .arg("--runs")
        .args(&runs)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && is_png(&sr), "{said}");
    assert!(
        said.contains("no field `sr_loss`") && said.contains("left out of the plot"),
        "{said}"
    );

    // Hard Correction with the generator's samples as predictions corrects some positions this
    // early in training (argmax predictions of a 40-step model are mostly frequent function
    // words); the counts and both ratios are logged. A sample of this young generator is a
    // WordNet synonym of the original about once in 4000 mismatches (10, 11 and 13 in ~42 600
    // over three random streams), so the run covers ~42 000 mismatches: about ten corrections
    // expected, none with probability ~e^-10 whatever the random stream.
    let r = run(
        dir.path(),
        &shards,
        "hc-sampled",
        &[
            "objective.kind=hc",
            "objective.hc_prediction=sampled",
            "data.batch_size=16",
            "train.steps=300",
            "train.log_every=25",
            "train.checkpoint_every=50",
        ],
    );
    let m = metrics(&r);
    // One line per 25 steps, each count a total over its 25 steps.
    assert_eq!(m.len(), 12);
    for x in &m {
        let (mis, cor) = (
            x.value("mismatched").unwrap() as usize,
            x.value("corrected").unwrap() as usize,
        );
        assert!(
            cor <= mis && mis <= x.masked,
            "step {}: {cor} / {mis} / {}",
            x.step,
            x.masked
        );
    }
    let corrected: usize = m
        .iter()
        .map(|x| x.value("corrected").unwrap() as usize)
        .sum();
    let mismatched: usize = m
        .iter()
        .map(|x| x.value("mismatched").unwrap() as usize)
        .sum();
    assert!(corrected > 0, "no correction in {mismatched} mismatches");
    assert!(corrected * 10 < mismatched, "corrections are a small share");
    // The run's totals, as the end-of-run note reads them.
    assert_eq!(
        trueneg::train::stats::run_correction_totals(&r).unwrap(),
        Some((mismatched as u64, corrected as u64))
    );
    let with = m
        .iter()
        .find(|x| x.value("corrected").unwrap() as usize > 0)
        .unwrap();
    assert!(
        with.value("corrected_ratio").unwrap() > 0.0
            && with.value("sequences_corrected_ratio").unwrap() > 0.0
    );
    assert!(
        r.join("lexicon.safetensors").exists(),
        "WordNet table built next to the run"
    );

    // Table 8 layout over the checkpoints, with its plot.
    let out = ok(bin()
        .args(["stats", "--checkpoints"])
        .arg(&r)
        .args([
            "--corpus",
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../shared/data/wikitext-2/wiki.valid.tokens"
            ),
            "--batches",
            "5",
        ])
        .output()
        .unwrap());
    assert!(
        out.contains("| step | masked | mismatched | corrected |"),
        "{out}"
    );
    assert_eq!(
        out.lines()
            .filter(|l| l.starts_with("| ") && !l.starts_with("| step"))
            .count(),
        6,
        "{out}"
    );
    assert!(is_png(&r.join("correction-stats.png")));
    assert!(
        out.contains("iteration level (sequences with a correction; the paper's)")
            && out.contains("batch level (batches with a correction)"),
        "{out}"
    );

    // The lexicon is recorded; statistics of another lexicon are not replaced unasked.
    let json = r.join("correction-stats.json");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    // Both granularities: a batch holds several sequences, so the share of batches with a
    // correction is at least the share of sequences with one.
    for c in v["checkpoints"].as_array().unwrap() {
        let (batch, sequence) = (
            c["batch_level"].as_f64().unwrap(),
            c["iteration_level"].as_f64().unwrap(),
        );
        assert!(batch >= sequence && c["batches"] == 5, "{c}");
    }
    assert!(v["lexicon"].as_str().unwrap().starts_with("wordnet"), "{v}");
    assert!(out.contains("Lexicon: wordnet"), "{out}");
    let other = serde_json::json!({"lexicon": "embeddings:other.vec", "checkpoints": []});
    std::fs::write(&json, other.to_string()).unwrap();
    let stats = |force: bool| {
        let mut c = bin();
        c.args(["stats", "--checkpoints"]).arg(&r);
        c.args([
            "--corpus",
            &common::data("wikitext-2/wiki.valid.tokens").to_string_lossy(),
        ]);
        c.args(["--batches", "1"]);
        if force {
            c.arg("--force");
        }
        c.output().unwrap()
    };
    let e = common::fails(stats(false));
    assert!(
        e.contains("embeddings:other.vec") && e.contains("--force"),
        "{e}"
    );
    assert_eq!(std::fs::read_to_string(&json).unwrap(), other.to_string());
    // The run was trained on the generator's samples: it is measured on samples, the same
    // ones each time.
    assert!(out.contains("Predictions: sampled"), "{out}");
    let table = |o: std::process::Output| -> Vec<String> {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| l.starts_with("| "))
            .map(String::from)
            .collect()
    };
    let once = table(stats(true));
    assert!(once.len() > 2, "{once:?}");
    assert_eq!(once, table(stats(true)));
}

#[test]
fn a_run_whose_hard_correction_corrects_almost_nothing_gets_a_note() {
    use trueneg::train::stats::few_corrections_note;
    // Under 0.01 % of the mismatches: a note that says why, with the figures.
    let note = few_corrections_note(200_000, 3, "generator").unwrap();
    assert!(
        note.contains("3 of 200000")
            && note.contains("a generator this early")
            && note.contains("function words")
            && note.contains("200k steps"),
        "{note}"
    );
    // A BERT run has no generator: the note names its masked-LM model.
    let bert = few_corrections_note(200_000, 0, "masked-LM model").unwrap();
    assert!(
        bert.contains("a masked-LM model this early") && !bert.contains("generator"),
        "{bert}"
    );
    // From 0.01 % on, or with nothing mismatched, none.
    assert!(few_corrections_note(200_000, 20, "generator").is_none());
    assert!(few_corrections_note(0, 0, "generator").is_none());
}

/// The plain progress lines (stderr not a terminal) carry Hard Correction's window counts next
/// to the loss terms, as `metrics.jsonl` does.
#[test]
fn progress_lines_carry_the_correction_counts() {
    let dir = tempfile::tempdir().unwrap();
    // Without `--quiet` (which `common::bin` passes): the lines are what is tested.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_trueneg"))
        .args(["pretrain", "--config", "tiny", "--run"])
        .arg(dir.path().join("run"))
        .arg("--set")
        .arg(format!("data.shards={}", common::shards().display()))
        .args(["--set", "objective.kind=hc", "--set", "train.steps=2"])
        .args(["--set", "train.log_every=1", "--set", "data.batch_size=8"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains("step ")).collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    for l in lines {
        let counts = l
            .split("hc corrected ")
            .nth(1)
            .unwrap_or_else(|| panic!("{l}"));
        let (c, m) = counts
            .split_whitespace()
            .next()
            .unwrap()
            .split_once('/')
            .unwrap();
        assert!(
            c.parse::<u64>().unwrap() <= m.parse::<u64>().unwrap(),
            "{l}"
        );
    }
}
