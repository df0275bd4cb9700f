//! Reading a corpus: plain text (one paragraph per line, a blank line ends a document) or
//! `.jsonl` with a text field (`text` unless chosen, one document per line), either of them
//! gzipped, or the `datasets` library's Parquet and Arrow IPC files (one document per row of
//! the text column, [`super::columnar`]). A file is
//! read a batch of paragraphs at a time ([`CorpusReader`], [`for_each_batch`]), so that a
//! corpus of any size is read in bounded memory.

use rayon::prelude::*;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

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
            .map(|l| paragraph_ids(l, tokenizer))
            .collect();
        per_line.into_iter().flatten().collect()
    }
}

/// One paragraph's sentences ([`split_sentences`]) as token ids.
pub fn paragraph_ids(text: &str, tokenizer: &WordPieceTokenizer) -> Vec<Vec<u32>> {
    split_sentences(text)
        .into_iter()
        .map(|s| tokenizer.encode_text(s))
        .collect()
}

/// The suffixes of corpus files (any case); the text ones also gzipped (`.gz`).
pub const CORPUS_SUFFIXES: [&str; 8] = [
    "txt", "text", "raw", "tokens", "jsonl", "parquet", "arrow", "feather",
];

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
    let mut seen = std::collections::HashSet::new();
    list_into(inputs, &mut seen)
}

