//! CLINE end to end through the `trueneg` binary: sentence triples from `prepare --triples`,
//! continued pre-training from a tiny WikiText-2 run (resumed exactly), fine-tuning on the
//! counterfactual sentiment data, contrast consistency, and the comparison command.

use crate::common;
use common::{bin, data, fails, metrics, ok, pretrain_cmd, resume_cmd, shards};

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use trueneg::interop::tensors::read_safetensors;
use trueneg::text::shards::ShardSet;

/// WikiText-2 test as CLINE triples, with the shared test corpus' tokenizer.
fn prepare_cline(out: &Path, threads: &str) {
    ok(bin()
        .env("RAYON_NUM_THREADS", threads)
        .args(["prepare", "--triples", "--input"])
        .arg(data("wikitext-2/wiki.test.raw"))
        .arg("--tokenizer")
        .arg(shards().join("tokenizer.json"))
        .args(["--max-seq-len", "64", "--out"])
        .arg(out)
        .output()
        .unwrap());
}

fn cline_data() -> &'static Path {
    static DIR: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("cline");
        prepare_cline(&out, "2");
        (dir, out)
    })
    .1
}

/// A 6-step tiny ELECTRA run on the shared corpus: the checkpoint CLINE continues from.
fn base_run() -> &'static Path {
    static DIR: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("base");
        ok(pretrain_cmd(&run, &["train.steps=6"]).output().unwrap());
        (dir, run)
    })
    .1
}

/// Is `small` a subsequence of `big`?
fn subsequence(small: &[u32], big: &[u32]) -> bool {
    let mut it = big.iter();
    small.iter().all(|s| it.any(|b| b == s))
}

#[test]
fn prepare_cline_writes_labelled_triples_the_same_for_any_thread_count() {
    let set = ShardSet::open(cline_data()).unwrap();
    let c = set.manifest.triples.clone().expect("a CLINE manifest");
    assert!(set.len() > 1000, "{} triples", set.len());
    assert_eq!(set.len() + c.skipped, c.sentences);
    assert!(c.syn_synonyms > 0 && c.syn_hypernyms > 0 && c.syn_inflections > 0);
    assert!(c.ant_antonyms > 0 && c.ant_random > 0);
    let special = set.manifest.special_ids;
    for i in (0..set.len()).step_by(7) {
        let r = set.triple(i);
        for (ids, labels, label) in [(&r.syn, &r.syn_labels, 1i8), (&r.ant, &r.ant_labels, 2)] {
            assert_eq!(ids.len(), labels.len());
            assert!(ids.len() <= 64);
            assert_eq!((ids[0], ids[ids.len() - 1]), (special.cls, special.sep));
            assert_eq!((labels[0], labels[labels.len() - 1]), (-100, -100));
            assert!(labels.contains(&label), "triple {i}: a replaced piece");
            assert!(labels.iter().all(|&l| l == -100 || l == 0 || l == label));
            // Outside the replaced words, the sentence is x_ori's pieces in order.
            let kept: Vec<u32> = ids
                .iter()
                .zip(labels.iter())
                .filter(|&(_, &l)| l != label)
                .map(|(&t, _)| t)
                .collect();
            assert!(subsequence(&kept, &r.ori), "triple {i}: {r:?}");
            assert_ne!(ids, &r.ori, "triple {i} changed");
        }
    }
    // One thread, same bytes.
    let dir = tempfile::tempdir().unwrap();
    let one = dir.path().join("one");
    prepare_cline(&one, "1");
    for f in ["shard-00000.bin", "manifest.json", "tokenizer.json"] {
        assert_eq!(
            std::fs::read(one.join(f)).unwrap(),
            std::fs::read(cline_data().join(f)).unwrap(),
            "{f}"
        );
    }
}

