//! The doors every file goes through (`src/io/`): what a path is and how large it may be is
//! checked before it is read, paths written inside files stay inside their folder, a folder of
//! the wrong kind is named as such, and a command writes only into a folder it owns. Each case
//! ends in one clear line, a non-zero exit, and nothing already there changed.

use crate::common;
use common::{bin, copy_files, data, fails, ok, pretrained_tiny_shared, shards};

use std::path::Path;
use std::process::Command;

fn mkfifo(path: &Path) {
    let st = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(st.success(), "mkfifo {}", path.display());
}

/// Runs `c` with a time limit: a command that blocks on a FIFO fails the test instead of
/// hanging it.
fn within_a_minute(mut c: Command) -> std::process::Output {
    c.stdin(std::process::Stdio::null());
    let mut t = Command::new("timeout");
    t.arg("60").arg(c.get_program()).args(c.get_args());
    let out = t.output().unwrap();
    assert_ne!(out.status.code(), Some(124), "blocked: {:?}", c.get_args());
    out
}

#[test]
fn a_model_file_that_is_a_fifo_is_named_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    let model = common::transformers_folder(dir.path(), "electra_discriminator");
    for f in ["config.json", "model.safetensors", "vocab.txt"] {
        let copy = dir.path().join(format!("m-{f}"));
        copy_files(&model, &copy);
        std::fs::remove_file(copy.join(f)).unwrap();
        mkfifo(&copy.join(f));
        let mut c = bin();
        c.args(["finetune", "--task", "rte", "--data"])
            .arg(data("glue/RTE"))
            .arg("--model")
            .arg(&copy)
            .arg("--out")
            .arg(dir.path().join(format!("ft-{f}")));
        let e = fails(within_a_minute(c));
        assert!(
            e.contains(f) && e.contains("is a FIFO, not a file"),
            "{f}: {e}"
        );
    }
}

#[test]
fn prepare_names_a_fifo_or_a_device_given_as_input() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe.txt");
    mkfifo(&fifo);
    for (input, what) in [
        (fifo.as_path(), "is a FIFO, not a file"),
        (Path::new("/dev/zero"), "is a character device, not a file"),
    ] {
        let mut c = bin();
        c.args(["prepare", "--input"])
            .arg(input)
            .args(["--train-vocab", "200", "--out"])
            .arg(dir.path().join("out"));
        let e = fails(within_a_minute(c));
        assert!(e.contains(what), "{e}");
        assert!(!dir.path().join("out").exists(), "nothing written");
    }
}

/// A copy of the shared shards whose manifest `edit` changes.
fn shards_with(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) -> std::path::PathBuf {
    let copy = dir.join("shards");
    copy_files(shards(), &copy);
    let path = copy.join("manifest.json");
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut m);
    std::fs::write(&path, serde_json::to_string(&m).unwrap()).unwrap();
    copy
}

fn pretrain_on(shards: &Path, run: &Path) -> String {
    let mut c = bin();
    c.args(["pretrain", "--config", "tiny", "--run"])
        .arg(run)
        .arg("--set")
        .arg(format!("data.shards={}", shards.display()))
        .args(["--set", "train.steps=2"]);
    let e = fails(c.output().unwrap());
    assert!(!run.join("config.toml").exists(), "no run files left: {e}");
    e
}

#[test]
fn a_manifest_shard_path_outside_its_folder_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    // A real shard one folder up, reached with `..`, and two absolute paths.
    copy_files(shards(), &dir.path().join("w"));
    for (i, file) in [
        "../w/shard-00000.bin",
        "/etc/passwd",
        "../../../../etc/passwd",
    ]
    .into_iter()
    .enumerate()
    {
        let sub = dir.path().join(format!("case{i}"));
        let copy = shards_with(&sub, |m| m["shards"][0]["file"] = file.into());
        let e = pretrain_on(&copy, &sub.join("run"));
        assert!(
            e.contains("shards[].file") && e.contains("inside"),
            "{file}: {e}"
        );
    }
    // A link inside the folder that leads out of it.
    let sub = dir.path().join("link");
    let copy = shards_with(&sub, |m| m["shards"][0]["file"] = "escape.bin".into());
    std::os::unix::fs::symlink(
        dir.path().join("w/shard-00000.bin"),
        copy.join("escape.bin"),
    )
    .unwrap();
    let e = pretrain_on(&copy, &sub.join("run"));
    assert!(e.contains("leads out of the folder"), "{e}");
}

