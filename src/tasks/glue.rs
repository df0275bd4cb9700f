//! GLUE readers for the files as GLUE ships them: CoLA (no header), SST-2, MRPC (UTF-8
//! byte-order mark), STS-B, QQP, MNLI (matched / mismatched dev), QNLI, RTE, all tab-separated
//! without quoting. Malformed rows are errors naming the file and line.

use std::path::Path;

pub use crate::tasks::task::{GlueExample, GlueTask, Label};
use crate::{Error, Result};

impl GlueTask {
    /// Header columns (or positions for header-less CoLA) of text A, text B and the label.
    fn columns(self) -> (Col, Option<Col>, Col) {
        use Col::{Name, Pos};
        match self {
            Self::Cola => (Pos(3), None, Pos(1)),
            Self::Sst2 => (Name("sentence"), None, Name("label")),
            Self::Mrpc => (Name("#1 String"), Some(Name("#2 String")), Name("Quality")),
            Self::Stsb => (Name("sentence1"), Some(Name("sentence2")), Name("score")),
            Self::Qqp => (
                Name("question1"),
                Some(Name("question2")),
                Name("is_duplicate"),
            ),
            Self::Mnli => (
                Name("sentence1"),
                Some(Name("sentence2")),
                Name("gold_label"),
            ),
            Self::Qnli => (Name("question"), Some(Name("sentence")), Name("label")),
            Self::Rte => (Name("sentence1"), Some(Name("sentence2")), Name("label")),
            Self::CadSentiment => (Name("Text"), None, Name("Sentiment")),
            Self::CadNli => (
                Name("sentence1"),
                Some(Name("sentence2")),
                Name("gold_label"),
            ),
            Self::Boolq => (Name("question"), Some(Name("passage")), Name("answer")),
            Self::Perspectrum => (Name("claim"), Some(Name("perspective")), Name("stance")),
        }
    }
}

/// Whether the task's files start with a header line (all but CoLA).
pub fn has_header(task: GlueTask) -> bool {
    matches!(task.columns().0, Col::Name(_))
}

/// Column indices of text A and text B in the rows of a file with this `header` line (`None`
/// for header-less CoLA); `None` when a column is missing.
pub fn text_columns(task: GlueTask, header: Option<&str>) -> Option<(usize, Option<usize>)> {
    let h: Vec<&str> = header.map(|h| h.split('\t').collect()).unwrap_or_default();
    let find = |c: Col| match c {
        Col::Pos(p) => Some(p),
        Col::Name(n) => h.iter().position(|x| *x == n),
    };
    let (a, b, _) = task.columns();
    Some((
        find(a)?,
        match b {
            Some(c) => Some(find(c)?),
            None => None,
        },
    ))
}

#[derive(Clone, Copy)]
enum Col {
    Name(&'static str),
    Pos(usize),
}

/// Reads one GLUE file. Labels are optional (GLUE's test files have none). An example's id is
/// its `index` (or `id`) column; without one, rows are numbered as GLUE's submission files
/// number them, 0 to N − 1 in file order.
pub fn read_glue(task: GlueTask, path: &Path) -> Result<Vec<GlueExample>> {
    match task {
        GlueTask::CadSentiment | GlueTask::CadNli => {
            return crate::tasks::task_formats::read_cad_examples(task, path);
        }
        GlueTask::Boolq => return crate::tasks::task_formats::read_boolq(path),
        GlueTask::Perspectrum => return crate::tasks::task_formats::read_perspectrum(path),
        _ => {}
    }
    let bytes = super::read_data_file(path)?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|e| Error::Input(format!("{}: invalid UTF-8 ({e})", path.display())))?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text
        .split('\n')
        .enumerate()
        .map(|(i, l)| (i + 1, l.strip_suffix('\r').unwrap_or(l)));
    let (ca, cb, cl) = task.columns();
    let header: Option<Vec<&str>> = match ca {
        Col::Pos(_) => None,
        Col::Name(_) => Some(
            lines
                .next()
                .map(|(_, h)| h.split('\t').collect())
                .unwrap_or_default(),
        ),
    };
    let find = |c: Col| -> Result<Option<usize>> {
        Ok(match (c, &header) {
            (Col::Pos(p), _) => Some(p),
            (Col::Name(n), Some(h)) => h.iter().position(|x| *x == n),
            (Col::Name(_), None) => None,
        })
    };
    let no_column = |c: Col| {
        Error::Input(format!(
            "{}:1: no column `{}` in the header",
            path.display(),
            col_name(c)
        ))
    };
    let ia = find(ca)?.ok_or_else(|| no_column(ca))?;
    let ib = match cb {
        Some(c) => Some(find(c)?.ok_or_else(|| no_column(c))?),
        None => None,
    };
    let il = find(cl)?;
    let iid = header
        .as_ref()
        .and_then(|h| h.iter().position(|x| *x == "index" || *x == "id"));
    let mut out = Vec::new();
    for (n, line) in lines {
        if line.is_empty() {
            continue;
        }
        let row = out.len();
        let f: Vec<&str> = line.split('\t').collect();
        // Every row has the header's columns (CoLA, without a header: its four). A missing or
        // extra tab would shift the label into the text, or the text into the label.
        let expected = header.as_ref().map_or(4, |h| h.len());
        if f.len() != expected {
            return Err(Error::Input(format!(
                "{}:{n}: {} tab-separated columns, the {} has {expected}",
                path.display(),
                f.len(),
                if header.is_some() {
                    "header"
                } else {
                    "CoLA layout"
                }
            )));
        }
        let get = |i: usize, what: &str| -> Result<&str> {
            f.get(i).copied().ok_or_else(|| {
                Error::Input(format!(
                    "{}:{n}: {} columns, no {what} at column {}",
                    path.display(),
                    f.len(),
                    i + 1
                ))
            })
        };
        let text_a = get(ia, "text")?.to_string();
        let text_b = match ib {
            Some(i) => Some(get(i, "second text")?.to_string()),
            None => None,
        };
        let label = match il.and_then(|i| f.get(i)) {
            None => None,
            Some(v) => Some(parse_label(task, v, path, n)?),
        };
        let id = iid
            .and_then(|i| f.get(i))
            .map(|s| s.to_string())
            .unwrap_or_else(|| row.to_string());
        out.push(GlueExample {
            id,
            text_a,
            text_b,
            label,
        });
    }
    Ok(out)
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