/// `trueneg evaluate --contrast <set>` of a fine-tuned model folder into `out`.
fn evaluate_contrast(model: &Path, set: &Path, out: &Path) -> std::process::Output {
    bin()
        .args(["evaluate", "--model"])
        .arg(model)
        .arg("--contrast")
        .arg(set)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

fn cline_cmd(run: &Path, extra: &[&str]) -> std::process::Command {
    let mut c = pretrain_cmd(run, extra);
    c.args(["--set", "objective.kind=cline"])
        .arg("--set")
        .arg(format!("data.shards={}", cline_data().display()))
        .arg("--set")
        .arg(format!("model.init_from={}", base_run().display()));
    c
}

/// A tiny BERT trained with CLINE from scratch on the CLINE triples, with `extra` settings.
fn bert_cline_cmd(run: &Path, extra: &[&str]) -> std::process::Command {
    let mut c = pretrain_cmd(
        run,
        &[&["model.kind=bert", "objective.kind=cline"], extra].concat(),
    );
    c.arg("--set")
        .arg(format!("data.shards={}", cline_data().display()));
    c
}

#[test]
fn cline_continues_a_run_logs_its_terms_and_resumes_on_the_same_curve() {
    let dir = tempfile::tempdir().unwrap();
    let learned = ["train.steps=6", "objective.cline_weights=learned"];
    let a = dir.path().join("a");
    ok(cline_cmd(&a, &learned).output().unwrap());
    let m = metrics(&a);
    assert_eq!(m.len(), 6);
    for l in &m {
        let (rtd, acc, cts, closer) = (
            l.value("rtd_loss").unwrap(),
            l.value("rtd_accuracy").unwrap(),
            l.value("contrast_loss").unwrap(),
            l.value("syn_closer").unwrap(),
        );
        assert!(rtd.is_finite() && cts.is_finite() && rtd > 0.0 && cts > 0.0);
        assert!((0.0..=1.0).contains(&acc) && (0.0..=1.0).contains(&closer));
        assert!(l.value("disc_loss").is_none(), "no ELECTRA L_D in CLINE");
        // Learned: L = Σ exp(−s_i) L_i + max(s_i, 0) ≥ Σ w_i L_i.
        let w = l.vector("loss_weights").unwrap();
        assert!(w.iter().all(|&x| x > 0.5 && x < 2.0), "{w:?}");
        let weighted = w[0] * l.mlm_loss() + w[1] * rtd + w[2] * cts;
        assert!(l.loss >= weighted - 1e-3, "{} vs {weighted}", l.loss);
    }
    assert!(
        m[5].vector("loss_weights") != m[0].vector("loss_weights"),
        "the s_i are trained"
    );
    // The first step starts from the base run's weights: its MLM loss is near the base run's.
    let base_mlm = metrics(base_run()).last().unwrap().mlm_loss();
    assert!(
        (m[0].mlm_loss() - base_mlm).abs() < 1.0,
        "{} vs {base_mlm}",
        m[0].mlm_loss()
    );
    let ck = read_safetensors(&a.join("checkpoints/step-00000006/model.safetensors")).unwrap();
    assert_eq!(ck.tensors["cline.loss_weights"].shape, vec![3]);
    assert!(
        !ck.tensors.contains_key("cline.detection.dense.weight"),
        "binary ELECTRA: the discriminator's head"
    );

    // The same run with its last checkpoint gone (killed after step 3), resumed: the same curve.
    let b = dir.path().join("b");
    assert!(
        std::process::Command::new("cp")
            .arg("-r")
            .arg(&a)
            .arg(&b)
            .status()
            .unwrap()
            .success()
    );
    std::fs::remove_dir_all(b.join("checkpoints/step-00000006")).unwrap();
    ok(resume_cmd(&b).output().unwrap());
    let (ma, mb) = (metrics(&a), metrics(&b));
    assert_eq!(mb.len(), 6);
    for (x, y) in ma.iter().zip(&mb) {
        assert_eq!((x.step, x.loss, x.grad_norm), (y.step, y.loss, y.grad_norm));
        assert_eq!(x.vector("loss_weights"), y.vector("loss_weights"));
    }

    // Export leaves CLINE's own tensors out.
    let out = dir.path().join("hf");
    ok(bin()
        .args(["export", "--run"])
        .arg(&a)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap());
    let disc = read_safetensors(&out.join("discriminator/model.safetensors")).unwrap();
    assert!(disc.tensors.keys().all(|k| !k.starts_with("cline.")));
}

#[test]
fn the_code_variants_run_on_bert_and_bad_combinations_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("bert");
    ok(bert_cline_cmd(
        &run,
        &[
            "train.steps=2",
            "objective.cline_rtd=three-way",
            "objective.cline_contrast=bce",
            "objective.cline_ori=unmasked",
            "objective.cline_weights=fixed",
        ],
    )
    .output()
    .unwrap());
    let m = metrics(&run);
    assert!(
        m.iter()
            .all(|l| l.value("contrast_loss").unwrap().is_finite())
    );
    assert_eq!(m[0].vector("loss_weights"), Some(vec![1.0, 1.0, 1.0]));
    let ck = read_safetensors(&run.join("checkpoints/step-00000002/model.safetensors")).unwrap();
    assert_eq!(
        ck.tensors["cline.detection.dense_prediction.weight"].shape,
        vec![3, 64],
        "three logits per piece"
    );
    assert!(ck.tensors.contains_key("cline.pooler.dense.weight"));

    // The paper's detection over every token, with the paper's learned weights (the default).
    let all = dir.path().join("bert-all");
    ok(
        bert_cline_cmd(&all, &["train.steps=2", "objective.cline_rtd=binary-all"])
            .output()
            .unwrap(),
    );
    let m = metrics(&all);
    assert!(m.iter().all(|l| l.value("rtd_loss").unwrap().is_finite()));
    let ck = read_safetensors(&all.join("checkpoints/step-00000002/model.safetensors")).unwrap();
    assert!(
        ck.tensors.contains_key("cline.loss_weights"),
        "learned by default"
    );

    // CLINE on packed examples, and packed-example objectives on triples: one-line errors.
    let e = fails(
        pretrain_cmd(&dir.path().join("x"), &["objective.kind=cline"])
            .output()
            .unwrap(),
    );
    assert!(e.contains("prepare --triples"), "{e}");
    let mut c = pretrain_cmd(&dir.path().join("y"), &[]);
    c.arg("--set")
        .arg(format!("data.shards={}", cline_data().display()));
    let e = fails(c.output().unwrap());
    assert!(e.contains("holds sentence triples"), "{e}");
}

