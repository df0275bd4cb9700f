//! SQuAD v1.1 reader (the official JSON: data → paragraphs → qas, several gold answers each)
//! and its evaluation (EM / F1, max over gold answers, averaged over questions).

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;

use crate::tasks::metrics::{exact_match, max_over_golds, token_f1};
use crate::{Error, Result};

pub use super::task::SquadExample;

#[derive(Deserialize)]
struct File {
    data: Vec<Article>,
}
#[derive(Deserialize)]
struct Article {
    #[serde(default)]
    title: String,
    paragraphs: Vec<Paragraph>,
}
#[derive(Deserialize)]
struct Paragraph {
    context: String,
    qas: Vec<Qa>,
}
#[derive(Deserialize)]
struct Qa {
    id: String,
    question: String,
    #[serde(default)]
    answers: Vec<Answer>,
}
#[derive(Deserialize)]
struct Answer {
    text: String,
    answer_start: usize,
}

/// The questions of a SQuAD file: the official JSON, or a split of the Hub's Parquet layout
/// ([`super::hub_parquet`]).
pub fn read_squad(path: &Path) -> Result<Vec<SquadExample>> {
    if super::hub_layout::is_parquet(path) {
        return super::hub_parquet::read_squad_parquet(path);
    }
    let bytes = super::read_data_file(path)?;
    let f: File = serde_json::from_slice(&bytes)
        .map_err(|e| Error::Input(format!("{}: not SQuAD JSON ({e})", path.display())))?;
    let mut out = Vec::new();
    let mut ids = std::collections::HashMap::new();
    for (a, art) in f.data.into_iter().enumerate() {
        for (p, par) in art.paragraphs.into_iter().enumerate() {
            for qa in par.qas {
                let at = format!("data[{a}].paragraphs[{p}]");
                if let Some(first) = ids.insert(qa.id.clone(), at.clone()) {
                    return Err(Error::Input(format!(
                        "{}: {at}: question id {} is also at {first}; ids must be unique (predictions are keyed by id)",
                        path.display(),
                        qa.id
                    )));
                }
                if qa.answers.is_empty() {
                    return Err(Error::Input(format!(
                        "{}: {at} question {}: no answers (SQuAD v1.1 gives every question one or more; v2.0's unanswerable questions are not supported)",
                        path.display(),
                        qa.id
                    )));
                }
                let mut answers = Vec::new();
                for ans in qa.answers {
                    // `answer_start` counts characters, as in the official files.
                    let byte = par
                        .context
                        .char_indices()
                        .map(|(b, _)| b)
                        .chain(std::iter::once(par.context.len()))
                        .nth(ans.answer_start);
                    if !byte.is_some_and(|b| par.context[b..].starts_with(&ans.text)) {
                        return Err(Error::Input(format!(
                            "{}: data[{a}].paragraphs[{p}] question {}: answer {:?} is not at answer_start {}",
                            path.display(),
                            qa.id,
                            ans.text,
                            ans.answer_start
                        )));
                    }
                    let start = ans.answer_start;
                    answers.push((ans.text, start));
                }
                out.push(SquadExample {
                    title: art.title.clone(),
                    id: qa.id,
                    question: qa.question,
                    context: par.context.clone(),
                    answers,
                });
            }
        }
    }
    Ok(out)
}

/// Official-style evaluation: mean EM and F1 (in %) of `predictions` (id → answer text) over
/// `examples`; a question without a prediction scores 0.
pub fn evaluate_squad(
    examples: &[SquadExample],
    predictions: &HashMap<String, String>,
) -> (f64, f64) {
    let (mut em, mut f1) = (0.0, 0.0);
    for e in examples {
        let golds: Vec<String> = e.answers.iter().map(|(t, _)| t.clone()).collect();
        if let Some(p) = predictions.get(&e.id) {
            em += max_over_golds(exact_match, p, &golds);
            f1 += max_over_golds(token_f1, p, &golds);
        }
    }
    let n = examples.len().max(1) as f64;
    (100.0 * em / n, 100.0 * f1 / n)
}

/// The `.json` files of folder `dir`, in name order (SQuAD's files, or a split of them).
pub fn json_files(dir: &std::path::Path) -> crate::Result<Vec<std::path::PathBuf>> {
    Ok(crate::io::read::list(dir)?
        .into_iter()
        .filter(|p| crate::io::read::is_file(p) && p.extension().is_some_and(|x| x == "json"))
        .collect())
}
