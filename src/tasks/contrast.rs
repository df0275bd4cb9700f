//! Contrast sets (Gardner et al. 2020) and counterfactually-augmented data (Kaushik et al.
//! 2020): readers that group each original example with its minimally edited versions, and
//! the contrast consistency of a model's predictions.
//!
//! For groups g = (original, perturbations): **Ori** = accuracy on the originals, **Rev** =
//! accuracy on the perturbed examples, **Con** = share of groups whose original and every
//! perturbation are all predicted correctly (Wang et al. 2021, Table 4).
//!
//! Readers, each erroring with file:line on malformed input:
//! - [`read_cad_sentiment`]: `Sentiment\tText\tbatch_id` (`combined/paired/*_paired.tsv`),
//!   rows sharing a `batch_id` form a group, the first of them the original; labels
//!   Positive / Negative;
//! - [`read_cad_nli`]: SNLI revised by people, folders `original/`, `revised_premise/`,
//!   `revised_hypothesis/` with `sentence1\tsentence2\tgold_label`; row i of `original/X.tsv`
//!   is revised by rows 2i and 2i+1 of each revised file, whose unchanged sentence must equal
//!   the original's up to white space; a revision that changes nothing but the label is kept
//!   and reported;
//! - [`read_imdb_contrast`]: `<split>_original.tsv` and `<split>_contrast.tsv` (quoted TSV,
//!   `Sentiment\tText`), paired by row;
//! - [`read_boolq_contrast`]: the BoolQ JSON; the template item ("Title" / "Paragraph") and
//!   empty perturbations are skipped; labels TRUE / FALSE;
//! - [`read_perspectrum_contrast`]: the CSV; each row pairs (original claim, perspective) with
//!   (contrast claim, perspective); rows with an `unk` stance are dropped.

use crate::io::PathQuery;
use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// One labelled example of a contrast set, with where it was read.
#[derive(Clone, Debug, PartialEq)]
pub struct Example {
    pub text_a: String,
    pub text_b: Option<String>,
    pub label: String,
    /// `file:line` (or `file: item`) of the example.
    pub source: String,
}

/// An original example and its minimally edited versions.
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    pub original: Example,
    pub perturbed: Vec<Example>,
}

/// Contrast consistency of one model on one contrast set (in %).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Consistency {
    pub ori: f64,
    pub rev: f64,
    pub con: f64,
    pub groups: usize,
    pub perturbed: usize,
}

/// Ori / Rev / Con of `predict` (the predicted label of an example) over `groups`.
pub fn consistency(groups: &[Group], mut predict: impl FnMut(&Example) -> String) -> Consistency {
    let (mut ori, mut rev, mut con, mut n_rev) = (0usize, 0usize, 0usize, 0usize);
    for g in groups {
        let o = predict(&g.original) == g.original.label;
        let mut all = o;
        for p in &g.perturbed {
            let ok = predict(p) == p.label;
            rev += usize::from(ok);
            all &= ok;
        }
        n_rev += g.perturbed.len();
        ori += usize::from(o);
        con += usize::from(all);
    }
    let pct = |a: usize, n: usize| 100.0 * a as f64 / n.max(1) as f64;
    Consistency {
        ori: pct(ori, groups.len()),
        rev: pct(rev, n_rev),
        con: pct(con, groups.len()),
        groups: groups.len(),
        perturbed: n_rev,
    }
}

/// The kinds of contrast set [`read_contrast_set`] recognises.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SetKind {
    CadSentiment,
    CadNli,
    Imdb,
    Boolq,
    Perspectrum,
}

impl SetKind {
    /// The labels of the set's examples.
    pub fn labels(self) -> &'static [&'static str] {
        match self {
            Self::CadSentiment | Self::Imdb => &SENTIMENT,
            Self::CadNli => &NLI,
            Self::Boolq => &["TRUE", "FALSE"],
            Self::Perspectrum => &["pos", "neg"],
        }
    }
}

/// Reads a contrast set, its kind told by its layout: a `.tsv` with a `batch_id` column (the
/// counterfactual sentiment pairs), a folder with `original/` (the counterfactual NLI root; rows
/// of `split`), a folder with `<split>_original.tsv` (allenai's IMDb), a `.json` (BoolQ), a
/// `.csv` (PERSPECTRUM).
/// Besides the groups, what the reader noticed and kept (see [`read_cad_nli`]), one line each.
pub fn read_contrast_set(path: &Path, split: &str) -> Result<(SetKind, Vec<Group>, Vec<String>)> {
    if path.is_folder() && path.join("original").is_folder() {
        let (groups, notes) = read_cad_nli(path, split)?;
        return Ok((SetKind::CadNli, groups, notes));
    }
    let (kind, groups) = read_set(path, split)?;
    Ok((kind, groups, Vec::new()))
}

