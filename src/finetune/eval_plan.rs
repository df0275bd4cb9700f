//! When fine-tuning scores the dev sets while it trains, which model it keeps, and when it
//! stops early: transformers' Trainer's `eval_strategy`, `load_best_model_at_end` and
//! `EarlyStoppingCallback`, with ELECTRA's reading as the default (the last model is kept and
//! reported, so reported numbers keep their meaning).

use serde::{Deserialize, Serialize};

/// When the dev sets are scored during training.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EvalEvery {
    /// At the end of each epoch.
    #[default]
    Epoch,
    /// Every this many updates (and after the last).
    Steps(u64),
    /// Once, after training (the final scores only).
    End,
}

impl EvalEvery {
    pub const NAMES: &'static str = "epoch, end or a number of steps";

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "epoch" => Some(Self::Epoch),
            "end" => Some(Self::End),
            n => n.parse::<u64>().ok().filter(|&n| n > 0).map(Self::Steps),
        }
    }

    /// Whether the dev sets are scored after update `step` (counted from 1) of `total`, which
    /// ends an epoch when `epoch_end`.
    pub fn due(self, step: u64, total: u64, epoch_end: bool) -> bool {
        match self {
            Self::Epoch => epoch_end,
            Self::Steps(n) => step.is_multiple_of(n) || step == total,
            Self::End => false,
        }
    }
}

/// Which model a seed keeps (saves, exports and reports).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Keep {
    /// The model after the last update (ELECTRA's, and the papers' numbers).
    #[default]
    Last,
    /// The model with the best dev task score among the evaluations during training.
    Best,
}

impl Keep {
    pub const NAMES: &'static str = "last or best";

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "last" => Some(Self::Last),
            "best" => Some(Self::Best),
            _ => None,
        }
    }
}