#[test]
fn a_manifest_that_contradicts_itself_or_its_tokenizer_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    type Edit = fn(&mut serde_json::Value);
    let cases: [(&str, Edit, &str); 5] = [
        (
            "empty",
            |m| m["shards"] = serde_json::json!([]),
            "lists no examples",
        ),
        (
            "twice",
            |m| {
                let s = m["shards"][0].clone();
                m["shards"].as_array_mut().unwrap().push(s);
            },
            "twice",
        ),
        (
            "mask5",
            |m| m["special_ids"]["mask"] = 5.into(),
            "special_ids",
        ),
        (
            "swapped",
            |m| {
                let (p, k) = (
                    m["special_ids"]["pad"].clone(),
                    m["special_ids"]["mask"].clone(),
                );
                m["special_ids"]["pad"] = k;
                m["special_ids"]["mask"] = p;
            },
            "special_ids",
        ),
        ("vocab", |m| m["vocab_size"] = 3000.into(), "vocab_size"),
    ];
    for (name, edit, want) in cases {
        let sub = dir.path().join(name);
        let copy = shards_with(&sub, edit);
        let e = pretrain_on(&copy, &sub.join("run"));
        assert!(
            e.contains("manifest.json") && e.contains(want),
            "{name}: {e}"
        );
    }
}

/// A copy of the tiny run's last checkpoint folder as a transformers-like model folder is not
/// needed here: the safetensors file is checked where it is read, whichever command reads it.
#[test]
fn a_safetensors_file_is_checked_against_its_length_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let model = common::transformers_folder(dir.path(), "electra_discriminator");
    let weights = model.join("model.safetensors");
    // Extended (sparse) to 20 GB: refused from its header, without reading the zeros.
    let big = dir.path().join("big");
    copy_files(&model, &big);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(big.join("model.safetensors"))
        .unwrap();
    f.set_len(20 << 30).unwrap();
    // A link to /dev/zero: refused as a device.
    let zero = dir.path().join("zero");
    copy_files(&model, &zero);
    std::fs::remove_file(zero.join("model.safetensors")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", zero.join("model.safetensors")).unwrap();
    // A header that says more than the file holds.
    let short = dir.path().join("short");
    copy_files(&model, &short);
    let bytes = std::fs::read(&weights).unwrap();
    std::fs::write(short.join("model.safetensors"), &bytes[..bytes.len() - 4]).unwrap();
    for (folder, want) in [
        (&big, "data section"),
        (&zero, "is a character device, not a file"),
        (&short, "the data holds"),
    ] {
        let started = std::time::Instant::now();
        let mut c = bin();
        c.arg("hits")
            .arg("--model")
            .arg(folder)
            .arg("--sentences")
            .arg(data("wikitext-2/wiki.test.raw"));
        let e = fails(within_a_minute(c));
        assert!(e.contains("model.safetensors") && e.contains(want), "{e}");
        assert!(started.elapsed().as_secs() < 20, "read before the check");
    }
}

