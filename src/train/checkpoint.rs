//! Checkpoints: `<run>/checkpoints/step-NNNNNNNN/` with `model.safetensors` (transformers'
//! parameter names), `optimizer.safetensors` (AdamW moments) and `state.json` (step, data
//! position, the open metrics window). Each is written into a temporary folder that is renamed
//! into place, and an old one is renamed away before it is deleted, so a killed run leaves whole
//! checkpoints and hidden leftovers (`.*.tmp`, `.*.del`), which the next save removes. Only
//! those hidden names are ever cleaned up: a `step-N` folder is the user's data, and one
//! without `optimizer.safetensors` (stripped to save space) still holds the weights.

use crate::io::PathQuery;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::interop::tensors::{HostTensor, read_safetensors, write_safetensors};
use crate::objective::Counters;
use crate::text::batches::DataPosition;
use crate::{Error, Result};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainState {
    pub step: u64,
    pub data: DataPosition,
    pub tokenizer_fingerprint: String,
    /// The shards' [`content fingerprint`](crate::text::shards::Manifest::content_fingerprint)
    /// (checkpoints written before it was recorded have none).
    #[serde(default)]
    pub shards_fingerprint: Option<String>,
    /// Totals of the metrics window still open at this step (when `train.log_every` does not
    /// divide `train.checkpoint_every`), so that the first line after a resume is exact.
    #[serde(default)]
    pub window: WindowTotals,
}

impl TrainState {
    /// The state at `step` of a run on the shards of `manifest`.
    pub fn new(
        step: u64,
        data: DataPosition,
        manifest: &crate::text::shards::Manifest,
        window: WindowTotals,
    ) -> Self {
        Self {
            step,
            data,
            tokenizer_fingerprint: manifest.tokenizer_fingerprint.clone(),
            shards_fingerprint: Some(manifest.content_fingerprint()),
            window,
        }
    }
}

/// What a `metrics.jsonl` line sums over the steps since the previous line.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WindowTotals {
    pub steps: u64,
    pub masked: usize,
    /// The objective's counts (Hard Correction's mismatches, corrections, …).
    #[serde(default)]
    pub counters: Counters,
}

pub struct Checkpoint {
    pub dir: PathBuf,
    pub state: TrainState,
    pub model: BTreeMap<String, HostTensor>,
    /// The AdamW moments; `None` when `optimizer.safetensors` was removed.
    pub optimizer: Option<BTreeMap<String, HostTensor>>,
}

pub fn checkpoints_dir(run: &Path) -> PathBuf {
    run.join("checkpoints")
}

/// The files a checkpoint needs (`optimizer.safetensors` may have been removed by the user).
const FILES: [&str; 2] = ["model.safetensors", "state.json"];

/// The checkpoints of a run that hold weights and state (`optimizer.safetensors` may be
/// missing), oldest first. A checkpoint renamed away between reading the folder's names and
/// checking its files (a running run's rotation, which renames the new one in first) means the
/// names read are stale, and they are read again: a listing during a rotation is never empty.
pub fn list(run: &Path) -> Vec<(u64, PathBuf)> {
    const ATTEMPTS: usize = 5;
    let root = checkpoints_dir(run);
    let mut listed = listing(&root);
    for _ in 1..ATTEMPTS {
        if !listed.stale {
            break;
        }
        listed = listing(&root);
    }
    listed.checkpoints
}

/// One reading of a checkpoints folder: its whole checkpoints, oldest first.
struct Listing {
    checkpoints: Vec<(u64, PathBuf)>,
    /// A `step-N` folder named was gone by the time its files were checked.
    stale: bool,
}

fn listing(root: &Path) -> Listing {
    let mut stale = false;
    let mut checkpoints: Vec<(u64, PathBuf)> = crate::io::read::names(root)
        .into_iter()
        .filter_map(|name| {
            let step = name.strip_prefix("step-")?.parse().ok()?;
            let dir = root.join(&name);
            let whole = FILES.iter().all(|f| crate::io::read::is_file(&dir.join(f)));
            stale |= !whole && !crate::io::read::is_folder(&dir);
            whole.then_some((step, dir))
        })
        .collect();
    checkpoints.sort();
    Listing { checkpoints, stale }
}

