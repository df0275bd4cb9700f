//! Reading a corpus: plain text (one paragraph per line, a blank line ends a document) or
//! `.jsonl` with a `text` field (one document per line), either of them gzipped.

use rayon::prelude::*;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use super::sentences::split_sentences;
use super::tokenizer::WordPieceTokenizer;
use crate::{Error, Result};

/// One document: its non-empty lines, in order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Document {
    pub lines: Vec<String>,
}

impl Document {
    /// The document's sentences ([`split_sentences`] of each paragraph) as token ids: the
    /// input of [`super::examples::pack_document`].
    pub fn sentence_ids(&self, tokenizer: &WordPieceTokenizer) -> Vec<Vec<u32>> {
        // Lines in parallel (a corpus without blank lines is one long document); rayon's
        // collect keeps their order, so the ids do not depend on the thread count.
        let per_line: Vec<Vec<Vec<u32>>> = self
            .lines
            .par_iter()
            .map(|l| {
                split_sentences(l)
                    .into_iter()
                    .map(|s| tokenizer.encode(s))
                    .collect()
            })
            .collect();
        per_line.into_iter().flatten().collect()
    }
}

/// The suffixes of corpus files (any case), each also gzipped (`.gz`).
pub const CORPUS_SUFFIXES: [&str; 5] = ["txt", "text", "raw", "tokens", "jsonl"];

/// Whether `path` names a corpus file by its suffix (case-insensitive, `.gz` allowed).
pub fn is_corpus_file(path: &Path) -> bool {
    let (stem, _) = suffixes(path);
    let ext = stem.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    CORPUS_SUFFIXES.contains(&ext)
}

/// The lower-case file name without a `.gz` suffix, and whether it had one.
fn suffixes(path: &Path) -> (String, bool) {
    let name = path
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .to_lowercase();
    match name.strip_suffix(".gz") {
        Some(s) => (s.to_string(), true),
        None => (name, false),
    }
}

/// Expands directories (recursively, sorted by path) into the corpus files they hold (by
/// suffix, [`CORPUS_SUFFIXES`]); a file named on its own is read whatever its name. Returns
/// the files and one note per file of a directory that was skipped. A missing path is an error
/// naming it.
pub fn list_inputs(inputs: &[PathBuf]) -> Result<(Vec<PathBuf>, Vec<String>)> {
    let (mut out, mut notes) = (Vec::new(), Vec::new());
    for p in inputs {
        if p.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| Error::io(p, e))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    !p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with('.'))
                })
                .collect();
            entries.sort();
            for e in entries {
                if e.is_dir() {
                    let (more, more_notes) = list_inputs(std::slice::from_ref(&e))?;
                    out.extend(more);
                    notes.extend(more_notes);
                } else if is_corpus_file(&e) {
                    out.push(e);
                } else {
                    notes.push(format!(
                        "skipped {}: not a corpus file (.{}, each also .gz)",
                        e.display(),
                        CORPUS_SUFFIXES.join(", .")
                    ));
                }
            }
        } else if p.is_file() {
            out.push(p.clone());
        } else {
            return Err(Error::Input(format!(
                "{}: no such file or directory",
                p.display()
            )));
        }
    }
    Ok((out, notes))
}

fn open(path: &Path) -> Result<(Box<dyn Read + Send>, bool)> {
    let f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let (stem, gz) = suffixes(path);
    let reader: Box<dyn Read + Send> = if gz {
        Box::new(flate2::read::MultiGzDecoder::new(f))
    } else {
        Box::new(f)
    };
    Ok((reader, stem.ends_with(".jsonl")))
}

/// Reads all documents of one file. Errors name the file and line (invalid UTF-8, bad JSON, a
/// JSON line without a string `text` field).
pub fn read_documents(path: &Path) -> Result<Vec<Document>> {
    let (reader, jsonl) = open(path)?;
    let mut reader = BufReader::with_capacity(1 << 20, reader);
    let mut docs = Vec::new();
    let mut current = Document::default();
    let mut buf = Vec::new();
    let mut line_no = 0usize;
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .map_err(|e| Error::io(path, e))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        let line = std::str::from_utf8(&buf).map_err(|e| {
            Error::Input(format!(
                "{}:{line_no}: invalid UTF-8 ({e}); not a text file?",
                path.display()
            ))
        })?;
        if line.contains('\0') {
            return Err(Error::Input(format!(
                "{}:{line_no}: a NUL byte: not a text file",
                path.display()
            )));
        }
        let line = line.trim_end_matches(['\n', '\r']);
        if jsonl {
            if line.trim().is_empty() {
                continue;
            }
            let v: serde_json::Value = serde_json::from_str(line).map_err(|e| {
                Error::Input(format!("{}:{line_no}: invalid JSON ({e})", path.display()))
            })?;
            let text = v.get("text").and_then(|t| t.as_str()).ok_or_else(|| {
                Error::Input(format!(
                    "{}:{line_no}: no string field `text`",
                    path.display()
                ))
            })?;
            let lines: Vec<String> = text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(String::from)
                .collect();
            if !lines.is_empty() {
                docs.push(Document { lines });
            }
        } else if line.trim().is_empty() {
            if !current.lines.is_empty() {
                docs.push(std::mem::take(&mut current));
            }
        } else {
            current.lines.push(line.trim().to_string());
        }
    }
    if !current.lines.is_empty() {
        docs.push(current);
    }
    Ok(docs)
}
