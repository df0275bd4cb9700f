//! Fixtures built once and shared by every test, across test processes and runs of the suite.
//!
//! A fixture is a folder under `target/tmp/fixtures`, named by what it is made of: the
//! `trueneg` binary's content, the command's arguments and the content of its input files. A
//! new binary (any change to trueneg) or other inputs give another name, so a stale fixture is
//! never read. It is built under a lock held for its name, in a folder of its own that is then
//! renamed into place: a folder under its final name is always complete, a process that waits
//! for the lock finds it there, and what a killed build left is removed before the next build.
//! Callers only read a fixture; a test that changes one works on a copy ([`copy_tree`]).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use sha2::{Digest, Sha256};

/// The folder that holds every fixture (cargo's temporary folder for integration tests).
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fixtures")
}

/// The SHA-256 of a file's content, in hex.
fn file_digest(path: &Path) -> String {
    let mut f = File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut hash = Sha256::new();
    std::io::copy(&mut f, &mut hash).unwrap();
    format!("{:x}", hash.finalize())
}

/// The `trueneg` binary's digest, computed once per process.
fn binary_digest() -> &'static str {
    static DIGEST: OnceLock<String> = OnceLock::new();
    DIGEST.get_or_init(|| file_digest(Path::new(env!("CARGO_BIN_EXE_trueneg"))))
}

/// What a fixture is made of: every part of its name.
pub struct Recipe<'a> {
    /// The fixture's kind, the start of its folder's name (`[a-z0-9-]`, no `--`: that
    /// separates the kind from the digest).
    pub name: &'a str,
    /// Files whose content the fixture depends on.
    pub inputs: &'a [&'a Path],
    /// Everything else it depends on: the commands' arguments, other fixtures' paths.
    pub args: &'a [&'a str],
}

impl Recipe<'_> {
    /// The fixture's folder name: its kind and a digest of the binary, inputs and arguments.
    fn folder_name(&self) -> String {
        let mut hash = Sha256::new();
        hash.update(binary_digest());
        for input in self.inputs {
            hash.update(b"\0input\0");
            hash.update(file_digest(input));
        }
        for arg in self.args {
            hash.update(b"\0arg\0");
            hash.update(arg);
        }
        let digest = format!("{:x}", hash.finalize());
        format!("{}--{}", self.name, &digest[..16])
    }
}

/// The fixture `recipe` describes: its folder, built by `build` (which fills the empty folder
/// it is given) when no process has built it yet.
pub fn cached(recipe: &Recipe, build: impl FnOnce(&Path)) -> PathBuf {
    assert!(
        !recipe.name.contains("--"),
        "{}: `--` in a fixture's kind",
        recipe.name
    );
    let root = root();
    let done = root.join(recipe.folder_name());
    if done.is_dir() {
        return done;
    }
    std::fs::create_dir_all(&root).unwrap();
    let lock = File::create(root.join(format!("{}.lock", recipe.name))).unwrap();
    lock.lock().unwrap();
    if done.is_dir() {
        return done;
    }
    // Under the lock: whatever else carries this kind's name is a stale fixture (an earlier
    // binary's) or what a killed build left.
    let prefix = format!("{}--", recipe.name);
    for entry in std::fs::read_dir(&root).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with(&prefix) && path.is_dir() {
            std::fs::remove_dir_all(&path).unwrap();
        }
    }
    let building = root.join(format!("{}--building", recipe.name));
    std::fs::create_dir_all(&building).unwrap();
    build(&building);
    std::fs::rename(&building, &done).unwrap();
    done
}

/// The folder `from` copied into `to` (created), with its sub-folders.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}
