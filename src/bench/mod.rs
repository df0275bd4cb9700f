//! The training step's benchmark, the Rust side of `torch_bench.py` and
//! `torch_electra_bench.py`.
//!
//! - BERT (`torch_bench.py`): masked LM (vocab 30522, hidden 256, 4 layers, 4 heads, FFN 1024,
//!   dropout 0.1), one fixed batch of 16 × 128 random ids in [1000, 30522) with 19 positions
//!   per sequence replaced by `[MASK]`, loss = MLM CE + word-level Soft Regularization (or
//!   another objective, to measure its overhead).
//! - ELECTRA (`torch_electra_bench.py`): the `electra-small` model (discriminator hidden 256,
//!   embedding 128 shared with a generator of a quarter of its width, 12 layers), the same
//!   batch shape with 19 masked positions per sequence of which 85 % become `[MASK]` and 15 %
//!   keep their token, loss = `L_G + 50·L_D` with replacements sampled on the device; `hc`
//!   adds Hard Correction on `L_G`.
//!
//! Both: AdamW (lr 5e-4, wd 0.01 on all parameters, ε 1e-6). One step = the training step
//! `pretrain` runs (`MaskedLmStep::loss_on_device`: forward + loss) + backward + optimizer update +
//! reading the loss.

pub mod efficiency;
pub mod occupancy;
mod stats;

pub use stats::median;

use std::time::Instant;

use burn::prelude::*;
use rand::seq::index::sample;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::kernels::cuda_graph::CudaGraph;
use crate::kernels::op_count::{self, OpCounts};
use crate::model::{EncoderConfig, Precision};
use crate::objective::ObjectiveConfig;
use crate::objective::{Objective, ObjectiveKind, Setup, terms};
use crate::text::SynonymTable;
use crate::text::batches::Batch;
use crate::text::masking::Masked;
use crate::text::masking::MaskingConfig;
use crate::train::config::{ModelKind, ModelSection, ModelShape, StepSettings, TrainSection};
use crate::train::model::PretrainModel;
use crate::train::optimizer::{AdamW, AdamWConfig, Grads, MultiTensor};
use crate::train::steps::masked_lm::{MaskedLmStep, MaskingContext};
use crate::train::upload::upload;

pub const VOCAB: usize = 30522;
pub const BATCH: usize = 16;
pub const SEQ: usize = 128;
pub const MASKED_PER_SEQ: usize = 19;
/// BERT's special ids in its 30522-token vocabulary.
const BENCH_SPECIAL: crate::text::tokenizer::SpecialIds = crate::text::tokenizer::SpecialIds {
    pad: 0,
    unk: 100,
    cls: 101,
    sep: 102,
    mask: 103,
};

/// The sizes `torch_bench.py` takes: `--layers`, `--batch` (and `--amp bf16` ↔ `Bf16`).
#[derive(Clone, Copy, Debug)]
pub struct BenchSpec {
    /// BERT (`torch_bench.py`) or ELECTRA (`torch_electra_bench.py`).
    pub model: ModelKind,
    pub layers: usize,
    pub batch: usize,
    pub precision: Precision,
    /// AdamW implementation (`auto`: multi-tensor on GPUs).
    pub multi_tensor: MultiTensor,
    /// Wait for the device after each phase, so that the phase times of an asynchronous
    /// device (GPU) are its own (costs a sync per phase).
    pub sync_phases: bool,
    /// Record the step once as a CUDA graph after the warm-up and replay it
    /// (`kernels::cuda_graph`; `libtorch-cuda`, one objective).
    pub cuda_graph: bool,
    /// Count the LibTorch operations of the first timed step (`kernels::op_count`).
    pub count_ops: bool,
    /// The second objective's steps run with `kernels::trial::on()` set (`bench --trial`).
    pub trial: bool,
}

/// A synonym table shaped like WordNet's on a BERT vocabulary (about a third of the regular
/// tokens have synonyms, 5 on average), on random ids: the bench has no tokenizer.
fn synthetic_table(rng: &mut ChaCha8Rng) -> SynonymTable {
    let pairs: Vec<(u32, u32)> = (0..25_000)
        .map(|_| {
            (
                rng.random_range(1000..VOCAB as u32),
                rng.random_range(1000..VOCAB as u32),
            )
        })
        .collect();
    SynonymTable::from_pairs(VOCAB, "bench".into(), "synthetic".into(), pairs)
}

