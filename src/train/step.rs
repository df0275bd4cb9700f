//! One pre-training micro-step: forward passes and the loss of the configured objective.
//!
//! BERT: `L = L_mlm` (+ SR / HC). ELECTRA: the generator predicts the masked tokens, samples
//! replacements (temperature 1, `model::sampling`), the discriminator detects them:
//! `L = L_G + λ·L_D` (+ SR on the shared embeddings / generator, HC on L_G).

use burn::prelude::*;

use super::config::PretrainConfig;
use super::model::{Net, PretrainModel};
use crate::lexicon::SynonymTable;
use crate::model::{Inputs, host_ids};
use crate::objective::hard_correction::MultiPiece;
use crate::objective::{
    CorrectionCounts, DiscriminatorCorrection, Prediction, correction_weights,
    masked_cross_entropy, replaced_token_loss, sentence_regularization, word_regularization,
};
use crate::text::batches::Batch;
use crate::text::masking::Masked;

pub(crate) fn ints(values: &[u32], shape: [usize; 2], device: &Device) -> Tensor<2, Int> {
    let v: Vec<i64> = values.iter().map(|&x| x as i64).collect();
    Tensor::from_data(TensorData::new(v, shape), device)
}

pub(crate) fn ints1(values: impl Iterator<Item = i64>, device: &Device) -> Tensor<1, Int> {
    let v: Vec<i64> = values.collect();
    let n = v.len();
    Tensor::from_data(TensorData::new(v, [n]), device)
}

fn floats1(values: Vec<f32>, device: &Device) -> Tensor<1> {
    let n = values.len();
    Tensor::from_data(TensorData::new(values, [n]), device)
}

/// The model inputs of `batch` with token ids `ids` (the batch's own, or a corrupted copy).
pub(crate) fn inputs(batch: &Batch, ids: &[u32], device: &Device) -> Inputs {
    let shape = [batch.batch, batch.len];
    Inputs {
        ids: ints(ids, shape, device),
        token_types: ints(&batch.token_types, shape, device),
        attention_mask: (!batch.is_dense()).then(|| ints(&batch.attention_mask, shape, device)),
    }
}

/// A loss term of one replica's micro-batch: its mean over the replica's `count` units
/// (masked positions, kept positions, weighted tokens, sentences). Over replicas r the term of
/// the whole micro-batch is `Σ_r count_r · value_r / Σ_r count_r`.
#[derive(Clone)]
pub struct Term {
    pub value: Tensor<1>,
    pub count: f64,
}

impl Term {
    pub fn new(value: Tensor<1>, count: usize) -> Self {
        Self {
            value,
            count: count as f64,
        }
    }

    /// The term times `c` (a weight of the objective), with the same count.
    pub fn times(&self, c: f64) -> Self {
        Self {
            value: self.value.clone().mul_scalar(c),
            count: self.count,
        }
    }
}

/// Loss terms of one micro-batch, still on the device, and host-side counts.
pub struct StepLoss {
    /// The objective `L = Σ_t c_t·L_t + R`: part t is `c_t·L_t` (its weight applied) with the
    /// count of `L_t`; see [`StepLoss::objective`].
    pub parts: Vec<Term>,
    /// `R`, a term that depends on no example (CLINE's learned-weight regulariser).
    pub shared: Option<Tensor<1>>,
    pub mlm: Term,
    pub disc: Option<Term>,
    pub disc_correct: Option<Tensor<1>>,
    pub sr: Option<Term>,
    pub sr_sent: Option<Term>,
    pub corrections: Option<CorrectionCounts>,
    pub real_tokens: usize,
    /// CLINE only.
    pub cline: Option<ClineTerms>,
}

impl StepLoss {
    /// This replica's share of the micro-batch objective over `replicas` replicas:
    /// `Σ_t (n_t / N_t)·part_t + R / replicas`, where `n_t` is this replica's count of part t
    /// and `N_t = totals[t]` the count over all replicas. The shares add up to the objective
    /// of the whole micro-batch, so the summed gradients of the replicas are its gradient
    /// whatever the split. One replica: the plain sum.
    pub fn objective(&self, totals: &[f64], replicas: usize) -> Tensor<1> {
        let share = |p: &Term, total: f64| {
            if replicas == 1 {
                p.value.clone()
            } else {
                let w = if total > 0.0 { p.count / total } else { 0.0 };
                p.value.clone().mul_scalar(w)
            }
        };
        let mut parts = self.parts.iter().zip(totals);
        let (first, total) = parts.next().expect("an objective has a term");
        let mut sum = share(first, *total);
        for (p, total) in parts {
            sum = sum + share(p, *total);
        }
        match &self.shared {
            Some(r) if replicas == 1 => sum + r.clone(),
            Some(r) => sum + r.clone().div_scalar(replicas as f64),
            None => sum,
        }
    }
}

/// CLINE's terms of one micro-batch (see [`super::cline_step`]).
pub struct ClineTerms {
    pub rtd: Term,
    /// Detection predictions that are right, over the `rtd_counted` labelled pieces.
    pub rtd_correct: Tensor<1>,
    pub rtd_counted: usize,
    pub contrast: Term,
    /// Share of the examples where h_o is closer (dot product) to h_s than to h_a.
    pub syn_closer: Term,
    /// The weights w1..w3 the total used ([3]; exp(−s_i) when learned).
    pub weights: Tensor<1>,
}

/// The masked ids with each masked position replaced by `predicted`.
fn filled(batch: &Batch, m: &Masked, predicted: &[u32]) -> Vec<u32> {
    let mut ids = batch.ids.clone();
    for (&p, &t) in m.positions.iter().zip(predicted) {
        ids[p] = t;
    }
    ids
}