#[test]
fn fine_tuned_on_counterfactual_sentiment_and_scored_for_contrast_consistency() {
    let dir = tempfile::tempdir().unwrap();
    let ft = dir.path().join("ft");
    ok(bin()
        .args(["finetune", "--task", "cad-sentiment", "--data"])
        .arg(data("counterfactual/sentiment/orig"))
        .arg("--model")
        .arg(base_run())
        .args([
            "--epochs",
            "1",
            "--max-train-examples",
            "64",
            "--max-seq-len",
            "64",
            "--lr",
            "1e-3",
            "--out",
        ])
        .arg(&ft)
        .output()
        .unwrap());
    let out = dir.path().join("eval");
    let paired = data("counterfactual/sentiment/combined/paired/dev_paired.tsv");
    let stdout = ok(evaluate_contrast(&ft.join("seed-1"), &paired, &out));
    assert!(stdout.contains("| Ori | Rev | Con |"), "{stdout}");
    let j: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("contrast-cad-sentiment.json")).unwrap())
            .unwrap();
    let s = &j["scores"];
    let (ori, rev, con) = (
        s["ori"].as_f64().unwrap(),
        s["rev"].as_f64().unwrap(),
        s["con"].as_f64().unwrap(),
    );
    assert_eq!(s["groups"], 245);
    assert_eq!(s["perturbed"], 245);
    // Every original has one revision of the other label: a model right on both is right on
    // both sides of a flip, so Con ≤ min(Ori, Rev) and Ori + Rev − 100 ≤ Con.
    assert!(
        con <= ori.min(rev) + 1e-9 && con >= ori + rev - 100.0 - 1e-9,
        "{s}"
    );
    // Every example's prediction, the originals' agreeing with Ori.
    let tsv = std::fs::read_to_string(out.join("contrast-cad-sentiment-predictions.tsv")).unwrap();
    let rows: Vec<Vec<&str>> = tsv
        .lines()
        .skip(1)
        .map(|l| l.split('\t').collect())
        .collect();
    assert_eq!(rows.len(), 490);
    let originals: Vec<_> = rows.iter().filter(|r| r[1] == "original").collect();
    assert_eq!(originals.len(), 245);
    let right = originals.iter().filter(|r| r[3] == r[4]).count();
    assert!((100.0 * right as f64 / 245.0 - ori).abs() < 1e-9);

    // allenai's IMDb contrast set through the same model.
    ok(evaluate_contrast(
        &ft.join("seed-1"),
        &data("contrast-sets/IMDb"),
        &out,
    ));
    assert!(out.join("contrast-imdb.md").exists());

    // A sentiment model on the NLI layout: refused, naming the labels.
    let nli = dir.path().join("nli");
    for folder in ["original", "revised_premise", "revised_hypothesis"] {
        std::fs::create_dir_all(nli.join(folder)).unwrap();
        let rows = if folder == "original" { 1 } else { 2 };
        let mut t = String::from("sentence1\tsentence2\tgold_label\n");
        for k in 0..rows {
            // A revised premise keeps the hypothesis, a revised hypothesis the premise.
            let (p, h) = if folder == "revised_hypothesis" {
                (0, k)
            } else {
                (k, 0)
            };
            t += &format!("A man sleeps {p}.\tA person rests {h}.\tentailment\n");
        }
        std::fs::write(nli.join(folder).join("dev.tsv"), t).unwrap();
    }
    let e = fails(evaluate_contrast(&ft.join("seed-1"), &nli, &out));
    assert!(e.contains("contradiction"), "{e}");
}