/// Removes what a killed or failed run left in `<run>/checkpoints`: temporary folders
/// (`.step-N.tmp`) and folders being deleted (`.step-N.del`), the names this program marks;
/// nothing else (saving goes through `.tmp` + rename and never leaves a partial `step-N`).
pub fn clean_leftovers(run: &Path) -> Result<()> {
    let root = checkpoints_dir(run);
    for name in crate::io::read::names(&root) {
        let leftover = name.starts_with('.') && (name.ends_with(".tmp") || name.ends_with(".del"));
        if leftover {
            let p = root.join(&name);
            if crate::io::read::is_folder(&p) {
                crate::io::write::remove_folder(&p)?;
            } else {
                crate::io::write::remove_file(&p)?;
            }
        }
    }
    Ok(())
}

/// Deletes a checkpoint: renamed to a hidden `.del` name first, so that a kill during the
/// deletion leaves no folder that looks like a checkpoint.
fn remove(dir: &Path) -> Result<()> {
    let name = dir.file_name().unwrap_or_default().to_string_lossy();
    let gone = dir.with_file_name(format!(".{name}.del"));
    crate::io::write::rename(dir, &gone)?;
    crate::io::write::remove_folder(&gone)
}

/// What a checkpoint holds besides its state: the weights, the optimizer's moments, and the
/// files of the training step's own state (`step_state` writes them into the folder it is
/// given, `TrainingStep::save_state`).
pub struct Contents<'a> {
    pub model: &'a BTreeMap<String, HostTensor>,
    pub optimizer: &'a BTreeMap<String, HostTensor>,
    pub step_state: &'a dyn Fn(&Path) -> Result<()>,
}

/// The folder of the checkpoint of step `step` of `run`.
pub fn dir_of(run: &Path, step: u64) -> PathBuf {
    checkpoints_dir(run).join(format!("step-{step:08}"))
}

/// Writes `state` and `contents` as the checkpoint of `state.step` (whole, or not at all),
/// keeping the newest `keep` checkpoints.
pub fn save(run: &Path, state: &TrainState, contents: Contents, keep: usize) -> Result<PathBuf> {
    let dir = dir_of(run, state.step);
    let name = dir.file_name().unwrap_or_default().to_string_lossy();
    let tmp = dir.with_file_name(format!(".{name}.tmp"));
    clean_leftovers(run)?;
    crate::io::write::folder(&tmp)?;
    let written = (|| {
        write_safetensors(&tmp.join("model.safetensors"), contents.model, None)?;
        write_safetensors(&tmp.join("optimizer.safetensors"), contents.optimizer, None)?;
        (contents.step_state)(&tmp)?;
        let json = serde_json::to_string_pretty(state).expect("json");
        crate::io::write_atomic(&tmp.join("state.json"), json.as_bytes())
    })();
    if let Err(e) = written {
        // Disk full: no half checkpoint stays behind to fill it further.
        let _ = crate::io::write::remove_folder(&tmp);
        return Err(e);
    }
    if dir.is_present() {
        remove(&dir)?;
    }
    crate::io::write::rename(&tmp, &dir)?;
    let all = list(run);
    if keep > 0 && all.len() > keep {
        for (_, old) in &all[..all.len() - keep] {
            remove(old)?;
        }
    }
    Ok(dir)
}

/// The `state.json` of the checkpoint folder `dir`, checked against the folder's name: the
/// state of `step-N` is the state after step N.
pub fn read_state(dir: &Path) -> Result<TrainState> {
    let state_path = dir.join("state.json");
    let bytes = crate::io::read::read(&state_path, crate::io::limit::SMALL)?;
    let state: TrainState = serde_json::from_slice(&bytes)
        .map_err(|e| Error::Checkpoint(format!("{}: {e}", state_path.display())))?;
    let named = dir
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("step-"))
        .and_then(|n| n.parse::<u64>().ok());
    if let Some(named) = named.filter(|&n| n != state.step) {
        return Err(Error::Checkpoint(format!(
            "{}: field `step` is {}, the folder is step {named}",
            state_path.display(),
            state.step
        )));
    }
    Ok(state)
}

pub fn load(dir: &Path) -> Result<Checkpoint> {
    crate::io::tensor_file::require_fingerprint(&dir.join("model.safetensors"))?;
    Ok(Checkpoint {
        dir: dir.to_path_buf(),
        state: read_state(dir)?,
        model: read_safetensors(&dir.join("model.safetensors"))?.tensors,
        optimizer: match dir.join("optimizer.safetensors") {
            p if p.is_present() => Some(read_safetensors(&p)?.tensors),
            _ => None,
        },
    })
}
