//! CLINE's step (Wang et al., ACL 2021): a micro-step on a batch of (x_ori, x_syn, x_ant)
//! sentence triples, with heads of its own ([`TripleHeads`]: a detection head, a pooler and
//! learned loss weights, named `cline.…` in checkpoints).
//!
//! One batched forward pass of `[x_ori masked; x_syn; x_ant]` (and `x_ori` as it is, a fourth
//! block, with `objective.cline_ori = "unmasked"`), then
//! `L = w1·L_MLM + w2·L_RTD + w3·L_cts` (the losses and both weightings are in
//! [`crate::objective::contrastive`]):
//! - L_MLM: the masked x_ori rows (BERT: the encoder's MLM head; ELECTRA: the generator, and
//!   the discriminator serves as the encoder of the three sentences);
//! - L_RTD: the x_syn and x_ant rows at candidate pieces (binary: BERT's CLINE head or the
//!   ELECTRA discriminator's own head; three-way: CLINE's head);
//! - L_cts: h_o, h_s, h_a the `[CLS]` vectors (`infonce`) or their tanh pooler outputs (`bce`).

use std::ops::Range;

use burn::module::{Module, Param};
use burn::nn::Linear;
use burn::prelude::*;
use rand_chacha::ChaCha8Rng;

use super::masked_lm::MaskingContext;
use super::triples::TripleBatch;
use super::{MicroBatch, StepKind, TrainingStep};
use crate::Result;
use crate::model::encoder::linear;
use crate::model::heads::{RtdHead, gather_rows};
use crate::model::params::{ParamWalker, walk_linear};
use crate::model::step_heads::{HeadsModule, StepHeads};
use crate::model::{EncoderConfig, Inputs};
use crate::objective::contrastive::{
    ClineContrast, ClineLossConfig, ClineOri, ClineRtd, ClineWeights, bce_contrast,
    binary_detection_loss, infonce_contrast, learned_coefficients, learned_regulariser, syn_closer,
    three_way_detection_loss,
};
use crate::objective::{Logged, StepLoss, Term, masked_cross_entropy};
use crate::text::batches::Batch;
use crate::text::masking::Masked;
use crate::text::shards::{DataKind, ShardSet};
use crate::train::config::{ModelKind, StepSettings};
use crate::train::model::{Net, PretrainModel};
use crate::train::upload::{inputs, ints1};

/// The step's declarations: sentence triples, its heads, three sentences a row.
pub struct Kind;

pub const KIND: Kind = Kind;

impl StepKind for Kind {
    fn name(&self) -> &'static str {
        "CLINE's step"
    }

    fn data(&self) -> DataKind {
        DataKind::Triples
    }

    fn heads(
        &self,
        settings: &StepSettings,
        encoder: &EncoderConfig,
        device: &Device,
    ) -> Option<Box<dyn StepHeads>> {
        let electra = settings.model == ModelKind::Electra;
        let choice = head_choice(&settings.objective.cline, electra);
        let heads = TripleHeads::new(&choice, encoder, device);
        Some(Box::new(heads))
    }

    fn heads_prefix(&self) -> Option<&'static str> {
        Some(PREFIX)
    }

    fn undecayed(&self) -> &'static [&'static str] {
        &[LOSS_WEIGHTS]
    }

    fn sentences_per_row(&self) -> f64 {
        3.0
    }
}

/// The step of a run: its masking and its loss settings.
pub struct TripleStep {
    context: MaskingContext,
    loss: ClineLossConfig,
}

/// A micro-batch of triples, x_ori masked.
#[derive(Clone)]
pub struct MaskedTriples {
    pub triples: TripleBatch,
    pub masked: Masked,
}

impl MicroBatch for MaskedTriples {
    fn rows(&self) -> usize {
        self.triples.ori.batch
    }

    fn masked(&self) -> usize {
        self.masked.positions.len()
    }

    fn tokens(&self) -> usize {
        self.triples.ori.batch * self.triples.ori.len
    }

