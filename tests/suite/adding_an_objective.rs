//! `docs/adding-an-objective.md` followed once: a toy objective written as one [`Part`] (what
//! would be its own file in `src/objective/`) trains through the real masked-LM step, and the
//! loop's generic machinery logs its term, adds it to the loss with its weight, sums it over
//! replicas and reports its window counts, with no other code naming it.

use crate::common;

use std::collections::BTreeMap;

use burn::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use trueneg::objective::terms::{self, HostValue};
use trueneg::objective::{Counters, MlmStep, Objective, Part, StepLoss, Term};
use trueneg::text::batches::{BatchStream, DataPosition};
use trueneg::text::masking::mask_batch;
use trueneg::text::shards::ShardSet;
use trueneg::train::config::PretrainConfig;
use trueneg::train::model::PretrainModel;
use trueneg::train::steps::masked_lm::{MaskedLmStep, MaskingContext};

/// The toy: `L_toy = mean_k |E[y_k]|²` over the masked positions (the squared norm of the gold
/// tokens' embedding rows), in the loss as `+ weight · L_toy`, logged as `toy_loss`; it counts
/// the masked positions whose gold id is even and logs their share of a window as
/// `toy_even_share`.
struct EmbeddingNorm {
    weight: f64,
}

impl Part for EmbeddingNorm {
    fn add_terms(&self, s: &MlmStep, loss: &mut StepLoss) {
        let rows = s.words.clone().select(0, s.labels.clone());
        let value = rows.powf_scalar(2.0).sum_dim(1).mean();
        loss.add(
            "toy_loss",
            Term::new(value, s.masked.positions.len()),
            self.weight,
        );
        // Counted on the device, like every count of the step.
        let even = s
            .labels
            .clone()
            .remainder_scalar(2)
            .equal_elem(0)
            .int()
            .sum();
        loss.count("toy_even", even);
        loss.count("toy_masked", s.labels.ones_like().sum());
    }

    fn window_metrics(&self, c: &Counters, out: &mut BTreeMap<String, serde_json::Value>) {
        let share = c["toy_even"] as f64 / c["toy_masked"].max(1) as f64;
        out.insert("toy_even_share".into(), share.into());
    }
}

/// The tiny preset as BERT without dropout, at 64 tokens (the shared test shards').
fn tiny_bert() -> PretrainConfig {
    PretrainConfig::load(
        "tiny",
        &[
            "model.kind=bert".into(),
            "model.hidden_dropout_prob=0".into(),
            "model.attention_probs_dropout_prob=0".into(),
            "data.max_seq_len=64".into(),
        ],
    )
    .unwrap()
}

