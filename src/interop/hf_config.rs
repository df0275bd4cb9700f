//! transformers' `config.json` for BERT and ELECTRA.

use std::path::Path;

use serde_json::{Value, json};

use crate::model::EncoderConfig;
use crate::{Error, Result};

/// The `config.json` key of the tokens per example a model was fine-tuned with (trueneg's
/// export writes it; transformers keeps unknown keys as attributes, and ignores them).
pub const INPUT_LENGTH: &str = "trueneg_max_seq_len";
/// The `config.json` key of how its sentence pairs were cut to that length.
pub const TRUNCATION: &str = "trueneg_truncation";

/// The keys of a task head's fine-tuned model: [`HfConfig::task_fields`].
const TASK_KEYS: [&str; 7] = [
    "num_labels",
    "id2label",
    "label2id",
    "problem_type",
    "finetuning_task",
    INPUT_LENGTH,
    TRUNCATION,
];

/// What a transformers `config.json` says about one model.
#[derive(Clone, Debug, PartialEq)]
pub struct HfConfig {
    /// `bert` or `electra`.
    pub model_type: String,
    pub architectures: Vec<String>,
    pub encoder: EncoderConfig,
    /// The keys a task head adds ([`TASK_KEYS`]: `num_labels`, `id2label`, `label2id`,
    /// `problem_type`, `finetuning_task`, and trueneg's example length and truncation), written
    /// and read as they are; empty for a pre-trained model.
    pub task_fields: serde_json::Map<String, Value>,
}

/// Reads `config.json`; errors name the file and the field.
pub fn read_hf_config(path: &Path) -> Result<HfConfig> {
    let bytes = crate::io::read::read(path, crate::io::limit::SMALL)?;
    let v: Value = serde_json::from_slice(&bytes)
        .map_err(|e| Error::Config(format!("{}: invalid JSON ({e})", path.display())))?;
    let field = |name: &str| -> Result<usize> {
        v.get(name)
            .and_then(Value::as_u64)
            .map(|x| x as usize)
            .ok_or_else(|| {
                Error::Config(format!(
                    "{}: field `{name}` missing or not an integer",
                    path.display()
                ))
            })
    };
    let float = |name: &str, default: f64| v.get(name).and_then(Value::as_f64).unwrap_or(default);
    let model_type = v
        .get("model_type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if model_type != "bert" && model_type != "electra" {
        return Err(Error::Config(format!(
            "{}: field `model_type` is {model_type:?}; trueneg reads \"bert\" and \"electra\"",
            path.display()
        )));
    }
    if let Some(act) = v.get("hidden_act").and_then(Value::as_str)
        && act != "gelu"
    {
        return Err(Error::Config(format!(
            "{}: field `hidden_act` is {act:?}; only \"gelu\" (exact erf GELU) is supported",
            path.display()
        )));
    }
    let hidden = field("hidden_size")?;
    let encoder = EncoderConfig {
        vocab_size: field("vocab_size")?,
        embedding_size: if v.get("embedding_size").is_some() {
            field("embedding_size")?
        } else {
            hidden
        },
        hidden_size: hidden,
        num_hidden_layers: field("num_hidden_layers")?,
        num_attention_heads: field("num_attention_heads")?,
        intermediate_size: field("intermediate_size")?,
        max_position_embeddings: field("max_position_embeddings")?,
        type_vocab_size: field("type_vocab_size")?,
        layer_norm_eps: float("layer_norm_eps", 1e-12),
        hidden_dropout_prob: float("hidden_dropout_prob", 0.1),
        attention_probs_dropout_prob: float("attention_probs_dropout_prob", 0.1),
        pad_token_id: v.get("pad_token_id").and_then(Value::as_u64).unwrap_or(0) as usize,
        precision: Default::default(),
    };
    encoder.validate(&path.display().to_string())?;
    let architectures = v
        .get("architectures")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let task_fields = TASK_KEYS
        .iter()
        .filter_map(|k| Some((k.to_string(), v.get(*k)?.clone())))
        .collect();
    Ok(HfConfig {
        model_type,
        architectures,
        encoder,
        task_fields,
    })
}

/// Writes a `config.json` that transformers' `from_pretrained` accepts.
pub fn write_hf_config(path: &Path, cfg: &HfConfig) -> Result<()> {
    let e = &cfg.encoder;
    let mut v = json!({
        "architectures": cfg.architectures,
        "model_type": cfg.model_type,
        "vocab_size": e.vocab_size,
        "hidden_size": e.hidden_size,
        "num_hidden_layers": e.num_hidden_layers,
        "num_attention_heads": e.num_attention_heads,
        "intermediate_size": e.intermediate_size,
        "hidden_act": "gelu",
        "hidden_dropout_prob": e.hidden_dropout_prob,
        "attention_probs_dropout_prob": e.attention_probs_dropout_prob,
        "max_position_embeddings": e.max_position_embeddings,
        "type_vocab_size": e.type_vocab_size,
        "initializer_range": 0.02,
        "layer_norm_eps": e.layer_norm_eps,
        "pad_token_id": e.pad_token_id,
        "tie_word_embeddings": true,
        "position_embedding_type": "absolute",
        "trueneg_version": crate::VERSION,
    });
    if cfg.model_type == "electra" {
        v["embedding_size"] = json!(e.embedding_size);
        v["summary_type"] = json!("first");
        v["summary_use_proj"] = json!(true);
        v["summary_activation"] = json!("gelu");
        v["summary_last_dropout"] = json!(0.1);
    }
    for (k, x) in &cfg.task_fields {
        v[k] = x.clone();
    }
    let text = serde_json::to_string_pretty(&v).expect("json") + "\n";
    crate::io::write_atomic(path, text.as_bytes())
}