pub struct BenchReport {
    pub step_ms: Vec<f64>,
    pub losses: Vec<f64>,
    pub median_ms: f64,
    /// Mean ms of the timed steps in forward + loss, backward (+ reading gradients), optimizer.
    pub phase_ms: [f64; 3],
    /// The LibTorch operations of the first timed step, with `BenchSpec::count_ops`.
    pub ops: Option<OpCounts>,
    /// The device's product rate at the encoder's shapes, timed after each timed step
    /// ([`efficiency::MatmulProbe`]; with several objectives, after each round of their steps).
    pub probe_gflop_per_s: Vec<f64>,
    /// Each timed step's threads on a CPU, waiting for one, idle ([`occupancy`]; empty where
    /// the scheduler's statistics cannot be read).
    pub occupancy: Vec<occupancy::Occupancy>,
}

/// The `[model]` section of the bench's model: BERT (vocab 30522, hidden 256, `spec.layers`
/// layers, 4 heads, FFN 1024, dropout 0.1), or the `electra-small` ELECTRA pair with
/// `spec.layers` layers.
pub fn bench_model(spec: &BenchSpec) -> ModelSection {
    // `EncoderConfig::default()` is ELECTRA-Small's discriminator (hidden 256, 4 heads, FFN
    // 1024, dropout 0.1); torch_bench.py's BERT has the same layers with 256-wide embeddings.
    let mut encoder = EncoderConfig {
        vocab_size: VOCAB,
        num_hidden_layers: spec.layers,
        ..EncoderConfig::default()
    };
    if spec.model == ModelKind::Bert {
        encoder.embedding_size = 256;
    }
    ModelSection {
        kind: spec.model,
        encoder,
        ..ModelSection::default()
    }
}

/// What the bench's step reads: the default masking and discriminator weight, `objective`.
fn bench_step(model: ModelKind, objective: ObjectiveKind) -> StepSettings {
    let defaults = TrainSection::default();
    StepSettings {
        model,
        masking: MaskingConfig::default(),
        objective: ObjectiveConfig {
            kind: objective,
            ..ObjectiveConfig::default()
        },
        disc_weight: defaults.disc_weight,
    }
}

/// The bench's fixed batch: `spec.batch` × [`SEQ`] random ids in [1000, [`VOCAB`]), no
/// padding, [`MASKED_PER_SEQ`] positions per sequence masked: all replaced by `[MASK]` (103)
/// for BERT; for ELECTRA 85 % of them, the others keep their token (`torch_electra_bench.py`).
fn fixed_batch(spec: &BenchSpec, rng: &mut ChaCha8Rng) -> (Batch, Masked) {
    let batch = spec.batch;
    // Drawn as i64, as torch_bench.py's ids are (the same draws as before the bench ran the
    // training step).
    let ids: Vec<u32> = (0..batch * SEQ)
        .map(|_| rng.random_range(1000..VOCAB as i64) as u32)
        .collect();
    let mut input_ids = ids.clone();
    let (mut positions, mut labels) = (Vec::new(), Vec::new());
    for b in 0..batch {
        let mut pos: Vec<usize> = sample(rng, SEQ, MASKED_PER_SEQ).into_vec();
        pos.sort_unstable();
        for p in pos {
            positions.push(b * SEQ + p);
            labels.push(ids[b * SEQ + p]);
            let replace = match spec.model {
                ModelKind::Bert => true,
                ModelKind::Electra => rng.random::<f32>() < 0.85,
            };
            if replace {
                input_ids[b * SEQ + p] = 103;
            }
        }
    }
    let b = Batch {
        batch,
        len: SEQ,
        ids,
        token_types: vec![0; batch * SEQ],
        attention_mask: vec![1; batch * SEQ],
    };
    let m = Masked {
        input_ids,
        positions,
        labels,
        valid: None,
    };
    (b, m)
}

/// The CUDA graph `bench --cuda-graph` records its step in (one objective, no phase timing),
/// made before any work: the steps run on the graph's side stream from the first.
fn bench_graph(
    device: &Device,
    spec: &BenchSpec,
    objectives: usize,
) -> crate::Result<Option<CudaGraph>> {
    if spec.cuda_graph && (objectives != 1 || spec.sync_phases) {
        return Err(crate::Error::Config(
            "bench --cuda-graph times one objective, without --sync-phases".into(),
        ));
    }
    spec.cuda_graph.then(|| CudaGraph::new(device)).transpose()
}

