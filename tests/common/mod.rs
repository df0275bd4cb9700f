//! Helpers shared by the integration tests: paths into ../shared and running the binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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
