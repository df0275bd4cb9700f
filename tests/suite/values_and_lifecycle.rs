//! Values that mean something (labels in their task's range, metrics defined or refused, an
//! option never silently clamped or ignored, special-token strings in raw text read as text)
//! and one lifecycle for long commands (a stop by a signal releases the folder and the same
//! command continues, keeping what finished).

use crate::common;
use common::{bin, copy_files, data, fails, ok, pretrain_cmd, resume_cmd, shards};

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// A copy of GLUE task `task` in `dir` whose `file` is replaced by its header and `rows`.
fn task_copy(dir: &Path, task: &str, file: &str, rows: &[&str]) -> std::path::PathBuf {
    let copy = dir.join(task);
    copy_files(&data(&format!("glue/{task}")), &copy);
    let text = std::fs::read_to_string(copy.join(file)).unwrap();
    let header = text.lines().next().unwrap();
    let mut out = vec![header.to_string()];
    out.extend(rows.iter().map(|r| r.to_string()));
    std::fs::write(copy.join(file), out.join("\n") + "\n").unwrap();
    copy
}

fn finetune(task: &str, data: &Path, out: &Path) -> std::process::Command {
    let mut c = bin();
    c.args(["finetune", "--task", task, "--data"])
        .arg(data)
        .arg("--model")
        .arg(common::transformers_folder(
            out.parent().unwrap(),
            "electra_discriminator",
        ))
        .arg("--out")
        .arg(out)
        .args(["--epochs", "1", "--max-seq-len", "32"]);
    c
}

#[test]
fn sts_b_scores_outside_zero_to_five_are_refused_with_their_line() {
    let dir = tempfile::tempdir().unwrap();
    let row = |score: &str| {
        format!("0\tmain-captions\tMSRvid\t2012test\t0000\tnone\tnone\tA man.\tA man.\t{score}")
    };
    for (file, score) in [("train.tsv", "7.5"), ("train.tsv", "-1"), ("dev.tsv", "-3")] {
        let sub = dir.path().join(format!("{file}{score}"));
        let r = row(score);
        let copy = task_copy(&sub, "STS-B", file, &[&r, &row("2.0")]);
        let e = fails(
            finetune("stsb", &copy, &sub.join("ft"))
                .args(["--seeds", "1", "--max-train-examples", "8"])
                .output()
                .unwrap(),
        );
        assert!(
            e.contains(file) && e.contains(":2:") && e.contains("out of range"),
            "{e}"
        );
        assert!(!sub.join("ft").exists(), "nothing written: {e}");
    }
}

#[test]
fn a_dev_set_on_which_the_metric_is_undefined_is_refused_not_scored_zero() {
    let dir = tempfile::tempdir().unwrap();
    let sts = |s: &str| {
        format!("0\tmain-captions\tMSRvid\t2012test\t0000\tnone\tnone\tA man.\tA dog.\t{s}")
    };
    let one_row = sts("3.0");
    let (c1, c2) = (sts("2.0"), sts("2.0"));
    let cola = |l: &str| format!("gj04\t{l}\t\tThe dog barked.");
    let (k1, k2) = (cola("1"), cola("1"));
    let cases: [(&str, &str, Vec<&str>); 3] = [
        ("STS-B", "stsb", vec![&one_row]),
        ("STS-B", "stsb", vec![&c1, &c2]),
        ("CoLA", "cola", vec![&k1, &k2]),
    ];
    for (i, (folder, task, rows)) in cases.into_iter().enumerate() {
        let sub = dir.path().join(format!("case{i}"));
        let copy = task_copy(&sub, folder, "dev.tsv", &rows);
        let e = fails(
            finetune(task, &copy, &sub.join("ft"))
                .args(["--seeds", "1", "--max-train-examples", "8"])
                .output()
                .unwrap(),
        );
        assert!(
            e.contains("dev.tsv") && e.contains("undefined"),
            "{task}: {e}"
        );
    }
}

/// `corpus` prepared beside it (in `s/`) with a vocabulary of `vocab` and `len`-token examples.
fn prepared(corpus: &Path, vocab: &str, len: &str) -> std::path::PathBuf {
    let out = corpus.with_file_name("s");
    ok(bin()
        .args(["prepare", "--input"])
        .arg(corpus)
        .args(["--train-vocab", vocab, "--max-seq-len", len, "--out"])
        .arg(&out)
        .output()
        .unwrap());
    out
}

