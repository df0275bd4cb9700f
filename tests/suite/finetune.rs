//! End to end on CPU: a tiny pre-trained model fine-tuned on RTE, MRPC, CoLA, SST-2 and STS-B
//! (train slices, full dev sets from ../shared/data), scores printed and written; a
//! transformers-layout checkpoint (../shared/golden) fine-tunes the same way; `evaluate` writes
//! GLUE submission files.

use crate::common;
use common::{bin, data, ok, pretrained_tiny, transformers_folder};

use std::path::{Path, PathBuf};

fn glue(t: &str) -> PathBuf {
    data("glue").join(t)
}

fn results(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap()
}

#[test]
fn tiny_model_fine_tunes_on_five_glue_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let run = pretrained_tiny(dir.path());
    for (task, folder, metric) in [
        ("rte", "RTE", "accuracy"),
        ("mrpc", "MRPC", "f1"),
        ("cola", "CoLA", "mcc"),
        ("sst2", "SST-2", "accuracy"),
        ("stsb", "STS-B", "spearman"),
    ] {
        let out = dir.path().join(format!("ft-{task}"));
        let stdout = ok(bin()
            .args(["finetune", "--task", task, "--data"])
            .arg(glue(folder))
            .arg("--model")
            .arg(&run)
            .arg("--out")
            .arg(&out)
            .args([
                "--seeds",
                "1,2",
                "--epochs",
                "1",
                "--max-train-examples",
                "256",
                "--max-seq-len",
                "64",
                "--lr",
                "5e-4",
            ])
            .output()
            .unwrap());
        assert!(stdout.contains(metric), "{task}: {stdout}");
        let r = results(&out);
        // Provenance: the run and its checkpoint, and the version that wrote the record.
        assert!(r["model"]["checkpoint_step"].as_u64().unwrap() > 0, "{r}");
        let model = std::path::PathBuf::from(r["model"]["model"].as_str().unwrap());
        assert!(
            model.is_absolute() && model.ends_with(run.file_name().unwrap()),
            "{r}"
        );
        assert_eq!(r["trueneg_version"], env!("CARGO_PKG_VERSION"));
        let per_seed = r["per_seed"].as_array().unwrap();
        assert_eq!(per_seed.len(), 2, "{task}");
        for s in per_seed {
            let v = s["metrics"][metric].as_f64().unwrap();
            assert!(
                v.is_finite() && (-100.0..=100.0).contains(&v),
                "{task} {metric} {v}"
            );
        }
        assert!(r["train_examples_per_s"].as_f64().unwrap() > 0.0);
        let md = std::fs::read_to_string(out.join("results.md")).unwrap();
        assert!(md.contains(folder) && md.contains('±'), "{md}");
        // Every score is shown beside its baselines, and the degenerate seeds are counted.
        let b = &r["baselines"];
        assert!(
            md.contains(&format!(
                "| majority class | {:.1} |",
                b["majority"].as_f64().unwrap()
            )) && md.contains(&format!(
                "| chance | {:.1} |",
                b["chance"].as_f64().unwrap()
            )),
            "{md}"
        );
        assert!(stdout.contains("(majority class `"), "{stdout}");
        let collapsed = per_seed
            .iter()
            .filter(|s| s["collapsed"].is_string())
            .count();
        assert_eq!(
            r["one_class_seeds"].as_u64().unwrap() as usize,
            collapsed,
            "{r}"
        );
        if task == "rte" {
            // Accuracy on RTE dev of a 2-class model: a real number in the plausible range.
            let acc = per_seed[0]["metrics"]["accuracy"].as_f64().unwrap();
            assert!((30.0..=70.0).contains(&acc), "{acc}");
            let sub = dir.path().join("submit");
            let e = ok(bin()
                .args(["evaluate", "--model"])
                .arg(out.join("seed-1"))
                .arg("--data")
                .arg(glue("RTE"))
                .arg("--out")
                .arg(&sub)
                .output()
                .unwrap());
            assert!(e.contains("accuracy"), "{e}");
            // The printed scores are written too.
            let scores: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(sub.join("scores.json")).unwrap())
                    .unwrap();
            let written = scores["files"][0]["scores"]["metrics"]["accuracy"]
                .as_f64()
                .unwrap();
            assert!(
                e.contains(&format!("accuracy {written:.2}")),
                "{e} {scores}"
            );
            // Under SwapSynWordNet: a Table 6 row with the drop.
            let a = ok(bin()
                .args(["evaluate", "--model"])
                .arg(out.join("seed-1"))
                .arg("--data")
                .arg(glue("RTE"))
                .arg("--out")
                .arg(dir.path().join("attacked"))
                .args(["--attack", "swap-syn-wordnet"])
                .output()
                .unwrap());
            assert!(a.contains("| SwapSynWordNet | accuracy |"), "{a}");
            let tsv = std::fs::read_to_string(sub.join("RTE.tsv")).unwrap();
            assert_eq!(tsv.lines().count(), 278);
            assert!(
                tsv.lines()
                    .skip(1)
                    .all(|l| l.ends_with("\tentailment") || l.ends_with("\tnot_entailment"))
            );
        }
    }
}

