//! Checkpoints: `<run>/checkpoints/step-NNNNNNNN/` with `model.safetensors` (transformers'
//! parameter names), `optimizer.safetensors` (AdamW moments) and `state.json` (step, data
//! position). Each is written into a temporary folder that is renamed into place, so a killed
//! run leaves either a whole checkpoint or none.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::interop::tensors::{HostTensor, read_safetensors, write_safetensors};
use crate::text::batches::DataPosition;
use crate::{Error, Result};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainState {
    pub step: u64,
    pub data: DataPosition,
    pub tokenizer_fingerprint: String,
}

pub struct Checkpoint {
    pub dir: PathBuf,
    pub state: TrainState,
    pub model: BTreeMap<String, HostTensor>,
    pub optimizer: BTreeMap<String, HostTensor>,
}

pub fn checkpoints_dir(run: &Path) -> PathBuf {
    run.join("checkpoints")
}

/// Complete checkpoints of a run, oldest first.
pub fn list(run: &Path) -> Vec<(u64, PathBuf)> {
    let mut out: Vec<(u64, PathBuf)> = std::fs::read_dir(checkpoints_dir(run))
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let step = name.strip_prefix("step-")?.parse().ok()?;
            e.path()
                .join("state.json")
                .exists()
                .then(|| (step, e.path()))
        })
        .collect();
    out.sort();
    out
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
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
    }
    std::fs::create_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
    write_safetensors(&tmp.join("model.safetensors"), model, None)?;
    write_safetensors(&tmp.join("optimizer.safetensors"), optimizer, None)?;
    let json = serde_json::to_string_pretty(state).expect("json");
    crate::error::write_atomic(&tmp.join("state.json"), json.as_bytes())?;
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    }
    std::fs::rename(&tmp, &dir).map_err(|e| Error::io(&dir, e))?;
    let all = list(run);
    if keep > 0 && all.len() > keep {
        for (_, old) in &all[..all.len() - keep] {
            let _ = std::fs::remove_dir_all(old);
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
        optimizer: read_safetensors(&dir.join("optimizer.safetensors"))?.tensors,
    })
}