    fn take_rows(&self, rows: Range<usize>) -> Self {
        Self {
            masked: self.masked.rows(self.triples.ori.len, rows.clone()),
            triples: self.triples.rows(rows),
        }
    }
}

impl TripleStep {
    pub fn new(settings: &StepSettings, context: MaskingContext) -> Self {
        Self {
            context,
            loss: settings.objective.cline.clone(),
        }
    }
}

impl TrainingStep for TripleStep {
    type Batch = MaskedTriples;

    fn kind(&self) -> &'static dyn StepKind {
        &KIND
    }

    fn batch(
        &self,
        shards: &ShardSet,
        indices: &[usize],
        rng: &mut ChaCha8Rng,
    ) -> Result<MaskedTriples> {
        let triples = TripleBatch::new(&shards.triples(indices)?, shards.manifest.special_ids.pad);
        let masked = self.context.mask(&triples.ori, rng);
        Ok(MaskedTriples { triples, masked })
    }

    fn loss(&self, model: &PretrainModel, b: &MaskedTriples, device: &Device) -> StepLoss {
        triple_loss(model, &self.loss, &b.triples, &b.masked, device)
    }
}

/// The heads `o` asks for: a detection head of its own unless an ELECTRA discriminator's head
/// (`electra`) does the binary detection, the pooler for `bce`, the learned weights.
fn head_choice(o: &ClineLossConfig, electra: bool) -> HeadChoice {
    HeadChoice {
        detection_outputs: match o.cline_rtd {
            ClineRtd::ThreeWay => Some(3),
            ClineRtd::Binary | ClineRtd::BinaryAll if electra => None,
            ClineRtd::Binary | ClineRtd::BinaryAll => Some(1),
        },
        pooler: o.cline_contrast == ClineContrast::Bce,
        learned_weights: o.cline_weights == ClineWeights::Learned,
    }
}

/// The step's heads in `model`.
fn heads_of(model: &PretrainModel) -> &TripleHeads {
    model.heads().expect("the step's heads")
}

/// Rows `from..to` of a [rows, len, hidden] tensor.
fn rows(h: &Tensor<3>, from: usize, to: usize) -> Tensor<3> {
    let [_, l, d] = h.dims();
    h.clone().slice([from..to, 0..l, 0..d])
}

/// The sequences of the encoder pass, block by block, as one batch: x_ori (masked, or as it
/// is for ELECTRA with `unmasked`), x_syn, x_ant, and for BERT with `unmasked` x_ori as it is.
fn encoder_batch(model: &PretrainModel, unmasked: bool, cb: &TripleBatch, m: &Masked) -> Batch {
    let ori_ids = if unmasked && model.is_electra() {
        &cb.ori.ids
    } else {
        &m.input_ids
    };
    let mut blocks = vec![
        (&cb.ori, ori_ids),
        (&cb.syn, &cb.syn.ids),
        (&cb.ant, &cb.ant.ids),
    ];
    if unmasked && !model.is_electra() {
        blocks.push((&cb.ori, &cb.ori.ids));
    }
    Batch {
        batch: blocks.len() * cb.ori.batch,
        len: cb.ori.len,
        ids: blocks
            .iter()
            .flat_map(|(_, ids)| ids.iter().copied())
            .collect(),
        token_types: blocks
            .iter()
            .flat_map(|(s, _)| s.token_types.iter().copied())
            .collect(),
        attention_mask: blocks
            .iter()
            .flat_map(|(s, _)| s.attention_mask.iter().copied())
            .collect(),
    }
}

/// The MLM logits of the masked x_ori rows and the hidden states of the encoder pass over `x`
/// (BERT: one pass serves both; ELECTRA: the generator predicts, the discriminator encodes).
fn mlm_and_hidden(
    model: &PretrainModel,
    x: &Inputs,
    cb: &TripleBatch,
    m: &Masked,
    device: &Device,
) -> (Tensor<2>, Tensor<3>) {
    let positions = ints1(m.positions.iter().map(|&p| p as i64), device);
    match &model.net {
        Net::Bert(bert) => {
            let h = bert.encode(x);
            let logits = bert.head.forward(
                gather_rows(rows(&h, 0, cb.ori.batch), positions),
                bert.embeddings.word_matrix(),
            );
            (logits, h)
        }
        Net::Electra(e) => {
            let xo = inputs(&cb.ori, &m.input_ids, device);
            (e.generator_logits(&xo, positions), e.encode(x))
        }
    }
}

