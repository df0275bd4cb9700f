//! bf16 mixed precision against f32 from the same weights, on the CPU backend (our kernels
//! round the products' operands to bf16 and sum in f32: `Precision::HostBf16`): outputs and gradients of one step, parameters and
//! gradients staying f32, and the loss curves of a 200-step pre-training run of the tiny preset.

use crate::common;
use common::{bin, metrics, ok, prepare_wikitext};

use burn::prelude::*;
use burn::tensor::DType;
use trueneg::model::{BertMlm, EncoderConfig, Inputs, Precision};
use trueneg::objective::masked_cross_entropy;
use trueneg::train::optimizer::Grads;

fn config(precision: Precision) -> EncoderConfig {
    EncoderConfig {
        vocab_size: 300,
        embedding_size: 32,
        hidden_size: 64,
        num_hidden_layers: 2,
        num_attention_heads: 4,
        intermediate_size: 128,
        max_position_embeddings: 64,
        type_vocab_size: 2,
        layer_norm_eps: 1e-12,
        hidden_dropout_prob: 0.0,
        attention_probs_dropout_prob: 0.0,
        pad_token_id: 0,
        precision,
    }
}

/// Tests of this binary that draw from the process-wide device RNG (model initialisation, random
/// inputs) hold this lock, so that a seeded test does not see another's draws.
static DEVICE_RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum();
    let na: f64 = a.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    dot / (na * nb)
}

fn host<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data()
        .convert::<f32>()
        .try_into_vec::<f32>()
        .unwrap()
}

#[test]
fn bf16_step_matches_f32_with_f32_weights_and_gradients() {
    let _rng = DEVICE_RNG.lock().unwrap_or_else(|e| e.into_inner());
    let d = Device::flex().autodiff();
    let ids: Vec<i64> = (0..4 * 32).map(|i| (i * 37 % 290 + 5) as i64).collect();
    // Padding in the second sequence exercises the f32 attention bias.
    let mask: Vec<i64> = (0..4 * 32)
        .map(|i| i64::from(!(32..32 + 8).contains(&i)))
        .collect();
    let x = Inputs {
        ids: Tensor::from_data(TensorData::new(ids.clone(), [4, 32]), &d),
        token_types: Tensor::zeros([4, 32], &d),
        attention_mask: Some(Tensor::from_data(TensorData::new(mask, [4, 32]), &d)),
    };
    let positions: Vec<i64> = vec![3, 17, 50, 70, 99, 120];
    let labels: Vec<i64> = positions.iter().map(|&p| ids[p as usize]).collect();
    let pos = || Tensor::<1, Int>::from_data(TensorData::new(positions.clone(), [6]), &d);
    let lab = || Tensor::<1, Int>::from_data(TensorData::new(labels.clone(), [6]), &d);

    let run = |precision| {
        trueneg::model::seed(&d, 3);
        let mut m = BertMlm::new(&config(precision), &d);
        let logits = m.mlm_logits(&x, pos());
        assert_eq!(logits.dtype(), DType::F32, "heads return f32 logits");
        let loss = masked_cross_entropy(logits.clone(), lab(), None);
        let g = Grads::collect(&loss.backward(), |w| m.walk(w));
        let grads: Vec<(String, Vec<f32>)> = g
            .entries
            .iter()
            .map(|(k, e)| {
                assert_eq!(e.grad.dtype(), DType::F32, "{k}: f32 gradient");
                (k.clone(), host(e.grad.clone()))
            })
            .collect();
        assert_eq!(m.embeddings.word_matrix().dtype(), DType::F32);
        (host(logits), host(loss)[0], grads)
    };
    let (l32, loss32, g32) = run(Precision::F32);
    let (l16, loss16, g16) = run(Precision::Bf16);

    let scale = l32.iter().fold(0f32, |m, v| m.max(v.abs()));
    let diff = l32
        .iter()
        .zip(&l16)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    // bf16 keeps 8 significant bits: relative error ~ 2^-8 per product, a few of them chained.
    assert!(
        diff <= 0.03 * scale,
        "logits: max |diff| {diff} (scale {scale})"
    );
    assert!(
        diff > 0.0,
        "bf16 changes the numbers: the casts are in the graph"
    );
    assert!(
        (loss32 - loss16).abs() <= 0.01 * loss32,
        "{loss32} vs {loss16}"
    );
    assert_eq!(g32.len(), g16.len());
    for ((name, a), (_, b)) in g32.iter().zip(&g16) {
        let norm: f32 = a.iter().map(|v| v * v).sum::<f32>().sqrt();
        if norm < 1e-6 {
            continue; // the attention key bias: zero in exact arithmetic
        }
        let c = cosine(a, b);
        assert!(c > 0.99, "{name}: cosine(f32 grad, bf16 grad) = {c}");
    }
}

