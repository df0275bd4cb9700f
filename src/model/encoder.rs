//! The shared transformer encoder: embeddings (word + position + type → LayerNorm → dropout),
//! an optional projection from `embedding_size` to `hidden_size`, and post-LayerNorm layers,
//! numerically the same as transformers' `BertModel` / `ElectraModel` (exact erf GELU).

use burn::module::{Module, Param};
use burn::nn::{
    Dropout, DropoutConfig, Embedding, EmbeddingConfig, Initializer, LayerNorm, LayerNormConfig,
    Linear,
};
use burn::prelude::*;

use super::EncoderConfig;
use super::precision::{Precision, full};
use crate::kernels;
use crate::kernels::dropout::{dropout, dropout_add};
use crate::model::params::{ParamWalker, walk_layer_norm, walk_linear};

/// BERT's initialiser: N(0, 0.02) for every weight matrix; biases are set to zero afterwards.
pub(crate) fn normal_init() -> Initializer {
    Initializer::Normal {
        mean: 0.0,
        std: 0.02,
    }
}

pub fn linear(d_in: usize, d_out: usize, device: &Device) -> Linear {
    Linear {
        weight: normal_init().init([d_in, d_out], device),
        bias: Some(Param::from_tensor(Tensor::zeros([d_out], device))),
    }
}

pub(crate) fn layer_norm(d: usize, eps: f64, device: &Device) -> LayerNorm {
    LayerNormConfig::new(d).with_epsilon(eps).init(device)
}

/// Token, position and segment embeddings.
#[derive(Module, Debug)]
pub struct Embeddings {
    pub word: Embedding,
    pub position: Embedding,
    pub token_type: Embedding,
    pub norm: LayerNorm,
    pub dropout: Dropout,
    /// The LayerNorm's ε (burn keeps its own private).
    #[module(skip)]
    pub eps: f64,
    /// A token id whose embedding row gets no gradient from the lookup (torch's
    /// `padding_idx`, which transformers sets to the pad id). Only fine-tuning needs it: there a
    /// loss may read padded positions (SQuAD's start/end logits); pre-training losses never do.
    #[module(skip)]
    pub frozen_pad: Option<i64>,
}

/// `table`'s rows at `ids` [batch, len] → [batch, len, width] (`Embedding::forward`, through
/// the kernels' row lookup).
fn lookup(table: &Embedding, ids: Tensor<2, Int>) -> Tensor<3> {
    let [batch, len] = ids.dims();
    let [_, width] = table.weight.dims();
    kernels::select_rows(table.weight.val(), ids.reshape([batch * len]))
        .reshape([batch, len, width])
}

impl Embeddings {
    pub fn new(c: &EncoderConfig, device: &Device) -> Self {
        let emb = |n| {
            EmbeddingConfig::new(n, c.embedding_size)
                .with_initializer(normal_init())
                .init(device)
        };
        Self {
            word: emb(c.vocab_size),
            position: emb(c.max_position_embeddings),
            token_type: emb(c.type_vocab_size),
            norm: layer_norm(c.embedding_size, c.layer_norm_eps, device),
            dropout: DropoutConfig::new(c.hidden_dropout_prob).init(),
            eps: c.layer_norm_eps,
            frozen_pad: None,
        }
    }

    /// The same embeddings with the pad id's row frozen under the lookup (see `frozen_pad`).
    pub fn with_frozen_pad(mut self, pad: usize) -> Self {
        self.frozen_pad = Some(pad as i64);
        self
    }

    /// `ids`, `token_types`: [batch, len] → [batch, len, embedding_size].
    pub fn forward(&self, ids: Tensor<2, Int>, token_types: Tensor<2, Int>) -> Tensor<3> {
        let [batch, len] = ids.dims();
        let device = ids.device();
        let positions = Tensor::<1, Int>::arange(0..len as i64, &device)
            .unsqueeze::<2>()
            .expand([batch, len]);
        let word = match self.frozen_pad {
            Some(pad) => {
                let is_pad = ids.clone().equal_elem(pad).unsqueeze_dim::<3>(2);
                let w = lookup(&self.word, ids);
                let is_pad = is_pad.expand(w.dims());
                w.clone().mask_where(is_pad, w.detach())
            }
            None => lookup(&self.word, ids),
        };
        let x = word + lookup(&self.position, positions) + lookup(&self.token_type, token_types);
        dropout(&self.dropout, kernels::layer_norm(&self.norm, self.eps, x))
    }

