//! What a part of the masked-LM step may do between two training steps, outside the recorded
//! work of a step: rebuild state of its own from the model as it is now (Hard Correction's
//! self-refreshed synonym table), and log what it did as a record.
//!
//! A record is a line of `metrics.jsonl` (`{"step": s, "record": name, …values}`, which the
//! step lines' readers skip), its numbers as TensorBoard scalars under `name/`, its text in
//! TensorBoard's text tab, and a note in the log.

use std::collections::BTreeMap;

use burn::prelude::*;

/// What a part is given between two steps.
pub struct Between<'a> {
    /// The step just done (1-based; on a resume, the step resumed from).
    pub done: u64,
    /// The model's token-embedding matrix as it is now, [vocab, dim], without gradient.
    pub words: &'a dyn Fn() -> Tensor<2>,
}

/// A record of something done between steps (see the module documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// Its name in `metrics.jsonl` (`record`) and its TensorBoard tags' prefix.
    pub name: &'static str,
    pub values: BTreeMap<String, serde_json::Value>,
    /// Markdown for TensorBoard's text tab, under the record's name.
    pub text: Option<String>,
    /// A line for the log.
    pub note: String,
    /// The note is a warning (logged as one, even where progress bars hide the log).
    pub warning: bool,
}

/// What the parts did between two steps.
#[derive(Default)]
pub struct BetweenSteps {
    pub records: Vec<Record>,
    /// A device tensor the step reads was replaced: a step recorded as a CUDA graph reads the
    /// old one and must be recorded anew.
    pub replaced_inputs: bool,
}

impl BetweenSteps {
    pub fn join(&mut self, other: BetweenSteps) {
        self.records.extend(other.records);
        self.replaced_inputs |= other.replaced_inputs;
    }
}

impl Record {
    /// Its `metrics.jsonl` line at step `step`.
    pub fn line(&self, step: u64) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        m.insert("step".into(), step.into());
        m.insert("record".into(), self.name.into());
        m.extend(self.values.clone());
        if let Some(t) = &self.text {
            m.insert("text".into(), t.clone().into());
        }
        serde_json::Value::Object(m)
    }
}
