//! ELECTRA's joint SQuAD head (google-research/electra `finetune/qa/qa_tasks.py`, with the
//! defaults of `configure_finetuning.py`: `joint_prediction`, `answerable_classifier`,
//! `answerable_uses_start_logits`, `answerable_weight` 0.5, `beam_size` 20).
//!
//! - The answer mask allows the context (segment 1, its closing `[SEP]` included) and `[CLS]`;
//!   every other position's logit gets −1000, in training and at inference.
//! - Start logits: one dense layer over each hidden state.
//! - End logits are conditioned on a start: the start's hidden state beside each position's,
//!   concatenated `[start, position]`, through a 512-unit GELU layer (`qa_hidden`) and a dense
//!   layer to one logit. Training conditions on the gold start (teacher forcing); inference on
//!   each of the `beam` best starts by log-softmax, keeping the `beam` best ends of each.
//! - An answerability classifier: `[CLS]`'s hidden state beside the start distribution's
//!   expectation of the hidden states, a 512-unit GELU layer, one logit, trained with a
//!   sigmoid cross-entropy on `is_impossible` (always false in SQuAD v1.1, so it learns
//!   "answerable"; SQuAD v1.1's decoding does not read it).
//! - Loss per window: (CE(start) + CE(end)) / 2 + 0.5 · BCE(answerable); the batch's mean.
//!
//! The dense layers start as TensorFlow's `tf.layers.dense` does (Glorot-uniform weights, zero
//! biases). transformers has no class for this head, so `export` refuses a model that has it.

use burn::module::{Module, Param};
use burn::nn::{Initializer, Linear};
use burn::prelude::*;
use burn::tensor::activation::{log_softmax, softmax};

use crate::interop::tensors::HostTensor;
use crate::model::Inputs;
use crate::model::params::{ParamWalker, walk_linear};

/// Width of the end and answerability layers.
pub const INNER: usize = 512;
/// Weight of the answerability loss.
pub const ANSWERABLE_WEIGHT: f64 = 0.5;
/// Added to the logits of positions outside the answer mask.
const OUTSIDE: f64 = 1000.0;

/// The head's layers (saved as `qa_start`, `qa_hidden`, `qa_end`, `qa_answerable_hidden`,
/// `qa_answerable`).
#[derive(Module, Debug)]
pub struct JointSpanHead {
    pub start: Linear,
    pub hidden: Linear,
    pub end: Linear,
    pub answerable_hidden: Linear,
    pub answerable: Linear,
}

/// What training compares with the gold spans.
pub struct JointOutputs {
    /// [batch, len], masked.
    pub start_logits: Tensor<2>,
    /// [batch, len], masked, each row conditioned on its gold start.
    pub end_logits: Tensor<2>,
    /// `[batch]`.
    pub answerable: Tensor<1>,
}

/// The training targets of a batch of windows.
pub struct JointTargets<'a> {
    pub start: &'a [usize],
    pub end: &'a [usize],
    pub impossible: &'a [bool],
}

/// The beam of a batch of windows, on the host: for window `b`, start `i` is
/// `start_index[b·k + i]` with log-probability `start_lp[b·k + i]`; its end `j` is
/// `end_index[(b·k + i)·k + j]` with `end_lp[…]`.
pub struct Beam {
    pub k: usize,
    pub start_lp: Vec<f32>,
    pub start_index: Vec<usize>,
    pub end_lp: Vec<f32>,
    pub end_index: Vec<usize>,
}

/// One window's part of a [`Beam`].
#[derive(Clone, Copy)]
pub struct WindowBeam<'a> {
    pub k: usize,
    pub start_lp: &'a [f32],
    pub start_index: &'a [usize],
    pub end_lp: &'a [f32],
    pub end_index: &'a [usize],
}

impl Beam {
    pub fn window(&self, b: usize) -> WindowBeam<'_> {
        let (k, s, e) = (self.k, b * self.k, b * self.k * self.k);
        WindowBeam {
            k,
            start_lp: &self.start_lp[s..s + k],
            start_index: &self.start_index[s..s + k],
            end_lp: &self.end_lp[e..e + k * k],
            end_index: &self.end_index[e..e + k * k],
        }
    }
}