#[test]
fn transformers_checkpoint_fine_tunes_like_a_run() {
    // The golden tiny ELECTRA discriminator (vocab 100) with a matching vocabulary file.
    let dir = tempfile::tempdir().unwrap();
    let model = transformers_folder(dir.path(), "electra_discriminator");
    let out = dir.path().join("ft");
    let stdout = ok(common::finetune_cmd("rte", &glue("RTE"), &model, &out)
        .args(common::SHORT_FINETUNE)
        .output()
        .unwrap());
    assert!(stdout.contains("accuracy"), "{stdout}");
    assert!(out.join("seed-1/model.safetensors").exists());
}

#[test]
fn squad_slice_fine_tunes_and_attacks_are_evaluated() {
    let dir = tempfile::tempdir().unwrap();
    let run = pretrained_tiny(dir.path());
    let squad =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data/squad-v1.1/dev-half-a.json");
    let out = dir.path().join("ft-squad");
    let stdout = ok(bin()
        .args(["finetune", "--task", "squad", "--data"])
        .arg(&squad)
        .arg("--model")
        .arg(&run)
        .arg("--out")
        .arg(&out)
        .args([
            "--epochs",
            "1",
            "--max-train-examples",
            "160",
            "--max-eval-examples",
            "80",
            "--max-seq-len",
            "128",
            "--doc-stride",
            "64",
            "--lr",
            "5e-4",
        ])
        .output()
        .unwrap());
    assert!(stdout.contains("SQuAD v1.1 EM"), "{stdout}");
    // The ELECTRA recipe's SQuAD head is ELECTRA's joint one.
    let info: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("seed-1/finetuned.json")).unwrap())
            .unwrap();
    assert_eq!(info["head"], "electra-joint", "{info}");
    let r = results(&out);
    let f1 = r["per_seed"][0]["metrics"]["f1"].as_f64().unwrap();
    let em = r["per_seed"][0]["metrics"]["em"].as_f64().unwrap();
    assert!((0.0..=100.0).contains(&f1) && em <= f1, "{em} {f1}");
    // {id: answer} for every evaluated question, each answer a piece of its context.
    let pred: serde_json::Map<String, serde_json::Value> = serde_json::from_str(
        &std::fs::read_to_string(out.join("seed-1/predictions.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(pred.len(), 80);
    let ex = trueneg::tasks::squad::read_squad(&squad).unwrap();
    for e in &ex[160..240] {
        let a = pred[&e.id].as_str().unwrap();
        assert!(e.context.contains(a), "{a:?}");
    }
    // evaluate --attack: original → transformed, with the drop.
    let ev = dir.path().join("ev");
    let s = ok(bin()
        .args(["evaluate", "--model"])
        .arg(out.join("seed-1"))
        .arg("--data")
        .arg(&squad)
        .arg("--out")
        .arg(&ev)
        .args(["--attack", "swap-syn-wordnet", "--max-eval-examples", "80"])
        .output()
        .unwrap());
    assert!(s.contains("SwapSynWordNet | f1 |"), "{s}");
    assert!(ev.join("attack-SwapSynWordNet.md").exists());
    assert!(ev.join("predictions-SwapSynWordNet.json").exists());
    // `attack` writes a transformed copy, never over an existing folder.
    let att = dir.path().join("att");
    ok(bin()
        .args([
            "attack",
            "--kind",
            "add-sent-diverse",
            "--task",
            "squad",
            "--data",
        ])
        .arg(&squad)
        .arg("--out")
        .arg(&att)
        .output()
        .unwrap());
    let again = bin()
        .args([
            "attack",
            "--kind",
            "add-sent-diverse",
            "--task",
            "squad",
            "--data",
        ])
        .arg(&squad)
        .arg("--out")
        .arg(&att)
        .output()
        .unwrap();
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already holds files"));
    let t = trueneg::tasks::squad::read_squad(&att.join("dev-half-a.json")).unwrap();
    assert_eq!(t.len(), ex.len());
}

/// Without `--max-seq-len`, a recipe longer than the model's positions is shortened to them,
/// with a note; SQuAD's folder of one file is read as that file.
#[test]
fn a_recipe_longer_than_the_model_is_shortened_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let run = pretrained_tiny(dir.path());
    let out = bin()
        .args(["finetune", "--task", "squad", "--data"])
        .arg(common::data("squad-v1.1"))
        .arg("--model")
        .arg(&run)
        .arg("--out")
        .arg(dir.path().join("ft"))
        .args([
            "--epochs",
            "1",
            "--max-train-examples",
            "24",
            "--max-eval-examples",
            "8",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("exceed the model's 128 positions: sequences (SQuAD: windows) of 128 tokens"),
        "{err}"
    );
}

/// SQuAD's data given as a folder that holds one file (the shared `dev-half-a.json`) is that
/// file, split in two as a single file is.
#[test]
fn a_squad_folder_with_one_file_is_that_file() {
    use trueneg::finetune::seeds::squad_splits;
    let folder = common::data("squad-v1.1");
    let (train, dev) = squad_splits(&folder, 100, 50).unwrap();
    let (t2, d2) = squad_splits(&folder.join("dev-half-a.json"), 100, 50).unwrap();
    assert_eq!((train.len(), dev.len()), (100, 50));
    assert_eq!(
        (train[0].id.as_str(), dev[0].id.as_str()),
        (t2[0].id.as_str(), d2[0].id.as_str())
    );
    let empty = tempfile::tempdir().unwrap();
    let e = squad_splits(empty.path(), 100, 50).unwrap_err().to_string();
    assert!(e.contains("train-v1.1.json"), "{e}");
}

/// The lines of a seed folder's `metrics.jsonl`.
fn metrics_lines(seed: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(seed.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `finetune --task rte` of `model` into `out` on 64 training rows of 32 tokens in batches of
/// 16, with `extra` flags.
fn finetune_rte(model: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    bin()
        .args(["finetune", "--task", "rte", "--data"])
        .arg(glue("RTE"))
        .arg("--model")
        .arg(model)
        .arg("--out")
        .arg(out)
        .args(["--max-train-examples", "64", "--max-seq-len", "32"])
        .args(["--batch-size", "16"])
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn each_seed_keeps_a_training_record_with_a_dev_score_per_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let model = transformers_folder(dir.path(), "electra_discriminator");
    let out = dir.path().join("ft");
    ok(finetune_rte(&model, &out, &["--epochs", "3"]));
    let seed = out.join("seed-1");
    let lines = metrics_lines(&seed);
    let evals: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| l["eval_score"].is_number())
        .collect();
    // 64 rows in batches of 16: 4 updates an epoch, a dev score at the end of each epoch.
    let steps: Vec<u64> = evals.iter().map(|l| l["step"].as_u64().unwrap()).collect();
    assert_eq!(steps, vec![4, 8, 12]);
    // Each evaluation's dev loss, by the training loss's function: a mean cross-entropy of a
    // 2-class model, so near ln 2 for a model that has learnt little, never 0.
    for e in &evals {
        let loss = e["eval_loss"].as_f64().unwrap();
        assert!(loss.is_finite() && loss > 0.05 && loss < 5.0, "{e}");
    }
    assert!(
        lines
            .iter()
            .any(|l| l["loss"].is_number() && l["learning_rate"].is_number())
    );
    // The default keeps the last model: its reported score is the last evaluation's.
    let r = results(&out);
    let reported = r["per_seed"][0]["score"].as_f64().unwrap();
    common::close_to(
        reported,
        evals[2]["eval_score"].as_f64().unwrap(),
        1e-9,
        "last",
    );
    assert!(seed.join("loss.png").exists());
    let events = trueneg::tensorboard::event_files(&seed).unwrap();
    assert_eq!(events.len(), 1);
    let tags: std::collections::BTreeSet<String> =
        trueneg::tensorboard::read_events(&std::fs::read(&events[0]).unwrap())
            .unwrap()
            .into_iter()
            .filter_map(|e| match e.what {
                Some(trueneg::tensorboard::What::Summary(s)) => Some(s.value),
                _ => None,
            })
            .flatten()
            .map(|v| v.tag)
            .collect();
    for tag in [
        "train/loss",
        "train/learning_rate",
        "eval/accuracy",
        "eval/loss",
    ] {
        assert!(tags.contains(tag), "{tag} in {tags:?}");
    }
}

#[test]
fn keep_best_saves_and_reports_the_best_evaluated_model() {
    let dir = tempfile::tempdir().unwrap();
    let model = transformers_folder(dir.path(), "electra_discriminator");
    let out = dir.path().join("ft");
    ok(finetune_rte(
        &model,
        &out,
        &[
            "--epochs",
            "4",
            "--lr",
            "1e-3",
            "--eval-every",
            "2",
            "--keep",
            "best",
        ],
    ));
    let seed = out.join("seed-1");
    let evals: Vec<(u64, f64)> = metrics_lines(&seed)
        .iter()
        .filter_map(|l| Some((l["step"].as_u64()?, l["eval_score"].as_f64()?)))
        .collect();
    assert_eq!(evals.len(), 8, "{evals:?}");
    // The first evaluation with the highest score.
    let best = evals
        .iter()
        .fold(evals[0], |b, &e| if e.1 > b.1 { e } else { b });
    let trained: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(seed.join("training.json")).unwrap())
            .unwrap();
    assert_eq!(trained["kept_step"].as_u64().unwrap(), best.0, "{trained}");
    let reported = results(&out)["per_seed"][0]["score"].as_f64().unwrap();
    common::close_to(reported, best.1, 1e-9, "best");
}

#[test]
fn early_stopping_and_keep_best_need_evaluations_during_training() {
    let dir = tempfile::tempdir().unwrap();
    let model = transformers_folder(dir.path(), "electra_discriminator");
    for (args, says) in [
        (&["--early-stop", "2"][..], "--early-stop"),
        (
            &["--keep", "best", "--eval-every", "end"][..],
            "--keep best",
        ),
    ] {
        let out = dir.path().join("ft");
        let e = common::fails(finetune_rte(&model, &out, args));
        assert!(e.contains(says), "{e}");
        assert!(!out.exists(), "{e}");
    }
}

#[test]
fn early_stopping_ends_a_seed_whose_dev_score_stops_improving() {
    let dir = tempfile::tempdir().unwrap();
    let model = transformers_folder(dir.path(), "electra_discriminator");
    let out = dir.path().join("ft");
    // A learning rate too small to change a prediction: the score never improves on the first.
    let said = ok(finetune_rte(
        &model,
        &out,
        &[
            "--epochs",
            "3",
            "--lr",
            "1e-12",
            "--eval-every",
            "1",
            "--keep",
            "best",
            "--early-stop",
            "2",
        ],
    ));
    let trained: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("seed-1/training.json")).unwrap())
            .unwrap();
    assert_eq!(trained["steps"], 3, "{trained}");
    assert_eq!(trained["kept_step"], 1, "{trained}");
    assert_eq!(trained["stopped_early"], true, "{trained}");
    assert!(said.contains("stopped early"), "{said}");
}