/// The tiny preset for 200 steps on WikiText-2 from the same seed (same initial weights, masks
/// and dropout), f32 and bf16: the logged losses (10-step windows) stay within a stated band,
/// the last within 1 %, and the held-out MLM accuracy (WikiText-2's validation split) within
/// half a point (BENCHMARKS.md has the same comparison at 2,000 steps).
#[test]
fn bf16_tiny_preset_loss_curve_and_held_out_accuracy_follow_f32() {
    let dir = tempfile::tempdir().unwrap();
    let shards = dir.path().join("wiki");
    prepare_wikitext(&shards);
    let valid = dir.path().join("valid");
    ok(bin()
        .args(["prepare", "--input"])
        .arg(common::shared("data/wikitext-2/wiki.valid.tokens"))
        .arg("--tokenizer")
        .arg(shards.join("tokenizer.json"))
        .args(["--max-seq-len", "64", "--out"])
        .arg(&valid)
        .output()
        .unwrap());
    let run = |precision: &str| {
        let out = dir.path().join(precision);
        ok(bin()
            .args(["pretrain", "--config", "tiny", "--run"])
            .arg(&out)
            .arg("--set")
            .arg(format!("data.shards={}", shards.display()))
            .arg("--set")
            .arg(format!("data.eval_shards={}", valid.display()))
            .args(["--set", "train.eval_every=200"])
            .args(["--set", &format!("train.precision={precision}")])
            .args(["--set", "train.checkpoint_every=1000"])
            .output()
            .unwrap());
        metrics(&out)
    };
    let (a, b) = (run("f32"), run("bf16"));
    assert_eq!(a.len(), 20);
    assert_eq!(b.len(), 20);
    let mut worst = 0f64;
    for (x, y) in a.iter().zip(&b) {
        for (what, u, v) in [
            ("mlm_loss", x.mlm_loss(), y.mlm_loss()),
            (
                "disc_loss",
                x.value("disc_loss").unwrap(),
                y.value("disc_loss").unwrap(),
            ),
        ] {
            let rel = (u - v).abs() / u.abs();
            worst = worst.max(rel);
            assert!(
                rel <= TOLERANCE,
                "step {}: {what} {u} (f32) vs {v} (bf16)",
                x.step
            );
        }
    }
    // Training happened: the generator's loss fell over the run.
    assert!(a[19].mlm_loss() < a[0].mlm_loss() - 0.5 && b[19].mlm_loss() < b[0].mlm_loss() - 0.5);
    let (last_a, last_b) = (a[19].loss, b[19].loss);
    assert!(
        (last_a - last_b).abs() <= 0.01 * last_a,
        "last loss {last_a} (f32) vs {last_b} (bf16)"
    );
    let accuracy =
        |m: &trueneg::train::pretrain::StepMetrics| m.value("eval_mlm_accuracy").unwrap();
    let (acc_a, acc_b) = (accuracy(&a[19]), accuracy(&b[19]));
    assert!(
        (acc_a - acc_b).abs() <= 0.005,
        "held-out MLM accuracy {acc_a} (f32) vs {acc_b} (bf16)"
    );
    eprintln!(
        "bf16 vs f32, 200 steps: worst relative loss difference {worst:.4}; held-out MLM accuracy {acc_a:.4} vs {acc_b:.4}"
    );
}

