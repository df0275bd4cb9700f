//! The fixed-shape training step (`train.static_shapes`), and the same step recorded once as a
//! CUDA graph and replayed (`train.cuda_graph`).
//!
//! A recorded step replays the same kernels on the same memory, so everything that changes
//! from step to step must be a value in a buffer the graph reads, never a shape, a host number
//! or a new allocation:
//! - **the masking** has `min(masking.max_predictions, data.max_seq_len)` slots in every
//!   sequence (`Masked::padded`, ELECTRA's `max_predictions_per_seq`): the masked positions,
//!   then padding slots of weight 0 that change no token (the step puts the label in the
//!   argmax and the sample there), so the loss, its gradient and every logged value are those
//!   of the unpadded masking;
//! - **every count** (masked positions, real tokens, the accuracies' totals) is counted on the
//!   device from the slots' validity and the attention mask, which is always uploaded;
//! - **the batch** is copied into the first step's input tensors, and on LibTorch devices the
//!   parameters and AdamW's moments are rewritten in place (`AdamW::stage`, which also puts
//!   the learning rate and bias corrections in a device tensor);
//! - **the random draws** (dropout, the generator's sampling) are seeded before the step, as
//!   every step is (`Replicas::seed`), outside the recorded work.
//!
//! Without a graph the fixed-shape step trains like the usual one: the same positions with the
//! same weights, so the same curve to f32 rounding where no random draw depends on the number
//! of slots (dropout off; ELECTRA's sampling draws one value per slot, so with padding slots
//! its draws differ). With `train.cuda_graph` (a `libtorch-cuda` device, one process) the
//! first [`WARMUP`] steps run as they are, the next one is recorded (`kernels::cuda_graph`),
//! and every later step copies its batch in, seeds, and replays. A recorded step's outputs
//! (the logged values, the gradient norm) live in the graph's memory: the loop reads them
//! before the next replay, and the window's counters are copied out each step.

use burn::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::replicas::Replicas;
use super::step::{StepInputs, Uploaded, micro_seed, step_loss_uploaded, upload};
use crate::kernels::cuda_graph::{self, CudaGraph};
use crate::objective::terms::{self, Pending, WindowCounts};
use crate::text::batches::BatchStream;
use crate::text::masking::mask_batch;
use crate::{Error, Result};

/// Steps run as they are before the step is recorded: LibTorch's lazy set-up, cuBLAS
/// workspaces, the optimizer's flat buffers and Hard Correction's table exist by then.
pub const WARMUP: usize = 3;

/// A micro-step's outputs: its logged values and (the last micro-step's) the gradient norm,
/// on the device.
type Outputs = (Pending, Option<Tensor<1>>);

/// The fixed-shape step of a run (see the module documentation).
pub struct FixedStep {
    /// Slots per sequence.
    slots: usize,
    /// The first step's inputs, into which later batches are copied (LibTorch devices).
    inputs: Option<Uploaded>,
    /// Whether parameters, moments and inputs are rewritten in place (LibTorch devices).
    in_place: bool,
    graph: Option<CudaGraph>,
    /// The recorded step's outputs, rewritten by each replay.
    recorded: Option<Outputs>,
    /// Steps this process has run.
    done: usize,
}

/// Whether a run records its step as a CUDA graph (`train.cuda_graph`): as set, or, unset,
/// wherever this build can record ([`cuda_graph::available`]) and the recorded step can run
/// (see [`records_where`]).
pub fn records(cfg: &super::config::PretrainConfig) -> bool {
    records_where(cfg, cuda_graph::available())
}

/// [`records`] for a build that can record CUDA graphs or not (`graphs`): unset, where the
/// recorded step can train the config (`PretrainConfig::recordable`: one `libtorch-cuda`
/// device, the masked-LM step with every count on the device, no gradient accumulation; and,
/// [`FixedStep::new`], a world of one process).
pub fn records_where(cfg: &super::config::PretrainConfig, graphs: bool) -> bool {
    cfg.train
        .cuda_graph
        .unwrap_or_else(|| graphs && cfg.recordable())
}

