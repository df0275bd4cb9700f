//! A fine-tuning run's output folder: chosen (the default beside the model, or `--out`),
//! claimed for one process, recorded with the run's settings so that a run stopped before its
//! results continues under the same command, and left clean when it fails before any seed
//! finished.

use std::path::{Path, PathBuf};

use super::seeds::TRAINED;
use crate::{Error, Result};

/// The default output folder of a fine-tuning run.
pub fn default_out(model: &Path, task: &str) -> PathBuf {
    model.join("finetune").join(task)
}

/// The record of a fine-tuning run's settings in its output folder: a run stopped before its
/// results continues when the same command is given again.
pub const SETTINGS: &str = "finetune.json";

/// Whether `dir` can take a fine-tuning run of `settings`: new or empty, or the unfinished
/// run of the same settings (no `results.json` yet).
fn takes(dir: &Path, settings: &serde_json::Value) -> bool {
    use crate::io::lock::has_content;
    !has_content(dir)
        || (!dir.join("results.json").exists()
            && crate::io::read_json::<serde_json::Value>(&dir.join(SETTINGS))
                .is_ok_and(|s| &s == settings))
}

/// The output folder of a fine-tuning run of `settings`, locked for this process: `out` when
/// given, else `default` or the first of `default-2`, `default-3`, … beside it that can take
/// it. A folder takes a run when it is new or empty, or holds the unfinished run of the same
/// settings, which then continues (its finished seeds are kept); results and `seed-N/` of
/// another run are never overwritten.
pub fn claim_out(
    out: Option<&Path>,
    default: &Path,
    settings: &serde_json::Value,
) -> Result<ClaimedOut> {
    use crate::io::lock::{FolderLock, has_content};
    let dir = match out {
        Some(o) => o.to_path_buf(),
        None => (1..)
            .map(|i| {
                if i == 1 {
                    default.to_path_buf()
                } else {
                    let name = default.file_name().unwrap_or_default().to_string_lossy();
                    default.with_file_name(format!("{name}-{i}"))
                }
            })
            .find(|d| takes(d, settings))
            .expect("a free name"),
    };
    let created = !crate::io::read::exists(&dir);
    let lock = FolderLock::acquire(&dir, "trueneg finetune")?;
    if dir.join("results.json").exists() || (has_content(&dir) && !dir.join(SETTINGS).exists()) {
        return Err(Error::Config(format!(
            "{}: not empty (an earlier fine-tuning run?); choose another --out, nothing was changed",
            dir.display()
        )));
    }
    crate::io::outputs::claim_folder(&dir, SETTINGS, settings)?;
    Ok(ClaimedOut { dir, lock, created })
}

/// A fine-tuning output folder held by this process ([`claim_out`]).
#[derive(Debug)]
pub struct ClaimedOut {
    pub dir: PathBuf,
    pub lock: crate::io::lock::FolderLock,
    /// This process made the folder.
    created: bool,
}

impl ClaimedOut {
    /// After a failure: when no seed has finished, what the run wrote goes (its settings,
    /// unfinished seed folders, and the folder itself when the run made it), so that nothing
    /// stands in the way of the same command or of another; finished seeds stay for the same
    /// command to continue from.
    pub fn forget_unstarted(self) {
        let names = crate::io::read::names(&self.dir);
        let seeds: Vec<&String> = names.iter().filter(|n| n.starts_with("seed-")).collect();
        if seeds
            .iter()
            .any(|s| self.dir.join(s).join(TRAINED).exists())
        {
            return;
        }
        for s in seeds {
            let _ = crate::io::write::remove_folder(&self.dir.join(s));
        }
        let _ = crate::io::write::remove_file(&self.dir.join(SETTINGS));
        let Self { dir, lock, created } = self;
        drop(lock);
        if created {
            crate::io::write::remove_empty_folder(&dir);
        }
    }
}
