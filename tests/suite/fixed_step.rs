//! The fixed-shape training step (`train.static_shapes`, what a recorded CUDA-graph step runs):
//! masking padded to a fixed number of slots per sequence, every count on the device, inputs
//! and parameters kept in the same memory. It must train like the usual step: the same curve
//! to f32 rounding wherever no random draw depends on the number of slots (dropout off; BERT,
//! or ELECTRA with every sequence's slots filled). With the `tch` feature, the same on
//! LibTorch's CPU device, where the inputs, parameters and AdamW moments are rewritten in place.

use crate::common;
use common::{fails, metrics, ok, pretrain_cmd, resume_cmd};

use std::path::{Path, PathBuf};

use trueneg::text::batches::Batch;
use trueneg::text::masking::Masked;

const NO_DROPOUT: [&str; 2] = [
    "model.hidden_dropout_prob=0",
    "model.attention_probs_dropout_prob=0",
];

fn run(dir: &Path, name: &str, sets: &[&str]) -> PathBuf {
    let r = dir.join(name);
    let all: Vec<&str> = NO_DROPOUT
        .iter()
        .chain(sets)
        .chain(&["train.steps=6"])
        .copied()
        .collect();
    ok(pretrain_cmd(&r, &all).output().unwrap());
    r
}

/// Every logged value of two runs agrees: losses and rates to f32 rounding, counts exactly.
fn same_curves(a: &Path, b: &Path) {
    let (ma, mb) = (metrics(a), metrics(b));
    assert_eq!(ma.len(), mb.len());
    assert!(!ma.is_empty());
    for (x, y) in ma.iter().zip(&mb) {
        let at = format!("step {}", x.step);
        assert_eq!((x.step, x.masked), (y.step, y.masked), "{at}");
        common::close_to(x.loss, y.loss, 2e-5, &format!("{at} loss"));
        common::close_to(x.grad_norm, y.grad_norm, 2e-5, &format!("{at} grad norm"));
        assert_eq!(x.terms.len(), y.terms.len(), "{at}: the same values");
        for (k, v) in &x.terms {
            let (u, w) = (v.as_f64().unwrap(), y.value(k).unwrap());
            if ["mismatched", "corrected"].contains(&k.as_str()) {
                assert_eq!(u, w, "{at} {k}");
            } else {
                common::close_to(u, w, 2e-5, &format!("{at} {k}"));
            }
        }
    }
}

#[test]
fn padded_masking_keeps_the_positions_and_pads_with_unmasked_real_tokens() {
    // Two sequences of 6 tokens; the second has 2 padding tokens at its end.
    let batch = Batch {
        batch: 2,
        len: 6,
        ids: vec![2, 10, 11, 12, 13, 3, 2, 20, 21, 3, 0, 0],
        token_types: vec![0; 12],
        attention_mask: vec![1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0],
    };
    let m = Masked {
        input_ids: vec![2, 4, 11, 4, 13, 3, 4, 20, 21, 3, 0, 0],
        positions: vec![1, 3, 6],
        labels: vec![10, 12, 2],
        valid: None,
    };
    let p = m.padded(&batch, 3);
    // Row 0: its two positions, then the first real position not masked (0); row 1: its one
    // position (6), then its first free real one (7), twice.
    assert_eq!(p.positions, vec![1, 3, 0, 6, 7, 7]);
    assert_eq!(p.labels, vec![10, 12, 2, 2, 20, 20]);
    assert_eq!(p.valid, Some(vec![true, true, false, true, false, false]));
    assert_eq!((p.count(), m.count()), (3, 3));
    assert_eq!(p.input_ids, m.input_ids, "padding changes no token");
    // A data-parallel share keeps its slots.
    let second = p.rows(6, 1..2);
    assert_eq!(second.positions, vec![0, 1, 1]);
    assert_eq!(second.valid, Some(vec![true, false, false]));
}

/// Runs `sets` with the usual step and with the fixed-shape step and compares their curves.
fn fixed_like_usual(dir: &Path, name: &str, sets: &[&str]) {
    let fixed: Vec<&str> = sets
        .iter()
        .chain(&["train.static_shapes=true"])
        .copied()
        .collect();
    let usual = run(dir, name, sets);
    same_curves(&usual, &run(dir, &format!("{name}-fixed"), &fixed));
}

