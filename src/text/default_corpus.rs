//! The embedded default corpus: the glosses (definitions and examples) of WordNet 3.0 from
//! Debian's `wordnet-base`, so a first pre-training run needs no download by hand.

use std::path::{Path, PathBuf};

use crate::{Error, Result};

pub const DEFAULT_WORDNET_DIR: &str = "/usr/share/wordnet";

/// Writes the glosses of `data.{noun,verb,adj,adv}` as a text corpus (one gloss per line,
/// a blank line after every 16 glosses as document boundary) to `out`.
pub fn write_wordnet_glosses(wordnet: &Path, out: &Path) -> Result<usize> {
    let mut text = String::new();
    let mut count = 0usize;
    for pos in ["noun", "verb", "adj", "adv"] {
        let path = wordnet.join(format!("data.{pos}"));
        if !path.exists() {
            return Err(Error::Input(format!(
                "{}: WordNet not found; install Debian's `wordnet-base` (apt-get install -y wordnet-base) or set data.shards",
                path.display()
            )));
        }
        let bytes = crate::error::read(&path)?;
        for line in String::from_utf8_lossy(&bytes).lines() {
            if line.starts_with("  ") {
                continue; // licence header
            }
            if let Some((_, gloss)) = line.split_once(" | ") {
                text.push_str(gloss.trim());
                text.push('\n');
                count += 1;
                if count.is_multiple_of(16) {
                    text.push('\n');
                }
            }
        }
    }
    crate::error::write_atomic(out, text.as_bytes())?;
    Ok(count)
}

pub fn default_wordnet_dir() -> PathBuf {
    PathBuf::from(
        std::env::var("WNHOME")
            .map(|h| format!("{h}/dict"))
            .unwrap_or_else(|_| DEFAULT_WORDNET_DIR.to_string()),
    )
}
