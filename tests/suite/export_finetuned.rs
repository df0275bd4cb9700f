//! A fine-tuned model exported with `export --model <seed folder>` is a transformers folder:
//! `AutoModelForSequenceClassification` / `AutoModelForQuestionAnswering` load it and give
//! trueneg's logits within 1e-4 on the task's dev examples (../shared/data), and its tokenizer
//! gives trueneg's token ids. That check needs Python with torch and transformers
//! (`TRUENEG_PYTHON`); without one the folder's files are checked alone, with a note.

use crate::common;
use common::{bin, data, ok, pretrained_tiny, transformers_folder, vec_of};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use burn::prelude::*;
use serde_json::{Value, json};
use trueneg::finetune::classifier_folder::load_finetuned;
use trueneg::finetune::qa_features::make_features;
use trueneg::finetune::span::load_qa;
use trueneg::model::Inputs;
use trueneg::tasks::glue::{GlueTask, read_glue};
use trueneg::tasks::squad::read_squad;
use trueneg::text::pairs::{Truncation, encode_pair};

/// Examples of each dev set compared.
const EXAMPLES: usize = 24;

/// The interpreter with torch and transformers, when there is one.
fn python() -> Option<String> {
    common::python_with("torch, transformers")
}

/// scripts/transformers_logits.py's answer to `request`.
fn transformers(python: &str, request: Value) -> Value {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scripts/transformers_logits.py"
    );
    let mut child = Command::new(python)
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    serde_json::to_writer(child.stdin.take().unwrap(), &request).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn finetune(model: &Path, task: &str, folder: &str, out: &Path, extra: &[&str]) -> PathBuf {
    ok(bin()
        .args(["finetune", "--task", task, "--data"])
        .arg(data(folder))
        .arg("--model")
        .arg(model)
        .arg("--out")
        .arg(out)
        .args([
            "--epochs",
            "1",
            "--max-train-examples",
            "64",
            "--lr",
            "5e-4",
        ])
        .args(extra)
        .output()
        .unwrap());
    out.join("seed-1")
}

fn export(seed: &Path, out: &Path) -> String {
    ok(bin()
        .args(["export", "--model"])
        .arg(seed)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap())
}

fn config(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap()
}

/// The files of a Hub folder, and its model card naming the task.
fn is_hub_folder(dir: &Path, task: &str) {
    for f in [
        "config.json",
        "model.safetensors",
        "README.md",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "vocab.txt",
    ] {
        assert!(dir.join(f).exists(), "{} missing", dir.join(f).display());
    }
    let card = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(card.contains(&format!("fine-tuned on {task}")), "{card}");
}

