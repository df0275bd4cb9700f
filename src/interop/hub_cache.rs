//! transformers model ids (`google/electra-small-discriminator`) found in the local Hugging Face
//! cache, as transformers finds them offline: the cache folder is `$HF_HUB_CACHE`, else
//! `$HF_HOME/hub`, else `$XDG_CACHE_HOME/huggingface/hub`, else `~/.cache/huggingface/hub`; a
//! model is `models--{org}--{name}/`, whose `refs/main` names the snapshot
//! (`snapshots/{commit}/`) holding its files. Nothing is downloaded.

use crate::io::PathQuery;
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// The Hugging Face hub cache folder, from the environment as `huggingface_hub` reads it.
pub fn cache_dir() -> PathBuf {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(d) = var("HF_HUB_CACHE").or_else(|| var("HUGGINGFACE_HUB_CACHE")) {
        return d;
    }
    if let Some(home) = var("HF_HOME") {
        return home.join("hub");
    }
    let cache = var("XDG_CACHE_HOME")
        .or_else(|| var("HOME").map(|h| h.join(".cache")))
        .unwrap_or_else(|| PathBuf::from(".cache"));
    cache.join("huggingface").join("hub")
}

/// Whether `s` reads as a Hub model id: `name` or `org/name`, of letters, digits, `-`, `_` and
/// `.`, not starting with `.` (a relative path such as `./x` or `../x` is not an id).
pub fn is_model_id(s: &str) -> bool {
    let parts: Vec<&str> = s.split('/').collect();
    parts.len() <= 2
        && parts.iter().all(|p| {
            !p.is_empty()
                && !p.starts_with('.')
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        })
}

/// The cache folder of model `id` (`models--org--name`).
fn repo_dir(cache: &Path, id: &str) -> PathBuf {
    cache.join(format!("models--{}", id.replace('/', "--")))
}

/// The snapshot folder of model `id` in `cache` that `refs/main` names.
fn snapshot_in(cache: &Path, id: &str) -> Result<PathBuf> {
    let repo = repo_dir(cache, id);
    let refs = repo.join("refs/main");
    let commit = crate::io::read::read_text(&refs, 4096).map_err(|_| {
        Error::Input(format!(
            "{id}: no such folder, and not a model in the Hugging Face cache ({} absent); \
             fetch it once with `hf download {id}` (huggingface_hub before 0.34: \
             `huggingface-cli download {id}`; or set HF_HOME / HF_HUB_CACHE), or give a folder",
            refs.display()
        ))
    })?;
    let snapshot =
        crate::io::place::inside(&repo.join("snapshots"), commit.trim(), &refs, "commit")?;
    if !snapshot.join("config.json").is_present() {
        return Err(Error::Missing(format!(
            "{id}: the Hugging Face cache's snapshot {} has no config.json",
            snapshot.display()
        )));
    }
    if !snapshot.join("model.safetensors").is_present()
        && snapshot.join("pytorch_model.bin").is_present()
    {
        return Err(Error::Input(format!(
            "{id}: the snapshot {} holds pytorch_model.bin only, which trueneg does not read; \
             write model.safetensors with transformers (`AutoModel.from_pretrained(\"{id}\")\
             .save_pretrained(DIR)`) and give DIR",
            snapshot.display()
        )));
    }
    Ok(snapshot)
}

/// A model argument as a folder: `model` itself when it exists (or does not read as a model
/// id), else model id `model`'s snapshot in the Hugging Face cache.
pub fn model_dir(model: &Path) -> Result<PathBuf> {
    match model.to_str() {
        Some(id) if !model.is_present() && is_model_id(id) => snapshot_in(&cache_dir(), id),
        _ => Ok(model.to_path_buf()),
    }
}

/// Where the generator of the ELECTRA discriminator folder `dir` may be: `../generator` beside
/// a `discriminator/` folder, and for a cached `…-discriminator` model the snapshot of the
/// same id with `generator` (as Google publishes the pairs).
pub fn generator_candidates(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if dir.file_name().is_some_and(|n| n == "discriminator")
        && let Some(parent) = dir.parent()
    {
        out.push(parent.join("generator"));
    }
    // …/models--org--name-discriminator/snapshots/<commit>
    let repo = dir.parent().and_then(Path::parent);
    if let Some(repo) = repo
        && let Some(name) = repo.file_name().and_then(|n| n.to_str())
        && name.starts_with("models--")
        && name.contains("discriminator")
        && let Some(cache) = repo.parent()
    {
        let id = name["models--".len()..]
            .replace("discriminator", "generator")
            .replace("--", "/");
        match snapshot_in(cache, &id) {
            Ok(s) => out.push(s),
            Err(_) => out.push(repo_dir(cache, &id)),
        }
    }
    out
}
