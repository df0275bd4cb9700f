//! What a pre-training step needs in host memory, estimated from its config before anything is
//! allocated and checked by [`crate::memory::check`]: a run that cannot fit is refused with
//! both figures instead of allocating until the kernel kills it.
//!
//! The estimate counts, in f32 values, each encoder's parameters and activations
//! ([`crate::model::footprint`]) on every replica, AdamW's two moments, and the MLM head on the
//! masked positions (2·(E + vocab) each), times the sentences the step encodes a row
//! ([`super::steps::StepKind::sentences_per_row`]).
//!
//! It is a floor, not a bound: the allocator's slack and transient copies come on top.

use super::config::{DataSection, ModelSection};
use crate::Result;
use crate::device::DeviceName;

use crate::model::footprint::{activations, parameters};

const F32: f64 = 4.0;

/// What a step's memory depends on: the model, the batch, the replicas' devices and the
/// sentences its training step encodes a row.
pub struct StepSize<'a> {
    pub model: &'a ModelSection,
    pub data: &'a DataSection,
    pub devices: &'a [DeviceName],
    pub sentences: f64,
}

/// Bytes of host memory a step of `size` needs at least, with a vocabulary of `vocab` (f64: a
/// mistyped size must not overflow).
pub fn estimate(size: &StepSize, vocab: usize) -> f64 {
    let replicas = size.devices.len().max(1) as f64;
    let rows = (size.data.batch_size as f64 / replicas).ceil();
    let len = size.data.max_seq_len as f64;
    let sentences = size.sentences;
    let encoders = size.model.encoders(vocab);
    let masked = (rows * len / 6.0).ceil();
    let (mut params, mut values) = (0.0, 0.0);
    for e in &encoders {
        params += parameters(e);
        values += sentences * activations(e, rows, len);
        values += 2.0 * masked * (e.embedding_size + e.vocab_size) as f64;
    }
    F32 * (2.0 * params * replicas + 2.0 * params + values * replicas)
}

/// Refuses a run on host devices whose estimate exceeds the memory available. (GPU runs are
/// left to the device's own out-of-memory error, which is clean.)
pub fn check(size: &StepSize, vocab: usize) -> Result<()> {
    if size.devices.iter().any(|d| d.kind.is_gpu()) {
        return Ok(());
    }
    let e = size.model.encoder(vocab);
    crate::memory::check(
        estimate(size, vocab),
        &format!(
            "a step of this run (model {} × {} layers, data.batch_size {} × {} tokens)",
            e.hidden_size, e.num_hidden_layers, size.data.batch_size, size.data.max_seq_len
        ),
        "lower data.batch_size (raise train.grad_accum to keep the batch) or the model's size",
    )
}
