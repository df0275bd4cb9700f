//! Where a run starts: a new run's files (and their removal when it fails before its first
//! step), or the checkpoint `--resume` continues from.

use crate::io::PathQuery;
use std::path::Path;

use super::checkpoint::{self, TrainState, WindowTotals};
use super::config::ModelSection;
use super::model::{PretrainModel, check_init_tokenizer, read_transformers_weights};
use super::optimizer::AdamW;
use super::phases::PhaseShards;
use crate::interop::tensors::TensorMap;
use crate::text::batches::DataPosition;
use crate::text::shards::ShardSet;
use crate::{Error, Result};
use burn::prelude::*;

/// Loads the newest checkpoint that reads back whole into `model` and `opt`. A damaged one
/// (truncated tensors, bad JSON) is reported and skipped for the one before it; a checkpoint of
/// another tokenizer is an error.
fn resume_point(
    run: &Path,
    phases: &PhaseShards,
    model: &mut PretrainModel,
    opt: &mut AdamW,
    device: &Device,
) -> Result<Option<TrainState>> {
    let mut damaged = None;
    for (step, dir) in checkpoint::list(run).into_iter().rev() {
        let ck = match checkpoint::load(&dir) {
            Ok(ck) => ck,
            Err(e) => {
                tracing::warn!("skipping a damaged checkpoint: {e}");
                damaged = Some(e);
                continue;
            }
        };
        let shards = phases.first;
        if ck.state.tokenizer_fingerprint != shards.manifest.tokenizer_fingerprint {
            return Err(Error::Checkpoint(format!(
                "{}: written with another tokenizer than {}",
                dir.display(),
                shards.dir.display()
            )));
        }
        let trained_on = |s: &&ShardSet| {
            ck.state
                .shards_fingerprint
                .as_ref()
                .is_none_or(|f| *f == s.manifest.content_fingerprint())
        };
        if !phases.all().iter().any(trained_on) {
            let dirs: Vec<String> = phases
                .all()
                .iter()
                .map(|s| s.dir.display().to_string())
                .collect();
            return Err(Error::Checkpoint(format!(
                "{}: the corpus in {} changed since this run began (prepared again from other text?); its data position means nothing there. Start a new run, or put the original shards back",
                dir.display(),
                dirs.join(" or ")
            )));
        }
        check_model_shapes(&dir, &ck.model, model)?;
        let map = TensorMap {
            tensors: ck.model,
            source: dir.join("model.safetensors"),
        };
        let moments = ck.optimizer.unwrap_or_else(|| {
            tracing::warn!(
                "{}: no optimizer.safetensors; resuming its weights with fresh optimizer state (Adam's moments from zero, the step count and schedule kept)",
                dir.display()
            );
            Default::default()
        });
        match model
            .load(&map, device)
            .and_then(|()| opt.load_state(step, &moments, device))
        {
            Ok(()) => return Ok(Some(ck.state)),
            Err(e) => {
                tracing::warn!("skipping a damaged checkpoint: {e}");
                damaged = Some(e);
            }
        }
    }
    damaged.map_or(Ok(None), Err)
}

/// A checkpoint whose tensors have other shapes than the config's model was not damaged: the
/// model section changed since the run began. Refused, naming a tensor and both shapes.
fn check_model_shapes(
    dir: &Path,
    tensors: &std::collections::BTreeMap<String, crate::interop::tensors::HostTensor>,
    model: &mut PretrainModel,
) -> Result<()> {
    let mut lister = crate::model::params::FileShapes::default();
    model.walk(&mut lister);
    for (name, want) in lister.0 {
        if let Some(t) = tensors.get(&name).filter(|t| t.shape != want) {
            return Err(Error::Checkpoint(format!(
                "{}: tensor `{name}` has shape {:?}, the model of this config {want:?}: the \
                 model section differs from the run's (a --set model.… on --resume?); resume \
                 with the run's model, or start a new run",
                dir.display(),
                t.shape
            )));
        }
    }
    Ok(())
}

/// Where a run starts.
pub enum Start {
    /// From this state: the last whole checkpoint on `--resume` (model and optimizer loaded),
    /// else step 0 (from `model.init_from` when set).
    At(TrainState),
    /// `--resume` found the run finished at this step.
    Finished(u64),
}

