//! Inputs consistent within themselves, checked before they are used: a shard listed twice, a
//! zeroed record, a count that wraps, a run's config that contradicts its weights, a damaged
//! history that a resume would rewrite TensorBoard's from.

use std::path::Path;

use crate::common::{self, bin, fails, ok, shards};

/// A copy of the shared corpus in `dir/P` with its manifest changed by `edit`.
fn corpus_with(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) -> std::path::PathBuf {
    let p = dir.join("P");
    common::fixture_cache::copy_tree(shards(), &p);
    let path = p.join("manifest.json");
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut m);
    std::fs::write(&path, serde_json::to_string_pretty(&m).unwrap()).unwrap();
    p
}

fn pretrain_on(corpus: &Path, run: &Path) -> std::process::Output {
    common::pretrain_cmd(run, &["train.steps=2"])
        .arg("--set")
        .arg(format!("data.shards={}", corpus.display()))
        .output()
        .unwrap()
}

/// R08: one shard file listed under two spellings (`./x`, a link to it) is refused: every
/// example would be trained on twice.
#[test]
fn a_shard_listed_twice_under_two_spellings_is_refused() {
    for second in ["./shard-00000.bin", "link.bin"] {
        let dir = tempfile::tempdir().unwrap();
        let corpus = corpus_with(dir.path(), |m| {
            let one = m["shards"][0].clone();
            let mut two = one.clone();
            two["file"] = second.into();
            m["shards"] = serde_json::json!([one, two]);
            m["examples"] = (2 * one["examples"].as_u64().unwrap()).into();
        });
        std::os::unix::fs::symlink("shard-00000.bin", corpus.join("link.bin")).unwrap();
        let e = fails(pretrain_on(&corpus, &dir.path().join("run")));
        assert!(e.contains("which are one file"), "{second}: {e}");
    }
}

/// R25: a shard's example count whose byte size wraps is one line, not a panic.
#[test]
fn an_example_count_that_wraps_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = corpus_with(dir.path(), |m| {
        let n = m["examples"].as_u64().unwrap() + (1 << 62);
        m["examples"] = n.into();
        m["shards"][0]["examples"] = n.into();
    });
    let e = fails(pretrain_on(&corpus, &dir.path().join("run")));
    assert!(e.contains("more than a file can hold"), "{e}");
}

/// R09: zeroed records (every other one) are refused, naming the shard and the record,
/// instead of training on empty examples.
#[test]
fn zeroed_records_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = corpus_with(dir.path(), |_| {});
    let shard = corpus.join("shard-00000.bin");
    let mut bytes = std::fs::read(&shard).unwrap();
    let record = 4 + 64 * 2;
    for r in bytes.chunks_mut(record).skip(1).step_by(2) {
        r.fill(0);
    }
    std::fs::write(&shard, bytes).unwrap();
    let e = fails(pretrain_on(&corpus, &dir.path().join("run")));
    assert!(
        e.contains("shard-00000.bin: record") && e.contains("an empty example"),
        "{e}"
    );
}

/// R17: a run's `config.toml` edited to another shape than its weights' is refused by
/// `export`, naming the field, instead of a config.json that contradicts the weights.
#[test]
fn a_config_that_contradicts_the_weights_is_refused() {
    for (from, to, field) in [
        (
            "num_hidden_layers = 2",
            "num_hidden_layers = 1",
            "num_hidden_layers",
        ),
        ("hidden_size = 64", "hidden_size = 128", "hidden_size"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let run = common::pretrained_tiny(dir.path());
        let path = run.join("config.toml");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(from), "{text}");
        std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
        let out = dir.path().join("exp");
        let e = fails(common::export_cmd(&run, &out).output().unwrap());
        assert!(
            e.contains(&format!("field `{field}`")) && e.contains("the weights"),
            "{e}"
        );
        let e = fails(
            bin()
                .args(["hits", "--model"])
                .arg(&run)
                .arg("--sentences")
                .arg(path.clone())
                .output()
                .unwrap(),
        );
        assert!(e.contains(&format!("field `{field}`")), "{e}");
        let e = fails(
            bin()
                .args(["inspect", "--run"])
                .arg(&run)
                .arg("--corpus")
                .arg(common::data("wikitext-2/wiki.valid.tokens"))
                .args(["--batches", "1", "--batch-size", "2"])
                .output()
                .unwrap(),
        );
        assert!(e.contains(&format!("field `{field}`")), "{e}");
    }
}

