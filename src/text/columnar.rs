//! The `datasets` library's own corpus files: Parquet (`Dataset.to_parquet`, the Hub's format;
//! snappy, zstd, lz4 or gzip pages) and Arrow IPC (its cache's `.arrow` files, stream or file
//! format). One document per row: the text of a chosen string column (`text` unless chosen),
//! read a record batch at a time.

use std::io::BufReader;
use std::path::{Path, PathBuf};

use arrow_array::cast::AsArray;
use arrow_array::{Array, RecordBatch};
use arrow_ipc::reader::{FileReader, StreamReader};
use arrow_schema::DataType;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::{Error, Result};

type Batches = Box<dyn Iterator<Item = std::result::Result<RecordBatch, String>> + Send>;

/// Rows per record batch read from a Parquet file.
const BATCH_ROWS: usize = 1024;

/// Whether `stem` (a lower-case file name) is a Parquet or Arrow IPC file.
pub fn is_columnar(stem: &str) -> bool {
    stem.ends_with(".parquet") || stem.ends_with(".arrow") || stem.ends_with(".feather")
}

/// The documents of one Parquet or Arrow IPC file, row by row.
/// A file just opened: its record batches, its rows when its metadata says, its columns.
struct Opened {
    batches: Batches,
    total_rows: Option<u64>,
    columns: Vec<String>,
}

pub struct ColumnReader {
    path: PathBuf,
    field: String,
    batches: Batches,
    /// The current batch's column and the next row in it.
    column: Option<(std::sync::Arc<dyn Array>, usize)>,
    /// Rows read so far, and the file's rows when its metadata says (Parquet).
    pub rows: u64,
    pub total_rows: Option<u64>,
}

impl ColumnReader {
    /// Opens `path` (Parquet by its `PAR1` magic, else Arrow IPC: file format by its `ARROW1`
    /// magic, else stream) for the string column `field`; errors name the file and the
    /// columns it has.
    pub fn open(path: &Path, field: &str) -> Result<Self> {
        let bad = |why: String| Error::Input(format!("{}: {why}", path.display()));
        let open = || crate::io::read::open(path);
        let magic = {
            let mut m = [0u8; 6];
            let n = std::io::Read::read(&mut open()?, &mut m).map_err(|e| Error::io(path, e))?;
            m[..n].to_vec()
        };
        let opened = crate::io::guard::decoding(|| -> Result<Opened> {
            Ok(if magic.starts_with(b"PAR1") {
                let b = ParquetRecordBatchReaderBuilder::try_new(open()?)
                    .map_err(|e| bad(format!("not a Parquet file ({e})")))?;
                let columns = names(b.schema());
                let at = columns.iter().position(|c| c == field);
                let parquet = ParquetRecordBatchReaderBuilder::metadata(&b);
                let rows = parquet.file_metadata().num_rows() as u64;
                let mask = ProjectionMask::columns(b.parquet_schema(), [field]);
                let reader = b
                    .with_projection(mask)
                    .with_batch_size(BATCH_ROWS)
                    .build()
                    .map_err(|e| bad(format!("unreadable ({e})")))?;
                let batches: Batches = Box::new(reader.map(|r| r.map_err(|e| e.to_string())));
                Opened {
                    batches,
                    total_rows: at.map(|_| rows),
                    columns,
                }
            } else if magic.starts_with(b"ARROW1") {
                let r = FileReader::try_new(open()?, None)
                    .map_err(|e| bad(format!("not an Arrow IPC file ({e})")))?;
                let columns = names(&r.schema());
                Opened {
                    batches: Box::new(r.map(|r| r.map_err(|e| e.to_string()))),
                    total_rows: None,
                    columns,
                }
            } else {
                let r = StreamReader::try_new(BufReader::new(open()?), None)
                    .map_err(|e| bad(format!("not an Arrow IPC stream ({e})")))?;
                let columns = names(&r.schema());
                Opened {
                    batches: Box::new(r.map(|r| r.map_err(|e| e.to_string()))),
                    total_rows: None,
                    columns,
                }
            })
        });
        let Opened {
            batches,
            total_rows,
            columns,
        } = opened.map_err(bad)??;
        if !columns.iter().any(|c| c == field) {
            return Err(bad(format!(
                "no column `{field}` (it has {}); choose one with --text-field",
                columns.join(", ")
            )));
        }
        Ok(Self {
            path: path.to_path_buf(),
            field: field.to_string(),
            batches,
            column: None,
            rows: 0,
            total_rows,
        })
    }

    /// The next row's text (`""` for a null), `None` after the last row.
    pub fn next_document(&mut self) -> Result<Option<String>> {
        loop {
            if let Some((col, row)) = &mut self.column
                && *row < col.len()
            {
                let i = *row;
                *row += 1;
                self.rows += 1;
                return Ok(Some(string_at(col.as_ref(), i).unwrap_or_default()));
            }
            let next = crate::io::guard::decoding(|| self.batches.next());
            let next =
                next.map_err(|why| Error::Input(format!("{}: {why}", self.path.display())))?;
            let Some(batch) = next else {
                return Ok(None);
            };
            let batch = batch.map_err(|e| {
                Error::Input(format!(
                    "{}: unreadable record batch ({e})",
                    self.path.display()
                ))
            })?;
            let col = batch.column_by_name(&self.field).cloned().ok_or_else(|| {
                Error::Input(format!(
                    "{}: a record batch without column `{}`",
                    self.path.display(),
                    self.field
                ))
            })?;
            if !matches!(
                col.data_type(),
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
            ) {
                return Err(Error::Input(format!(
                    "{}: column `{}` holds {}, not text",
                    self.path.display(),
                    self.field,
                    col.data_type()
                )));
            }
            // Offsets and bytes checked once per batch, so that reading its cells cannot
            // fail on damaged data.
            col.to_data().validate_full().map_err(|e| {
                Error::Input(format!(
                    "{}: damaged column `{}` ({e})",
                    self.path.display(),
                    self.field
                ))
            })?;
            self.column = Some((col, 0));
        }
    }
}

/// The column names of `schema`.
fn names(schema: &arrow_schema::Schema) -> Vec<String> {
    schema.fields().iter().map(|f| f.name().clone()).collect()
}

/// Row `i` of a string column (`None` when null).
fn string_at(col: &dyn Array, i: usize) -> Option<String> {
    if col.is_null(i) {
        return None;
    }
    if let Some(a) = col.as_string_opt::<i32>() {
        return Some(a.value(i).to_string());
    }
    if let Some(a) = col.as_string_opt::<i64>() {
        return Some(a.value(i).to_string());
    }
    col.as_string_view_opt().map(|a| a.value(i).to_string())
}
