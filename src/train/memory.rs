//! What a run needs in host memory, estimated from its config before anything is allocated,
//! and what the machine has: a run that cannot fit is refused with both figures instead of
//! allocating until the kernel kills it.
//!
//! The estimate counts, in f32 values:
//! - per parameter: the weights and their gradient on every replica, and AdamW's two moments;
//! - per encoder layer and row of a micro-batch of length L: the activations kept for the
//!   backward pass, about L·(10·H + 2·I) for the projections, normalisations and feed-forward
//!   and 3·heads·L² for the attention scores, probabilities and dropout mask;
//! - the embeddings (L·(3·E + 2·H) a row) and the MLM head on the masked positions (2·(E +
//!   vocab) each).
//!
//! It is a floor, not a bound: the allocator's slack and transient copies come on top.

use super::config::{ModelKind, PretrainConfig};
use crate::model::config::EncoderConfig;
use crate::{Error, Result};

const F32: f64 = 4.0;

/// Parameters of one encoder with its embeddings (heads aside: they are small next to it).
pub fn parameters(e: &EncoderConfig) -> f64 {
    let [v, emb, h, i] = [
        e.vocab_size,
        e.embedding_size,
        e.hidden_size,
        e.intermediate_size,
    ]
    .map(|x| x as f64);
    let embeddings = (v + e.max_position_embeddings as f64 + e.type_vocab_size as f64) * emb
        + 2.0 * emb
        + if emb == h { 0.0 } else { emb * h + h };
    let layer = 4.0 * (h * h + h) + 2.0 * h * i + i + h + 4.0 * h;
    embeddings + e.num_hidden_layers as f64 * layer
}

/// Activation values one encoder keeps for the backward pass on `rows` rows of `len` tokens.
fn activations(e: &EncoderConfig, rows: f64, len: f64) -> f64 {
    let [emb, h, i, heads] = [
        e.embedding_size,
        e.hidden_size,
        e.intermediate_size,
        e.num_attention_heads,
    ]
    .map(|x| x as f64);
    let layer = rows * len * (10.0 * h + 2.0 * i) + 3.0 * rows * heads * len * len;
    rows * len * (3.0 * emb + 2.0 * h) + e.num_hidden_layers as f64 * layer
}

/// Bytes of host memory a step of `cfg` needs at least, with a vocabulary of `vocab` (f64: a
/// mistyped size must not overflow).
pub fn estimate(cfg: &PretrainConfig, vocab: usize) -> f64 {
    let replicas = cfg.replica_devices().len().max(1) as f64;
    let rows = (cfg.data.batch_size as f64 / replicas).ceil();
    let len = cfg.data.max_seq_len as f64;
    // A step on triples encodes three sentences a row.
    let sentences = if cfg.objective.kind.trains_on_triples() {
        3.0
    } else {
        1.0
    };
    let mut encoders = vec![cfg.model.encoder(vocab)];
    if cfg.model.kind == ModelKind::Electra {
        encoders.push(cfg.model.generator(vocab));
    }
    let masked = (rows * len / 6.0).ceil();
    let (mut params, mut values) = (0.0, 0.0);
    for e in &encoders {
        params += parameters(e);
        values += sentences * activations(e, rows, len);
        values += 2.0 * masked * (e.embedding_size + e.vocab_size) as f64;
    }
    F32 * (2.0 * params * replicas + 2.0 * params + values * replicas)
}

/// Bytes of memory this process may still take: the kernel's `MemAvailable`, lowered to the
/// cgroup's limit less its usage when there is one. `None` where neither can be read.
pub fn available() -> Option<u64> {
    let meminfo = crate::io::read::read_text(
        std::path::Path::new("/proc/meminfo"),
        crate::io::limit::SMALL,
    )
    .ok();
    let mem = meminfo.as_deref().and_then(|m| {
        m.lines()
            .find_map(|l| l.strip_prefix("MemAvailable:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kb| kb * 1024)
    });
    let read = |f: &str| {
        crate::io::read::read_text(
            std::path::Path::new(&format!("/sys/fs/cgroup/{f}")),
            crate::io::limit::SMALL,
        )
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
    };
    let cgroup =
        read("memory.max").map(|max| max.saturating_sub(read("memory.current").unwrap_or(0)));
    match (mem, cgroup) {
        (Some(m), Some(c)) => Some(m.min(c)),
        (m, c) => m.or(c),
    }
}

fn gib(bytes: f64) -> String {
    format!("{:.1} GiB", bytes / (1u64 << 30) as f64)
}

/// Refuses a run on host devices whose estimate exceeds the memory available. (GPU runs are
/// left to the device's own out-of-memory error, which is clean.)
pub fn check(cfg: &PretrainConfig, vocab: usize) -> Result<()> {
    if cfg.replica_devices().iter().any(|d| d.contains("cuda")) {
        return Ok(());
    }
    let (need, have) = (estimate(cfg, vocab), available());
    tracing::debug!(
        "memory: a step needs at least {} (estimate), {} available",
        gib(need),
        have.map(|h| gib(h as f64))
            .unwrap_or_else(|| "unknown".into())
    );
    match have {
        Some(have) if need > have as f64 => Err(Error::Config(format!(
            "a step of this run needs at least {} of memory (model {} × {} layers, \
             data.batch_size {} × {} tokens), the machine has {} available: lower \
             data.batch_size (raise train.grad_accum to keep the batch) or the model's size",
            gib(need),
            cfg.model.encoder(vocab).hidden_size,
            cfg.model.encoder(vocab).num_hidden_layers,
            cfg.data.batch_size,
            cfg.data.max_seq_len,
            gib(have as f64)
        ))),
        _ => Ok(()),
    }
}
