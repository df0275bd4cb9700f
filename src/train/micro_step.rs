//! One micro-step as the loop (`train::micro_steps`) and the recorded step
//! (`train::fixed_step`) both see it: where it stands, and what it leaves on the device.

use burn::prelude::*;

use crate::objective::terms::Pending;

/// Which micro-step of which step: its seed, learning rate and place in the step.
pub struct MicroAt {
    pub seed: u64,
    pub lr: f64,
    pub index: usize,
    pub last: bool,
}

/// One micro-step's values (on the device) and, the last micro-step's, the gradient norm
/// before clipping.
#[derive(Clone)]
pub struct MicroOutcome {
    pub values: Pending,
    pub grad_norm: Option<Tensor<1>>,
}
