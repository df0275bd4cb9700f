//! A pre-training run: its corpora and config checked against each other, its processes and
//! devices, its start (new, from `model.init_from`, or the last checkpoint), then the loop of
//! its steps (`train::step_loop`), with exact resume.
//!
//! Every random draw of step s (masking, dropout, generator sampling) comes from RNGs seeded
//! by (seed, s), and the data position is saved in each checkpoint, so a resumed run repeats
//! the uninterrupted one.

use crate::device::DeviceName;
use std::path::Path;

use super::config::PretrainConfig;
use super::model::PretrainModel;
use super::optimizer::AdamW;
use super::phases::{Phase, PhaseShards, continue_in};
use super::replicas::Replicas;
use super::start::{
    METRICS, RunPlace, Start, Trainee, forget_unstarted, start_point, write_run_files,
};
use super::step_loop::{Ready, train_run};
use super::steps::kind_of;
use crate::dist::Group;
use crate::text::shards::ShardSet;
use crate::{Error, Result};

pub use super::metrics::StepMetrics;
pub use super::run_log::{Progress, RunOptions};
pub use super::step_loop::RunSummary;

/// Truncates `metrics.jsonl` to the lines (step lines and records) with step ≤ `step` (after a
/// resume).
fn truncate_metrics(path: &Path, step: u64) -> Result<()> {
    let Ok(text) = crate::io::read::read_text(path, crate::io::limit::DATA) else {
        return Ok(());
    };
    let kept: String = text
        .lines()
        .filter(|l| {
            serde_json::from_str::<serde_json::Value>(l)
                .is_ok_and(|v| v["step"].as_u64().is_some_and(|s| s <= step))
        })
        .map(|l| format!("{l}\n"))
        .collect();
    crate::io::write_atomic(path, kept.as_bytes())
}

/// Refuses shards the config cannot train on (vocabulary, length, the kind of data its step
/// trains on), naming the field and the folder.
fn check_shards(cfg: &PretrainConfig, shards: &ShardSet, phase: Phase) -> Result<()> {
    let vocab = shards.manifest.vocab_size;
    let len = shards.manifest.max_seq_len;
    let dir = shards.dir.display();
    if cfg.model.encoder.vocab_size != 0 && cfg.model.encoder.vocab_size != vocab {
        return Err(Error::Config(format!(
            "field `model.vocab_size` is {}, but the tokenizer of {dir} has {vocab} tokens; set it to {vocab}, or to 0 to take the tokenizer's size (--set model.vocab_size=0)",
            cfg.model.encoder.vocab_size,
        )));
    }
    if len > cfg.model.encoder.max_position_embeddings {
        return Err(Error::Config(format!(
            "{dir}: examples of {len} tokens exceed model.max_position_embeddings = {}",
            cfg.model.encoder.max_position_embeddings
        )));
    }
    if len != cfg.data.max_seq_len {
        return Err(Error::Config(format!(
            "field `{}` is {}, but the examples of {dir} have {len} tokens; set it to {len} or prepare the corpus again",
            match phase {
                Phase::First => "data.max_seq_len",
                Phase::Second => "phase2.max_seq_len",
            },
            cfg.data.max_seq_len,
        )));
    }
    let step = kind_of(cfg.objective.kind);
    if step.data() != shards.holds() {
        return Err(Error::Config(format!(
            "field `objective.kind` is {:?}: {} trains on {}, but {dir} holds {}",
            cfg.objective.kind.name(),
            step.name(),
            step.data().describe(),
            shards.holds().describe()
        )));
    }
    Ok(())
}

/// Checks the run's corpora against its config, phase by phase (`phases`), and the memory of
/// each phase's step; in a job of several processes (`group`), that every rank runs the same
/// build, config and corpora.
fn check_run(cfg: &PretrainConfig, phases: &PhaseShards, group: Option<&Group>) -> Result<()> {
    for phase in phases.phases() {
        let phase_cfg = cfg.in_phase(phase);
        let shards = phases.of(phase);
        check_shards(&phase_cfg, shards, phase)?;
        let devices = phase_cfg.replica_devices();
        let size = super::memory::StepSize {
            model: &phase_cfg.model,
            data: &phase_cfg.data,
            devices: &devices,
            sentences: kind_of(cfg.objective.kind).sentences_per_row(),
        };
        super::memory::check(&size, shards.manifest.vocab_size)?;
    }
    if let Some(g) = group {
        let fingerprints: Vec<String> = phases
            .all()
            .iter()
            .map(|s| s.manifest.content_fingerprint())
            .collect();
        let run = format!(
            "build = {:?}\nshards = {:?}\n{}",
            crate::VERSION,
            fingerprints,
            cfg.to_toml()
        );
        g.agree("run", &run)?;
    }
    Ok(())
}

