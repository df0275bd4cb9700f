//! transformers model ids (`org/name`) taken from the local Hugging Face cache as transformers
//! finds them offline (`HF_HUB_CACHE`, `HF_HOME/hub`; `refs/main` → `snapshots/<commit>`), by
//! `finetune --model` and `model.init_from`; an ELECTRA discriminator's folder given to
//! `model.init_from` brings its generator from beside it.

use crate::common;
use common::{bin, copy_files, data, export_cmd, fails, losses, ok, pretrain_cmd};

use std::path::{Path, PathBuf};

use trueneg::interop::hub_cache::is_model_id;

/// Puts the files of `folder` in `cache` as model `id` at commit `commit`; returns the snapshot.
fn cache_model(cache: &Path, id: &str, folder: &Path, commit: &str) -> PathBuf {
    let repo = cache.join(format!("models--{}", id.replace('/', "--")));
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), commit).unwrap();
    let snapshot = repo.join("snapshots").join(commit);
    copy_files(folder, &snapshot);
    snapshot
}

#[test]
fn model_ids_are_names_not_paths() {
    for id in [
        "google/electra-small-discriminator",
        "bert-base-uncased",
        "a_b/c.d",
    ] {
        assert!(is_model_id(id), "{id}");
    }
    for p in [
        "./x", "../x", "a/b/c", "/abs/x", "a//b", ".hidden", "x y", "",
    ] {
        assert!(!is_model_id(p), "{p}");
    }
}

#[test]
fn finetune_takes_a_model_id_from_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let folder = common::transformers_folder(dir.path(), "electra_discriminator");
    let home = dir.path().join("hf");
    let snapshot = cache_model(&home.join("hub"), "google/electra-tiny", &folder, "c0ffee");
    let finetune = |id: &str, out: &str| {
        let mut c = bin();
        c.args(["finetune", "--task", "rte", "--data"])
            .arg(data("glue/RTE"))
            .args(["--model", id, "--out"])
            .arg(dir.path().join(out))
            .args(["--epochs", "1", "--max-train-examples", "16"])
            .args(["--max-seq-len", "32"])
            .env_remove("HF_HUB_CACHE")
            .env("HF_HOME", &home);
        c.output().unwrap()
    };
    ok(finetune("google/electra-tiny", "ft"));
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("ft/results.json")).unwrap())
            .unwrap();
    assert_eq!(
        r["model"]["model"].as_str().unwrap(),
        snapshot.to_str().unwrap()
    );

    let e = fails(finetune("google/nope", "ft2"));
    assert!(
        e.contains("models--google--nope/refs/main") && e.contains("hf download google/nope"),
        "{e}"
    );
    // A snapshot with PyTorch's pickle only is named, with the way out.
    let bin_only = dir.path().join("bin-only");
    std::fs::create_dir_all(&bin_only).unwrap();
    std::fs::copy(folder.join("config.json"), bin_only.join("config.json")).unwrap();
    std::fs::write(bin_only.join("pytorch_model.bin"), b"pickle").unwrap();
    cache_model(&home.join("hub"), "old/model", &bin_only, "1");
    let e = fails(finetune("old/model", "ft3"));
    assert!(
        e.contains("pytorch_model.bin") && e.contains("save_pretrained"),
        "{e}"
    );
}

#[test]
fn init_from_a_discriminator_folder_or_id_brings_its_generator() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base");
    ok(pretrain_cmd(&base, &["train.steps=3"]).output().unwrap());
    let exported = dir.path().join("exported");
    ok(export_cmd(&base, &exported).output().unwrap());
    let first_loss = |run: &Path, init: &str, cache: Option<&Path>| {
        let mut c = pretrain_cmd(run, &["train.steps=1", &format!("model.init_from={init}")]);
        if let Some(cache) = cache {
            c.env("HF_HUB_CACHE", cache);
        }
        ok(c.output().unwrap());
        losses(run)[0]
    };
    let pair = first_loss(&dir.path().join("a"), exported.to_str().unwrap(), None);
    let disc = exported.join("discriminator");
    let alone = first_loss(&dir.path().join("b"), disc.to_str().unwrap(), None);
    assert_eq!(pair, alone, "the discriminator's folder finds ../generator");

    let cache = dir.path().join("cache");
    let snapshot = cache_model(&cache, "me/tiny-discriminator", &disc, "abc");
    cache_model(
        &cache,
        "me/tiny-generator",
        &exported.join("generator"),
        "def",
    );
    let run = dir.path().join("c");
    let by_id = first_loss(&run, "me/tiny-discriminator", Some(&cache));
    assert_eq!(pair, by_id, "the id's generator comes from the cache");
    let config = std::fs::read_to_string(run.join("config.toml")).unwrap();
    assert!(config.contains(snapshot.to_str().unwrap()), "{config}");

    let lonely = dir.path().join("lonely");
    copy_files(&disc, &lonely);
    let e = fails(
        pretrain_cmd(
            &dir.path().join("d"),
            &[&format!("model.init_from={}", lonely.display())],
        )
        .output()
        .unwrap(),
    );
    assert!(e.contains("discriminator alone"), "{e}");
}

/// `evaluate --model org/name` scores a fine-tuned classifier of the local cache as it scores
/// the same folder given by path.
#[test]
fn evaluate_takes_a_fine_tuned_model_id_from_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let seed = common::finetuned_rte(dir.path());
    let hub = dir.path().join("hub");
    ok(bin()
        .args(["export", "--model"])
        .arg(&seed)
        .arg("--out")
        .arg(&hub)
        .output()
        .unwrap());
    let home = dir.path().join("hf");
    cache_model(&home.join("hub"), "someone/electra-rte", &hub, "beef");
    let evaluate = |model: &str, out: &str| -> serde_json::Value {
        ok(bin()
            .args(["evaluate", "--model", model, "--data"])
            .arg(data("glue/RTE"))
            .arg("--out")
            .arg(dir.path().join(out))
            .env_remove("HF_HUB_CACHE")
            .env("HF_HOME", &home)
            .output()
            .unwrap());
        let v: serde_json::Value = serde_json::from_slice(
            &std::fs::read(dir.path().join(out).join("scores.json")).unwrap(),
        )
        .unwrap();
        v["files"][0]["scores"].clone()
    };
    let by_id = evaluate("someone/electra-rte", "by-id");
    let by_path = evaluate(hub.to_str().unwrap(), "by-path");
    assert_eq!(by_id, by_path);
}
