//! Run folders: which folder may start a new run, and which may be resumed. The folder itself
//! is claimed (locked, checked as new, empty or a run's) by the command frame.

use crate::io::PathQuery;
use std::path::{Path, PathBuf};

use super::config::PretrainConfig;
use crate::frame::Owned;
use crate::{Error, Result};

/// What makes a folder a run; a new run refuses a folder that holds any of them. (A run killed
/// while it prepared its default corpus, before writing `config.toml`, starts again cleanly:
/// `prepare` removes its own partial shards.)
pub const RUN_FILES: [&str; 3] = ["config.toml", "metrics.jsonl", "checkpoints"];

/// A run folder held by this process.
#[derive(Debug)]
pub struct RunFolder {
    pub dir: PathBuf,
    pub config: PretrainConfig,
    pub resume: bool,
}

/// The other files a run writes into its folder (event files aside, named by
/// [`crate::tensorboard::is_event_file`]): a new run refuses a folder holding one, the user's
/// or an earlier run's, rather than mix its files with them or replace them.
const RUN_WRITES: [&str; 8] = [
    "tokenizer.json",
    super::start::VERSION_FILE,
    "loss.png",
    "loss.svg",
    "lexicon.safetensors",
    "correction-stats.json",
    "correction-stats.md",
    "correction-stats.png",
];

/// A new run of `config` in the claimed folder `run`: refused when it holds a file of the names
/// a run writes ([`RUN_FILES`], `RUN_WRITES`, event files). What a new run that failed before
/// its first step left is removed first (the folder is this command's: `run.earlier()`), so
/// the same command can be retried.
pub fn new_run(config: PretrainConfig, run: &Owned) -> Result<RunFolder> {
    let dir = run.dir();
    if run.earlier() {
        super::start::forget_unstarted(dir);
    }
    if let Some(f) = RUN_FILES.iter().find(|f| dir.join(f).is_present()) {
        return Err(Error::Config(format!(
            "{}: holds an earlier run (its {f}); pass --resume to continue it or choose another run folder",
            dir.display()
        )));
    }
    let taken = crate::io::read::names(dir)
        .into_iter()
        .find(|n| RUN_WRITES.contains(&n.as_str()) || crate::tensorboard::is_event_file(n));
    if let Some(name) = taken {
        return Err(Error::Config(format!(
            "{}: holds {name}, which a run writes (a file of yours, or of an earlier run); choose a new or empty run folder (nothing was changed)",
            dir.display()
        )));
    }
    Ok(RunFolder {
        dir: dir.to_path_buf(),
        config,
        resume: false,
    })
}

/// The run in the claimed folder `run`, to continue it with its `config.toml` and `overrides`.
/// Nothing is written before the folder is known to hold a run.
pub fn resume_run(run: &Owned, overrides: &[String]) -> Result<RunFolder> {
    let dir = run.dir();
    if !dir.is_folder() {
        return Err(Error::Config(format!(
            "{}: no such run folder",
            dir.display()
        )));
    }
    let cfg_path = dir.join("config.toml");
    if !cfg_path.is_regular_file() {
        return Err(Error::Config(format!(
            "{}: not a trueneg run folder (no config.toml)",
            dir.display()
        )));
    }
    let config = PretrainConfig::load_file(&cfg_path, overrides)?;
    run_tokenizer(dir)?;
    // The history the resume rewrites TensorBoard's from is read whole first.
    super::events::history(dir)?;
    let saved = PretrainConfig::load_file(&cfg_path, &[])?;
    if let Some(key) = changed_model_key(&saved, &config) {
        return Err(Error::Config(format!(
            "--set model.{key}: the run in {} was trained with another value; its checkpoints hold that model, so a resumed run keeps the [model] section (start a new run, or set model.init_from to start from its weights)",
            dir.display()
        )));
    }
    Ok(RunFolder {
        dir: dir.to_path_buf(),
        config,
        resume: true,
    })
}

/// A run resumed at `step` with another `train.steps` than its folder's `config.toml` follows
/// the schedule of the new total: extending a finished run warms its learning rate up again
/// (its decay had reached 0). Said once the run goes on, with both learning rates.
pub fn warn_schedule_change(dir: &Path, config: &PretrainConfig, step: u64) {
    let Ok(saved) = PretrainConfig::load_file(&dir.join("config.toml"), &[]) else {
        return;
    };
    let (old, new) = (saved.train.steps, config.train.steps);
    let lr = |total| config.optimizer.lr_at(step, total);
    let (before, after) = (lr(old), lr(new));
    if old == new || step >= new || (before - after).abs() <= 1e-9 * config.optimizer.lr {
        return;
    }
    tracing::warn!(
        "train.steps {old} -> {new}: the run resumes at step {step} on the schedule of {new} steps, its learning rate {after:.3e} where the schedule of {old} steps had {before:.3e}{}",
        if before == 0.0 {
            " (the finished run's decay had reached 0: this warms it up again; start a new run with model.init_from = the run to continue from its weights on a schedule of its own)"
        } else {
            ""
        }
    );
}

/// The first key of the `[model]` section that differs between `a` and `b`, dropout rates aside
/// (they change no weight's shape) and `init_from` (read by a new run only).
fn changed_model_key(a: &PretrainConfig, b: &PretrainConfig) -> Option<String> {
    let (a, b) = (
        serde_json::to_value(&a.model).expect("a config serialises"),
        serde_json::to_value(&b.model).expect("a config serialises"),
    );
    let a = a.as_object()?;
    b.as_object()?
        .iter()
        .filter(|(k, _)| !k.contains("dropout") && k.as_str() != "init_from")
        .find(|(k, v)| a.get(k.as_str()) != Some(v))
        .map(|(k, _)| k.clone())
}

/// The tokenizer of the run in `run` (its `tokenizer.json`), checked against the fingerprint
/// its newest readable checkpoint state recorded (a damaged one is reported where the
/// checkpoints are loaded): every command that reads a run's ids takes it from here.
pub fn run_tokenizer(run: &Path) -> Result<crate::text::WordPieceTokenizer> {
    let path = run.join("tokenizer.json");
    let recorded = super::checkpoint::list(run)
        .into_iter()
        .rev()
        .find_map(|(_, dir)| Some((super::checkpoint::read_state(&dir).ok()?, dir)));
    match recorded {
        Some((state, dir)) => crate::text::WordPieceTokenizer::load_checked(
            &path,
            &state.tokenizer_fingerprint,
            &dir.join("state.json"),
        ),
        None => crate::text::WordPieceTokenizer::load(&path),
    }
}

/// Checks the run's config `cfg` (its `[model]` section, with a vocabulary of `vocab`) against
/// the weights `tensors` read from `source`: a `config.toml` edited after training (one layer
/// fewer, another width) is refused before the weights are used.
pub fn check_weights(
    cfg: &PretrainConfig,
    vocab: usize,
    tensors: &std::collections::BTreeMap<String, crate::interop::tensors::HostTensor>,
    source: &Path,
    run: &Path,
) -> Result<()> {
    let prefix = match cfg.model.kind {
        super::config::ModelKind::Bert => "bert.",
        super::config::ModelKind::Electra => "electra.",
    };
    crate::interop::weight_shapes::check_encoder_shapes(
        &cfg.model.encoder(vocab),
        tensors,
        prefix,
        &source.display().to_string(),
        &run.join("config.toml").display().to_string(),
    )
}

/// The `[model]` section of the run in `run` (its `config.toml`); a folder of another kind is
/// named as such.
pub fn run_model(run: &Path) -> Result<super::config::ModelSection> {
    Ok(PretrainConfig::of_run(run)?.model)
}
