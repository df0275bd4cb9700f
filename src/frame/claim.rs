//! Claiming a plan's outputs before anything is removed or written: each output's lock is
//! taken, and a folder is checked to be new or empty, or the work of the same command, whose
//! maker is recorded in it ([`crate::io::outputs::owner`]). What a killed earlier writer left
//! (its `.PID.tmp.*` files) is removed once the folder is held.

use std::path::{Path, PathBuf};

use super::plan::{Output, OutputKind, Plan};
use crate::io::folder_kind::FolderKind;
use crate::io::lock::{FolderLock, has_content};
use crate::io::outputs::{Outputs, command_name, owner, set_owner};
use crate::{Error, Result};

/// The lock of the reports written beside a run ([`OutputKind::ReportsIn`]).
const REPORTS_LOCK: &str = ".trueneg-reports.lock";

/// An output folder held by this command: locked, and new, empty or its own.
#[derive(Clone, Debug)]
pub struct Owned {
    dir: PathBuf,
    earlier: bool,
    stale: bool,
}

impl Owned {
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The folder holds work of an earlier call of this command, which this one continues or
    /// clears of its own files.
    pub fn earlier(&self) -> bool {
        self.earlier
    }

    /// The earlier call was killed while it held the folder (its lock file was left).
    pub fn stale(&self) -> bool {
        self.stale
    }

    /// The folder `rel` inside this one (made if missing): held through it, whatever is inside
    /// being this command's.
    pub fn child(&self, rel: impl AsRef<Path>) -> Result<Owned> {
        let dir = self.dir.join(rel);
        crate::io::write::folder(&dir)?;
        Ok(Owned {
            earlier: has_content(&dir),
            stale: self.stale,
            dir,
        })
    }

    /// Whether this is the folder `path` (whatever its spelling).
    pub fn is(&self, path: &Path) -> bool {
        let (a, b) = (
            crate::io::read::identity(&self.dir),
            crate::io::read::identity(path),
        );
        a.is_some() && a == b
    }
}

/// Everything a plan's outputs hold while the command runs.
#[derive(Debug)]
pub struct Claim {
    folders: Vec<(String, Owned)>,
    outputs: Outputs,
    locks: Vec<FolderLock>,
    /// Folders this claim made, or found empty: emptied of bookkeeping (and removed when made)
    /// when the command fails without writing anything there.
    fresh: Vec<(PathBuf, bool)>,
}

impl Claim {
    /// The folder the plan declared as `flag` (a folder output).
    pub fn folder(&self, flag: &str) -> &Owned {
        self.folders
            .iter()
            .find(|(f, _)| f == flag)
            .map(|(_, o)| o)
            .unwrap_or_else(|| panic!("the plan declares no output folder {flag}"))
    }

    /// The command's file writer: replaces only files this command wrote (or with `--force`).
    pub fn outputs(&self) -> &Outputs {
        &self.outputs
    }

    /// The lock files held, for the stop handler to remove.
    pub fn lock_files(&self) -> Vec<PathBuf> {
        self.locks.iter().map(|l| l.path().to_path_buf()).collect()
    }

    /// The folders written into, where the stop handler removes this process's temporaries.
    pub fn written_folders(&self) -> Vec<PathBuf> {
        self.locks
            .iter()
            .filter_map(|l| l.path().parent().map(Path::to_path_buf))
            .collect()
    }

    /// After a failure: a folder this claim made or found empty, and where nothing was written,
    /// is left as it was found.
    pub fn undo_fresh(self) {
        let Self { fresh, locks, .. } = self;
        drop(locks);
        for (dir, made) in fresh {
            if has_content(&dir) {
                continue;
            }
            let _ = crate::io::write::remove_file(&dir.join(crate::io::outputs::RECORD));
            if made {
                crate::io::write::remove_empty_folder(&dir);
            }
        }
    }
}

/// Whether the output `out` would write into (or remove) one of the plan's inputs: the same
/// file or folder, or a folder holding it.
fn overlaps_input(plan: &Plan, out: &Output) -> Result<()> {
    let Some(out_id) = crate::io::read::identity(&out.path) else {
        return Ok(());
    };
    for input in &plan.inputs {
        let holds = input
            .path
            .ancestors()
            .filter(|a| !a.as_os_str().is_empty())
            .any(|a| crate::io::read::identity(a) == Some(out_id));
        let through_links = crate::io::read::canonical(&input.path)
            .ok()
            .zip(crate::io::read::canonical(&out.path).ok())
            .is_some_and(|(i, o)| i.starts_with(o));
        if holds || through_links {
            return Err(Error::Input(format!(
                "{}: {} writes here, and {} {} is {}; choose another {}  (nothing was changed)",
                out.path.display(),
                out.flag,
                input.flag,
                input.path.display(),
                if crate::io::read::identity(&input.path) == Some(out_id) {
                    "the same folder"
                } else {
                    "inside it"
                },
                out.flag
            )));
        }
    }
    Ok(())
}

