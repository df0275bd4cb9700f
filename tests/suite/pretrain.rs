//! End-to-end pre-training through the `trueneg` binary: a run, kill -9 + resume, export to
//! transformers' layout and back, and bad input.

use crate::common;
use common::{bin, fails, losses, metrics, ok, pretrain_cmd, resume_cmd, shared};

use std::path::{Path, PathBuf};

use trueneg::interop::read_hf_config;
use trueneg::interop::tensors::read_safetensors;

#[test]
fn killed_and_resumed_run_repeats_the_uninterrupted_curve() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    ok(pretrain_cmd(&a, &[]).output().unwrap());
    let full = losses(&a);
    assert_eq!(full.len(), 12);
    assert!(full.iter().all(|(_, l, g)| l.is_finite() && *g > 0.0));
    assert!(full[11].1 < full[0].1, "loss goes down: {full:?}");

    let b = dir.path().join("b");
    let mut child = pretrain_cmd(&b, &[]).spawn().unwrap();
    let marker = b.join("checkpoints/step-00000006/state.json");
    let t0 = std::time::Instant::now();
    while !marker.exists() {
        assert!(t0.elapsed().as_secs() < 300, "no checkpoint at step 6");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(losses(&b).len() < 12, "killed before the end");
    ok(resume_cmd(&b).output().unwrap());
    assert_eq!(losses(&b), full, "resumed curve = uninterrupted curve");

    // Starting a new run over an old one is refused.
    let e = fails(pretrain_cmd(&a, &[]).output().unwrap());
    assert!(e.contains("--resume"), "{e}");
}

