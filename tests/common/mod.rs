//! Helpers shared by the integration tests: paths into ../shared and running the binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// A path under ../shared (the data sets and the transformers fixtures).
pub fn shared(p: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared")
        .join(p)
}

/// A path under ../shared/data.
pub fn data(p: &str) -> PathBuf {
    shared("data").join(p)
}

/// The `trueneg` binary, without progress bars.
pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_trueneg"));
    c.arg("--quiet");
    c
}

/// `trueneg pretrain --resume <run>`, to which a test adds its own arguments.
pub fn resume_cmd(run: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = bin();
    c.args(["pretrain", "--resume"]).arg(run);
    c
}

/// Asserts that the command succeeded and returns its stdout.
pub fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every line of a run's `metrics.jsonl`.
pub fn metrics(run: &Path) -> Vec<trueneg::train::pretrain::StepMetrics> {
    std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `trueneg prepare` of WikiText-2's test split into `out`: a 2000-token vocabulary trained on
/// it, 64-token examples.
pub fn prepare_wikitext(out: &Path) {
    ok(bin()
        .args(["prepare", "--input"])
        .arg(shared("data/wikitext-2/wiki.test.raw"))
        .args(["--train-vocab", "2000", "--max-seq-len", "64", "--out"])
        .arg(out)
        .output()
        .unwrap());
}

/// Fails with exit code ≠ 0 and a one-line error; returns that line.
pub fn fails(out: Output) -> String {
    assert!(
        !out.status.success(),
        "should fail: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    err
}

/// WikiText-2 test split prepared once for all tests (vocabulary trained on it).
pub fn shards() -> &'static Path {
    static DIR: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("wiki");
        prepare_wikitext(&out);
        (dir, out)
    })
    .1
}

pub fn pretrain_cmd(run: &Path, extra: &[&str]) -> Command {
    let mut c = bin();
    c.args(["pretrain", "--config", "tiny", "--run"]).arg(run);
    c.arg("--set")
        .arg(format!("data.shards={}", shards().display()));
    for s in [
        "train.steps=12",
        "train.checkpoint_every=3",
        "train.keep_checkpoints=10",
        "train.log_every=1",
        "data.batch_size=8",
        "optimizer.warmup_steps=4",
    ] {
        c.args(["--set", s]);
    }
    for s in extra {
        c.args(["--set", s]);
    }
    c
}
