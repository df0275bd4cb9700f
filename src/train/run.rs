//! Run folders: which folder may start a new run, which may be resumed, and one process per
//! folder at a time (a [`FolderLock`]).

use std::path::{Path, PathBuf};

use super::config::PretrainConfig;
use crate::lock::FolderLock;
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
    pub lock: FolderLock,
}

/// Claims `dir` (created if needed) for a new run of `config`.
pub fn new_run(config: PretrainConfig, dir: &Path) -> Result<RunFolder> {
    let lock = FolderLock::acquire(dir, "trueneg pretrain")?;
    if let Some(f) = RUN_FILES.iter().find(|f| dir.join(f).exists()) {
        return Err(Error::Config(format!(
            "{}: holds an earlier run (its {f}); pass --resume to continue it or choose another run folder",
            dir.display()
        )));
    }
    Ok(RunFolder {
        dir: dir.to_path_buf(),
        config,
        resume: false,
        lock,
    })
}

/// Claims the run in `dir` to continue it, with its `config.toml` and `overrides`. Nothing is
/// written before the folder is known to hold a run.
pub fn resume_run(dir: &Path, overrides: &[String]) -> Result<RunFolder> {
    if !dir.is_dir() {
        return Err(Error::Config(format!(
            "{}: no such run folder",
            dir.display()
        )));
    }
    let cfg_path = dir.join("config.toml");
    if !cfg_path.is_file() {
        return Err(Error::Config(format!(
            "{}: not a trueneg run folder (no config.toml)",
            dir.display()
        )));
    }
    let lock = FolderLock::acquire(dir, "trueneg pretrain --resume")?;
    let config = PretrainConfig::load_file(&cfg_path, overrides)?;
    Ok(RunFolder {
        dir: dir.to_path_buf(),
        config,
        resume: true,
        lock,
    })
}