fn read_set(path: &Path, split: &str) -> Result<(SetKind, Vec<Group>)> {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    if path.is_folder() {
        if path.join(format!("{split}_original.tsv")).is_present() {
            return Ok((SetKind::Imdb, read_imdb_contrast(path, split)?));
        }
        if path
            .join("data")
            .join(format!("{split}_original.tsv"))
            .is_present()
        {
            return Ok((
                SetKind::Imdb,
                read_imdb_contrast(&path.join("data"), split)?,
            ));
        }
        return Err(Error::Input(format!(
            "{}: neither a counterfactual NLI root (original/, revised_premise/, revised_hypothesis/) nor an IMDb contrast folder ({split}_original.tsv, {split}_contrast.tsv)",
            path.display()
        )));
    }
    match ext {
        "tsv" => Ok((SetKind::CadSentiment, read_cad_sentiment(path)?)),
        "json" => Ok((SetKind::Boolq, read_boolq_contrast(path)?)),
        "csv" => Ok((SetKind::Perspectrum, read_perspectrum_contrast(path)?)),
        _ => Err(Error::Input(format!(
            "{}: not a contrast set (a paired .tsv, an NLI or IMDb folder, BoolQ .json, PERSPECTRUM .csv)",
            path.display()
        ))),
    }
}

/// The results as Wang et al. 2021's Table 4: one row per (model, set).
pub fn consistency_table(rows: &[(String, String, Consistency)]) -> String {
    let mut md =
        String::from("| model | set | Ori | Rev | Con | groups |\n|---|---|---|---|---|---|\n");
    for (model, set, c) in rows {
        md += &format!(
            "| {model} | {set} | {:.1} | {:.1} | {:.1} | {} |\n",
            c.ori, c.rev, c.con, c.groups
        );
    }
    md
}

pub(crate) fn tsv_reader(path: &Path) -> Result<csv::Reader<crate::io::File>> {
    let f = crate::io::read::open(path)?;
    Ok(csv::ReaderBuilder::new()
        .delimiter(b'\t')
        .flexible(true)
        .from_reader(f))
}

/// Rows of a delimited file with a header: (line, fields by column name).
pub(crate) fn rows(
    path: &Path,
    mut reader: csv::Reader<crate::io::File>,
    columns: &[&str],
) -> Result<Vec<(u64, Vec<String>)>> {
    let header = reader
        .headers()
        .map_err(|e| Error::Input(format!("{}:1: {e}", path.display())))?
        .clone();
    let idx: Vec<usize> = columns
        .iter()
        .map(|c| {
            header.iter().position(|h| h == *c).ok_or_else(|| {
                Error::Input(format!(
                    "{}:1: no column `{c}` in the header",
                    path.display()
                ))
            })
        })
        .collect::<Result<_>>()?;
    let mut out = Vec::new();
    for r in reader.records() {
        let r = r.map_err(|e| {
            let line = e.position().map(|p| p.line()).unwrap_or(0);
            Error::Input(format!("{}:{line}: {e}", path.display()))
        })?;
        let line = r.position().map(|p| p.line()).unwrap_or(0);
        if r.len() != header.len() {
            return Err(Error::Input(format!(
                "{}:{line}: {} columns, the header has {}",
                path.display(),
                r.len(),
                header.len()
            )));
        }
        out.push((line, idx.iter().map(|&i| r[i].to_string()).collect()));
    }
    Ok(out)
}

pub(crate) fn check_label(path: &Path, line: u64, label: &str, allowed: &[&str]) -> Result<()> {
    if allowed.contains(&label) {
        Ok(())
    } else {
        Err(Error::Input(format!(
            "{}:{line}: unknown label {label:?} (expected one of {allowed:?})",
            path.display()
        )))
    }
}

/// Sentiment labels of the IMDb-based sets.
pub const SENTIMENT: [&str; 2] = ["Negative", "Positive"];