#[test]
fn the_comparison_runs_end_to_end_and_reuses_finished_stages() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cmp");
    // The compared arm: `--objective` and `--data` as given.
    let with = |out: &Path, arm: &[std::ffi::OsString], task: &Path, contrast: &Path| {
        let mut c = bin();
        c.args(["compare-continued", "--base-run"])
            .arg(base_run())
            .args(arm)
            .args([
                "--steps",
                "3",
                "--pretrain-seeds",
                "1",
                "--finetune-seeds",
                "1",
            ])
            .args(["--set", "data.batch_size=8"])
            .arg("--task-data")
            .arg(task)
            .arg("--contrast")
            .arg(contrast)
            .arg("--hits-sentences")
            .arg(data("glue/SST-2/dev.tsv"))
            .args([
                "--hits-max",
                "20",
                "--epochs",
                "1",
                "--max-train-examples",
                "32",
            ])
            .args(["--max-seq-len", "64", "--out"])
            .arg(out);
        c
    };
    let (task, paired) = (
        data("counterfactual/sentiment/orig"),
        data("counterfactual/sentiment/combined/paired/dev_paired.tsv"),
    );
    let arm = |objective: &str, data: Option<&Path>| -> Vec<std::ffi::OsString> {
        let mut args = vec!["--objective".into(), objective.into()];
        if let Some(d) = data {
            args.extend(["--data".into(), d.into()]);
        }
        args
    };
    let cline_arm = arm("cline", Some(cline_data()));
    let cmd = || with(&out, &cline_arm, &task, &paired);

    // Checked before anything is trained or written: a task it does not support, a contrast
    // set of other labels, triples of another tokenizer, an arm without the data it trains on
    // or with data of another kind, and a compared arm named like the baseline.
    let refused = dir.path().join("refused");
    let boolq = data("contrast-sets/BoolQ/boolq_perturbed.json");
    let other_tok = dir.path().join("cline-other");
    common::copy_files(cline_data(), &other_tok);
    // Triples whose manifest and tokenizer.json are another tokenizer's.
    let other = common::other_tokenizer();
    std::fs::copy(&other, other_tok.join("tokenizer.json")).unwrap();
    let other_fp = trueneg::text::WordPieceTokenizer::load(&other)
        .unwrap()
        .fingerprint();
    // A consistent folder of the other tokenizer: its fingerprint and its size.
    let manifest = std::fs::read_to_string(other_tok.join("manifest.json")).unwrap();
    let mut m: serde_json::Value = serde_json::from_str(&manifest).unwrap();
    m["tokenizer_fingerprint"] = other_fp.into();
    m["vocab_size"] = trueneg::text::WordPieceTokenizer::load(&other)
        .unwrap()
        .vocab_size()
        .into();
    std::fs::write(
        other_tok.join("manifest.json"),
        serde_json::to_string(&m).unwrap(),
    )
    .unwrap();
    let other_arm = arm("cline", Some(&other_tok));
    let no_data = arm("cline", None);
    let hc_on_triples = arm("hc", Some(cline_data()));
    let baseline = arm("baseline", None);
    for (c, says) in [
        (
            with(&refused, &cline_arm, &data("glue/SST-2"), &paired),
            "--task-data",
        ),
        (with(&refused, &cline_arm, &task, &boolq), "TRUE"),
        (
            with(&refused, &other_arm, &task, &paired),
            "another tokenizer",
        ),
        (
            with(&refused, &no_data, &task, &paired),
            "give them with --data",
        ),
        (
            with(&refused, &hc_on_triples, &task, &paired),
            "but --objective hc trains on packed examples",
        ),
        (
            with(&refused, &baseline, &task, &paired),
            "--objective baseline",
        ),
    ] {
        let mut c = c;
        let e = fails(c.output().unwrap());
        assert!(e.contains(says), "{e}");
        assert!(
            !refused.exists(),
            "{says}: nothing is written before the checks"
        );
    }

    let first = ok(cmd().output().unwrap());
    assert!(
        first.contains("| baseline |") && first.contains("| cline |"),
        "{first}"
    );
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    for arm in report["arms"].as_array().unwrap() {
        let hits = arm["hits_cls"]["mean"].as_f64().unwrap();
        assert!((0.0..=100.0).contains(&hits));
        assert_eq!(arm["scores"].as_array().unwrap().len(), 1);
    }
    let diffs = report["difference"].as_array().unwrap();
    assert_eq!(diffs.len(), 6);
    for d in diffs {
        // [name, mean ± sd summary, bootstrap interval]
        let (s, ci) = (&d[1], &d[2]);
        let mean = s["mean"].as_f64().unwrap();
        assert!((ci["mean"].as_f64().unwrap() - mean).abs() < 1e-9, "{d}");
        assert!(ci["low"].as_f64().unwrap() <= mean && mean <= ci["high"].as_f64().unwrap());
    }
    assert!(first.contains("95 % interval"), "{first}");
    let cline_run = out.join("pretrain/cline-seed1");
    assert_eq!(metrics(&cline_run).last().unwrap().step, 3);
    assert!(metrics(&cline_run)[0].value("contrast_loss").is_some());
    assert!(
        metrics(&out.join("pretrain/baseline-seed1"))[0]
            .value("contrast_loss")
            .is_none()
    );

    // Run again: every stage is reused (no run gets longer), same report.
    let stamp = std::fs::metadata(out.join("finetune/cline-seed1/results.json"))
        .unwrap()
        .modified()
        .unwrap();
    let second = ok(cmd().output().unwrap());
    assert_eq!(first, second);
    assert_eq!(
        std::fs::metadata(out.join("finetune/cline-seed1/results.json"))
            .unwrap()
            .modified()
            .unwrap(),
        stamp
    );
}

