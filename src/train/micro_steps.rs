//! The one micro-step loop: a training step's micro-batches, each read and masked on the host,
//! split among the replicas, forward and backward, gradients summed; after the last one the
//! optimizer's update. A fixed-shape step (`train::fixed_step`) runs the same loop, each
//! micro-step's work handed to it to run as it is, record or replay.

use burn::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::fixed_step::FixedStep;
use super::micro_step::{MicroAt, MicroOutcome};
use super::optimizer::Grads;
use super::replicas::Replicas;
use super::steps::{MicroBatch, TrainingStep};
use crate::objective::terms::{self, Pending, WindowCounts};
use crate::text::batches::BatchStream;
use crate::{Error, Result};

/// What the loop takes from the config: the seed of the random draws, the micro-steps per step
/// and the clipping norm.
#[derive(Clone, Copy, Debug)]
pub struct LoopSettings {
    pub seed: u64,
    pub grad_accum: usize,
    pub max_grad_norm: f64,
}

/// A step's outcome: its micro-steps' values and the gradient norm (on the device), its
/// masked positions and its tokens.
pub struct StepOutcome {
    pub micro: Vec<Pending>,
    pub grad_norm: Option<Tensor<1>>,
    pub masked: usize,
    pub tokens: usize,
}

/// The seed of micro-step `micro` of step `step`: its masking, and its replicas' dropout and
/// sampling (`Replicas::forward`).
pub fn micro_seed(seed: u64, step: u64, micro: usize) -> u64 {
    seed.wrapping_mul(1_000_003) ^ (step << 8) ^ micro as u64
}

/// The loop's state across one step's micro-steps.
struct Accumulated {
    grads: Option<Grads>,
}

impl Accumulated {
    /// The replicas' losses of one micro-step → their objectives → backward → gradients
    /// summed; at the last micro-step the update at its learning rate.
    fn add(
        &mut self,
        losses: Vec<crate::objective::StepLoss>,
        replicas: &mut Replicas,
        at: &MicroAt,
        settings: &LoopSettings,
    ) -> Result<MicroOutcome> {
        let objectives = replicas.objectives(&losses)?;
        let g = replicas.backward(&objectives)?;
        let values = terms::pending(&losses, &objectives);
        match &mut self.grads {
            Some(a) => a.accumulate(g),
            None => self.grads = Some(g),
        }
        let grad_norm = if at.last {
            let g = self.grads.take().expect("this micro-step's gradients");
            let (accum, clip) = (settings.grad_accum, settings.max_grad_norm);
            replicas.update(g, accum, clip, at.lr)
        } else {
            None
        };
        Ok(MicroOutcome { values, grad_norm })
    }
}

/// Step `step` at learning rate `lr` of `train`: its micro-batches read from `stream`, their
/// window counters joining `counts`; through `fixed` where the run has a fixed-shape step.
pub struct StepRun<'a, 's> {
    pub step: u64,
    pub lr: f64,
    pub settings: &'a LoopSettings,
    pub stream: &'a mut BatchStream<'s>,
    pub counts: &'a mut WindowCounts,
    pub fixed: Option<&'a mut FixedStep>,
}

/// Runs one training step (see [`StepRun`]) of `train` on `replicas`.
pub fn train_step<S: TrainingStep>(
    train: &S,
    run: StepRun,
    replicas: &mut Replicas,
) -> Result<StepOutcome> {
    let StepRun {
        step,
        lr,
        settings,
        stream,
        counts,
        mut fixed,
    } = run;
    let mut acc = Accumulated { grads: None };
    let mut out = StepOutcome {
        micro: Vec::new(),
        grad_norm: None,
        masked: 0,
        tokens: 0,
    };
    let accum = settings.grad_accum;
    for index in 0..accum {
        let seed = micro_seed(settings.seed, step, index);
        let at = MicroAt {
            seed,
            lr,
            index,
            last: index + 1 == accum,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        // The whole micro-batch is masked as one; each replica takes its rows.
        let indices = stream.next_indices();
        let batch = train.batch(stream.shards(), &indices, &mut rng)?;
        out.masked += batch.masked();
        out.tokens += batch.tokens();
        let rows = batch.rows();
        let mut outcome = match fixed.as_deref_mut() {
            None => {
                let losses = replicas.forward(seed, rows, |model, device, share| {
                    train.loss(model, &batch.take_rows(share), device)
                });
                acc.add(losses, replicas, &at, settings)?
            }
            Some(f) => {
                let device = replicas.devices[0].clone();
                let own = batch.take_rows(replicas.rows(rows));
                let own = train.fixed(own, &mut f.pinned, &device).ok_or_else(|| {
                    Error::Config(format!(
                        "{} has no fixed-shape form (train.static_shapes, train.cuda_graph)",
                        train.kind().name()
                    ))
                })?;
                f.run(&at, replicas, |replicas| {
                    let losses = replicas
                        .forward_seeded(rows, |model, device, _| train.loss(model, &own, device));
                    acc.add(losses, replicas, &at, settings)
                })?
            }
        };
        counts.add(std::mem::take(&mut outcome.values.counters));
        out.micro.push(outcome.values);
        out.grad_norm = outcome.grad_norm;
    }
    Ok(out)
}
