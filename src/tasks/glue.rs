//! GLUE readers for the files as GLUE ships them: CoLA (no header), SST-2, MRPC (UTF-8
//! byte-order mark), STS-B, QQP, MNLI (matched / mismatched dev), QNLI, RTE, all tab-separated
//! without quoting. Malformed rows are errors naming the file and line.

use std::path::{Path, PathBuf};

use crate::{Error, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GlueTask {
    Cola,
    Sst2,
    Mrpc,
    Stsb,
    Qqp,
    Mnli,
    Qnli,
    Rte,
    /// Counterfactually-augmented IMDb sentiment (Kaushik et al. 2020): `Sentiment\tText`,
    /// quoted TSV, labels Negative / Positive (the `orig`, `new` or `combined` folder).
    #[serde(rename = "cad-sentiment")]
    CadSentiment,
    /// Counterfactually-augmented SNLI: `sentence1\tsentence2\tgold_label` (one of the folders
    /// `original/`, `revised_premise/`, …).
    #[serde(rename = "cad-nli")]
    CadNli,
    /// BoolQ (Clark et al. 2019) in its official JSONL: (question, passage) → FALSE / TRUE.
    Boolq,
    /// PERSPECTRUM stance (Chen et al. 2019) from its official JSON files: (claim, perspective)
    /// → neg (undermine) / pos (support).
    Perspectrum,
}

/// A label: a class index, or a real score (STS-B).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Label {
    Class(usize),
    Score(f64),
}

#[derive(Clone, Debug, PartialEq)]
pub struct GlueExample {
    /// The row's id in the file (`index` column, else the line number).
    pub id: String,
    pub text_a: String,
    pub text_b: Option<String>,
    pub label: Option<Label>,
}

impl GlueTask {
    pub const ALL: [GlueTask; 8] = [
        Self::Cola,
        Self::Sst2,
        Self::Mrpc,
        Self::Stsb,
        Self::Qqp,
        Self::Mnli,
        Self::Qnli,
        Self::Rte,
    ];

    pub fn parse(name: &str) -> Option<Self> {
        Some(match name.to_lowercase().replace('-', "").as_str() {
            "cola" => Self::Cola,
            "sst2" => Self::Sst2,
            "mrpc" => Self::Mrpc,
            "stsb" => Self::Stsb,
            "qqp" => Self::Qqp,
            "mnli" => Self::Mnli,
            "qnli" => Self::Qnli,
            "rte" => Self::Rte,
            "cadsentiment" => Self::CadSentiment,
            "cadnli" => Self::CadNli,
            "boolq" => Self::Boolq,
            "perspectrum" => Self::Perspectrum,
            _ => return None,
        })
    }

    /// The folder name GLUE uses.
    pub fn dir_name(self) -> &'static str {
        match self {
            Self::Cola => "CoLA",
            Self::Sst2 => "SST-2",
            Self::Mrpc => "MRPC",
            Self::Stsb => "STS-B",
            Self::Qqp => "QQP",
            Self::Mnli => "MNLI",
            Self::Qnli => "QNLI",
            Self::Rte => "RTE",
            Self::CadSentiment => "CAD-sentiment",
            Self::CadNli => "CAD-NLI",
            Self::Boolq => "BoolQ",
            Self::Perspectrum => "PERSPECTRUM",
        }
    }

    /// Label names in class-index order (empty for the regression task).
    pub fn labels(self) -> &'static [&'static str] {
        match self {
            Self::Stsb => &[],
            Self::Mnli | Self::CadNli => &["contradiction", "entailment", "neutral"],
            Self::CadSentiment => &super::contrast::SENTIMENT,
            Self::Boolq => &["FALSE", "TRUE"],
            Self::Perspectrum => &["neg", "pos"],
            Self::Qnli | Self::Rte => &["entailment", "not_entailment"],
            _ => &["0", "1"],
        }
    }

    pub fn num_labels(self) -> usize {
        self.labels().len().max(1)
    }

    pub fn is_regression(self) -> bool {
        self == Self::Stsb
    }

    /// The training file in the task's folder. PERSPECTRUM's splits are named as
    /// `<folder>/train`, `<folder>/dev` (the claims of that split in the official files).
    pub fn train_file(self, dir: &Path) -> PathBuf {
        match self {
            Self::Boolq => dir.join("train.jsonl"),
            Self::Perspectrum => dir.join("train"),
            _ => dir.join("train.tsv"),
        }
    }

    /// The dev files: MNLI has matched and mismatched.
    pub fn dev_files(self, dir: &Path) -> Vec<PathBuf> {
        match self {
            Self::Mnli => vec![dir.join("dev_matched.tsv"), dir.join("dev_mismatched.tsv")],
            Self::Boolq => vec![dir.join("dev.jsonl")],
            Self::Perspectrum => vec![dir.join("dev")],
            _ => vec![dir.join("dev.tsv")],
        }
    }

    /// GLUE's own tab-separated tasks (the others have readers of their own formats).
    pub fn is_glue(self) -> bool {
        !matches!(
            self,
            Self::CadSentiment | Self::CadNli | Self::Boolq | Self::Perspectrum
        )
    }

    /// Number of epochs in ELECTRA's recipe (10 for the small RTE and STS-B, else 3).
    pub fn default_epochs(self) -> usize {
        if matches!(self, Self::Rte | Self::Stsb) {
            10
        } else {
            3
        }
    }

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

/// Reads one GLUE file. Labels are optional (GLUE's test files have none).
pub fn read_glue(task: GlueTask, path: &Path) -> Result<Vec<GlueExample>> {
    match task {
        GlueTask::CadSentiment | GlueTask::CadNli => {
            return super::task_formats::read_cad_examples(task, path);
        }
        GlueTask::Boolq => return super::task_formats::read_boolq(path),
        GlueTask::Perspectrum => return super::task_formats::read_perspectrum(path),
        _ => {}
    }
    let bytes = crate::error::read(path)?;
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
    let ia = find(ca)?.ok_or_else(|| {
        Error::Input(format!(
            "{}:1: no column `{}` in the header",
            path.display(),
            col_name(ca)
        ))
    })?;
    let ib = match cb {
        Some(c) => Some(find(c)?.ok_or_else(|| {
            Error::Input(format!(
                "{}:1: no column `{}` in the header",
                path.display(),
                col_name(c)
            ))
        })?),
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
            Some(v) if task.is_regression() => {
                Some(Label::Score(v.trim().parse::<f64>().map_err(|_| {
                    Error::Input(format!(
                        "{}:{n}: label {v:?} is not a number",
                        path.display()
                    ))
                })?))
            }
            Some(v) => Some(Label::Class(
                task.labels()
                    .iter()
                    .position(|l| *l == v.trim())
                    .ok_or_else(|| {
                        Error::Input(format!(
                            "{}:{n}: unknown label {v:?} (expected one of {:?})",
                            path.display(),
                            task.labels()
                        ))
                    })?,
            )),
        };
        let id = iid
            .and_then(|i| f.get(i))
            .map(|s| s.to_string())
            .unwrap_or_else(|| n.to_string());
        out.push(GlueExample {
            id,
            text_a,
            text_b,
            label,
        });
    }
    Ok(out)
}

fn col_name(c: Col) -> String {
    match c {
        Col::Name(n) => n.to_string(),
        Col::Pos(p) => format!("#{}", p + 1),
    }
}