#[test]
fn a_boolq_model_is_scored_on_the_boolq_contrast_set() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("boolq");
    std::fs::create_dir_all(&d).unwrap();
    let mut rows = String::new();
    for k in 0..16 {
        rows += &format!(
            "{{\"question\": \"is item {k} even\", \"title\": \"t\", \"answer\": {}, \"passage\": \"Item {k} is a number.\"}}\n",
            k % 2 == 0
        );
    }
    std::fs::write(d.join("train.jsonl"), &rows).unwrap();
    std::fs::write(d.join("dev.jsonl"), &rows).unwrap();
    let ft = dir.path().join("ft");
    ok(bin()
        .args(["finetune", "--task", "boolq", "--data"])
        .arg(&d)
        .arg("--model")
        .arg(base_run())
        .args(["--epochs", "1", "--max-seq-len", "64", "--out"])
        .arg(&ft)
        .output()
        .unwrap());
    let out = dir.path().join("eval");
    ok(evaluate_contrast(
        &ft.join("seed-1"),
        &data("contrast-sets/BoolQ/boolq_perturbed.json"),
        &out,
    ));
    let j: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("contrast-boolq.json")).unwrap()).unwrap();
    assert_eq!(j["scores"]["groups"], 68);
    assert_eq!(j["scores"]["perturbed"], 335);
    let con = j["scores"]["con"].as_f64().unwrap();
    assert!(con <= j["scores"]["ori"].as_f64().unwrap());
}