/// `precision = "auto"` is recorded as what it chose, and the log says the same choice with
/// its reason.
#[test]
fn precision_auto_is_recorded_as_its_choice() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("r");
    let out = common::pretrain_cmd(&run, &["train.precision=auto", "train.steps=2"])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr).to_string();
    ok(out);
    let said = log
        .split("precision auto: ")
        .nth(1)
        .unwrap_or_else(|| panic!("no `precision auto:` line in the log:\n{log}"));
    let chosen = said.split_whitespace().next().unwrap();
    assert!(["bf16", "f32"].contains(&chosen), "{said}");
    let recorded = std::fs::read_to_string(run.join("config.toml")).unwrap();
    assert!(
        recorded.contains(&format!("precision = \"{chosen}\"")),
        "the log chose {chosen}; the config records:\n{recorded}"
    );
}

/// On our CPU kernels `auto` takes bf16 only where its products measure at least 1.2× the
/// f32 rate: not on a CPU without AVX-512 BF16, nor where `vdpbf16ps` is slower than FMA
/// (Intel without AMX: ~0.6×), nor at a gain within noise.
#[test]
fn precision_auto_takes_bf16_only_where_its_products_are_measured_faster() {
    let chosen = |s| Precision::on_this_cpu(s).0;
    assert_eq!(chosen(None), Precision::F32);
    assert_eq!(chosen(Some(0.58)), Precision::F32);
    assert_eq!(chosen(Some(1.1)), Precision::F32);
    assert_eq!(chosen(Some(1.2)), Precision::Bf16);
    assert_eq!(chosen(Some(1.9)), Precision::Bf16);
    let (_, why) = Precision::on_this_cpu(Some(0.58));
    assert!(why.contains("0.58x"), "{why}");
    // This CPU's own measurement is a ratio of two positive rates.
    if let Some(s) = trueneg::kernels::bf16_rate::speedup() {
        assert!(s.is_finite() && s > 0.0, "{s}");
    }
}

/// Largest relative difference allowed between the f32 and bf16 losses of a logged window
/// (measured on this CPU: 0.0044 at worst over the 20 windows).
const TOLERANCE: f64 = 0.02;

#[test]
fn bf16_mlm_decoder_rounds_its_operands_on_every_cpu() {
    let _rng = DEVICE_RNG.lock().unwrap_or_else(|e| e.into_inner());
    // On our CPU kernels the tensors stay f32 and the products round their operands to bf16
    // (`Precision::HostBf16`), with AVX-512 BF16 or without: the logits are f32 sums, near the
    // f32 head's but not equal to them, and not all on the bf16 grid (burn's bf16 tensors would
    // put every logit there).
    let d = Device::flex().autodiff();
    let c = config(Precision::Bf16);
    let head = trueneg::model::heads::MlmHead::new(&c, &d);
    assert_eq!(head.precision, Precision::HostBf16);
    let hidden = Tensor::<2>::random([6, c.hidden_size], burn::tensor::Distribution::Default, &d);
    let words = Tensor::<2>::random(
        [c.vocab_size, c.embedding_size],
        burn::tensor::Distribution::Default,
        &d,
    );
    let mut f32_head = head.clone();
    f32_head.precision = Precision::F32;
    let got = host(head.forward(hidden.clone(), words.clone()));
    let want = host(f32_head.forward(hidden, words));
    let worst = got
        .iter()
        .zip(&want)
        .map(|(g, w)| (g - w).abs() / (1.0 + w.abs()))
        .fold(0f32, f32::max);
    assert!(
        worst > 0.0 && worst < 0.05,
        "worst relative difference {worst}"
    );
    let off_grid = got.iter().filter(|x| x.to_bits() & 0xffff != 0).count();
    assert!(
        off_grid > got.len() / 2,
        "{off_grid} of {} logits off the bf16 grid",
        got.len()
    );
}
