//! Data-parallel pre-training (`train.devices`) on host replicas: k replicas × b rows train
//! like one device × k·b rows, a checkpoint resumes on another number of devices, and bad
//! device lists are one-line errors before any work. (The CUDA / NCCL path runs the same
//! arithmetic with burn's all-reduce; it needs GPUs, see docs/gpu.md.)

use crate::common;
use common::{fails, metrics, ok, pretrain_cmd, resume_cmd};

use std::path::{Path, PathBuf};

use trueneg::interop::tensors::read_safetensors;

/// BERT without dropout (no random draw differs between replicas), with Hard Correction and
/// both Soft Regularizations, so that every kind of loss count is summed over replicas.
const EXACT: [&str; 6] = [
    "model.kind=bert",
    "model.hidden_dropout_prob=0",
    "model.attention_probs_dropout_prob=0",
    "objective.kind=hc+sr",
    "objective.sr_sent_weight=0.5",
    "train.steps=4",
];

fn run(dir: &Path, name: &str, devices: &str, extra: &[&str]) -> PathBuf {
    let r = dir.join(name);
    let sets: Vec<&str> = EXACT.iter().chain(extra).copied().collect();
    ok(pretrain_cmd(&r, &sets)
        .args(["--devices", devices])
        .output()
        .unwrap());
    r
}

/// Two runs' values agree to f32 rounding.
fn close(a: f64, b: f64, what: &str) {
    common::close_to(a, b, 2e-5, what);
}

/// Every logged value of two runs agrees (losses to f32 rounding, counts exactly).
fn same_curves(a: &Path, b: &Path) {
    let (ma, mb) = (metrics(a), metrics(b));
    assert_eq!(ma.len(), mb.len());
    for (x, y) in ma.iter().zip(&mb) {
        let at = format!("step {}", x.step);
        assert_eq!(x.step, y.step);
        close(x.loss, y.loss, &format!("{at} loss"));
        close(x.mlm_loss(), y.mlm_loss(), &format!("{at} mlm"));
        close(
            x.value("sr_loss").unwrap(),
            y.value("sr_loss").unwrap(),
            &format!("{at} sr"),
        );
        close(x.grad_norm, y.grad_norm, &format!("{at} grad norm"));
        assert_eq!(
            (x.masked, x.value("mismatched"), x.value("corrected")),
            (y.masked, y.value("mismatched"), y.value("corrected")),
            "{at}"
        );
    }
}

