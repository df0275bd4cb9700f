//! A run's masked-LM predictions at its masked positions, as training makes them: a corpus
//! packed with the run's tokenizer and masked with the run's masking (fixed seeds), a
//! checkpoint's model (BERT's masked-LM head, or ELECTRA's generator), and the prediction by
//! the run's own rule (`hc_prediction`: the argmax, or a sample of the predicted distribution)
//! with its probability. `stats` and `inspect` read the same predictions.

use std::path::Path;

use burn::prelude::*;
use burn::tensor::activation::log_softmax;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::config::PretrainConfig;
use super::model::{Net, PretrainModel};
use crate::interop::tensors::TensorMap;
use crate::kernels::device_ids;
use crate::model::Inputs;
use crate::objective::hard_correction::Prediction;
use crate::text::WordPieceTokenizer;
use crate::text::batches::Batch;
use crate::text::corpus::read_documents;
use crate::text::examples::{Example, PackingConfig, pack_document};
use crate::text::masking::{Masked, mask_batch};
use crate::{Error, Result};

/// Packs a text corpus into examples with the run's tokenizer (seed 0).
pub fn corpus_examples(
    corpus: &Path,
    tokenizer: &WordPieceTokenizer,
    max_len: usize,
) -> Result<Vec<Example>> {
    let s = tokenizer.special;
    let cfg = PackingConfig::new(max_len, s.cls, s.sep);
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let mut out = Vec::new();
    for d in read_documents(corpus)? {
        out.extend(pack_document(&d.sentence_ids(tokenizer), &cfg, &mut rng));
    }
    if out.is_empty() {
        return Err(Error::Input(format!(
            "{}: the corpus has no text",
            corpus.display()
        )));
    }
    Ok(out)
}

/// Up to `max_batches` batches of `batch_size` sequences of `corpus`, masked as the run masks
/// (seeded by `seed`).
pub fn masked_batches(
    cfg: &PretrainConfig,
    tokenizer: &WordPieceTokenizer,
    corpus: &Path,
    batch_size: usize,
    max_batches: usize,
    seed: u64,
) -> Result<Vec<(Batch, Masked)>> {
    let examples = corpus_examples(corpus, tokenizer, cfg.data.max_seq_len)?;
    let vocab = tokenizer.vocab_size();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    Ok(examples
        .chunks(batch_size)
        .take(max_batches)
        .map(|c| {
            let b = Batch::from_examples(c, tokenizer.special.pad);
            let m = mask_batch(&b, &cfg.masking, &tokenizer.special, vocab, &mut rng);
            (b, m)
        })
        .collect())
}

/// Refuses `what` (a command's predictions) whose model and batches of `batch_size` cannot
/// fit in host memory, before the model is built (the forward pass, one checkpoint at a time).
pub fn check_fits(cfg: &PretrainConfig, vocab: usize, batch_size: usize, what: &str) -> Result<()> {
    if cfg.replica_devices().iter().any(|d| d.kind.is_gpu()) {
        return Ok(());
    }
    let len = cfg.data.max_seq_len;
    let need: f64 = (cfg.model.encoders(vocab).iter())
        .map(|e| crate::model::footprint::inference_bytes(e, batch_size, len))
        .sum();
    crate::memory::check(
        need,
        &format!("{what} at --batch-size {batch_size} × {len} tokens"),
        "lower --batch-size",
    )
}

/// The run's model with the weights of the checkpoint in `dir`.
pub fn checkpoint_model(
    cfg: &PretrainConfig,
    vocab: usize,
    dir: &Path,
    device: &Device,
) -> Result<PretrainModel> {
    let ck = super::checkpoint::load(dir)?;
    let mut model = PretrainModel::of(&cfg.model_shape(vocab), &cfg.step_settings(), device);
    model.load(
        &TensorMap {
            tensors: ck.model,
            source: dir.join("model.safetensors"),
        },
        device,
    )?;
    Ok(model)
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