#[test]
fn a_folder_of_the_wrong_kind_is_named_with_what_the_command_takes() {
    let dir = tempfile::tempdir().unwrap();
    let run = pretrained_tiny_shared();
    let ft = dir.path().join("ft");
    std::fs::create_dir_all(ft.join("seed-1")).unwrap();
    std::fs::write(ft.join("results.json"), "{}").unwrap();
    std::fs::write(ft.join("seed-1/finetuned.json"), "{}").unwrap();
    let eval = |model: &Path| {
        let mut c = bin();
        c.args(["evaluate", "--model"])
            .arg(model)
            .arg("--data")
            .arg(data("glue/RTE"))
            .arg("--out")
            .arg(dir.path().join("eval"));
        fails(c.output().unwrap())
    };
    let e = eval(run);
    assert!(
        e.contains("is a pre-training run (config.toml)")
            && e.contains("--model takes a fine-tuned model"),
        "{e}"
    );
    let e = eval(&ft);
    assert!(
        e.contains("fine-tuning output") && e.contains("seed-1"),
        "{e}"
    );
    let mut c = bin();
    c.args(["export", "--model"])
        .arg(run)
        .arg("--out")
        .arg(dir.path().join("hub"));
    let e = fails(c.output().unwrap());
    assert!(e.contains("export --run"), "{e}");
    let mut c = bin();
    c.args(["hits", "--model"])
        .arg(ft.join("seed-1"))
        .arg("--sentences")
        .arg(data("wikitext-2/wiki.test.raw"));
    let e = fails(c.output().unwrap());
    assert!(
        e.contains("is a fine-tuned model (finetuned.json)")
            && e.contains("--model takes a pre-trained model"),
        "{e}"
    );
    assert!(!dir.path().join("eval").exists() && !dir.path().join("hub").exists());
}

#[test]
fn an_output_folder_that_is_a_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("taken");
    std::fs::write(&file, "mine").unwrap();
    let mut runs: Vec<Command> = Vec::new();
    let mut c = bin();
    c.args(["prepare", "--input"])
        .arg(data("wikitext-2/wiki.test.raw"))
        .args(["--train-vocab", "200", "--out"])
        .arg(&file);
    runs.push(c);
    let mut c = bin();
    c.args(["pretrain", "--config", "tiny", "--run"]).arg(&file);
    runs.push(c);
    let mut c = bin();
    c.args(["finetune", "--task", "rte", "--data"])
        .arg(data("glue/RTE"))
        .arg("--model")
        .arg(pretrained_tiny_shared())
        .arg("--out")
        .arg(&file);
    runs.push(c);
    for c in runs {
        let args: Vec<_> = c.get_args().map(|a| a.to_owned()).collect();
        let e = fails({ c }.output().unwrap());
        assert!(
            e.contains("is a file")
                && (e.contains("where a folder is needed") || e.contains("takes a folder"))
                && !e.contains("os error"),
            "{args:?}: {e}"
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");
    }
}

#[test]
fn a_new_run_refuses_a_folder_holding_the_users_files() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(run.join("loss.png"), "my plot").unwrap();
    let mut c = common::pretrain_cmd(&run, &["train.steps=2"]);
    let e = fails(c.output().unwrap());
    assert!(
        e.contains("holds files that trueneg did not write") && e.contains("nothing was changed"),
        "{e}"
    );
    assert_eq!(
        std::fs::read_to_string(run.join("loss.png")).unwrap(),
        "my plot"
    );
    assert!(!run.join("config.toml").exists());
}

#[test]
fn stats_keeps_the_users_files_of_the_same_names() {
    let run = pretrained_tiny_shared();
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("run");
    Command::new("cp")
        .arg("-r")
        .arg(run)
        .arg(&copy)
        .status()
        .unwrap();
    std::fs::write(copy.join("correction-stats.md"), "my notes").unwrap();
    let mut c = bin();
    c.args(["stats", "--checkpoints"])
        .arg(&copy)
        .arg("--corpus")
        .arg(data("wikitext-2/wiki.test.raw"))
        .args(["--batches", "1", "--batch-size", "2"]);
    let e = fails(c.output().unwrap());
    assert!(
        e.contains("correction-stats.md") && e.contains("--force"),
        "{e}"
    );
    assert_eq!(
        std::fs::read_to_string(copy.join("correction-stats.md")).unwrap(),
        "my notes"
    );
    assert!(!copy.join("correction-stats.png").exists());
}

