//! Training: configuration, optimizer and schedule, the pre-training loop, checkpoints.

pub mod adamw_config;
pub mod checkpoint;
pub mod config;
pub mod config_rules;
pub mod default_data;
pub mod events;
pub mod export;
pub mod fixed_step;
pub mod grads;
pub mod heldout;
pub mod memory;
pub mod metrics;
pub mod micro_step;
pub mod micro_steps;
pub mod model;
pub mod model_card;
pub mod optimizer;
#[cfg(feature = "tch")]
pub mod overlap;
pub mod phases;
pub mod pretrain;
pub mod replicas;
pub mod run;
pub mod run_log;
pub mod schedule;
pub mod start;
pub mod stats;
pub mod step_kind;
pub mod step_loop;
pub mod steps;
pub mod upload;

pub use pretrain::{RunOptions, pretrain, pretrain_in};
