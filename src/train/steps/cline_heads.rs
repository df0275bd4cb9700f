//! The heads of the step on sentence triples, beside the encoder: a detection head (dense →
//! GELU → 1 or 3 logits per token; absent when an ELECTRA discriminator's own head does binary
//! detection), a tanh pooler on `[CLS]` (the `bce` contrast only) and the learned loss weights
//! s_i (`learned` only). Their parameters are named `cline.…` in checkpoints.

use burn::module::{Module, Param};
use burn::nn::Linear;
use burn::prelude::*;

use crate::model::EncoderConfig;
use crate::model::encoder::linear;
use crate::model::heads::RtdHead;
use crate::model::params::{ParamWalker, walk_linear};
use crate::model::step_heads::HeadsModule;

/// The parameters' name prefix.
pub const PREFIX: &str = "cline";

/// The learned loss weights' name: they take no weight decay (decay would pull every weight
/// exp(−s_i) toward 1).
pub const LOSS_WEIGHTS: &str = "cline.loss_weights";

#[derive(Module, Debug)]
pub struct TripleHeads {
    pub detection: Option<RtdHead>,
    pub pooler: Option<Linear>,
    pub loss_weights: Option<Param<Tensor<1>>>,
}

/// Which heads a run has.
#[derive(Clone, Copy, Debug)]
pub struct HeadChoice {
    /// Detection logits per token of a head of its own (`None`: the discriminator's head).
    pub detection_outputs: Option<usize>,
    pub pooler: bool,
    pub learned_weights: bool,
}

impl TripleHeads {
    /// The heads of `choice` beside `encoder`.
    pub fn new(choice: &HeadChoice, encoder: &EncoderConfig, device: &Device) -> Self {
        let hidden = encoder.hidden_size;
        Self {
            detection: (choice.detection_outputs)
                .map(|n| RtdHead::with_outputs(encoder, n, device)),
            pooler: (choice.pooler).then(|| linear(hidden, hidden, device)),
            loss_weights: (choice.learned_weights)
                .then(|| Param::from_tensor(Tensor::zeros([3], device))),
        }
    }

    /// tanh(W·h + b) of [batch, hidden] rows.
    pub fn pool(&self, cls: Tensor<2>) -> Tensor<2> {
        let pooler = self.pooler.as_ref().expect("a pooler for the bce contrast");
        pooler.forward(cls).tanh()
    }
}

impl HeadsModule for TripleHeads {
    fn walk_params(&mut self, w: &mut dyn ParamWalker) {
        if let Some(d) = &mut self.detection {
            d.walk_as(&format!("{PREFIX}.detection"), w);
        }
        if let Some(p) = &mut self.pooler {
            walk_linear(w, &format!("{PREFIX}.pooler.dense"), p);
        }
        if let Some(s) = &mut self.loss_weights {
            w.vector(LOSS_WEIGHTS, s);
        }
    }
}
