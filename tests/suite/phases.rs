//! BERT's two sequence lengths in one run (`[phase2]`): the second phase trains the positions
//! beyond the first length, on one schedule and optimizer state, and `--resume` continues in
//! the right phase whether the run stopped at the change or after it.

use crate::common;
use common::{bin, fails, losses, metrics, ok, pretrain_cmd, resume_cmd, shards};

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use trueneg::interop::tensors::read_safetensors;

/// WikiText-2's test split at 128 tokens with the tokenizer of [`shards`] (64 tokens), built
/// once (`fixture_cache`).
fn long_shards() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let input = common::data("wikitext-2/wiki.test.raw");
        let tokenizer = shards().join("tokenizer.json");
        let recipe = common::fixture_cache::Recipe {
            name: "wikitext-128",
            inputs: &[&input, &tokenizer],
            args: &["--max-seq-len", "128"],
        };
        let cached = common::fixture_cache::cached(&recipe, |dir| {
            ok(bin()
                .args(["prepare", "--input"])
                .arg(&input)
                .arg("--tokenizer")
                .arg(&tokenizer)
                .args(["--max-seq-len", "128", "--out"])
                .arg(dir.join("corpus"))
                .output()
                .unwrap());
        });
        cached.join("corpus")
    })
}

/// `pretrain_cmd`'s 12 steps with the second phase (128 tokens, 20 predictions) from step 6.
fn two_phase_cmd(run: &Path) -> std::process::Command {
    let long = format!("phase2.shards={}", long_shards().display());
    pretrain_cmd(
        run,
        &[
            "phase2.start_fraction=0.5",
            "phase2.max_seq_len=128",
            "phase2.max_predictions=20",
            &long,
        ],
    )
}

/// The largest change of the position embeddings of rows `rows` between the checkpoints of
/// steps `a` and `b`.
fn position_change(run: &Path, a: u64, b: u64, rows: std::ops::Range<usize>) -> f32 {
    let table = |step: u64| {
        let file = run.join(format!("checkpoints/step-{step:08}/model.safetensors"));
        let map = read_safetensors(&file).unwrap();
        let (name, t) = map
            .tensors
            .into_iter()
            .find(|(n, _)| n.ends_with("position_embeddings.weight"))
            .expect("the position embeddings (the generator shares them)");
        assert_eq!(t.shape, vec![128, 64], "{name}");
        t.values
    };
    let (x, y) = (table(a), table(b));
    rows.flat_map(|r| r * 64..(r + 1) * 64)
        .map(|i| (x[i] - y[i]).abs())
        .fold(0.0, f32::max)
}

/// The shards fingerprint a checkpoint's state records.
fn trained_on(run: &Path, step: u64) -> String {
    let file = run.join(format!("checkpoints/step-{step:08}/state.json"));
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    state["shards_fingerprint"].as_str().unwrap().to_string()
}

/// A copy of run `from` as if it had stopped after step `step`: its later checkpoints gone.
fn stopped_at(from: &Path, to: &Path, step: u64) {
    let status = std::process::Command::new("cp")
        .arg("-r")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(status.success());
    for entry in std::fs::read_dir(to.join("checkpoints")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let s: u64 = name.trim_start_matches("step-").parse().unwrap();
        if s > step {
            std::fs::remove_dir_all(&path).unwrap();
        }
    }
}

