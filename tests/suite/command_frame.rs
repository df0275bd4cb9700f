//! The command frame (src/frame): every subcommand's inputs classified, its outputs claimed
//! before anything is removed or written, one stop handler, one line per bad input. Each test
//! is one of the cases found by trying the commands (R01 … R47), as the frame now answers it.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{self, bin, data, fails, ok, shards};

/// Every file under `dir` with its bytes, to show that nothing changed.
fn contents(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for name in common::names(dir) {
        let p = dir.join(name);
        if p.is_dir() {
            out.extend(contents(&p));
        } else {
            out.push((p.clone(), std::fs::read(&p).unwrap()));
        }
    }
    out
}

/// R01: a `--run` folder holding the user's own files of the names a run writes is refused
/// before anything is removed, whether or not `--config` is one of them.
#[test]
fn a_run_folder_holding_the_users_files_is_refused_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("F");
    std::fs::create_dir_all(&f).unwrap();
    let tiny =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/tiny.toml"))
            .unwrap();
    std::fs::write(f.join("config.toml"), &tiny).unwrap();
    std::fs::write(f.join("tokenizer.json"), "my tokenizer").unwrap();
    std::fs::write(f.join("trueneg-version.txt"), "mine").unwrap();
    std::fs::write(f.join("events.out.tfevents.1.host"), "my events").unwrap();
    let before = contents(&f);
    let e = fails(
        bin()
            .args(["pretrain", "--config", "tiny", "--run"])
            .arg(&f)
            .output()
            .unwrap(),
    );
    assert!(e.contains("nothing was changed"), "{e}");
    assert_eq!(contents(&f), before);
    let e = fails(
        bin()
            .args(["pretrain", "--config"])
            .arg(f.join("config.toml"))
            .arg("--run")
            .arg(&f)
            .output()
            .unwrap(),
    );
    assert!(e.contains("nothing was changed"), "{e}");
    assert_eq!(contents(&f), before);
}

/// R02: a pre-training run killed before its first step, then given by mistake as `prepare
/// --out`: refused as another command's folder, its tokenizer kept for the resume.
#[test]
fn prepare_refuses_the_folder_of_a_killed_run() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    trueneg::io::outputs::set_owner(&run, "trueneg pretrain").unwrap();
    std::fs::write(run.join("config.toml"), "[model]\n").unwrap();
    std::fs::copy(shards().join("tokenizer.json"), run.join("tokenizer.json")).unwrap();
    std::fs::write(run.join(".trueneg.lock"), "pid 4194303\ntrueneg pretrain\n").unwrap();
    let before = contents(&run);
    let e = fails(
        bin()
            .args(["prepare", "--input"])
            .arg(data("wikitext-2/wiki.valid.tokens"))
            .args(["--train-vocab", "200", "--out"])
            .arg(&run)
            .output()
            .unwrap(),
    );
    assert!(
        e.contains("made by trueneg pretrain") && e.contains("nothing was changed"),
        "{e}"
    );
    let after = contents(&run);
    let kept = |c: &[(PathBuf, Vec<u8>)]| {
        c.iter()
            .filter(|(p, _)| !p.ends_with(".trueneg.lock"))
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(kept(&after), kept(&before));
}

/// R03: a run folder that is also its own corpus is refused; the corpus stays whole.
#[test]
fn a_run_folder_that_is_its_own_corpus_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("P");
    common::fixture_cache::copy_tree(shards(), &p);
    let before = contents(&p);
    let e = fails(
        bin()
            .args(["pretrain", "--config", "tiny", "--run"])
            .arg(&p)
            .arg("--set")
            .arg(format!("data.shards={}", p.display()))
            .output()
            .unwrap(),
    );
    assert!(
        e.contains("data.shards") && e.contains("the same folder"),
        "{e}"
    );
    assert_eq!(contents(&p), before);
}

/// R04: an `evaluate` whose `--out` another `evaluate` is writing is refused, naming it, and
/// writes nothing.
#[test]
fn a_second_writer_of_an_output_folder_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let model = common::finetuned_rte(dir.path());
    let out = dir.path().join("E");
    let _held = trueneg::io::lock::FolderLock::acquire(&out, "trueneg evaluate").unwrap();
    let e = fails(
        bin()
            .args(["evaluate", "--model"])
            .arg(&model)
            .arg("--data")
            .arg(data("glue/RTE"))
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap(),
    );
    assert!(
        e.contains("in use by") && e.contains("trueneg evaluate"),
        "{e}"
    );
    assert_eq!(common::names(&out), [".trueneg.lock"]);
}

/// R16 (and its kind): a `--set` of a value the command's own flag decides is refused.
#[test]
fn a_set_that_contradicts_the_commands_own_flag_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let e = fails(
        bin()
            .args(["compare-continued", "--objective", "sr"])
            .args(["--set", "objective.kind=hc"])
            .args(["--base-run", "b", "--task-data", "t", "--contrast", "c"])
            .args(["--hits-sentences", "h", "--out"])
            .arg(dir.path().join("out"))
            .output()
            .unwrap(),
    );
    assert!(
        e.contains("--set objective.kind=hc") && e.contains("--objective decides"),
        "{e}"
    );
    let e = fails(
        bin()
            .args(["pretrain", "--config", "tiny", "--devices", "cpu,cpu"])
            .args(["--set", "train.devices=[\"cpu\"]", "--run"])
            .arg(dir.path().join("run"))
            .output()
            .unwrap(),
    );
    assert!(e.contains("--devices decides train.devices"), "{e}");
    assert_eq!(common::names(dir.path()), Vec::<String>::new());
}

