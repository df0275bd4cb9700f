//! The run's TensorBoard event file: every `metrics.jsonl` field as a scalar at its step (tagged
//! as transformers' Trainer tags them: `train/loss`, `train/learning_rate`, `eval/loss`) and
//! the resolved config as text; the records of what was done between steps as scalars and
//! text (`write_record`). On `--resume` the event files are written anew from the
//! (truncated) `metrics.jsonl` before the run goes on, so TensorBoard never sees a step twice.

use std::path::Path;

use super::metrics::StepMetrics;
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

/// Writes a record line of `metrics.jsonl` (`objective::Record::line`) as events at its step:
/// its numbers as scalars under `<record>/<field>` and its text under `<record>`.
pub fn write_record(w: &mut EventWriter, line: &serde_json::Value) -> Result<()> {
    let (Some(step), Some(name)) = (line["step"].as_u64(), line["record"].as_str()) else {
        return Ok(());
    };
    let Some(fields) = line.as_object() else {
        return Ok(());
    };
    let values: Vec<(String, f64)> = fields
        .iter()
        .filter(|(k, _)| k.as_str() != "step")
        .filter_map(|(k, v)| Some((format!("{name}/{k}"), v.as_f64()?)))
        .collect();
    if !values.is_empty() {
        w.scalars(step, &values)?;
    }
    match line["text"].as_str() {
        Some(text) => w.text(step, name, text),
        None => Ok(()),
    }
}

/// The lines of the run's `metrics.jsonl`, each checked to be a JSON line: a resumed run
/// rewrites its TensorBoard history from them, so a damaged history is refused (naming the
/// line) before anything is replaced.
pub fn history(run: &Path) -> Result<Vec<serde_json::Value>> {
    let path = run.join(super::start::METRICS);
    if !crate::io::read::exists(&path) {
        return Ok(Vec::new());
    }
    let bytes = crate::io::read::read(&path, crate::io::limit::DATA)?;
    let mut out = Vec::new();
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let value = std::str::from_utf8(line)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str(t).map_err(|e| e.to_string()))
            .map_err(|why| {
                crate::Error::Input(format!(
                    "{}:{}: not a JSON line ({why}); the run's history is rewritten from this file on --resume, so it must be whole: remove or mend the line (nothing was changed)",
                    path.display(),
                    i + 1
                ))
            })?;
        out.push(value);
    }
    Ok(out)
}

/// The run's event file, new, its text tab holding the run's `config.toml` (`config_toml`):
/// with `resume`, earlier event files are replaced by one written from the run's
/// `metrics.jsonl`, once that file has been read whole.
pub fn open(run: &Path, resume: bool, config_toml: &str) -> Result<EventWriter> {
    let (lines, earlier) = if resume {
        (history(run)?, event_files(run)?)
    } else {
        (Vec::new(), Vec::new())
    };
    let mut w = EventWriter::create(run)?;
    let config = format!("```toml\n{config_toml}\n```");
    w.text(0, "config", &config)?;
    for v in lines {
        if v.get("record").is_some() {
            write_record(&mut w, &v)?;
        } else if let Ok(m) = serde_json::from_value::<StepMetrics>(v) {
            w.scalars(m.step, &scalars(&m))?;
        }
    }
    for f in earlier {
        crate::io::write::remove_file(&f)?;
    }
    Ok(w)
}