fn glorot(d_in: usize, d_out: usize, device: &Device) -> Linear {
    let init = Initializer::XavierUniform { gain: 1.0 };
    Linear {
        weight: init.init_with([d_in, d_out], Some(d_in), Some(d_out), device),
        bias: Some(Param::from_tensor(Tensor::zeros([d_out], device))),
    }
}

/// −1000 outside the answer mask (`[CLS]` and the context), 0 inside: `[batch, len]`.
fn outside_penalty(x: &Inputs) -> Tensor<2> {
    let [b, l] = x.token_types.dims();
    let device = x.token_types.device();
    let mut answer = x.token_types.clone().float();
    if let Some(mask) = &x.attention_mask {
        answer = answer * mask.clone().float();
    }
    let mut cls = vec![0f32; l];
    cls[0] = 1.0;
    let cls = Tensor::<1>::from_data(TensorData::new(cls, [l]), &device).reshape([1, l]);
    (answer + cls.expand([b, l]))
        .sub_scalar(1.0)
        .mul_scalar(OUTSIDE)
}

/// The `k` largest of `row` (value, index), largest first; the lower index first on ties.
fn top_k(row: &[f32], k: usize) -> Vec<(f32, usize)> {
    let mut idx: Vec<usize> = (0..row.len()).collect();
    idx.sort_by(|&a, &b| row[b].total_cmp(&row[a]).then(a.cmp(&b)));
    idx.into_iter().take(k).map(|i| (row[i], i)).collect()
}

impl JointSpanHead {
    pub fn new(hidden: usize, device: &Device) -> Self {
        Self {
            start: glorot(hidden, 1, device),
            hidden: glorot(2 * hidden, INNER, device),
            end: glorot(INNER, 1, device),
            answerable_hidden: glorot(2 * hidden, INNER, device),
            answerable: glorot(INNER, 1, device),
        }
    }

    pub fn walk(&mut self, w: &mut dyn ParamWalker) {
        walk_linear(w, "qa_start", &mut self.start);
        walk_linear(w, "qa_hidden", &mut self.hidden);
        walk_linear(w, "qa_end", &mut self.end);
        walk_linear(w, "qa_answerable_hidden", &mut self.answerable_hidden);
        walk_linear(w, "qa_answerable", &mut self.answerable);
    }

    /// Masked start logits [batch, len] from hidden states [batch, len, hidden].
    fn start_logits(&self, h: Tensor<3>, penalty: Tensor<2>) -> Tensor<2> {
        let [b, l, _] = h.dims();
        self.start.forward(h).reshape([b, l]) + penalty
    }

    /// The end logits [rows, len] of `starts` [rows, len, hidden] (a start's hidden state,
    /// repeated) beside `h` [rows, len, hidden].
    fn end_logits(&self, starts: Tensor<3>, h: Tensor<3>, penalty: Tensor<2>) -> Tensor<2> {
        let [r, l, _] = h.dims();
        let inner = crate::kernels::gelu(self.hidden.forward(Tensor::cat(vec![starts, h], 2)));
        self.end.forward(inner).reshape([r, l]) + penalty
    }

    /// The answerability logit `[batch]`: `[CLS]` beside the start distribution's expected hidden
    /// state.
    fn answerable_logit(&self, h: Tensor<3>, start_logits: Tensor<2>) -> Tensor<1> {
        let [b, l, d] = h.dims();
        let p = softmax(start_logits, 1).reshape([b, l, 1]);
        let expected = (p * h.clone()).sum_dim(1).reshape([b, d]);
        let cls = h.slice([0..b, 0..1, 0..d]).reshape([b, d]);
        let inner = crate::kernels::gelu(
            self.answerable_hidden
                .forward(Tensor::cat(vec![cls, expected], 1)),
        );
        self.answerable.forward(inner).reshape([b])
    }

    /// Training's outputs, the end conditioned on each window's gold start.
    pub fn train_outputs(&self, h: Tensor<3>, x: &Inputs, gold_start: &[usize]) -> JointOutputs {
        let [b, l, d] = h.dims();
        let device = h.device();
        let penalty = outside_penalty(x);
        let start_logits = self.start_logits(h.clone(), penalty.clone());
        let index: Vec<i64> = gold_start
            .iter()
            .flat_map(|&s| std::iter::repeat_n(s as i64, d))
            .collect();
        let index = Tensor::<3, Int>::from_data(TensorData::new(index, [b, 1, d]), &device);
        let starts = h.clone().gather(1, index).expand([b, l, d]);
        let end_logits = self.end_logits(starts, h.clone(), penalty);
        let answerable = self.answerable_logit(h, start_logits.clone());
        JointOutputs {
            start_logits,
            end_logits,
            answerable,
        }
    }