fn mean(v: &[(&'static str, HostValue)], name: &str) -> f64 {
    match v.iter().find(|(n, _)| *n == name) {
        Some((_, HostValue::Mean(x))) => *x,
        other => panic!("{name}: {other:?}"),
    }
}

#[test]
fn a_new_objective_is_one_part_and_the_loop_handles_its_terms() {
    let shards = ShardSet::open(common::shards()).unwrap();
    let cfg = tiny_bert();
    let device = Device::flex().autodiff();
    let vocab = shards.manifest.vocab_size;
    trueneg::model::seed(&device, 7);
    let kind = trueneg::train::steps::kind_of(cfg.objective.kind);
    let model = PretrainModel::of(&cfg.model_shape(vocab), &cfg.step_settings(), kind, &device);
    let objective = Objective {
        parts: vec![Box::new(EmbeddingNorm { weight: 0.25 })],
    };
    let step = MaskedLmStep::new(
        MaskingContext::new(&cfg.masking, &shards),
        objective,
        cfg.train.disc_weight,
    );
    let mut stream = BatchStream::new(&shards, 1, 8, DataPosition::default());
    let batch = stream.next_batch().unwrap();
    let special = shards.manifest.special_ids;
    let m = mask_batch(
        &batch,
        &cfg.masking,
        &special,
        vocab,
        &mut ChaCha8Rng::seed_from_u64(3),
    );

    // One replica: the term is logged by name and joins the loss with its weight.
    let whole = step.loss_of(&model, &batch, &m, &device);
    let names: Vec<&str> = whole.logged.iter().map(|(n, _)| *n).collect();
    assert_eq!(names, ["mlm_loss", "mlm_accuracy", "toy_loss"]);
    let objective_value = terms::objectives(std::slice::from_ref(&whole)).remove(0);
    let v = terms::combine(
        std::slice::from_ref(&whole),
        std::slice::from_ref(&objective_value),
    );
    let (mlm, toy) = (mean(&v.logged, "mlm_loss"), mean(&v.logged, "toy_loss"));
    let words = model_words(&model);
    let dim = words.len() / vocab;
    let by_hand: f64 = m
        .labels
        .iter()
        .map(|&y| {
            let row = &words[y as usize * dim..(y as usize + 1) * dim];
            row.iter().map(|&x| (x as f64).powi(2)).sum::<f64>()
        })
        .sum::<f64>()
        / m.labels.len() as f64;
    assert!((toy - by_hand).abs() < 1e-4 * by_hand, "{toy} vs {by_hand}");
    assert!(
        (v.loss - (mlm + 0.25 * toy)).abs() < 1e-4,
        "{} vs {mlm} + 0.25·{toy}",
        v.loss
    );

    // Two replicas of four rows each: the summed shares are the whole batch's objective, the
    // logged term its count-weighted mean, the counts their sum.
    let halves: Vec<StepLoss> = [0..4, 4..8]
        .into_iter()
        .map(|rows| {
            let mr = m.rows(batch.len, rows.clone());
            step.loss_of(&model, &batch.rows(rows), &mr, &device)
        })
        .collect();
    let shares = terms::objectives(&halves);
    let split = terms::combine(&halves, &shares);
    assert!(
        (split.loss - v.loss).abs() < 1e-4,
        "{} vs {}",
        split.loss,
        v.loss
    );
    assert!((mean(&split.logged, "toy_loss") - toy).abs() < 1e-4 * toy);
    assert_eq!(split.counters, v.counters);

    // The window's values come from the part itself.
    let w = step.objective.window_metrics(&v.counters);
    let even = m.labels.iter().filter(|&&y| y % 2 == 0).count() as f64;
    assert_eq!(w["toy_even_share"], even / m.labels.len() as f64);
}

/// The BERT model's word-embedding matrix on the host, row-major.
fn model_words(model: &PretrainModel) -> Vec<f32> {
    let words = match &model.net {
        trueneg::train::model::Net::Bert(b) => b.embeddings.word_matrix(),
        trueneg::train::model::Net::Electra(e) => e.embeddings.word_matrix(),
    };
    words
        .into_data()
        .convert::<f32>()
        .try_to_vec::<f32>()
        .unwrap()
}

// ---------------------------------------------------------------------------------------------
// The second seam: a training step with its own data and its own head (what would be one file
// in `src/train/steps/`, its row in `KINDS` / `with_step`, its objective kind's row and, for a
// new kind of corpus, a `DataKind`), trained through the one micro-step loop.

use std::ops::Range;

use burn::nn::Linear;
use burn::prelude::Module;
use trueneg::model::encoder::linear;
use trueneg::model::params::{ParamWalker, walk_linear};
use trueneg::model::step_heads::HeadsModule;
use trueneg::objective::{Count, Logged};
use trueneg::text::batches::Batch;
use trueneg::text::shards::DataKind;
use trueneg::train::micro_steps::{LoopSettings, StepRun, train_step};
use trueneg::train::optimizer::AdamW;
use trueneg::train::replicas::Replicas;
use trueneg::train::steps::{MicroBatch, StepKind, TrainingStep};

/// The toy step's own head: one logit on the [CLS] vector.
#[derive(Module, Debug)]
struct OrderHead {
    dense: Linear,
}

impl HeadsModule for OrderHead {
    fn walk_params(&mut self, w: &mut dyn ParamWalker) {
        walk_linear(w, "order.dense", &mut self.dense);
    }
}

/// The toy step's declarations.
struct OrderKind;

impl StepKind for OrderKind {
    fn name(&self) -> &'static str {
        "the order step"
    }

    fn data(&self) -> DataKind {
        DataKind::Packed
    }

    fn heads_prefix(&self) -> Option<&'static str> {
        Some("order")
    }
}

/// Its own data: packed examples, every other row's tokens between [CLS] and [SEP] reversed,
/// and which rows are.
#[derive(Clone)]
struct OrderBatch {
    batch: Batch,
    reversed: Vec<bool>,
}

impl MicroBatch for OrderBatch {
    fn rows(&self) -> usize {
        self.batch.batch
    }

    fn masked(&self) -> usize {
        0
    }

    fn tokens(&self) -> usize {
        self.batch.batch * self.batch.len
    }

    fn take_rows(&self, rows: Range<usize>) -> Self {
        Self {
            reversed: self.reversed[rows.clone()].to_vec(),
            batch: self.batch.rows(rows),
        }
    }
}

/// The toy step: is a row's word order reversed? `L = BCE(w·h_[CLS] + b, reversed)`.
struct OrderStep;

impl TrainingStep for OrderStep {
    type Batch = OrderBatch;