/// [`list_inputs`], skipping a folder already listed (a symbolic link back up the tree).
fn list_into(
    inputs: &[PathBuf],
    seen: &mut std::collections::HashSet<PathBuf>,
) -> Result<(Vec<PathBuf>, Vec<String>)> {
    let (mut out, mut notes) = (Vec::new(), Vec::new());
    for p in inputs {
        if crate::io::read::is_folder(p) {
            let real = crate::io::read::canonical(p)?;
            if !seen.insert(real.clone()) {
                notes.push(format!(
                    "skipped {}: the folder {} was read already (a link back up the tree?)",
                    p.display(),
                    real.display()
                ));
                continue;
            }
            let entries: Vec<PathBuf> = crate::io::read::list(p)?
                .into_iter()
                .filter(|p| {
                    !p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with('.'))
                })
                .collect();
            for e in entries {
                if crate::io::read::is_folder(&e) {
                    let (more, more_notes) = list_into(std::slice::from_ref(&e), seen)?;
                    out.extend(more);
                    notes.extend(more_notes);
                } else if is_corpus_file(&e) {
                    out.push(e);
                } else {
                    notes.push(format!(
                        "skipped {}: not a corpus file (.{}; the text ones also .gz)",
                        e.display(),
                        CORPUS_SUFFIXES.join(", .")
                    ));
                }
            }
        } else if crate::io::read::exists(p) {
            // A FIFO, a device or a dangling link is refused here, naming what it is.
            crate::io::read::regular_file(p)?;
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

/// Counts the bytes read through it (the file's bytes, before any decompression).
struct Counted<R> {
    inner: R,
    read: Arc<AtomicU64>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// One paragraph (a non-empty line, trimmed) and the number of its document in the file (from
/// 0, counting the documents that hold text).
#[derive(Clone, Debug, PartialEq)]
pub struct Paragraph {
    pub doc: u64,
    pub text: String,
}

/// A corpus file read a batch of paragraphs at a time, so that a file of any size is read in
/// bounded memory (a `.jsonl` document is one line: it is held whole). Errors name the file and
/// line (invalid UTF-8, a NUL byte, bad JSON, a JSON line without a string `text` field).
pub struct CorpusReader {
    path: PathBuf,
    reader: BufReader<Box<dyn Read + Send>>,
    jsonl: bool,
    /// A Parquet or Arrow IPC file's rows.
    columns: Option<super::columnar::ColumnReader>,
    /// The file's size (the progress of a columnar file is its share of the rows read).
    file_len: u64,
    /// The field of a `.jsonl` line (or the column) that holds its document.
    field: String,
    line_no: usize,
    /// Documents begun so far.
    docs: u64,
    in_doc: bool,
    read: Arc<AtomicU64>,
    buf: Vec<u8>,
    /// The rest of a text line cut at [`TEXT_PIECE`], read first by the next call.
    carry: Vec<u8>,
    /// The last piece read ended inside its line.
    mid_line: bool,
}

/// The longest piece of a text line handed on at once: a longer line (a file that is one line)
/// is cut at white space, so that the memory of tokenising it stays bounded whatever the line
/// length. Each piece is a paragraph of the same document.
const TEXT_PIECE: usize = 1 << 20;

/// The longest `.jsonl` line: a JSON document cannot be cut.
const JSON_LINE: usize = 256 << 20;

/// The field of a `.jsonl` line read as its document unless another is chosen.
pub const TEXT_FIELD: &str = "text";

impl CorpusReader {
    pub fn open(path: &Path) -> Result<Self> {
        Self::open_field(path, TEXT_FIELD)
    }

    /// A reader whose `.jsonl` documents are the string field `field` of each line.
    pub fn open_field(path: &Path, field: &str) -> Result<Self> {
        let read = Arc::new(AtomicU64::new(0));
        let f = Counted {
            inner: crate::io::read::open(path)?,
            read: read.clone(),
        };
        let (stem, gz) = suffixes(path);
        let columnar = super::columnar::is_columnar(&stem);
        if columnar && gz {
            return Err(Error::Input(format!(
                "{}: a gzipped Parquet / Arrow file; give it unzipped (its pages are compressed \
                 already)",
                path.display()
            )));
        }
        let columns = columnar
            .then(|| super::columnar::ColumnReader::open(path, field))
            .transpose()?;
        let file_len = crate::io::read::file_len(path)?;
        let inner: Box<dyn Read + Send> = if gz {
            Box::new(flate2::read::MultiGzDecoder::new(f))
        } else {
            Box::new(f)
        };
        Ok(Self {
            path: path.to_path_buf(),
            reader: BufReader::with_capacity(1 << 20, inner),
            jsonl: stem.ends_with(".jsonl"),
            columns,
            file_len,
            field: field.to_string(),
            line_no: 0,
            docs: 0,
            in_doc: false,
            read,
            buf: Vec::new(),
            carry: Vec::new(),
            mid_line: false,
        })
    }

    /// The documents begun so far (all of the file's once a batch came back empty).
    pub fn documents(&self) -> u64 {
        self.docs
    }

    /// Bytes of the file read so far (a columnar file: its share of the rows read, when its
    /// metadata counts them, else all of it once read).
    pub fn bytes_read(&self) -> u64 {
        match &self.columns {
            Some(c) => match c.total_rows {
                Some(total) if total > 0 => self.file_len * c.rows.min(total) / total,
                _ => 0,
            },
            None => self.read.load(Ordering::Relaxed),
        }
    }

    /// The next paragraphs, about `budget` bytes of text (at least one paragraph); empty at the
    /// end of the file.
    pub fn next_batch(&mut self, budget: usize) -> Result<Vec<Paragraph>> {
        let (mut out, mut bytes) = (Vec::new(), 0usize);
        if let Some(columns) = &mut self.columns {
            while bytes < budget.max(1) {
                let Some(text) = columns.next_document()? else {
                    if columns.total_rows.is_none() {
                        columns.total_rows = Some(columns.rows.max(1));
                    }
                    break;
                };
                bytes += text.len();
                let lines = text_lines(&text);
                let doc = self.docs;
                self.docs += u64::from(!lines.is_empty());
                out.extend(lines.into_iter().map(|text| Paragraph { doc, text }));
            }
            return Ok(out);
        }
        while bytes < budget.max(1) {
            let continued = self.mid_line;
            let Some(line) = self.next_line()? else {
                break;
            };
            if continued && line.trim().is_empty() {
                // White space inside a long line: no paragraph break.
                continue;
            }
            if self.jsonl {
                let before = out.len();
                out.extend(
                    json_text(&line, &self.field, &self.path, self.line_no)?.map(|text| {
                        Paragraph {
                            doc: self.docs,
                            text,
                        }
                    }),
                );
                self.docs += u64::from(out.len() > before);
                bytes += line.len();
            } else if line.trim().is_empty() {
                self.in_doc = false;
            } else {
                if !self.in_doc {
                    self.in_doc = true;
                    self.docs += 1;
                }
                bytes += line.len();
                // The line's own string when there is nothing to trim (the usual case).
                let text = match line.trim() {
                    t if t.len() == line.len() => line,
                    t => t.to_string(),
                };
                out.push(Paragraph {
                    doc: self.docs - 1,
                    text,
                });
            }
        }
        Ok(out)
    }

    /// Reads into `buf` up to the end of the line or `max` bytes; whether the line ended.
    fn read_piece(&mut self, max: usize) -> Result<bool> {
        loop {
            let avail = self
                .reader
                .fill_buf()
                .map_err(|e| Error::io(&self.path, e))?;
            if avail.is_empty() {
                return Ok(true);
            }
            let room = max.saturating_sub(self.buf.len());
            if room == 0 {
                return Ok(false);
            }
            let take = avail.len().min(room);
            let (n, ended) = match avail[..take].iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (take, false),
            };
            self.buf.extend_from_slice(&avail[..n]);
            self.reader.consume(n);
            if ended {
                return Ok(true);
            }
        }
    }

    /// The next line without its end of line, checked as text; a text line longer than
    /// [`TEXT_PIECE`] comes in pieces cut after the last white space at which the tokenizer
    /// splits ([`cut_point`]). A piece without one is read on until one comes, up to
    /// [`LONGEST_WORD`]; longer is refused.
    fn next_line(&mut self) -> Result<Option<String>> {
        self.buf.clear();
        self.buf.append(&mut self.carry);
        let max = if self.jsonl { JSON_LINE } else { TEXT_PIECE };
        let mut ended = self.read_piece(max)?;
        if self.buf.is_empty() {
            return Ok(None);
        }
        if !self.mid_line {
            self.line_no += 1;
        }
        if !ended && self.jsonl {
            return Err(Error::Input(format!(
                "{}:{}: a JSON line longer than {} MiB; one document a line is expected",
                self.path.display(),
                self.line_no,
                JSON_LINE >> 20
            )));
        }
        while !ended {
            if let Some(cut) = cut_point(&self.buf) {
                self.carry = self.buf.split_off(cut);
                break;
            }
            if self.buf.len() >= LONGEST_WORD {
                return Err(Error::Input(format!(
                    "{}:{}: {} MiB without a space, tab or line end: not natural text? (a line is cut for tokenising only where the tokenizer splits words)",
                    self.path.display(),
                    self.line_no,
                    LONGEST_WORD >> 20
                )));
            }
            ended = self.read_piece(self.buf.len() + TEXT_PIECE)?;
        }
        self.mid_line = !ended;
        let (path, line_no) = (self.path.display(), self.line_no);
        let line = std::str::from_utf8(&self.buf).map_err(|e| {
            Error::Input(format!(
                "{path}:{line_no}: invalid UTF-8 ({e}); not a text file?"
            ))
        })?;
        if line.contains('\0') {
            return Err(Error::Input(format!(
                "{path}:{line_no}: a NUL byte: not a text file"
            )));
        }
        Ok(Some(line.trim_end_matches(['\n', '\r']).to_string()))
    }
}

/// The longest run without a white space a text line may hold (the tokenizer reads such a run
/// as one word, which it makes `[UNK]` past 100 characters).
const LONGEST_WORD: usize = 16 << 20;

/// Where to cut a piece of a long line: after its last white space at which the tokenizer
/// splits words ([`super::chunk_memo::ends_chunk`]: never a form feed, which the tokenizer
/// removes and so joins the words beside it), so that the pieces tokenise as the line does.
/// None when the piece has no such white space (after its first byte). An incomplete UTF-8
/// character at the end is left to the next piece.
fn cut_point(buf: &[u8]) -> Option<usize> {
    let text = match std::str::from_utf8(buf) {
        Ok(t) => t,
        Err(e) => std::str::from_utf8(&buf[..e.valid_up_to()]).expect("valid up to there"),
    };
    text.char_indices()
        .rev()
        .find(|&(i, c)| i > 0 && super::chunk_memo::ends_chunk(c))
        .map(|(i, c)| i + c.len_utf8())
}

/// The non-empty lines (trimmed) of a `.jsonl` line's `text` field; none for a blank line.
fn json_text(
    line: &str,
    field: &str,
    path: &Path,
    line_no: usize,
) -> Result<impl Iterator<Item = String>> {
    let text = if line.trim().is_empty() {
        String::new()
    } else {
        let v: serde_json::Value = serde_json::from_str(line).map_err(|e| {
            Error::Input(format!("{}:{line_no}: invalid JSON ({e})", path.display()))
        })?;
        v.get(field)
            .and_then(|t| t.as_str())
            .ok_or_else(|| {
                Error::Input(format!(
                    "{}:{line_no}: no string field `{field}`{}",
                    path.display(),
                    if field == TEXT_FIELD {
                        " (choose the field with --text-field)"
                    } else {
                        ""
                    }
                ))
            })?
            .to_string()
    };
    Ok(text_lines(&text).into_iter())
}

/// The non-empty lines of a document's text (a JSONL or Parquet document), trimmed: its
/// paragraphs, a line longer than [`TEXT_PIECE`] cut into pieces as a text file's line is
/// (after the last white space at which the tokenizer splits; a piece without one runs on to
/// the next).
fn text_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let mut rest = line;
        while rest.len() > TEXT_PIECE {
            let mut end = TEXT_PIECE;
            while !rest.is_char_boundary(end) {
                end -= 1;
            }
            let cut = cut_point(&rest.as_bytes()[..end]).or_else(|| {
                rest[end..]
                    .char_indices()
                    .find(|&(_, c)| super::chunk_memo::ends_chunk(c))
                    .map(|(i, c)| end + i + c.len_utf8())
            });
            let Some(cut) = cut else {
                break;
            };
            let (piece, tail) = rest.split_at(cut);
            if !piece.trim().is_empty() {
                out.push(piece.trim().to_string());
            }
            rest = tail;
        }
        if !rest.trim().is_empty() {
            out.push(rest.trim().to_string());
        }
    }
    out
}

