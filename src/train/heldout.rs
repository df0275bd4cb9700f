//! Evaluation on held-out data during pre-training (`train.eval_every`, `data.eval_shards`).
//!
//! Every `eval_every` steps the model, without dropout, computes its objective's step on the
//! same held-out batches: the first `train.eval_batches` batches of `data.eval_shards` (a
//! folder `prepare` wrote with the run's tokenizer), masked and sampled with fixed seeds, so
//! that two evaluations differ only by the weights. Logged as `eval_` + each term of a training
//! line: `eval_loss`, `eval_mlm_loss`, `eval_mlm_accuracy`, ELECTRA's `eval_disc_loss` and
//! `eval_disc_accuracy`, the objective's own terms and Hard Correction's rates (Table 8's
//! figures) over the held-out positions.
//!
//! The training stream is untouched: the held-out batches are read once at the start, and
//! every training step seeds its own random draws, so a run's curve is the same with and
//! without evaluation.

use std::collections::BTreeMap;

use burn::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::config::{DataSection, TrainSection};
use super::model::PretrainModel;
use super::steps::TrainingStep;
use crate::objective::terms::{StepValues, combine, objectives};
use crate::text::shards::{Manifest, ShardSet};
use crate::{Error, Result};

/// The seed of the held-out masks and draws (any fixed number: the same every evaluation).
const EVAL_SEED: u64 = 0x5EED_E7A1;

/// The held-out micro-batches of a run's step, read and masked once.
pub struct HeldOut<B> {
    batches: Vec<B>,
    /// Steps between two evaluations (`train.eval_every`).
    every: u64,
}

impl<B> HeldOut<B> {
    /// The held-out batches of a run's `[train]` and `[data]` sections for its step `step`
    /// (`None` when `train.eval_every` is 0), checked against the training shards (`train`).
    pub fn open<S: TrainingStep<Batch = B>>(
        t: &TrainSection,
        d: &DataSection,
        train: &ShardSet,
        step: &S,
    ) -> Result<Option<Self>> {
        let (every, Some(dir)) = (t.eval_every, &d.eval_shards) else {
            return Ok(None);
        };
        if every == 0 {
            return Ok(None);
        }
        let shards = ShardSet::open(dir)?;
        if shards.manifest.tokenizer_fingerprint != train.manifest.tokenizer_fingerprint {
            return Err(Error::Config(format!(
                "field `data.eval_shards`: {} was prepared with another tokenizer than the \
                 training shards; prepare it with theirs (`prepare --tokenizer`)",
                dir.display()
            )));
        }
        if shards.holds() != train.holds() {
            return Err(Error::Config(format!(
                "field `data.eval_shards`: {} holds {}, the training shards {}",
                dir.display(),
                shards.holds().describe(),
                train.holds().describe()
            )));
        }
        let train = &train.manifest;
        check_held_out(&shards.manifest, train, dir)?;
        let size = d.batch_size;
        let n = (shards.len() / size).min(t.eval_batches);
        if n == 0 {
            return Err(Error::Config(format!(
                "field `data.eval_shards`: {} holds {} examples, fewer than one batch of {size}",
                dir.display(),
                shards.len()
            )));
        }
        let mut batches = Vec::with_capacity(n);
        for b in 0..n {
            let indices: Vec<usize> = (b * size..(b + 1) * size).collect();
            let mut rng = ChaCha8Rng::seed_from_u64(EVAL_SEED ^ b as u64);
            batches.push(step.batch(&shards, &indices, &mut rng)?);
        }
        Ok(Some(Self { batches, every }))
    }

    /// Whether the model is evaluated after step `done`.
    pub fn due(&self, done: u64) -> bool {
        done.is_multiple_of(self.every)
    }

    /// The held-out figures of `model` (on `device`, without autodiff), named `eval_…`.
    pub fn evaluate<S: TrainingStep<Batch = B>>(
        &self,
        model: &PretrainModel,
        step: &S,
        device: &Device,
    ) -> Result<BTreeMap<String, serde_json::Value>> {
        let mut total = StepValues::default();
        for (b, batch) in self.batches.iter().enumerate() {
            crate::model::seed(device, EVAL_SEED ^ ((b as u64) << 8));
            let loss = [step.loss(model, batch, device)];
            total.add(combine(&loss, &objectives(&loss)));
        }
        let mut out: BTreeMap<String, serde_json::Value> = total
            .logged_values()
            .into_iter()
            .chain(step.window_metrics(&total.counters))
            .map(|(k, v)| (format!("eval_{k}"), v))
            .collect();
        out.insert("eval_loss".into(), serde_json::json!(total.mean_loss()));
        Ok(out)
    }
}

/// A held-out loss means something only on other text cut as the training text is: refuses
/// evaluation shards that are the training shards (or a copy), share an input file with
/// them, or hold examples of another length.
fn check_held_out(eval: &Manifest, train: &Manifest, dir: &std::path::Path) -> Result<()> {
    let refuse = |why: String| {
        Err(Error::Config(format!(
            "field `data.eval_shards`: {} {why}",
            dir.display()
        )))
    };
    if eval.content_fingerprint() == train.content_fingerprint() {
        return refuse("holds the training shards themselves; a held-out loss needs text the run does not train on".into());
    }
    if let Some(shared) = eval.inputs.iter().find(|i| train.inputs.contains(i)) {
        return refuse(format!(
            "was prepared from {}, which the training shards were made from too; a held-out loss needs text the run does not train on",
            crate::io::short(shared)
        ));
    }
    if eval.max_seq_len != train.max_seq_len {
        return refuse(format!(
            "holds {}-token examples, the training shards {}-token ones; prepare it with --max-seq-len {}",
            eval.max_seq_len, train.max_seq_len, train.max_seq_len
        ));
    }
    Ok(())
}
