//! GLUE readers for the files as GLUE ships them: CoLA (no header), SST-2, MRPC (UTF-8
//! byte-order mark), STS-B, QQP, MNLI (matched / mismatched dev), QNLI, RTE, all tab-separated
//! without quoting. Malformed rows are errors naming the file and line.

use std::path::Path;

use crate::tasks::sentence::Col;
pub use crate::tasks::task::{GlueExample, GlueTask, Label};
use crate::{Error, Result};

/// The tasks whose columns a file with `header` has, as the end of an error line: "; this
/// header fits --task rte".
fn fitting_tasks(header: &[String]) -> String {
    let has = |c: Option<Col>| match c {
        None => true,
        Some(Col::Name(n)) => header.iter().any(|h| h == n),
        Some(Col::Pos(_)) => false,
    };
    let fits: Vec<String> = GlueTask::all()
        .filter(|t| {
            let c = t.spec().columns();
            has(Some(c.text_a)) && has(c.text_b) && has(Some(c.label))
        })
        .map(|t| format!("--task {}", t.name()))
        .collect();
    match fits.as_slice() {
        [] => String::new(),
        f => format!("; this header fits {}", f.join(" or ")),
    }
}

/// Whether the task's files start with a header line (all but CoLA).
pub fn has_header(task: GlueTask) -> bool {
    matches!(task.spec().columns().text_a, Col::Name(_))
}

/// Column indices of text A and text B in the rows of a file with this `header` line (`None`
/// for header-less CoLA); `None` when a column is missing.
pub fn text_columns(task: GlueTask, header: Option<&str>) -> Option<(usize, Option<usize>)> {
    let h: Vec<&str> = header.map(|h| h.split('\t').collect()).unwrap_or_default();
    let find = |c: Col| match c {
        Col::Pos(p) => Some(p),
        Col::Name(n) => h.iter().position(|x| *x == n),
    };
    let c = task.spec().columns();
    Some((
        find(c.text_a)?,
        match c.text_b {
            Some(c) => Some(find(c)?),
            None => None,
        },
    ))
}

/// Reads one GLUE file whole (after the memory check: training shuffles its rows each epoch).
/// Labels are optional (GLUE's test files have none). An example's id is its `index` (or `id`)
/// column; without one, rows are numbered as GLUE's submission files number them, 0 to N − 1
/// in file order.
pub fn read_glue(task: GlueTask, path: &Path) -> Result<Vec<GlueExample>> {
    if let Some(held) = read_other_format(task, path)? {
        return Ok(held);
    }
    super::check_held(path)?;
    let mut rows = GlueRows::open(task, path)?;
    let mut out = Vec::new();
    while let Some(e) = rows.next_row()? {
        out.push(e);
    }
    Ok(out)
}

/// A task file that is not GLUE's TSV (the contrast sets' CAD files, BoolQ's JSONL,
/// Perspectrum's), read whole by its own reader; `None` for GLUE's layout.
fn read_other_format(task: GlueTask, path: &Path) -> Result<Option<Vec<GlueExample>>> {
    if super::hub_layout::is_parquet(path) {
        return super::hub_parquet::read_glue_parquet(task, path).map(Some);
    }
    task.spec().read_own_format(path).transpose()
}

/// A task file's examples one at a time: GLUE's TSV streamed ([`GlueRows`]), the other
/// formats read whole by their readers (after the memory check) and handed out in order.
pub enum TaskRows {
    Streamed(Box<GlueRows>),
    Held(std::vec::IntoIter<GlueExample>),
}

impl TaskRows {
    pub fn open(task: GlueTask, path: &Path) -> Result<Self> {
        Ok(match read_other_format(task, path)? {
            Some(held) => Self::Held(held.into_iter()),
            None => Self::Streamed(Box::new(GlueRows::open(task, path)?)),
        })
    }

    /// The next example; `None` at the end of the file.
    pub fn next_row(&mut self) -> Result<Option<GlueExample>> {
        match self {
            Self::Streamed(rows) => rows.next_row(),
            Self::Held(rows) => Ok(rows.next()),
        }
    }

    /// Up to `n` examples; fewer only at the end of the file.
    pub fn next_rows(&mut self, n: usize) -> Result<Vec<GlueExample>> {
        let mut out = Vec::with_capacity(n.min(1 << 12));
        while out.len() < n {
            match self.next_row()? {
                Some(e) => out.push(e),
                None => break,
            }
        }
        Ok(out)
    }
}

/// The longest row a GLUE file may hold (GLUE's longest, in MNLI, is a few KiB).
const MAX_ROW: u64 = 4 << 20;

/// The rows of one GLUE TSV file, read one at a time in bounded memory (a dev or test file of
/// any length is evaluated without being held).
pub struct GlueRows {
    path: std::path::PathBuf,
    task: GlueTask,
    reader: std::io::BufReader<crate::io::File>,
    /// The line number of the last line read.
    line: usize,
    /// Rows read so far (the id of a row without an `index` column).
    rows: usize,
    columns: Columns,
}

/// Where a file's fields are: text A, text B, label and id, and how many columns a row has.
struct Columns {
    a: usize,
    b: Option<usize>,
    label: Option<usize>,
    id: Option<usize>,
    count: usize,
    header: bool,
}

impl GlueRows {
    /// Opens `path` through the door and reads its header (every GLUE file but CoLA's has one).
    pub fn open(task: GlueTask, path: &Path) -> Result<Self> {
        let file = crate::io::read::open(path)?;
        let mut rows = Self {
            path: path.to_path_buf(),
            task,
            reader: std::io::BufReader::with_capacity(1 << 16, file),
            line: 0,
            rows: 0,
            columns: Columns {
                a: 0,
                b: None,
                label: None,
                id: None,
                count: 4,
                header: false,
            },
        };
        rows.columns = rows.read_columns()?;
        Ok(rows)
    }