/// Runs `warmup` untimed and `steps` timed steps of each objective on `device` (an autodiff
/// device): the training step `pretrain` runs ([`MaskedLmStep`]), on one fixed batch. With several
/// objectives, each has its own model and optimizer (same initial weights) and their steps are
/// interleaved, in turn forward and backward from one step to the next, so that slow drifts of
/// the machine and the order within a step hit all alike; each draws the same random masks at
/// a step. With `spec.trial`, the one objective runs twice, the second runner's steps with
/// `kernels::trial::on()` set (its report second).
pub fn run_bench(
    device: &Device,
    spec: &BenchSpec,
    warmup: usize,
    steps: usize,
    objectives: &[ObjectiveKind],
    mut on_step: impl FnMut(usize, usize, f64, f64, [f64; 3]),
) -> crate::Result<Vec<BenchReport>> {
    let objectives = &runs_of(spec, objectives)?;
    let graph = bench_graph(device, spec, objectives.len())?;
    let mut rng = ChaCha8Rng::seed_from_u64(1234);
    let (batch, masked) = fixed_batch(spec, &mut rng);
    let table = synthetic_table(&mut rng);
    let mut runners = runners(device, spec, objectives, &table)?;

    // The batch is uploaded once, as a recorded step needs (the same every step).
    let uploaded = upload(&batch, &masked, device);
    let mut recorded: Option<Tensor<1>> = None;
    let mut timings: Vec<Timings> = objectives.iter().map(|_| Timings::default()).collect();
    let probe = efficiency::MatmulProbe::new(device, spec);
    let mut probe_rates = Vec::with_capacity(steps);
    for step in 0..warmup + steps {
        if step == warmup {
            // Peaks of the timed steps only (and the recording), as torch_electra_bench.py's.
            crate::kernels::cuda_graph::memory_peaks(device, true);
        }
        for j in step_order(runners.len(), step) {
            let Runner {
                step: train,
                model,
                opt,
            } = &mut runners[j];
            // Every runner draws the same masks at a step, as the pre-training loop reseeds at
            // each (a recorded step replays the draws it recorded).
            if graph.is_none() {
                crate::model::seed(device, step as u64);
            }
            crate::kernels::trial::set(spec.trial && j == 1);
            let sync = || {
                if spec.sync_phases {
                    device.sync().expect("device sync");
                }
            };
            if graph.is_some() {
                opt.stage(5e-4, device);
            }
            let mark = occupancy::Mark::now();
            let t0 = Instant::now();
            let (mut t_fwd, mut t_bwd) = (t0.elapsed(), t0.elapsed());
            let run = || {
                let up = uploaded.clone();
                let l = train.loss_on_device(model, &batch, &masked, up, device);
                let loss = terms::objectives(std::slice::from_ref(&l)).remove(0);
                sync();
                t_fwd = t0.elapsed();
                let g = loss.backward();
                let grads = Grads::collect(&g, |w| model.walk(w));
                sync();
                t_bwd = t0.elapsed();
                opt.update(5e-4, &grads, |w| model.walk(w));
                loss
            };
            // The first timed step's operations, recorded ones included.
            let counting = spec.count_ops && step == warmup;
            let loss = match (&graph, &recorded) {
                (Some(g), Some(loss)) => {
                    g.replay()?;
                    loss.clone()
                }
                (Some(g), None) if step >= warmup => {
                    let loss = counted(counting, &mut timings[j].ops, || g.record(run))??;
                    recorded = Some(loss.clone());
                    loss
                }
                _ => counted(counting, &mut timings[j].ops, run)?,
            };
            let value = loss.into_scalar::<f32>() as f64;
            let total = t0.elapsed();
            let end = occupancy::Mark::now();
            let ms = total.as_secs_f64() * 1e3;
            let parts = [
                t_fwd.as_secs_f64() * 1e3,
                (t_bwd - t_fwd).as_secs_f64() * 1e3,
                (total - t_bwd).as_secs_f64() * 1e3,
            ];
            crate::kernels::trial::set(false);
            on_step(j, step, value, ms, parts);
            if step >= warmup {
                timings[j].push(ms, value, parts);
                if let (Some(start), Some(end)) = (mark, end) {
                    let threads = rayon::current_num_threads();
                    timings[j].occupancy.push(start.until(end, threads));
                }
            }
        }
        if step >= warmup {
            probe_rates.push(probe.rate());
        }
    }
    Ok(timings
        .into_iter()
        .map(|t| t.report(&probe_rates))
        .collect())
}

/// The objectives the bench's runners step: `objectives`, or with `spec.trial` its one
/// objective twice (as built, then the trial).
fn runs_of(spec: &BenchSpec, objectives: &[ObjectiveKind]) -> crate::Result<Vec<ObjectiveKind>> {
    match (spec.trial, objectives) {
        (false, _) => Ok(objectives.to_vec()),
        (true, &[kind]) => Ok(vec![kind, kind]),
        (true, _) => Err(crate::Error::Config(
            "bench --trial runs one objective twice: give --objective a single kind".into(),
        )),
    }
}

/// The order in which `runners` runners take step `step`: forward on even steps, backward on
/// odd ones, so that none always runs first.
fn step_order(runners: usize, step: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..runners).collect();
    if step % 2 == 1 {
        order.reverse();
    }
    order
}

