//! TensorBoard event files: every `metrics.jsonl` field of a run as a scalar at its step, the
//! config as text, continued on `--resume` without a step twice. Read back by our own reader
//! (framing, checksums, messages) and, where Python's `tbparse` is installed (CI installs it;
//! `TRUENEG_PYTHON` names the interpreter), by TensorBoard's own reader.

use crate::common;
use common::{metrics, ok, pretrain_cmd, resume_cmd};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use trueneg::tensorboard::{What, read_events};

fn event_files(run: &Path) -> Vec<PathBuf> {
    trueneg::tensorboard::event_files(run).unwrap()
}

/// (tag, step) → value of every scalar of the run's event files; the text tags.
fn read_back(run: &Path) -> (BTreeMap<(String, u64), f64>, Vec<String>) {
    let (mut scalars, mut texts) = (BTreeMap::new(), Vec::new());
    for f in event_files(run) {
        for e in read_events(&std::fs::read(&f).unwrap()).unwrap() {
            let Some(What::Summary(s)) = e.what else {
                continue;
            };
            for v in s.value {
                match v.value {
                    Some(trueneg::tensorboard::Value::Simple(x)) => {
                        let old = scalars.insert((v.tag.clone(), e.step as u64), x as f64);
                        assert!(old.is_none(), "{} at step {} twice", v.tag, e.step);
                    }
                    Some(trueneg::tensorboard::Value::Tensor(t)) => {
                        texts.push(format!(
                            "{}={}",
                            v.tag,
                            String::from_utf8_lossy(&t.string_val[0])
                        ));
                    }
                    None => {}
                }
            }
        }
    }
    (scalars, texts)
}

/// Every metrics.jsonl field as (tag, step) → value.
fn expected(run: &Path) -> BTreeMap<(String, u64), f64> {
    let mut out = BTreeMap::new();
    for m in metrics(run) {
        for (tag, v) in trueneg::train::events::scalars(&m) {
            out.insert((tag, m.step), v);
        }
    }
    out
}

fn same(a: &BTreeMap<(String, u64), f64>, b: &BTreeMap<(String, u64), f64>) {
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    for (k, x) in a {
        common::close_to(*x, b[k], 1e-6, &format!("{k:?}"));
    }
}

#[test]
fn a_run_writes_its_metrics_as_tensorboard_scalars_and_resumes_without_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    ok(pretrain_cmd(&run, &["objective.kind=hc", "train.steps=4"])
        .output()
        .unwrap());
    let (scalars, texts) = read_back(&run);
    let want = expected(&run);
    assert!(
        want.contains_key(&("train/mismatched".to_string(), 4))
            && want.contains_key(&("train/learning_rate".to_string(), 1))
            && want.contains_key(&("train/loss".to_string(), 1))
    );
    same(&scalars, &want);
    assert!(
        texts.len() == 1
            && texts[0].starts_with("config=```toml")
            && texts[0].contains("[objective]")
    );
    // Killed after step 4's checkpoint and resumed to 7: metrics are cut back to the
    // checkpoint, and so are the events.
    let m = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
    std::fs::write(run.join("metrics.jsonl"), m + "{\"step\":5,\"loss\":1.0,\"lr\":0.0,\"grad_norm\":0.0,\"masked\":0,\"tokens_per_s\":0.0}\n").unwrap();
    ok(resume_cmd(&run)
        .args(["--set", "train.steps=7"])
        .output()
        .unwrap());
    assert_eq!(event_files(&run).len(), 1);
    let (scalars, _) = read_back(&run);
    same(&scalars, &expected(&run));
    assert_eq!(
        metrics(&run).iter().map(|m| m.step).collect::<Vec<_>>(),
        (1..=7).collect::<Vec<_>>()
    );
    tensorboard_reads(&run);
}

/// TensorBoard's own reader (through tbparse) sees the same scalars, when Python has it.
fn tensorboard_reads(run: &Path) {
    let Some(python) = common::python_with("tbparse") else {
        return;
    };
    let script = "import sys, json\nfrom tbparse import SummaryReader\n\
df = SummaryReader(sys.argv[1]).scalars\n\
print(json.dumps([[r.tag, int(r.step), float(r.value)] for r in df.itertuples()]))";
    let out = std::process::Command::new(&python)
        .args(["-c", script])
        .arg(run)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<(String, u64, f64)> = serde_json::from_slice(&out.stdout).unwrap();
    let got: BTreeMap<(String, u64), f64> = rows.into_iter().map(|(t, s, v)| ((t, s), v)).collect();
    same(&got, &expected(run));
}

#[test]
fn records_are_framed_and_checked_as_tfrecord() {
    // TFRecord's masked CRC-32C, as TensorBoard's own `masked_crc32c` gives it.
    assert_eq!(trueneg::tensorboard::masked_crc(b""), 0xa282_ead8);
    assert_eq!(trueneg::tensorboard::masked_crc(b"hello"), 0x191c_1fbb);
    let r = trueneg::tensorboard::record(b"hello");
    assert_eq!(r.len(), 5 + 16);
    let mut bad = r.clone();
    bad[13] ^= 1;
    assert!(read_events(&bad).unwrap_err().contains("checksum"));
    assert!(read_events(&r[..10]).unwrap_err().contains("truncated"));
}
