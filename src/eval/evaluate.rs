//! `evaluate`: a fine-tuned model's predictions on dev files (scores when they hold gold labels,
//! GLUE submission files or SQuAD answers), and its contrast consistency on contrast sets.

use crate::io::PathQuery;
use std::path::{Path, PathBuf};

use crate::finetune::classify::{FineTuned, PREDICT_BATCH, Predicting, predict, predict_rows};
use crate::finetune::scores::{Scores, check_metric_defined, score_labels};
use crate::finetune::seeds::{squad_scores, write_predictions};
use crate::finetune::span::{load_qa, predict_squad};
use crate::io::outputs::Outputs;
use crate::tasks::glue::{GlueExample, GlueTask, Label, TaskRows};
use crate::{Error, Result};

/// What `evaluate` did with one dev file.
pub struct Evaluation {
    pub file: PathBuf,
    /// Scores when the file has gold labels / answers.
    pub scores: Option<Scores>,
    pub examples_per_s: f64,
    /// The predictions written (GLUE submission TSV or SQuAD `{id: answer}` JSON).
    pub written: PathBuf,
}

fn glue_files(task: GlueTask, data: &Path) -> Vec<PathBuf> {
    if data.is_folder() {
        task.dev_files(data)
    } else {
        vec![data.to_path_buf()]
    }
}

fn squad_file(data: &Path) -> PathBuf {
    if !data.is_folder() {
        return data.to_path_buf();
    }
    let data = crate::tasks::hub_layout::squad_folder(data);
    crate::tasks::hub_layout::split_files(&data, "validation")
        .into_iter()
        .next()
        .unwrap_or_else(|| data.join("dev-v1.1.json"))
}

/// The suffix of the files written under `attack`.
fn attack_tag(attack: Option<crate::attack::AttackKind>) -> String {
    attack.map(|k| format!("-{}", k.name())).unwrap_or_default()
}

/// The GLUE submission file for dev file `f`.
fn submission_file(out: &Path, task: GlueTask, f: &Path, tag: &str) -> PathBuf {
    let mm = crate::tasks::hub_layout::glue_stem(f) == "dev_mismatched";
    out.join(format!(
        "{}{}{tag}.tsv",
        task.dir_name(),
        if mm { "-mm" } else { "" }
    ))
}

/// The attacked copy of dev file `f`, written and read back.
fn attacked_file(out: &Path, f: &Path, tag: &str) -> PathBuf {
    out.join(format!(
        "{}{tag}.input.tsv",
        f.file_stem().and_then(|s| s.to_str()).unwrap_or("dev")
    ))
}

/// The files [`evaluate_model`] writes into `out` for `model` on `data` under `attack`: to be
/// checked ([`Outputs::check`]) before anything is written.
pub fn evaluation_files(
    model: &Path,
    data: &Path,
    out: &Path,
    attack: Option<crate::attack::AttackKind>,
) -> Result<Vec<PathBuf>> {
    let tag = attack_tag(attack);
    let Some(task) = crate::finetune::span::finetuned_task(model)?.classification() else {
        return Ok(vec![out.join(format!("predictions{tag}.json"))]);
    };
    let mut files = Vec::new();
    for f in glue_files(task, data) {
        if attack.is_some() {
            files.push(attacked_file(out, &f, &tag));
        }
        files.push(submission_file(out, task, &f, &tag));
    }
    Ok(files)
}

/// GLUE examples with predictions as rows of GLUE's submission format (`index\tprediction`,
/// after its header line).
fn submission_rows(task: GlueTask, ex: &[GlueExample], pred: &[f64]) -> String {
    let labels = task.labels();
    let mut tsv = String::new();
    for (e, p) in ex.iter().zip(pred) {
        let v = if task.is_regression() {
            format!("{:.3}", p.clamp(0.0, 5.0))
        } else {
            labels[*p as usize].to_string()
        };
        tsv += &format!("{}\t{v}\n", e.id);
    }
    tsv
}

/// Rows predicted and written at a time: the dev or test file is streamed, never held whole.
const ROWS_AT_A_TIME: usize = 4096;

/// One GLUE file's gold labels, read in a first pass (which also checks every row before the
/// model runs): whether it can be scored, and the labels to score with.
fn gold_labels(task: GlueTask, f: &Path) -> Result<Vec<Option<Label>>> {
    let mut rows = TaskRows::open(task, f)?;
    let mut labels = Vec::new();
    while let Some(e) = rows.next_row()? {
        labels.push(e.label);
    }
    if labels.is_empty() {
        return Err(Error::Input(format!("{}: no examples", f.display())));
    }
    if labels.iter().all(Option::is_some) {
        check_metric_defined(task, f, &labels)?;
    }
    Ok(labels)
}