impl FixedStep {
    /// The run's fixed-shape step (`None` when the config asks for none).
    pub fn new(cfg: &super::config::PretrainConfig, replicas: &Replicas) -> Result<Option<Self>> {
        let t = &cfg.train;
        // Unset, `train.cuda_graph` records in a world of one process only.
        let records = records(cfg) && (t.cuda_graph.is_some() || replicas.group.is_none());
        if !(t.static_shapes || records) {
            return Ok(None);
        }
        if records && replicas.group.is_some() {
            return Err(Error::Config(
                "field `train.cuda_graph`: a recorded step runs in a world of one process for now; a job of several processes trains with train.cuda_graph = false (train.static_shapes = true keeps the fixed shapes)".into(),
            ));
        }
        if records {
            tracing::info!(
                "the training step is recorded as a CUDA graph after {WARMUP} steps and replayed (train.cuda_graph = false turns this off)"
            );
        }
        let device = &replicas.devices[0];
        Ok(Some(Self {
            slots: cfg.masking.max_predictions.min(cfg.data.max_seq_len),
            inputs: None,
            in_place: cuda_graph::in_place(device),
            graph: records.then(|| CudaGraph::new(device)).transpose()?,
            recorded: None,
            done: 0,
        }))
    }

    /// One training step at learning rate `lr`: the step's micro-batches read from `stream`,
    /// masked and padded, copied into the step's inputs; forward, backward and the update
    /// (recorded or replayed where the run records). Returns the micro-steps' logged values
    /// and the gradient norm (on the device), the masked positions and the tokens.
    pub fn step(
        &mut self,
        inp: &StepInputs,
        step: u64,
        lr: f64,
        stream: &mut BatchStream,
        replicas: &mut Replicas,
        counts: &mut WindowCounts,
    ) -> Result<(Vec<Pending>, Option<Tensor<1>>, usize, usize)> {
        let cfg = inp.cfg;
        let device = replicas.devices[0].clone();
        let (mut masked, mut tokens) = (0, 0);
        let (mut micro, mut grads) = (Vec::new(), None::<super::optimizer::Grads>);
        let accum = cfg.train.grad_accum;
        let mut norm = None;
        for k in 0..accum {
            let seed = micro_seed(cfg, step, k);
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let batch = stream.next_batch()?;
            let m = mask_batch(&batch, &cfg.masking, &inp.special, inp.vocab, &mut rng);
            masked += m.positions.len();
            tokens += batch.batch * batch.len;
            let total = batch.batch;
            let rows = replicas.rows(total);
            let batch = batch.rows(rows.clone());
            let m = m.rows(batch.len, rows).padded(&batch, self.slots);
            let up = self.inputs_for(upload(&batch, &m, &device));
            replicas.seed(seed);
            if self.in_place && k == 0 {
                replicas.opt.stage(lr, &device);
            }
            let last = k + 1 == accum;
            let mut run = |replicas: &mut Replicas| -> Result<Outputs> {
                let losses = replicas.forward_seeded(total, |model, device, _| {
                    step_loss_uploaded(model, cfg, inp.objective, &batch, &m, up.clone(), device)
                });
                let objectives = replicas.objectives(&losses)?;
                let g = replicas.backward(&objectives)?;
                let values = terms::pending(&losses, &objectives);
                match &mut grads {
                    Some(a) => a.accumulate(g),
                    None => grads = Some(g),
                }
                if !last {
                    return Ok((values, None));
                }
                let g = grads.take().expect("this micro-step's gradients");
                let o = &cfg.optimizer;
                Ok((values, replicas.update(g, accum, o.max_grad_norm, lr)))
            };
            let (values, n) = match (&self.graph, &self.recorded) {
                (Some(g), Some(outputs)) => {
                    g.replay()?;
                    outputs.clone()
                }
                (Some(g), None) if self.done >= WARMUP => {
                    let outputs = g.record(|| run(replicas))??;
                    self.recorded = Some(outputs.clone());
                    outputs
                }
                _ => run(replicas)?,
            };
            norm = n;
            micro.push(self.counted(values, counts));
        }
        self.done += 1;
        Ok((micro, norm, masked, tokens))
    }

    /// The inputs the step runs on: the first step's tensors with `new` copied into them
    /// (LibTorch devices), else `new`.
    fn inputs_for(&mut self, new: Uploaded) -> Uploaded {
        if !self.in_place {
            return new;
        }
        match &self.inputs {
            Some(fixed) => {
                fixed.copy_from(&new);
                fixed.clone()
            }
            None => {
                self.inputs = Some(new.clone());
                new
            }
        }
    }

    /// Adds a micro-step's counters to the window's, copied out of the step's memory (which a
    /// replay rewrites), and returns its other values.
    fn counted(&self, mut values: Pending, counts: &mut WindowCounts) -> Pending {
        let own = std::mem::take(&mut values.counters)
            .into_iter()
            .map(|(k, t)| (k, t.add_scalar(0)))
            .collect();
        counts.add(own);
        values
    }
}