#[test]
fn ablation_refuses_a_folder_that_is_not_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("abl");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("report.md"), "my report").unwrap();
    let mut c = bin();
    c.args(["ablation", "--config", "tiny", "--glue"])
        .arg(data("glue"))
        .args(["--tasks", "rte", "--out"])
        .arg(&out);
    let e = fails(c.output().unwrap());
    assert!(
        e.contains("holds files that trueneg did not write")
            && e.contains("--out takes a new or empty folder"),
        "{e}"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("report.md")).unwrap(),
        "my report"
    );
    // A run folder is not an ablation's either.
    let mut c = bin();
    c.args(["ablation", "--config", "tiny", "--glue"])
        .arg(data("glue"))
        .args(["--tasks", "rte", "--out"])
        .arg(pretrained_tiny_shared());
    let e = fails(c.output().unwrap());
    assert!(e.contains("holds a pre-training run"), "{e}");
}

#[test]
fn compare_writes_into_a_folder_it_makes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cmp/a.png");
    ok(bin()
        .args(["compare", "--runs"])
        .arg(pretrained_tiny_shared())
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap());
    assert!(std::fs::metadata(&out).unwrap().len() > 0);
    let left: Vec<_> = std::fs::read_dir(dir.path().join("cmp"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        left.iter().all(|n| !n.to_string_lossy().contains(".tmp")),
        "{left:?}"
    );
}

/// `path`'s tokenizer.json with the ids of two word pieces swapped: the same size, another
/// tokenizer.
fn swap_two_ids(path: &Path) {
    let mut t: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let vocab = t["model"]["vocab"].as_object_mut().unwrap();
    let (a, b) = ("the".to_string(), "of".to_string());
    let (ia, ib) = (vocab[&a].clone(), vocab[&b].clone());
    vocab.insert(a, ib);
    vocab.insert(b, ia);
    std::fs::write(path, serde_json::to_string(&t).unwrap()).unwrap();
}

#[test]
fn a_swapped_tokenizer_of_the_same_size_is_named_by_every_command_that_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    Command::new("cp")
        .arg("-r")
        .arg(pretrained_tiny_shared())
        .arg(&run)
        .status()
        .unwrap();
    swap_two_ids(&run.join("tokenizer.json"));
    let wiki = data("wikitext-2/wiki.test.raw");
    let mut calls: Vec<Command> = Vec::new();
    let mut c = bin();
    c.args(["finetune", "--task", "rte", "--data"])
        .arg(data("glue/RTE"))
        .arg("--model")
        .arg(&run)
        .arg("--out")
        .arg(dir.path().join("ft"));
    calls.push(c);
    let mut c = bin();
    c.args(["export", "--run"])
        .arg(&run)
        .arg("--out")
        .arg(dir.path().join("hub"));
    calls.push(c);
    let mut c = common::resume_cmd(&run);
    c.args(["--set", "train.steps=30"]);
    calls.push(c);
    let mut c = bin();
    c.args(["hits", "--model"])
        .arg(&run)
        .arg("--sentences")
        .arg(&wiki);
    calls.push(c);
    let mut c = bin();
    c.args(["stats", "--checkpoints"])
        .arg(&run)
        .arg("--corpus")
        .arg(&wiki);
    calls.push(c);
    for c in calls {
        let args: Vec<_> = c.get_args().map(|a| a.to_owned()).collect();
        let e = fails({ c }.output().unwrap());
        assert!(
            e.contains("tokenizer.json") && e.contains("not the tokenizer"),
            "{args:?}: {e}"
        );
    }
    assert!(!dir.path().join("hub").exists() && !dir.path().join("ft").exists());
}