/// What the folder `dir` holds, in words, for a refusal.
fn holds(dir: &Path) -> String {
    let kind = FolderKind::of(dir).unwrap_or(FolderKind::Other);
    match owner(dir) {
        Some(o) => format!("{}, made by {o}", kind.describe()),
        None if kind == FolderKind::Other => "files that trueneg did not write".into(),
        None => kind.describe().to_string(),
    }
}

/// Removes the temporary files (`.PID.tmp.*`) that writers no longer alive left in `dir`,
/// those of `file` only when given.
fn remove_dead_temporaries(dir: &Path, file: Option<&str>) {
    for name in crate::io::read::names(dir) {
        let Some(pid) = name
            .strip_prefix('.')
            .and_then(|r| r.split_once(".tmp."))
            .filter(|(_, rest)| file.is_none_or(|f| *rest == f))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !crate::io::read::exists(Path::new(&format!("/proc/{pid}")))
        {
            let _ = crate::io::write::remove_file(&dir.join(&name));
        }
    }
}

/// Claims every output of `plan`, in order; on a refusal nothing claimed stays held.
pub fn claim(plan: &Plan) -> Result<Claim> {
    let command = command_name(&plan.command);
    let mut claim = Claim {
        folders: Vec::new(),
        outputs: Outputs::new(&plan.command, plan.force),
        locks: Vec::new(),
        fresh: Vec::new(),
    };
    for out in &plan.outputs {
        if let Err(e) = claim_one(plan, out, &command, &mut claim) {
            claim.undo_fresh();
            return Err(e);
        }
    }
    Ok(claim)
}

fn claim_one(plan: &Plan, out: &Output, command: &str, claim: &mut Claim) -> Result<()> {
    if matches!(out.kind, OutputKind::Folder | OutputKind::File) {
        overlaps_input(plan, out)?;
    }
    let path = &out.path;
    let exists = crate::io::read::exists(path);
    let is_folder = crate::io::read::is_folder(path);
    if out.kind == OutputKind::File {
        if is_folder {
            return Err(Error::Input(format!(
                "{}: is a folder; {} takes a file to write",
                path.display(),
                out.flag
            )));
        }
        let dir = crate::io::write::parent_of(path);
        if !crate::io::read::exists(dir) {
            claim.fresh.push((dir.to_path_buf(), true));
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let lock = FolderLock::acquire_named(dir, &format!(".trueneg-{name}.lock"), command)?;
        claim.locks.push(lock);
        remove_dead_temporaries(dir, Some(&name));
        return claim.outputs.check(std::slice::from_ref(path));
    }
    if exists && !is_folder {
        crate::io::read::folder(path)
            .map_err(|e| Error::Input(format!("{e}; {} takes a folder", out.flag)))?;
    }
    let lock = match out.kind {
        OutputKind::ReportsIn => FolderLock::acquire_named(path, REPORTS_LOCK, command)?,
        _ => FolderLock::acquire(path, command)?,
    };
    let stale = lock.stale.is_some();
    claim.locks.push(lock);
    if !exists {
        claim.fresh.push((path.clone(), true));
    }
    if matches!(out.kind, OutputKind::Folder | OutputKind::Continued) {
        let maker = owner(path);
        let empty = !has_content(path);
        let earlier = match out.kind {
            OutputKind::Folder if empty => false,
            OutputKind::Folder if maker.as_deref() == Some(command) => true,
            OutputKind::Continued if !empty && maker.as_deref().is_none_or(|m| m == command) => {
                true
            }
            OutputKind::Continued => {
                return Err(Error::Input(format!(
                    "{}: holds {}; {} continues the work of {command} (nothing was changed)",
                    path.display(),
                    holds(path),
                    out.flag
                )));
            }
            _ => {
                return Err(Error::Input(format!(
                    "{}: holds {}; {} takes a new or empty folder, or one an earlier {command} made (nothing was changed)",
                    path.display(),
                    holds(path),
                    out.flag
                )));
            }
        };
        if empty {
            if exists {
                claim.fresh.push((path.clone(), false));
            }
            set_owner(path, command)?;
        }
        claim.folders.push((
            out.flag.clone(),
            Owned {
                dir: path.clone(),
                earlier,
                stale,
            },
        ));
    }
    remove_dead_temporaries(path, None);
    Ok(())
}
