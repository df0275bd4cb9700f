//! `docs/adding-an-objective.md` followed once: a toy objective written as one [`Part`] (what
//! would be its own file in `src/objective/`) trains through the real masked-LM step, and the
//! loop's generic machinery logs its term, adds it to the loss with its weight, sums it over
//! replicas and reports its window counts, with no other code naming it.

mod common;

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

fn mean(v: &[(&'static str, HostValue)], name: &str) -> f64 {
    match v.iter().find(|(n, _)| *n == name) {
        Some((_, HostValue::Mean(x))) => *x,
        other => panic!("{name}: {other:?}"),
    }
}

#[test]
fn a_new_objective_is_one_part_and_the_loop_handles_its_terms() {
    let shards = ShardSet::open(common::shards()).unwrap();
    let cfg = PretrainConfig::load(
        "tiny",
        &[
            "model.kind=bert".into(),
            "model.hidden_dropout_prob=0".into(),
            "model.attention_probs_dropout_prob=0".into(),
            "data.max_seq_len=64".into(),
        ],
    )
    .unwrap();
    let device = Device::flex().autodiff();
    let vocab = shards.manifest.vocab_size;
    trueneg::model::seed(&device, 7);
    let model = PretrainModel::new(&cfg, vocab, &device);
    let objective = Objective {
        parts: vec![Box::new(EmbeddingNorm { weight: 0.25 })],
    };
    let step = MaskedLmStep::new(
        MaskingContext::of(&cfg, &shards),
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
