//! Hard Correction's view of a batch outside the training step: the generator's (or BERT's)
//! predictions at its masked positions, by argmax or sampled as in training, and the verdict
//! of a synonym table on them. Read by the statistics of checkpoints (`train::stats`) and the
//! samples a run shows of its corrections (`train::steps::correction_samples`).

use burn::prelude::*;
use burn::tensor::activation::log_softmax;
use rand_chacha::ChaCha8Rng;

use super::model::{Net, PretrainModel};
use crate::kernels::device_ids;
use crate::model::Inputs;
use crate::objective::hard_correction::Prediction;
use crate::objective::{CorrectionCounts, correction_weights};
use crate::text::SynonymTable;
use crate::text::batches::Batch;
use crate::text::masking::Masked;

/// Hard Correction's verdict on `predicted` at the masked positions of `b`: per position its
/// loss weight (0: dropped as a synonym of the gold token), and the batch's counts.
pub fn verdicts(
    b: &Batch,
    m: &Masked,
    predicted: &[u32],
    table: &SynonymTable,
) -> (Vec<f32>, CorrectionCounts) {
    let rows: Vec<usize> = m.positions.iter().map(|&p| p / b.len).collect();
    correction_weights(predicted, &m.labels, &rows, b.batch, table)
}

/// The predictions at a batch's masked positions, in their order.
pub struct Predicted {
    pub ids: Vec<u32>,
    /// The probability the model gives each prediction.
    pub probability: Vec<f32>,
}

/// Predicts every masked position of `b` by `rule` (samples drawn from `draws`).
pub fn predict_masked(
    model: &PretrainModel,
    rule: Prediction,
    b: &Batch,
    m: &Masked,
    device: &Device,
    draws: &mut ChaCha8Rng,
) -> Predicted {
    let shape = [b.batch, b.len];
    let x = Inputs {
        ids: device_ids(&m.input_ids, shape, device),
        token_types: device_ids(&b.token_types, shape, device),
        attention_mask: Some(device_ids(&b.attention_mask, shape, device)),
    };
    let n = m.positions.len();
    let positions: Vec<i64> = m.positions.iter().map(|&p| p as i64).collect();
    let pos = Tensor::<1, Int>::from_data(TensorData::new(positions, [n]), device);
    let logits = match &model.net {
        Net::Bert(bm) => bm.mlm_logits(&x, pos),
        Net::Electra(e) => e.generator_logits(&x, pos),
    };
    let ids = match rule {
        Prediction::Argmax => crate::model::host_ids(logits.clone().argmax(1)),
        Prediction::Sampled => sample(logits.clone(), draws),
    };
    let chosen: Vec<i64> = ids.iter().map(|&i| i as i64).collect();
    let chosen = Tensor::<1, Int>::from_data(TensorData::new(chosen, [n]), device).reshape([n, 1]);
    let probability = crate::kernels::read_floats(log_softmax(logits, 1).gather(1, chosen))
        .into_iter()
        .map(|l| l.exp() as f32)
        .collect();
    Predicted { ids, probability }
}

/// A token drawn from each row of `logits` [n, vocab] (softmax at temperature 1, as the
/// generator samples in training).
fn sample(logits: Tensor<2>, rng: &mut ChaCha8Rng) -> Vec<u32> {
    use rand::Rng;
    let [n, vocab] = logits.dims();
    let values = crate::kernels::read_floats(logits);
    (0..n)
        .map(|i| {
            let row = &values[i * vocab..(i + 1) * vocab];
            let top = row.iter().copied().fold(f64::MIN, f64::max);
            let weights: Vec<f64> = row.iter().map(|&z| (z - top).exp()).collect();
            let mut u = rng.random::<f64>() * weights.iter().sum::<f64>();
            for (j, w) in weights.iter().enumerate() {
                u -= w;
                if u <= 0.0 {
                    return j as u32;
                }
            }
            (vocab - 1) as u32
        })
        .collect()
}
