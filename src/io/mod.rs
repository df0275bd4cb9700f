//! Every file trueneg reads or writes goes through this module, and only this one touches the
//! file system (`tests/suite/architecture.rs` checks it).
//!
//! - [`read`], the door in: what a path is (asked as [`PathQuery`] everywhere else) and how
//!   large it may be, checked before reading;
//! - [`place`]: paths written inside files stay inside their folder;
//! - [`tensor_file`]: a safetensors file's header checked against the file before it is mapped;
//! - [`write`](mod@write), the door out: atomic writes, folders, removal, append-only logs;
//! - [`outputs`]: a command replaces only the files it wrote itself (or with `--force`);
//! - [`lock`]: one writer per output folder;
//! - [`folder_kind`]: what a folder given on the command line is.

pub mod folder_kind;
pub mod guard;
pub mod lock;
pub mod outputs;
pub mod place;
pub mod read;
pub mod tensor_file;
pub mod write;

pub use read::{PathQuery, limit, read_json};
/// An open file, as the doors hand it out.
pub use std::fs::File;
pub use write::{write_atomic, write_json};

/// `text` (a value read from a file) shortened to at most 120 characters for an error line.
pub fn short(text: &str) -> String {
    crate::error::shorten(text, 120)
}
