//! The door in: every file trueneg reads is opened here. Before a byte is read, the door checks
//! what the path is (a regular file where a file is expected, never a pipe, socket or device,
//! which could block or never end) and how large it is against the bound the caller gives for
//! its format. A read never returns more than its bound, whatever the file claims.

use std::fs::{File, Metadata};
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// Size bounds of the formats trueneg reads whole; larger inputs are streamed or mapped.
pub mod limit {
    /// Configs, manifests, run state, results, records: small JSON or TOML files.
    pub const SMALL: u64 = 64 << 20;
    /// A tokenizer.json (a 250k-entry vocabulary with merges is ~20 MB).
    pub const TOKENIZER: u64 = 512 << 20;
    /// A task's data file read whole (SQuAD's train set is 30 MB; GLUE's largest TSV 80 MB).
    pub const DATA: u64 = 1 << 30;
    /// A safetensors file's JSON header (the crate's own bound).
    pub const TENSOR_HEADER: u64 = 100_000_000;
}

/// What a path is, in words: "a FIFO", "a folder", "a character device", …
pub fn kind_of(meta: &Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_file() {
        "a file"
    } else if t.is_dir() {
        "a folder"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "not a regular file"
    }
}

/// The metadata of `path` (links followed), or the usual "no such file" error naming it.
fn stat(path: &Path) -> Result<Metadata> {
    std::fs::metadata(path).map_err(|e| Error::io(path, e))
}

/// Checks that `path` is a regular file (links followed) and returns its metadata; a folder, a
/// FIFO or a device is refused in one line naming what it is.
pub fn regular_file(path: &Path) -> Result<Metadata> {
    let meta = stat(path)?;
    if !meta.is_file() {
        return Err(Error::Input(format!(
            "{}: is {}, not a file",
            path.display(),
            kind_of(&meta)
        )));
    }
    Ok(meta)
}

/// Checks that `path` is a folder (links followed); a file or anything else is refused in one
/// line naming what it is.
pub fn folder(path: &Path) -> Result<()> {
    let meta = stat(path)?;
    if !meta.is_dir() {
        return Err(Error::Input(format!(
            "{}: is {}, not a folder",
            path.display(),
            kind_of(&meta)
        )));
    }
    Ok(())
}

/// Whether `path` is a regular file (links followed); false for anything else or nothing.
pub fn is_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

/// Whether `path` is a folder (links followed).
pub fn is_folder(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_dir())
}

/// Whether anything is at `path` (a dangling link counts).
pub fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// What is at a path, asked through this door by every module: the one place that decides how
/// links and unreadable entries count (`std`'s `exists`, `is_dir` and `is_file` are not used
/// outside `io`; `tests/suite/architecture.rs` checks it).
pub trait PathQuery {
    /// Anything is there, a dangling link included ([`exists`]).
    fn is_present(&self) -> bool;
    /// A folder is there, links followed ([`is_folder`]).
    fn is_folder(&self) -> bool;
    /// A regular file is there, links followed ([`is_file`]).
    fn is_regular_file(&self) -> bool;
}

impl PathQuery for Path {
    fn is_present(&self) -> bool {
        exists(self)
    }

    fn is_folder(&self) -> bool {
        is_folder(self)
    }

    fn is_regular_file(&self) -> bool {
        is_file(self)
    }
}

/// The size in bytes of the regular file `path`.
pub fn file_len(path: &Path) -> Result<u64> {
    Ok(regular_file(path)?.len())
}

/// [`file_len`], refused (as [`read`] refuses it) when over `bound`: for a file held whole
/// after it is read in pieces.
pub fn bounded_len(path: &Path, bound: u64) -> Result<u64> {
    let len = file_len(path)?;
    if len > bound {
        return Err(too_large(path, format!("{len} bytes"), bound));
    }
    Ok(len)
}

/// Opens the regular file `path` for reading, after [`regular_file`]: opening a FIFO would block.
pub fn open(path: &Path) -> Result<File> {
    regular_file(path)?;
    let f = File::open(path).map_err(|e| Error::io(path, e))?;
    // The path may have changed between the check and the open: check what was opened.
    let meta = f.metadata().map_err(|e| Error::io(path, e))?;
    if !meta.is_file() {
        return Err(Error::Input(format!(
            "{}: is {}, not a file",
            path.display(),
            kind_of(&meta)
        )));
    }
    Ok(f)
}

fn too_large(path: &Path, what: impl std::fmt::Display, bound: u64) -> Error {
    Error::Input(format!(
        "{}: {what}, larger than the {} this kind of file may hold; is it the right file?",
        path.display(),
        human(bound)
    ))
}

/// A byte count in words: "64 MiB".
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} bytes")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Reads the regular file `path` whole, refusing it when it holds more than `bound` bytes: by
/// its size before reading, and by what comes out while reading (files of `/proc` say 0).
pub fn read(path: &Path, bound: u64) -> Result<Vec<u8>> {
    let f = open(path)?;
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    if len > bound {
        return Err(too_large(path, format!("{} bytes", len), bound));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    f.take(bound + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io(path, e))?;
    if bytes.len() as u64 > bound {
        return Err(too_large(path, "more bytes than its size said", bound));
    }
    Ok(bytes)
}

/// [`read`] as UTF-8 text; the error names the file.
pub fn read_text(path: &Path, bound: u64) -> Result<String> {
    String::from_utf8(read(path, bound)?).map_err(|e| {
        Error::Input(format!(
            "{}: not UTF-8 text (byte {})",
            path.display(),
            e.utf8_error().valid_up_to()
        ))
    })
}

/// Reads and parses a small JSON file ([`limit::SMALL`]); the error names the file.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    serde_json::from_slice(&read(path, limit::SMALL)?)
        .map_err(|e| Error::Input(format!("{}: {e}", path.display())))
}

/// The entries of the folder `dir`, sorted by path.
pub fn list(dir: &Path) -> Result<Vec<PathBuf>> {
    folder(dir)?;
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    out.sort();
    Ok(out)
}

/// The file names in `dir` (an empty list when it is missing or not a folder), sorted.
pub fn names(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

/// The absolute path of `path` with its links resolved.
pub fn canonical(path: &Path) -> Result<PathBuf> {
    std::fs::canonicalize(path).map_err(|e| Error::io(path, e))
}

/// A read-only memory map of the regular file `path`.
///
/// The file is expected not to change while mapped: trueneg writes its files once (temporary
/// file, then rename) and never in place.
pub fn map(path: &Path) -> Result<memmap2::Mmap> {
    let f = open(path)?;
    // SAFETY: see above; a file replaced by rename keeps the mapped inode unchanged.
    unsafe { memmap2::Mmap::map(&f) }.map_err(|e| Error::io(path, e))
}

/// The identity of the file or folder at `path` (its device and inode), whatever its spelling:
/// `./x`, `x` and a link to `x` are one file. `None` when nothing is there.
pub fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// The SHA-256 of the file `path`'s content, in hex: its content fingerprint, read in pieces.
pub fn sha256(path: &Path) -> Result<String> {
    use sha2::{Digest, Sha256};
    let mut file = open(path)?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher).map_err(|e| Error::io(path, e))?;
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}
