//! Checkpoints: `<run>/checkpoints/step-NNNNNNNN/` with `model.safetensors` (transformers'
//! parameter names), `optimizer.safetensors` (AdamW moments) and `state.json` (step, data
//! position, the open metrics window). Each is written into a temporary folder that is renamed
//! into place, and an old one is renamed away before it is deleted, so a killed run leaves whole
//! checkpoints and hidden leftovers (`.*.tmp`, `.*.del`), which the next save removes. Only
//! those hidden names are ever cleaned up: a `step-N` folder is the user's data, and one
//! without `optimizer.safetensors` (stripped to save space) still holds the weights.

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
/// missing), oldest first.
pub fn list(run: &Path) -> Vec<(u64, PathBuf)> {
    let mut out: Vec<(u64, PathBuf)> = std::fs::read_dir(checkpoints_dir(run))
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let step = name.strip_prefix("step-")?.parse().ok()?;
            FILES
                .iter()
                .all(|f| e.path().join(f).is_file())
                .then(|| (step, e.path()))
        })
        .collect();
    out.sort();
    out
}

/// Removes what a killed or failed run left in `<run>/checkpoints`: temporary folders
/// (`.step-N.tmp`) and folders being deleted (`.step-N.del`), the names this program marks;
/// nothing else (saving goes through `.tmp` + rename and never leaves a partial `step-N`).
pub fn clean_leftovers(run: &Path) -> Result<()> {
    for e in std::fs::read_dir(checkpoints_dir(run))
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
    {
        let name = e.file_name().to_string_lossy().to_string();
        let leftover = name.starts_with('.') && (name.ends_with(".tmp") || name.ends_with(".del"));
        if leftover {
            let p = e.path();
            let r = if p.is_dir() {
                std::fs::remove_dir_all(&p)
            } else {
                std::fs::remove_file(&p)
            };
            r.map_err(|e| Error::io(&p, e))?;
        }
    }
    Ok(())
}

/// Deletes a checkpoint: renamed to a hidden `.del` name first, so that a kill during the
/// deletion leaves no folder that looks like a checkpoint.
fn remove(dir: &Path) -> Result<()> {
    let name = dir.file_name().unwrap_or_default().to_string_lossy();
    let gone = dir.with_file_name(format!(".{name}.del"));
    std::fs::rename(dir, &gone).map_err(|e| Error::io(dir, e))?;
    std::fs::remove_dir_all(&gone).map_err(|e| Error::io(&gone, e))
}

pub fn save(
    run: &Path,
    state: &TrainState,
    model: &BTreeMap<String, HostTensor>,
    optimizer: &BTreeMap<String, HostTensor>,
    keep: usize,
) -> Result<PathBuf> {
    let root = checkpoints_dir(run);
    let name = format!("step-{:08}", state.step);
    let tmp = root.join(format!(".{name}.tmp"));
    let dir = root.join(&name);
    clean_leftovers(run)?;
    std::fs::create_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
    let written = (|| {
        write_safetensors(&tmp.join("model.safetensors"), model, None)?;
        write_safetensors(&tmp.join("optimizer.safetensors"), optimizer, None)?;
        let json = serde_json::to_string_pretty(state).expect("json");
        crate::error::write_atomic(&tmp.join("state.json"), json.as_bytes())
    })();
    if let Err(e) = written {
        // Disk full: no half checkpoint stays behind to fill it further.
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    if dir.exists() {
        remove(&dir)?;
    }
    std::fs::rename(&tmp, &dir).map_err(|e| Error::io(&dir, e))?;
    let all = list(run);
    if keep > 0 && all.len() > keep {
        for (_, old) in &all[..all.len() - keep] {
            remove(old)?;
        }
    }
    Ok(dir)
}

pub fn load(dir: &Path) -> Result<Checkpoint> {
    let state_path = dir.join("state.json");
    let bytes = crate::error::read(&state_path)?;
    let state: TrainState = serde_json::from_slice(&bytes)
        .map_err(|e| Error::Checkpoint(format!("{}: {e}", state_path.display())))?;
    Ok(Checkpoint {
        dir: dir.to_path_buf(),
        state,
        model: read_safetensors(&dir.join("model.safetensors"))?.tensors,
        optimizer: match dir.join("optimizer.safetensors") {
            p if p.exists() => Some(read_safetensors(&p)?.tensors),
            _ => None,
        },
    })
}