#[test]
fn fixed_shapes_train_like_the_usual_step() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // BERT: 9 of 19 slots per sequence masked (64-token rows), so most slots are padding;
    // Hard Correction and both Soft Regularizations average over the masked ones only.
    let bert = [
        "model.kind=bert",
        "objective.kind=hc+sr",
        "objective.sr_sent_weight=0.5",
    ];
    fixed_like_usual(d, "bert", &bert);
    fixed_like_usual(d, "sent", &["model.kind=bert", "objective.kind=sr-sent"]);
    // ELECTRA with every slot a masked position (5 of the about 9 a 64-token row would get;
    // the generator samples one value per slot): the discriminator's targets, weights and
    // counts on the device, HC dropping its tokens.
    let electra = [
        "objective.kind=hc",
        "objective.hc_discriminator=ignore",
        "masking.max_predictions=5",
    ];
    fixed_like_usual(d, "electra", &electra);
    // Two micro-steps per step.
    let accum = ["model.kind=bert", "objective.kind=hc", "train.grad_accum=2"];
    fixed_like_usual(d, "accum", &accum);
}

/// ELECTRA with padding slots: the generator's samples are drawn per slot, so they differ from
/// the usual step's, but the masked positions and what is counted over them do not.
#[test]
fn electra_with_padding_slots_counts_the_masked_positions_only() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let sets = ["objective.kind=hc"];
    let fixed = ["objective.kind=hc", "train.static_shapes=true"];
    let (a, b) = (
        metrics(&run(d, "e", &sets)),
        metrics(&run(d, "e-fixed", &fixed)),
    );
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.masked, y.masked);
        // The generator's accuracy is over the masked positions, padding slots aside.
        let mlm = y.value("mlm_accuracy").unwrap() * y.masked as f64;
        assert!((mlm - mlm.round()).abs() < 1e-6, "{mlm}");
        common::close_to(x.mlm_loss(), y.mlm_loss(), 1e-3, "mlm loss");
    }
}

/// A run of `sets` (6 steps, checkpoints every 3) resumed from its step-3 checkpoint repeats
/// the uninterrupted run's curve exactly.
fn resumes_exactly(dir: &Path, sets: &[&str]) {
    let sets: Vec<&str> = sets
        .iter()
        .chain(&["train.steps=6", "train.checkpoint_every=3"])
        .copied()
        .collect();
    let go = |name: &str| {
        let r = dir.join(name);
        ok(pretrain_cmd(&r, &sets).output().unwrap());
        r
    };
    let (whole, part) = (go("whole"), go("part"));
    std::fs::remove_dir_all(part.join("checkpoints/step-00000006")).unwrap();
    ok(resume_cmd(&part).output().unwrap());
    let curve = |r: &Path| {
        let mut m = metrics(r);
        m.iter_mut().for_each(|x| x.tokens_per_s = 0.0);
        m
    };
    let (a, b) = (curve(&whole), curve(&part));
    assert_eq!(a.len(), 6);
    assert_eq!(a, b, "resumed curve = uninterrupted curve");
}

#[test]
fn a_fixed_shape_run_resumes_exactly() {
    // ELECTRA with dropout and the generator's sampling on, padding slots and Hard Correction:
    // each step's draws are seeded by the step, so the resumed run draws what the
    // uninterrupted one drew.
    let dir = tempfile::tempdir().unwrap();
    resumes_exactly(
        dir.path(),
        &["objective.kind=hc", "train.static_shapes=true"],
    );
}

#[test]
fn recording_and_fixed_shapes_refuse_what_they_cannot_train() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], &str); 5] = [
        (
            &["train.static_shapes=true", "objective.kind=cline"],
            "field `train.static_shapes` = true needs a step with a fixed-shape form",
        ),
        (
            &["train.cuda_graph=true"],
            "field `train.cuda_graph` = true records on a libtorch-cuda device, not on \"cpu\"",
        ),
        (
            &["train.static_shapes=true", "objective.hc_multi_piece=true"],
            "field `train.static_shapes` = true needs every count on the device",
        ),
        (
            &[
                "train.cuda_graph=true",
                "train.device=libtorch-cuda",
                "train.grad_accum=2",
            ],
            "records one micro-step per step, but train.grad_accum = 2",
        ),
        (
            &[
                "train.static_shapes=true",
                "train.devices=[\"cpu\", \"cpu\"]",
            ],
            "trains one replica per process",
        ),
    ];
    for (i, (sets, want)) in cases.iter().enumerate() {
        let r = dir.path().join(format!("r{i}"));
        let err = fails(pretrain_cmd(&r, sets).output().unwrap());
        assert!(err.contains(want), "{sets:?}: {err}");
        assert!(!r.join("checkpoints").exists(), "nothing trained");
    }
}

