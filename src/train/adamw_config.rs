//! The `[optimizer]` section: AdamW's settings, the gradient clip and the learning-rate
//! schedule (`train::optimizer` runs them).

use serde::{Deserialize, Serialize};

use super::schedule::LrSchedule;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdamWConfig {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
    /// Apply weight decay to LayerNorm weights and biases too (torch's default param group).
    pub decay_all: bool,
    /// Global gradient-norm clip; 0 disables.
    pub max_grad_norm: f64,
    /// Adam's bias correction (divide m by 1 − β1^t and v by 1 − β2^t). torch's `AdamW` and
    /// transformers apply it; ELECTRA's `AdamWeightDecayOptimizer` (pre-training and
    /// fine-tuning) does not.
    pub bias_correction: bool,
    pub warmup_steps: u64,
    /// The learning-rate schedule over the run's steps.
    pub schedule: LrSchedule,
    /// `auto` (multi-tensor on GPU devices, per tensor on CPU devices), `on` or `off`.
    pub multi_tensor: MultiTensor,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MultiTensor {
    #[default]
    Auto,
    On,
    Off,
}

impl AdamWConfig {
    /// The learning rate after `step` completed updates of `total` under the schedule.
    pub fn lr_at(&self, step: u64, total: u64) -> f64 {
        self.schedule.lr(self.lr, step, self.warmup_steps, total)
    }
}

impl Default for AdamWConfig {
    fn default() -> Self {
        Self {
            lr: 5e-4,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-6,
            weight_decay: 0.01,
            decay_all: false,
            max_grad_norm: 1.0,
            bias_correction: true,
            warmup_steps: 10_000,
            schedule: LrSchedule::Electra,
            multi_tensor: MultiTensor::Auto,
        }
    }
}
