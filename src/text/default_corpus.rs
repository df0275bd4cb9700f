//! The embedded default corpus: the glosses (definitions and examples) of WordNet 3.0 from
//! Debian's `wordnet-base`, so a first pre-training run needs no download by hand.

use crate::io::PathQuery;
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
        if !path.is_present() {
            return Err(Error::missing(
                &path,
                "WordNet not found; install Debian's `wordnet-base` (apt-get install -y wordnet-base), point `--wordnet DIR` at a WordNet 3.0 dict folder, or set data.shards",
            ));
        }
        let bytes = crate::io::read::read(&path, crate::io::limit::DATA)?;
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
    crate::io::write_atomic(out, text.as_bytes())?;
    Ok(count)
}

/// The WordNet database chosen for this process (`--wordnet`), if any.
static CHOSEN_WORDNET: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Chooses the WordNet database every later reader uses: `dir` holds `data.noun` (a `dict`
/// folder) or is a WordNet home with `dict/` inside. The first choice stands.
pub fn choose_wordnet_dir(dir: &std::path::Path) -> Result<PathBuf> {
    let dict = [dir.to_path_buf(), dir.join("dict")]
        .into_iter()
        .find(|d| d.join("data.noun").is_regular_file())
        .ok_or_else(|| {
            crate::Error::Config(format!(
                "--wordnet {}: no WordNet database there (data.noun in it or in its dict/)",
                dir.display()
            ))
        })?;
    Ok(CHOSEN_WORDNET.get_or_init(|| dict).clone())
}

/// The WordNet database: `--wordnet`, else `$WNHOME/dict`, else Debian's `wordnet-base`.
pub fn default_wordnet_dir() -> PathBuf {
    if let Some(d) = CHOSEN_WORDNET.get() {
        return d.clone();
    }
    PathBuf::from(
        std::env::var("WNHOME")
            .map(|h| format!("{h}/dict"))
            .unwrap_or_else(|_| DEFAULT_WORDNET_DIR.to_string()),
    )
}
