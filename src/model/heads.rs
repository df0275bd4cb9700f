//! Prediction heads on top of an encoder.

use burn::module::{Module, Param};
use burn::nn::{LayerNorm, Linear};
use burn::prelude::*;

use super::encoder::{layer_norm, linear};
use super::params::{ParamWalker, walk_layer_norm, walk_linear};
use super::precision::{Precision, full};
use crate::kernels;

/// Masked-LM head: dense (hidden → embedding) → GELU → LayerNorm → decoder tied to the word
/// embeddings, plus its own bias. Used by BERT (`cls.predictions`) and by ELECTRA's generator
/// (`generator_predictions` + `generator_lm_head`).
#[derive(Module, Debug)]
pub struct MlmHead {
    pub dense: Linear,
    pub norm: LayerNorm,
    pub bias: Param<Tensor<1>>,
    #[module(skip)]
    pub precision: Precision,
    /// The LayerNorm's ε.
    #[module(skip)]
    pub eps: f64,
}

impl MlmHead {
    /// Shaped by the encoder config `c` it sits on: hidden → embedding → vocabulary.
    pub fn new(c: &super::EncoderConfig, device: &Device) -> Self {
        Self {
            dense: linear(c.hidden_size, c.embedding_size, device),
            norm: layer_norm(c.embedding_size, c.layer_norm_eps, device),
            bias: Param::from_tensor(Tensor::zeros([c.vocab_size], device)),
            precision: c.precision,
            eps: c.layer_norm_eps,
        }
    }

    /// `hidden`: [n, hidden] rows (only the positions to predict); `words`: the tied word
    /// embedding matrix [vocab, embedding]. Returns logits [n, vocab].
    pub fn forward(&self, hidden: Tensor<2>, words: Tensor<2>) -> Tensor<2> {
        let p = self.precision;
        // The decoder's operand in the compute dtype: the fused kernel only serves f32 ones.
        let h = p.compute(kernels::layer_norm(
            &self.norm,
            self.eps,
            full(kernels::gelu(p.linear(&self.dense, hidden))),
        ));
        kernels::linear_transposed(h, words, self.bias.val())
    }

    /// `transform` names dense and LayerNorm's prefix, `bias` the decoder bias' full name.
    pub fn walk(&mut self, transform: &str, bias: &str, w: &mut dyn ParamWalker) {
        walk_linear(w, &format!("{transform}.dense"), &mut self.dense);
        walk_layer_norm(w, &format!("{transform}.LayerNorm"), &mut self.norm);
        w.vector(bias, &mut self.bias);
    }
}

/// ELECTRA's replaced-token-detection head: dense → GELU → dense to one logit per token.
#[derive(Module, Debug)]
pub struct RtdHead {
    pub dense: Linear,
    pub prediction: Linear,
    #[module(skip)]
    pub precision: Precision,
}

impl RtdHead {
    pub fn new(c: &super::EncoderConfig, device: &Device) -> Self {
        Self::with_outputs(c, 1, device)
    }

    /// The same head with `outputs` logits per token (CLINE's three-way detection).
    pub fn with_outputs(c: &super::EncoderConfig, outputs: usize, device: &Device) -> Self {
        Self {
            dense: linear(c.hidden_size, c.hidden_size, device),
            prediction: linear(c.hidden_size, outputs, device),
            precision: c.precision,
        }
    }

    /// [batch, len, hidden] → logits [batch, len] (positive = "replaced").
    pub fn forward(&self, hidden: Tensor<3>) -> Tensor<3> {
        let p = self.precision;
        full(p.linear(
            &self.prediction,
            kernels::gelu(p.linear(&self.dense, hidden)),
        ))
    }

    pub fn walk(&mut self, w: &mut dyn ParamWalker) {
        self.walk_as("discriminator_predictions", w);
    }

    pub fn walk_as(&mut self, prefix: &str, w: &mut dyn ParamWalker) {
        walk_linear(w, &format!("{prefix}.dense"), &mut self.dense);
        walk_linear(
            w,
            &format!("{prefix}.dense_prediction"),
            &mut self.prediction,
        );
    }
}

/// Name prefix of CLINE's own parameters in a checkpoint (left out of exports).
pub const CLINE_PREFIX: &str = "cline.";

/// CLINE's parameters beside the encoder: a detection head (dense → GELU → 1 or 3 logits per
/// token; absent when an ELECTRA discriminator's own head does binary detection), a tanh pooler
/// on [CLS] (the `bce` contrast only) and the learned loss weights s_i (`learned` only).
#[derive(Module, Debug)]
pub struct ClineHeads {
    pub detection: Option<RtdHead>,
    pub pooler: Option<Linear>,
    pub loss_weights: Option<Param<Tensor<1>>>,
}

impl ClineHeads {
    /// `outputs`: detection logits per token, `None` for no head of its own.
    pub fn new(
        c: &super::EncoderConfig,
        outputs: Option<usize>,
        pooler: bool,
        learned_weights: bool,
        device: &Device,
    ) -> Self {
        Self {
            detection: outputs.map(|n| RtdHead::with_outputs(c, n, device)),
            pooler: pooler.then(|| linear(c.hidden_size, c.hidden_size, device)),
            loss_weights: learned_weights.then(|| Param::from_tensor(Tensor::zeros([3], device))),
        }
    }

    /// tanh(W·h + b) of [batch, hidden] rows.
    pub fn pool(&self, cls: Tensor<2>) -> Tensor<2> {
        let pooler = self.pooler.as_ref().expect("a pooler for the bce contrast");
        pooler.forward(cls).tanh()
    }

    pub fn walk(&mut self, w: &mut dyn ParamWalker) {
        if let Some(d) = &mut self.detection {
            d.walk_as("cline.detection", w);
        }
        if let Some(p) = &mut self.pooler {
            walk_linear(w, "cline.pooler.dense", p);
        }
        if let Some(s) = &mut self.loss_weights {
            w.vector("cline.loss_weights", s);
        }
    }
}

/// Rows of a [batch, len, hidden] tensor at flat positions (`b * len + t`) → [n, hidden].
pub fn gather_rows(hidden: Tensor<3>, flat_positions: Tensor<1, Int>) -> Tensor<2> {
    let [b, l, h] = hidden.dims();
    hidden.reshape([b * l, h]).select(0, flat_positions)
}