/// The counterfactually-augmented sentiment data, paired by `batch_id`.
pub fn read_cad_sentiment(path: &Path) -> Result<Vec<Group>> {
    let mut groups: Vec<Group> = Vec::new();
    let mut by_batch: HashMap<String, usize> = HashMap::new();
    for (line, f) in rows(path, tsv_reader(path)?, &["Sentiment", "Text", "batch_id"])? {
        check_label(path, line, &f[0], &SENTIMENT)?;
        let ex = Example {
            text_a: f[1].clone(),
            text_b: None,
            label: f[0].clone(),
            source: format!("{}:{line}", path.display()),
        };
        match by_batch.get(&f[2]) {
            Some(&g) => groups[g].perturbed.push(ex),
            None => {
                by_batch.insert(f[2].clone(), groups.len());
                groups.push(Group {
                    original: ex,
                    perturbed: Vec::new(),
                });
            }
        }
    }
    if let Some(g) = groups.iter().find(|g| g.perturbed.is_empty()) {
        return Err(Error::Input(format!(
            "{}: batch of the original at line {} has no revision",
            path.display(),
            g.original.source.rsplit(':').next().unwrap_or("?")
        )));
    }
    Ok(groups)
}

/// allenai's IMDb contrast set of a split (`dev` or `test`): originals and contrasts by row.
pub fn read_imdb_contrast(dir: &Path, split: &str) -> Result<Vec<Group>> {
    let read = |name: String| -> Result<Vec<Example>> {
        let path = dir.join(name);
        rows(&path, tsv_reader(&path)?, &["Sentiment", "Text"])?
            .into_iter()
            .map(|(line, f)| {
                check_label(&path, line, &f[0], &SENTIMENT)?;
                Ok(Example {
                    text_a: f[1].clone(),
                    text_b: None,
                    label: f[0].clone(),
                    source: format!("{}:{line}", path.display()),
                })
            })
            .collect()
    };
    let orig = read(format!("{split}_original.tsv"))?;
    let contrast = read(format!("{split}_contrast.tsv"))?;
    if orig.len() != contrast.len() {
        return Err(Error::Input(format!(
            "{}: {} originals but {} contrast examples; the files pair by row",
            dir.join(format!("{split}_contrast.tsv")).display(),
            orig.len(),
            contrast.len()
        )));
    }
    Ok(orig
        .into_iter()
        .zip(contrast)
        .map(|(o, c)| Group {
            original: o,
            perturbed: vec![c],
        })
        .collect())
}

/// NLI labels of SNLI.
pub const NLI: [&str; 3] = ["contradiction", "entailment", "neutral"];

