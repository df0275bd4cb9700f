//! The training step reads nothing back from its device (issue: a step with no host round
//! trip): between the upload of a batch and the logging step that reads its values, the
//! samples, Hard Correction's synonym lookup, the discriminator's targets, the kept-position
//! counts, the counters and the clipped gradient norm all stay on the device.
//!
//! Proof by counting ([`trueneg::kernels::host_reads`]): runs of 8, 16 and 24 steps with a
//! logging line every 8 steps and one checkpoint at the end. Each 8 further steps must add the
//! reads of exactly one logging step (the values, the window's counters where the objective
//! has any, the gradient norm), never one per step. On flex (the default device) and, with the `tch` feature, on
//! LibTorch's CPU device, which takes the device paths (Gumbel-max sampling on the device,
//! the multi-tensor AdamW). One test function: the counter is the process's.

mod common;

use trueneg::train::config::PretrainConfig;
use trueneg::train::pretrain::Progress;
use trueneg::train::{RunOptions, pretrain_in};

/// The objectives run: ELECTRA with Hard Correction (counters, a device count of kept
/// positions, the discriminator's tokens dropped on the device), BERT with Hard Correction and
/// word-level Soft Regularization, BERT with sentence-level SR (no counters: 2 reads per
/// logging step). With each, the reads of one logging step.
const OBJECTIVES: [(&[&str], u64); 3] = [
    (
        &["objective.kind=hc", "objective.hc_discriminator=ignore"],
        3,
    ),
    (&["model.kind=bert", "objective.kind=hc+sr"], 3),
    (&["model.kind=bert", "objective.kind=sr-sent"], 2),
];

/// The reads of a run of `steps` steps of `objective` on `device` (as the only process of a
/// torchrun job with `job`: its counts and gradients are summed over the group each step).
fn reads_of_run(
    dir: &std::path::Path,
    device: &str,
    objective: &[&str],
    steps: u64,
    job: bool,
) -> u64 {
    let mut sets: Vec<String> = [
        format!("data.shards={}", common::shards().display()),
        format!("train.steps={steps}"),
        "train.log_every=8".into(),
        format!("train.checkpoint_every={steps}"),
        "data.batch_size=8".into(),
        format!("train.device={device}"),
    ]
    .into();
    sets.extend(objective.iter().map(|s| s.to_string()));
    let cfg = PretrainConfig::load("tiny", &sets).unwrap();
    let shards = trueneg::text::shards::ShardSet::open(common::shards()).unwrap();
    let opts = RunOptions {
        run_dir: dir.join(format!("{device}-{}-{steps}-{job}", objective.join("-"))),
        resume: false,
        progress: Progress::Hidden,
        stop: None,
    };
    let group = job.then(|| {
        let port = common::free_port().to_string();
        let vars = [("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0")];
        let world = trueneg::dist::World::from_vars(|k| match k {
            "MASTER_PORT" => Some(port.clone()),
            _ => vars.iter().find(|v| v.0 == k).map(|v| v.1.to_string()),
        })
        .unwrap();
        let timeout = std::time::Duration::from_secs(60);
        let g = trueneg::dist::Group::join(&world, timeout).unwrap();
        g.expect("a torchrun world of one joins a group")
    });
    let before = trueneg::kernels::host_reads();
    pretrain_in(&cfg, &shards, &opts, group).unwrap();
    trueneg::kernels::host_reads() - before
}

/// With `extra` settings (the fixed-shape step: `train.static_shapes`, whose counts are all
/// on the device, read with the values).
fn steps_read_nothing(device: &str, extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    for (objective, per_line) in OBJECTIVES {
        let objective: Vec<&str> = objective.iter().chain(extra).copied().collect();
        let r: Vec<u64> = [8, 16, 24]
            .iter()
            .map(|&s| reads_of_run(dir.path(), device, &objective, s, false))
            .collect();
        assert_eq!(
            (r[1] - r[0], r[2] - r[1]),
            (per_line, per_line),
            "{device} {objective:?}: 8 more steps must add one logging step's {per_line} reads (runs of 8/16/24 steps read {r:?})"
        );
    }
}

/// The same in a data-parallel job (a torchrun world of one: the counts that share out the
/// objective and the gradients are summed over the group every step, on LibTorch where they
/// are): 8 more steps add the same few reads of one logging step, never one a step.
#[cfg(feature = "tch")]
fn job_steps_read_nothing(device: &str) {
    let dir = tempfile::tempdir().unwrap();
    for (objective, _) in &OBJECTIVES[..2] {
        let r: Vec<u64> = [8, 16, 24]
            .iter()
            .map(|&s| reads_of_run(dir.path(), device, objective, s, true))
            .collect();
        let (a, b) = (r[1] - r[0], r[2] - r[1]);
        assert!(
            a == b && a < 8,
            "{device} {objective:?} in a job: 8 more steps must add one logging step's reads (runs of 8/16/24 steps read {r:?})"
        );
    }
}

#[test]
fn training_steps_read_nothing_back_between_logging_steps() {
    steps_read_nothing("cpu", &[]);
    steps_read_nothing("cpu", &["train.static_shapes=true"]);
    #[cfg(feature = "tch")]
    {
        steps_read_nothing("libtorch", &[]);
        steps_read_nothing("libtorch", &["train.static_shapes=true"]);
        job_steps_read_nothing("libtorch");
    }
}