/// The documents of the text files `inputs` (files or folders of them) handed to `take` one at a
/// time, until it returns false: memory holds one document, a document longer than
/// `max_document_bytes` being handed over in pieces of about that size.
pub fn take_documents(
    inputs: &[PathBuf],
    max_document_bytes: usize,
    mut take: impl FnMut(Document) -> bool,
) -> Result<()> {
    let (files, _) = list_inputs(inputs)?;
    for file in files {
        let mut reader = CorpusReader::open(&file)?;
        let mut current: Option<(u64, Document, usize)> = None;
        loop {
            let batch = reader.next_batch(1 << 20)?;
            if batch.is_empty() {
                break;
            }
            for p in batch {
                let full = current
                    .as_ref()
                    .is_some_and(|(d, _, bytes)| *d != p.doc || *bytes >= max_document_bytes);
                if full
                    && let Some((_, doc, _)) = current.take()
                    && !take(doc)
                {
                    return Ok(());
                }
                let (_, doc, bytes) =
                    current.get_or_insert_with(|| (p.doc, Document::default(), 0));
                *bytes += p.text.len();
                doc.lines.push(p.text);
            }
        }
        if let Some((_, doc, _)) = current
            && !take(doc)
        {
            return Ok(());
        }
    }
    Ok(())
}