/// R43: a config path of the wrong kind is one line naming its key and what it takes.
#[test]
fn a_config_path_of_the_wrong_kind_names_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("corpus.txt");
    std::fs::write(&text, "some text\n").unwrap();
    let run = dir.path().join("run");
    for (set, key, is) in [
        (
            format!("data.shards={}", text.display()),
            "data.shards",
            "is a file",
        ),
        (
            "data.shards=/etc".into(),
            "data.shards",
            "is a folder without",
        ),
        (
            "model.init_from=/etc".into(),
            "model.init_from",
            "is a folder without",
        ),
    ] {
        let e = fails(
            bin()
                .args(["pretrain", "--config", "tiny", "--set", &set, "--run"])
                .arg(&run)
                .output()
                .unwrap(),
        );
        assert!(
            e.contains(is) && e.contains(&format!("{key} takes")) && !e.contains("os error"),
            "{set}: {e}"
        );
        assert!(!run.exists(), "{set}: nothing written");
    }
}

/// R47: a `--set` without a key is refused, not ignored.
#[test]
fn a_set_without_a_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for set in ["=", "=5", "train.=3", ".steps=3"] {
        let e = fails(
            bin()
                .args(["pretrain", "--config", "tiny", "--set", set, "--run"])
                .arg(dir.path().join("run"))
                .output()
                .unwrap(),
        );
        assert!(e.contains(&format!("--set {set}: expected")), "{e}");
    }
}

/// R41: `inspect --corpus` takes a folder of text files (and reads only what it samples).
#[test]
fn inspect_reads_a_folder_of_text_files() {
    let dir = tempfile::tempdir().unwrap();
    let run = common::pretrained_tiny(dir.path());
    let corpus = dir.path().join("texts");
    std::fs::create_dir_all(&corpus).unwrap();
    std::fs::copy(data("wikitext-2/wiki.valid.tokens"), corpus.join("a.txt")).unwrap();
    let out = ok(bin()
        .args(["inspect", "--run"])
        .arg(&run)
        .arg("--corpus")
        .arg(&corpus)
        .args(["--batches", "1", "--batch-size", "2", "--sample", "5"])
        .output()
        .unwrap());
    assert!(out.contains("masked"), "{out}");
}

/// A command run under `ulimit -f` (in 512-byte blocks).
fn with_file_limit(blocks: u32, args: &[&std::ffi::OsStr]) -> Command {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(format!("ulimit -f {blocks}; exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_trueneg"))
        .args(args);
    c
}

/// R39: a file-size limit is an error line naming the file, not a silent kill; no temporary
/// file stays, and one a killed writer left is removed by the next run.
#[test]
fn a_file_size_limit_is_an_error_line_and_leaves_no_temporary() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("lex.safetensors");
    let left = dir.path().join(".4194303.tmp.lex.safetensors");
    std::fs::write(&left, "a killed writer's").unwrap();
    let tokenizer = shards().join("tokenizer.json");
    let args: Vec<&std::ffi::OsStr> = vec![
        "lexicon".as_ref(),
        "build".as_ref(),
        "--tokenizer".as_ref(),
        tokenizer.as_os_str(),
        "--out".as_ref(),
        out.as_os_str(),
    ];
    let e = fails(with_file_limit(1, &args).output().unwrap());
    assert!(
        e.contains("File too large") && e.contains("lex.safetensors"),
        "{e}"
    );
    assert_eq!(common::names(dir.path()), Vec::<String>::new());
    ok(with_file_limit(100_000, &args).output().unwrap());
    // The table, and the record that `lexicon build` wrote it (so that it may replace it).
    assert_eq!(
        common::names(dir.path()),
        [".trueneg-outputs.json", "lex.safetensors"]
    );
}

/// R38: SIGTERM stops a command that has no safe points with one line saying how to go on,
/// and releases its lock.
#[test]
fn sigterm_gives_one_line_and_releases_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    // Distinct words: counting them for the vocabulary takes a while.
    let corpus = dir.path().join("words.txt");
    let mut text = String::new();
    let mut x: u64 = 1;
    while text.len() < 40 << 20 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        text += &format!("w{:x} ", x >> 20);
        if x.is_multiple_of(13) {
            text.push('\n');
        }
    }
    std::fs::write(&corpus, text).unwrap();
    let out = dir.path().join("prep");
    let child = bin()
        .args(["prepare", "--input"])
        .arg(&corpus)
        .args(["--train-vocab", "2000", "--out"])
        .arg(&out)
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(700));
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("trueneg prepare: stopped by a signal")
            && err.contains("run the same command again"),
        "{err}"
    );
    assert!(!out.join(".trueneg.lock").exists());
}