fn inputs(ids: &[u32], types: &[u32], device: &Device) -> Inputs {
    let n = ids.len();
    let int = |v: Vec<i64>| Tensor::<2, Int>::from_data(TensorData::new(v, [1, n]), device);
    Inputs {
        ids: int(ids.iter().map(|&x| x as i64).collect()),
        token_types: int(types.iter().map(|&x| x as i64).collect()),
        attention_mask: Some(int(vec![1; n])),
    }
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

/// trueneg's and transformers' logits on the first dev examples of `task` agree, and the
/// exported tokenizer gives trueneg's ids (pairs cut longest first, as transformers does).
fn same_logits(python: &str, seed: &Path, hub: &Path, task: GlueTask, dev: &Path) {
    let device = Device::flex();
    let (m, tok, max_len) = load_finetuned(seed, &device).unwrap();
    let examples = read_glue(task, dev).unwrap();
    let examples = &examples[..EXAMPLES.min(examples.len())];
    let pairs: Vec<Value> = examples
        .iter()
        .map(|e| json!([e.text_a, e.text_b]))
        .collect();
    let answer = transformers(
        python,
        json!({"model": hub, "kind": "sequence", "pairs": pairs, "max_len": max_len}),
    );
    let labels: Vec<String> = config(hub)["id2label"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    for (i, e) in examples.iter().enumerate() {
        // transformers' tokenizer cuts long pairs longest first, whatever the recipe did.
        let rule = Truncation::LongestFirst;
        let (ids, types) = encode_pair(&tok, &e.text_a, e.text_b.as_deref(), max_len, rule);
        let theirs: Vec<u32> = answer["ids"][i]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect();
        assert_eq!(theirs, ids, "{task:?} example {i}: token ids");
        let ours: Vec<f32> = vec_of(m.model.forward(&inputs(&ids, &types, &device)))
            .into_iter()
            .map(|v| v * m.regression_scale as f32)
            .collect();
        let theirs = floats(&answer["logits"][i]);
        common::assert_close(&format!("{task:?} example {i}"), &theirs, &ours, 1e-4);
        if let Some(label) = answer["labels"][i].as_str() {
            assert!(
                labels.iter().any(|l| l == label),
                "{label} not in {labels:?}"
            );
        }
    }
}

#[test]
fn glue_models_export_as_sequence_classifiers_that_transformers_runs() {
    let dir = tempfile::tempdir().unwrap();
    let run = pretrained_tiny(dir.path());
    let python = python();
    let head = ["--head", "transformers", "--max-seq-len", "64"];
    for (task, folder, labels) in [
        (
            GlueTask::named("rte"),
            "glue/RTE",
            json!({"0": "entailment", "1": "not_entailment"}),
        ),
        (GlueTask::named("stsb"), "glue/STS-B", json!({"0": "score"})),
    ] {
        let name = task.dir_name();
        let seed = finetune(&run, name, folder, &dir.path().join(name), &head);
        let hub = dir.path().join(format!("{name}-hub"));
        let said = export(&seed, &hub);
        assert!(said.contains("exported"), "{said}");
        is_hub_folder(&hub, name);
        let c = config(&hub);
        assert_eq!(
            c["architectures"],
            json!(["ElectraForSequenceClassification"])
        );
        assert_eq!(c["id2label"], labels);
        let problem = if task.is_regression() {
            "regression"
        } else {
            "single_label_classification"
        };
        assert_eq!(c["problem_type"], problem);
        if let Some(py) = &python {
            same_logits(py, &seed, &hub, task, &task.dev_files(&data(folder))[0]);
        }
    }
}

#[test]
fn bert_models_export_with_their_pooler() {
    let dir = tempfile::tempdir().unwrap();
    let model = transformers_folder(dir.path(), "bert_tiny");
    let seed = finetune(
        &model,
        "mrpc",
        "glue/MRPC",
        &dir.path().join("mrpc"),
        &["--max-seq-len", "32"],
    );
    let hub = dir.path().join("hub");
    export(&seed, &hub);
    is_hub_folder(&hub, "MRPC");
    let c = config(&hub);
    assert_eq!(c["architectures"], json!(["BertForSequenceClassification"]));
    assert_eq!(c["label2id"], json!({"not_equivalent": 0, "equivalent": 1}));
    if let Some(py) = python() {
        let dev = GlueTask::named("mrpc").dev_files(&data("glue/MRPC"))[0].clone();
        same_logits(&py, &seed, &hub, GlueTask::named("mrpc"), &dev);
    }
}

/// SQuAD under the ELECTRA recipe trains ELECTRA's joint head, which transformers has no class
/// for: `finetune` says so before training and `export` refuses it in one line, writing
/// nothing. transformers' head exports with the same logits.
#[test]
fn squad_models_export_as_question_answering() {
    let dir = tempfile::tempdir().unwrap();
    let run = pretrained_tiny(dir.path());
    let squad = "squad-v1.1/dev-half-a.json";
    let short = [
        "--max-seq-len",
        "64",
        "--doc-stride",
        "32",
        "--max-eval-examples",
        "8",
    ];
    let joint = dir.path().join("squad-joint");
    let out = bin()
        .args(["finetune", "--task", "squad", "--data"])
        .arg(data(squad))
        .arg("--model")
        .arg(&run)
        .arg("--out")
        .arg(&joint)
        .args(["--epochs", "1", "--max-train-examples", "16"])
        .args(short)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`export` will refuse"), "{err}");
    let info: Value = serde_json::from_str(
        &std::fs::read_to_string(joint.join("seed-1/finetuned.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(info["head"], "electra-joint", "{info}");
    let refused = bin()
        .args(["export", "--model"])
        .arg(joint.join("seed-1"))
        .arg("--out")
        .arg(dir.path().join("joint-hub"))
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--head transformers"), "{err}");
    assert!(!dir.path().join("joint-hub").exists());

    let mut extra = vec!["--head", "transformers"];
    extra.extend(short);
    let seed = finetune(&run, "squad", squad, &dir.path().join("squad"), &extra);
    let hub = dir.path().join("hub");
    export(&seed, &hub);
    is_hub_folder(&hub, "SQuAD");
    assert_eq!(
        config(&hub)["architectures"],
        json!(["ElectraForQuestionAnswering"])
    );
    let Some(py) = python() else { return };
    let device = Device::flex();
    let (qa, tok) = load_qa(&seed, &device).unwrap();
    let examples = read_squad(&data(squad)).unwrap();
    let features = make_features(&tok, &examples[..6], &qa.options).unwrap();
    let answer = transformers(
        &py,
        json!({
            "model": hub,
            "kind": "qa",
            "ids": features.iter().map(|f| f.ids.clone()).collect::<Vec<_>>(),
            "token_types": features.iter().map(|f| f.types.clone()).collect::<Vec<_>>(),
        }),
    );
    for (i, f) in features.iter().enumerate() {
        let (start, end) = qa.model.logits(&inputs(&f.ids, &f.types, &device));
        common::assert_close("start", &floats(&answer["start"][i]), &vec_of(start), 1e-4);
        common::assert_close("end", &floats(&answer["end"][i]), &vec_of(end), 1e-4);
    }
}

#[test]
fn the_default_one_layer_electra_head_exports_with_the_same_logits() {
    let dir = tempfile::tempdir().unwrap();
    let run = pretrained_tiny(dir.path());
    for (task, folder) in [
        (GlueTask::named("rte"), "glue/RTE"),
        (GlueTask::named("stsb"), "glue/STS-B"),
    ] {
        let name = task.dir_name();
        // The ELECTRA recipe's own head: no --head.
        let seed = finetune(
            &run,
            name,
            folder,
            &dir.path().join(format!("{name}-default")),
            &["--max-seq-len", "64"],
        );
        let info: Value =
            serde_json::from_str(&std::fs::read_to_string(seed.join("finetuned.json")).unwrap())
                .unwrap();
        assert_eq!(info["head"], "linear", "{info}");
        let hub = dir.path().join(format!("{name}-default-hub"));
        let said = export(&seed, &hub);
        assert!(said.contains("exported"), "{said}");
        is_hub_folder(&hub, name);
        assert_eq!(
            config(&hub)["architectures"],
            json!(["ElectraForSequenceClassification"])
        );
        // The card: the Hub's front matter with the seed's dev score, and no local path.
        let card = std::fs::read_to_string(hub.join("README.md")).unwrap();
        let front = card.split("---").nth(1).unwrap();
        let results: Value = serde_json::from_str(
            &std::fs::read_to_string(seed.parent().unwrap().join("results.json")).unwrap(),
        )
        .unwrap();
        let (metric, hub_metric) = if task.is_regression() {
            ("spearman", "spearmanr")
        } else {
            ("accuracy", "accuracy")
        };
        let value = results["per_seed"][0]["metrics"][metric].as_f64().unwrap();
        assert!(
            front.contains("datasets:\n- nyu-mll/glue")
                && front.contains(&format!("config: {}", name.to_lowercase().replace('-', "")))
                && front.contains(&format!("- type: {hub_metric}\n      value: {value:.2}")),
            "{front}"
        );
        let here = dir.path().to_string_lossy().to_string();
        assert!(!card.contains(&here), "{card}");
        // The score beside its baselines, every warning of the seed, and what the encoder is.
        let seed_scores = &results["per_seed"][0];
        let majority = seed_scores["baselines"]["majority"].as_f64().unwrap();
        assert!(
            card.contains("majority class `") && card.contains(&format!(" {majority:.2}, chance ")),
            "{card}"
        );
        // ELECTRA's head written as transformers' two layers: its limits, and what to use.
        assert!(
            card.contains("## Limits of this head") && card.contains("--head transformers"),
            "{card}"
        );
        let warned = card.contains("**Warning:**");
        let degenerate = seed_scores["collapsed"].is_string()
            || seed_scores["score"].as_f64().unwrap() <= majority;
        assert_eq!(warned, degenerate, "{card}");
        let settings: Value = serde_json::from_str(
            &std::fs::read_to_string(seed.parent().unwrap().join("finetune.json")).unwrap(),
        )
        .unwrap();
        let sha = settings["model_weights"].as_str().unwrap();
        assert!(
            card.contains("- Pre-training: objective `baseline`.")
                && card.contains(&format!("SHA-256 `{sha}`")),
            "{card}"
        );
        if let Some(py) = python() {
            same_logits(&py, &seed, &hub, task, &task.dev_files(&data(folder))[0]);
        }
    }
}

/// The scores `evaluate` writes for `model` on `folder`'s dev set, by metric.
fn evaluated(model: &Path, folder: &str, out: &Path) -> Value {
    ok(bin()
        .args(["evaluate", "--model"])
        .arg(model)
        .arg("--data")
        .arg(data(folder))
        .arg("--out")
        .arg(out)
        .output()
        .unwrap());
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("scores.json")).unwrap()).unwrap();
    v["files"][0]["scores"]["metrics"].clone()
}

/// `evaluate` takes a transformers folder as it takes trueneg's own fine-tuned model: the
/// export scores what the seed scores, and a folder whose classes come in another order (its
/// id2label and output rows permuted together, as another tool may write them) scores the
/// same, its classes matched by name.
#[test]
fn evaluate_reads_a_transformers_folder_and_matches_its_classes_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let seed = common::finetuned_rte(dir.path());
    let hub = dir.path().join("hub");
    export(&seed, &hub);
    assert_eq!(config(&hub)["finetuning_task"], "rte");
    let ours = evaluated(&seed, "glue/RTE", &dir.path().join("eval-seed"));
    let theirs = evaluated(&hub, "glue/RTE", &dir.path().join("eval-hub"));
    assert_eq!(ours, theirs);
    // The same model with its two classes the other way round.
    let swapped = dir.path().join("swapped");
    common::copy_files(&hub, &swapped);
    let mut c = config(&swapped);
    c["id2label"] = serde_json::json!({"0": "not_entailment", "1": "entailment"});
    c["label2id"] = serde_json::json!({"not_entailment": 0, "entailment": 1});
    std::fs::write(swapped.join("config.json"), c.to_string()).unwrap();
    let file = swapped.join("model.safetensors");
    let meta: std::collections::HashMap<String, String> = trueneg::io::tensor_file::metadata(&file)
        .unwrap()
        .into_iter()
        .collect();
    let mut w = trueneg::interop::tensors::read_safetensors(&file)
        .unwrap()
        .tensors;
    for name in ["classifier.out_proj.weight", "classifier.out_proj.bias"] {
        let t = w.get_mut(name).unwrap();
        let half = t.values.len() / 2;
        let (a, b) = t.values.split_at_mut(half);
        a.swap_with_slice(b);
    }
    trueneg::interop::tensors::write_safetensors(&file, &w, Some(meta)).unwrap();
    let permuted = evaluated(&swapped, "glue/RTE", &dir.path().join("eval-swapped"));
    assert_eq!(ours, permuted);
    // A transformers folder that does not say its task is refused in one line saying what to add.
    let untold = dir.path().join("untold");
    common::copy_files(&hub, &untold);
    let mut c = config(&untold);
    c.as_object_mut().unwrap().remove("finetuning_task");
    std::fs::write(untold.join("config.json"), c.to_string()).unwrap();
    let e = common::fails(
        bin()
            .args(["evaluate", "--model"])
            .arg(&untold)
            .arg("--data")
            .arg(data("glue/RTE"))
            .arg("--out")
            .arg(dir.path().join("eval-untold"))
            .output()
            .unwrap(),
    );
    assert!(e.contains("finetuning_task"), "{e}");
}
