//! What a step uploads: a micro-batch's model inputs and its masking, as device tensors.

use burn::prelude::*;

use crate::kernels::device_ids;
use crate::model::Inputs;
use crate::text::batches::Batch;
use crate::text::masking::Masked;

pub fn ints1(values: impl Iterator<Item = i64>, device: &Device) -> Tensor<1, Int> {
    let v: Vec<i64> = values.collect();
    let n = v.len();
    Tensor::from_data(TensorData::new(v, [n]), device)
}

/// The model inputs of `batch` with token ids `ids` (the batch's own, or a corrupted copy).
pub fn inputs(batch: &Batch, ids: &[u32], device: &Device) -> Inputs {
    with_mask(batch, ids, !batch.is_dense(), device)
}

/// [`inputs`], with the attention mask uploaded even where every token is real (`mask`): a
/// fixed-shape step's inputs are the same tensors every step.
fn with_mask(batch: &Batch, ids: &[u32], mask: bool, device: &Device) -> Inputs {
    let shape = [batch.batch, batch.len];
    Inputs {
        ids: device_ids(ids, shape, device),
        token_types: device_ids(&batch.token_types, shape, device),
        attention_mask: mask.then(|| device_ids(&batch.attention_mask, shape, device)),
    }
}

/// A masked micro-batch on the device: what the step uploads, and all it uploads.
#[derive(Clone)]
pub struct Uploaded {
    /// The model inputs (the masked ids).
    pub x: Inputs,
    /// The masked positions in the flattened batch, `[n]`.
    pub positions: Tensor<1, Int>,
    /// The gold tokens there, `[n]`.
    pub labels: Tensor<1, Int>,
    /// A fixed-shape step's: which slots are masked positions (1) or padding (0), `[n]`
    /// (`Masked::padded`).
    pub valid: Option<Tensor<1>>,
}

/// Uploads the masked micro-batch `batch`/`m` to `device`. A fixed-shape masking
/// (`Masked::padded`) uploads the attention mask always, and its slots' validity.
pub fn upload(batch: &Batch, m: &Masked, device: &Device) -> Uploaded {
    let fixed = m.valid.is_some();
    Uploaded {
        x: with_mask(batch, &m.input_ids, fixed || !batch.is_dense(), device),
        positions: ints1(m.positions.iter().map(|&p| p as i64), device),
        labels: ints1(m.labels.iter().map(|&l| l as i64), device),
        valid: m.valid.as_ref().map(|v| {
            let w: Vec<f32> = v.iter().map(|&x| x as u8 as f32).collect();
            Tensor::from_data(TensorData::new(w, [v.len()]), device)
        }),
    }
}

impl Uploaded {
    /// Copies `new` (the same shapes) into these tensors' memory, on LibTorch devices: how a
    /// recorded step's inputs change (`kernels::cuda_graph`).
    pub fn copy_from(&self, new: &Uploaded) {
        use crate::kernels::cuda_graph::copy_into;
        copy_into(&self.x.ids, &new.x.ids);
        copy_into(&self.x.token_types, &new.x.token_types);
        copy_into(&self.positions, &new.positions);
        copy_into(&self.labels, &new.labels);
        if let (Some(a), Some(b)) = (&self.x.attention_mask, &new.x.attention_mask) {
            copy_into(a, b);
        }
        if let (Some(a), Some(b)) = (&self.valid, &new.valid) {
            copy_into(a, b);
        }
    }
}
