//! GLUE and SQuAD as the `datasets` library writes them: the Hub's Parquet layout, a folder per
//! task (`glue/rte/`, `squad/plain_text/`) holding each split as `<split>-NNNNN-of-NNNNN.parquet`
//! (`train`, `validation`; MNLI `validation_matched`, `validation_mismatched`).
//!
//! - GLUE's columns take the Hub's names (MNLI's `premise` and `hypothesis`), each row's id is
//!   its `idx`, and a class label is read by its name from the `ClassLabel` names that
//!   `datasets` records in the file's schema metadata (`huggingface`), so MNLI's order
//!   (entailment, neutral, contradiction) maps onto the task's own; tasks whose labels are 0 / 1
//!   keep the number. A label of −1 (the test splits) is no label.
//! - SQuAD's rows are `id`, `title`, `context`, `question` and `answers` (`text` and
//!   `answer_start` lists).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type};
use arrow_array::{Array, ListArray, RecordBatch};
use arrow_schema::DataType;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::hub_layout::{split_files, split_of};
use super::task::{GlueExample, GlueTask, Label, SquadExample};
use crate::{Error, Result};

/// A split's files given one of them: every shard of its split beside it.
fn shards_of(file: &Path) -> Vec<PathBuf> {
    let dir = file.parent().unwrap_or(Path::new("."));
    let all = split_files(dir, &split_of(file));
    if all.is_empty() {
        vec![file.to_path_buf()]
    } else {
        all
    }
}

/// The Hub's text columns of a GLUE task.
fn glue_columns(task: GlueTask) -> Result<(&'static str, Option<&'static str>)> {
    task.spec().hub_columns().ok_or_else(|| {
        Error::Input(format!(
            "{}: the Hub's Parquet layout is read for GLUE's tasks, not {}",
            task.dir_name(),
            task.dir_name()
        ))
    })
}

/// One Parquet file read whole: its record batches and the `ClassLabel` names `datasets`
/// recorded for its columns.
struct ParquetFile {
    batches: Vec<RecordBatch>,
    class_names: HashMap<String, Vec<String>>,
}

fn read_file(path: &Path) -> Result<ParquetFile> {
    super::check_held(path)?;
    let bad = |why: String| Error::Input(format!("{}: {why}", path.display()));
    crate::io::guard::decoding(|| -> Result<_> {
        let builder = ParquetRecordBatchReaderBuilder::try_new(crate::io::read::open(path)?)
            .map_err(|e| bad(format!("not a Parquet file ({e})")))?;
        let names = arrow_schema::Schema::metadata(builder.schema())
            .get("huggingface")
            .and_then(|m| serde_json::from_str::<serde_json::Value>(m).ok())
            .map(|v| class_names(&v["info"]["features"]))
            .unwrap_or_default();
        let reader = builder
            .build()
            .map_err(|e| bad(format!("unreadable ({e})")))?;
        let batches = reader
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| bad(format!("unreadable ({e})")))?;
        Ok(ParquetFile {
            batches,
            class_names: names,
        })
    })
    .map_err(bad)?
}

/// Each `ClassLabel` feature's names.
fn class_names(features: &serde_json::Value) -> HashMap<String, Vec<String>> {
    let mut out = HashMap::new();
    for (name, f) in features.as_object().into_iter().flatten() {
        if f["_type"] == "ClassLabel"
            && let Some(names) = f["names"].as_array()
        {
            out.insert(
                name.clone(),
                names
                    .iter()
                    .filter_map(|n| n.as_str().map(str::to_string))
                    .collect(),
            );
        }
    }
    out
}

/// A column of `batch` by name; the error lists the columns there are.
fn column<'a>(batch: &'a RecordBatch, name: &str, path: &Path) -> Result<&'a Arc<dyn Array>> {
    batch.column_by_name(name).ok_or_else(|| {
        let have: Vec<String> = batch
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        Error::Input(format!(
            "{}: no column `{name}` (it has {})",
            path.display(),
            have.join(", ")
        ))
    })
}

/// A string column's values (`None` for a null).
fn strings(col: &dyn Array, name: &str, path: &Path) -> Result<Vec<Option<String>>> {
    let get = |i: usize, v: &str| (!col.is_null(i)).then(|| v.to_string());
    match col.data_type() {
        DataType::Utf8 => Ok(col
            .as_string::<i32>()
            .iter()
            .enumerate()
            .map(|(i, v)| get(i, v.unwrap_or_default()))
            .collect()),
        DataType::LargeUtf8 => Ok(col
            .as_string::<i64>()
            .iter()
            .enumerate()
            .map(|(i, v)| get(i, v.unwrap_or_default()))
            .collect()),
        t => Err(Error::Input(format!(
            "{}: column `{name}` holds {t}, not text",
            path.display()
        ))),
    }
}

/// A numeric column's values as f64 (`None` for a null).
fn numbers(col: &dyn Array, name: &str, path: &Path) -> Result<Vec<Option<f64>>> {
    macro_rules! of {
        ($t:ty) => {
            col.as_primitive::<$t>()
                .iter()
                .map(|v| v.map(|x| x as f64))
                .collect()
        };
    }
    Ok(match col.data_type() {
        DataType::Int8 => of!(Int8Type),
        DataType::Int16 => of!(Int16Type),
        DataType::Int32 => of!(Int32Type),
        DataType::Int64 => of!(Int64Type),
        DataType::Float32 => of!(Float32Type),
        DataType::Float64 => of!(Float64Type),
        DataType::Boolean => col
            .as_boolean()
            .iter()
            .map(|v| v.map(|b| f64::from(u8::from(b))))
            .collect(),
        t => {
            return Err(Error::Input(format!(
                "{}: column `{name}` holds {t}, not a number",
                path.display()
            )));
        }
    })
}