    /// The batch's loss (see the module documentation).
    pub fn loss(out: JointOutputs, t: &JointTargets) -> Tensor<1> {
        let device = out.start_logits.device();
        let n = t.start.len();
        let gold = |v: &[usize]| {
            let v: Vec<i64> = v.iter().map(|&x| x as i64).collect();
            Tensor::<1, Int>::from_data(TensorData::new(v, [n]), &device).reshape([n, 1])
        };
        let ls = log_softmax(out.start_logits, 1).gather(1, gold(t.start));
        let le = log_softmax(out.end_logits, 1).gather(1, gold(t.end));
        let span = (ls + le).reshape([n]).neg().div_scalar(2.0);
        let y: Vec<f32> = t
            .impossible
            .iter()
            .map(|&i| f32::from(u8::from(i)))
            .collect();
        let y = Tensor::<1>::from_data(TensorData::new(y, [n]), &device);
        // Sigmoid cross-entropy, stable: max(z, 0) − z·y + log(1 + e^(−|z|)).
        let z = out.answerable;
        let bce = z.clone().clamp_min(0.0) - z.clone() * y + z.abs().neg().exp().log1p();
        (span + bce.mul_scalar(ANSWERABLE_WEIGHT)).mean()
    }

    /// The `k` best starts of each window and the `k` best ends of each start.
    pub fn beam(&self, h: Tensor<3>, x: &Inputs, k: usize) -> Beam {
        let [b, l, d] = h.dims();
        let k = k.min(l);
        let device = h.device();
        let penalty = outside_penalty(x);
        let start_lp = HostTensor::from_tensor(log_softmax(
            self.start_logits(h.clone(), penalty.clone()),
            1,
        ))
        .values;
        let mut beam = Beam {
            k,
            start_lp: Vec::with_capacity(b * k),
            start_index: Vec::with_capacity(b * k),
            end_lp: Vec::with_capacity(b * k * k),
            end_index: Vec::with_capacity(b * k * k),
        };
        // qa_hidden on [start, position] is W_start·start + W_position·position + bias: the
        // positions' half once per window, the starts' half once per start, so the k × len
        // grid costs an addition, GELU and the last layer's dot product.
        let w = self.hidden.weight.val();
        let (w_start, w_position) = (
            w.clone().slice([0..d, 0..INNER]),
            w.slice([d..2 * d, 0..INNER]),
        );
        let mut positions = h.clone().reshape([b * l, d]).matmul(w_position);
        if let Some(bias) = &self.hidden.bias {
            positions = positions + bias.val().reshape([1, INNER]);
        }
        let positions = positions.reshape([b, l, INNER]);
        for row in 0..b {
            let top = top_k(&start_lp[row * l..(row + 1) * l], k);
            beam.start_lp.extend(top.iter().map(|t| t.0));
            beam.start_index.extend(top.iter().map(|t| t.1));
            let index: Vec<i64> = top
                .iter()
                .flat_map(|t| std::iter::repeat_n(t.1 as i64, d))
                .collect();
            let index = Tensor::<3, Int>::from_data(TensorData::new(index, [1, k, d]), &device);
            let starts = h
                .clone()
                .slice([row..row + 1, 0..l, 0..d])
                .gather(1, index)
                .reshape([k, d])
                .matmul(w_start.clone())
                .reshape([k, 1, INNER]);
            let grid = starts + positions.clone().slice([row..row + 1, 0..l, 0..INNER]);
            let pr = penalty.clone().slice([row..row + 1, 0..l]);
            let end = self.end.forward(crate::kernels::gelu(grid)).reshape([k, l]) + pr;
            let end_lp = HostTensor::from_tensor(log_softmax(end, 1)).values;
            for i in 0..k {
                for (v, j) in top_k(&end_lp[i * l..(i + 1) * l], k) {
                    beam.end_lp.push(v);
                    beam.end_index.push(j);
                }
            }
        }
        beam
    }
}
