//! trueneg: pre-train BERT / ELECTRA encoders on true negatives, fine-tune and evaluate them.
//!
//! The data path reads top to bottom in the module names: [`text`] (corpus → shards → masked
//! batches), [`model`], [`objective`] (losses), [`train`] (loop, optimizer, checkpoints) and
//! [`interop`] (transformers' file layout).

/// The version, the commit it was built from and the compiled features: what `--version`
/// prints and every run folder and export records.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("TRUENEG_COMMIT"),
    "; features ",
    env!("TRUENEG_FEATURES"),
    ")"
);

pub mod attack;
pub mod bench;
pub mod device;
pub mod dist;
pub mod error;
pub mod eval;
pub mod experiments;
pub mod finetune;
pub mod frame;
pub mod interop;
pub mod io;
pub mod kernels;
pub mod lexicon;
pub mod memory;
pub mod model;
pub mod objective;
pub mod plot;
pub mod stop;
pub mod tasks;
pub mod tensorboard;
pub mod text;
pub mod train;

pub use error::{Error, Result};
