//! Files written where the user asked (`--out`): a command replaces a file only when that same
//! command wrote it, or when told to (`--force`). Each folder that receives such files keeps a
//! record of them, [`RECORD`] (file name → the command that wrote it); a file missing from it
//! was not written by trueneg and is never replaced unasked.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// The record kept in each output folder.
pub const RECORD: &str = ".trueneg-outputs.json";

/// The output files of one command.
#[derive(Clone, Debug)]
pub struct Outputs {
    command: String,
    force: bool,
}

fn record_of(path: &Path) -> (PathBuf, String) {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    (dir.join(RECORD), name)
}

fn read_record(record: &Path) -> BTreeMap<String, String> {
    std::fs::read(record)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// The record's key for the folder itself: the command that made it, and so owns it.
const FOLDER_OWNER: &str = ".";

/// The command that wrote the file `path`, as its folder's record says.
pub fn writer(path: &Path) -> Option<String> {
    let (record, name) = record_of(path);
    read_record(&record).remove(&name)
}

/// The command that made the folder `dir` (`trueneg prepare`, …), as its record says.
pub fn owner(dir: &Path) -> Option<String> {
    read_record(&dir.join(RECORD)).remove(FOLDER_OWNER)
}

/// Records `command` as the maker of the folder `dir`, before anything else is written there.
pub fn set_owner(dir: &Path, command: &str) -> Result<()> {
    let record = dir.join(RECORD);
    let mut written = read_record(&record);
    written.insert(FOLDER_OWNER.into(), command.into());
    crate::io::write_json(&record, &written)
}

/// What a command writes its name as, in records and lock files: `trueneg <command>`.
pub fn command_name(command: &str) -> String {
    format!("trueneg {command}")
}

impl Outputs {
    /// `command`: the subcommand's name as the user types it (`evaluate`, `export`, …).
    pub fn new(command: &str, force: bool) -> Self {
        Self {
            command: command_name(command),
            force,
        }
    }

    /// Whether the user asked to replace whatever is there (`--force`).
    pub fn forced(&self) -> bool {
        self.force
    }

    /// Refuses, before anything is written, when one of `paths` exists and was not written by
    /// this command (unless forced); a folder in the way is always refused.
    pub fn check(&self, paths: &[PathBuf]) -> Result<()> {
        for p in paths {
            if p.is_dir() {
                return Err(Error::Input(format!(
                    "{}: is a folder, where {} writes a file (nothing was changed)",
                    p.display(),
                    self.command
                )));
            }
            if !p.exists() || self.force {
                continue;
            }
            let (record, name) = record_of(p);
            let writer = read_record(&record).remove(&name);
            if writer.as_deref() != Some(self.command.as_str()) {
                let by = match writer {
                    Some(w) => format!("was written by {w}"),
                    None => format!("{} did not write it", self.command),
                };
                return Err(Error::Input(format!(
                    "{}: exists and {by}; choose another --out, or pass --force to replace it \
                     (nothing was changed)",
                    p.display()
                )));
            }
        }
        Ok(())
    }

    /// Notes `path` (already written) as this command's in its folder's record.
    pub fn record(&self, path: &Path) -> Result<()> {
        let (record, name) = record_of(path);
        let mut written = read_record(&record);
        if written.get(&name) == Some(&self.command) {
            return Ok(());
        }
        written.insert(name, self.command.clone());
        crate::io::write_json(&record, &written)
    }

    /// Checks `path`, writes `bytes` there atomically and records it.
    pub fn write(&self, path: &Path, bytes: &[u8]) -> Result<()> {
        self.check(&[path.to_path_buf()])?;
        crate::io::write_atomic(path, bytes)?;
        self.record(path)
    }

    /// As [`write`](Self::write), with `value` as pretty JSON.
    pub fn write_json(&self, path: &Path, value: &impl serde::Serialize) -> Result<()> {
        let json = serde_json::to_string_pretty(value).expect("serialisable") + "\n";
        self.write(path, json.as_bytes())
    }
}

/// Claims `dir` for a command that is continued by calling it again (the experiment
/// commands): the first call takes a new or empty folder only, everything in it then
/// being the command's to write, and records its `settings` in `dir/<marker>`; a later call
/// continues only with the same settings, and names the ones that differ.
pub fn claim_folder(dir: &Path, marker: &str, settings: &serde_json::Value) -> Result<()> {
    let path = dir.join(marker);
    if !super::read::exists(&path) {
        if super::lock::has_content(dir) {
            return Err(Error::Config(format!(
                "{}: not empty and not this command's folder (no {marker}); choose a new or empty --out (nothing was changed)",
                dir.display()
            )));
        }
        return super::write_json(&path, settings);
    }
    let saved: serde_json::Value = super::read_json(&path)?;
    if &saved == settings {
        return Ok(());
    }
    let fields: Vec<String> = settings
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, v)| saved.get(k.as_str()) != Some(v))
        .map(|(k, _)| k.clone())
        .collect();
    Err(Error::Config(format!(
        "{}: this folder holds work with other settings ({}); continue it with the same options or choose another --out",
        path.display(),
        fields.join(", ")
    )))
}