#[test]
fn the_second_phase_trains_the_long_positions_on_the_first_phases_schedule_and_resumes_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let one = dir.path().join("one-length");
    ok(pretrain_cmd(&one, &[]).output().unwrap());
    let two = dir.path().join("two-phases");
    ok(two_phase_cmd(&two).output().unwrap());

    // Steps 1-6 are the one-length run's; the schedule goes on across the change (no second
    // warm-up): every step's learning rate equals the one-length run's.
    let (a, b) = (metrics(&one), metrics(&two));
    assert_eq!(b.len(), 12);
    assert_eq!(
        losses(&two)[..6],
        losses(&one)[..6],
        "the first phase is the plain run"
    );
    let lrs =
        |m: &[trueneg::train::pretrain::StepMetrics]| m.iter().map(|m| m.lr).collect::<Vec<_>>();
    assert_eq!(lrs(&a), lrs(&b), "one schedule over both phases");
    assert_ne!(
        losses(&two)[6..],
        losses(&one)[6..],
        "the second phase trains other batches"
    );
    assert!(b.iter().all(|m| m.loss.is_finite()));
    // The second phase's batches are longer: more tokens a second at the same batch size is
    // not asserted (speed), but more masked positions per step are.
    let masked = |m: &[trueneg::train::pretrain::StepMetrics], r: std::ops::Range<usize>| {
        m[r].iter().map(|m| m.masked).sum::<usize>()
    };
    assert!(
        masked(&b, 6..12) > masked(&b, 0..6) * 3 / 2,
        "128-token sequences mask more: {} then {}",
        masked(&b, 0..6),
        masked(&b, 6..12)
    );

    // The checkpoints say which corpus trained them; the change wrote one.
    assert_eq!(trained_on(&two, 6), trained_on(&one, 6));
    assert_ne!(trained_on(&two, 9), trained_on(&two, 6));

    // Positions 64-127 are trained in the second phase only: in the first they move by weight
    // decay alone.
    let before = position_change(&two, 3, 6, 64..128);
    let after = position_change(&two, 6, 9, 64..128);
    assert!(
        after > 20.0 * before && after > 1e-4,
        "long positions: {before:e} in phase 1, {after:e} in phase 2"
    );

    // Stopped at the change, or in the second phase, `--resume` repeats the uninterrupted run.
    for step in [6, 9] {
        let resumed = dir.path().join(format!("stopped-at-{step}"));
        stopped_at(&two, &resumed, step);
        ok(resume_cmd(&resumed).output().unwrap());
        assert_eq!(losses(&resumed), losses(&two), "resumed after step {step}");
    }

    // Extended so that the second phase would begin after where it already began, the run goes
    // on in the second phase and says so.
    let extended = dir.path().join("extended");
    stopped_at(&two, &extended, 12);
    let out = resume_cmd(&extended)
        .args([
            "--set",
            "train.steps=24",
            "--set",
            "phase2.start_fraction=0.9",
        ])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{said}");
    assert!(said.contains("goes on in the second phase"), "{said}");
    assert_eq!(trained_on(&extended, 24), trained_on(&two, 12));

    // The model card gives both lengths.
    let hub = dir.path().join("hub");
    ok(bin()
        .args(["export", "--run"])
        .arg(&two)
        .arg("--out")
        .arg(&hub)
        .output()
        .unwrap());
    let card = std::fs::read_to_string(hub.join("discriminator/README.md")).unwrap();
    assert!(
        card.contains("64 tokens for the first 6 steps, then of 128 tokens"),
        "{card}"
    );
}

#[test]
fn a_second_phase_that_cannot_train_is_refused_before_the_first_step() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("r");
    // Shards set without the second phase's corpus.
    let e = fails(
        pretrain_cmd(&run, &["phase2.max_seq_len=128"])
            .output()
            .unwrap(),
    );
    assert!(
        e.contains("phase2.shards") && e.contains("--max-seq-len 128"),
        "{e}"
    );
    // The two-phase run with `sets` as well: its one-line error.
    let refused = |sets: &[&str]| {
        let mut c = two_phase_cmd(&run);
        for set in sets {
            c.args(["--set", set]);
        }
        fails(c.output().unwrap())
    };
    // Longer than the model's positions.
    let e = refused(&["phase2.max_seq_len=256"]);
    assert!(e.contains("phase2.max_seq_len") && e.contains("128"), "{e}");
    // A length that is not the corpus's.
    let e = refused(&["phase2.max_seq_len=100"]);
    assert!(
        e.contains("phase2.max_seq_len") && e.contains("128 tokens"),
        "{e}"
    );
    // No step left to either phase.
    let e = refused(&["phase2.start_fraction=0.99"]);
    assert!(e.contains("phase2.start_fraction"), "{e}");
    // The first phase's own corpus, and a corpus of another tokenizer.
    let same = format!("phase2.shards={}", shards().display());
    let e = refused(&[&same, "phase2.max_seq_len=64"]);
    assert!(e.contains("first phase's corpus"), "{e}");
    let other = dir.path().join("other");
    ok(bin()
        .args(["prepare", "--input"])
        .arg(common::data("wikitext-2/wiki.test.raw"))
        .arg("--tokenizer")
        .arg(common::other_tokenizer())
        .args(["--max-seq-len", "128", "--out"])
        .arg(&other)
        .output()
        .unwrap());
    let e = refused(&[&format!("phase2.shards={}", other.display())]);
    assert!(
        e.contains("another tokenizer") && e.contains("--tokenizer"),
        "{e}"
    );
    assert!(!run.join("checkpoints").exists(), "nothing trained");
}

#[test]
fn the_default_corpus_is_prepared_at_both_lengths_with_one_vocabulary() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("r");
    ok(bin()
        .args(["pretrain", "--config", "tiny", "--run"])
        .arg(&run)
        .args([
            "--set",
            "train.steps=4",
            "--set",
            "train.log_every=1",
            "--set",
            "data.batch_size=4",
            "--set",
            "phase2.start_fraction=0.5",
            "--set",
            "phase2.max_seq_len=128",
            "--set",
            "phase2.max_predictions=20",
        ])
        .output()
        .unwrap());
    let manifest = |d: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(run.join(d).join("manifest.json")).unwrap())
            .unwrap()
    };
    let (first, second) = (manifest("data"), manifest("data-phase2"));
    assert_eq!(first["max_seq_len"], 64);
    assert_eq!(second["max_seq_len"], 128);
    assert_eq!(
        first["tokenizer_fingerprint"],
        second["tokenizer_fingerprint"]
    );
    assert_eq!(metrics(&run).len(), 4);
}
