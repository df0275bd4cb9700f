//! Attacked copies of data sets on disk, and the paper's Table 6 layout of their scores.

use crate::io::PathQuery;
use std::path::{Path, PathBuf};

use crate::finetune::scores::Scores;
use crate::tasks::task::Task;
use crate::{Error, Result};

/// The paper's Table 6 layout: per metric, the original score → the score under attack, and
/// the drop.
pub fn attack_table(kind: &str, ori: &Scores, trans: &Scores) -> String {
    let mut md = String::from("| attack | metric | Ori → Trans | drop |\n|---|---|---:|---:|\n");
    for (k, o) in &ori.metrics {
        if let Some(t) = trans.metrics.get(k) {
            md += &format!("| {kind} | {k} | {o:.1} → {t:.1} | {:.1} |\n", o - t);
        }
    }
    md
}

/// The SQuAD files of folder `data`: `train-v1.1.json` and `dev-v1.1.json` where they are,
/// else every `.json` file in name order (a split such as `dev-half-a.json`).
fn squad_files(data: &Path) -> Result<Vec<PathBuf>> {
    let standard: Vec<PathBuf> = ["train-v1.1.json", "dev-v1.1.json"]
        .iter()
        .map(|n| data.join(n))
        .filter(|p| p.is_present())
        .collect();
    if !standard.is_empty() {
        return Ok(standard);
    }
    crate::tasks::squad::json_files(data)
}

/// Writes the transformed copy of a data set: a GLUE task folder (each of train / dev files
/// present) or a SQuAD JSON file (or a folder of them) → `out`, which must not exist yet.
pub fn write_attacked(
    kind: crate::attack::AttackKind,
    task: Task,
    data: &Path,
    out: &Path,
    wn: &crate::lexicon::wordnet::WordNet,
    seed: u64,
) -> Result<Vec<PathBuf>> {
    use crate::attack::{AttackKind, attack_glue_file, attack_squad, write_squad};
    if crate::io::lock::has_content(out) {
        return Err(Error::Input(format!(
            "{}: already holds files; nothing is overwritten",
            out.display()
        )));
    }
    let mut written = Vec::new();
    let mut files = Vec::new();
    match task.classification() {
        Some(t) => {
            if kind == AttackKind::AddSentDiverse {
                return Err(Error::Config(
                    "add-sent-diverse applies to SQuAD only; GLUE takes swap-syn-wordnet".into(),
                ));
            }
            if data.is_folder() {
                files.push(t.train_file(data));
                files.extend(t.dev_files(data));
                files.retain(|f| f.is_present());
            } else {
                files.push(data.to_path_buf());
            }
            if files.is_empty() {
                return Err(Error::Input(format!(
                    "{}: none of the task's files ({}); nothing was written",
                    data.display(),
                    t.train_file(Path::new("")).display()
                )));
            }
            let texts = files
                .iter()
                .map(|f| attack_glue_file(t, f, wn, seed))
                .collect::<Result<Vec<_>>>()?;
            for (f, text) in files.iter().zip(texts) {
                let dst = out.join(f.file_name().expect("file name"));
                crate::io::write_atomic(&dst, text.as_bytes())?;
                written.push(dst);
            }
        }
        None => {
            if data.is_folder() {
                files = squad_files(data)?;
            } else {
                files.push(data.to_path_buf());
            }
            if files.is_empty() {
                return Err(Error::Input(format!(
                    "{}: no SQuAD file (train-v1.1.json, dev-v1.1.json, or any .json file); nothing was written",
                    data.display()
                )));
            }
            for f in &files {
                let ex = crate::tasks::squad::read_squad(f)?;
                let t = attack_squad(kind, &ex, wn, seed);
                let dst = out.join(f.file_name().expect("file name"));
                write_squad(&dst, &t)?;
                written.push(dst);
            }
        }
    }
    Ok(written)
}
