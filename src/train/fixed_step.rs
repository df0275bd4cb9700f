//! The fixed-shape training step (`train.static_shapes`), and the same step recorded once as a
//! CUDA graph and replayed (`train.cuda_graph`): a wrapper around the micro-steps of any step
//! that has a fixed-shape form (`TrainingStep::fixed`; the masked-LM step's is described here).
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

use super::micro_step::{MicroAt, MicroOutcome};
use super::replicas::Replicas;
use super::upload::Uploaded;
use crate::kernels::cuda_graph::{self, CudaGraph};
use crate::objective::terms::Pending;
use crate::{Error, Result};

/// Steps run as they are before the step is recorded: LibTorch's lazy set-up, cuBLAS
/// workspaces, the optimizer's flat buffers and Hard Correction's table exist by then.
pub const WARMUP: usize = 3;

/// Where a fixed-shape step keeps its inputs: every micro-batch is copied into the first one's
/// device tensors (LibTorch devices), so a recorded step reads the new values.
pub struct Pinned {
    /// Slots per sequence.
    pub slots: usize,
    /// Whether inputs are rewritten in place (LibTorch devices).
    in_place: bool,
    /// The first micro-batch's inputs.
    inputs: Option<Uploaded>,
}

impl Pinned {
    /// The inputs the step runs on: the first micro-batch's tensors with `new` copied into
    /// them (LibTorch devices), else `new`.
    pub fn inputs_for(&mut self, new: Uploaded) -> Uploaded {
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
}

/// The fixed-shape step of a run (see the module documentation).
pub struct FixedStep {
    pub pinned: Pinned,
    graph: Option<CudaGraph>,
    /// The recorded micro-step's outputs, rewritten by each replay.
    recorded: Option<MicroOutcome>,
    /// Micro-steps this process has run.
    done: usize,
}

/// What a run asks of its fixed-shape step, from its config: fixed shapes
/// (`train.static_shapes`), recording (`train.cuda_graph` as resolved), whether recording was asked
/// for explicitly (`train.cuda_graph` set), and the masking's slots per sequence.
pub struct FixedPlan {
    pub static_shapes: bool,
    pub records: bool,
    pub asked: bool,
    pub slots: usize,
}

impl FixedStep {
    /// The run's fixed-shape step (`None` when `plan` asks for none).
    pub fn new(plan: &FixedPlan, replicas: &Replicas) -> Result<Option<Self>> {
        // Unset, `train.cuda_graph` records in a world of one process only.
        let records = plan.records && (plan.asked || replicas.group.is_none());
        if !(plan.static_shapes || records) {
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
            pinned: Pinned {
                slots: plan.slots,
                in_place: cuda_graph::in_place(device),
                inputs: None,
            },
            graph: records.then(|| CudaGraph::new(device)).transpose()?,
            recorded: None,
            done: 0,
        }))
    }

    /// Forgets the recorded step, whose graph reads device tensors the training step has
    /// replaced (a refreshed synonym table): the next steps run as they are for [`WARMUP`]
    /// steps, building the new tensors outside any recording, and the step is recorded anew.
    pub fn record_anew(&mut self, replicas: &Replicas) -> Result<()> {
        if self.graph.is_none() {
            return Ok(());
        }
        self.recorded = None;
        self.graph = None;
        self.graph = Some(CudaGraph::new(&replicas.devices[0])?);
        self.done = 0;
        Ok(())
    }

    /// Runs micro-step `at`'s `work` (forward, backward and, at the last micro-step, the
    /// update): its draws seeded and, at the first micro-step, the parameters staged for the
    /// learning rate outside the recorded work; then as it is, recorded, or replayed. The
    /// outcome's counters are copied out of the step's memory (which a replay rewrites).
    pub fn run(
        &mut self,
        at: &MicroAt,
        replicas: &mut Replicas,
        work: impl FnOnce(&mut Replicas) -> Result<MicroOutcome>,
    ) -> Result<MicroOutcome> {
        let lr = at.lr;
        replicas.seed(at.seed);
        if self.pinned.in_place && at.index == 0 {
            let device = replicas.devices[0].clone();
            replicas.opt.stage(lr, &device);
        }
        let outcome = match (&self.graph, &self.recorded) {
            (Some(g), Some(recorded)) => {
                g.replay()?;
                recorded.clone()
            }
            (Some(g), None) if self.done >= WARMUP => {
                let recorded = g.record(|| work(replicas))??;
                self.recorded = Some(recorded.clone());
                recorded
            }
            _ => work(replicas)?,
        };
        self.done += 1;
        Ok(MicroOutcome {
            values: copied_counters(outcome.values),
            grad_norm: outcome.grad_norm,
        })
    }
}

/// `values` with its counters copied into new tensors.
fn copied_counters(mut values: Pending) -> Pending {
    values.counters = std::mem::take(&mut values.counters)
        .into_iter()
        .map(|(k, t)| (k, t.add_scalar(0)))
        .collect();
    values
}