/// Reads all documents of one file (see [`CorpusReader`] for the errors).
pub fn read_documents(path: &Path) -> Result<Vec<Document>> {
    let mut reader = CorpusReader::open(path)?;
    let mut docs: Vec<Document> = Vec::new();
    loop {
        let batch = reader.next_batch(1 << 22)?;
        if batch.is_empty() {
            return Ok(docs);
        }
        for p in batch {
            if docs.len() as u64 == p.doc {
                docs.push(Document::default());
            }
            docs.last_mut().expect("a document").lines.push(p.text);
        }
    }
}

/// Bytes of text in a batch of [`for_each_batch`]: the bound on what a reader of the whole corpus
/// holds of it (two batches: one read ahead while the other is processed).
pub const BATCH_BYTES: usize = 8 << 20;

/// A batch of the corpus: paragraphs with their document's index in the whole corpus.
pub struct Batch {
    pub paragraphs: Vec<Paragraph>,
    /// Bytes of the input files read since the previous batch.
    pub file_bytes: u64,
}

/// Calls `each` on the corpus a batch of about [`BATCH_BYTES`] at a time, in reading order; the
/// next batch is read on another thread meanwhile.
/// `.jsonl` documents are the string field `field` of each line.
pub fn for_each_batch(
    files: &[PathBuf],
    field: &str,
    mut each: impl FnMut(Batch) -> Result<()>,
) -> Result<()> {
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Result<Batch>>(1);
        scope.spawn(move || {
            let mut first_doc = 0u64;
            for f in files {
                let mut reader = match CorpusReader::open_field(f, field) {
                    Ok(r) => r,
                    Err(e) => return drop(tx.send(Err(e))),
                };
                let mut seen = 0u64;
                loop {
                    let batch = reader.next_batch(BATCH_BYTES).map(|mut paragraphs| {
                        paragraphs.iter_mut().for_each(|p| p.doc += first_doc);
                        let read = reader.bytes_read();
                        let file_bytes = read - seen;
                        seen = read;
                        Batch {
                            file_bytes,
                            paragraphs,
                        }
                    });
                    let end = batch.as_ref().is_ok_and(|b| b.paragraphs.is_empty());
                    if end {
                        break;
                    }
                    let failed = batch.is_err();
                    if tx.send(batch).is_err() || failed {
                        return;
                    }
                }
                first_doc += reader.documents();
            }
        });
        rx.into_iter().try_for_each(|b| each(b?))
    })
}