/// R06, R07: a resume whose `metrics.jsonl` cannot be read back whole is refused before the
/// TensorBoard history (rewritten from it) is touched.
#[test]
fn a_damaged_history_is_refused_before_tensorboard_is_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let run = common::pretrained_tiny(dir.path());
    let metrics = run.join("metrics.jsonl");
    let mut bytes = std::fs::read(&metrics).unwrap();
    let lines = bytes.iter().filter(|&&b| b == b'\n').count();
    bytes.push(0xff);
    bytes.push(b'\n');
    std::fs::write(&metrics, bytes).unwrap();
    let events = |run: &Path| {
        common::names(run)
            .into_iter()
            .filter(|n| n.starts_with("events.out.tfevents"))
            .map(|n| (n.clone(), std::fs::read(run.join(n)).unwrap()))
            .collect::<Vec<_>>()
    };
    let before = events(&run);
    assert!(!before.is_empty());
    let e = fails(
        common::resume_cmd(&run)
            .args(["--set", "train.steps=30"])
            .output()
            .unwrap(),
    );
    assert!(
        e.contains(&format!("metrics.jsonl:{}: not a JSON line", lines + 1)),
        "{e}"
    );
    assert_eq!(events(&run), before);
    // Mended, the resume goes on.
    let text = std::fs::read(&metrics).unwrap();
    std::fs::write(&metrics, &text[..text.len() - 2]).unwrap();
    ok(common::resume_cmd(&run)
        .args(["--set", "train.steps=30"])
        .output()
        .unwrap());
}

/// R12: an exported folder whose tokenizer was replaced by another is refused by every
/// command that loads it, against the fingerprint its weights' metadata records.
#[test]
fn an_export_with_another_tokenizer_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let run = common::pretrained_tiny(dir.path());
    let exp = dir.path().join("exp");
    ok(common::export_cmd(&run, &exp).output().unwrap());
    std::fs::copy(
        common::other_tokenizer(),
        exp.join("discriminator/tokenizer.json"),
    )
    .unwrap();
    for model in [exp.clone(), exp.join("discriminator")] {
        let e = fails(
            bin()
                .args(["hits", "--model"])
                .arg(&model)
                .arg("--sentences")
                .arg(common::data("wikitext-2/wiki.valid.tokens"))
                .output()
                .unwrap(),
        );
        assert!(e.contains("made for another tokenizer"), "{e}");
    }
    let e = fails(
        bin()
            .args(["finetune", "--task", "rte", "--model"])
            .arg(&exp)
            .arg("--data")
            .arg(common::data("glue/RTE"))
            .args(["--max-train-examples", "8", "--out"])
            .arg(dir.path().join("ft"))
            .output()
            .unwrap(),
    );
    assert!(e.contains("made for another tokenizer"), "{e}");
}

/// R14: a fine-tuning stopped after its first seed is not continued once its model has been
/// pre-trained further: the seeds would come from two different models.
#[test]
fn a_finetuning_does_not_continue_on_changed_weights() {
    let dir = tempfile::tempdir().unwrap();
    let run = common::pretrained_tiny(dir.path());
    let ft = dir.path().join("ft");
    let finetune = || {
        let mut c = bin();
        c.args(["finetune", "--task", "rte", "--model"])
            .arg(&run)
            .arg("--data")
            .arg(common::data("glue/RTE"))
            .args(["--seeds", "1,2", "--max-train-examples", "8"])
            .args(["--max-eval-examples", "8", "--epochs", "1", "--out"])
            .arg(&ft);
        c
    };
    ok(finetune().output().unwrap());
    // As a stop after seed 1 leaves it.
    std::fs::remove_file(ft.join("results.json")).unwrap();
    std::fs::remove_dir_all(ft.join("seed-2")).unwrap();
    ok(common::resume_cmd(&run)
        .args([
            "--set",
            "train.steps=24",
            "--set",
            "train.checkpoint_every=4",
        ])
        .output()
        .unwrap());
    let before = common::names(&ft);
    let e = fails(finetune().output().unwrap());
    assert!(
        e.contains("fine-tuned from other weights") && e.contains("start afresh"),
        "{e}"
    );
    assert_eq!(common::names(&ft), before);
}