#[test]
fn export_loads_back_and_matches_the_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    ok(pretrain_cmd(&run, &["train.steps=3"]).output().unwrap());
    let out = dir.path().join("hf");
    ok(bin()
        .args(["export", "--run"])
        .arg(&run)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap());
    let ck = read_safetensors(&run.join("checkpoints/step-00000003/model.safetensors")).unwrap();
    let disc = read_safetensors(&out.join("discriminator/model.safetensors")).unwrap();
    let generator = read_safetensors(&out.join("generator/model.safetensors")).unwrap();
    let dc = read_hf_config(&out.join("discriminator/config.json")).unwrap();
    let gc = read_hf_config(&out.join("generator/config.json")).unwrap();
    assert_eq!(dc.architectures, vec!["ElectraForPreTraining"]);
    assert_eq!(gc.architectures, vec!["ElectraForMaskedLM"]);
    assert_eq!(dc.encoder.hidden_size, 64);
    assert_eq!(gc.encoder.hidden_size, 32);
    assert_eq!(dc.encoder.vocab_size, 2000);
    assert!(out.join("generator/tokenizer.json").exists());
    // Hub-complete folders: the tokenizer's files as save_pretrained writes them, a card.
    for sub in ["discriminator", "generator"] {
        let d = out.join(sub);
        let tc: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(d.join("tokenizer_config.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(tc["model_max_length"], 128);
        assert_eq!(tc["tokenizer_class"], "ElectraTokenizer");
        assert_eq!(
            (tc["mask_token"].as_str(), tc["do_lower_case"].as_bool()),
            (Some("[MASK]"), Some(true))
        );
        let map = std::fs::read_to_string(d.join("special_tokens_map.json")).unwrap();
        assert!(map.contains("\"cls_token\": \"[CLS]\""), "{map}");
        let vocab = std::fs::read_to_string(d.join("vocab.txt")).unwrap();
        let pieces: Vec<&str> = vocab.lines().collect();
        assert_eq!(pieces.len(), 2000);
        assert_eq!(pieces[..5], ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]);
        let card = std::fs::read_to_string(d.join("README.md")).unwrap();
        let arch = if sub == "generator" {
            "ElectraForMaskedLM"
        } else {
            "ElectraForPreTraining"
        };
        assert!(
            card.contains(arch) && card.contains(&format!("# run ({sub})")),
            "{card}"
        );
        assert!(
            card.contains("Steps: 3 of 3") && card.contains("At step 3: loss "),
            "{card}"
        );
    }
    // The build that made the run and the export is recorded: version, commit, features.
    let version = String::from_utf8(ok_bytes(bin().arg("--version"))).unwrap();
    let line = version.trim().strip_prefix("trueneg ").unwrap().to_string();
    assert!(
        line.starts_with(env!("CARGO_PKG_VERSION"))
            && line.contains("(commit ")
            && line.contains("; features "),
        "{line}"
    );
    assert_eq!(trueneg::VERSION, line);
    let recorded = std::fs::read_to_string(run.join("trueneg-version.txt")).unwrap();
    assert_eq!(recorded.trim(), line);
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("discriminator/config.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(json["trueneg_version"], line.as_str());
    // Same names as transformers' modules, same values as the checkpoint.
    assert_eq!(
        disc.tensors["electra.embeddings.word_embeddings.weight"],
        ck.tensors["electra.embeddings.word_embeddings.weight"]
    );
    assert_eq!(
        generator.tensors["electra.encoder.layer.1.output.dense.weight"],
        ck.tensors["generator.electra.encoder.layer.1.output.dense.weight"]
    );
    assert_eq!(
        generator.tensors["electra.embeddings.word_embeddings.weight"].shape,
        vec![2000, 64]
    );
    assert!(generator.tensors.contains_key("generator_lm_head.bias"));
    assert!(
        disc.tensors
            .contains_key("discriminator_predictions.dense_prediction.weight")
    );
    assert_eq!(
        disc.tensors["electra.encoder.layer.0.intermediate.dense.weight"].shape,
        vec![256, 64],
        "Linear weights stored [out, in]"
    );

    // Continue pre-training from the exported folder: starts at the exported weights.
    let run2 = dir.path().join("run2");
    ok(pretrain_cmd(
        &run2,
        &[
            "train.steps=1",
            &format!("model.init_from={}", out.display()),
        ],
    )
    .output()
    .unwrap());
    // Exporting twice into the same folder is refused.
    let e = fails(
        bin()
            .args(["export", "--run"])
            .arg(&run)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap(),
    );
    assert!(e.contains("already holds an exported model"), "{e}");
}

#[test]
fn bad_configs_and_checkpoints_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let e = fails(
        pretrain_cmd(&dir.path().join("x"), &["train.stepz=3"])
            .output()
            .unwrap(),
    );
    assert!(e.contains("stepz"), "{e}");
    let e = fails(
        pretrain_cmd(&dir.path().join("y"), &["model.vocab_size=999"])
            .output()
            .unwrap(),
    );
    assert!(e.contains("model.vocab_size") && e.contains("2000"), "{e}");
    // `[model]` is flattened from the encoder's keys and its own: an unknown key and a bad
    // value are still named by their key.
    for (set, want) in [
        (
            "model.hidden_sise=64",
            "field `model.hidden_sise`: unknown field",
        ),
        (
            "model.pad_token_id=1",
            "field `model.pad_token_id`: unknown field",
        ),
        (
            "model.num_hidden_layers=-2",
            "field `model.num_hidden_layers`: invalid value",
        ),
        (
            "model.generator_size=\"big\"",
            "field `model.generator_size`: invalid type",
        ),
    ] {
        let e = fails(
            pretrain_cmd(&dir.path().join("z"), &[set])
                .output()
                .unwrap(),
        );
        assert!(e.contains(want), "{set}: {e}");
    }
    let e = fails(
        bin()
            .args(["pretrain", "--config", "nope.toml"])
            .output()
            .unwrap(),
    );
    assert!(e.contains("nope.toml"), "{e}");

    // A checkpoint whose tensors have other shapes (a golden BERT for an ELECTRA run).
    let e = fails(
        pretrain_cmd(
            &dir.path().join("z"),
            &[
                "model.kind=bert",
                &format!("model.init_from={}", shared("golden/bert_tiny").display()),
            ],
        )
        .output()
        .unwrap(),
    );
    assert!(e.contains("config.json") && e.contains("vocab_size"), "{e}");

    // A truncated checkpoint.
    let run = dir.path().join("t");
    ok(pretrain_cmd(&run, &["train.steps=3"]).output().unwrap());
    let f = run.join("checkpoints/step-00000003/model.safetensors");
    let bytes = std::fs::read(&f).unwrap();
    std::fs::write(&f, &bytes[..bytes.len() / 2]).unwrap();
    let out = resume_cmd(&run).output().unwrap();
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    let last = e.trim().lines().last().unwrap();
    assert!(
        last.starts_with("error:") && last.contains("model.safetensors"),
        "{e}"
    );

    // A diverging run stops with the step number and keeps the last good checkpoint.
    let run = dir.path().join("nan");
    let e = fails(
        pretrain_cmd(
            &run,
            &[
                "optimizer.lr=1e30",
                "optimizer.max_grad_norm=0.0",
                "optimizer.warmup_steps=0",
            ],
        )
        .output()
        .unwrap(),
    );
    assert!(e.contains("step") && e.contains("not finite"), "{e}");
}