/// The run folder a process starts in: `resume` continues it; `main`: this process writes the
/// run's files (it clears a checkpoint left half-written).
pub struct RunPlace<'a> {
    pub run: &'a Path,
    pub resume: bool,
    pub main: bool,
}

/// The model and optimizer a run starts with, on `device`: loaded from the last checkpoint or
/// `model.init_from`, or left as they are.
pub struct Trainee<'a> {
    pub model: &'a mut PretrainModel,
    pub opt: &'a mut AdamW,
    pub device: &'a Device,
}

/// Where a run of `train.steps` = `steps` with the `[model]` section `model` on `phases` in
/// `place` starts, with `trainee` loaded for it.
pub fn start_point(
    model_section: &ModelSection,
    steps: u64,
    phases: &PhaseShards,
    place: RunPlace,
    trainee: Trainee,
) -> Result<Start> {
    let RunPlace { run, resume, main } = place;
    let Trainee { model, opt, device } = trainee;
    let resumed = if resume {
        if main {
            checkpoint::clean_leftovers(run)?;
        }
        resume_point(run, phases, model, opt, device)?
    } else {
        if checkpoint::list(run).last().is_some() || run.join(METRICS).is_present() {
            return Err(Error::Config(format!(
                "{}: holds an earlier run; pass --resume to continue it or choose another run directory",
                run.display()
            )));
        }
        None
    };
    match resumed {
        Some(ck) if ck.step >= steps => Ok(Start::Finished(ck.step)),
        Some(ck) => Ok(Start::At(ck)),
        None => {
            if resume {
                tracing::warn!("{}: no checkpoint yet; starting from step 0", run.display());
            }
            let shards = phases.first;
            if let Some(init) = &model_section.init_from {
                let vocab = shards.manifest.vocab_size;
                let (kind, encoder) = (model_section.kind, model_section.encoder(vocab));
                let weights = read_transformers_weights(init, kind, &encoder)?;
                check_init_tokenizer(init, &shards.dir.join("tokenizer.json"))?;
                model.load_init(&weights, device)?;
            }
            Ok(Start::At(TrainState::new(
                0,
                DataPosition::default(),
                &shards.manifest,
                WindowTotals::default(),
            )))
        }
    }
}

/// The run folder's `config.toml` (`config_toml`, the resolved config) and `tokenizer.json`
/// (the shards').
pub fn write_run_files(config_toml: &str, shards: &ShardSet, run: &Path) -> Result<()> {
    crate::io::write::folder(run)?;
    crate::io::write_atomic(&run.join("config.toml"), config_toml.as_bytes())?;
    // What made the run (a resumed run records the build that continued it).
    crate::io::write_atomic(
        &run.join(VERSION_FILE),
        format!("{}\n", crate::VERSION).as_bytes(),
    )?;
    let tokenizer = shards.dir.join("tokenizer.json");
    if tokenizer.is_present() {
        crate::io::write_atomic(
            &run.join("tokenizer.json"),
            &crate::io::read::read(&tokenizer, crate::io::limit::TOKENIZER)?,
        )?;
    }
    Ok(())
}

/// The run's record of the build that made it (`trueneg --version`).
pub const VERSION_FILE: &str = "trueneg-version.txt";

/// The run's file name for its metrics lines.
pub const METRICS: &str = "metrics.jsonl";

/// A new run that failed before its first logged step or checkpoint leaves no run files, so
/// that the same command can be tried again (a metrics line or a checkpoint makes it a run to
/// `--resume`).
pub fn forget_unstarted(run: &Path) {
    let metrics = run.join(METRICS);
    let logged = crate::io::read::file_len(&metrics).is_ok_and(|n| n > 0);
    if logged || checkpoint::list(run).last().is_some() {
        return;
    }
    for f in ["config.toml", "tokenizer.json", VERSION_FILE, METRICS] {
        let _ = crate::io::write::remove_file(&run.join(f));
    }
    for f in crate::tensorboard::event_files(run).unwrap_or_default() {
        let _ = crate::io::write::remove_file(&f);
    }
    // A checkpoint the process was writing when it was stopped (a hidden `.step-*.tmp`):
    // removed with the folder that holds nothing else.
    let _ = checkpoint::clean_leftovers(run);
    crate::io::write::remove_empty_folder(&checkpoint::checkpoints_dir(run));
}