#[test]
fn a_fine_tuned_models_swapped_tokenizer_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let seed = common::finetuned_rte(dir.path());
    let path = seed.join("tokenizer.json");
    let mut t: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let vocab = t["model"]["vocab"].as_object_mut().unwrap();
    let (ia, ib) = (vocab["w5"].clone(), vocab["w6"].clone());
    vocab.insert("w5".into(), ib);
    vocab.insert("w6".into(), ia);
    std::fs::write(&path, serde_json::to_string(&t).unwrap()).unwrap();
    let mut c = bin();
    c.args(["evaluate", "--model"])
        .arg(&seed)
        .arg("--data")
        .arg(data("glue/RTE"))
        .arg("--out")
        .arg(dir.path().join("eval"));
    let e = fails(c.output().unwrap());
    assert!(
        e.contains("not the tokenizer") && e.contains("finetuned.json"),
        "{e}"
    );
}

#[test]
fn a_special_token_whose_id_is_a_word_piece_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokenizer.json");
    let mut t: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(shards().join("tokenizer.json")).unwrap())
            .unwrap();
    // The WordPiece vocabulary loses `[MASK]`; its added_tokens entry still says id 4.
    t["model"]["vocab"]
        .as_object_mut()
        .unwrap()
        .remove("[MASK]");
    std::fs::write(&path, serde_json::to_string(&t).unwrap()).unwrap();
    let mut c = bin();
    c.args(["prepare", "--input"])
        .arg(data("wikitext-2/wiki.test.raw"))
        .arg("--tokenizer")
        .arg(&path)
        .arg("--out")
        .arg(dir.path().join("out"));
    let e = fails(c.output().unwrap());
    assert!(
        e.contains("tokenizer.json") && e.contains("`[MASK]`") && e.contains("id of its own"),
        "{e}"
    );
    assert!(!dir.path().join("out").exists());
}

#[test]
fn a_text_file_of_one_long_line_is_read_in_bounded_pieces() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("one-line.txt");
    // 3 MiB of words without a line break, with a multi-byte character at every place.
    let words: Vec<String> = (0..400_000).map(|i| format!("wörd{}", i % 97)).collect();
    let text = words.join(" ");
    std::fs::write(&path, &text).unwrap();
    let mut r = trueneg::text::corpus::CorpusReader::open(&path).unwrap();
    let mut pieces = Vec::new();
    loop {
        let batch = r.next_batch(1 << 20).unwrap();
        if batch.is_empty() {
            break;
        }
        pieces.extend(batch);
    }
    assert!(pieces.len() >= 3, "{} pieces", pieces.len());
    assert!(pieces.iter().all(|p| p.text.len() <= 1 << 20));
    assert!(pieces.iter().all(|p| p.doc == 0), "one document");
    let back: Vec<&str> = pieces
        .iter()
        .flat_map(|p| p.text.split_whitespace())
        .collect();
    assert_eq!(back, words, "every word once, none cut");
}

#[test]
fn a_missing_input_file_is_its_own_kind_of_error_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let tokenizer = dir.path().join("nowhere.json");
    let missing = |r: trueneg::Error, path: &Path| match r {
        trueneg::Error::Missing(line) => {
            assert!(line.starts_with(&path.display().to_string()), "{line}")
        }
        other => panic!("not Error::Missing: {other:?}"),
    };
    let e = trueneg::text::WordPieceTokenizer::load(&tokenizer)
        .err()
        .unwrap();
    missing(e, &tokenizer);
    let wordnet = dir.path().join("no-wordnet");
    let e = trueneg::lexicon::WordNet::open(&wordnet).err().unwrap();
    missing(e, &wordnet);
    // The frame's check of every command's input paths says the same.
    let e =
        trueneg::frame::inputs::classify(&wordnet, "--wordnet", trueneg::frame::InputKind::WordNet)
            .err()
            .unwrap();
    missing(e, &wordnet);
    // A file that is there but malformed is bad input, not a missing file.
    let empty = dir.path().join("vocab.txt");
    std::fs::write(&empty, "").unwrap();
    let e = trueneg::text::WordPieceTokenizer::load(&empty)
        .err()
        .unwrap();
    assert!(matches!(e, trueneg::Error::Input(_)), "{e:?}");
}
