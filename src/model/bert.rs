//! BERT masked-LM (`BertForMaskedLM`): embeddings → encoder → MLM head tied to the embeddings.

use burn::module::Module;
use burn::prelude::*;

use super::encoder::{Embeddings, Encoder};
use super::heads::{MlmHead, gather_rows};
use super::params::ParamWalker;
use super::{EncoderConfig, Inputs};

#[derive(Module, Debug)]
pub struct BertMlm {
    pub embeddings: Embeddings,
    pub encoder: Encoder,
    pub head: MlmHead,
}

impl BertMlm {
    pub fn new(c: &EncoderConfig, device: &Device) -> Self {
        Self {
            embeddings: Embeddings::new(c, device),
            encoder: Encoder::new(c, device),
            head: MlmHead::new(c, device),
        }
    }

    /// Hidden states: index 0 = the first layer's input, i = output of layer i.
    pub fn hidden_states(&self, x: &Inputs) -> Vec<Tensor<3>> {
        let e = self
            .embeddings
            .forward(x.ids.clone(), x.token_types.clone());
        self.encoder.forward_all(e, x.attention_mask.clone())
    }

    pub fn encode(&self, x: &Inputs) -> Tensor<3> {
        let e = self
            .embeddings
            .forward(x.ids.clone(), x.token_types.clone());
        self.encoder.forward(e, x.attention_mask.clone())
    }

    /// MLM logits [n, vocab] at the flat positions `b * len + t` only.
    pub fn mlm_logits(&self, x: &Inputs, flat_positions: Tensor<1, Int>) -> Tensor<2> {
        let rows = gather_rows(self.encode(x), flat_positions);
        self.head.forward(rows, self.embeddings.word_matrix())
    }

    pub fn walk(&mut self, w: &mut dyn ParamWalker) {
        self.embeddings.walk("bert.embeddings", w);
        self.encoder.walk("bert", w);
        self.head
            .walk("cls.predictions.transform", "cls.predictions.bias", w);
    }
}