#[test]
fn electras_recipe_takes_the_learning_rate_and_layer_decay_of_the_encoders_size() {
    use trueneg::finetune::recipe::{FinetuneOptions, Recipe};
    use trueneg::tasks::glue::GlueTask;
    let mut encoder: trueneg::model::EncoderConfig = serde_json::from_value(serde_json::json!({
        "vocab_size": 100, "hidden_size": 256, "num_hidden_layers": 2,
        "num_attention_heads": 4, "intermediate_size": 64, "max_position_embeddings": 64
    }))
    .unwrap();
    let electra = FinetuneOptions::for_task(Recipe::Electra, GlueTask::named("rte"));
    // configure_finetuning.py: Large takes lr 5e-5 and layer-wise decay 0.9.
    for (hidden, lr, decay) in [
        (64, 3e-4, 0.8),
        (256, 3e-4, 0.8),
        (768, 1e-4, 0.8),
        (1024, 5e-5, 0.9),
    ] {
        encoder.hidden_size = hidden;
        let (o, note) = electra.for_encoder(&encoder);
        assert_eq!((o.lr, o.layer_decay), (lr, decay), "hidden {hidden}");
        let note = note.unwrap();
        assert_eq!(
            note.contains("layer-wise decay 0.9"),
            decay == 0.9,
            "{note}"
        );
    }
    // A decay given on the command line stays.
    let mut chosen = electra.clone();
    chosen.choose_layer_decay(Some(0.75));
    assert_eq!(chosen.for_encoder(&encoder).0.layer_decay, 0.75);
    let transformers = FinetuneOptions::for_task(Recipe::Transformers, GlueTask::named("rte"));
    let (o, _) = transformers.for_encoder(&encoder);
    assert_eq!((o.lr, o.layer_decay), (2e-5, 1.0));
    // On the command line: chosen by size and recorded, unless --lr says otherwise.
    let dir = tempfile::tempdir().unwrap();
    let model = transformers_folder(dir.path(), "electra_discriminator");
    for (extra, lr, by_size) in [(&[][..], 3e-4, true), (&["--lr", "5e-4"][..], 5e-4, false)] {
        let out = dir.path().join(format!("ft-{by_size}"));
        let mut args = vec!["--epochs", "1"];
        args.extend_from_slice(extra);
        ok(finetune_rte(&model, &out, &args));
        let o = &results(&out)["options"];
        assert_eq!(o["lr"].as_f64().unwrap(), lr, "{o}");
        assert_eq!(o["lr_by_size"], by_size, "{o}");
        assert_eq!(o["batch_loss"], "sum", "{o}");
    }
}

