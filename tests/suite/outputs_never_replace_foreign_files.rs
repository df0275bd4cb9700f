//! An output path never replaces a file its command did not write; `--force` does.

use crate::common;
use common::{bin, fails, ok, pretrain_cmd};

use trueneg::io::outputs::{Outputs, RECORD};

/// `compare --out` over a run's own config.toml is refused and the file kept; the plot
/// `compare` wrote itself is replaced on a rerun; `--force` replaces anything.
#[test]
fn compare_does_not_replace_a_runs_config() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    ok(pretrain_cmd(&run, &["train.steps=3"]).output().unwrap());
    let config = run.join("config.toml");
    let before = std::fs::read(&config).unwrap();
    let compare = |out: &std::path::Path, force: bool| {
        let mut c = bin();
        c.args(["compare", "--runs"])
            .arg(&run)
            .arg("--out")
            .arg(out);
        if force {
            c.arg("--force");
        }
        c.output().unwrap()
    };
    let e = fails(compare(&config, false));
    assert!(
        e.contains("config.toml") && e.contains("did not write it") && e.contains("--force"),
        "{e}"
    );
    assert_eq!(std::fs::read(&config).unwrap(), before);

    let png = dir.path().join("loss.png");
    ok(compare(&png, false));
    ok(compare(&png, false));
    std::fs::write(dir.path().join("mine.png"), "my picture").unwrap();
    let e = fails(compare(&dir.path().join("mine.png"), false));
    assert!(e.contains("mine.png"), "{e}");
    ok(compare(&dir.path().join("mine.png"), true));
    assert_ne!(
        std::fs::read(dir.path().join("mine.png")).unwrap(),
        b"my picture"
    );
}

/// `export --out` over a folder holding a user's tokenizer.json is refused before anything is
/// written; an export interrupted half-way (ELECTRA: discriminator written, generator not) is
/// completed by running it again.
#[test]
fn export_replaces_only_its_own_files() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    ok(pretrain_cmd(&run, &["train.steps=3"]).output().unwrap());
    let export = |out: &std::path::Path, force: bool| {
        let mut c = bin();
        c.args(["export", "--run"]).arg(&run).arg("--out").arg(out);
        if force {
            c.arg("--force");
        }
        c.output().unwrap()
    };
    let out = dir.path().join("hf");
    std::fs::create_dir_all(out.join("generator")).unwrap();
    std::fs::write(out.join("generator/tokenizer.json"), "my tokenizer").unwrap();
    let e = fails(export(&out, false));
    assert!(
        e.contains("generator/tokenizer.json") && e.contains("--force"),
        "{e}"
    );
    assert!(!out.join("discriminator").exists(), "nothing written");
    assert_eq!(
        std::fs::read(out.join("generator/tokenizer.json")).unwrap(),
        b"my tokenizer"
    );
    ok(export(&out, true));
    assert_ne!(
        std::fs::read(out.join("generator/tokenizer.json")).unwrap(),
        b"my tokenizer"
    );

    // A whole export is not replaced unasked.
    let e = fails(export(&out, false));
    assert!(e.contains("already holds an exported model"), "{e}");
    // Half-finished: the generator lost its files; a plain rerun completes the export.
    for f in ["config.json", "model.safetensors"] {
        std::fs::remove_file(out.join("generator").join(f)).unwrap();
    }
    ok(export(&out, false));
    for d in ["discriminator", "generator"] {
        for f in ["config.json", "model.safetensors", "tokenizer.json"] {
            assert!(out.join(d).join(f).exists(), "{d}/{f}");
        }
    }
}

/// The record names the command: a file written by one command is not replaced by another
/// (`evaluate --out` over `finetune`'s predictions), a folder in the way is refused.
#[test]
fn a_file_is_replaced_only_by_the_command_that_wrote_it() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("predictions.json");
    let finetune = Outputs::new("finetune", false);
    finetune.write(&p, b"{}").unwrap();
    finetune.write(&p, b"{\"a\": 1}").unwrap();
    let e = Outputs::new("evaluate", false)
        .write(&p, b"other")
        .unwrap_err()
        .to_string();
    assert!(e.contains("was written by trueneg finetune"), "{e}");
    assert_eq!(std::fs::read(&p).unwrap(), b"{\"a\": 1}");
    Outputs::new("evaluate", true).write(&p, b"other").unwrap();
    let record = std::fs::read_to_string(dir.path().join(RECORD)).unwrap();
    assert!(record.contains("trueneg evaluate"), "{record}");
    std::fs::create_dir_all(dir.path().join("folder")).unwrap();
    let e = Outputs::new("evaluate", true)
        .check(&[dir.path().join("folder")])
        .unwrap_err()
        .to_string();
    assert!(e.contains("is a folder"), "{e}");
}