/// How a file's label numbers map onto the task's classes: by name where the file names them
/// and the task's labels are names, else the number itself.
fn label_map(
    task: GlueTask,
    names: Option<&Vec<String>>,
    path: &Path,
) -> Result<Option<Vec<usize>>> {
    let ours = task.labels();
    let numbered = ours.iter().all(|l| l.parse::<usize>().is_ok());
    let Some(names) = names.filter(|_| !numbered && !task.is_regression()) else {
        return Ok(None);
    };
    names
        .iter()
        .map(|n| {
            ours.iter().position(|o| o == n).ok_or_else(|| {
                Error::Input(format!(
                    "{}: label `{n}` is none of {}'s ({})",
                    path.display(),
                    task.dir_name(),
                    ours.join(", ")
                ))
            })
        })
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

/// The examples of the split `file` belongs to (all its shards), in file order.
pub fn read_glue_parquet(task: GlueTask, file: &Path) -> Result<Vec<GlueExample>> {
    let (a_name, b_name) = glue_columns(task)?;
    let mut out = Vec::new();
    for path in shards_of(file) {
        let file = read_file(&path)?;
        let map = label_map(task, file.class_names.get("label"), &path)?;
        for batch in &file.batches {
            let a = strings(column(batch, a_name, &path)?, a_name, &path)?;
            let b = match b_name {
                Some(n) => Some(strings(column(batch, n, &path)?, n, &path)?),
                None => None,
            };
            let labels = match batch.column_by_name("label") {
                Some(c) => numbers(c, "label", &path)?,
                None => vec![None; batch.num_rows()],
            };
            let ids = match batch.column_by_name("idx") {
                Some(c) => numbers(c, "idx", &path)?,
                None => vec![None; batch.num_rows()],
            };
            for i in 0..batch.num_rows() {
                let label = match labels[i] {
                    None => None,
                    Some(v) if task.is_regression() => Some(Label::Score(v)),
                    Some(v) if v < 0.0 => None,
                    Some(v) => {
                        let c = v as usize;
                        let c = match &map {
                            Some(m) => *m.get(c).ok_or_else(|| {
                                Error::Input(format!(
                                    "{}: row {}: label {c} has no name among {}",
                                    path.display(),
                                    out.len() + 1,
                                    m.len()
                                ))
                            })?,
                            None => c,
                        };
                        Some(Label::Class(c))
                    }
                };
                out.push(GlueExample {
                    id: ids[i].map_or_else(|| out.len().to_string(), |x| (x as i64).to_string()),
                    text_a: a[i].clone().unwrap_or_default(),
                    text_b: b.as_ref().map(|b| b[i].clone().unwrap_or_default()),
                    label,
                });
            }
        }
    }
    Ok(out)
}

/// The SQuAD questions of the split `file` belongs to (all its shards).
pub fn read_squad_parquet(file: &Path) -> Result<Vec<SquadExample>> {
    let mut out = Vec::new();
    for path in shards_of(file) {
        for batch in &read_file(&path)?.batches {
            let text = |n: &str| -> Result<Vec<Option<String>>> {
                strings(column(batch, n, &path)?, n, &path)
            };
            let (ids, titles, contexts, questions) = (
                text("id")?,
                text("title")?,
                text("context")?,
                text("question")?,
            );
            let answers = column(batch, "answers", &path)?
                .as_struct_opt()
                .ok_or_else(|| {
                    Error::Input(format!(
                        "{}: column `answers` is not SQuAD's (text, answer_start)",
                        path.display()
                    ))
                })?;
            let list = |n: &str| -> Result<&ListArray> {
                answers
                    .column_by_name(n)
                    .and_then(|c| c.as_list_opt::<i32>())
                    .ok_or_else(|| {
                        Error::Input(format!(
                            "{}: column `answers` has no list `{n}`",
                            path.display()
                        ))
                    })
            };
            let (texts, starts) = (list("text")?, list("answer_start")?);
            for i in 0..batch.num_rows() {
                let t = strings(texts.value(i).as_ref(), "answers.text", &path)?;
                let s = numbers(starts.value(i).as_ref(), "answers.answer_start", &path)?;
                let context = contexts[i].clone().unwrap_or_default();
                let id = ids[i].clone().unwrap_or_default();
                let mut golds = Vec::new();
                for (t, s) in t.into_iter().zip(s) {
                    let (Some(t), Some(s)) = (t, s) else { continue };
                    // `answer_start` counts characters, as in the official JSON; the answer
                    // must stand there.
                    let at = context
                        .char_indices()
                        .map(|(b, _)| b)
                        .chain(std::iter::once(context.len()))
                        .nth(s as usize);
                    if !at.is_some_and(|b| context[b..].starts_with(&t)) {
                        return Err(Error::Input(format!(
                            "{}: question {id}: answer {t:?} is not at answer_start {s}",
                            path.display()
                        )));
                    }
                    golds.push((t, s as usize));
                }
                if golds.is_empty() {
                    return Err(Error::Input(format!(
                        "{}: question {id}: no answers (SQuAD v1.1 gives every question one or more)",
                        path.display()
                    )));
                }
                out.push(SquadExample {
                    title: titles[i].clone().unwrap_or_default(),
                    id,
                    question: questions[i].clone().unwrap_or_default(),
                    context,
                    answers: golds,
                });
            }
        }
    }
    Ok(out)
}