#[test]
fn a_model_that_predicts_one_class_or_one_score_is_called_collapsed() {
    use trueneg::finetune::scores::score;
    use trueneg::tasks::glue::{GlueTask, Label};
    let balanced: Vec<Label> = (0..20).map(|i| Label::Class(i % 2)).collect();
    let one_class = vec![1.0; 20];
    let s = score(GlueTask::named("rte"), &one_class, &balanced);
    let why = s.collapsed.expect("one class on balanced labels");
    assert!(
        why.contains("`not_entailment` for 20 of 20") && why.contains("learning rate"),
        "{why}"
    );
    // Mixed predictions, or gold labels as one-sided as the predictions: no note.
    let mixed: Vec<f64> = (0..20).map(|i| (i % 3 == 0) as u8 as f64).collect();
    assert!(
        score(GlueTask::named("rte"), &mixed, &balanced)
            .collapsed
            .is_none()
    );
    let one_sided: Vec<Label> = (0..20).map(|i| Label::Class((i == 0) as usize)).collect();
    assert!(
        score(GlueTask::named("rte"), &[0.0; 20], &one_sided)
            .collapsed
            .is_none()
    );
    // A regression to a constant.
    let gold: Vec<Label> = (0..20).map(|i| Label::Score(i as f64 / 4.0)).collect();
    let flat = vec![2.5; 20];
    let why = score(GlueTask::named("stsb"), &flat, &gold)
        .collapsed
        .expect("a constant score");
    assert!(why.contains("nearly the same score"), "{why}");
    let spread: Vec<f64> = (0..20).map(|i| i as f64 / 5.0).collect();
    assert!(
        score(GlueTask::named("stsb"), &spread, &gold)
            .collapsed
            .is_none()
    );
}