/// The paper's detection labels: every real token of x_syn and x_ant (attention mask 1,
/// specials included, as ELECTRA's RTD) is labelled, those not replaced 0.
pub fn every_token_labels(cb: &TripleBatch) -> Vec<i64> {
    let mask = cb.syn.attention_mask.iter().chain(&cb.ant.attention_mask);
    cb.labels
        .iter()
        .zip(mask)
        .map(|(&l, &m)| if m == 1 { l.max(0) } else { l })
        .collect()
}

/// Detection on the x_syn and x_ant rows `h_sa`: the loss over the labelled pieces and the
/// number of right predictions.
fn detection(
    model: &PretrainModel,
    o: &ClineLossConfig,
    h_sa: Tensor<3>,
    cb: &TripleBatch,
    device: &Device,
) -> (Term, Tensor<1>) {
    let heads = heads_of(model);
    let (b, len) = (cb.ori.batch, cb.ori.len);
    let labels = match o.cline_rtd {
        ClineRtd::BinaryAll => every_token_labels(cb),
        _ => cb.labels.clone(),
    };
    let counted = labels.iter().filter(|&&l| l != -100).count();
    let det_labels = Tensor::<2, Int>::from_data(TensorData::new(labels, [2 * b, len]), device);
    let keep = det_labels.clone().not_equal_elem(-100).float();
    match o.cline_rtd {
        ClineRtd::Binary | ClineRtd::BinaryAll => {
            let logits = match (&heads.detection, &model.net) {
                (Some(d), _) => d.forward(h_sa),
                (None, Net::Electra(e)) => e.discriminator_head.forward(h_sa),
                (None, Net::Bert(_)) => unreachable!("BERT has a CLINE detection head"),
            }
            .squeeze_dim::<2>(2);
            let correct = (logits
                .clone()
                .detach()
                .greater_elem(0.0)
                .equal(det_labels.clone().greater_elem(0))
                .float()
                * keep)
                .sum();
            (
                Term::new(binary_detection_loss(logits, det_labels), counted),
                correct,
            )
        }
        ClineRtd::ThreeWay => {
            let logits = heads
                .detection
                .as_ref()
                .expect("a three-way head")
                .forward(h_sa);
            let predicted = logits.clone().detach().argmax(2).squeeze_dim::<2>(2);
            let correct = (predicted.equal(det_labels.clone()).float() * keep).sum();
            (
                Term::new(three_way_detection_loss(logits, det_labels), counted),
                correct,
            )
        }
    }
}

/// Contrast on the `[CLS]` vectors of `h` (or their pooler outputs), block `ori_block` being
/// h_o: the loss and the share of examples whose h_o is closer to h_s, both over the `b`
/// examples.
fn contrast(
    model: &PretrainModel,
    o: &ClineLossConfig,
    h: Tensor<3>,
    b: usize,
    ori_block: usize,
) -> (Term, Term) {
    let heads = heads_of(model);
    let [n, _, d] = h.dims();
    let cls = h.slice([0..n, 0..1, 0..d]).reshape([n, d]);
    let block = |k: usize| cls.clone().slice([k * b..(k + 1) * b, 0..d]);
    let (vo, vs, va) = (block(ori_block), block(1), block(2));
    let (contrast, closer) = match o.cline_contrast {
        ClineContrast::Infonce => (
            infonce_contrast(vo.clone(), vs.clone(), va.clone()),
            syn_closer(vo.detach(), vs.detach(), va.detach()),
        ),
        ClineContrast::Bce => {
            let (po, ps, pa) = (heads.pool(vo), heads.pool(vs), heads.pool(va));
            (
                bce_contrast(po.clone(), ps.clone(), pa.clone()),
                syn_closer(po.detach(), ps.detach(), pa.detach()),
            )
        }
    };
    (Term::new(contrast, b), Term::new(closer, b))
}

