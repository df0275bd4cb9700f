//! Evaluation during pre-training (`train.eval_every`, `data.eval_shards`) on WikiText-2's
//! validation split: the held-out figures are on the evaluated steps' lines, the training
//! curve is the one of a run without evaluation, two runs evaluate alike, and bad settings are
//! refused before anything runs.

use crate::common;
use common::{bin, fails, losses, metrics, ok, pretrain_cmd, shards, shared};

use std::path::{Path, PathBuf};

/// WikiText-2's validation split prepared with the training shards' tokenizer, in `dir`.
fn eval_shards(dir: &Path, tokenizer: &Path) -> PathBuf {
    let out = dir.join("valid");
    ok(bin()
        .args(["prepare", "--input"])
        .arg(shared("data/wikitext-2/wiki.valid.tokens"))
        .arg("--tokenizer")
        .arg(tokenizer)
        .args(["--max-seq-len", "64", "--out"])
        .arg(&out)
        .output()
        .unwrap());
    out
}

#[test]
fn held_out_figures_join_the_lines_and_leave_the_curve_alone() {
    let dir = tempfile::tempdir().unwrap();
    let valid = eval_shards(dir.path(), &shards().join("tokenizer.json"));
    let plain = dir.path().join("plain");
    ok(pretrain_cmd(&plain, &["train.steps=6"]).output().unwrap());
    let eval_sets = [
        "train.steps=6".to_string(),
        "train.eval_every=3".into(),
        "train.eval_batches=2".into(),
        format!("data.eval_shards={}", valid.display()),
    ];
    let sets: Vec<&str> = eval_sets.iter().map(String::as_str).collect();
    let evaluated = dir.path().join("evaluated");
    let said = ok(pretrain_cmd(&evaluated, &sets).output().unwrap());
    assert!(said.contains("held-out loss: last"), "{said}");

    assert_eq!(
        losses(&plain),
        losses(&evaluated),
        "the same training curve"
    );
    let lines = metrics(&evaluated);
    for m in &lines {
        let evaluated_here = m.step % 3 == 0;
        assert_eq!(
            m.value("eval_loss").is_some(),
            evaluated_here,
            "step {}",
            m.step
        );
        if evaluated_here {
            for k in ["eval_loss", "eval_mlm_loss", "eval_disc_loss"] {
                let v = m
                    .value(k)
                    .unwrap_or_else(|| panic!("{k} at step {}", m.step));
                assert!(v.is_finite() && v > 0.0, "{k} {v}");
            }
            for k in ["eval_mlm_accuracy", "eval_disc_accuracy"] {
                let v = m.value(k).unwrap();
                assert!((0.0..=1.0).contains(&v), "{k} {v}");
            }
        }
        // The training lines carry the masked-LM accuracy too.
        let acc = m.value("mlm_accuracy").unwrap();
        assert!((0.0..=1.0).contains(&acc), "{acc}");
    }
    // Held-out figures move with the weights only: a second run evaluates alike.
    let again = dir.path().join("again");
    ok(pretrain_cmd(&again, &sets).output().unwrap());
    let eval_of = |run: &Path| -> Vec<Option<f64>> {
        metrics(run).iter().map(|m| m.value("eval_loss")).collect()
    };
    assert_eq!(eval_of(&evaluated), eval_of(&again));
    let first = lines[2].value("eval_loss").unwrap();
    let last = lines[5].value("eval_loss").unwrap();
    assert_ne!(first, last, "the weights changed between the evaluations");
}

#[test]
fn bad_held_out_settings_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let valid = eval_shards(dir.path(), &shards().join("tokenizer.json"));
    let shards_set = format!("data.eval_shards={}", valid.display());
    let e = fails(
        pretrain_cmd(&dir.path().join("a"), &["train.eval_every=2"])
            .output()
            .unwrap(),
    );
    assert!(
        e.contains("train.eval_every") && e.contains("data.eval_shards"),
        "{e}"
    );
    let e = fails(
        pretrain_cmd(
            &dir.path().join("b"),
            &["train.eval_every=3", "train.log_every=2", &shards_set],
        )
        .output()
        .unwrap(),
    );
    assert!(e.contains("multiple of train.log_every"), "{e}");
    // Held-out shards of another tokenizer.
    let other = eval_shards(&dir.path().join("o"), &common::other_tokenizer());
    let e = fails(
        pretrain_cmd(
            &dir.path().join("c"),
            &[
                "train.eval_every=2",
                &format!("data.eval_shards={}", other.display()),
            ],
        )
        .output()
        .unwrap(),
    );
    assert!(e.contains("another tokenizer"), "{e}");
    assert!(!dir.path().join("c/metrics.jsonl").exists());
}