#[test]
fn baselines_are_the_task_metric_of_a_model_that_ignores_its_input() {
    use trueneg::finetune::scores::{baselines, score};
    use trueneg::tasks::glue::{GlueTask, Label};
    let classes = |v: &[usize]| v.iter().map(|&c| Label::Class(c)).collect::<Vec<_>>();
    // RTE, 3 of 4 `not_entailment`: always answering it scores 75; guessing 50.
    let rte = classes(&[1, 1, 0, 1]);
    let b = baselines(GlueTask::named("rte"), &rte);
    assert_eq!(
        (b.majority, b.chance, b.majority_class.as_str()),
        (75.0, 50.0, "not_entailment")
    );
    // The majority baseline is the model's own score on constant predictions.
    assert_eq!(
        score(GlueTask::named("rte"), &[1.0; 4], &rte).score,
        b.majority
    );
    // A tie takes the first class; three classes guess at a third.
    let mnli = classes(&[2, 0, 2, 0, 1]);
    let b = baselines(GlueTask::named("mnli"), &mnli);
    assert_eq!(b.majority_class, "contradiction");
    assert!((b.majority - 40.0).abs() < 1e-9 && (b.chance - 100.0 / 3.0).abs() < 1e-9);
    // Correlation scores: a constant predictor and guessing both score 0.
    let cola = baselines(GlueTask::named("cola"), &classes(&[1, 1, 1, 0]));
    assert_eq!((cola.majority, cola.chance), (0.0, 0.0));
    let gold: Vec<Label> = (0..6).map(|i| Label::Score(i as f64)).collect();
    let stsb = baselines(GlueTask::named("stsb"), &gold);
    assert_eq!((stsb.majority, stsb.chance), (0.0, 0.0));
    // MRPC is scored by accuracy: its baseline is accuracy too.
    let mrpc = baselines(GlueTask::named("mrpc"), &classes(&[1, 1, 0, 1, 1]));
    assert_eq!(mrpc.majority, 80.0);
}