    fn kind(&self) -> &'static dyn StepKind {
        &OrderKind
    }

    fn batch(
        &self,
        shards: &ShardSet,
        indices: &[usize],
        _rng: &mut ChaCha8Rng,
    ) -> trueneg::Result<OrderBatch> {
        let mut examples: Vec<_> = indices.iter().map(|&i| shards.get(i)).collect();
        let reversed: Vec<bool> = (0..examples.len()).map(|r| r % 2 == 1).collect();
        for (e, &rev) in examples.iter_mut().zip(&reversed) {
            let n = e.tokens.len();
            if rev && n > 3 {
                e.tokens[1..n - 1].reverse();
            }
        }
        let batch = Batch::from_examples(&examples, shards.manifest.special_ids.pad);
        Ok(OrderBatch { batch, reversed })
    }

    fn loss(&self, model: &PretrainModel, b: &OrderBatch, device: &Device) -> StepLoss {
        let head: &OrderHead = model.heads().expect("the order head");
        let x = trueneg::train::upload::inputs(&b.batch, &b.batch.ids, device);
        let h = model.net.encode(&x);
        let [n, _, d] = h.dims();
        let cls = h.slice([0..n, 0..1, 0..d]).reshape([n, d]);
        let z = head.dense.forward(cls).reshape([n]);
        let y: Vec<f32> = b.reversed.iter().map(|&r| r as u8 as f32).collect();
        let y = Tensor::<1>::from_data(TensorData::new(y, [n]), device);
        let log_p = burn::tensor::activation::log_sigmoid(z.clone());
        let log_q = burn::tensor::activation::log_sigmoid(z.clone().neg());
        let value = (y.clone() * log_p + (y.ones_like() - y.clone()) * log_q)
            .mean()
            .neg();
        let hits = z.detach().greater_elem(0.0).float().equal(y).float().sum();
        let mut loss = StepLoss::new("order_loss", Term::new(value, n));
        loss.log(
            "order_accuracy",
            Logged::Rate {
                hits,
                of: Count::Host(n as f64),
            },
        );
        loss
    }
}

#[test]
fn a_new_step_with_its_own_data_and_head_trains_through_the_one_loop() {
    let shards = ShardSet::open(common::shards()).unwrap();
    let cfg = tiny_bert();
    let base = Device::flex();
    let device = base.clone().autodiff();
    trueneg::model::seed(&base, 11);
    let mut model = PretrainModel::of(
        &cfg.model_shape(shards.manifest.vocab_size),
        &cfg.step_settings(),
        trueneg::train::steps::kind_of(cfg.objective.kind),
        &device,
    );
    let hidden = cfg.model.encoder.hidden_size;
    model.heads = Some(Box::new(OrderHead {
        dense: linear(hidden, 1, &device),
    }));
    let head_before = head_weights(&mut model);
    let mut replicas = Replicas::new(model, AdamW::new(cfg.optimizer.clone()), vec![base]).unwrap();
    let settings = LoopSettings {
        seed: 5,
        grad_accum: 2,
        max_grad_norm: 1.0,
    };
    let mut stream = BatchStream::new(&shards, 1, 8, DataPosition::default());
    let mut counts = trueneg::objective::terms::WindowCounts::default();
    let mut losses = Vec::new();
    for step in 0..12 {
        let run = StepRun {
            step,
            lr: 1e-3,
            settings: &settings,
            stream: &mut stream,
            counts: &mut counts,
            fixed: None,
        };
        let out = train_step(&OrderStep, run, &mut replicas).unwrap();
        assert_eq!(out.micro.len(), 2, "one value per micro-step");
        assert_eq!(out.masked, 0, "the step masks nothing");
        let values = replicas.read(out.micro).unwrap();
        let logged = values.logged_values();
        assert!(logged.contains_key("order_loss") && logged.contains_key("order_accuracy"));
        losses.push(values.mean_loss());
    }
    assert!(losses.iter().all(|l| l.is_finite()), "{losses:?}");
    // The head is one of the model's parameters: the optimizer trained it.
    let head_after = head_weights(&mut replicas.models[0]);
    assert_ne!(head_before, head_after, "the step's head was updated");
    let first: f64 = losses[..3].iter().sum::<f64>() / 3.0;
    let last: f64 = losses[losses.len() - 3..].iter().sum::<f64>() / 3.0;
    assert!(last < first, "the toy task is learnt: {losses:?}");
}

/// The step head's parameters, by name.
fn head_weights(model: &mut PretrainModel) -> BTreeMap<String, Vec<f32>> {
    model
        .export()
        .into_iter()
        .filter(|(k, _)| k.starts_with("order."))
        .map(|(k, t)| (k, t.values))
        .collect()
}