/// The NLI part of the counterfactually-augmented data for one split (`train`, `dev`,
/// `test`): each original pair with its four revisions (two of the premise, two of the
/// hypothesis).
pub fn read_cad_nli(root: &Path, split: &str) -> Result<(Vec<Group>, Vec<String>)> {
    let read = |folder: &str| -> Result<Vec<Example>> {
        let path = root.join(folder).join(format!("{split}.tsv"));
        rows(
            &path,
            tsv_reader(&path)?,
            &["sentence1", "sentence2", "gold_label"],
        )?
        .into_iter()
        .map(|(line, f)| {
            check_label(&path, line, &f[2], &NLI)?;
            Ok(Example {
                text_a: f[0].clone(),
                text_b: Some(f[1].clone()),
                label: f[2].clone(),
                source: format!("{}:{line}", path.display()),
            })
        })
        .collect()
    };
    let original = read("original")?;
    let premise = read("revised_premise")?;
    let hypothesis = read("revised_hypothesis")?;
    for (name, revised) in [
        ("revised_premise", &premise),
        ("revised_hypothesis", &hypothesis),
    ] {
        if revised.len() != 2 * original.len() {
            return Err(Error::Input(format!(
                "{}: {} rows, expected 2 per original ({} originals)",
                root.join(name).join(format!("{split}.tsv")).display(),
                revised.len(),
                original.len()
            )));
        }
    }
    let mut notes = Vec::new();
    let groups = original
        .into_iter()
        .enumerate()
        .map(|(i, o)| {
            let revisions = [
                &premise[2 * i],
                &premise[2 * i + 1],
                &hypothesis[2 * i],
                &hypothesis[2 * i + 1],
            ];
            for (k, r) in revisions.iter().enumerate() {
                // A revised premise keeps the hypothesis, a revised hypothesis the premise.
                let (kept, orig) = if k < 2 {
                    (r.text_b.as_deref(), o.text_b.as_deref())
                } else {
                    (Some(r.text_a.as_str()), Some(o.text_a.as_str()))
                };
                if kept.map(collapsed) != orig.map(collapsed) {
                    return Err(Error::Input(format!(
                        "{}: does not revise {} (its unchanged sentence differs)",
                        r.source, o.source
                    )));
                }
                if collapsed(&r.text_a) == collapsed(&o.text_a)
                    && r.text_b.as_deref().map(collapsed) == o.text_b.as_deref().map(collapsed)
                    && r.label != o.label
                {
                    notes.push(format!(
                        "{}: the same sentences as {} but labelled {} (the original: {}); kept, so this group cannot be all correct",
                        r.source, o.source, r.label, o.label
                    ));
                }
            }
            Ok(Group {
                perturbed: revisions.into_iter().cloned().collect(),
                original: o,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((groups, notes))
}

/// A sentence with every run of white space made one space, ends trimmed: real revision files
/// copy the unchanged sentence with a changed spacing (a double space) now and then.
fn collapsed(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[derive(Deserialize)]
struct BoolqFile {
    data: Vec<BoolqItem>,
}
#[derive(Deserialize)]
struct BoolqItem {
    title: String,
    paragraph: String,
    question: String,
    answer: String,
    #[serde(default)]
    perturbed_questions: Vec<BoolqPerturbed>,
}
#[derive(Deserialize)]
struct BoolqPerturbed {
    perturbed_q: String,
    answer: String,
}

/// The BoolQ contrast set: (question, passage) pairs labelled TRUE / FALSE.
pub fn read_boolq_contrast(path: &Path) -> Result<Vec<Group>> {
    let bytes = super::read_data_file(path)?;
    let f: BoolqFile = serde_json::from_slice(&bytes).map_err(|e| {
        Error::Input(format!(
            "{}: not the BoolQ contrast JSON ({e})",
            path.display()
        ))
    })?;
    let label = |a: &str, at: &str| -> Result<String> {
        match a.trim().to_uppercase().as_str() {
            "TRUE" => Ok("TRUE".into()),
            "FALSE" => Ok("FALSE".into()),
            _ => Err(Error::Input(format!(
                "{}: {at}: answer {a:?} is neither TRUE nor FALSE",
                path.display()
            ))),
        }
    };
    let mut out = Vec::new();
    for (i, item) in f.data.into_iter().enumerate() {
        if item.title == "Title" && item.paragraph == "Paragraph" {
            continue; // the annotation template
        }
        let at = format!("data[{i}]");
        let perturbed = item
            .perturbed_questions
            .iter()
            .enumerate()
            .filter(|(_, p)| !p.perturbed_q.trim().is_empty())
            .map(|(j, p)| {
                let at = format!("{at}.perturbed_questions[{j}]");
                Ok(Example {
                    text_a: p.perturbed_q.clone(),
                    text_b: Some(item.paragraph.clone()),
                    label: label(&p.answer, &at)?,
                    source: format!("{}: {at}", path.display()),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        if perturbed.is_empty() {
            continue;
        }
        out.push(Group {
            original: Example {
                text_a: item.question.clone(),
                text_b: Some(item.paragraph.clone()),
                label: label(&item.answer, &at)?,
                source: format!("{}: {at}", path.display()),
            },
            perturbed,
        });
    }
    Ok(out)
}

/// The PERSPECTRUM contrast set: (claim, perspective) pairs labelled by stance (`pos` / `neg`,
/// as in the file).
pub fn read_perspectrum_contrast(path: &Path) -> Result<Vec<Group>> {
    let f = crate::io::read::open(path)?;
    let reader = csv::ReaderBuilder::new().from_reader(f);
    let cols = [
        "original_claim",
        "contrast_claim",
        "perspective",
        "original_stance_label",
        "contrast_stance_label",
    ];
    let mut out = Vec::new();
    for (line, r) in rows(path, reader, &cols)? {
        if r[3] == "unk" || r[4] == "unk" {
            continue;
        }
        let ex = |claim: &str, stance: &str| Example {
            text_a: claim.to_string(),
            text_b: Some(r[2].clone()),
            label: stance.to_string(),
            source: format!("{}:{line}", path.display()),
        };
        out.push(Group {
            original: ex(&r[0], &r[3]),
            perturbed: vec![ex(&r[1], &r[4])],
        });
    }
    Ok(out)
}