/// Forward pass and loss of one masked micro-batch. `table` is needed for Hard Correction.
pub fn step_loss(
    model: &PretrainModel,
    cfg: &PretrainConfig,
    table: Option<&SynonymTable>,
    multi_piece: Option<&MultiPiece>,
    batch: &Batch,
    m: &Masked,
    device: &Device,
) -> StepLoss {
    let obj = &cfg.objective;
    let x = inputs(batch, &m.input_ids, device);
    let positions = ints1(m.positions.iter().map(|&p| p as i64), device);
    let labels = ints1(m.labels.iter().map(|&l| l as i64), device);
    let real_tokens = batch.attention_mask.iter().filter(|&&v| v == 1).count();
    let rows: Vec<usize> = m.positions.iter().map(|&p| p / batch.len.max(1)).collect();
    let shape = [batch.batch, batch.len];

    let (logits, words) = match &model.net {
        Net::Bert(b) => (b.mlm_logits(&x, positions), b.embeddings.word_matrix()),
        Net::Electra(e) => (
            e.generator_logits(&x, positions),
            e.embeddings.word_matrix(),
        ),
    };
    let argmax = logits.clone().detach().argmax(1).squeeze_dim::<1>(1);
    let sampled = match &model.net {
        Net::Electra(_) => Some(crate::model::sampling::sample(&logits)),
        Net::Bert(_) => None,
    };
    let needs_argmax_host = obj.kind.sentence_regularization()
        || (obj.kind.hard_correction()
            && (obj.hc_prediction == Prediction::Argmax || sampled.is_none()));
    let argmax_host = needs_argmax_host.then(|| host_ids(argmax.clone()));

    let (weights, corrections, mlm_count) = if obj.kind.hard_correction() {
        let table = table.expect("a synonym table for Hard Correction");
        let pred = match (obj.hc_prediction, &sampled) {
            (Prediction::Sampled, Some(s)) => s,
            _ => argmax_host.as_ref().expect("argmax on host"),
        };
        let (mut w, mut c) = correction_weights(pred, &m.labels, &rows, batch.batch, table);
        if let Some(mp) = multi_piece {
            let words = mp.masked_words(&batch.ids, batch.len, &m.positions);
            c.corrected += mp.correct(&words, pred, &m.labels, &mut w);
            let mut hit = vec![false; batch.batch];
            for (k, &wk) in w.iter().enumerate() {
                hit[rows[k]] |= wk == 0.0;
            }
            c.sequences_corrected = hit.iter().filter(|&&h| h).count();
        }
        // The loss averages over the positions kept (weight 1).
        let kept = w.iter().filter(|&&v| v != 0.0).count();
        (Some(floats1(w, device)), Some(c), kept)
    } else {
        (None, None, m.positions.len())
    };
    let mlm = Term::new(
        masked_cross_entropy(logits, labels.clone(), weights),
        mlm_count,
    );
    let mut parts = vec![mlm.clone()];

    let sr = obj.kind.word_regularization().then(|| {
        Term::new(
            word_regularization(words, argmax, labels),
            m.positions.len(),
        )
    });
    if let Some(r) = &sr {
        parts.push(r.times(obj.sr_weight));
    }
    let sr_sent = obj.kind.sentence_regularization().then(|| {
        let pred_ids = filled(batch, m, argmax_host.as_ref().expect("argmax on host"));
        let xp = Inputs {
            ids: ints(&pred_ids, shape, device),
            ..x.clone()
        };
        let xs = Inputs {
            ids: ints(&batch.ids, shape, device),
            ..x.clone()
        };
        let (hp, hs) = match &model.net {
            Net::Bert(b) => (b.encode(&xp), b.encode(&xs)),
            Net::Electra(e) => (e.generator_encode(&xp), e.generator_encode(&xs)),
        };
        Term::new(
            sentence_regularization(hp, hs, ints(&batch.attention_mask, shape, device).float()),
            real_tokens,
        )
    });
    if let Some(r) = &sr_sent {
        parts.push(r.times(obj.sr_sent_weight));
    }

    let (disc, disc_correct) = match (&model.net, &sampled) {
        (Net::Electra(e), Some(sampled)) => {
            let disc_ids = filled(batch, m, sampled);
            let mut replaced = vec![0u32; batch.ids.len()];
            let mut weights: Vec<u32> = batch.attention_mask.clone();
            for ((&p, &s), &gold) in m.positions.iter().zip(sampled).zip(&m.labels) {
                let synonym = obj.hc_discriminator != DiscriminatorCorrection::Off
                    && table.is_some_and(|t| t.are_synonyms(gold, s));
                replaced[p] = u32::from(s != gold);
                match obj.hc_discriminator {
                    DiscriminatorCorrection::Relabel if synonym => replaced[p] = 0,
                    DiscriminatorCorrection::Ignore if synonym => weights[p] = 0,
                    _ => {}
                }
            }
            let dx = Inputs {
                ids: ints(&disc_ids, shape, device),
                ..x
            };
            let d_logits = e.discriminator_logits(&dx);
            let target = ints(&replaced, shape, device).float();
            let w = ints(&weights, shape, device).float();
            let correct = (d_logits
                .clone()
                .detach()
                .greater_elem(0.0)
                .float()
                .equal(target.clone())
                .float()
                * w.clone())
            .sum();
            let counted = weights.iter().filter(|&&v| v != 0).count();
            let disc = Term::new(replaced_token_loss(d_logits, target, w), counted);
            parts.push(disc.times(cfg.train.disc_weight));
            (Some(disc), Some(correct))
        }
        _ => (None, None),
    };
    StepLoss {
        parts,
        shared: None,
        mlm,
        disc,
        disc_correct,
        sr,
        sr_sent,
        corrections,
        real_tokens,
        cline: None,
    }
}