/// The weighted parts of `L = w1·L_MLM + w2·L_RTD + w3·L_cts`, the regulariser of learned
/// weights, and the weights used (`[3]`).
fn weighting(
    model: &PretrainModel,
    o: &ClineLossConfig,
    terms: [&Term; 3],
    device: &Device,
) -> (Vec<Term>, Option<Tensor<1>>, Tensor<1>) {
    let heads = heads_of(model);
    match (o.cline_weights, &heads.loss_weights) {
        (ClineWeights::Learned, Some(s)) => {
            let s = s.val();
            let c = learned_coefficients(s.clone());
            let parts = terms
                .iter()
                .enumerate()
                .map(|(i, t)| Term {
                    value: t.value.clone() * c.clone().narrow(0, i, 1),
                    count: t.count.clone(),
                })
                .collect();
            (parts, Some(learned_regulariser(s)), c.detach())
        }
        _ => {
            let [l1, l2, l3] = o.cline_lambdas;
            let [mlm, rtd, contrast] = terms;
            (
                vec![mlm.times(l1), rtd.times(l2), contrast.times(l3)],
                None,
                Tensor::from_data(
                    TensorData::new(vec![l1 as f32, l2 as f32, l3 as f32], [3]),
                    device,
                ),
            )
        }
    }
}

/// Forward pass and loss of one micro-batch of triples; `m` masks `cb.ori`.
fn triple_loss(
    model: &PretrainModel,
    o: &ClineLossConfig,
    cb: &TripleBatch,
    m: &Masked,
    device: &Device,
) -> StepLoss {
    let b = cb.ori.batch;
    let unmasked = o.cline_ori == ClineOri::Unmasked;
    let all = encoder_batch(model, unmasked, cb, m);
    let x = inputs(&all, &all.ids, device);
    let (mlm_logits, h) = mlm_and_hidden(model, &x, cb, m, device);
    let labels = ints1(m.labels.iter().map(|&l| l as i64), device);
    let mlm = Term::new(
        masked_cross_entropy(mlm_logits, labels, None),
        m.positions.len(),
    );
    let (rtd, rtd_correct) = detection(model, o, rows(&h, b, 3 * b), cb, device);
    let counted = cb.labels.iter().filter(|&&l| l != -100).count();
    let ori_block = if unmasked && !model.is_electra() {
        3
    } else {
        0
    };
    let (contrast, closer) = contrast(model, o, h, b, ori_block);
    let (parts, shared, weights) = weighting(model, o, [&mlm, &rtd, &contrast], device);
    let mut loss = StepLoss::new(crate::objective::mlm::LOSS, mlm);
    loss.parts = parts;
    loss.shared = shared;
    loss.log("rtd_loss", Logged::Mean(rtd));
    loss.log(
        "rtd_accuracy",
        Logged::Rate {
            hits: rtd_correct,
            of: crate::objective::Count::Host(counted as f64),
        },
    );
    loss.log("contrast_loss", Logged::Mean(contrast));
    loss.log("syn_closer", Logged::Mean(closer));
    loss.log("loss_weights", Logged::Last(weights));
    loss
}

/// The parameters' name prefix.
pub const PREFIX: &str = "cline";

/// The learned loss weights' name: they take no weight decay (decay would pull every weight
/// exp(−s_i) toward 1).
pub const LOSS_WEIGHTS: &str = "cline.loss_weights";

/// The heads beside the encoder: a detection head (dense → GELU → 1 or 3 logits per token;
/// absent when an ELECTRA discriminator's own head does binary detection), a tanh pooler on
/// `[CLS]` (the `bce` contrast only) and the learned loss weights s_i (`learned` only).
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
