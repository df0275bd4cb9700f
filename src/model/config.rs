//! Encoder hyper-parameters, read from and written to transformers' `config.json` field names.

use serde::{Deserialize, Serialize};

use crate::error::{Rule, below_one, count, positive, rule};

/// The shape of one BERT / ELECTRA encoder (embeddings + transformer layers).
///
/// Field names are those of transformers' `BertConfig` / `ElectraConfig` (`crate::interop`
/// reads and writes `config.json`); the training config's `[model]` section holds them too.
/// The default is ELECTRA-Small's discriminator with the vocabulary size still to be set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct EncoderConfig {
    /// 0 in a training config: take the vocabulary size of the prepared shards.
    pub vocab_size: usize,
    /// Width of the token/position/type embeddings; projected to `hidden_size` when it differs.
    pub embedding_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    pub type_vocab_size: usize,
    pub layer_norm_eps: f64,
    pub hidden_dropout_prob: f64,
    pub attention_probs_dropout_prob: f64,
    /// trueneg's vocabularies put `[PAD]` at 0 (not a training-config key).
    #[serde(skip)]
    pub pad_token_id: usize,
    /// Compute precision of the matrix products (the training config's `train.precision`,
    /// not a `[model]` key).
    #[serde(skip)]
    pub precision: super::Precision,
}

impl Default for EncoderConfig {
    fn default() -> Self {
        Self {
            vocab_size: 0,
            embedding_size: 128,
            hidden_size: 256,
            num_hidden_layers: 12,
            num_attention_heads: 4,
            intermediate_size: 1024,
            max_position_embeddings: 512,
            type_vocab_size: 2,
            layer_norm_eps: 1e-12,
            hidden_dropout_prob: 0.1,
            attention_probs_dropout_prob: 0.1,
            pad_token_id: 0,
            precision: Default::default(),
        }
    }
}

impl EncoderConfig {
    /// The shape rules the model code relies on, by field (transformers' names, which the
    /// `[model]` section shares).
    pub fn rules(&self) -> Vec<Rule> {
        vec![
            count("embedding_size", self.embedding_size),
            count("hidden_size", self.hidden_size),
            count("num_hidden_layers", self.num_hidden_layers),
            rule(
                "num_attention_heads",
                self.num_attention_heads,
                self.num_attention_heads > 0
                    && self.hidden_size.is_multiple_of(self.num_attention_heads),
                format!("must be > 0 and divide hidden_size = {}", self.hidden_size),
            ),
            count("intermediate_size", self.intermediate_size),
            count("max_position_embeddings", self.max_position_embeddings),
            positive("layer_norm_eps", self.layer_norm_eps),
            below_one("hidden_dropout_prob", self.hidden_dropout_prob),
            below_one(
                "attention_probs_dropout_prob",
                self.attention_probs_dropout_prob,
            ),
        ]
    }

    /// Checks a complete encoder (`config.json`: its vocabulary too) against [`Self::rules`];
    /// `what` names the config in the error.
    pub fn validate(&self, what: &str) -> crate::Result<()> {
        let vocab = count("vocab_size", self.vocab_size);
        match std::iter::once(vocab).chain(self.rules()).find(|r| !r.ok) {
            Some(r) => Err(crate::Error::Config(format!(
                "{what}: field `{}` = {} {}",
                r.field, r.value, r.why
            ))),
            None => Ok(()),
        }
    }

    /// The same encoder computing in `precision`.
    pub fn with_precision(mut self, precision: super::Precision) -> Self {
        self.precision = precision;
        self
    }

    /// The same encoder with dropout switched off (evaluation, parity tests).
    pub fn without_dropout(mut self) -> Self {
        self.hidden_dropout_prob = 0.0;
        self.attention_probs_dropout_prob = 0.0;
        self
    }
}