#[test]
fn special_token_strings_in_raw_text_are_text() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("c.txt");
    let mut text = String::new();
    for i in 0..400 {
        text += &format!("The word [MASK] and [CLS] or [SEP] with [PAD] appear in line {i}.\n\n");
    }
    std::fs::write(&corpus, text).unwrap();
    let out = prepared(&corpus, "200", "32");
    let set = trueneg::text::shards::ShardSet::open(&out).unwrap();
    let s = set.manifest.special_ids;
    for i in 0..set.len() {
        let ex = set.get(i);
        let inner = &ex.tokens[1..ex.tokens.len() - 1];
        for bad in [s.mask, s.pad] {
            assert!(!inner.contains(&bad), "example {i}: {:?}", ex.tokens);
        }
        let seps = inner.iter().filter(|&&t| t == s.sep || t == s.cls).count();
        assert!(seps <= 1, "example {i}: {:?}", ex.tokens);
    }
}

#[test]
fn options_that_would_be_ignored_or_rounded_away_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    // --config beside --resume.
    let run = dir.path().join("run");
    ok(pretrain_cmd(&run, &["train.steps=2"]).output().unwrap());
    let e = fails(
        resume_cmd(&run)
            .args(["--config", "bert-base", "--set", "train.steps=30"])
            .output()
            .unwrap(),
    );
    assert!(e.contains("--config") && e.contains("--resume"), "{e}");
    // A changed model on resume names the setting, not a damaged checkpoint.
    let out = resume_cmd(&run)
        .args(["--set", "model.kind=bert", "--set", "train.steps=4"])
        .output()
        .unwrap();
    let e = fails(out);
    assert!(e.contains("model.kind") && !e.contains("damaged"), "{e}");
    // A generator scaled to nothing.
    let e = fails(
        pretrain_cmd(&dir.path().join("g"), &["model.generator_size=1e-9"])
            .output()
            .unwrap(),
    );
    assert!(
        e.contains("model.generator_size") && e.contains("nothing"),
        "{e}"
    );
    // CLINE ratios of zero.
    for flag in ["--ant-ratio", "--syn-ratio", "--cap"] {
        let e = fails(
            bin()
                .args(["prepare", "--triples", "--input"])
                .arg(data("wikitext-2/wiki.test.raw"))
                .args(["--tokenizer"])
                .arg(shards().join("tokenizer.json"))
                .args([flag, "0", "--out"])
                .arg(dir.path().join("cl"))
                .output()
                .unwrap(),
        );
        assert!(e.contains("out of range"), "{flag}: {e}");
    }
}

#[test]
fn held_out_shards_must_be_other_text_of_the_same_length() {
    let dir = tempfile::tempdir().unwrap();
    let at32 = dir.path().join("w32");
    ok(bin()
        .args(["prepare", "--input"])
        .arg(data("wikitext-2/wiki.valid.tokens"))
        .arg("--tokenizer")
        .arg(shards().join("tokenizer.json"))
        .args(["--max-seq-len", "32", "--out"])
        .arg(&at32)
        .output()
        .unwrap());
    for (eval, want) in [
        (shards().to_path_buf(), "training shards themselves"),
        (at32, "32-token"),
    ] {
        let e = fails(
            pretrain_cmd(
                &dir.path().join(format!("r{}", want.len())),
                &[
                    &format!("data.eval_shards={}", eval.display()),
                    "train.eval_every=3",
                ],
            )
            .output()
            .unwrap(),
        );
        assert!(e.contains("data.eval_shards") && e.contains(want), "{e}");
    }
}

