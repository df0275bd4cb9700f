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
            precision: c.precision.on(device),
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
        kernels::linear_transposed(h, words, self.bias.val(), p.products())
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

    /// The same head with `outputs` logits per token (a three-way detection).
    pub fn with_outputs(c: &super::EncoderConfig, outputs: usize, device: &Device) -> Self {
        Self {
            dense: linear(c.hidden_size, c.hidden_size, device),
            prediction: linear(c.hidden_size, outputs, device),
            precision: c.precision.on(device),
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

/// Rows of a [batch, len, hidden] tensor at flat positions (`b * len + t`) → [n, hidden].
pub fn gather_rows(hidden: Tensor<3>, flat_positions: Tensor<1, Int>) -> Tensor<2> {
    let [b, l, h] = hidden.dims();
    kernels::select_rows(hidden.reshape([b * l, h]), flat_positions)
}
