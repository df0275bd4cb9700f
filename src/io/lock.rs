//! One writer per output folder: `<folder>/.trueneg.lock` holds the pid and command of the
//! process writing there, under an exclusive OS file lock.
//!
//! The OS releases the lock when its process dies, however it dies, so a lock file left by a
//! killed process is recognised as stale (and reported to the caller, who may clean up what that
//! process left half-written). The file is removed when the holder drops its [`FolderLock`].

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// The lock file's name inside the locked folder.
pub const LOCK_FILE: &str = ".trueneg.lock";

#[derive(Debug)]
pub struct FolderLock {
    path: PathBuf,
    _file: File,
    /// A lock file of a process that died without removing it was found (and taken over).
    pub stale: Option<String>,
}

fn holder(file: &mut File) -> String {
    let mut s = String::new();
    let _ = file.rewind().and_then(|_| file.read_to_string(&mut s));
    let s = s.trim().replace('\n', ", ");
    if s.is_empty() {
        "another process".into()
    } else {
        s
    }
}

#[cfg(unix)]
fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

#[cfg(not(unix))]
fn same_file(_: &std::fs::Metadata, _: &std::fs::Metadata) -> bool {
    true
}

impl FolderLock {
    /// Creates `dir` if needed and takes its lock for `what` (e.g. "pretrain"); fails, naming the
    /// holder, when another live process has it.
    pub fn acquire(dir: &Path, what: &str) -> Result<Self> {
        Self::acquire_named(dir, LOCK_FILE, what)
    }

    /// As [`acquire`](Self::acquire), with the lock file `name` (a hidden `.trueneg…lock`):
    /// one writer of one file, or of the reports beside a run, rather than of the whole folder.
    pub fn acquire_named(dir: &Path, name: &str, what: &str) -> Result<Self> {
        super::write::folder(dir)?;
        let path = dir.join(name);
        loop {
            let existed = path.exists();
            let mut file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(|e| Error::io(&path, e))?;
            match file.try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => {
                    return Err(Error::Busy(format!(
                        "{}: in use by {} (lock file {}); wait for it to finish or stop it",
                        dir.display(),
                        holder(&mut file),
                        path.display()
                    )));
                }
                Err(TryLockError::Error(e)) => return Err(Error::io(&path, e)),
            }
            // The previous holder may have removed the file between our open and our lock:
            // then we hold a lock on a deleted file, and must start again.
            let on_disk = std::fs::metadata(&path);
            let ours = file.metadata().map_err(|e| Error::io(&path, e))?;
            if !on_disk.is_ok_and(|m| same_file(&m, &ours)) {
                continue;
            }
            let stale = (existed && ours.len() > 0).then(|| holder(&mut file));
            file.set_len(0)
                .and_then(|_| file.rewind())
                .and_then(|_| writeln!(file, "pid {}\n{what}", std::process::id(),))
                .and_then(|_| file.flush())
                .map_err(|e| Error::io(&path, e))?;
            return Ok(Self {
                path,
                _file: file,
                stale,
            });
        }
    }
}

impl FolderLock {
    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for FolderLock {
    fn drop(&mut self) {
        // Removed while still locked: a process waiting on this file retries on a new one.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Whether `name` is one of trueneg's own bookkeeping files in a folder: its lock files and its
/// record of outputs (`.trueneg…`).
pub fn is_bookkeeping(name: &str) -> bool {
    name.starts_with(".trueneg")
}

/// Whether `dir` holds anything but trueneg's bookkeeping files (a missing folder is empty).
pub fn has_content(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .any(|e| !is_bookkeeping(&e.file_name().to_string_lossy()))
}