fn last_checkpoint(run: &Path) -> PathBuf {
    let mut cks: Vec<PathBuf> = std::fs::read_dir(run.join("checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    cks.sort();
    cks.pop().unwrap()
}

/// The largest difference between two runs' final parameters, relative to how far training
/// moved them from `init` (a run of 0 further steps would give 1).
fn parameter_gap(a: &Path, b: &Path, init: &Path) -> f64 {
    let load = |r: &Path| read_safetensors(&last_checkpoint(r).join("model.safetensors")).unwrap();
    let (a, b, init) = (load(a), load(b), load(init));
    let (mut gap, mut moved) = (0f64, 0f64);
    for (name, t) in &a.tensors {
        let (u, v, w) = (
            &t.values,
            &b.tensors[name].values,
            &init.tensors[name].values,
        );
        for ((x, y), z) in u.iter().zip(v).zip(w) {
            gap += ((x - y) as f64).powi(2);
            moved += ((x - z) as f64).powi(2);
        }
    }
    (gap / moved).sqrt()
}

#[test]
fn replicas_train_like_one_device_with_the_whole_batch() {
    let dir = tempfile::tempdir().unwrap();
    let one = run(dir.path(), "one", "cpu", &[]);
    let two = run(dir.path(), "two", "cpu,cpu", &[]);
    let four = run(dir.path(), "four", "cpu,cpu,cpu,cpu", &[]);
    // The same run stopped after its first step: where the parameters started from.
    let start = run(dir.path(), "start", "cpu", &["train.steps=1"]);
    same_curves(&one, &two);
    same_curves(&one, &four);
    let m = metrics(&one);
    assert!(m.iter().all(|x| x.loss.is_finite() && x.grad_norm > 0.0));
    assert!(
        m.iter()
            .any(|x| x.value("mismatched").unwrap() as usize > 0)
    );
    for (name, r) in [("2 replicas", &two), ("4 replicas", &four)] {
        let gap = parameter_gap(&one, r, &start);
        assert!(
            gap < 1e-3,
            "{name}: parameters differ by {gap} of their change"
        );
    }
    assert!(
        std::fs::read_to_string(two.join("config.toml"))
            .unwrap()
            .contains("devices = [")
    );
}

#[test]
fn a_checkpoint_resumes_on_another_number_of_devices() {
    let dir = tempfile::tempdir().unwrap();
    for (first, then) in [("cpu,cpu", "cpu"), ("cpu", "cpu,cpu")] {
        let name = format!("{first}-then-{then}");
        let full = run(dir.path(), &format!("{name}-full"), first, &[]);
        let r = run(dir.path(), &name, first, &["train.checkpoint_every=2"]);
        // As if killed after step 2: its step-4 checkpoint is gone.
        std::fs::remove_dir_all(r.join("checkpoints/step-00000004")).unwrap();
        ok(resume_cmd(&r).args(["--devices", then]).output().unwrap());
        assert_eq!(metrics(&r).len(), 4, "{name}");
        same_curves(&full, &r);
    }
}

#[test]
fn bad_device_lists_are_one_line_errors_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &[&str], &str); 6] = [
        ("gpu0", &[], "unknown kind"),
        ("cpu:1", &[], "only cuda and libtorch-cuda take an index"),
        ("cpu,cpu,cpu", &[], "data.batch_size"),
        ("cuda:0,cuda:0", &[], "named twice"),
        ("cpu,cuda:0", &[], "one kind for all replicas"),
        (
            "libtorch-cuda:0,libtorch-cuda:1",
            &[],
            "launched by torchrun, srun or mpirun",
        ),
    ];
    for (k, (devices, sets, says)) in cases.into_iter().enumerate() {
        let r = dir.path().join(format!("run{k}"));
        let e = fails(
            pretrain_cmd(&r, sets)
                .args(["--devices", devices])
                .output()
                .unwrap(),
        );
        assert!(e.contains(says), "{devices}: {e}");
        assert!(!r.join("metrics.jsonl").exists() && !r.join("config.toml").exists());
    }
    // A CUDA device in a build without the cuda feature (CI's), or one the machine lacks.
    let r = dir.path().join("cuda");
    let e = fails(
        pretrain_cmd(&r, &[])
            .args(["--devices", "cuda:7"])
            .output()
            .unwrap(),
    );
    assert!(
        e.contains("not available in this build") || e.contains("does not exist"),
        "{e}"
    );
}

#[test]
fn a_resumed_electra_run_on_two_replicas_repeats_its_curve_exactly() {
    // Dropout and the generator's sampling on: every replica draws from seed (step, replica),
    // so the resumed run draws what the uninterrupted one drew.
    let dir = tempfile::tempdir().unwrap();
    let sets = ["train.steps=4", "train.checkpoint_every=2"];
    let go = |name: &str| {
        let r = dir.path().join(name);
        ok(pretrain_cmd(&r, &sets)
            .args(["--devices", "cpu,cpu"])
            .output()
            .unwrap());
        r
    };
    let (full, r) = (go("full"), go("resumed"));
    std::fs::remove_dir_all(r.join("checkpoints/step-00000004")).unwrap();
    ok(resume_cmd(&r).output().unwrap());
    // Everything but the throughput.
    let curve = |r: &Path| {
        let mut m = metrics(r);
        m.iter_mut().for_each(|x| x.tokens_per_s = 0.0);
        m
    };
    let (a, b) = (curve(&full), curve(&r));
    assert_eq!(a.len(), 4);
    assert!(a.iter().all(|m| m.value("disc_loss").is_some()));
    assert_eq!(a, b, "resumed curve = uninterrupted curve");
}