#[test]
fn a_score_not_above_the_majority_class_is_warned_and_counted() {
    use trueneg::finetune::results::{TaskResult, warnings};
    use trueneg::finetune::scores::score;
    use trueneg::tasks::glue::{GlueTask, Label};
    let gold: Vec<Label> = (0..20)
        .map(|i| Label::Class((i % 4 != 0) as usize))
        .collect();
    // 15 of 20 are class 1. A model right on 14 is below the majority's 75.
    let weak: Vec<f64> = (0..20)
        .map(|i| ((i % 4 != 0) ^ (i < 6)) as u8 as f64)
        .collect();
    let s = score(GlueTask::named("rte"), &weak, &gold);
    assert!(s.score <= 75.0 && s.not_above_majority(), "{s:?}");
    let w = s.warnings();
    assert!(
        w.len() == 1 && w[0].contains("not above the majority-class baseline 75.00"),
        "{w:?}"
    );
    // Perfect predictions warn of nothing.
    let gold_pred: Vec<f64> = (0..20).map(|i| (i % 4 != 0) as u8 as f64).collect();
    let good = score(GlueTask::named("rte"), &gold_pred, &gold);
    assert!(good.warnings().is_empty());
    // A one-class model is a collapse: one warning, not two.
    let balanced: Vec<Label> = (0..20).map(|i| Label::Class(i % 2)).collect();
    let flat = score(GlueTask::named("rte"), &[0.0; 20], &balanced);
    assert_eq!(flat.warnings().len(), 1);
    // The summary counts the degenerate seeds.
    let result: TaskResult = serde_json::from_value(serde_json::json!({
        "task": "RTE", "seeds": [1, 2, 3],
        "per_seed": [good, s, flat],
        "score": {"mean": 0.0, "std": 0.0, "median": 0.0},
        "metrics": {}, "train_examples_per_s": 1.0, "eval_examples_per_s": 1.0,
        "one_class_seeds": 1, "not_above_majority_seeds": 2
    }))
    .unwrap();
    let lines = warnings(&result);
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(
        lines[2].contains("1 of 3 seeds predicted one class; 2 of 3 did not beat"),
        "{lines:?}"
    );
}

/// `--precision bf16` and `--grad-accum` train on the CPU too, recorded in results.json; a
/// slice count beyond the batch is refused in one line before anything is written.
#[test]
fn bf16_and_gradient_accumulation_train_and_are_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let model = transformers_folder(dir.path(), "electra_discriminator");
    let out = dir.path().join("ft");
    let args = ["--epochs", "1", "--precision", "bf16", "--grad-accum", "4"];
    ok(finetune_rte(&model, &out, &args));
    let r = results(&out);
    assert_eq!(r["options"]["precision"], "bf16", "{r}");
    assert_eq!(r["options"]["grad_accum"], 4, "{r}");
    // 64 rows in batches of 16: 4 updates, whatever the slices.
    let steps = metrics_lines(&out.join("seed-1"))
        .iter()
        .filter_map(|l| l["step"].as_u64())
        .max();
    assert_eq!(steps, Some(4));
    let refused = dir.path().join("ft-refused");
    let e = common::fails(finetune_rte(&model, &refused, &["--grad-accum", "32"]));
    assert!(
        e.contains("--grad-accum 32") && e.contains("--batch-size"),
        "{e}"
    );
    assert!(!refused.exists(), "{e}");
}