/// Resumes `run` to step 9, which must succeed; its stderr.
fn resumed_to_step_nine(run: &Path) -> String {
    let out = resume_cmd(run)
        .args(["--set", "train.steps=9"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    err
}

#[test]
fn a_checkpoint_holding_nan_is_skipped_on_resume_and_never_written() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    ok(pretrain_cmd(&run, &["train.steps=6"]).output().unwrap());
    let last = run.join("checkpoints/step-00000006/model.safetensors");
    let mut map = trueneg::interop::tensors::read_safetensors(&last).unwrap();
    let (name, t) = map.tensors.iter_mut().next().unwrap();
    let name = name.clone();
    t.values[0] = f32::NAN;
    // Written through the library's door, such a file is refused.
    let e = trueneg::interop::tensors::write_safetensors(&last, &map.tensors, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains(&name) && e.contains("non-finite"), "{e}");
    // Written by hand, it is skipped on resume, which goes on from step 3.
    let st = safetensors::serialize(
        map.tensors
            .iter()
            .map(|(k, t)| {
                let bytes: Vec<u8> = t.values.iter().flat_map(|v| v.to_le_bytes()).collect();
                (k.clone(), (t.shape.clone(), bytes))
            })
            .collect::<Vec<_>>()
            .iter()
            .map(|(k, (s, b))| {
                (
                    k.clone(),
                    safetensors::tensor::TensorView::new(safetensors::Dtype::F32, s.clone(), b)
                        .unwrap(),
                )
            })
            .collect::<Vec<_>>(),
        None,
    )
    .unwrap();
    // With its content fingerprint, as trueneg would have written it: the values are refused.
    std::fs::write(&last, trueneg::io::tensor_file::finish_for_writing(st)).unwrap();
    let err = resumed_to_step_nine(&run);
    assert!(
        err.contains("non-finite") && err.contains("step-00000006"),
        "{err}"
    );
}

#[test]
fn a_missing_required_argument_is_named() {
    let e = fails(
        bin()
            .args(["evaluate", "--model", "x", "--out", "y"])
            .output()
            .unwrap(),
    );
    assert!(e.contains("--data"), "{e}");
    let e = fails(
        bin()
            .args(["prepare", "--input", "f", "--out", "d"])
            .output()
            .unwrap(),
    );
    assert!(
        e.contains("--train-vocab") || e.contains("--tokenizer"),
        "{e}"
    );
}

/// Waits until `path` exists (the child still running), at most 5 minutes.
fn wait_for(path: &Path, child: &mut std::process::Child) {
    let t0 = Instant::now();
    while !path.exists() {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            if let Some(e) = child.stderr.as_mut() {
                std::io::Read::read_to_string(e, &mut err).unwrap();
            }
            panic!("ended ({status}) before {}: {err}", path.display());
        }
        assert!(
            t0.elapsed() < Duration::from_secs(300),
            "no {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_stopped_finetune_continues_with_the_same_command_keeping_finished_seeds() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ft");
    let cmd = || {
        let mut c = finetune("rte", &data("glue/RTE"), &out);
        // Seeds long enough (all of RTE's examples) that a signal sent when
        // seed 1 is saved comes during seed 2.
        c.args(["--seeds", "1,2", "--max-eval-examples", "16"]);
        c
    };
    let mut child = cmd().stderr(Stdio::piped()).spawn().unwrap();
    // Seed 1 finished: stop during seed 2.
    wait_for(&out.join("seed-1/training.json"), &mut child);
    std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let stopped = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&stopped.stderr);
    assert_eq!(stopped.status.code(), Some(130), "{err}");
    assert!(err.contains("same command continues"), "{err}");
    assert!(
        !out.join(trueneg::io::lock::LOCK_FILE).exists(),
        "lock released"
    );
    let seed1 = std::fs::read(out.join("seed-1/model.safetensors")).unwrap();
    let again = cmd().output().unwrap();
    let text = ok(again);
    assert!(text.contains("RTE"), "{text}");
    assert!(out.join("results.json").exists() && out.join("seed-2/training.json").exists());
    assert_eq!(
        std::fs::read(out.join("seed-1/model.safetensors")).unwrap(),
        seed1,
        "the finished seed is kept"
    );
}

#[test]
fn a_corpus_of_special_token_strings_trains_and_a_run_that_died_before_its_first_step_is_retried() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("c.txt");
    std::fs::write(&corpus, "[MASK] [CLS] [SEP] [PAD]\n\n".repeat(300)).unwrap();
    let shards = prepared(&corpus, "100", "16");
    let run = dir.path().join("run");
    // What a process killed before its first step leaves: the run's files, no metrics line.
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(run.join("config.toml"), "[model]\n").unwrap();
    trueneg::io::outputs::set_owner(&run, "trueneg pretrain").unwrap();
    std::fs::copy(shards.join("tokenizer.json"), run.join("tokenizer.json")).unwrap();
    let out = ok(bin()
        .args(["pretrain", "--config", "tiny", "--run"])
        .arg(&run)
        .arg("--set")
        .arg(format!("data.shards={}", shards.display()))
        .args(["--set", "data.max_seq_len=16", "--set", "train.steps=3"])
        .output()
        .unwrap());
    assert!(out.contains("pre-trained 3 steps"), "{out}");
}

#[test]
fn a_checkpoint_whose_state_names_another_step_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    ok(pretrain_cmd(&run, &["train.steps=6"]).output().unwrap());
    let state = run.join("checkpoints/step-00000006/state.json");
    let mut s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    s["step"] = 5.into();
    std::fs::write(&state, s.to_string()).unwrap();
    let err = resumed_to_step_nine(&run);
    assert!(
        err.contains("field `step` is 5, the folder is step 6"),
        "{err}"
    );
}

#[test]
fn extending_a_finished_run_says_its_learning_rate_warms_up_again() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    common::ok(common::pretrain_cmd(&run, &[]).output().unwrap());
    let out = common::resume_cmd(&run)
        .args(["--set", "train.steps=15"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("train.steps 12 -> 15")
            && said.contains("resumes at step 12")
            && said.contains("warms it up again"),
        "{said}"
    );
    // The same total says nothing.
    let out = common::resume_cmd(&run)
        .args(["--set", "train.steps=15"])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("warms"));
}
