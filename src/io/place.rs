//! Paths written inside files (a manifest's shard names, the Hugging Face cache's `refs/`, a
//! config's data folder) stay inside the folder they belong to: a relative path without `..`,
//! that does not leave the folder through a link either. A path the user typed is theirs and is
//! not checked here.

use std::path::{Component, Path, PathBuf};

use crate::{Error, Result};

/// `written` (read from the file `source`, in its field `field`) joined to `base`, refused
/// when it is absolute, climbs with `..`, or resolves (through links) outside `base`.
pub fn inside(base: &Path, written: &str, source: &Path, field: &str) -> Result<PathBuf> {
    let refuse = |why: &str| {
        Error::Input(format!(
            "{}: field `{field}` is {:?}, {why}; it must name a file inside {}",
            source.display(),
            crate::io::short(written),
            base.display()
        ))
    };
    let rel = Path::new(written);
    if written.is_empty() {
        return Err(refuse("empty"));
    }
    for c in rel.components() {
        match c {
            Component::Normal(_) | Component::CurDir => {}
            Component::ParentDir => return Err(refuse("a path that climbs out with `..`")),
            Component::RootDir | Component::Prefix(_) => return Err(refuse("an absolute path")),
        }
    }
    let joined = base.join(rel);
    // A link inside the folder may still point out of it.
    if let (Ok(b), Ok(j)) = (std::fs::canonicalize(base), std::fs::canonicalize(&joined))
        && !j.starts_with(&b)
    {
        return Err(refuse(&format!(
            "a link that leads out of the folder (to {})",
            j.display()
        )));
    }
    Ok(joined)
}