/// Every recorded setting is the one the loop used, read back from what it did: the learning
/// rate of each logged update is the schedule of the recorded `lr`, `warmup_fraction` and
/// `schedule` over the updates the recorded `epochs`, `batch_size` and example count make, and
/// the last update is the last of them; `finetune.json`, `results.json` and the seed's
/// TensorBoard record hold the same options.
#[test]
fn recorded_settings_are_the_ones_the_loop_used() {
    use trueneg::finetune::recipe::product_lr;
    let dir = tempfile::tempdir().unwrap();
    let model = transformers_folder(dir.path(), "electra_discriminator");
    for (recipe, extra) in [
        ("electra", &[][..]),
        ("transformers", &["--warmup-fraction", "0.25"][..]),
    ] {
        let out = dir.path().join(recipe);
        let mut args = vec!["--recipe", recipe, "--epochs", "2"];
        args.extend_from_slice(extra);
        ok(finetune_rte(&model, &out, &args));
        let r = results(&out);
        let o = &r["options"];
        let settings: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("finetune.json")).unwrap()).unwrap();
        assert_eq!(
            &settings["options"], o,
            "finetune.json against results.json"
        );
        let rows = r["examples"]["train_rows"].as_u64().unwrap();
        let batch = o["batch_size"].as_u64().unwrap();
        let total = rows.div_ceil(batch) * o["epochs"].as_u64().unwrap();
        let (lr, warmup) = (
            o["lr"].as_f64().unwrap(),
            o["warmup_fraction"].as_f64().unwrap(),
        );
        let steps: Vec<(u64, f64)> = metrics_lines(&out.join("seed-1"))
            .iter()
            .filter_map(|l| Some((l["step"].as_u64()?, l["learning_rate"].as_f64()?)))
            .collect();
        assert_eq!(steps.last().unwrap().0, total, "{recipe}: {steps:?}");
        for (step, logged) in steps {
            // The rate of update `step` (t = step − 1 updates made before it).
            let t = step - 1;
            let want = match o["schedule"].as_str().unwrap() {
                "product" => product_lr(lr, t, warmup * total as f64, total),
                _ => {
                    let w = (warmup * total as f64).ceil() as u64;
                    if t < w {
                        lr * t as f64 / w as f64
                    } else {
                        lr * (total - t) as f64 / (total - w) as f64
                    }
                }
            };
            assert!(
                (logged - want).abs() <= 1e-12 * lr.max(1.0),
                "{recipe} step {step}: {logged} vs {want}"
            );
        }
    }
}

/// A fine-tuned model given as `--model` continues: its encoder and its head (which fits the
/// same task's) are kept, as transformers' `from_pretrained` keeps a head that fits. With a
/// learning rate too small to move a weight, the continued model predicts as the first did.
#[test]
fn fine_tuning_continues_from_a_fine_tuned_model_with_its_head() {
    let dir = tempfile::tempdir().unwrap();
    let model = transformers_folder(dir.path(), "electra_discriminator");
    let first = dir.path().join("first");
    ok(finetune_rte(&model, &first, &["--epochs", "1"]));
    let second = dir.path().join("second");
    let out = finetune_rte(
        &first.join("seed-1"),
        &second,
        &["--epochs", "1", "--lr", "1e-30"],
    );
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("classification head (2 outputs) is kept"),
        "{said}"
    );
    let score = |d: &Path| results(d)["per_seed"][0]["metrics"].clone();
    assert_eq!(score(&first), score(&second));
    // The record says what it continued from.
    let from = &results(&second)["model"];
    assert!(
        from["pretraining"]
            .as_str()
            .unwrap()
            .contains("the fine-tuned model"),
        "{from}"
    );
}