pub fn pretrain(cfg: &PretrainConfig, shards: &ShardSet, opts: &RunOptions) -> Result<RunSummary> {
    pretrain_in(cfg, shards, opts, None)
}

/// [`pretrain`] as one process of a data-parallel job (`group`; `None`: a world of one). Rank
/// 0 alone writes the run's files; every rank trains on its share of each batch.
pub fn pretrain_in(
    cfg: &PretrainConfig,
    shards: &ShardSet,
    opts: &RunOptions,
    group: Option<Group>,
) -> Result<RunSummary> {
    let phases = PhaseShards::open(cfg, shards)?;
    check_run(cfg, &phases, group.as_ref())?;
    let main = group.as_ref().is_none_or(|g| g.world.is_main());
    let run = &opts.run_dir;
    let vocab = shards.manifest.vocab_size;
    let names = process_devices(cfg, group.as_ref())?;
    let base_devices = crate::device::devices_for(&names)?;
    let device = base_devices[0].clone().autodiff();
    // The initial weights follow `train.seed`: runs of one seed start from the same weights
    // whatever their objective (the ablation's pairing).
    crate::model::seed(&base_devices[0], cfg.train.seed);
    let step = kind_of(cfg.objective.kind);
    let shape = cfg.model_shape(vocab);
    let mut model = PretrainModel::of(&shape, &cfg.step_settings(), step, &device);
    let mut opt = AdamW::new(cfg.optimizer.clone()).sparing(step.undecayed());
    let place = RunPlace {
        run,
        resume: opts.resume,
        main,
    };
    let trainee = Trainee {
        model: &mut model,
        opt: &mut opt,
        device: &device,
    };
    let at = start_point(&cfg.model, cfg.train.steps, &phases, place, trainee);
    // Every rank has read the folder before rank 0 writes to it.
    if let Some(g) = &group {
        g.barrier()?;
    }
    let start = match at? {
        Start::At(state) => state,
        Start::Finished(steps) => {
            return Ok(RunSummary {
                steps,
                already_finished: true,
                last: None,
                run_dir: run.clone(),
            });
        }
    };
    if opts.resume && main {
        super::run::warn_schedule_change(run, cfg, start.step);
        truncate_metrics(&run.join(METRICS), start.step)?;
    }
    let mut replicas = Replicas::new(model, opt, base_devices)?;
    replicas.join(group);
    replicas.broadcast_parameters()?;
    let files = if main {
        write_run_files(&cfg.to_toml(), shards, run)
    } else {
        Ok(())
    };
    let (phase, start) = continue_in(cfg, &phases, start);
    let ready = Ready {
        cfg,
        shards: &phases,
        opts,
        phase,
        start,
        replicas,
    };
    let r = files.and_then(|()| train_run(ready));
    if r.is_err() && !opts.resume && main {
        forget_unstarted(run);
    }
    r
}

/// The devices of this process: `train.devices` (or `train.device`); in a job of several
/// processes one device each, a GPU without an index taking the process's `LOCAL_RANK`.
fn process_devices(cfg: &PretrainConfig, group: Option<&Group>) -> Result<Vec<DeviceName>> {
    let names = cfg.replica_devices();
    let Some(g) = group else {
        return Ok(names);
    };
    if names.len() > 1 {
        return Err(Error::Config(format!(
            "field `train.devices` lists {} devices, but the launcher started {} processes: one process trains on one device (LOCAL_RANK picks the GPU); leave train.devices unset",
            names.len(),
            g.world.size
        )));
    }
    let mut name = names[0];
    if name.kind.is_gpu() && name.index.is_none() {
        name.index = Some(g.world.local_rank);
    }
    Ok(vec![name])
}
