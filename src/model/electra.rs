//! ELECTRA pre-training model: a small masked-LM generator and a replaced-token-detection
//! discriminator that share one embedding block (word, position, type and its LayerNorm), as in
//! google-research/electra. Each side has its own `embeddings_project` when
//! `embedding_size != hidden_size`.

use burn::module::Module;
use burn::prelude::*;

use super::encoder::{Embeddings, Encoder};
use super::heads::{MlmHead, RtdHead, gather_rows};
use super::params::ParamWalker;
use super::{EncoderConfig, Inputs};

/// Name prefix under which the generator's own parameters are kept in a combined checkpoint;
/// stripping it gives `ElectraForMaskedLM`'s names.
pub const GENERATOR_PREFIX: &str = "generator.";

#[derive(Module, Debug)]
pub struct Electra {
    pub embeddings: Embeddings,
    pub generator: Encoder,
    pub generator_head: MlmHead,
    pub discriminator: Encoder,
    pub discriminator_head: RtdHead,
}

impl Electra {
    /// `disc` and `gen` must agree on vocabulary, embedding size and positions (shared embeddings).
    pub fn new(disc: &EncoderConfig, gen_cfg: &EncoderConfig, device: &Device) -> Self {
        Self {
            embeddings: Embeddings::new(disc, device),
            generator: Encoder::new(gen_cfg, device),
            generator_head: MlmHead::new(gen_cfg, device),
            discriminator: Encoder::new(disc, device),
            discriminator_head: RtdHead::new(disc, device),
        }
    }

    pub fn generator_hidden_states(&self, x: &Inputs) -> Vec<Tensor<3>> {
        let e = self
            .embeddings
            .forward(x.ids.clone(), x.token_types.clone());
        self.generator.forward_all(e, x.attention_mask.clone())
    }

    pub fn discriminator_hidden_states(&self, x: &Inputs) -> Vec<Tensor<3>> {
        let e = self
            .embeddings
            .forward(x.ids.clone(), x.token_types.clone());
        self.discriminator.forward_all(e, x.attention_mask.clone())
    }

    /// Generator MLM logits [n, vocab] at the flat positions `b * len + t`.
    pub fn generator_logits(&self, x: &Inputs, flat_positions: Tensor<1, Int>) -> Tensor<2> {
        let e = self
            .embeddings
            .forward(x.ids.clone(), x.token_types.clone());
        let h = self.generator.forward(e, x.attention_mask.clone());
        self.generator_head.forward(
            gather_rows(h, flat_positions),
            self.embeddings.word_matrix(),
        )
    }

    /// The generator's encoder output [batch, len, generator hidden].
    pub fn generator_encode(&self, x: &Inputs) -> Tensor<3> {
        let e = self
            .embeddings
            .forward(x.ids.clone(), x.token_types.clone());
        self.generator.forward(e, x.attention_mask.clone())
    }

    /// Discriminator logits [batch, len] ("replaced" > 0).
    pub fn discriminator_logits(&self, x: &Inputs) -> Tensor<2> {
        let e = self
            .embeddings
            .forward(x.ids.clone(), x.token_types.clone());
        let h = self.discriminator.forward(e, x.attention_mask.clone());
        self.discriminator_head.forward(h).squeeze_dim(2)
    }

    /// The discriminator's encoder output (what fine-tuning uses).
    pub fn encode(&self, x: &Inputs) -> Tensor<3> {
        let e = self
            .embeddings
            .forward(x.ids.clone(), x.token_types.clone());
        self.discriminator.forward(e, x.attention_mask.clone())
    }

    /// Discriminator names as `ElectraForPreTraining`; generator-only names behind
    /// [`GENERATOR_PREFIX`] as `ElectraForMaskedLM`. The shared embeddings appear once.
    pub fn walk(&mut self, w: &mut dyn ParamWalker) {
        self.embeddings.walk("electra.embeddings", w);
        self.discriminator.walk("electra", w);
        self.discriminator_head.walk(w);
        let g = GENERATOR_PREFIX;
        self.generator.walk(&format!("{g}electra"), w);
        self.generator_head.walk(
            &format!("{g}generator_predictions"),
            &format!("{g}generator_lm_head.bias"),
            w,
        );
    }
}
