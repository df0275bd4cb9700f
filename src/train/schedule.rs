//! Pre-training's learning-rate schedules: ELECTRA's and BERT's (the default) and transformers'.

use serde::{Deserialize, Serialize};

/// The learning-rate schedule of pre-training over T steps with W warmup steps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LrSchedule {
    /// ELECTRA's and BERT's optimizer (google-research/electra `model/optimization.py`): a
    /// linear decay to 0 over all T steps, multiplied by the warmup ramp,
    /// `lr · (1 − t/T) · min(1, t/W)`.
    #[default]
    Electra,
    /// transformers' `get_linear_schedule_with_warmup`: `lr · t/W` up to W, then
    /// `lr · (T − t)/(T − W)` (the decay starts from the peak after warmup: 1 % more at 1M
    /// steps with W = 10k, 5 % on a 200k-step run).
    Linear,
}

impl LrSchedule {
    /// The learning rate after `step` completed updates of `total`, `warmup` of them warmup.
    pub fn lr(self, base: f64, step: u64, warmup: u64, total: u64) -> f64 {
        match self {
            Self::Electra => product_lr(base, step, warmup as f64, total),
            Self::Linear => scheduled_lr(base, step, warmup, total),
        }
    }
}

/// ELECTRA's schedule: `base · min(1, t/W) · (1 − t/T)`, with t/0 taken as 1.
pub fn product_lr(base: f64, step: u64, warmup: f64, total: u64) -> f64 {
    let t = step as f64;
    let warm = if warmup > 0.0 {
        (t / warmup).min(1.0)
    } else {
        1.0
    };
    base * warm * (1.0 - t / total.max(1) as f64).max(0.0)
}

/// Learning rate after `step` completed updates of `total`: linear warmup from 0, then linear
/// decay to 0 at `total` (transformers' `get_linear_schedule_with_warmup`).
pub fn scheduled_lr(base: f64, step: u64, warmup: u64, total: u64) -> f64 {
    if step < warmup {
        return base * step as f64 / warmup.max(1) as f64;
    }
    let left = total.saturating_sub(step) as f64;
    base * (left / (total.saturating_sub(warmup)).max(1) as f64).max(0.0)
}
