//! The seeds of the models' random draws.
//!
//! - **The host kernels' per-call seeds** (masks, sampled tokens): a ChaCha8 generator per
//!   thread that [`seed`] resets, each call taking the next word as its own seed. A run's loop
//!   and model code run on one thread, so its draws depend on its seeds alone, not on what other
//!   threads of the process seed or draw meanwhile (runs side by side in one process: a test
//!   suite's, a library caller's threads). Each kernel then splits its own stream, so a draw
//!   does not depend on the thread count either.
//! - **burn's generator** (parameters' first values, drawn at their first use; draws on GPUs):
//!   one per process on every backend, which [`seed`] seeds as well.
//!
//! The pre-training loop reseeds at every step, so a resumed run draws the same values.

use std::cell::RefCell;

use burn::prelude::*;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

thread_local! {
    static CALL_SEEDS: RefCell<Option<ChaCha8Rng>> = const { RefCell::new(None) };
}

/// Seeds every random draw of the models: burn's device RNG and this thread's per-call seeds.
pub fn seed(device: &Device, seed: u64) {
    device.seed(seed);
    CALL_SEEDS.with(|g| *g.borrow_mut() = Some(ChaCha8Rng::seed_from_u64(seed)));
}

/// The seed of the next random draw (each call advances this thread's generator).
pub(crate) fn next_call() -> u64 {
    CALL_SEEDS.with(|g| {
        g.borrow_mut()
            .get_or_insert_with(|| ChaCha8Rng::seed_from_u64(0))
            .next_u64()
    })
}