    /// The word-embedding matrix [vocab, embedding_size] (tied to the MLM decoder).
    pub fn word_matrix(&self) -> Tensor<2> {
        self.word.weight.val()
    }

    pub fn walk(&mut self, prefix: &str, w: &mut dyn ParamWalker) {
        w.table(
            &format!("{prefix}.word_embeddings.weight"),
            &mut self.word.weight,
        );
        w.table(
            &format!("{prefix}.position_embeddings.weight"),
            &mut self.position.weight,
        );
        w.table(
            &format!("{prefix}.token_type_embeddings.weight"),
            &mut self.token_type.weight,
        );
        walk_layer_norm(w, &format!("{prefix}.LayerNorm"), &mut self.norm);
    }
}

/// One post-LayerNorm transformer layer.
#[derive(Module, Debug)]
pub struct Layer {
    pub query: Linear,
    pub key: Linear,
    pub value: Linear,
    pub attention_out: Linear,
    pub attention_norm: LayerNorm,
    pub intermediate: Linear,
    pub output: Linear,
    pub output_norm: LayerNorm,
    pub attention_dropout: Dropout,
    pub hidden_dropout: Dropout,
    pub heads: usize,
    #[module(skip)]
    pub precision: Precision,
    /// The LayerNorms' ε.
    #[module(skip)]
    pub eps: f64,
}

impl Layer {
    pub fn new(c: &EncoderConfig, device: &Device) -> Self {
        let h = c.hidden_size;
        Self {
            query: linear(h, h, device),
            key: linear(h, h, device),
            value: linear(h, h, device),
            attention_out: linear(h, h, device),
            attention_norm: layer_norm(h, c.layer_norm_eps, device),
            intermediate: linear(h, c.intermediate_size, device),
            output: linear(c.intermediate_size, h, device),
            output_norm: layer_norm(h, c.layer_norm_eps, device),
            attention_dropout: DropoutConfig::new(c.attention_probs_dropout_prob).init(),
            hidden_dropout: DropoutConfig::new(c.hidden_dropout_prob).init(),
            heads: c.num_attention_heads,
            precision: c.precision.on(device),
            eps: c.layer_norm_eps,
        }
    }

    /// `x`: [batch, len, hidden]; `mask_bias`: [batch, 1, 1, len] additive (0 or a large negative
    /// number on padded keys), `None` when no position is padded.
    pub fn forward(&self, x: Tensor<3>, mask_bias: Option<&Tensor<4>>) -> Tensor<3> {
        let p = self.precision;
        let ctx = self.attention(&x, mask_bias);
        let drop = &self.hidden_dropout;
        let attn = dropout_add(drop, p.linear(&self.attention_out, ctx), x);
        let a = kernels::layer_norm(&self.attention_norm, self.eps, attn);
        let inter = kernels::gelu(p.linear(&self.intermediate, a.clone()));
        let out = dropout_add(drop, p.linear(&self.output, inter), a);
        kernels::layer_norm(&self.output_norm, self.eps, out)
    }

    /// Self-attention's context: the three projections as one product against
    /// `[W_q | W_k | W_v]` (the parameters stay three, as transformers has them; the
    /// concatenation is rebuilt each call and its gradient split back), then
    /// [`kernels::attention()`] on the packed result.
    fn attention(&self, x: &Tensor<3>, mask_bias: Option<&Tensor<4>>) -> Tensor<3> {
        let [b, l, _] = x.dims();
        // Each weight in the compute dtype before the concatenation: under bf16 on LibTorch
        // devices a slice of one cast of all the parameters, and the gradient's three parts
        // come back contiguous (a cast each) instead of as column slices of one f32 gradient.
        let p = self.precision;
        let w = Tensor::cat(
            vec![
                p.param(self.query.weight.val()),
                p.param(self.key.weight.val()),
                p.param(self.value.weight.val()),
            ],
            1,
        );
        let bias = |lin: &Linear| match &lin.bias {
            Some(b) => b.val(),
            None => Tensor::zeros([lin.weight.dims()[1]], &x.device()),
        };
        let bias = Tensor::cat(
            vec![bias(&self.query), bias(&self.key), bias(&self.value)],
            0,
        );
        let qkv = self.precision.affine(x.clone(), w, Some(bias));
        let key_bias = mask_bias.map(|bias| bias.clone().reshape([b, l]));
        kernels::attention(
            qkv,
            key_bias,
            self.heads,
            &self.attention_dropout,
            p.products(),
        )
    }

