//! The file names of the Hub's Parquet layout, as the `datasets` library writes a dataset: a
//! folder per task (`glue/rte/`, `squad/plain_text/`) holding each split as
//! `<split>-NNNNN-of-NNNNN.parquet` (`train`, `validation`; MNLI `validation_matched`,
//! `validation_mismatched`). The readers are in `hub_parquet`.

use std::path::{Path, PathBuf};

/// The files of `split` in `dir` (`<split>-*.parquet` or `<split>.parquet`), in name order.
pub fn split_files(dir: &Path, split: &str) -> Vec<PathBuf> {
    crate::io::read::names(dir)
        .into_iter()
        .filter(|n| {
            n.ends_with(".parquet")
                && (n == &format!("{split}.parquet") || n.starts_with(&format!("{split}-")))
        })
        .map(|n| dir.join(n))
        .collect()
}

/// SQuAD's folder in `data`: `data`, or its `plain_text/` (the Hub's configuration folder)
/// when `data` holds neither the official JSON files nor Parquet splits.
pub fn squad_folder(data: &Path) -> PathBuf {
    let inner = data.join("plain_text");
    let here = crate::io::read::exists(&data.join("train-v1.1.json"))
        || crate::io::read::exists(&data.join("dev-v1.1.json"))
        || !split_files(data, "validation").is_empty();
    if !here && crate::io::read::is_folder(&inner) {
        inner
    } else {
        data.to_path_buf()
    }
}

/// Whether `path` is a Parquet file (by its name).
pub fn is_parquet(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "parquet")
}

/// The split a file of the layout holds: its name before the shard numbers.
pub fn split_of(file: &Path) -> String {
    let stem = file.file_stem().unwrap_or_default().to_string_lossy();
    stem.split_once('-')
        .map_or(stem.to_string(), |(s, _)| s.to_string())
}

/// The name GLUE's own files give the split of `file` (`dev_mismatched` for the Hub's
/// `validation_mismatched-00000-of-00001.parquet`; a TSV file's stem as it is), so that scores
/// and submission files are named alike from either layout.
pub fn glue_stem(file: &Path) -> String {
    if !is_parquet(file) {
        return file
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
    }
    let split = split_of(file);
    match split.strip_prefix("validation") {
        Some(rest) => format!("dev{rest}"),
        None => split,
    }
}