/// The README's main job (embedded corpus, vocabulary trained on it) gives the same files
/// twice: vocabulary, shards, losses and weights.
#[test]
fn main_job_is_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    let runs: Vec<PathBuf> = ["a", "b"].iter().map(|n| dir.path().join(n)).collect();
    for r in &runs {
        ok(bin()
            .args(["pretrain", "--config", "tiny", "--run"])
            .arg(r)
            .args(["--set", "train.steps=4", "--set", "train.log_every=1"])
            .output()
            .unwrap());
    }
    for f in [
        "data/tokenizer.json",
        "data/shard-00000.bin",
        "checkpoints/step-00000004/model.safetensors",
    ] {
        assert!(
            std::fs::read(runs[0].join(f)).unwrap() == std::fs::read(runs[1].join(f)).unwrap(),
            "{f} differs between two identical runs"
        );
    }
    let strip = |r: &Path| -> Vec<(u64, f64, f64)> {
        metrics(r)
            .into_iter()
            .map(|m| (m.step, m.loss, m.grad_norm))
            .collect()
    };
    assert_eq!(strip(&runs[0]), strip(&runs[1]));
    assert_eq!(strip(&runs[0]).len(), 4);
}

#[test]
fn a_config_json_is_checked_by_the_rules_of_the_model_section() {
    let dir = std::env::temp_dir().join(format!("trueneg-hfcfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("config.json");
    let write = |heads: u32, dropout: f64| {
        let json = format!(
            r#"{{"model_type": "electra", "vocab_size": 100, "embedding_size": 32, "hidden_size": 64,
"num_hidden_layers": 1, "num_attention_heads": {heads}, "intermediate_size": 128,
"max_position_embeddings": 64, "type_vocab_size": 2, "hidden_dropout_prob": {dropout}}}"#
        );
        std::fs::write(&path, json).unwrap();
    };
    write(4, 0.1);
    assert_eq!(
        read_hf_config(&path).unwrap().encoder.num_attention_heads,
        4
    );
    write(5, 0.1);
    let e = read_hf_config(&path).unwrap_err().to_string();
    assert!(
        e.contains(
            "config.json: field `num_attention_heads` = 5 must be > 0 and divide hidden_size = 64"
        ),
        "{e}"
    );
    write(4, 1.0);
    let e = read_hf_config(&path).unwrap_err().to_string();
    assert!(
        e.contains("field `hidden_dropout_prob` = 1 must be in [0, 1)"),
        "{e}"
    );
    // The same rule under the `[model]` key in a training config.
    let toml = dir.join("bad.toml");
    std::fs::write(&toml, "[model]\nnum_attention_heads = 5\n").unwrap();
    let e = trueneg::train::config::PretrainConfig::load_file(&toml, &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(
            "field `model.num_attention_heads` = 5 must be > 0 and divide hidden_size = 256"
        ),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

fn ok_bytes(c: &mut std::process::Command) -> Vec<u8> {
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn an_empty_override_returns_a_key_to_its_default() {
    let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let load = |v: &[&str]| trueneg::train::config::PretrainConfig::load("tiny", &set(v)).unwrap();
    let chosen = load(&["objective.lexicon=/some/table.lex"]);
    assert_eq!(
        chosen.objective.parts.hc.lexicon.as_deref(),
        Some(Path::new("/some/table.lex"))
    );
    let unset = load(&["objective.lexicon=/some/table.lex", "objective.lexicon="]);
    assert_eq!(unset.objective.parts.hc.lexicon, None);
    // The key leaves the config, the preset's value too: the built-in default applies.
    let default = trueneg::train::config::PretrainConfig::default()
        .train
        .steps;
    assert_ne!(load(&[]).train.steps, default);
    assert_eq!(load(&["train.steps="]).train.steps, default);
}