    pub fn walk(&mut self, prefix: &str, w: &mut dyn ParamWalker) {
        walk_linear(
            w,
            &format!("{prefix}.attention.self.query"),
            &mut self.query,
        );
        walk_linear(w, &format!("{prefix}.attention.self.key"), &mut self.key);
        walk_linear(
            w,
            &format!("{prefix}.attention.self.value"),
            &mut self.value,
        );
        walk_linear(
            w,
            &format!("{prefix}.attention.output.dense"),
            &mut self.attention_out,
        );
        walk_layer_norm(
            w,
            &format!("{prefix}.attention.output.LayerNorm"),
            &mut self.attention_norm,
        );
        walk_linear(
            w,
            &format!("{prefix}.intermediate.dense"),
            &mut self.intermediate,
        );
        walk_linear(w, &format!("{prefix}.output.dense"), &mut self.output);
        walk_layer_norm(
            w,
            &format!("{prefix}.output.LayerNorm"),
            &mut self.output_norm,
        );
    }
}

/// The layers of one encoder, with the optional `embeddings_project` in front of them. The
/// embeddings themselves live outside, so that ELECTRA's generator and discriminator share them.
#[derive(Module, Debug)]
pub struct Encoder {
    pub project: Option<Linear>,
    pub layers: Vec<Layer>,
    #[module(skip)]
    pub precision: Precision,
}

/// Additive attention bias from a 0/1 attention mask [batch, len] → [batch, 1, 1, len].
pub fn attention_bias(attention_mask: Tensor<2, Int>) -> Tensor<4> {
    let [b, l] = attention_mask.dims();
    let pad = attention_mask
        .equal_elem(0)
        .float()
        .mul_scalar(f32::MIN as f64);
    pad.reshape([b, 1, 1, l])
}

impl Encoder {
    pub fn new(c: &EncoderConfig, device: &Device) -> Self {
        Self {
            project: (c.embedding_size != c.hidden_size)
                .then(|| linear(c.embedding_size, c.hidden_size, device)),
            layers: (0..c.num_hidden_layers)
                .map(|_| Layer::new(c, device))
                .collect(),
            precision: c.precision.on(device),
        }
    }

    /// Every hidden state: index 0 the layers' input (after the projection), i the output of
    /// layer i. `attention_mask` is [batch, len] with 1 on real tokens, or `None` (no padding).
    pub fn forward_all(
        &self,
        embedded: Tensor<3>,
        attention_mask: Option<Tensor<2, Int>>,
    ) -> Vec<Tensor<3>> {
        let bias = attention_mask.map(attention_bias);
        let mut x = match &self.project {
            Some(p) => full(self.precision.linear(p, embedded)),
            None => embedded,
        };
        let mut states = Vec::with_capacity(self.layers.len() + 1);
        for (i, layer) in self.layers.iter().enumerate() {
            states.push(x.clone());
            // A data-parallel step watches the layer's gradients (kernels::grad_watch).
            x = match crate::kernels::grad_watch::layer(layer, &x, i) {
                Some(watched) => watched.forward(x, bias.as_ref()),
                None => layer.forward(x, bias.as_ref()),
            };
        }
        states.push(x);
        states
    }

    /// The last hidden state [batch, len, hidden].
    pub fn forward(
        &self,
        embedded: Tensor<3>,
        attention_mask: Option<Tensor<2, Int>>,
    ) -> Tensor<3> {
        let mut states = self.forward_all(embedded, attention_mask);
        states
            .pop()
            .expect("forward_all returns at least the input")
    }

    /// `prefix` is the model prefix (`bert`, `electra`): names `{prefix}.embeddings_project`
    /// and `{prefix}.encoder.layer.{i}`.
    pub fn walk(&mut self, prefix: &str, w: &mut dyn ParamWalker) {
        if let Some(p) = &mut self.project {
            walk_linear(w, &format!("{prefix}.embeddings_project"), p);
        }
        for (i, layer) in self.layers.iter_mut().enumerate() {
            layer.walk(&format!("{prefix}.encoder.layer.{i}"), w);
        }
    }
}