    /// The next line without its line ending; `None` at the end of the file. A line longer
    /// than [`MAX_ROW`] or not UTF-8 is an error naming the file and line.
    fn next_line(&mut self) -> Result<Option<String>> {
        use std::io::{BufRead, Read};
        let mut buf = Vec::new();
        let n = (&mut self.reader)
            .take(MAX_ROW + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| Error::io(&self.path, e))?;
        if n == 0 {
            return Ok(None);
        }
        self.line += 1;
        if buf.len() as u64 > MAX_ROW {
            return Err(Error::Input(format!(
                "{}:{}: a row longer than {}; is it the right file?",
                self.path.display(),
                self.line,
                crate::io::read::human(MAX_ROW)
            )));
        }
        if buf.last() == Some(&b'\n') {
            buf.pop();
        }
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
        let mut text = String::from_utf8(buf).map_err(|e| {
            Error::Input(format!(
                "{}:{}: invalid UTF-8 ({e})",
                self.path.display(),
                self.line
            ))
        })?;
        if self.line == 1 && text.starts_with('\u{feff}') {
            text.drain(..'\u{feff}'.len_utf8());
        }
        Ok(Some(text))
    }

    fn read_columns(&mut self) -> Result<Columns> {
        let c = self.task.spec().columns();
        let (ca, cb, cl) = (c.text_a, c.text_b, c.label);
        let header: Option<Vec<String>> = match ca {
            Col::Pos(_) => None,
            Col::Name(_) => Some(
                self.next_line()?
                    .map(|h| h.split('\t').map(str::to_string).collect())
                    .unwrap_or_default(),
            ),
        };
        let find = |c: Col| -> Option<usize> {
            match (c, &header) {
                (Col::Pos(p), _) => Some(p),
                (Col::Name(n), Some(h)) => h.iter().position(|x| x == n),
                (Col::Name(_), None) => None,
            }
        };
        let no_column = |c: Col| {
            let h = header.as_deref().unwrap_or_default();
            Error::Input(format!(
                "{}:1: no column `{}` in the header ({}), which --task {} reads{}",
                self.path.display(),
                col_name(c),
                h.join(", "),
                self.task.name(),
                fitting_tasks(h)
            ))
        };
        let a = find(ca).ok_or_else(|| no_column(ca))?;
        let b = match cb {
            Some(c) => Some(find(c).ok_or_else(|| no_column(c))?),
            None => None,
        };
        Ok(Columns {
            a,
            b,
            label: find(cl),
            id: header
                .as_ref()
                .and_then(|h| h.iter().position(|x| x == "index" || x == "id")),
            count: header.as_ref().map_or(4, |h| h.len()),
            header: header.is_some(),
        })
    }

    /// The next example; `None` at the end of the file. Empty lines are skipped.
    pub fn next_row(&mut self) -> Result<Option<GlueExample>> {
        loop {
            let Some(line) = self.next_line()? else {
                return Ok(None);
            };
            if !line.is_empty() {
                return self.parse(&line).map(Some);
            }
        }
    }

    fn parse(&mut self, line: &str) -> Result<GlueExample> {
        let (path, n, c) = (self.path.display(), self.line, &self.columns);
        let f: Vec<&str> = line.split('\t').collect();
        // Every row has the header's columns (CoLA, without a header: its four). A missing or
        // extra tab would shift the label into the text, or the text into the label.
        if f.len() != c.count {
            return Err(Error::Input(format!(
                "{path}:{n}: {} tab-separated columns, the {} has {}",
                f.len(),
                if c.header { "header" } else { "CoLA layout" },
                c.count
            )));
        }
        let label = match c.label.and_then(|i| f.get(i)) {
            None => None,
            Some(v) => Some(parse_label(self.task, v, &self.path, n)?),
        };
        let id =
            c.id.and_then(|i| f.get(i))
                .map(|s| s.to_string())
                .unwrap_or_else(|| self.rows.to_string());
        self.rows += 1;
        Ok(GlueExample {
            id,
            text_a: f[c.a].to_string(),
            text_b: c.b.map(|i| f[i].to_string()),
            label,
        })
    }
}

/// The range of STS-B's similarity scores.
pub const SCORE_RANGE: std::ops::RangeInclusive<f64> = 0.0..=5.0;

/// Row `n`'s label `v`: a score in [`SCORE_RANGE`] (STS-B) or one of the task's labels.
fn parse_label(task: GlueTask, v: &str, path: &Path, n: usize) -> Result<Label> {
    if task.is_regression() {
        let score = v.trim().parse::<f64>().ok().filter(|s| s.is_finite());
        return match score {
            Some(s) if SCORE_RANGE.contains(&s) => Ok(Label::Score(s)),
            Some(_) => Err(Error::Input(format!(
                "{}:{n}: label {v:?} out of range (similarity scores are 0 to 5)",
                path.display()
            ))),
            None => Err(Error::Input(format!(
                "{}:{n}: label {v:?} is not a finite number",
                path.display()
            ))),
        };
    }
    let class = task.labels().iter().position(|l| *l == v.trim());
    class.map(Label::Class).ok_or_else(|| {
        Error::Input(format!(
            "{}:{n}: unknown label {v:?} (expected one of {:?})",
            path.display(),
            task.labels()
        ))
    })
}

fn col_name(c: Col) -> String {
    match c {
        Col::Name(n) => n.to_string(),
        Col::Pos(p) => format!("#{}", p + 1),
    }
}
