//! A fine-tuning run's output folder: chosen (the default beside the model, or `--out`),
//! claimed for one process, recorded with the run's settings so that a run stopped before its
//! results continues under the same command, and left clean when it fails before any seed
//! finished.

use crate::io::PathQuery;
use std::path::{Path, PathBuf};

use super::seeds::TRAINED;
use crate::frame::Owned;
use crate::{Error, Result};

/// The default output folder of a fine-tuning run.
pub fn default_out(model: &Path, task: &str) -> PathBuf {
    model.join("finetune").join(task)
}

/// The record of a fine-tuning run's settings in its output folder: a run stopped before its
/// results continues when the same command is given again.
pub const SETTINGS: &str = "finetune.json";

/// The settings' field of the model weights' content fingerprint.
pub const WEIGHTS: &str = "model_weights";

/// Whether `dir` can take a fine-tuning run of `settings`: new or empty, or the unfinished
/// run (no `results.json` yet) whose recorded settings agree with every field of `settings`
/// given (the command line's: the options the model decides are left out).
fn takes(dir: &Path, settings: &serde_json::Value) -> bool {
    use crate::io::lock::has_content;
    let agrees = |saved: serde_json::Value| {
        settings
            .as_object()
            .into_iter()
            .flatten()
            .all(|(k, v)| saved.get(k) == Some(v))
    };
    !has_content(dir)
        || (!dir.join("results.json").is_present()
            && crate::io::read_json::<serde_json::Value>(&dir.join(SETTINGS)).is_ok_and(agrees))
}

/// The output folder of a fine-tuning run of `settings`: `out` when given, else `default` or
/// the first of `default-2`, `default-3`, … beside it that can take it. A folder takes a run
/// when it is new or empty, or holds the unfinished run of the same settings, which then
/// continues (its finished seeds are kept).
pub fn choose_out(out: Option<&Path>, default: &Path, settings: &serde_json::Value) -> PathBuf {
    match out {
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
    }
}

/// The claimed output folder `out` taken by a fine-tuning run of `settings`: results and
/// `seed-N/` of another run are never overwritten, and an unfinished run continues only with
/// the same settings.
pub fn claim_out(out: &Owned, settings: &serde_json::Value) -> Result<ClaimedOut> {
    let dir = out.dir().to_path_buf();
    let free = || {
        let name = dir.file_name().unwrap_or_default().to_string_lossy();
        (2..)
            .map(|i| dir.with_file_name(format!("{name}-{i}")))
            .find(|d| !crate::io::read::exists(d))
            .expect("a free name")
    };
    if dir.join("results.json").is_present() {
        return Err(Error::Config(format!(
            "{}: holds a finished fine-tuning run (results.json); give a new --out (such as {}) for another, nothing was changed",
            dir.display(),
            free().display()
        )));
    }
    if crate::io::lock::has_content(&dir) && !dir.join(SETTINGS).is_present() {
        return Err(Error::Config(format!(
            "{}: not empty, and not a fine-tuning run's; give a new --out (such as {}), nothing was changed",
            dir.display(),
            free().display()
        )));
    }
    let saved: Option<serde_json::Value> = crate::io::read::exists(&dir.join(SETTINGS))
        .then(|| crate::io::read_json(&dir.join(SETTINGS)))
        .transpose()?;
    if let Some(saved) = saved
        && saved.get(WEIGHTS) != settings.get(WEIGHTS)
    {
        return Err(Error::Config(format!(
            "{}: its seeds were fine-tuned from other weights of {} (the model has changed since, e.g. pre-trained further); fine-tune the new weights into another --out, or remove {} to start afresh (nothing was changed)",
            dir.display(),
            settings["model"].as_str().unwrap_or("the model"),
            dir.display()
        )));
    }
    crate::io::outputs::claim_folder(&dir, SETTINGS, settings)?;
    Ok(ClaimedOut { dir })
}

/// A fine-tuning output folder held by this process ([`claim_out`]).
#[derive(Debug)]
pub struct ClaimedOut {
    pub dir: PathBuf,
}

impl ClaimedOut {
    /// After a failure: when no seed has finished, what the run wrote goes (its settings and
    /// unfinished seed folders; the frame then removes the folder it made), so that nothing
    /// stands in the way of the same command or of another; finished seeds stay for the same
    /// command to continue from.
    pub fn forget_unstarted(self) {
        let names = crate::io::read::names(&self.dir);
        let seeds: Vec<&String> = names.iter().filter(|n| n.starts_with("seed-")).collect();
        if seeds
            .iter()
            .any(|s| self.dir.join(s).join(TRAINED).is_present())
        {
            return;
        }
        for s in seeds {
            let _ = crate::io::write::remove_folder(&self.dir.join(s));
        }
        let _ = crate::io::write::remove_file(&self.dir.join(SETTINGS));
    }
}