#[test]
fn cline_on_two_replicas_trains_like_one_device() {
    // BERT without dropout draws nothing at random, so the replicas' shares of every term
    // (and of the learned weights' regulariser) must add up to the one-device run.
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str, devices: &str| {
        let r = dir.path().join(name);
        let mut c = bert_cline_cmd(
            &r,
            &[
                "train.steps=3",
                "objective.cline_weights=learned",
                "model.hidden_dropout_prob=0",
                "model.attention_probs_dropout_prob=0",
            ],
        );
        ok(c.args(["--devices", devices]).output().unwrap());
        metrics(&r)
    };
    let (one, two) = (run("one", "cpu"), run("two", "cpu,cpu"));
    assert_eq!(one.len(), 3);
    for (a, b) in one.iter().zip(&two) {
        for (what, x, y) in [
            ("loss", a.loss, b.loss),
            ("mlm", a.mlm_loss(), b.mlm_loss()),
            (
                "rtd",
                a.value("rtd_loss").unwrap(),
                b.value("rtd_loss").unwrap(),
            ),
            (
                "contrast",
                a.value("contrast_loss").unwrap(),
                b.value("contrast_loss").unwrap(),
            ),
            (
                "rtd accuracy",
                a.value("rtd_accuracy").unwrap(),
                b.value("rtd_accuracy").unwrap(),
            ),
            (
                "syn closer",
                a.value("syn_closer").unwrap(),
                b.value("syn_closer").unwrap(),
            ),
            ("grad norm", a.grad_norm, b.grad_norm),
        ] {
            assert!(
                (x - y).abs() <= 2e-5 * x.abs().max(1.0),
                "step {} {what}: {x} vs {y}",
                a.step
            );
        }
    }
}

#[test]
fn the_papers_detection_labels_every_real_token() {
    use trueneg::text::shards::TripleRecord;
    use trueneg::train::steps::cline::every_token_labels;
    use trueneg::train::steps::triples::TripleBatch;
    // [CLS] a b [SEP] / [CLS] a c d [SEP]: one candidate replaced in each side.
    let r = TripleRecord {
        ori: vec![2, 10, 11, 3],
        syn: vec![2, 10, 12, 3],
        ant: vec![2, 13, 11, 14, 3],
        syn_labels: vec![-100, 0, 1, -100],
        ant_labels: vec![-100, 2, -100, -100, -100],
    };
    let cb = TripleBatch::new(&[r], 0);
    assert_eq!(
        cb.labels,
        vec![-100, 0, 1, -100, -100, -100, 2, -100, -100, -100]
    );
    // Every token of x_syn and x_ant is labelled, padding stays out.
    assert_eq!(
        every_token_labels(&cb),
        vec![0, 0, 1, 0, -100, 0, 2, 0, 0, 0]
    );
}
