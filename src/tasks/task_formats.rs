//! Fine-tuning files of the tasks behind the contrast sets, in their official formats:
//! - the counterfactually-augmented data (Kaushik et al. 2020): quoted TSV with a header,
//!   sentiment `Sentiment\tText` or NLI `sentence1\tsentence2\tgold_label`;
//! - BoolQ (Clark et al. 2019): JSONL, one `{"question", "passage", "answer": bool, "title"}`
//!   per line (`train.jsonl`, `dev.jsonl`);
//! - PERSPECTRUM (Chen et al. 2019): `perspectrum_with_answers_v1.0.json` (claims, each with
//!   perspective clusters `pids` and `stance_label_3` support / undermine / not-a-perspective),
//!   `perspective_pool_v1.0.json` (`pId`, `text`) and `dataset_split_v1.0.json` (claim id →
//!   train / dev / test). Every (claim, perspective) pair of a supporting or undermining
//!   cluster is one example, labelled pos / neg like the contrast set.

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;

use crate::tasks::contrast::{check_label, rows, tsv_reader};
use crate::tasks::examples::{GlueExample, Label};
use crate::{Error, Result};

/// A file of a counterfactually-augmented task (quoted TSV with a header) as fine-tuning
/// examples: text A[, text B] and the label from `columns`; every row must carry one of
/// `labels`.
pub fn read_cad_examples(
    path: &Path,
    columns: &[&str],
    labels: &[&str],
) -> Result<Vec<GlueExample>> {
    rows(path, tsv_reader(path)?, columns)?
        .into_iter()
        .map(|(line, f)| {
            let label = f.last().expect("a label column");
            check_label(path, line, label, labels)?;
            Ok(GlueExample {
                id: line.to_string(),
                text_a: f[0].clone(),
                text_b: (f.len() == 3).then(|| f[1].clone()),
                label: labels.iter().position(|l| l == label).map(Label::Class),
            })
        })
        .collect()
}

#[derive(Deserialize)]
struct BoolqRow {
    question: String,
    passage: String,
    answer: Option<bool>,
}

/// A BoolQ JSONL file (labels optional, as in a test file).
pub fn read_boolq(path: &Path) -> Result<Vec<GlueExample>> {
    let text = super::read_data_text(path)?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            let r: BoolqRow = serde_json::from_str(l).map_err(|e| {
                Error::Input(format!(
                    "{}:{}: not a BoolQ row ({e})",
                    path.display(),
                    i + 1
                ))
            })?;
            Ok(GlueExample {
                id: (i + 1).to_string(),
                text_a: r.question,
                text_b: Some(r.passage),
                label: r.answer.map(|a| Label::Class(usize::from(a))),
            })
        })
        .collect()
}

#[derive(Deserialize)]
struct Claim {
    #[serde(rename = "cId")]
    id: u64,
    text: String,
    perspectives: Vec<Cluster>,
}

#[derive(Deserialize)]
struct Cluster {
    pids: Vec<u64>,
    stance_label_3: String,
}

#[derive(Deserialize)]
struct Perspective {
    #[serde(rename = "pId")]
    id: u64,
    text: String,
}

/// The examples of one PERSPECTRUM split: `split_path` is `<folder>/<split>` with the official
/// files in `<folder>`.
pub fn read_perspectrum(split_path: &Path) -> Result<Vec<GlueExample>> {
    let dir = split_path.parent().unwrap_or(Path::new("."));
    let split = split_path
        .file_name()
        .and_then(|s| s.to_str())
        .unwrap_or("");
    if !["train", "dev", "test"].contains(&split) {
        return Err(Error::Input(format!(
            "{}: a PERSPECTRUM split is <folder>/train, /dev or /test",
            split_path.display()
        )));
    }
    let claims_path = dir.join("perspectrum_with_answers_v1.0.json");
    let pool_path = dir.join("perspective_pool_v1.0.json");
    let claims: Vec<Claim> = crate::io::read_json(&claims_path)?;
    let pool: Vec<Perspective> = crate::io::read_json(&pool_path)?;
    let splits: HashMap<String, String> =
        crate::io::read_json(&dir.join("dataset_split_v1.0.json"))?;
    let pool: HashMap<u64, String> = pool.into_iter().map(|p| (p.id, p.text)).collect();
    let mut out = Vec::new();
    for (i, c) in claims.iter().enumerate() {
        if splits.get(&c.id.to_string()).map(String::as_str) != Some(split) {
            continue;
        }
        for (k, cluster) in c.perspectives.iter().enumerate() {
            let label = match cluster.stance_label_3.as_str() {
                "support" => 1,
                "undermine" => 0,
                "not-a-perspective" => continue,
                other => {
                    return Err(Error::Input(format!(
                        "{}: [{i}].perspectives[{k}]: unknown stance_label_3 {other:?} (expected support, undermine or not-a-perspective)",
                        claims_path.display()
                    )));
                }
            };
            for pid in &cluster.pids {
                let text = pool.get(pid).ok_or_else(|| {
                    Error::Input(format!(
                        "{}: [{i}].perspectives[{k}]: perspective {pid} is not in {}",
                        claims_path.display(),
                        pool_path.display()
                    ))
                })?;
                out.push(GlueExample {
                    id: format!("{}-{pid}", c.id),
                    text_a: c.text.clone(),
                    text_b: Some(text.clone()),
                    label: Some(Label::Class(label)),
                });
            }
        }
    }
    Ok(out)
}