/// Predicts GLUE file `f` a slice of rows at a time, writing `written` (the submission file)
/// as it goes; returns the predictions and examples/s.
fn predict_file(
    ft: &FineTuned,
    tok: &crate::text::WordPieceTokenizer,
    f: &Path,
    rows: usize,
    at: Predicting<'_>,
    written: &Path,
) -> Result<(Vec<f64>, f64)> {
    use std::io::Write;
    let start = std::time::Instant::now();
    let mut pred = Vec::with_capacity(rows);
    crate::io::write::produce(written, |tmp| {
        let mut out = std::io::BufWriter::new(crate::io::write::create_new(tmp)?);
        let io = |e| Error::io(tmp, e);
        out.write_all(b"index\tprediction\n").map_err(io)?;
        let mut source = TaskRows::open(ft.task, f)?;
        loop {
            let ex = source.next_rows(ROWS_AT_A_TIME)?;
            if ex.is_empty() {
                break;
            }
            let p = predict_rows(ft, tok, &ex, &at);
            out.write_all(submission_rows(ft.task, &ex, &p).as_bytes())
                .map_err(io)?;
            pred.extend(p);
        }
        out.flush().map_err(io)
    })?;
    at.bar.finish_and_clear();
    let rate = pred.len() as f64 / start.elapsed().as_secs_f64().max(1e-9);
    Ok((pred, rate))
}

/// An attack applied to the data before it is evaluated: its kind, the WordNet it draws
/// synonyms from and its seed.
#[derive(Clone, Copy)]
pub struct Attack<'a> {
    pub kind: crate::attack::AttackKind,
    pub wordnet: &'a crate::lexicon::wordnet::WordNet,
    pub seed: u64,
}

/// An evaluation: a fine-tuned model folder (`finetune`'s `seed-N`) on `data` (the task
/// folder's dev file(s), or one file), its predictions written into `out`. `attack`
/// transforms the data first. SQuAD: `max_eval` questions at most (0 = all). `device` names
/// the device ([`crate::device::device_for`]).
pub struct EvalRequest<'a> {
    pub model: &'a Path,
    pub data: &'a Path,
    pub out: &'a Path,
    pub attack: Option<Attack<'a>>,
    pub max_eval: usize,
    pub device: &'a str,
    pub progress: bool,
}

/// Runs the evaluation `req`, every file it writes owned through `outputs`.
pub fn evaluate_model(req: &EvalRequest, outputs: &Outputs) -> Result<Vec<Evaluation>> {
    use crate::attack::{attack_glue_file, attack_squad};
    let EvalRequest {
        model,
        data,
        out,
        attack,
        max_eval,
        device,
        progress,
    } = *req;
    let device = crate::device::device_for(device)?;
    crate::io::write::folder(out)?;
    let task = crate::finetune::span::finetuned_task(model)?;
    let kind = attack.map(|a| a.kind);
    let tag = attack_tag(kind);
    outputs.check(&evaluation_files(model, data, out, kind)?)?;
    if task == crate::tasks::task::Task::Squad {
        let (m, tok) = load_qa(model, &device)?;
        let file = squad_file(data);
        let mut dev = crate::tasks::squad::read_squad(&file)?;
        if max_eval > 0 {
            dev.truncate(max_eval);
        }
        if let Some(a) = attack {
            dev = attack_squad(a.kind, &dev, a.wordnet, a.seed);
        }
        let (answers, rate) = predict_squad(&m, &tok, &dev, &device, progress)?;
        let written = out.join(format!("predictions{tag}.json"));
        write_predictions(&written, &answers)?;
        outputs.record(&written)?;
        let has_gold = dev.iter().all(|e| !e.answers.is_empty());
        return Ok(vec![Evaluation {
            file,
            scores: has_gold.then(|| squad_scores(&dev, &answers)),
            examples_per_s: rate,
            written,
        }]);
    }
    let (ft, tok, max_len) = crate::finetune::transformers_folder::load_classifier(model, &device)?;
    if kind == Some(crate::attack::AttackKind::AddSentDiverse) {
        return Err(Error::Config(
            "add-sent-diverse applies to SQuAD only; GLUE takes swap-syn-wordnet".into(),
        ));
    }
    let mut results = Vec::new();
    for f in glue_files(ft.task, data) {
        let read = match attack {
            Some(a) => {
                let text = attack_glue_file(ft.task, &f, a.wordnet, a.seed)?;
                let tmp = attacked_file(out, &f, &tag);
                outputs.write(&tmp, text.as_bytes())?;
                tmp
            }
            None => f.clone(),
        };
        let labels = gold_labels(ft.task, &read)?;
        let bar = crate::finetune::recipe::progress_bar(
            labels.len() as u64,
            "evaluate {bar:30} {pos}/{len} {per_sec} eta {eta}",
            progress,
        );
        let at = Predicting {
            max_len,
            batch: PREDICT_BATCH,
            device: &device,
            bar: &bar,
            loss: None,
        };
        let written = submission_file(out, ft.task, &f, &tag);
        outputs.check(std::slice::from_ref(&written))?;
        let (pred, rate) = predict_file(&ft, &tok, &read, labels.len(), at, &written)?;
        outputs.record(&written)?;
        // A test file (no labels) gets predictions only.
        let scores = if labels.iter().all(Option::is_some) {
            Some(score_labels(ft.task, &f, &labels, &pred)?)
        } else {
            None
        };
        results.push(Evaluation {
            file: f,
            scores,
            examples_per_s: rate,
            written,
        });
    }
    Ok(results)
}