/// Unset, `train.cuda_graph` records wherever the build can record and the recorded step can
/// run (one `libtorch-cuda` device, no gradient accumulation, the masked-LM step) and nowhere
/// else, without an error; set, it is what it says. The run folder's config keeps it unset, so
/// a resumed run decides again on its own device.
#[test]
fn unset_cuda_graph_records_on_libtorch_cuda_only_where_the_step_can_be_recorded() {
    use trueneg::kernels::cuda_graph::available;
    use trueneg::train::config::PretrainConfig;
    let load = |sets: &[&str]| {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        PretrainConfig::load("electra-small", &sets).unwrap()
    };
    let cases: [(&[&str], bool); 8] = [
        (&[], false),
        (&["train.device=libtorch"], false),
        (&["train.device=libtorch-cuda"], true),
        (&["train.device=libtorch-cuda:1"], true),
        (&["train.device=libtorch-cuda", "train.grad_accum=2"], false),
        (
            &["train.device=libtorch-cuda", "objective.kind=cline"],
            false,
        ),
        (
            &["train.device=libtorch-cuda", "train.cuda_graph=false"],
            false,
        ),
        (
            &["train.device=libtorch-cuda", "train.cuda_graph=true"],
            true,
        ),
    ];
    for (sets, want) in cases {
        let cfg = load(sets);
        assert_eq!(cfg.records_where(true), want, "{sets:?}");
        // A build without CUDA graphs records only where asked to (and then says it cannot).
        let asked = cfg.train.cuda_graph == Some(true);
        assert_eq!(cfg.records_where(false), asked, "{sets:?}");
        assert_eq!(cfg.records(), cfg.records_where(available()), "{sets:?}");
    }
    let unset = load(&["train.device=libtorch-cuda"]);
    assert_eq!(unset.train.cuda_graph, None);
    let saved = toml::to_string(&unset).unwrap();
    assert!(!saved.contains("cuda_graph"), "{saved}");
    let off = toml::to_string(&load(&["train.cuda_graph=false"])).unwrap();
    assert!(off.contains("cuda_graph = false"), "{off}");
}

/// On LibTorch's device (`TRUENEG_LIBTORCH_DEVICE`, else its CPU device) the fixed-shape step
/// rewrites its inputs, parameters and AdamW moments in place, as a recorded step must; it
/// still trains like the usual step and resumes exactly. On `libtorch-cuda` the step is also
/// recorded as a CUDA graph after 3 steps and replayed for the other 3, with the same curve.
#[cfg(feature = "tch")]
#[test]
fn on_libtorch_the_step_rewritten_in_place_trains_like_the_usual_one() {
    let name = std::env::var("TRUENEG_LIBTORCH_DEVICE").unwrap_or("libtorch".into());
    let device = format!("train.device={name}");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let with = |extra: &[&'static str]| -> Vec<&str> {
        let mut v = vec![
            "model.kind=bert",
            "objective.kind=hc+sr",
            "objective.sr_sent_weight=0.5",
            device.as_str(),
        ];
        v.extend(extra);
        v
    };
    // Unset, `train.cuda_graph` records on libtorch-cuda: these two are the unrecorded steps.
    let usual = run(d, "usual", &with(&["train.cuda_graph=false"]));
    let fixed = ["train.static_shapes=true", "train.cuda_graph=false"];
    same_curves(&usual, &run(d, "fixed", &with(&fixed)));
    if name.starts_with("libtorch-cuda") {
        let recorded = run(d, "recorded", &with(&["train.cuda_graph=true"]));
        same_curves(&usual, &recorded);
    }
    // ELECTRA with dropout and sampling, resumed from its step-3 checkpoint.
    let mut sets = vec![
        "objective.kind=hc",
        "train.static_shapes=true",
        device.as_str(),
    ];
    if name.starts_with("libtorch-cuda") {
        sets.push("train.cuda_graph=true");
    }
    resumes_exactly(&d.join("resumed"), &sets);
}
