//! The `README.md` model card of an exported folder: what the model is, what it was trained on
//! and how, its losses at the exported step, the trueneg build, and how to load it.

use std::path::Path;

use super::config::{ModelKind, PretrainConfig};
use super::metrics::read_metrics;
use crate::interop::HfConfig;

/// The card of the model `hf` exported from `run` at `step` (`role`: "discriminator",
/// "generator" or "model").
pub fn model_card(
    run: &Path,
    cfg: &PretrainConfig,
    step: u64,
    hf: &HfConfig,
    role: &str,
) -> String {
    let e = &hf.encoder;
    let arch = hf.architectures.join(", ");
    let tokens = cfg.tokens_through(step);
    let data = match &cfg.data.shards {
        // The folder's name: a card never says where the data sat on this machine.
        Some(d) => format!(
            "the shards `{}`",
            d.file_name().map_or_else(
                || d.display().to_string(),
                |n| n.to_string_lossy().into_owned()
            )
        ),
        None => "trueneg's embedded default corpus (WordNet 3.0 glosses)".into(),
    };
    // The exported step's line (the last one at or before it).
    let at_step = read_metrics(run).into_iter().rev().find(|m| m.step <= step);
    let losses = match at_step {
        Some(m) => {
            let mut terms: Vec<String> = m
                .terms
                .iter()
                .filter(|(k, _)| k.ends_with("_loss") || k.ends_with("_accuracy"))
                .map(|(k, v)| match v.as_f64() {
                    Some(x) => format!("{k} {x:.4}"),
                    None => format!("{k} {v}"),
                })
                .collect();
            terms.insert(0, format!("loss {:.4}", m.loss));
            format!("At step {}: {}.", m.step, terms.join(", "))
        }
        None => "No metrics line of this step was found in the run's metrics.jsonl.".into(),
    };
    let pair = if cfg.model.kind == ModelKind::Electra {
        format!(
            "This is the {role} of an ELECTRA pair (generator at {} of the discriminator's width, \
             λ = {} on the discriminator's loss).",
            cfg.model.generator_size, cfg.train.disc_weight
        )
    } else {
        "A BERT masked-LM model.".into()
    };
    let objective = toml::to_string(&cfg.objective).unwrap_or_default();
    format!(
        "---\nlibrary_name: transformers\nlicense: other\ntags:\n- trueneg\n- {kind}\n---\n\n\
# {name} ({role})\n\n\
Pre-trained with trueneg {version}.\n\n\
{pair}\n\n\
## Architecture\n\n\
`{arch}`: {layers} layers, hidden size {hidden}, {heads} attention heads, intermediate size \
{inter}, embedding size {emb}, vocabulary {vocab}, {positions} positions.\n\n\
## Training\n\n\
- Data: {data}, {lengths}.\n\
- Steps: {step} of {total}, batch {batch} × {accum} accumulation: {tokens:.3e} tokens.\n\
- Objective: `{objective_kind}`; its settings:\n\n```toml\n{objective}```\n\n\
- Optimizer: AdamW, lr {lr}, warm-up {warmup} steps, weight decay {wd}, seed {seed}.\n\n\
## Losses\n\n{losses}\n\n\
## Reproduce\n\n\
The run's resolved config is `config.toml` in its folder: `trueneg pretrain --config config.toml`.\n\n\
## Use\n\n```python\nfrom transformers import AutoTokenizer, AutoModel\n\
tok = AutoTokenizer.from_pretrained(\"path/to/this/folder\")\n\
model = AutoModel.from_pretrained(\"path/to/this/folder\")\n```\n",
        kind = hf.model_type,
        name = run
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default(),
        version = crate::VERSION,
        layers = e.num_hidden_layers,
        hidden = e.hidden_size,
        heads = e.num_attention_heads,
        inter = e.intermediate_size,
        emb = e.embedding_size,
        vocab = e.vocab_size,
        positions = e.max_position_embeddings,
        lengths = cfg.lengths_described(),
        total = cfg.train.steps,
        batch = cfg.data.batch_size,
        accum = cfg.train.grad_accum,
        objective_kind = cfg.objective.kind.name(),
        lr = cfg.optimizer.lr,
        warmup = cfg.optimizer.warmup_steps,
        wd = cfg.optimizer.weight_decay,
        seed = cfg.train.seed,
    )
}