/// The same tensors and metadata give the same bytes (safetensors' own writer orders the
/// metadata as a hash map does, differently in each process).
#[test]
fn the_same_export_gives_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let run = common::pretrained_tiny(dir.path());
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    ok(common::export_cmd(&run, &a).output().unwrap());
    ok(common::export_cmd(&run, &b).output().unwrap());
    for f in [
        "discriminator/model.safetensors",
        "generator/model.safetensors",
    ] {
        assert_eq!(
            std::fs::read(a.join(f)).unwrap(),
            std::fs::read(b.join(f)).unwrap(),
            "{f}"
        );
    }
    let tokenizer = shards().join("tokenizer.json");
    for out in [&a, &b] {
        ok(bin()
            .args(["lexicon", "build", "--tokenizer"])
            .arg(&tokenizer)
            .arg("--out")
            .arg(out.join("lex.safetensors"))
            .output()
            .unwrap());
    }
    assert_eq!(
        std::fs::read(a.join("lex.safetensors")).unwrap(),
        std::fs::read(b.join("lex.safetensors")).unwrap()
    );
}

/// Found by the corruption harness: `hits` on a model of fewer positions than
/// `--max-seq-len` (here 32 < 128) cuts its sentences to them instead of panicking in the
/// position embeddings' lookup.
#[test]
fn hits_cuts_sentences_to_the_models_positions() {
    let dir = tempfile::tempdir().unwrap();
    let model = common::transformers_folder(dir.path(), "electra_discriminator");
    let sentences = dir.path().join("s.txt");
    let text = std::fs::read_to_string(common::data("wikitext-2/wiki.valid.tokens")).unwrap();
    std::fs::write(
        &sentences,
        text.lines().take(200).collect::<Vec<_>>().join("\n"),
    )
    .unwrap();
    let out = bin()
        .args(["hits", "--model"])
        .arg(&model)
        .arg("--sentences")
        .arg(&sentences)
        .args(["--max", "4"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("exceeds the model's 32 positions"), "{err}");
}

/// Weights by content: a checkpoint whose tensors changed after they were written (one bit
/// of one value) is refused by every load, against the fingerprint its metadata records.
#[test]
fn weights_changed_after_writing_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let run = common::pretrained_tiny(dir.path());
    let last = common::names(&run.join("checkpoints"))
        .into_iter()
        .rfind(|n| n.starts_with("step-"))
        .unwrap();
    let weights = run.join("checkpoints").join(last).join("model.safetensors");
    let mut bytes = std::fs::read(&weights).unwrap();
    let n = bytes.len();
    // The lowest bit of the last value: still a finite number.
    bytes[n - 4] ^= 1;
    std::fs::write(&weights, bytes).unwrap();
    let e = fails(
        common::export_cmd(&run, &dir.path().join("exp"))
            .output()
            .unwrap(),
    );
    assert!(e.contains("not the ones written"), "{e}");
    let e = fails(
        bin()
            .args(["hits", "--model"])
            .arg(&run)
            .arg("--sentences")
            .arg(common::data("wikitext-2/wiki.valid.tokens"))
            .output()
            .unwrap(),
    );
    assert!(e.contains("not the ones written"), "{e}");
}

/// A fine-tuning's record holds the learning rate its seeds trained with: under ELECTRA's
/// recipe, the rate for the encoder's size (3e-4 for this Small-size one), not the recipe's
/// default before that choice.
#[test]
fn the_finetuning_record_holds_the_rate_used() {
    let dir = tempfile::tempdir().unwrap();
    let seed = common::finetuned_rte(dir.path());
    let record: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(seed.parent().unwrap().join("finetune.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(record["options"]["lr"].as_f64(), Some(3e-4), "{record}");
}
