//! The door out's primitives: files written atomically (a temporary file in the same folder,
//! fsync, rename: a reader never sees half a file, a crash leaves the old one), folders made
//! with a clear error when a file stands in the way, removal, and append-only logs.
//! Which files a command may replace is [`super::outputs`]' business; who may write into a
//! folder, [`super::lock`]'s.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// The folder a file `path` is written into ("." for a bare name).
pub fn parent_of(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Makes the folder `dir` and its parents; a file (or anything else) standing at `dir` or one
/// of its parents is named in one line.
pub fn folder(dir: &Path) -> Result<()> {
    for a in dir.ancestors().filter(|a| !a.as_os_str().is_empty()) {
        if let Ok(meta) = std::fs::metadata(a) {
            if meta.is_dir() {
                break;
            }
            return Err(Error::Input(format!(
                "{}: is {}, where a folder is needed{}",
                a.display(),
                super::read::kind_of(&meta),
                if a == dir {
                    String::new()
                } else {
                    format!(" (to hold {})", dir.display())
                }
            )));
        }
    }
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))
}

/// A temporary name beside `path` in its folder, hidden, with `path`'s extension kept (plotters
/// picks the image format from it).
pub fn temporary_beside(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".into());
    parent_of(path).join(format!(".{}.tmp.{name}", std::process::id()))
}

/// Produces `path` atomically: `make` writes the temporary file it is given (a crate that writes
/// files itself, such as plotters, writes there), then it is synced and renamed over `path`.
/// On failure no temporary file stays behind and `path` is as it was.
pub fn produce(path: &Path, make: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    if super::read::is_folder(path) {
        return Err(Error::Input(format!(
            "{}: is a folder, not a file",
            path.display()
        )));
    }
    folder(parent_of(path))?;
    let tmp = temporary_beside(path);
    let done = make(&tmp)
        .and_then(|()| {
            File::open(&tmp)
                .and_then(|f| f.sync_all())
                .map_err(|e| Error::io(&tmp, e))
        })
        .and_then(|()| std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e)));
    if done.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    done
}

/// Writes `bytes` to `path` atomically ([`produce`]).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    produce(path, |tmp| {
        File::create(tmp)
            .and_then(|mut f| f.write_all(bytes))
            .map_err(|e| Error::io(tmp, e))
    })
}

/// Writes `value` as pretty JSON with [`write_atomic`].
pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<()> {
    let json = serde_json::to_string_pretty(value).expect("serialisable");
    write_atomic(path, json.as_bytes())
}

/// Opens the log file `path` to append to it (created if missing): `metrics.jsonl` lines are
/// whole lines, each written with one call.
pub fn append(path: &Path) -> Result<File> {
    if super::read::exists(path) {
        super::read::regular_file(path)?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| Error::io(path, e))
}

/// Creates the file `path`, which must not exist yet (a TensorBoard event file).
pub fn create_new(path: &Path) -> Result<File> {
    std::fs::OpenOptions::new()
        .create_new(true)
        .write(true)
        .open(path)
        .map_err(|e| Error::io(path, e))
}

/// Removes the file `path`; a missing one is not an error.
pub fn remove_file(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io(path, e)),
        _ => Ok(()),
    }
}

/// Removes the folder `dir` with everything in it; a missing one is not an error.
pub fn remove_folder(dir: &Path) -> Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io(dir, e)),
        _ => Ok(()),
    }
}

/// Removes the folder `dir` when it is empty; anything else leaves it as it is.
pub fn remove_empty_folder(dir: &Path) {
    let _ = std::fs::remove_dir(dir);
}

/// Renames `from` to `to` (same file system: atomic).
pub fn rename(from: &Path, to: &Path) -> Result<()> {
    std::fs::rename(from, to).map_err(|e| Error::io(to, e))
}
