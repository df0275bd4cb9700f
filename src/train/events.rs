//! The run's TensorBoard event file: every `metrics.jsonl` field as a scalar at its step (tagged
//! as transformers' Trainer tags them: `train/loss`, `train/learning_rate`, `eval/loss`) and
//! the resolved config as text. On `--resume` the event files are written anew from the
//! (truncated) `metrics.jsonl` before the run goes on, so TensorBoard never sees a step twice.

use std::path::Path;

use super::metrics::{StepMetrics, read_metrics};
use crate::Result;
use crate::tensorboard::{EventWriter, event_files};

/// The TensorBoard tag of a `metrics.jsonl` field, in transformers' Trainer convention: the
/// held-out evaluation's `eval_x` as `eval/x`, the learning rate as `train/learning_rate`,
/// every other field as `train/<field>`.
pub fn tag(field: &str) -> String {
    match field.strip_prefix("eval_") {
        Some(x) => format!("eval/{x}"),
        None if field == "lr" => "train/learning_rate".into(),
        None => format!("train/{field}"),
    }
}

/// The scalars of one metrics line: each numeric field under its [`tag`], a vector's entries
/// as `<tag>/i`.
pub fn scalars(m: &StepMetrics) -> Vec<(String, f64)> {
    let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(m) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (k, v) in fields {
        if k == "step" {
            continue;
        }
        match v {
            serde_json::Value::Number(n) => out.extend(n.as_f64().map(|x| (tag(&k), x))),
            serde_json::Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    out.extend(x.as_f64().map(|x| (format!("{}/{i}", tag(&k)), x)));
                }
            }
            _ => {}
        }
    }
    out
}

/// The run's event file, new, its text tab holding the run's `config.toml` (`config_toml`):
/// with `resume`, earlier event files are replaced by one written
/// from the run's `metrics.jsonl`.
pub fn open(run: &Path, resume: bool, config_toml: &str) -> Result<EventWriter> {
    if resume {
        for f in event_files(run)? {
            crate::io::write::remove_file(&f)?;
        }
    }
    let mut w = EventWriter::create(run)?;
    let config = format!("```toml\n{config_toml}\n```");
    w.text(0, "config", &config)?;
    if resume {
        for m in read_metrics(run) {
            w.scalars(m.step, &scalars(&m))?;
        }
    }
    Ok(w)
}
