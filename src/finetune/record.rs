//! A fine-tuning seed's training record, written into its folder as it trains, as
//! pre-training's run folder is: `metrics.jsonl` (a line per logged step — `step`, `epoch`,
//! `loss`, `learning_rate`, `grad_norm` — and a line per evaluation — `eval_<metric>`,
//! `eval_score`, `eval_loss`), TensorBoard event files under transformers' Trainer tags (`train/loss`,
//! `train/learning_rate`, `eval/<metric>`), and at the end `loss.png` (the training loss and,
//! when the dev sets were scored during training, the task score over the steps).

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::scores::Scores;
use crate::Result;
use crate::plot::{Series, line_plot};
use crate::tensorboard::{EventWriter, event_files};
use crate::train::events::tag;

/// The files a record writes into a seed folder (and removes when a seed is trained anew).
pub const METRICS: &str = "metrics.jsonl";
pub const PLOT: &str = "loss.png";

/// One seed's record being written.
pub struct TrainingRecord {
    dir: PathBuf,
    metrics: crate::io::File,
    events: EventWriter,
}

/// One logged training step: its loss (the mean over the steps since the last line), the
/// learning rate and gradient norm of its update, and where it is in epochs.
pub struct StepLine {
    pub step: u64,
    pub epoch: f64,
    pub loss: f64,
    pub learning_rate: f64,
    pub grad_norm: f64,
}

impl TrainingRecord {
    /// A new record in `dir` (created): what an earlier, stopped training of the same seed
    /// left there is removed first, so the record holds one training only.
    pub fn create(dir: &Path, settings: &Value) -> Result<Self> {
        crate::io::write::folder(dir)?;
        crate::io::write::remove_file(&dir.join(METRICS))?;
        for f in event_files(dir)? {
            crate::io::write::remove_file(&f)?;
        }
        let metrics = crate::io::write::append(&dir.join(METRICS))?;
        let mut events = EventWriter::create(dir)?;
        let text = serde_json::to_string_pretty(settings).expect("json");
        events.text(0, "finetune", &format!("```json\n{text}\n```"))?;
        Ok(Self {
            dir: dir.to_path_buf(),
            metrics,
            events,
        })
    }

    fn line(&mut self, step: u64, fields: Map<String, Value>) -> Result<()> {
        let mut line = Map::new();
        line.insert("step".into(), json!(step));
        line.extend(fields.clone());
        let text = serde_json::to_string(&Value::Object(line)).expect("json") + "\n";
        let path = self.dir.join(METRICS);
        self.metrics
            .write_all(text.as_bytes())
            .map_err(|e| crate::Error::io(&path, e))?;
        let scalars: Vec<(String, f64)> = fields
            .iter()
            .filter_map(|(k, v)| Some((tag(k), v.as_f64()?)))
            .collect();
        self.events.scalars(step, &scalars)
    }

    /// Logs a training step.
    pub fn step(&mut self, s: &StepLine) -> Result<()> {
        let mut m = Map::new();
        m.insert("epoch".into(), json!(s.epoch));
        m.insert("loss".into(), json!(s.loss));
        m.insert("learning_rate".into(), json!(s.learning_rate));
        m.insert("grad_norm".into(), json!(s.grad_norm));
        self.line(s.step, m)
    }

    /// Logs an evaluation on the dev sets at `step`.
    pub fn eval(&mut self, step: u64, epoch: f64, scores: &Scores) -> Result<()> {
        let mut m = Map::new();
        m.insert("epoch".into(), json!(epoch));
        for (k, v) in &scores.metrics {
            m.insert(format!("eval_{k}"), json!(v));
        }
        m.insert("eval_score".into(), json!(scores.score));
        if let Some(loss) = scores.loss {
            m.insert("eval_loss".into(), json!(loss));
        }
        self.line(step, m)
    }

    /// Draws `loss.png` from the record.
    pub fn finish(self) -> Result<()> {
        plot(&self.dir)
    }
}

/// `loss.png` of a seed folder from its `metrics.jsonl`: the training loss over the steps, and
/// the dev task score (%) at each evaluation on the same axes' steps.
pub fn plot(dir: &Path) -> Result<()> {
    let text = crate::io::read::read_text(&dir.join(METRICS), crate::io::limit::SMALL)?;
    let (mut loss, mut score) = (Vec::new(), Vec::new());
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let Some(step) = v["step"].as_f64() else {
            continue;
        };
        if let Some(l) = v["loss"].as_f64() {
            loss.push((step, l));
        }
        if let Some(s) = v["eval_score"].as_f64() {
            score.push((step, s / 100.0));
        }
    }
    let mut series = vec![Series {
        name: "training loss".into(),
        points: loss,
        group: Some("loss".into()),
        colour: Some(0),
    }];
    if !score.is_empty() {
        series.push(Series {
            name: "dev task score / 100".into(),
            points: score,
            group: Some("score".into()),
            colour: Some(1),
        });
    }
    line_plot(
        &dir.join(PLOT),
        "Fine-tuning",
        "training step",
        "loss · score / 100",
        &series,
        false,
    )
}

/// How a seed's training went: its rate, the updates made, the update whose model was kept
/// (the last, or the best under `--keep best`) and whether early stopping ended it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SeedTrained {
    pub train_examples_per_s: f64,
    #[serde(default)]
    pub steps: u64,
    #[serde(default)]
    pub kept_step: u64,
    #[serde(default)]
    pub stopped_early: bool,
}
