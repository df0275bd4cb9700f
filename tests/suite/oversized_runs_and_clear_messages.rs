//! Runs that cannot fit are refused before allocating, and unusual folders, shapes and links
//! get clear messages.

use crate::common;
use common::{bin, fails, ok, pretrain_cmd, resume_cmd};

/// a batch (or model) that cannot fit in the machine's memory is refused before
/// anything is allocated, with the estimate and what is available; nothing is left behind.
#[test]
fn a_run_too_large_for_the_memory_is_refused_with_both_figures() {
    let dir = tempfile::tempdir().unwrap();
    for (i, set) in ["data.batch_size=1000000000", "model.hidden_size=1048576"]
        .iter()
        .enumerate()
    {
        let run = dir.path().join(format!("run{i}"));
        let e = fails(pretrain_cmd(&run, &[set]).output().unwrap());
        assert!(
            e.contains("needs at least") && e.contains("GiB available"),
            "{set}: {e}"
        );
        assert!(!run.join("config.toml").exists());
    }
    // The estimate follows the config: the tiny model at its batch is far below the machine.
    let estimate = |sets: &[String]| {
        let cfg = trueneg::train::config::PretrainConfig::load("tiny", sets).unwrap();
        let devices = cfg.replica_devices();
        let size = trueneg::train::memory::StepSize {
            model: &cfg.model,
            data: &cfg.data,
            devices: &devices,
            sentences: 1.0,
        };
        trueneg::train::memory::estimate(&size, 4000)
    };
    let small = estimate(&[]);
    let big = estimate(&["data.batch_size=256".into()]);
    assert!(small > 1e6 && small < 1e9, "{small}");
    assert!(big > 2.0 * small, "{big} vs {small}");
}

/// a run in a folder whose name is not UTF-8 resumes and exports.
#[test]
#[cfg(unix)]
fn a_run_on_a_non_utf8_path_resumes_and_exports() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let run = dir
        .path()
        .join(std::ffi::OsStr::from_bytes(b"run-\xff\xfe"));
    ok(pretrain_cmd(&run, &["train.steps=2"]).output().unwrap());
    ok(resume_cmd(&run)
        .args(["--set", "train.steps=3"])
        .output()
        .unwrap());
    let out = dir.path().join("hf");
    ok(common::export_cmd(&run, &out).output().unwrap());
    assert!(out.join("discriminator/config.json").exists());
}

/// `--resume` with another model shape names the setting and says why, instead of
/// calling every checkpoint damaged.
#[test]
fn resuming_with_another_model_shape_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    ok(pretrain_cmd(&run, &["train.steps=2"]).output().unwrap());
    let e = fails(
        resume_cmd(&run)
            .args([
                "--set",
                "train.steps=3",
                "--set",
                "model.intermediate_size=96",
            ])
            .output()
            .unwrap(),
    );
    assert!(
        e.contains("model.intermediate_size")
            && e.contains("[model] section")
            && !e.contains("damaged"),
        "{e}"
    );
}

/// a symbolic link back up a corpus folder is read once, with a note, not followed
/// until the path is 40 levels deep.
#[test]
#[cfg(unix)]
fn a_symlink_loop_in_a_corpus_folder_is_read_once() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus");
    std::fs::create_dir_all(corpus.join("sub")).unwrap();
    std::fs::write(corpus.join("a.txt"), "One sentence here.\n").unwrap();
    std::fs::write(corpus.join("sub/b.txt"), "Another one there.\n").unwrap();
    std::os::unix::fs::symlink(&corpus, corpus.join("sub/loop")).unwrap();
    let (files, notes) = trueneg::text::corpus::list_inputs(std::slice::from_ref(&corpus)).unwrap();
    assert_eq!(files, vec![corpus.join("a.txt"), corpus.join("sub/b.txt")]);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].contains("sub/loop") && notes[0].contains("read already"),
        "{notes:?}"
    );
}

/// `--train-vocab` smaller than the corpus's alphabet says what it gave instead.
#[test]
fn a_train_vocab_below_the_alphabet_says_what_it_gave() {
    let dir = tempfile::tempdir().unwrap();
    let out = bin()
        .args(["prepare", "--input"])
        .arg(common::data("wikitext-2/wiki.test.raw"))
        .args(["--train-vocab", "100", "--max-seq-len", "64", "--out"])
        .arg(dir.path().join("p"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("--train-vocab 100") && stderr.contains("more characters"),
        "{stderr}"
    );
}

/// `export` while the run still trains and rotates its checkpoints (one kept, one
/// written every step) reads a whole checkpoint every time: one removed while it was read is
/// looked up again.
#[test]
fn export_during_checkpoint_rotation_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let mut child = pretrain_cmd(
        &run,
        &[
            "train.steps=400",
            "train.checkpoint_every=1",
            "train.keep_checkpoints=1",
            "train.log_every=50",
        ],
    )
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let t0 = std::time::Instant::now();
    while trueneg::train::checkpoint::list(&run).is_empty() {
        assert!(t0.elapsed().as_secs() < 120, "no checkpoint");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // In-process reads (hundreds while the run rotates), then whole exports.
    let mut reads = 0;
    while reads < 300 && child.try_wait().unwrap().is_none() {
        trueneg::train::export::load_checkpoint(&run, None).unwrap();
        reads += 1;
    }
    let mut exported = 0;
    while exported < 5 && child.try_wait().unwrap().is_none() {
        let out = dir.path().join(format!("hf{exported}"));
        ok(common::export_cmd(&run, &out).output().unwrap());
        assert!(out.join("generator/config.json").exists());
        exported += 1;
    }
    let _ = child.kill();
    child.wait().unwrap();
    assert!(
        exported >= 3,
        "only {exported} exports while the run trained"
    );
}