/// A fine-tuned model's label for each label of a contrast set: the same names (CAD-sentiment
/// on the sentiment sets, CAD-NLI or MNLI on the NLI set), or SST-2's 0 / 1 for Negative /
/// Positive.
fn label_map(task: GlueTask, kind: crate::tasks::contrast::SetKind) -> Result<Vec<String>> {
    let set = kind.labels();
    let model = task.labels();
    if set.iter().all(|l| model.contains(l)) {
        return Ok(model.iter().map(|s| s.to_string()).collect());
    }
    if task.spec().read_as() == Some(set) {
        return Ok(set.iter().map(|s| s.to_string()).collect());
    }
    Err(Error::Config(format!(
        "a model fine-tuned on {} predicts {model:?}; this contrast set is labelled {set:?}",
        task.dir_name()
    )))
}

/// One model on one contrast set: its scores, each example's prediction and what the reader
/// noticed in the files.
pub struct ContrastRun {
    pub kind: crate::tasks::contrast::SetKind,
    pub scores: crate::tasks::contrast::Consistency,
    /// One row per example: group number, `original` / `perturbed`, where it was read, gold
    /// and predicted label.
    pub predictions: Vec<ContrastPrediction>,
    pub notes: Vec<String>,
}

/// One example's prediction on a contrast set.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ContrastPrediction {
    pub group: usize,
    pub role: &'static str,
    pub source: String,
    pub label: String,
    pub predicted: String,
}

/// The contrast consistency (Ori / Rev / Con) of a fine-tuned model on a contrast set.
pub fn evaluate_contrast(
    model: &Path,
    set: &Path,
    split: &str,
    device: &str,
    progress: bool,
) -> Result<ContrastRun> {
    use crate::tasks::contrast::{consistency, read_contrast_set};
    let device = crate::device::device_for(device)?;
    let (kind, groups, notes) = read_contrast_set(set, split)?;
    if groups.is_empty() {
        return Err(Error::Input(format!("{}: no groups", set.display())));
    }
    let (ft, tok, max_len) = crate::finetune::transformers_folder::load_classifier(model, &device)?;
    let names = label_map(ft.task, kind)?;
    let examples: Vec<crate::tasks::glue::GlueExample> = groups
        .iter()
        .flat_map(|g| std::iter::once(&g.original).chain(&g.perturbed))
        .map(|e| crate::tasks::glue::GlueExample {
            id: e.source.clone(),
            text_a: e.text_a.clone(),
            text_b: e.text_b.clone(),
            label: None,
        })
        .collect();
    let pred = predict(&ft, &tok, &examples, max_len, &device, progress).values;
    let predicted: Vec<String> = pred.iter().map(|&p| names[p as usize].clone()).collect();
    let mut predictions = Vec::with_capacity(predicted.len());
    for (g, group) in groups.iter().enumerate() {
        let roles = std::iter::once(("original", &group.original))
            .chain(group.perturbed.iter().map(|p| ("perturbed", p)));
        for (role, e) in roles {
            predictions.push(ContrastPrediction {
                group: g,
                role,
                source: e.source.clone(),
                label: e.label.clone(),
                predicted: predicted[predictions.len()].clone(),
            });
        }
    }
    let mut it = predictions.iter();
    let scores = consistency(&groups, |_| {
        it.next()
            .expect("one prediction per example")
            .predicted
            .clone()
    });
    Ok(ContrastRun {
        kind,
        scores,
        predictions,
        notes,
    })
}