/// One objective's timed steps, gathered as they run.
#[derive(Default)]
struct Timings {
    step_ms: Vec<f64>,
    losses: Vec<f64>,
    /// The phases' sums over the steps.
    phase_sums: [f64; 3],
    ops: Option<OpCounts>,
    occupancy: Vec<occupancy::Occupancy>,
}

impl Timings {
    fn push(&mut self, ms: f64, loss: f64, phases: [f64; 3]) {
        self.step_ms.push(ms);
        self.losses.push(loss);
        for (sum, p) in self.phase_sums.iter_mut().zip(phases) {
            *sum += p;
        }
    }

    /// The report, with the product rates timed beside the steps.
    fn report(self, probe_gflop_per_s: &[f64]) -> BenchReport {
        let steps = self.step_ms.len().max(1) as f64;
        BenchReport {
            median_ms: median(&self.step_ms),
            phase_ms: self.phase_sums.map(|sum| sum / steps),
            step_ms: self.step_ms,
            losses: self.losses,
            ops: self.ops,
            probe_gflop_per_s: probe_gflop_per_s.to_vec(),
            occupancy: self.occupancy,
        }
    }
}

/// `work`'s result, its LibTorch operations counted into `ops` when `on`.
fn counted<T>(on: bool, ops: &mut Option<OpCounts>, work: impl FnOnce() -> T) -> crate::Result<T> {
    if !on {
        return Ok(work());
    }
    let (out, counts) = op_count::count(work)?;
    *ops = Some(counts);
    Ok(out)
}

/// One objective's masked-LM step, model and optimizer.
struct Runner {
    step: MaskedLmStep,
    model: PretrainModel,
    opt: AdamW,
}

/// Refuses a bench whose models (one per objective) cannot fit in host memory, before any is
/// built (GPU runs are left to the device's own out-of-memory error).
fn check_fits(device: &Device, spec: &BenchSpec, objectives: usize) -> crate::Result<()> {
    if !crate::kernels::on_host(device) {
        return Ok(());
    }
    let per_model: f64 = (bench_model(spec).encoders(VOCAB).iter())
        .map(|e| crate::model::footprint::training_bytes(e, spec.batch, SEQ))
        .sum();
    crate::memory::check(
        per_model * objectives as f64,
        &format!(
            "bench of {objectives} model(s) of {} layers at batch {} × {SEQ} tokens",
            spec.layers, spec.batch
        ),
        "lower --layers or --batch",
    )
}

/// One runner per objective, from the same initial weights.
fn runners(
    device: &Device,
    spec: &BenchSpec,
    objectives: &[ObjectiveKind],
    table: &SynonymTable,
) -> crate::Result<Vec<Runner>> {
    check_fits(device, spec, objectives.len())?;
    let mut runners = Vec::new();
    for &kind in objectives {
        let settings = bench_step(spec.model, kind);
        let objective = Objective::build(
            &settings.objective,
            &mut Setup {
                synonyms: Some(table.clone()),
                ..Default::default()
            },
        )?;
        crate::model::seed(device, 0);
        let opt = AdamW::new(AdamWConfig {
            lr: 5e-4,
            weight_decay: 0.01,
            decay_all: true,
            eps: 1e-6,
            max_grad_norm: 0.0,
            warmup_steps: 0,
            multi_tensor: spec.multi_tensor,
            ..Default::default()
        });
        let section = bench_model(spec);
        let shape = ModelShape {
            model: &section,
            precision: spec.precision,
            vocab: VOCAB,
        };
        let kind = crate::train::steps::kind_of(settings.objective.kind);
        let model = PretrainModel::of(&shape, &settings, kind, device);
        // The batch is masked once by `fixed_batch`: the step's own masking is not used.
        let context = MaskingContext {
            masking: settings.masking.clone(),
            special: BENCH_SPECIAL,
            vocab: VOCAB,
        };
        let step = MaskedLmStep::new(context, objective, settings.disc_weight);
        runners.push(Runner { step, model, opt });
    }
    Ok(runners)
}

/// Median over the timed steps of `report`'s step time divided by `base`'s at the same step:
/// with interleaved steps, a drift of the machine hits both sides of each ratio alike.
pub fn paired_ratio(report: &BenchReport, base: &BenchReport) -> f64 {
    let ratios: Vec<f64> = report
        .step_ms
        .iter()
        .zip(&base.step_ms)
        .map(|(a, b)| a / b)
        .collect();
    median(&ratios)
}

/// Peak resident memory of this process (Linux `VmHWM`), in KiB.
pub fn peak_rss_kb() -> Option<u64> {
    let status = crate::io::read::read_text(
        std::path::Path::new("/proc/self/status"),
        crate::io::limit::SMALL,
    )
    .ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
